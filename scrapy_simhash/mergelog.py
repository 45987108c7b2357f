"""The merge log: one audit record per verified candidate, merged or rejected, as JSON lines or a Redis Stream.

A record keeps both ids, URLs and fingerprints, the distance, the Jaccard similarity and the rule
that decided, so a duplicate is never lost and a different threshold can be re-evaluated later.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from scrapy.exporters import JsonLinesItemExporter

from scrapy_simhash.redis_url import CLUSTER_SCHEMES, async_client, sync_client

__all__ = ["FIELDS", "MergeLog", "MergeLogError", "Rule", "merge_record", "open_merge_log", "read_merge_log"]

logger = logging.getLogger(__name__)

DECISIONS = ("merged", "rejected")
# The fields of a record, in the order they are written (README "Merge log").
FIELDS = (
    "timestamp",
    "decision",
    "canonical_id",
    "canonical_url",
    "duplicate_id",
    "duplicate_url",
    "canonical_fingerprint",
    "duplicate_fingerprint",
    "distance",
    "jaccard",
    "rule",
)
# Writes one stream writer has in flight at most (so connections it opens). An XADD takes microseconds
# on the server, so 16 carry thousands of records a second even over a millisecond network round trip.
STREAM_CONNECTIONS = 16


class MergeLogError(Exception):
    """A merge could not be recorded: the pipeline keeps the duplicate rather than drop it without a record."""


@dataclass(frozen=True)
class Rule:
    """The parameters that decided a merge; recorded with it so a decision can be re-checked."""

    max_distance: int
    jaccard_threshold: float
    weighting: str
    shingle_width: int
    boilerplate_version: int
    layout: str

    @cached_property
    def _fields(self) -> dict[str, Any]:
        """``asdict`` once per rule: it deep-copies field by field, slower than the rest of a record."""
        return asdict(self)

    def as_dict(self) -> dict[str, Any]:
        """The rule as a record holds it: a fresh dict each call."""
        return dict(self._fields)


def fingerprint_hex(fingerprint: int) -> str:
    """16 lower-case hex digits: JSON numbers lose 64-bit precision in most readers."""
    return f"{fingerprint:016x}"


def merge_record(
    *,
    decision: str,
    canonical_id: str,
    canonical_url: str,
    duplicate_id: str,
    duplicate_url: str,
    canonical_fingerprint: int,
    duplicate_fingerprint: int,
    distance: int,
    jaccard: float,
    rule: Rule,
) -> dict[str, Any]:
    """One merge-log record in the documented schema (README "Merge log")."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
    return {
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "decision": decision,
        "canonical_id": canonical_id,
        "canonical_url": canonical_url,
        "duplicate_id": duplicate_id,
        "duplicate_url": duplicate_url,
        "canonical_fingerprint": fingerprint_hex(canonical_fingerprint),
        "duplicate_fingerprint": fingerprint_hex(duplicate_fingerprint),
        "distance": int(distance),
        "jaccard": float(jaccard),
        "rule": rule.as_dict(),
    }


class MergeLog(ABC):
    """Where merge-log records go; :func:`open_merge_log` picks the writer from a URI."""

    @abstractmethod
    async def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Write the records of one item's decisions, in order, together: taken all or failed."""

    @abstractmethod
    async def close(self) -> None: ...


