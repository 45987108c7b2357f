"""The index behind the pipeline: :func:`open_index` picks a backend by the URL's scheme.

``sqlite:///path/to/index.db`` (embedded, persistent) or ``redis://`` / ``rediss://`` / ``unix://``
(shared by crawler processes; ``redis+cluster://`` / ``rediss+cluster://`` on a Redis Cluster).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from scrapy.utils.misc import load_object

from scrapy_simhash.index.base import (
    FIRST_READ,
    Candidate,
    Details,
    Erased,
    Exact,
    GroupGone,
    Index,
    IndexCorrupt,
    IndexNotFound,
    IndexOpenError,
    Joined,
    Lookup,
    Record,
    StoredRecord,
)
from scrapy_simhash.index.retention import Retention
from scrapy_simhash.minhash import Layout
from scrapy_simhash.redis_url import REDIS_SCHEMES, is_redis, mask_url

__all__ = [
    "BACKENDS",
    "FIRST_READ",
    "Candidate",
    "Details",
    "Erased",
    "Exact",
    "GroupGone",
    "Index",
    "IndexCorrupt",
    "IndexNotFound",
    "IndexOpenError",
    "Joined",
    "Lookup",
    "Record",
    "StoredRecord",
    "open_index",
]

#: URL scheme -> backend class (an import path, so a backend's dependencies load only when used).
BACKENDS = {
    "sqlite": "scrapy_simhash.index.sqlite.SQLiteIndex",
    **dict.fromkeys(REDIS_SCHEMES, "scrapy_simhash.index.redis.RedisIndex"),
}


def open_index(
    url: str,
    *,
    layout: Layout,
    retention: Mapping[str, float | None] | None = None,
    key_prefix: str = "simhash:{default}",
    max_hashes: int = 1_000_000,
    create: bool = True,
    session: bytes | None = None,
    lease: float = 30.0,
    clock: Callable[[], float] = time.time,
    allow_eviction: bool = False,
) -> Index:
    """The index at ``url``, not yet connected (``await index.open()`` connects and checks it).

    ``key_prefix`` names a Redis index's keys; ``max_hashes`` bounds the verification data read
    back (no text has more shingles than characters); ``create=False`` is for commands that only
    read: ``open()`` then raises ``IndexNotFound`` instead of creating an index. ``session`` tells
    this crawl's pending records from others' (random by default), ``lease`` how long they count as a
    live crawl's without a :meth:`~Index.keep_alive`; ``clock`` is for tests. ``allow_eviction``: a
    Redis that evicts keys when full is run on, with a warning, rather than refused.
    """
    scheme = urlsplit(url).scheme
    if scheme not in BACKENDS:
        raise ValueError(
            f"SIMHASH_INDEX_URL must start with one of {', '.join(f'{s}://' for s in BACKENDS)}, got {mask_url(url)!r}"
        )
    backend = load_object(BACKENDS[scheme])
    redis_only = {"allow_eviction": allow_eviction} if is_redis(url) else {}
    return backend(
        url,
        layout=layout,
        retention=Retention(retention, clock),
        key_prefix=key_prefix,
        max_hashes=max_hashes,
        create=create,
        session=session if session is not None else os.urandom(4),
        lease=lease,
        **redis_only,
    )
