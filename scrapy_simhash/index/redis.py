"""The shared band index on Redis: a check-and-add is one call of a Lua script, pipelined with others in flight.

The script (``redis.lua``) reads the probed buckets, keeps members within the distance, answers with
their ids and verification blobs, or inserts the record: lookup, filter and insert are one atomic
step, so two crawler processes cannot both become canonical. A call is written by its caller at once
while few are in flight; beyond that, calls queue and go out together in one write when a reply
comes back. A merge, which only its own item waits for, is held and rides along with the next call
written, so that a verified duplicate costs one EVALSHA, not two. Key schema: README "The band index".
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import deque
from collections.abc import Iterable
from importlib.resources import files
from json.encoder import encode_basestring

import numpy as np
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

try:
    import hiredis
except ImportError:  # optional: redis-py packs the commands instead, about 3x slower
    hiredis = None

from scrapy_simhash.index.base import Candidate, Index, Record
from scrapy_simhash.index.codec import decode_fingerprint, decode_hashes, encode_fingerprint, encode_hashes
from scrapy_simhash.index.retention import Retention
from scrapy_simhash.layout import Layout
from scrapy_simhash.redis_url import async_client, is_cluster

logger = logging.getLogger(__name__)

_LUA = files("scrapy_simhash.index").joinpath("redis.lua").read_text(encoding="utf-8")
# The key schema (README "The band index"); None before schemas were recorded: one set per bucket.
_SCHEMA = "2"
_EXPIRE_BATCH = 500
# Calls in flight below which a call is written at once; beyond, calls queue until a reply comes
# back and then go out in one write (benchmarks/pipeline.py and redis_roundtrip.py measured 2, 4, 16
# and 64: README "The band index").
_IN_FLIGHT = 16
# Most calls written at once.
_MAX_WRITE = 256
# Longest a merge waits for a call to ride along with before it goes out alone (seconds): longer than
# the gap between an item's calls in a busy crawl (about 1 ms in benchmarks/pipeline.py), short against
# anything a crawl waits for.
_HOLD = 0.005


def _json_strings(values: Iterable[str]) -> str:
    """A JSON array of strings, non-ASCII kept (json.dumps takes ~10x as long for one short string)."""
    return "[" + ",".join(map(encode_basestring, values)) + "]"


def _pack(connection, commands: list[tuple]) -> bytes | list[bytes]:
    if hiredis is None:
        return connection.pack_commands(commands)
    return b"".join(map(hiredis.pack_command, commands))


class _Call:
    """One call of an entry point of the script, the future its reply settles, and the calls riding along."""

    __slots__ = ("name", "keys", "args", "future", "riders")

    def __init__(self, name: bytes, keys: list[bytes], args: list, future: asyncio.Future) -> None:
        self.name = name
        self.keys = keys
        self.args = args
        self.future = future
        self.riders: list[_Call] = []


def _settle(call: _Call, reply: object) -> None:
    """Settle ``call`` and its riders with the reply, an exception included (an error reply, a failed
    connection). With riders, the script answered one reply per call, the riders' first."""
    if not call.riders:
        _settle_one(call, reply)
        return
    calls = [*call.riders, call]
    for one, result in zip(calls, [reply] * len(calls) if isinstance(reply, Exception) else reply):
        _settle_one(one, result)


def _settle_one(call: _Call, reply: object) -> None:
    if call.future.done():
        return
    if isinstance(reply, Exception):
        call.future.set_exception(reply)
    else:
        call.future.set_result(reply)


def _lua_bytes(values: list[int]) -> str:
    return '"' + "".join(f"\\{v}" for v in values) + '"'


def _lua_layout(layout: Layout) -> str:
    """The layout as Lua, prepended to the script source (see the head of ``redis.lua``)."""

    keys = [layout.key_positions(t) for t in range(layout.tables)]
    flips = [(t + 1, i) for t in range(layout.tables) for i in range(len(keys[t]))] if layout.multiprobe else []
    positions = "{" + ", ".join("{" + ", ".join(map(str, p)) + "}" for p in keys) + "}"
    return (
        f"local TABLES = {layout.tables}\n"
        f"local W = {field_width(layout)}\n"
        f"local FLIP_TABLE = {_lua_bytes([t for t, _ in flips])}\n"
        f"local FLIP_BIT = {_lua_bytes([i for _, i in flips])}\n"
        f"local function layout()\n    return {positions}\nend\n"
    )


