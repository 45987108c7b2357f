"""The embedded band index: one SQLite file (stdlib sqlite3, WAL), persistent across crawls.

Every statement runs on one dedicated thread so the reactor never blocks; check-and-add is one
``BEGIN IMMEDIATE`` transaction, so two processes sharing the file cannot both become canonical.
Schema in README "The band index".
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import numpy as np

from scrapy_simhash.index.base import Candidate, Index, Record
from scrapy_simhash.index.codec import decode_hashes, encode_hashes, to_signed, to_unsigned
from scrapy_simhash.index.retention import Retention
from scrapy_simhash.layout import Layout

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    fingerprint INTEGER NOT NULL,
    first_seen REAL NOT NULL,
    retention TEXT NOT NULL,
    expires REAL,
    digest TEXT UNIQUE,
    shingles BLOB NOT NULL,
    write_id BLOB
);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS urls (rid INTEGER NOT NULL, url TEXT NOT NULL, PRIMARY KEY (rid, url));
CREATE TABLE IF NOT EXISTS bands (
    tbl INTEGER NOT NULL,
    key INTEGER NOT NULL,
    rid INTEGER NOT NULL,
    fingerprint INTEGER NOT NULL,
    PRIMARY KEY (tbl, key, rid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS boilerplate (host TEXT PRIMARY KEY, version INTEGER NOT NULL, hashes BLOB NOT NULL)
    WITHOUT ROWID;
"""


