"""The band index behind the pipeline: :func:`open_index` picks a backend by URL.

``sqlite:///path/to/index.db`` (the embedded default, persistent) or ``redis://`` / ``rediss://``
(shared between crawler processes; ``redis+cluster://`` / ``rediss+cluster://`` on a Redis Cluster).
Both implement :class:`~scrapy_simhash.index.base.Index`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from scrapy_simhash.index.base import Candidate, Index, Record
from scrapy_simhash.index.retention import Retention
from scrapy_simhash.layout import Layout, make_layout

__all__ = ["DEFAULT_KEY_PREFIX", "Candidate", "Index", "Record", "open_index"]

#: ``{spider}`` becomes ``{<spider name>}``: the braces stay, as a Redis Cluster hash tag.
DEFAULT_KEY_PREFIX = "simhash:{spider}"


def open_index(
    url: str,
    *,
    layout: Layout | None = None,
    retention: Mapping[str, float | None] | None = None,
    spider: str = "default",
    key_prefix: str = DEFAULT_KEY_PREFIX,
    clock: Callable[[], float] = time.time,
) -> Index:
    """Open (creating if needed) the index at ``url``.

    ``layout`` defaults to ``make_layout(3)`` (4 pigeonhole blocks); an existing index refuses to open
    with a different layout, since its buckets would silently stop matching. ``retention`` maps class
    names to TTL seconds (None: keep). ``{spider}`` in a SQLite path becomes the spider name; in
    ``key_prefix`` it becomes the hash tag ``{<spider name>}``. ``clock`` exists for tests.
    """
    layout = make_layout(3) if layout is None else layout
    policy = Retention(retention, clock)
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from scrapy_simhash.index.sqlite import SQLiteIndex

        # As SQLAlchemy spells them: sqlite:///relative.db, sqlite:////absolute.db, sqlite:// in memory.
        path = url[len("sqlite://") :].removeprefix("/")
        return SQLiteIndex(path.replace("{spider}", spider) or ":memory:", layout, policy)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
        from scrapy_simhash.index.redis import RedisIndex

        return RedisIndex(url, layout, policy, key_prefix.replace("{spider}", "{" + spider + "}"))
    raise ValueError(
        "SIMHASH_INDEX_URL must start with sqlite://, redis://, rediss://, unix://, redis+cluster:// or "
        f"rediss+cluster://, got {url!r}"
    )