def field_width(layout: Layout) -> int:
    """Bytes of a bucket field (the key of a bucket in its table's hash): the widest table key, big-endian."""
    return max(-(-len(layout.key_positions(t)) // 8) for t in range(layout.tables))


class RedisIndex(Index):
    def __init__(self, url: str, layout: Layout, retention: Retention, prefix: str) -> None:
        self.layout = layout
        self.retention = retention
        self.prefix = prefix
        self.client = self._connect(url, prefix)
        self._script = self.client.register_script(_lua_layout(layout) + _LUA)
        self._tables = [f"{prefix}:b:{t}".encode() for t in range(layout.tables)]
        self._field_width = field_width(layout)
        self._fps_key = f"{prefix}:f".encode()
        # For merges: class -> TTL, false for "keep for good" (cjson reads JSON null as a userdata).
        self._ttls = json.dumps({name: False if ttl is None else ttl for name, ttl in retention.classes.items()})
        self._verified = False
        self._verifying = asyncio.Lock()
        self._queue: list[_Call] = []
        self._sender: asyncio.Task | None = None
        # Merges waiting for a call to ride along with, and the timer that sends them alone.
        self._held: list[_Call] = []
        self._release: asyncio.TimerHandle | None = None
        # The connection script calls are written to, and the calls written and not yet read, each
        # with the number of script loads before it was written (one load answers every NOSCRIPT of
        # the calls written before it).
        self._connection: AbstractConnection | None = None
        self._in_flight: deque[tuple[AbstractConnection, _Call, int]] = deque()
        self._loads = 0
        self._reader: asyncio.Task | None = None

    @staticmethod
    def _connect(url: str, prefix: str) -> aioredis.Redis | RedisCluster:
        """A client for ``url``; ``redis+cluster://`` / ``rediss+cluster://`` mean a Redis Cluster.

        On a cluster every key a script touches must live in one slot: the prefix's hash tag
        (``{spider}``) puts all of an index's keys there (README "Reliability" explains the trade).
        """
        if is_cluster(url) and not re.search(r"\{[^{}]+\}", prefix):
            raise ValueError(f"a Redis Cluster index needs a {{hash tag}} in SIMHASH_KEY_PREFIX, got {prefix!r}")
        return async_client(url)

    async def _ready(self) -> None:
        """Refuse an index of another key schema or built with another layout (its buckets would
        silently stop matching).

        Checked once, by the first call: the calls that arrive meanwhile wait for it instead of each
        opening a connection of its own to check again.
        """
        if self._verified:
            return
        async with self._verifying:
            if self._verified:
                return
            meta = f"{self.prefix}:meta"
            # The schema is written first: an index with a layout and no schema predates schemas.
            if await self.client.hget(meta, "layout") is None:
                await self.client.hsetnx(meta, "schema", _SCHEMA)
            await self.client.hsetnx(meta, "layout", repr(self.layout))
            schema, built = await self.client.hmget(meta, "schema", "layout")
            if schema != _SCHEMA.encode():
                raise ValueError(
                    f"index {self.prefix!r} has key schema {schema and schema.decode()}, this version reads "
                    f"{_SCHEMA} (README \"The band index\"): rebuild it under another SIMHASH_KEY_PREFIX"
                )
            if built.decode() != repr(self.layout):
                raise ValueError(
                    f"index {self.prefix!r} was built with {built.decode()}, not {self.layout!r}: "
                    "use the same SIMHASH_BANDS/SIMHASH_LAYOUT settings or another SIMHASH_KEY_PREFIX"
                )
            self._verified = True

    async def _run(self, name: bytes, keys: list[bytes], args: list, *, ride: bool = False):
        """Run entry point ``name`` of the script: queued, and sent with every call queued meanwhile.

        A call that may ``ride`` is held instead, for at most _HOLD seconds, and goes out with the next
        call written: its caller still waits for its reply.
        """
        await self._ready()
        # Encoded here, so that a value that cannot be sent (a lone surrogate in an id) fails this
        # call alone rather than the whole write it would have joined. A call without keys of its
        # own names the fingerprint map, so that a cluster routes it to this index's slot.
        args = [arg.encode() if isinstance(arg, str) else arg for arg in args]
        loop = asyncio.get_running_loop()
        call = _Call(name, keys or [self._fps_key], args, loop.create_future())
        if ride:
            self._held.append(call)
            if self._release is None:
                self._release = loop.call_later(_HOLD, self._send_held)
            return await call.future
        self._queue.append(call)
        # Written now, before the other items ready to run take their turn, so that the server works
        # on this call while the client works on them; else the running writer or the next reply
        # (_read_replies) writes it, with every call queued meanwhile.
        if self._sender is None and len(self._in_flight) < _IN_FLIGHT:
            self._sender = asyncio.current_task()
            try:
                await self._send()
            except asyncio.CancelledError:
                if call.future.done() and not call.future.cancelled():
                    call.future.exception()  # settled by the failed write; nobody will await it now
                raise
        return await call.future

    def _send_held(self) -> None:
        """No call went out within _HOLD: the held calls go out together, the last carrying the others."""
        carrier = self._held.pop()
        self._board(carrier)
        self._queue.append(carrier)
        if self._sender is None and len(self._in_flight) < _IN_FLIGHT:
            self._sender = asyncio.get_running_loop().create_task(self._send())

    def _board(self, carrier: _Call) -> None:
        """The held calls ride along with ``carrier``; their timer stops (it runs while calls are held)."""
        if self._release is not None:
            self._release.cancel()
            self._release = None
            carrier.riders += self._held
            self._held = []

    async def _send(self) -> None:
        """Write queued calls until the queue is empty, up to _MAX_WRITE script calls (EVALSHA) per write."""
        try:
            while self._queue:
                calls, self._queue = self._queue[:_MAX_WRITE], self._queue[_MAX_WRITE:]
                self._board(calls[0])
                if isinstance(self.client, RedisCluster):
                    await self._send_to_cluster(calls)
                else:
                    await self._write(calls)
        finally:
            self._sender = None
            if self._queue:  # left by a cancelled writer: hand the rest to a task of its own
                self._sender = asyncio.get_running_loop().create_task(self._send())

    def _command(self, call: _Call) -> tuple:
        calls = [*call.riders, call]
        args = [arg for one in calls for arg in (one.name, len(one.args), *one.args)]
        return ("EVALSHA", self._script.sha, len(call.keys), *call.keys, self.prefix, len(calls), *args)

    async def _write(self, calls: list[_Call]) -> None:
        """Write script calls to this index's connection without waiting for their replies.

        :meth:`_read_replies` reads them in order, so the next calls go out while the server still
        runs these: the client's work on other items overlaps the server's. Packed by hiredis when
        installed, without the per-command Python work of redis-py's pipeline object (README "The band
        index"). Any failure drops the connection and fails every call in flight on it; the guard's
        retry is safe since check-and-add recognises its own earlier write.
        """
        try:
            if self._connection is None:
                # A connection of the index's own, never in the pool: a reader still waiting on a
                # dropped one must not disturb its next user.
                self._connection = self.client.connection_pool.make_connection()
            connection = self._connection
            if not connection.is_connected:
                await connection.connect()
            packed = _pack(connection, [self._command(call) for call in calls])
            # In flight before the write: once any byte is out, only a reply or a dropped connection
            # may settle these calls (even if this writer is cancelled).
            self._in_flight.extend((connection, call, self._loads) for call in calls)
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read_replies())
            # No health check: its PING would read a reply that belongs to a script call in flight.
            await connection.send_packed_command(packed, check_health=False)
        except BaseException as exc:
            failure = exc if isinstance(exc, Exception) else ConnectionError("a write was cancelled")
            await self._drop(self._connection, failure)
            for call in calls:  # not yet in flight when the connection could not be had
                _settle(call, failure)
            if failure is not exc:
                raise

    async def _read_replies(self) -> None:
        """Settle every call in flight with its reply, in the order they were written (on NOSCRIPT,
        after a SCRIPT FLUSH or a failover, load the script and write the call again: it did not run)."""
        try:
            while self._in_flight:
                connection, call, loads = self._in_flight[0]
                try:
                    reply = await connection.read_response()
                except ResponseError as exc:  # an error reply: this call failed, alone
                    reply = exc
                except Exception as exc:  # the connection failed: every call in flight on it did
                    await self._drop(connection, exc)
                    continue
                self._in_flight.popleft()
                if self._queue and self._sender is None:
                    self._sender = asyncio.get_running_loop().create_task(self._send())
                if isinstance(reply, NoScriptError):
                    try:
                        if loads == self._loads:  # else loaded since this call was written
                            await self.client.script_load(self._script.script)
                            self._loads += 1
                    except Exception as exc:
                        _settle(call, exc)
                    else:
                        await self._write([call])
                    continue
                _settle(call, reply)
        finally:
            self._reader = None

    async def _drop(self, connection: AbstractConnection | None, exc: Exception) -> None:
        """Fail every call in flight on ``connection`` and close it (once: the writer and the reader
        may both see it fail)."""
        if connection is None:
            return
        if connection is not self._connection and all(c is not connection for c, *_ in self._in_flight):
            return  # dropped already
        kept = deque()
        for entry in self._in_flight:
            if entry[0] is connection:
                _settle(entry[1], exc)
            else:
                kept.append(entry)
        self._in_flight = kept
        if self._connection is connection:
            self._connection = None
        await connection.disconnect()

    async def _send_to_cluster(self, calls: list[_Call]) -> None:
        """The script calls through redis-py's cluster pipeline, which routes each by its keys."""
        try:
            replies = await self._cluster_pipeline(calls)
            again = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
            if again:
                await self.client.script_load(self._script.script)
                for i, reply in zip(again, await self._cluster_pipeline([calls[i] for i in again])):
                    replies[i] = reply
        except Exception as exc:  # the connection failed: every call of the pipeline did
            replies = [exc] * len(calls)
        for call, reply in zip(calls, replies):
            _settle(call, reply)

    async def _cluster_pipeline(self, calls: list[_Call]) -> list:
        async with self.client.pipeline(transaction=False) as pipe:
            for call in calls:
                # Not pipe.evalsha(): redis-py's cluster pipeline refuses it by name, yet routes the
                # command by its keys like any other.
                pipe.execute_command(*self._command(call))
            return await pipe.execute(raise_on_error=False)

    def _record_args(self, record: Record) -> list:
        expires = self.retention.expiry(record.retention)
        urls = [u for u in dict.fromkeys((record.url, *record.urls)) if u]
        return [
            record.id,
            _json_strings([record.id]),
            encode_fingerprint(record.fingerprint),
            repr(float(record.first_seen)),
            record.retention,
            encode_hashes(record.shingles),
            _json_strings(urls),
            "" if expires is None else repr(expires),
            record.write_id,
        ]

    async def _check_add(
        self, mode: bytes, fingerprint: int, max_distance: int, record: Record | None
    ) -> list[Candidate]:
        fields = b"".join([key.to_bytes(self._field_width, "big") for key, _ in self.layout.split(fingerprint)])
        args = [mode, max_distance, encode_fingerprint(fingerprint), fields]
        if record is not None:
            args += self._record_args(record)
        flat = await self._run(b"check_add", self._tables, args)
        found = [
            Candidate(flat[i].decode(), decode_fingerprint(flat[i + 1]), flat[i + 2], flat[i + 3])
            for i in range(0, len(flat), 4)
        ]
        found.sort(key=lambda c: (c.distance, c.record_id))
        return found

    # -- the contract ------------------------------------------------------------------------------

    async def add(self, record: Record) -> None:
        await self._check_add(b"a", record.fingerprint, 0, record)

    async def candidates(self, fingerprint: int, max_distance: int) -> list[Candidate]:
        return await self._check_add(b"c", fingerprint, max_distance, None)

    async def check_and_add(self, record: Record, max_distance: int) -> list[Candidate]:
        return await self._check_add(b"ca", record.fingerprint, max_distance, record)

    async def check_and_add_exact(self, record: Record, digest: str) -> str | None:
        holder = await self._run(b"check_add_exact", [], [digest, *self._record_args(record)])
        return None if holder is None else holder.decode()

    async def merge(self, canonical_id: str, url: str, first_seen: float) -> None:
        args = [canonical_id, url, repr(float(first_seen)), repr(self.retention.clock()), self._ttls]
        if not await self._run(b"merge", [], args, ride=True):
            logger.warning("merge into %r skipped: no such record (erased or expired)", canonical_id)

    async def get(self, record_id: str) -> Record | None:
        await self._ready()
        fields = await self.client.hmget(f"{self.prefix}:r:{record_id}", "f", "t", "c", "s", "u")
        if fields[0] is None:
            return None
        fingerprint, first_seen, retention, blob, urls = fields
        url_list = tuple(json.loads(urls) or ())  # the script writes an empty list as {}
        return Record(
            id=record_id,
            fingerprint=decode_fingerprint(fingerprint),
            url=url_list[0] if url_list else "",
            first_seen=float(first_seen),
            retention=retention.decode(),
            shingles=decode_hashes(blob),
            urls=url_list,
        )

    async def remove(self, record_id: str) -> bool:
        return bool(await self._run(b"remove", [], [record_id]))

    async def expire(self) -> int:
        total = 0
        while True:
            swept = await self._run(b"expire", [], [repr(self.retention.clock()), _EXPIRE_BATCH])
            total += swept
            if swept < _EXPIRE_BATCH:
                break
        if total:
            logger.info("expired %(count)d records", {"count": total})
        return total

    async def load_boilerplate(self, host: str) -> tuple[int, np.ndarray] | None:
        version, hashes = await self.client.hmget(f"{self.prefix}:h:{host}", "v", "h")
        if version is None:
            return None
        return int(version), np.frombuffer(hashes, dtype="<u8").astype(np.uint64)

    async def save_boilerplate(self, host: str, version: int, hashes: np.ndarray) -> None:
        blob = np.asarray(hashes, dtype="<u8").tobytes()
        await self.client.hset(f"{self.prefix}:h:{host}", mapping={"v": version, "h": blob})

    async def count(self) -> int:
        await self._ready()
        return int(await self.client.get(f"{self.prefix}:n") or 0)

    async def close(self) -> None:
        if self._held:  # sent, not failed: their items are waiting for them
            self._send_held()
            await asyncio.gather(*(call.future for call in self._queue), return_exceptions=True)
        await self._drop(self._connection, ConnectionError("the index was closed"))
        await self.client.aclose()