class FileMergeLog(MergeLog):
    """Appends JSON lines through Scrapy's ``JsonLinesItemExporter``; a recrawl extends the same file.

    An item's records are one short local write, as in Scrapy's own feed storage, flushed before the
    pipeline acts on them, so a killed crawl keeps every decision it made.
    """

    def __init__(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = open(path, "ab")  # noqa: SIM115 - closed in close()
        # The fields named, each written (a record has them all): the exporter would otherwise work out
        # the populated fields of every record and test each one's presence.
        self._exporter = JsonLinesItemExporter(
            self._file, ensure_ascii=False, fields_to_export=FIELDS, export_empty_fields=True
        )
        self._exporter.start_exporting()

    async def write(self, records: Sequence[dict[str, Any]]) -> None:
        for record in records:
            self._exporter.export_item(record)
        self._file.flush()

    async def close(self) -> None:
        self._exporter.finish_exporting()
        self._file.close()


class StreamMergeLog(MergeLog):
    """XADDs each record to a Redis Stream, on a Redis server or a Redis Cluster (``redis+cluster://``);
    every field is a string (the rule as a JSON object).

    At most ``STREAM_CONNECTIONS`` writes are in flight (``?max_connections=N`` in the URI overrides
    it); the others wait their turn. redis-py's own pool instead fails the 101st concurrent command
    with ``MaxConnectionsError``, and a crawl often has more items in flight than that (held warm-up
    pages released at once, many responses), so records were lost under load.
    """

    def __init__(self, url: str, stream: str, max_connections: int = STREAM_CONNECTIONS) -> None:
        self.stream = stream
        self._client = async_client(url, max_connections=max_connections)
        self._turns = asyncio.Semaphore(max_connections)

    async def write(self, records: Sequence[dict[str, Any]]) -> None:
        async with self._turns, self._client.pipeline(transaction=False) as pipe:
            for record in records:
                pipe.xadd(self.stream, _stream_fields(record))
            await pipe.execute()

    async def close(self) -> None:
        await self._client.aclose()


def _stream_fields(record: dict[str, Any]) -> dict[str, str]:
    return {
        key: json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)
        for key, value in record.items()
    }


def _from_stream_fields(fields: dict[bytes, bytes]) -> dict[str, Any]:
    record: dict[str, Any] = {key.decode(): value.decode() for key, value in fields.items()}
    record["rule"] = json.loads(record["rule"])
    record["distance"] = int(record["distance"])
    record["jaccard"] = float(record["jaccard"])
    return record


def _split_stream_uri(uri: str, default_stream: str) -> tuple[str, str, int]:
    """``redis://host:port/db?stream=KEY&max_connections=N`` -> (connection URL, stream key, N)."""
    parts = urlsplit(uri)
    query = parse_qs(parts.query)
    stream = query.pop("stream", [default_stream])[0]
    max_connections = int(query.pop("max_connections", [STREAM_CONNECTIONS])[0])
    rest = "&".join(f"{key}={value}" for key, values in query.items() for value in values)
    return urlunsplit(parts._replace(query=rest)), stream, max_connections


def _is_redis(uri: str) -> bool:
    return urlsplit(uri).scheme in ("redis", "rediss", "unix", *CLUSTER_SCHEMES)


def open_merge_log(uri: str, default_stream: str) -> MergeLog:
    """A file path (or ``file://`` URI) gives JSON lines; ``redis://...[?stream=KEY]`` a Redis Stream
    (``redis+cluster://`` on a Redis Cluster)."""
    if _is_redis(uri):
        return StreamMergeLog(*_split_stream_uri(uri, default_stream))
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return FileMergeLog(parts.path)
    if parts.scheme and len(parts.scheme) > 1:
        raise ValueError(f"merge log must be a file path, file:// or redis:// URI, got {uri!r}")
    return FileMergeLog(os.path.expanduser(uri))


def read_merge_log(uri: str, default_stream: str = "") -> Iterator[dict[str, Any]]:
    """Every record of a merge log, oldest first, in the same shape as :func:`merge_record` wrote it."""
    if _is_redis(uri):
        url, stream, _ = _split_stream_uri(uri, default_stream)
        client = sync_client(url)
        try:
            last = "-"
            while batch := client.xrange(stream, min=last, count=1000):
                for entry_id, fields in batch:
                    yield _from_stream_fields(fields)
                last = "(" + entry_id.decode()
        finally:
            client.close()
        return
    path = urlsplit(uri).path if uri.startswith("file://") else uri
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
