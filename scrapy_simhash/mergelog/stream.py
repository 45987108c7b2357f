"""The merge log as a Redis Stream (a Redis server or a Redis Cluster): one entry per record.

Each record field is an entry field: strings as they are, numbers and JSON data (``rule``,
``erased``) as JSON text, null fields left out; an item's records go in one MULTI/EXEC.

Entries cannot be edited, and XDEL only flags an entry deleted (its bytes stay in the listpack, in
DUMP and RDB files). A rewrite therefore copies the entries it keeps, with their ids, to a new key in
the stream's slot, and one Lua script copies what was added meanwhile and RENAMEs the copy over the
stream, so no concurrent XADD is lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from itertools import count
from typing import TYPE_CHECKING, Any

import redis.exceptions
from redis.crc import key_slot

from scrapy_simhash.mergelog.base import LogRewrite, LogStore, MergeLog, MergeLogError, Tally
from scrapy_simhash.mergelog.record import FIRST_SEEN_FIELDS, FURNITURE_FIELD, REMOVE, SIDES, WHOLE_FIELD, Edit
from scrapy_simhash.redis_url import (
    EVICTION_FIX, OWN_OPTIONS, async_client, eviction, mask_url, split_options, sync_client,
)

if TYPE_CHECKING:
    import redis.asyncio

    Client = redis.asyncio.Redis | redis.asyncio.RedisCluster

# Writes one stream writer has in flight at most (so connections it opens). An XADD takes microseconds
# on the server, so 16 carry thousands of records a second even over a millisecond network round trip.
STREAM_CONNECTIONS = 16
READ_BATCH = 1000
_TYPED = {
    "distance": int, "jaccard": float, "rule": json.loads, "erased": json.loads,
    FURNITURE_FIELD: json.loads, WHOLE_FIELD: json.loads,
}

# KEYS: the stream, its rewritten copy; ARGV: the id of the last entry the copy holds. Copies the
# entries added since, sets the copy's last id and consumer groups to the stream's, renames it over.
_FINISH_REWRITE = """
local stream, copy = KEYS[1], KEYS[2]
if redis.call('EXISTS', stream) == 0 then
  redis.call('DEL', copy)
  return 0
end
local added = redis.call('XRANGE', stream, '(' .. ARGV[1], '+')
for _, entry in ipairs(added) do
  redis.call('XADD', copy, entry[1], unpack(entry[2]))
end
if redis.call('EXISTS', copy) == 0 then
  redis.call('DEL', stream)
  return #added
end
local info = redis.call('XINFO', 'STREAM', stream)
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then redis.call('XSETID', copy, info[i + 1]) end
end
for _, group in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  local fields = {}
  for i = 1, #group, 2 do fields[group[i]] = group[i + 1] end
  redis.call('XGROUP', 'CREATE', copy, fields['name'], fields['last-delivered-id'])
end
redis.call('RENAME', copy, stream)
return #added
"""


@dataclass(frozen=True)
class StreamAddress:
    """``redis://host:port/db?stream=KEY&max_connections=N``: the connection URL and the stream's options."""

    url: str = field(repr=False)  # it may hold a password: ``where`` is what messages show
    stream: str
    max_connections: int = STREAM_CONNECTIONS
    maxlen: int | None = None  # XADD MAXLEN ~ maxlen: whole nodes trimmed, never below maxlen entries

    @classmethod
    def parse(cls, uri: str, default_stream: str) -> StreamAddress:
        url, options = split_options(uri, OWN_OPTIONS)
        stream = options.get("stream", default_stream)
        if not stream:
            raise ValueError("a merge-log stream needs a key: add ?stream=KEY to the URI")
        max_connections = _positive(options, "max_connections") or STREAM_CONNECTIONS
        return cls(url, stream, max_connections, _positive(options, "maxlen"))


def _positive(options: dict[str, str], name: str) -> int | None:
    """Option ``name``: a positive integer, or None when absent."""
    if name not in options:
        return None
    value = options[name]
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} in a merge-log stream URI must be a positive integer, got {value!r}")
    return int(value)


def stream_fields(record: dict[str, Any]) -> dict[str, str]:
    return {
        key: value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), allow_nan=False)
        for key, value in record.items()
        if value is not None
    }


def same_slot_key(key: str) -> str:
    """A key of its own in ``key``'s Redis Cluster slot, for a copy to be renamed over ``key``."""
    slot = key_slot(key.encode())
    for candidate in (f"{key}:rewrite", f"{{{key}}}:rewrite"):  # a hash tag decides, or the whole key does
        if key_slot(candidate.encode()) == slot:
            return candidate
    return next(key for n in count() if key_slot((key := f"{key}:rewrite:{n}").encode()) == slot)


def from_stream_fields(fields: dict[bytes, bytes]) -> dict[str, Any]:
    """The record an entry holds; ValueError, KeyError or TypeError for one that is not a record."""
    record: dict[str, Any] = {}
    for key, value in fields.items():
        name, text = key.decode(), value.decode()
        record[name] = _TYPED[name](text) if name in _TYPED else text
    for side in record.get("erased") or ():
        for name in SIDES[side]:
            record.setdefault(name, None)
    if "decision" in record:  # a stream keeps no null field
        for name in FIRST_SEEN_FIELDS:
            record.setdefault(name, None)
    return record


