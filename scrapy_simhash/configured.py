"""What a crawl's settings build: the index layout, the index itself, and where its logs are.

The pipeline and every command get them here, so one setting means the same thing everywhere
(a command that opened the index without the crawl's retention or hash bound would read it
differently from the crawl that wrote it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy_simhash.calibration import layout_for
from scrapy_simhash.index import open_index
from scrapy_simhash.settings import stream_key

if TYPE_CHECKING:
    from scrapy_simhash.index import Index
    from scrapy_simhash.minhash import Layout
    from scrapy_simhash.settings import SimhashSettings

__all__ = ["ConfiguredLog", "configured_index", "configured_layout", "configured_logs"]


def configured_layout(config: SimhashSettings) -> Layout:
    """The layout ``SIMHASH_LAYOUT`` names, else the calibrated one for the threshold and target recall."""
    return layout_for(config.jaccard_threshold, config.target_recall, config.layout)


def configured_index(config: SimhashSettings, *, create: bool = True) -> Index:
    """The index ``SIMHASH_INDEX_URL`` names, not yet connected; ``create=False`` for commands that
    only read or erase (``open()`` then raises ``IndexNotFound`` rather than creating one)."""
    return open_index(
        config.index_url,
        layout=configured_layout(config),
        retention=config.retention,
        key_prefix=config.key_prefix,
        max_hashes=config.max_chars,
        lease=config.session_lease,
        allow_eviction=config.allow_eviction,
        create=create,
    )


@dataclass(frozen=True)
class ConfiguredLog:
    """A log the settings turn on: ``name`` as in its setting (``SIMHASH_MERGE_LOG``), ``kind`` as
    its default Redis Stream is suffixed (``merges``, ``review``)."""

    name: str
    kind: str
    uri: str
    default_stream: str


def configured_logs(config: SimhashSettings) -> list[ConfiguredLog]:
    """The merge log, then the review log, each only when its setting names one."""
    logs = (("merge", "merges", config.merge_log), ("review", "review", config.review_log))
    return [ConfiguredLog(name, kind, uri, stream_key(config, kind)) for name, kind, uri in logs if uri]
