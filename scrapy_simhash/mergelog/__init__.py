"""The merge log: one audit record per logged decision, merged or rejected, as JSON lines or a Redis Stream.

A record names the canonical, the record matched and the duplicate, with the scores and the rule that
decided (``record.FIELDS``), so a duplicate is never lost and a new threshold can be replayed later.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from scrapy_simhash.mergelog.base import LogRewrite, LogStore, MergeLog, MergeLogError
from scrapy_simhash.mergelog.jsonlines import FileStore
from scrapy_simhash.mergelog.record import (
    DECISIONS,
    FIELDS,
    FURNITURE_FIELD,
    TEXT_FIELD,
    WHOLE_FIELD,
    Erasure,
    Rule,
    fingerprint_hex,
    furniture_runs,
    is_jaccard,
    is_number,
    merge_record,
    raw_text,
    review_record,
)
from scrapy_simhash.mergelog.stream import StreamStore
from scrapy_simhash.redis_url import REDIS_SCHEMES

__all__ = [
    "DECISIONS",
    "FIELDS",
    "FURNITURE_FIELD",
    "TEXT_FIELD",
    "WHOLE_FIELD",
    "LogRewrite",
    "LogStore",
    "MergeLog",
    "MergeLogError",
    "MergeLogReader",
    "Rule",
    "erase_pages",
    "expire_log",
    "fingerprint_hex",
    "furniture_runs",
    "is_jaccard",
    "is_number",
    "log_store",
    "merge_record",
    "open_merge_log",
    "raw_text",
    "read_merge_log",
    "review_record",
]

logger = logging.getLogger(__name__)

# URI scheme -> backend; "" is a plain path.
STORES: dict[str, type[LogStore]] = {
    "": FileStore,
    "file": FileStore,
    **dict.fromkeys(REDIS_SCHEMES, StreamStore),
}


def log_store(uri: str, default_stream: str = "", allow_eviction: bool = False) -> LogStore:
    """The merge log at ``uri``: a file path or ``file://`` URI (JSON lines), or ``redis://...[?stream=KEY]``
    (``rediss://``, ``unix://``, ``redis+cluster://``: a Redis Stream, ``default_stream`` when no key is given;
    ``allow_eviction``: on a server that evicts keys, which a writer's ``check`` otherwise refuses)."""
    scheme = urlsplit(uri).scheme
    store = STORES.get(scheme)
    if store is None:
        raise ValueError(f"merge log must be a file path, file:// or redis:// URI, got scheme {scheme!r}")
    if store is FileStore:
        return FileStore(urlsplit(uri).path if scheme else os.path.expanduser(uri))
    return StreamStore(uri, default_stream, allow_eviction)


def open_merge_log(uri: str, default_stream: str, allow_eviction: bool = False) -> MergeLog:
    """A writer for the merge log at ``uri`` (see :func:`log_store`); ``await log.check()`` before use."""
    return log_store(uri, default_stream, allow_eviction).writer()


class MergeLogReader:
    """The records of a merge log, oldest first; lines or entries that are not records are skipped.

    After iterating, :attr:`skipped` counts them (a torn last line, invalid JSON, a stream entry
    that does not decode); a warning says how many.
    """

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.skipped = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.skipped = 0
        for record in self.store.entries():
            if record is None:
                self.skipped += 1
            else:
                yield record
        if self.skipped:
            logger.warning(
                "%(skipped)d torn or invalid merge-log lines skipped in %(where)s",
                {"skipped": self.skipped, "where": self.store.where},
            )


def read_merge_log(uri: str, default_stream: str = "") -> MergeLogReader:
    """Every record of the merge log at ``uri`` (see :func:`log_store` and :class:`MergeLogReader`)."""
    return MergeLogReader(log_store(uri, default_stream))


async def erase_pages(uri: str, pages: Collection[str], default_stream: str = "") -> LogRewrite:
    """Erase pages, given by id or URL, from the merge or review log at ``uri``, leaving no byte naming them.

    A record naming one on a side (canonical, matched, duplicate) keeps its place, its scores and the
    other sides' audit; that side's id, URL and fingerprint become null and ``"erased"`` lists it (an
    erased duplicate's review text goes too). A line or entry that is not a record and holds one of
    the pages is removed. Erase from the index first, so that no new record names the pages; records
    written during the erasure are kept. ``ValueError`` when ``pages`` is empty or holds an empty
    string; ``TypeError`` for a single string. Other errors (``OSError``, ``redis.RedisError``) leave
    the log as it was, with records written meanwhile; the erasure can be run again.
    """
    return await log_store(uri, default_stream).rewrite(Erasure(pages))


async def expire_log(
    uri: str, classes: Mapping[str, float | None], now: float, default_stream: str = ""
) -> LogRewrite:
    """Remove the records of the log at ``uri`` older than their retention class's TTL (``classes``:
    ``SIMHASH_RETENTION``, class -> seconds or None for good) at ``now`` (Unix time).

    A record's class is its duplicate's; a record of a class not in ``classes`` is kept and counted.
    A file is rewritten (as by :func:`erase_pages`) only when a record expired; a stream whose classes
    share one TTL is trimmed with XTRIM MINID. Errors as for :func:`erase_pages`.
    """
    return await log_store(uri, default_stream).expire(classes, now)