class StreamMergeLog(MergeLog):
    """XADDs an item's records in one MULTI/EXEC: all of them or none.

    At most ``max_connections`` writes are in flight; the others wait their turn (redis-py's own pool
    would fail the 101st concurrent command with ``MaxConnectionsError`` instead).
    """

    def __init__(self, address: StreamAddress, where: str, allow_eviction: bool = False) -> None:
        self.allow_eviction = allow_eviction
        self.stream = address.stream
        self.maxlen = address.maxlen
        self.where = where
        self._client = async_client(address.url, max_connections=address.max_connections)
        self._turns = asyncio.Semaphore(address.max_connections)

    async def write(self, records: Sequence[dict[str, Any]]) -> None:
        try:
            entries = [stream_fields(record) for record in records]
        except (TypeError, ValueError) as exc:
            raise MergeLogError(f"merge-log records are not JSON data: {exc}") from None
        try:
            async with self._turns, self._client.pipeline(transaction=len(entries) > 1) as pipe:
                for entry in entries:
                    pipe.xadd(self.stream, entry, maxlen=self.maxlen, approximate=True)
                await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - any failure means the records were not taken
            raise MergeLogError(f"could not add to merge log {self.where}: {type(exc).__name__}: {exc}") from exc

    async def check(self) -> None:
        """A server that refuses this log's credentials or database now will refuse every record, and one
        that evicts keys when full loses records without an error: said at open. One that does not
        answer may come back: its writes say so."""
        try:
            await self._client.ping()
            how = await eviction(self._client)
        except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as exc:
            raise MergeLogError(f"{self.where} refuses this crawl: {type(exc).__name__}: {exc}") from None
        except (redis.exceptions.RedisError, OSError):
            return
        if how is not None and not self.allow_eviction:
            raise MergeLogError(f"{self.where} evicts keys when its memory is full ({how}): an evicted stream "
                                f"loses its records without an error. {EVICTION_FIX}")

    async def close(self) -> None:
        await self._client.aclose()


class StreamStore(LogStore):
    def __init__(self, uri: str, default_stream: str, allow_eviction: bool = False) -> None:
        self.allow_eviction = allow_eviction  # a writer's check at open accepts an evicting server
        self.address = StreamAddress.parse(uri, default_stream)
        self.where = f"{mask_url(self.address.url)} stream {self.address.stream}"

    def writer(self) -> StreamMergeLog:
        return StreamMergeLog(self.address, self.where, self.allow_eviction)

    def entries(self) -> Iterator[dict[str, Any] | None]:
        client = sync_client(self.address.url)
        try:
            last = "-"
            while batch := client.xrange(self.address.stream, min=last, count=READ_BATCH):
                yield from (_record(fields) for _, fields in batch)
                if len(batch) < READ_BATCH:
                    return
                last = "(" + batch[-1][0].decode()
        finally:
            client.close()

    async def rewrite(self, edit: Edit) -> LogRewrite:
        """A first pass reads up to the first change; if there is one, every entry is copied (edited)
        to a key in the stream's slot, and a script copies what was added meanwhile and renames."""
        client = async_client(self.address.url)
        try:
            probe = Tally(edit)
            await self._probe(client, probe)
            if not probe.changes:
                return probe.report(self.where, rewritten=False)
            tally = Tally(edit)
            await self._copy(client, tally)
            return tally.report(self.where, rewritten=True)
        finally:
            await client.aclose()

    async def expire(self, classes: Mapping[str, float | None], now: float) -> LogRewrite:
        """One TTL for every class: XTRIM MINID by the entry ids (the server's clock at XADD); else the
        records of each class are removed by a rewrite (by their own timestamps).

        XTRIM frees whole nodes; the expired entries of a node that keeps younger ones are flagged
        deleted (unreadable) and their bytes go with the node, at a later expiry.
        """
        ttls = set(classes.values())
        if len(ttls) != 1 or None in ttls:
            return await super().expire(classes, now)
        [ttl] = ttls
        client = async_client(self.address.url)
        try:
            removed = await client.xtrim(self.address.stream, minid=int((now - ttl) * 1000), approximate=False)
        finally:
            await client.aclose()
        return LogRewrite(self.where, removed=removed, rewritten=removed > 0)

    async def _probe(self, client: Client, probe: Tally) -> None:
        """Judge entries up to the first change, or until the rest stays as it is."""
        async with aclosing(_batches(client, self.address.stream)) as batches:
            async for batch in batches:
                for _, fields in batch:
                    if probe.judge(_record(fields), _raw(fields)) is not None or probe.finished:
                        return

    async def _copy(self, client: Client, tally: Tally) -> None:
        stream = self.address.stream
        copy = same_slot_key(stream)
        await client.delete(copy)
        last = "0-0"
        async for batch in _batches(client, stream):
            pipe = client.pipeline(transaction=False)
            for entry_id, fields in batch:
                outcome = tally.judge(None if tally.finished else _record(fields), _raw(fields))
                if outcome is None:
                    pipe.xadd(copy, fields, id=entry_id)
                elif outcome is not REMOVE:
                    pipe.xadd(copy, stream_fields(outcome), id=entry_id)
            await pipe.execute()
            last = batch[-1][0]
        await client.register_script(_FINISH_REWRITE)(keys=[stream, copy], args=[last])


async def _batches(client: Client, stream: str) -> AsyncIterator[list[tuple[bytes, dict[bytes, bytes]]]]:
    """The stream's entries, a batch at a time, up to a batch that is not full: what is added after
    that is the finishing script's to copy (chasing each new entry would never end under load)."""
    start = "-"
    while batch := await client.xrange(stream, min=start, count=READ_BATCH):
        yield batch
        if len(batch) < READ_BATCH:
            return
        start = "(" + batch[-1][0].decode()


def _record(fields: dict[bytes, bytes]) -> dict[str, Any] | None:
    try:
        return from_stream_fields(fields)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _raw(fields: dict[bytes, bytes]) -> bytes:
    return b"\0".join(value for pair in fields.items() for value in pair)
