"""The shared index on Redis: each atomic step is one call of a Lua function, through redis-py's own client.

The function (``redis.lua``, a Redis Functions library the index loads when the server lacks it)
keeps the record and group slots, the band buckets and the id handles under the key prefix, whose
hash tag puts them in one cluster slot; a record's page data lives under its write id and, on a
Redis Cluster, spreads over the nodes (docs/how-it-works.md has the key schema).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from importlib.resources import files
from typing import Any, NamedTuple

import redis.exceptions

from scrapy_simhash.index import wire
from scrapy_simhash.index.base import (
    CANDIDATES_PER_GROUP,
    FIRST_READ,
    LISTED_PER_KEY,
    MAX_BANDED_MEMBERS,
    Candidate,
    Details,
    Erased,
    Exact,
    GroupGone,
    Index,
    IndexNotFound,
    IndexOpenError,
    Joined,
    Lookup,
    Record,
    StoredRecord,
    Verification,
    handle,
)
from scrapy_simhash.whole_text import SAME_TEXT
from scrapy_simhash.minhash import Layout
from scrapy_simhash.redis_url import EVICTION_FIX, async_client, eviction, is_cluster, mask_url

__all__ = ["RedisIndex"]

logger = logging.getLogger(__name__)

_LUA = files("scrapy_simhash.index").joinpath("redis.lua").read_text(encoding="utf-8")
# Groups closed per expiry call: each is one function call's work, so the server never blocks long.
_EXPIRE_BATCH = 100
_NO_DATA = ["", ""]  # page data a call does not carry: written by the client (a cluster) or not sent
_LET_GO = object()  # a page, or the hashes of a blob left out, that this crawl held and let go since
#: Entries a band bucket field lists before it splits (redis.lua ``split``): 64 is about 4M records.
#: Once an index's fields have split, a lookup reads their parts directly (``bucket_field``), so what
#: it copies and rewrites stays short. Measured: docs/decisions/bucket-fields.md.
BUCKET_SPLIT_AT = 64
#: How fast the share of recent lookups that added their page follows each one (an exponential
#: average): a lookup carries its page's data while that share is at least a half. Data sent along
#: costs its encoding and its bytes when the page turns out a copy; data left behind costs a new
#: page a second call. Measured: docs/decisions/page-data.md.
NEW_SHARE_WEIGHT = 1 / 16
#: Function calls carrying items' lookups and joins that may await their replies at once. The lookups
#: and joins items make meanwhile wait, and go together in one call when one returns: a call costs the
#: crawler 130-190 us of CPU. Measured: docs/decisions/batches-in-flight.md.
BATCHES_IN_FLIGHT = 2


def _library(layout: Layout, cluster: bool) -> tuple[str, str]:
    """The name and the code of the Functions library for this layout: ``redis.lua`` with the layout
    as Lua constants in front. The name is the code's digest, so indexes of one layout and version
    share a library and another layout or version never calls it."""
    body = (
        f"local BANDS, ROWS, K, MIN_EQUAL = {layout.bands}, {layout.rows}, {layout.size}, {layout.min_equal}\n"
        f"local MAX_BANDED, PER_GROUP, FIRST_READ = {MAX_BANDED_MEMBERS}, {CANDIDATES_PER_GROUP}, {FIRST_READ}\n"
        f"local SPLIT_AT, LISTED_PER_KEY = {BUCKET_SPLIT_AT}, {LISTED_PER_KEY}\n"
        f"local CLUSTER = {'true' if cluster else 'false'}\n"
        f"{wire.lua_constants()}"
        f"{_lua_same_bytes(layout.size)}"
        f"{_LUA}"
    )
    name = "scrapy_simhash_" + hashlib.sha1(body.encode()).hexdigest()[:16]
    return name, f"#!lua name={name}\nlocal NAME = {wire.lua_string(name)}\n{body}"


def _lua_same_bytes(size: int, chunk: int = 48) -> str:
    """Lua ``same_bytes(s, at, q)``: how many of the ``size`` bytes of ``s`` from ``at`` equal
    ``q[1..size]``, unrolled for the layout's size: Lua 5.1 has no vector compare, and a loop over a
    table of the bytes cost twice as much, on every record a lookup reads. Measured:
    docs/decisions/sketch-compare.md."""
    lines = ["local function same_bytes(s, at, q)", "    local same = 0"]
    for start in range(0, size, chunk):
        width = min(chunk, size - start)
        names = ", ".join(f"b{i}" for i in range(1, width + 1))
        lines.append(f"    do local {names} = string.byte(s, at + {start}, at + {start + width - 1})")
        lines += [f"        if b{i} == q[{start + i}] then same = same + 1 end" for i in range(1, width + 1)]
        lines.append("    end")
    return "\n".join([*lines, "    return same", "end", ""])


class _Page(NamedTuple):
    """One record's page data, as a candidate's details are made of it."""

    data: Verification | None  # None: no verification data kept, or unreadable
    id: str
    url: str
    host: str
    first_seen: float


def _pages_of(candidates: list[Candidate]) -> list[tuple[bytes, bool]]:
    """The pages the candidates' details are made of, by write id, and whether their blob is wanted:
    each candidate's, then its group's canonical's when that is another record (``check_add`` in
    redis.lua returns them in this order)."""
    wanted: list[tuple[bytes, bool]] = []
    for c in candidates:
        wanted.append((c.key, True))
        if c.canonical_key not in (b"", c.key):
            wanted.append((c.canonical_key, False))
    return wanted


def _resolved(pages: dict[bytes, _Page | None], key: bytes, blob: bool) -> bool:
    """Whether ``pages`` has the page under ``key`` as a candidate's details need it (with its hashes
    when ``blob``), or knows it gone."""
    page = pages.get(key, _LET_GO)
    return page is None or (page is not _LET_GO and not (blob and page.data is _LET_GO))


def _keep(pages: dict[bytes, _Page | None], key: bytes, blob: bool, page: _Page | object | None) -> None:
    """Put a page read (a listing wanted its blob or not) into ``pages``, where it adds what they lack."""
    if page is not _LET_GO and not _resolved(pages, key, blob):
        pages[key] = page  # type: ignore[assignment]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisIndex(Index):
    schema = 7
    transient_errors = (
        OSError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.BusyLoadingError,
        redis.exceptions.TryAgainError,  # a slot moving (redis.lua ``slot_moving``)
        redis.exceptions.ClusterError,  # a cluster's redirects or TRYAGAIN past redis-py's retries, or CLUSTERDOWN
    )

    def __init__(self, url: str, *, key_prefix: str, allow_eviction: bool = False, **options: Any) -> None:
        super().__init__(location=mask_url(url), **options)
        self.allow_eviction = allow_eviction
        self.cluster = is_cluster(url)
        if self.cluster and not re.search(r"\{[^{}]+\}", key_prefix):
            raise ValueError(f"a Redis Cluster index needs a {{hash tag}} in SIMHASH_KEY_PREFIX, got {key_prefix!r}")
        self.prefix = key_prefix
        # Page data keys carry no hash tag of the prefix: on a cluster they spread over the nodes.
        self._data = f"{key_prefix.replace('{', '').replace('}', '')}:d:".encode()
        self.client = async_client(url)
        self._function, self._library = _library(self.layout, cluster=self.cluster)
        self._route = [f"{key_prefix}:meta"]
        self._lease_key = f"{key_prefix}:live:".encode() + self.session  # in the index's slot
        self._leased = False  # a key in the index's slot: where a cluster runs the function
        self._new_share = 1.0  # of recent lookups, those that added their page (NEW_SHARE_WEIGHT)
        self._waiting: list[tuple[asyncio.Future, list]] = []  # calls for the next batch
        self._batches: set[asyncio.Task] = set()

    async def _call(self, entry: str, *args: Any) -> Any:
        call = (self._function, len(self._route), *self._route, self.prefix, entry, *args)
        try:
            return await self.client.fcall(*call)
        except redis.exceptions.ResponseError as exc:
            if "unknown command" in str(exc):
                raise IndexOpenError(
                    f"the index needs Redis 7.0 or later (Redis Functions); {self.location} does not know FCALL"
                ) from None
            if "Function not found" not in str(exc):
                raise
        # A server new to this version, restarted without persistence, or flushed: load and call again,
        # and put back the identity a restart took, so that an erasure finds the records written from now.
        await self.client.function_load(self._library, replace=True)
        if self.create and entry != "identity":
            await self._identify()
        return await self.client.fcall(*call)

    async def _batched(self, entry: str, *args: Any) -> Any:
        """``entry``'s reply, its call sent with the others made in this turn of the loop, or, while
        :data:`BATCHES_IN_FLIGHT` function calls are out, with all made until one returns."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting.append((future, [entry, len(args), *args]))
        if len(self._waiting) == 1 and len(self._batches) < BATCHES_IN_FLIGHT:
            loop.call_soon(self._send_if_free)  # after the turn: one reply wakes several items, each with a call
        return await future

    def _send_if_free(self) -> None:
        if len(self._batches) < BATCHES_IN_FLIGHT:
            self._send_waiting()

    def _send_waiting(self) -> None:
        batch = [(future, call) for future, call in self._waiting if not future.cancelled()]
        self._waiting = []
        if batch:
            task = asyncio.ensure_future(self._send(batch))
            self._batches.add(task)
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task) -> None:
        self._batches.discard(task)
        if self._waiting:
            self._send_waiting()

    async def _send(self, batch: list[tuple[asyncio.Future, list]]) -> None:
        try:
            replies = await self._call("batch", *(arg for _, call in batch for arg in call))
        except asyncio.CancelledError:
            for future, _ in batch:
                future.cancel()
            raise
        except Exception as exc:
            replies = [exc] * len(batch)
        for (future, _), reply in zip(batch, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, Exception):  # the call's own error (redis.lua ``batch``) or the batch's
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def _data_key(self, write_id: bytes) -> bytes:
        return self._data + write_id

    @staticmethod
    def _page_fields(record: Record) -> bytes:
        return wire.page_fields(record.id, record.url, record.host, record.retention, float(record.first_seen))

    async def _write_data(self, record: Record, banded: bool = True) -> list:
        """The record's page data as ``write_data`` in redis.lua takes it (one server): its blob, then
        its head and fields; or written now (a cluster: before the record is indexed, so a lookup
        never finds a record whose data is still on its way). A record that is not banded keeps no
        verification data, so none is encoded or sent."""
        data = [record.blob() if banded else b"", self._page_fields(record)]
        if not self.cluster:
            return data
        await self.client.set(self._data_key(record.write_id), data[1] + data[0])
        return _NO_DATA

    def _record_args(self, record: Record) -> list:
        ttl = self.retention.ttl(record.retention)
        url_handle = handle(record.url) if record.url and record.url != record.id else handle(record.id)
        return [
            record.fingerprint.to_bytes(8, "big"),
            record.write_id,
            self.session,
            handle(record.id),
            url_handle,
            0 if ttl is None else max(1, round(ttl)),
            repr(self.retention.clock()),
        ]

    @staticmethod
    def _lookup_reply(head: bytes) -> tuple[int, int, int, int, list[bytes], list[Candidate]]:
        """(seq, added, this, earlier, stale write ids, candidates) of a lookup's reply as
        ``lookup_reply`` in redis.lua packs its first element."""
        seq, added, this, earlier, stale, count = wire.LOOKUP_HEAD.unpack_from(head)
        at = wire.LOOKUP_HEAD.size
        stale_ids = [head[at + i : at + i + wire.WRITE_ID] for i in range(0, stale * wire.WRITE_ID, wire.WRITE_ID)]
        at += stale * wire.WRITE_ID
        # rid | group | canonical | fingerprint | equal | key | has a canonical | its key | end
        r, g, c, f, e, k, h, ck, end = wire.CANDIDATE_OFFSETS
        candidates = [
            Candidate(
                int.from_bytes(head[i + r : i + g], "big"),
                int.from_bytes(head[i + g : i + c], "big"),
                int.from_bytes(head[i + c : i + f], "big"),
                int.from_bytes(head[i + f : i + e], "big"),
                int.from_bytes(head[i + e : i + k], "big"),
                head[i + k : i + h],
                head[i + ck : i + end] if head[i + h] else b"",
            )
            for i in range(at, at + count * wire.CANDIDATE, wire.CANDIDATE)
        ]
        return int(seq), int(added), int(this), int(earlier), stale_ids, candidates

    # -- the contract ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Misconfiguration no retry cures (a wrong password, a database the server has not, a user
        without FUNCTION LOAD) is an :class:`IndexOpenError`, not an outage."""
        try:
            await self._open()
        except (redis.exceptions.AuthenticationError, redis.exceptions.NoPermissionError) as exc:
            raise IndexOpenError(f"{self.location} refuses this crawl: {exc}") from None
        except redis.exceptions.ResponseError as exc:
            if "DB index is out of range" not in str(exc):
                raise
            raise IndexOpenError(f"{self.location}: {exc}") from None

    async def _open(self) -> None:
        if not self.create and not await self.client.exists(f"{self.prefix}:meta"):
            if not await self.client.exists(f"{self.prefix}:n"):  # no record was ever numbered: no index
                raise IndexNotFound(f"no index under {self.prefix!r} at {self.location}")
            logger.warning(
                "The index under %(prefix)r at %(location)s has lost its identity key (a restart without "
                "persistence, a flush or an evicting server): working on the records that remain",
                {"prefix": self.prefix, "location": self.location},
            )
            return
        if self.create:  # a crawl writes: a read-only command (an erasure) must reach what remains anywhere
            await self._check_eviction()
        await self._identify()
        await self.keep_alive()
        if await self._keeps_nothing_on_disk():
            logger.warning(
                "The Redis at %(location)s keeps nothing on disk (appendonly no, no save points): a restart "
                "empties the index, and the next crawl keeps every page again", {"location": self.location},
            )

    async def _check_eviction(self) -> None:
        """Refuse a server that evicts keys when full, unless ``allow_eviction`` (then say it, every time).

        An evicted key of the index is a lost record, a record id handed out again (its counter gone)
        or a lost identity, and no error tells.
        """
        how = await eviction(self.client)
        if how is None:
            return
        found = f"{self.location} evicts keys when its memory is full ({how})"
        if self.allow_eviction:
            logger.warning(
                "%(found)s and SIMHASH_ALLOW_EVICTION is on: pages, record ids and the index itself can be lost "
                "without a word, and copies kept as new pages", {"found": found},
            )
            return
        raise IndexOpenError(
            f"{found}: an evicted key loses index records or record ids without an error. {EVICTION_FIX}"
        )

    async def _identify(self) -> None:
        """Check the stored identity against this crawl's, writing it where it is missing."""
        identity = self._identity()
        schema, fingerprint, layout = await self._call(
            "identity", identity["schema"], identity["fingerprint"], identity["layout"]
        )
        stored = {"schema": schema, "fingerprint": fingerprint, "layout": layout}
        self._check_identity(
            {name: value.decode() for name, value in stored.items() if value is not None},
            f"index {self.prefix!r} at {self.location}",
        )

    async def _keeps_nothing_on_disk(self) -> bool:
        """Whether one server writes neither an append-only file nor RDB snapshots. False where it will
        not say (CONFIG renamed or refused, as managed services do) and on a cluster, whose nodes
        may each differ."""
        if self.cluster:
            return False
        try:
            config = await self.client.config_get("appendonly") | await self.client.config_get("save")
        except redis.exceptions.ResponseError:
            return False
        value = {_text(name): _text(setting) for name, setting in config.items()}
        return value.get("appendonly") == "no" and value.get("save") == ""

    async def check_and_add(self, record: Record, since: int = 0) -> Lookup:
        """The page's data goes with its lookup only while most recent lookups added theirs: a copy's
        would be encoded and sent for nothing; a new page found without it is asked for it."""
        sketch = record.sketch(self.layout)
        ready = self._new_share >= 0.5
        while True:
            data = await self._write_data(record) if ready else _NO_DATA
            head, *rows = await self._batched("check_add", since, sketch, int(ready), *self._record_args(record), *data)
            seq, added, this, earlier, stale, candidates = self._lookup_reply(head)  # best first
            if added != wire.NEEDS_DATA:
                break
            since, ready = seq, True  # judged up to seq: only newer records can stop the insert
        if added == wire.BUSY:
            return Lookup(None, [], seq, busy=True)
        self._new_share += NEW_SHARE_WEIGHT * ((1.0 if added else 0.0) - self._new_share)
        await self._forget(stale)
        if added:
            self._stored(record)
        best = candidates[:FIRST_READ] if rows else []  # their pages came along (none on a cluster)
        pages: dict[bytes, _Page | None] = {}
        for (key, blob), row in zip(_pages_of(best), rows, strict=True):
            _keep(pages, key, blob, self._page(key, row, blob))
        return Lookup(added or None, candidates, seq, (this, earlier), read=self._details(best, pages))

    async def details(self, candidates: list[Candidate]) -> list[Details | None]:
        """Candidates' data, made of their pages and their canonicals' (:func:`_pages_of`): what this
        crawl holds of them is not read again, all of it for its own records, the blob of those whose
        hashes it holds. A page whose hashes were let go between the read and its reply is read again."""
        wanted = dict(sorted(_pages_of(candidates), key=lambda page: page[1]))  # the blob, if any listing wants it
        pages: dict[bytes, _Page | None] = {}
        for key in wanted:
            if (held := self._kept.page(key)) is not None:
                pages[key] = _Page(*held)
        while len(found := self._details(candidates, pages)) < len(candidates):
            unread = [(key, blob) for key, blob in wanted.items() if not _resolved(pages, key, blob)]
            read = await self._read_pages([(key, blob and self._kept.get(key) is None) for key, blob in unread])
            for (key, blob), page in zip(unread, read, strict=True):
                _keep(pages, key, blob, page)
        return [found[c.key] for c in candidates]

    def _details(self, candidates: list[Candidate], pages: dict[bytes, _Page | None]) -> dict[bytes, Details | None]:
        """The candidates' data from their pages and their canonicals' (None for a candidate whose page is
        gone); a candidate a page of which is not in ``pages``, or whose hashes were let go, is left out."""
        out: dict[bytes, Details | None] = {}
        for candidate in candidates:
            page = pages.get(candidate.key, _LET_GO)
            if page is None:
                out[candidate.key] = None
                continue
            if page is _LET_GO or page.data is _LET_GO:
                continue
            head: _Page | None = page  # the candidate is its group's canonical
            if not candidate.canonical_key:
                head = None  # the group has no canonical record
            elif candidate.canonical_key != candidate.key:
                head = pages.get(candidate.canonical_key, _LET_GO)
                if head is _LET_GO:
                    continue
            hashes, whole = (page.data.hashes, page.data.whole) if page.data is not None else (None, SAME_TEXT)
            out[candidate.key] = Details(
                page.id, page.url, page.host, hashes, head.id if head else "", head.url if head else "", whole,
                page.first_seen, head.first_seen if head else 0.0,
            )
        return out

    def _page(self, key: bytes, row: bytes, blob: bool) -> _Page | None:
        """A page from its row (the stored page data, whole or without its blob): None when gone; with
        the hashes this crawl holds where the blob was not read (:data:`_LET_GO` if none now). Bytes
        that are not page data make a page of no id whose data is unreadable."""
        if row == wire.HELD:
            held = self._kept.page(key)
            return _LET_GO if held is None else _Page(*held)  # type: ignore[return-value]
        if not row:
            return None
        try:
            page = wire.read_page(row)
        except ValueError:
            return _Page(None, "", "", "", 0.0)
        data = self._verification(page.blob, key) if blob else (self._kept.get(key) or _LET_GO)
        return _Page(data, page.id.decode(), page.url.decode(), page.host.decode(), page.first_seen)

    async def _read_pages(self, wanted: list[tuple[bytes, bool]]) -> list[_Page | None]:
        """Pages by write id, with their blob where asked: through the function on one server, where a
        cluster keeps them (spread over the nodes, out of the function's reach) otherwise."""
        if not self.cluster:
            rows = await self._batched("details", *(arg for key, blob in wanted for arg in (key, int(blob))))
        else:
            rows = await self._data_rows([(self._data_key(key), blob) for key, blob in wanted])
        return [self._page(key, row, blob) for (key, blob), row in zip(wanted, rows, strict=True)]

    async def _data_rows(self, wanted: list[tuple[bytes, bool]]) -> list[bytes]:
        """Page data read by key, whole where ``True``, else up to the end of its fields at least (as
        ``page_row`` in redis.lua reads it): a first ``PAGE_READ`` bytes, more for a longer head."""
        async with self.client.pipeline(transaction=False) as pipe:
            for key, whole in wanted:
                if whole:
                    pipe.get(key)
                else:
                    pipe.getrange(key, 0, wire.PAGE_READ - 1)
            rows = [row or b"" for row in await pipe.execute()]
        longer = [(i, size) for i, row in enumerate(rows) if (size := wire.fields_end(row)) > len(row)]
        if longer:
            async with self.client.pipeline(transaction=False) as pipe:
                for i, size in longer:
                    pipe.getrange(wanted[i][0], 0, size - 1)
                for (i, _), row in zip(longer, await pipe.execute()):
                    rows[i] = row or b""
        return rows

    async def join(self, record: Record, matched: Candidate, banded: bool) -> Joined:
        sketch = record.sketch(self.layout)
        data = await self._write_data(record, banded)
        args = [record.fingerprint.to_bytes(8, "big"), *self._record_args(record)[1:5]]
        reply = await self._batched(
            "join", matched.rid, int(banded), sketch, *args, repr(self.retention.clock()), *data
        )
        rid, group, canonical, size, findable = map(int, wire.JOINED.unpack(reply))
        if rid == 0:
            raise GroupGone(f"record {matched.rid} is gone")
        if findable:
            self._stored(record)
        if self.cluster and not findable and record.blob_encoded:  # kept without the hashes its lookup wrote
            await self.client.set(self._data_key(record.write_id), self._page_fields(record), xx=True)
        return Joined(rid, group, canonical, size, bool(findable))

    async def check_and_add_exact(self, record: Record, digest: bytes) -> Exact:
        # A short text stripped of furniture keeps its data: a same-host holder is judged on the whole text.
        data = await self._write_data(record, banded=not record.whole.same)
        digest = digest[:16].ljust(16, b"\0")
        head, *_ = await self._batched("check_add_exact", digest, *self._record_args(record), *data)
        _, added, this, earlier, stale, candidates = self._lookup_reply(head)
        if added == wire.BUSY:
            return Exact(None, None, busy=True)
        await self._forget(stale)
        return Exact(added or None, candidates[0] if candidates else None, same_id=(this, earlier))

    async def remove(self, rid: int) -> bool:
        replies = await self._call("erase", rid)
        await self._forget([reply[4] for reply in replies])
        return bool(replies)

    async def release(self, record: Record) -> None:
        if self.cluster and not await self._find_own(record):
            await self._forget([record.write_id])

    async def _find_own(self, record: Record) -> bool:
        return any(entry[4] == record.write_id for entry in await self._call("find", handle(record.id)))

    async def confirm(self, rids: list[int]) -> None:
        if rids:
            await self._call("confirm", self.session, *rids)

    async def scraped(self, rids: list[int]) -> None:
        if rids:
            await self._call("scraped", self.session, *rids)

    async def records(self, key: str) -> list[StoredRecord]:
        return [stored for stored, _ in (await self._find(key))[0]]

    async def _find(self, key: str) -> tuple[list[tuple[StoredRecord, bytes]], list[tuple[int, bytes]]]:
        """The records under id or URL ``key``, each with the write id its data is kept under; and the
        (rid, write id) of those under its handle whose page data is gone (erased meanwhile, or lost)."""
        found = await self._call("find", handle(key))
        if not found:
            return [], []
        rows = await self._data_rows([(self._data_key(entry[4]), True) for entry in found])
        out, lost = [], []
        for (rid, gid, canonical, fingerprint, write_id, pending, _), row in zip(found, rows):
            try:
                page = wire.read_page(row)
            except ValueError:
                lost.append((rid, write_id))
                continue
            id_, url, host, retention = (field.decode() for field in page[:4])
            if key not in (id_, url):  # two keys whose 8-byte handles collide
                continue
            stored = StoredRecord(
                rid, gid, bool(canonical), id_, url, host, int.from_bytes(fingerprint, "big"), page.first_seen,
                retention, bool(pending), self._stored_hashes(page.blob),
            )
            out.append((stored, write_id))
        return sorted(out, key=lambda pair: pair[0].rid), lost

    async def erase(self, key: str) -> list[Erased]:
        """A record under ``key``'s handle whose page data is gone is erased too: nothing tells its id
        any more, and an erasure that leaves a record of the page is no erasure; a warning says so."""
        found, lost = await self._find(key)
        if not found and not lost:
            return []
        await self._forget([write_id for _, write_id in found] + [write_id for _, write_id in lost])
        replies = await self._call("erase", *(stored.rid for stored, _ in found), *(rid for rid, _ in lost))
        by_rid = {stored.rid: stored for stored, _ in found}
        unchecked = [reply for reply in replies if reply[0] not in by_rid]
        if unchecked:
            logger.warning(
                "%(count)d record(s) under the handle of %(key)r in %(location)s had lost their page data (id, URL, "
                "hashes), so their id could not be checked: erased by the handle alone",
                {"count": len(unchecked), "key": key, "location": self.location},
            )
        names = {stored.rid: (stored.id, stored.url) for stored in by_rid.values()}
        names.update({reply[0]: (key, "") for reply in unchecked})
        erased = []
        for rid, was_canonical, promoted_rid, promoted_key, _key in replies:
            promoted = None
            if promoted_rid in names:  # erased by this very call: its page data is gone
                promoted = names[promoted_rid][0]
            elif promoted_key:
                [row] = await self._data_rows([(self._data_key(promoted_key), False)])
                try:
                    promoted = wire.read_page(row).id.decode()
                except ValueError:  # gone meanwhile, or not page data
                    promoted = ""
            erased.append(Erased(*names[rid], bool(was_canonical), promoted))
        return erased

    async def expire(self) -> int:
        await self._check_eviction()  # a policy can change while a crawl runs
        erased = 0
        while True:
            due = await self._call("close_due", repr(self.retention.clock()), _EXPIRE_BATCH)
            for gid, *members in due:
                if self.cluster:
                    await self._forget([write_id for _, write_id in members])
                erased += len(await self._call("erase", *(rid for rid, _ in members)))
            if len(due) < _EXPIRE_BATCH:
                return erased

    async def _forget(self, write_ids: list[bytes]) -> None:
        """Delete page data the function cannot reach (a cluster's other nodes)."""
        if self.cluster and write_ids:
            async with self.client.pipeline(transaction=False) as pipe:
                for write_id in write_ids:
                    pipe.delete(self._data_key(write_id))
                await pipe.execute()

    async def load_boilerplate(self, host: str) -> bytes | None:
        return await self.client.hget(f"{self.prefix}:h:{host}", "b")

    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        key = f"{self.prefix}:h:{host}"
        if await self.client.hsetnx(key, "b", blob):  # the first set stored wins, atomically
            await self.client.hset(key, "v", version)  # for a person reading the key
            return blob
        return await self.load_boilerplate(host) or blob

    async def count(self) -> int:
        return int(await self.client.get(f"{self.prefix}:c") or 0)

    async def keep_alive(self) -> None:
        """Renew the lease; a renewal also puts back an identity key lost meanwhile (a flush)."""
        if self._leased:
            await self._identify()
        await self.client.set(self._lease_key, 1, px=max(1, round(self.lease * 1000)))
        self._leased = True

    async def close(self) -> None:
        try:
            if self._leased:
                await self.client.delete(self._lease_key)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException, OSError):
            pass  # the lease lapses by itself
        finally:
            self._leased = False
            await self.client.aclose()
