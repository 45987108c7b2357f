"""The embedded index: one SQLite file (stdlib sqlite3, WAL), persistent across crawls.

Each step that reads then writes is one ``BEGIN IMMEDIATE`` transaction (a savepoint of one), so
processes sharing the file keep one canonical per group. An item's step runs at once, on the event
loop, while the index's thread is idle and no other process holds the write lock: it is a fraction
of a millisecond of SQLite's own work, and waiting for the thread's answer kept the item's response
in Scrapy's scraper and cost the crawl more than the step (docs/decisions/steps-at-once.md). Every
other call, and a step that would wait for the lock, runs on one dedicated thread so the reactor
never waits for another process; the items' steps queued while the thread is busy run together in
one transaction, one commit and one hop to the thread and back.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar


from scrapy_simhash.index.base import (
    FIRST_READ,
    LISTED_PER_KEY,
    MAX_BANDED_MEMBERS,
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
    Verification,
    best_first,
)
from scrapy_simhash.index.codec import to_signed, to_unsigned
from scrapy_simhash.whole_text import SAME_TEXT

__all__ = ["SQLiteIndex"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE records (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: "newer than since" is "rid > since"
    gid INTEGER NOT NULL,
    banded INTEGER NOT NULL,                -- findable by content: its band keys are in bands
    pending BLOB,                           -- the session whose item is not yet scraped (NULL once it is)
    session BLOB NOT NULL,
    id TEXT NOT NULL,
    url TEXT NOT NULL,
    host TEXT NOT NULL,
    fingerprint INTEGER NOT NULL,
    first_seen REAL NOT NULL,
    retention TEXT NOT NULL,
    write_id BLOB NOT NULL,
    digest BLOB,                            -- short texts, matched exactly
    sketch BLOB NOT NULL,
    hashes BLOB                             -- verification data of findable records only
);
-- hashes last: a page's kilobytes spill into overflow pages, which a read of the columns before them
-- does not walk. Indexed only where there is something to find: most records have no digest, and
-- a record's URL is its id unless SIMHASH_ID_FIELD names another field (_BY_KEY finds those by id).
-- Each index entry costs every insert (docs/decisions/sqlite-steps.md).
CREATE UNIQUE INDEX records_digest ON records (digest) WHERE digest IS NOT NULL;
CREATE INDEX records_id ON records (id);
CREATE INDEX records_url ON records (url) WHERE url != id;
CREATE INDEX records_gid ON records (gid);
CREATE TABLE groups (
    gid INTEGER PRIMARY KEY,
    canonical INTEGER NOT NULL,             -- 0: its canonical was erased and no findable member was left
    size INTEGER NOT NULL,
    banded INTEGER NOT NULL,
    ttl REAL,
    expires REAL
);
CREATE INDEX groups_expires ON groups (expires) WHERE expires IS NOT NULL;
CREATE TABLE bands (key BLOB NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (key, rid)) WITHOUT ROWID;
CREATE TABLE boilerplate (host TEXT PRIMARY KEY, version INTEGER NOT NULL, blob BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE sessions (session BLOB PRIMARY KEY, alive_until REAL NOT NULL) WITHOUT ROWID;
-- pending records whose items were scraped and wait for a feed to be stored: another live session
-- no longer waits for them
CREATE TABLE scraped (rid INTEGER PRIMARY KEY);
"""

# The records whose id or URL is the key (the URL index holds only those whose URL is not their id).
_BY_KEY = "(r.id = ?1 OR r.url = ?1 AND r.url != r.id)"
# A candidate, then its page data without the blob, and its canonical's (``_page_details``).
_CANDIDATE = (
    "SELECT r.rid, r.gid, g.canonical, r.fingerprint, r.sketch, c.pending, r.write_id, c.write_id,"
    " r.id, r.url, r.host, r.first_seen, c.id, c.url, c.first_seen"
    " FROM records r JOIN groups g ON g.gid = r.gid LEFT JOIN records c ON c.rid = g.canonical"
)