class SQLiteIndex(Index):
    def __init__(self, path: str | Path, layout: Layout, retention: Retention) -> None:
        self.path = str(path)
        self.layout = layout
        self.retention = retention
        # One thread owns the connection: sqlite3 objects stay on the thread that made them and
        # statements never interleave, with no lock to get wrong.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simhash-sqlite")
        self._db: sqlite3.Connection | None = None
        try:
            self._executor.submit(self._connect).result()
        except BaseException:
            self._executor.submit(self._disconnect).result()
            self._executor.shutdown()
            raise

    def _connect(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN ourselves, so every transaction boundary is explicit.
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        if "write_id" not in {column for _, column, *_ in db.execute("PRAGMA table_info(records)")}:
            db.execute("ALTER TABLE records ADD COLUMN write_id BLOB")  # a file made before write ids
        self._db = db
        with self._transaction():
            row = db.execute("SELECT value FROM meta WHERE name = 'layout'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta VALUES ('layout', ?)", (repr(self.layout),))
            elif row[0] != repr(self.layout):
                raise ValueError(
                    f"index {self.path} was built with {row[0]}, not {self.layout!r}: "
                    "use the same SIMHASH_BANDS/SIMHASH_LAYOUT settings or a new index"
                )

    async def _run(self, fn: Callable[..., T], *args) -> T:
        return await asyncio.wrap_future(self._executor.submit(fn, *args))

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` takes the write lock up front, so a read-then-write of this process can
        never interleave with another process's; any error rolls the whole step back."""
        assert self._db is not None
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- the contract ------------------------------------------------------------------------------

    async def add(self, record: Record) -> None:
        await self._run(self._add_sync, record)

    async def candidates(self, fingerprint: int, max_distance: int) -> list[Candidate]:
        return await self._run(self._candidates_sync, fingerprint, max_distance)

    async def check_and_add(self, record: Record, max_distance: int) -> list[Candidate]:
        return await self._run(self._check_and_add_sync, record, max_distance)

    async def check_and_add_exact(self, record: Record, digest: str) -> str | None:
        return await self._run(self._check_and_add_exact_sync, record, digest)

    async def merge(self, canonical_id: str, url: str, first_seen: float) -> None:
        await self._run(self._merge_sync, canonical_id, url, first_seen)

    async def get(self, record_id: str) -> Record | None:
        return await self._run(self._get_sync, record_id)

    async def remove(self, record_id: str) -> bool:
        return await self._run(self._remove_sync, record_id)

    async def expire(self) -> int:
        return await self._run(self._expire_sync)

    async def load_boilerplate(self, host: str) -> tuple[int, np.ndarray] | None:
        return await self._run(self._load_boilerplate_sync, host)

    async def save_boilerplate(self, host: str, version: int, hashes: np.ndarray) -> None:
        blob = np.asarray(hashes, dtype="<u8").tobytes()
        await self._run(self._write, "INSERT OR REPLACE INTO boilerplate VALUES (?, ?, ?)", (host, version, blob))

    async def count(self) -> int:
        return await self._run(self._scalar, "SELECT COUNT(*) FROM records")

    async def close(self) -> None:
        if self._db is not None:
            await self._run(self._disconnect)
        self._executor.shutdown(wait=True)

    def _disconnect(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- on the sqlite thread ----------------------------------------------------------------------

    def _scalar(self, sql: str, params: tuple = ()):
        assert self._db is not None
        return self._db.execute(sql, params).fetchone()[0]

    def _write(self, sql: str, params: tuple) -> None:
        with self._transaction() as db:
            db.execute(sql, params)

    def _add_sync(self, record: Record) -> None:
        with self._transaction():
            self._store(record, digest=None, banded=True)

    def _check_and_add_sync(self, record: Record, max_distance: int) -> list[Candidate]:
        with self._transaction() as db:
            # Stored with this very write id: an earlier attempt of this call added it (retry).
            if db.execute(
                "SELECT 1 FROM records WHERE id = ? AND write_id = ?", (record.id, record.write_id)
            ).fetchone():
                return []
            found = self._candidates_sync(record.fingerprint, max_distance)
            if not found:
                self._store(record, digest=None, banded=True)
            return found

    def _check_and_add_exact_sync(self, record: Record, digest: str) -> str | None:
        with self._transaction() as db:
            row = db.execute("SELECT id, write_id FROM records WHERE digest = ?", (digest,)).fetchone()
            if row is None:
                self._store(record, digest=digest, banded=False)
                return None
            holder, write_id = row
            return None if (holder, write_id) == (record.id, record.write_id) else holder

    def _candidates_sync(self, fingerprint: int, max_distance: int) -> list[Candidate]:
        assert self._db is not None
        near: dict[int, tuple[int, int]] = {}
        for table, key in self.layout.probe_keys(fingerprint):
            rows = self._db.execute(
                "SELECT rid, fingerprint FROM bands WHERE tbl = ? AND key = ?", (table, to_signed(key))
            )
            for rid, stored in rows:
                stored = to_unsigned(stored)
                distance = (stored ^ fingerprint).bit_count()
                if distance <= max_distance:
                    near[rid] = (stored, distance)
        found = []
        for rid, (stored, distance) in near.items():
            record_id, blob = self._db.execute("SELECT id, shingles FROM records WHERE rid = ?", (rid,)).fetchone()
            found.append(Candidate(record_id, stored, distance, blob))
        found.sort(key=lambda c: (c.distance, c.record_id))
        return found

    def _store(self, record: Record, *, digest: str | None, banded: bool) -> None:
        """Insert or replace ``record`` inside the caller's transaction; URLs and first-seen merge."""
        assert self._db is not None
        db = self._db
        blob = encode_hashes(record.shingles)
        expires = self.retention.expiry(record.retention)
        old = db.execute("SELECT rid, fingerprint, first_seen FROM records WHERE id = ?", (record.id,)).fetchone()
        if old is None:
            rid = db.execute(
                "INSERT INTO records (id, fingerprint, first_seen, retention, expires, digest, shingles, write_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    to_signed(record.fingerprint),
                    record.first_seen,
                    record.retention,
                    expires,
                    digest,
                    blob,
                    record.write_id,
                ),
            ).lastrowid
        else:
            rid, old_fingerprint, old_first_seen = old
            self._unband(rid, to_unsigned(old_fingerprint))
            db.execute(
                "UPDATE records SET fingerprint = ?, first_seen = ?, retention = ?, expires = ?, digest = ?,"
                " shingles = ?, write_id = ? WHERE rid = ?",
                (
                    to_signed(record.fingerprint),
                    min(old_first_seen, record.first_seen),
                    record.retention,
                    expires,
                    digest,
                    blob,
                    record.write_id,
                    rid,
                ),
            )
        self._add_urls(rid, [record.url, *record.urls])
        if banded:
            fingerprint = to_signed(record.fingerprint)
            db.executemany(
                "INSERT OR IGNORE INTO bands VALUES (?, ?, ?, ?)",
                [(t, to_signed(key), rid, fingerprint) for t, key in self.layout.insert_keys(record.fingerprint)],
            )

    def _add_urls(self, rid: int, urls: Iterable[str]) -> None:
        assert self._db is not None
        self._db.executemany("INSERT OR IGNORE INTO urls VALUES (?, ?)", [(rid, u) for u in urls if u])

    def _unband(self, rid: int, fingerprint: int) -> None:
        assert self._db is not None
        self._db.executemany(
            "DELETE FROM bands WHERE tbl = ? AND key = ? AND rid = ?",
            [(t, to_signed(key), rid) for t, key in self.layout.insert_keys(fingerprint)],
        )

    def _merge_sync(self, canonical_id: str, url: str, first_seen: float) -> None:
        with self._transaction() as db:
            row = db.execute("SELECT rid, retention, expires FROM records WHERE id = ?", (canonical_id,)).fetchone()
            if row is None:
                logger.warning("merge into %r skipped: no such record (erased or expired)", canonical_id)
                return
            rid, retention, expires = row
            if retention in self.retention.classes:  # a class no longer configured keeps its expiry
                expires = self.retention.expiry(retention)
            db.execute(
                "UPDATE records SET first_seen = MIN(first_seen, ?), expires = ? WHERE rid = ?",
                (first_seen, expires, rid),
            )
            self._add_urls(rid, [url])

    def _get_sync(self, record_id: str) -> Record | None:
        assert self._db is not None
        row = self._db.execute(
            "SELECT rid, fingerprint, first_seen, retention, shingles FROM records WHERE id = ?", (record_id,)
        ).fetchone()
        if row is None:
            return None
        rid, fingerprint, first_seen, retention, blob = row
        urls = tuple(u for (u,) in self._db.execute("SELECT url FROM urls WHERE rid = ? ORDER BY rowid", (rid,)))
        return Record(
            id=record_id,
            fingerprint=to_unsigned(fingerprint),
            url=urls[0] if urls else "",
            first_seen=first_seen,
            retention=retention,
            shingles=decode_hashes(blob),
            urls=urls,
        )

    def _remove_sync(self, record_id: str) -> bool:
        with self._transaction():
            return self._erase(record_id)

    def _erase(self, record_id: str) -> bool:
        assert self._db is not None
        row = self._db.execute("SELECT rid, fingerprint FROM records WHERE id = ?", (record_id,)).fetchone()
        if row is None:
            return False
        rid, fingerprint = row
        self._unband(rid, to_unsigned(fingerprint))
        self._db.execute("DELETE FROM urls WHERE rid = ?", (rid,))
        self._db.execute("DELETE FROM records WHERE rid = ?", (rid,))
        return True

    def _expire_sync(self) -> int:
        with self._transaction() as db:
            due = db.execute(
                "SELECT id FROM records WHERE expires IS NOT NULL AND expires <= ?", (self.retention.clock(),)
            ).fetchall()
            for (record_id,) in due:
                self._erase(record_id)
        if due:
            logger.info("expired %(count)d records", {"count": len(due)})
        return len(due)

    def _load_boilerplate_sync(self, host: str) -> tuple[int, np.ndarray] | None:
        assert self._db is not None
        row = self._db.execute("SELECT version, hashes FROM boilerplate WHERE host = ?", (host,)).fetchone()
        if row is None:
            return None
        return row[0], np.frombuffer(row[1], dtype="<u8").astype(np.uint64)