#: SQLite's result codes for a file whose pages are damaged, and for one that is no database.
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def _locked(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says another connection holds the write lock ("database is locked")."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says the file is damaged (by its result code, or its words before Python 3.11)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _CORRUPT_CODES
    return "malformed" in str(exc) or "not a database" in str(exc)


#: Seconds a call waits for another process's write lock: a crawl's transactions hold it for
#: milliseconds, so a longer wait is a lock held on purpose (an open sqlite3 shell, a backup).
LOCK_WAIT = 30.0
#: Seconds a call waits for another process's write lock before the wait is logged with its cause.
STALL_NOTICE = 5.0

logger = logging.getLogger(__name__)


class _Call(NamedTuple):
    """A call queued for the index's thread; ``together``: an item's step, run in the transaction of
    the other steps queued with it."""

    fn: Callable[..., Any]
    args: tuple
    future: asyncio.Future[Any] | None  # None: a step run at once, awaited by no one
    together: bool


class SQLiteIndex(Index):
    schema = 7
    transient_errors = (sqlite3.OperationalError,)  # "database is locked" and disk I/O hiccups

    def __init__(self, url: str, **options: Any) -> None:
        # As SQLAlchemy spells them: sqlite:///relative.db, sqlite:////absolute.db, sqlite:// in memory.
        path = url[len("sqlite://") :].removeprefix("/") or ":memory:"
        options.pop("key_prefix", None)  # Redis only
        super().__init__(location=f"sqlite:///{path}", **options)
        self.path = path
        # The connection is used by one thread at a time, with no lock to get wrong: the index's
        # thread, or the loop's for a step at once while the thread is idle (``_draining`` None).
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simhash-sqlite")
        self._db: sqlite3.Connection | None = None
        self._closed = False
        self.lock_wait = LOCK_WAIT
        self._busy_timeout = 0.0  # the connection's, in seconds
        self._stalled_since: float | None = None  # a wait for another process's lock that was logged
        self._queued: list[_Call] = []  # calls waiting for the thread, in order
        self._made = 0.0  # when the oldest of them was made
        # The loop whose calls the thread has, or is about to be given: a loop of its own (a test's
        # next one) hands its calls over itself, whatever became of a closed loop's.
        self._draining: asyncio.AbstractEventLoop | None = None
        self._in_steps = False  # the thread is running queued steps in one transaction

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._queue(fn, args, together=False)

    async def _step(self, fn: Callable[..., T], *args: Any) -> T:
        """An item's step: run in one transaction with the other steps queued with it."""
        return await self._queue(fn, args, together=True)

    async def _queue(self, fn: Callable[..., T], args: tuple, together: bool) -> T:
        """Calls queue while the thread is busy, and go to it together once it is free (or at the end of
        this turn of the loop): one hop each way for all of them, in the order they were made. An
        item's step made while the thread is idle runs at once."""
        loop = asyncio.get_running_loop()
        if together and self._draining is None and self._db is not None:
            outcomes = self._at_once([_Call(fn, args, None, together)])
            if outcomes is not None:
                [(ok, value)] = outcomes
                if ok:
                    return value
                raise value
        if not self._queued:
            self._made = time.monotonic()
        self._queued.append(_Call(fn, args, loop.create_future(), together))
        if self._draining is not loop:
            self._draining = loop
            loop.call_soon(self._drain, loop)
        return await self._queued[-1].future

    def _at_once(self, steps: list[_Call]) -> list[tuple[bool, Any]] | None:
        """On the loop, the thread idle (nothing queued for it or running there): the steps' outcomes,
        run now in one transaction; None, with nothing done, when another process holds the write lock
        (the transaction rolled back whole), for the thread to wait for it."""
        self._wait_for_lock(0.0)
        try:
            outcomes = self._together(steps)
        except sqlite3.DatabaseError as exc:
            if _locked(exc):
                return None
            raise self._checked(exc) from None
        self._lock_free()
        return outcomes

    def _outcome(self, call: _Call) -> tuple[bool, Any]:
        """A call's result or error (:class:`IndexCorrupt` for a damaged file); another process's lock is
        raised: the thread waits for it again, a step at once goes to the thread."""
        try:
            return True, call.fn(*call.args)
        except sqlite3.DatabaseError as exc:
            if _locked(exc):
                raise
            return False, self._checked(exc)
        except Exception as exc:
            return False, exc

    def _checked(self, exc: sqlite3.DatabaseError) -> Exception:
        """What a database error raises: :class:`IndexCorrupt` for a damaged file, else the error."""
        return IndexCorrupt(f"{self.location} is corrupt ({exc})") if _corrupt(exc) else exc

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop: the queued calls go to the thread; steps alone, queued while it was busy, run
        at once instead, so that the thread's answer ends the items' waits (docs/decisions/steps-at-once.md)."""
        calls, self._queued = self._queued, []
        if not calls:
            self._draining = None
            return
        if self._db is not None and all(call.together for call in calls):
            try:
                outcomes = self._at_once(calls)
            except Exception as exc:  # the transaction itself failed (a corrupt file): each step takes the error
                outcomes = [(False, exc)] * len(calls)
            if outcomes is not None:
                self._draining = None
                self._settle(calls, outcomes)
                return
        try:
            self._executor.submit(self._run_calls, loop, self._made, calls)
        except RuntimeError as exc:  # the index is closed
            self._answer(loop, calls, [(False, exc)] * len(calls))

    def _answer(self, loop: asyncio.AbstractEventLoop, calls: list[_Call], outcomes: list[tuple[bool, Any]]) -> None:
        """On the loop: each call's result or exception; then the calls queued meanwhile are drained."""
        self._settle(calls, outcomes)
        self._drain(loop)

    @staticmethod
    def _settle(calls: list[_Call], outcomes: list[tuple[bool, Any]]) -> None:
        for call, (ok, value) in zip(calls, outcomes, strict=True):
            if call.future is not None and not call.future.done():  # not cancelled
                if ok:
                    call.future.set_result(value)
                else:
                    call.future.set_exception(value)

    def _run_calls(self, loop: asyncio.AbstractEventLoop, made: float, calls: list[_Call]) -> None:
        """On the thread: the calls in order, each run of steps in one transaction; the answers go back
        to the loop in one callback. A call that could not run takes the error that stopped it."""
        outcomes: list[tuple[bool, Any]] = []
        try:
            self._in_time(loop, made, self._each, calls, outcomes)
        except Exception as exc:
            outcomes += [(False, exc)] * (len(calls) - len(outcomes))
        try:  # a stopped loop gets them when it runs again
            loop.call_soon_threadsafe(self._answer, loop, calls, outcomes)
        except RuntimeError:  # the loop is closed: nothing waits for them
            pass

    def _each(self, calls: list[_Call], outcomes: list[tuple[bool, Any]]) -> None:
        """The calls from the first without an outcome: run again after a wait for another process's
        lock, it resumes at the transaction the lock stopped (rolled back whole)."""
        while len(outcomes) < len(calls):
            start = len(outcomes)
            end = start + 1
            while calls[start].together and end < len(calls) and calls[end].together:
                end += 1
            outcomes += self._together(calls[start:end])

    def _together(self, steps: list[_Call]) -> list[tuple[bool, Any]]:
        """Each step in a savepoint of one transaction: a step that fails leaves the others' writes;
        none stands unless the commit does."""
        if len(steps) == 1:
            return [self._outcome(steps[0])]
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        self._in_steps = True
        try:
            outcomes = [self._outcome(call) for call in steps]
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            self._in_steps = False
        return outcomes

    def _in_time(self, loop: asyncio.AbstractEventLoop, made: float, fn: Callable[..., T], *args: Any) -> T:
        """On the thread: ``fn``, waiting for another process's lock until ``lock_wait`` after the call
        was ``made``. Calls queue on the one thread, so a lock held for minutes would otherwise cost
        every queued call a whole wait in turn, and the crawl would stop instead of passing its items
        on; this way the calls queued behind a wait fail with it.

        Not run once the loop that made the call has stopped (a crawl stopped by force): the
        interpreter's exit runs the queue, and nothing would act on the answer, such as log a join.
        """
        if not loop.is_running():
            raise RuntimeError("the event loop that made this index call has stopped")
        left = round(max(0.0, made + self.lock_wait - time.monotonic()), 1)
        first = left if self._stalled_since is not None else min(left, STALL_NOTICE)
        self._wait_for_lock(first)
        try:
            try:
                result = fn(*args)
            except sqlite3.OperationalError as exc:
                if first >= left or not _locked(exc):
                    raise
                self._stalled(made, left - first)
                self._wait_for_lock(round(max(0.0, made + self.lock_wait - time.monotonic()), 1))
                result = fn(*args)  # the failed attempt rolled back whole: nothing is done twice
        except sqlite3.DatabaseError as exc:
            checked = self._checked(exc)
            if checked is exc:
                raise
            raise checked from None
        self._lock_free()
        return result

    def _lock_free(self) -> None:
        """A call got through: the end of a logged wait for another process's lock is said."""
        if self._stalled_since is not None:
            logger.info("SQLite index %(location)s: the write lock came free after %(seconds).0f s",
                        {"location": self.location, "seconds": time.monotonic() - self._stalled_since})
            self._stalled_since = None

    def _wait_for_lock(self, seconds: float) -> None:
        """The connection's busy timeout (or the next connection's): a PRAGMA costs ~5 us, most calls keep it."""
        if seconds != self._busy_timeout:
            if self._db is not None:
                self._db.execute(f"PRAGMA busy_timeout = {round(seconds * 1000)}")
            self._busy_timeout = seconds

    def _stalled(self, made: float, more: float) -> None:
        """Say once, while it lasts, why the crawl waits: SQLite itself waits without a word."""
        self._stalled_since = made
        logger.warning(
            "SQLite index %(location)s: another process holds the file's write lock (another crawl writing, an open "
            "sqlite3 shell, a backup); waiting %(more).0f s more for it, after which the items waiting pass on "
            "unchecked", {"location": self.location, "more": more},
        )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` takes the write lock up front, so a read-then-write of this process can
        never interleave with another process's; any error rolls the whole step back (to its savepoint,
        among steps run together)."""
        db = self._connection()
        if self._in_steps:
            db.execute("SAVEPOINT step")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK TO step")
                db.execute("RELEASE step")
                raise
            db.execute("RELEASE step")
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the index is not open (await index.open() first)")
        return self._db

    # -- the contract ------------------------------------------------------------------------------

    async def open(self) -> None:
        await self._run(self._open)

    async def check_and_add(self, record: Record, since: int = 0) -> Lookup:
        sketch = record.sketch(self.layout)
        lookup, pages = await self._step(self._check_and_add, record, sketch, since)
        if lookup.added is not None:
            self._stored(record)
        # The best candidates whose verification data this crawl holds come with their page data,
        # read in the lookup's own query: their details need no step (docs/decisions/sqlite-steps.md).
        read = {
            c.key: self._page_details(pages[c.key], data)
            for c in lookup.candidates[:FIRST_READ]
            if (data := self._kept.get(c.key)) is not None
        }
        return lookup._replace(read=read) if read else lookup

    async def details(self, candidates: list[Candidate]) -> list[Details | None]:
        held = [self._kept.get(c.key) for c in candidates]
        wanted = [(c.rid, c.canonical, data is None) for c, data in zip(candidates, held, strict=True)]
        rows = await self._step(self._details, wanted)
        return [
            None if row is None else self._page_details(row[:-1], data or self._verification(row[-1], c.key))
            for row, c, data in zip(rows, candidates, held, strict=True)
        ]

    @staticmethod
    def _page_details(page: tuple, data: Verification | None) -> Details:
        """Details of a page row (id, url, host, first seen, its canonical's id, url and first seen:
        ``_CANDIDATE``'s last columns, ``_details``'s) and its verification data."""
        id_, url, host, seen, head_id, head_url, head_seen = page
        hashes, whole = (None, SAME_TEXT) if data is None else data
        if head_id is None:  # the group has no canonical left
            head_id, head_url, head_seen = "", "", 0.0
        return Details(id_, url, host, hashes, head_id, head_url, whole, seen, head_seen)

    async def join(self, record: Record, matched: Candidate, banded: bool) -> Joined:
        sketch = record.sketch(self.layout)
        joined = await self._step(self._join, record, sketch, matched.rid, banded)
        if joined.banded:
            self._stored(record)
        return joined

    async def check_and_add_exact(self, record: Record, digest: bytes) -> Exact:
        return await self._step(self._check_and_add_exact, record, digest)

    async def confirm(self, rids: list[int]) -> None:
        if rids:
            await self._step(self._confirm, rids)

    async def scraped(self, rids: list[int]) -> None:
        if rids:
            await self._step(self._scraped, rids)

    async def remove(self, rid: int) -> bool:
        return await self._run(self._remove, rid)

    async def records(self, key: str) -> list[StoredRecord]:
        return await self._run(self._records, key)

    async def erase(self, key: str) -> list[Erased]:
        return await self._run(self._erase_key, key)

    async def expire(self) -> int:
        return await self._run(self._expire)

    async def load_boilerplate(self, host: str) -> bytes | None:
        row = await self._run(self._one, "SELECT blob FROM boilerplate WHERE host = ?", (host,))
        return None if row is None else row[0]

    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        await self._run(self._write, "INSERT OR IGNORE INTO boilerplate VALUES (?, ?, ?)", (host, version, blob))
        return await self.load_boilerplate(host) or blob

    async def count(self) -> int:
        return (await self._run(self._one, "SELECT COUNT(*) FROM records", ()))[0]

    async def keep_alive(self) -> None:
        await self._run(self._keep_alive)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._run(self._close)
        self._executor.shutdown(wait=True)

    # -- on the sqlite thread ----------------------------------------------------------------------

    def _open(self) -> None:
        if self.path != ":memory:":
            if not self.create and not Path(self.path).exists():
                raise IndexNotFound(f"no index at {self.location}")
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: we issue BEGIN ourselves, so every transaction boundary is explicit.
            # check_same_thread=False: a step at once runs on the loop's thread.
            db = self._db = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
            )
            db.execute("SELECT COUNT(*) FROM sqlite_master")
        except (OSError, sqlite3.Error) as exc:
            self._disconnect()
            if isinstance(exc, sqlite3.DatabaseError) and _corrupt(exc):
                raise
            raise IndexOpenError(f"cannot open {self.path}: {exc}") from None
        try:
            with self._transaction():
                if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0:
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        db.execute(statement)
                    db.executemany("INSERT INTO meta VALUES (?, ?)", self._identity().items())
                has_meta = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone()
                stored = dict(db.execute("SELECT name, value FROM meta")) if has_meta else {}
                self._check_identity(stored, f"index {self.location}")
            # Only once the file is known to be ours: a refused file is left as it was.
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA secure_delete=ON")  # erased pages are overwritten, not left in free pages
            self._keep_alive()
        except BaseException:
            self._disconnect()
            raise

    def _keep_alive(self) -> None:
        self._write(
            "INSERT OR REPLACE INTO sessions VALUES (?, ?)", (self.session, self.retention.clock() + self.lease)
        )

    def _close(self) -> None:
        if self._db is not None:
            self._write(
                "DELETE FROM sessions WHERE session = ? OR alive_until < ?", (self.session, self.retention.clock())
            )
        self._disconnect()

    def _disconnect(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _one(self, sql: str, params: tuple) -> Any:
        return self._connection().execute(sql, params).fetchone()

    def _write(self, sql: str, params: tuple) -> None:
        with self._transaction() as db:
            db.execute(sql, params)

    @staticmethod
    def _candidate(row: tuple, equal: int) -> Candidate:
        """A ``_CANDIDATE`` row's candidate, sharing ``equal`` sketch bytes with the lookup's record."""
        rid, gid, canonical, fingerprint, _sketch, _canonical_pending, key, canonical_key = row[:8]
        return Candidate(rid, gid, canonical, to_unsigned(fingerprint), equal, key, canonical_key or b"")

    def _crashed(self, pending: bytes | None) -> bool:
        """A record pending in another session whose lease lapsed: a crashed crawl's item, never scraped."""
        return pending is not None and pending != self.session and not self._live(pending)

    def _live(self, session: bytes) -> bool:
        row = self._one("SELECT alive_until FROM sessions WHERE session = ?", (session,))
        return row is not None and row[0] > self.retention.clock()

    def _under_id(self, record: Record) -> list[tuple]:
        """The one read of the records under this id a step needs (``_own_write``, ``_same_id``,
        ``_insert``), oldest first: rid, gid, write id, pending, session, scraped."""
        return self._connection().execute(
            "SELECT r.rid, r.gid, r.write_id, r.pending, r.session, s.rid IS NOT NULL FROM records r"
            " LEFT JOIN scraped s ON s.rid = r.rid WHERE r.id = ? ORDER BY r.rid", (record.id,)
        ).fetchall()

    def _own_write(self, record: Record, same: list[tuple]) -> tuple[int | None, bool]:
        """Of the records under this id (``same``): the one this very call added on an earlier attempt
        (its reply was lost), if any; else whether one is pending in another live session (the same
        page is in flight there)."""
        for rid, _, write_id, *_ in same:
            if write_id == record.write_id:
                return rid, False
        return None, any(
            p is not None and not scraped and p != self.session and self._live(p) for *_, p, _, scraped in same
        )

    def _check_and_add(self, record: Record, sketch: bytes, since: int) -> tuple[Lookup, dict[bytes, tuple]]:
        """The lookup, and the candidates' page rows by key (``_page_details``)."""
        with self._transaction() as db:
            (seq,) = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone() or (0,)
            same = self._under_id(record)
            mine, held = self._own_write(record, same)
            if mine is not None:
                return Lookup(mine, [], seq), {}
            if held:
                return Lookup(None, [], seq, busy=True), {}
            keys = self._bucket_keys(sketch)
            marks = ",".join("?" * len(keys))
            # A group whose canonical is a crashed crawl's page is joined by no page: its copies were
            # dropped for a page that never reached the feed. This page starts a group of its own (or,
            # being that page, takes its record's place: _insert).
            candidates, pages = [], {}
            for row in db.execute(
                f"{_CANDIDATE} WHERE r.rid IN (SELECT rid FROM bands WHERE key IN ({marks}) AND rid > ?)",
                (*keys, since),
            ).fetchall():
                equal = self.layout.equal(row[4], sketch)
                if equal >= self.layout.min_equal and not self._crashed(row[5]):
                    candidates.append(self._candidate(row, equal))
                    pages[row[6]] = row[8:]
            if candidates:
                return Lookup(None, best_first(candidates), seq, self._same_id(same)), pages
            rid = self._insert(record, sketch, same, digest=None)
            return Lookup(rid, [], seq, self._same_id(same)), {}

    def _same_id(self, same: list[tuple]) -> tuple[int, int]:
        """Of the records under an id (``same``), the live ones, (this session's, earlier sessions'),
        stale ones left out."""
        this = earlier = 0
        for *_, pending, session, _ in same:
            if pending is not None and pending != self.session:
                continue
            if session == self.session:
                this += 1
            else:
                earlier += 1
        return this, earlier

    def _insert(self, record: Record, sketch: bytes, same: list[tuple], digest: bytes | None) -> int:
        """Add ``record`` as a group's canonical (pending), in the caller's transaction. A stale
        pending record under this id (of ``same``: a crashed crawl's) is replaced: the new one takes
        its group (the first one's, when the crashed crawl indexed the id more than once)."""
        db = self._connection()
        gid = None
        for rid, old_gid, _, pending, *_ in same:
            if pending is not None and pending != self.session:
                canonical, size = db.execute("SELECT canonical, size FROM groups WHERE gid = ?", (old_gid,)).fetchone()
                # of several such groups, the new record takes one over: the first
                handed_over = gid is None and canonical == rid and size > 1
                self._erase_rid(rid, handed_over=handed_over)
                if handed_over:
                    gid = old_gid
        banded = digest is None
        rid = self._store(record, sketch, gid or 0, banded=banded, digest=digest, pending=True)
        ttl = self.retention.ttl(record.retention)
        if gid is None:
            gid = rid
            db.execute("UPDATE records SET gid = ? WHERE rid = ?", (gid, rid))
            db.execute(
                "INSERT INTO groups VALUES (?, ?, 1, 0, ?, ?)", (gid, rid, ttl, self._expiry(ttl))
            )
        else:
            db.execute(
                "UPDATE groups SET canonical = ?, size = size + 1, ttl = ?, expires = ? WHERE gid = ?",
                (rid, ttl, self._expiry(ttl), gid),
            )
        return rid

    def _expiry(self, ttl: float | None) -> float | None:
        return None if ttl is None else self.retention.clock() + ttl

    def _store(
        self, record: Record, sketch: bytes, gid: int, *, banded: bool, digest: bytes | None, pending: bool
    ) -> int:
        db = self._connection()
        rid = db.execute(
            "INSERT INTO records (gid, banded, pending, session, id, url, host, fingerprint, sketch, hashes, digest,"
            " first_seen, retention, write_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                gid,
                int(banded),
                self.session if pending else None,
                self.session,
                record.id,
                record.url,
                record.host,
                to_signed(record.fingerprint),
                sketch,
                record.blob() if banded or digest is not None and not record.whole.same else None,
                digest,
                record.first_seen,
                record.retention,
                record.write_id,
            ),
        ).lastrowid
        if banded:
            self._enband(rid, gid, sketch)
        return rid

    def _bucket_keys(self, sketch: bytes) -> list[bytes]:
        return [bytes([band]) + key for band, key in enumerate(self.layout.band_keys(sketch))]

    def _enband(self, rid: int, gid: int, sketch: bytes, only: set[bytes] | None = None) -> None:
        """List record ``rid`` under those of its band keys (of ``only``, or all) that fewer than
        LISTED_PER_KEY records of its group are listed under (base.py says why), and under its last
        key when it would be under none: a copy of its text must find it (redis.lua ``enband``)."""
        db = self._connection()
        keys = self._bucket_keys(sketch)
        wanted = [key for key in keys if only is None or key in only]
        listed = 0
        if wanted:  # one statement for all of them: a statement run costs more than its work here
            values = ",".join(f"(?{4 + n})" for n in range(len(wanted)))
            listed = db.execute(
                f"INSERT OR IGNORE INTO bands SELECT k.column1, ?1 FROM (VALUES {values}) k WHERE (SELECT COUNT(*)"
                " FROM bands b JOIN records r ON r.rid = b.rid WHERE b.key = k.column1 AND r.gid = ?2) < ?3",
                (rid, gid, LISTED_PER_KEY, *wanted),
            ).rowcount
        if only is None and not listed:
            db.execute("INSERT INTO bands VALUES (?, ?)", (keys[-1], rid))

    def _details(self, wanted: list[tuple[int, int, bool]]) -> list[tuple | None]:
        """Page rows (``_page_details``) of records by (rid, canonical, whether to read the blob too,
        last); None for a record gone."""
        db = self._connection()
        out: list[tuple | None] = []
        for rid, canonical, blob in wanted:
            out.append(db.execute(
                f"SELECT r.id, r.url, r.host, r.first_seen, c.id, c.url, c.first_seen, {'r.hashes' if blob else 'NULL'}"
                " FROM records r LEFT JOIN records c ON c.rid = ? WHERE r.rid = ?", (canonical, rid)
            ).fetchone())
        return out

    def _join(self, record: Record, sketch: bytes, matched: int, banded: bool) -> Joined:
        with self._transaction() as db:
            mine = db.execute(
                "SELECT r.rid, r.gid, g.canonical, g.size, r.banded FROM records r JOIN groups g ON g.gid = r.gid"
                " WHERE r.id = ? AND r.write_id = ?",
                (record.id, record.write_id),
            ).fetchone()
            if mine is not None:  # an earlier attempt of this very call joined it
                return Joined(*mine[:4], bool(mine[4]))
            row = db.execute(
                "SELECT g.gid, g.canonical, g.banded, g.ttl FROM records r JOIN groups g ON g.gid = r.gid"
                " WHERE r.rid = ?",
                (matched,),
            ).fetchone()
            if row is None or row[1] == 0:
                raise GroupGone(f"record {matched} is gone")
            gid, canonical, findable, ttl = row
            banded = banded and findable < MAX_BANDED_MEMBERS
            rid = self._store(record, sketch, gid, banded=banded, digest=None, pending=False)
            db.execute(
                "UPDATE groups SET size = size + 1, banded = banded + ?, expires = ? WHERE gid = ?",
                (int(banded), self._expiry(ttl), gid),
            )
            (size,) = db.execute("SELECT size FROM groups WHERE gid = ?", (gid,)).fetchone()
            return Joined(rid, gid, canonical, size, banded)

    def _check_and_add_exact(self, record: Record, digest: bytes) -> Exact:
        with self._transaction() as db:
            same = self._under_id(record)
            mine, held = self._own_write(record, same)
            if mine is not None:
                return Exact(mine, None)
            if held:
                return Exact(None, None, busy=True)
            row = db.execute(f"{_CANDIDATE} WHERE r.digest = ?", (digest,)).fetchone()
            if row is not None and row[2] != 0 and not self._crashed(row[5]):
                return Exact(None, self._candidate(row, self.layout.size), same_id=self._same_id(same))
            if row is not None:  # a crashed crawl's group, or one left without canonical: the text starts anew
                db.execute("UPDATE records SET digest = NULL WHERE rid = ?", (row[0],))
            same_id = self._same_id(same)
            return Exact(self._insert(record, b"", same, digest=digest), None, same_id=same_id)

    def _confirm(self, rids: list[int]) -> None:
        with self._transaction() as db:
            db.executemany(
                "UPDATE records SET pending = NULL WHERE rid = ? AND pending = ?", [(rid, self.session) for rid in rids]
            )
            db.executemany("DELETE FROM scraped WHERE rid = ?", [(rid,) for rid in rids])

    def _scraped(self, rids: list[int]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO scraped SELECT rid FROM records WHERE rid = ? AND pending = ?",
                [(rid, self.session) for rid in rids],
            )

    def _records(self, key: str) -> list[StoredRecord]:
        rows = self._connection().execute(
            "SELECT r.rid, r.gid, g.canonical = r.rid, r.id, r.url, r.host, r.fingerprint, r.first_seen, r.retention,"
            " r.pending IS NOT NULL, r.hashes FROM records r JOIN groups g ON g.gid = r.gid"
            f" WHERE {_BY_KEY} ORDER BY r.rid",
            (key,),
        )
        return [
            StoredRecord(
                rid, gid, bool(canonical), id_, url, host, to_unsigned(fp), first_seen, retention, bool(pending),
                self._stored_hashes(blob),
            )
            for rid, gid, canonical, id_, url, host, fp, first_seen, retention, pending, blob in rows
        ]

    def _remove(self, rid: int) -> bool:
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM records WHERE rid = ?", (rid,)).fetchone() is None:
                return False
            self._erase_rid(rid)
        self._checkpoint()
        return True

    def _erase_key(self, key: str) -> list[Erased]:
        with self._transaction() as db:
            rids = [rid for (rid,) in db.execute(f"SELECT r.rid FROM records r WHERE {_BY_KEY}", (key,))]
            erased = [self._erase_rid(rid) for rid in rids]
        self._checkpoint()
        return erased

    def _erase_rid(self, rid: int, *, whole_group: bool = False, handed_over: bool = False) -> Erased:
        """Erase one record in the caller's transaction; its group keeps its other members, which take
        over the band keys it was listed under, and its earliest findable member becomes canonical if
        the canonical goes. ``whole_group``: every member goes in this transaction (nothing to take over);
        ``handed_over``: the caller makes a new record the canonical (no member is promoted)."""
        db = self._connection()
        gid, banded, sketch, id_, url = db.execute(
            "SELECT gid, banded, sketch, id, url FROM records WHERE rid = ?", (rid,)
        ).fetchone()
        released = set()
        if banded:
            delete = "DELETE FROM bands WHERE key = ? AND rid = ?"
            released = {key for key in self._bucket_keys(sketch) if db.execute(delete, (key, rid)).rowcount}
        db.execute("DELETE FROM records WHERE rid = ?", (rid,))
        db.execute("DELETE FROM scraped WHERE rid = ?", (rid,))
        if released and not whole_group:
            members = db.execute("SELECT rid, sketch FROM records WHERE gid = ? AND banded = 1 ORDER BY rid", (gid,))
            for member, member_sketch in members.fetchall():
                self._enband(member, gid, member_sketch, released)
        canonical, size = db.execute("SELECT canonical, size FROM groups WHERE gid = ?", (gid,)).fetchone()
        was_canonical = canonical == rid
        if size <= 1:
            db.execute("DELETE FROM groups WHERE gid = ?", (gid,))
            return Erased(id_, url, was_canonical, None)
        members = int(banded and not was_canonical)  # findable members the group loses
        promoted = None
        if was_canonical and handed_over:
            canonical = 0
        elif was_canonical:
            heir = db.execute(
                "SELECT rid, id FROM records WHERE gid = ? AND banded = 1 ORDER BY rid LIMIT 1", (gid,)
            ).fetchone()
            if heir is not None:
                canonical, promoted = heir
                members += 1
            else:
                canonical = 0
        db.execute(
            "UPDATE groups SET canonical = ?, size = size - 1, banded = banded - ? WHERE gid = ?",
            (canonical, members, gid),
        )
        return Erased(id_, url, was_canonical, promoted)

    def _expire(self) -> int:
        with self._transaction() as db:
            due = [
                gid
                for (gid,) in db.execute(
                    "SELECT gid FROM groups WHERE expires IS NOT NULL AND expires <= ?", (self.retention.clock(),)
                )
            ]
            erased = 0
            for gid in due:
                for (rid,) in db.execute("SELECT rid FROM records WHERE gid = ?", (gid,)).fetchall():
                    self._erase_rid(rid, whole_group=True)
                    erased += 1
        if erased:
            self._checkpoint()
        return erased

    def _checkpoint(self) -> None:
        """Copy the WAL into the file and empty it: erased rows must not outlive the erase in the WAL."""
        self._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
