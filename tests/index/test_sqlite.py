"""SQLite-only behaviour: a file an earlier version built."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from pipeline_harness import finished_at_once, until
from samples import LAYOUT

from scrapy_simhash.index import open_index

# The tables of the schema before groups: one row per record, bands cut from the 64-bit fingerprint.
EARLIER = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE records (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, fingerprint INTEGER NOT NULL,
    first_seen REAL NOT NULL, retention TEXT NOT NULL, expires REAL, digest TEXT UNIQUE,
    shingles BLOB NOT NULL, write_id BLOB);
CREATE TABLE bands (tbl INTEGER NOT NULL, key INTEGER NOT NULL, rid INTEGER NOT NULL,
    fingerprint INTEGER NOT NULL, PRIMARY KEY (tbl, key, rid)) WITHOUT ROWID;
INSERT INTO records VALUES (1, 'a', 12345, 0, 'default', NULL, NULL, x'00', NULL);
"""


async def index_and_lock_holder(tmp_path, lock_wait: float | None = None):
    """An open SQLite index, and another connection (another process's) holding its write lock."""
    path = tmp_path / "index.db"
    index = open_index(f"sqlite:///{path}", layout=LAYOUT)
    await index.open()
    if lock_wait is not None:
        index.lock_wait = lock_wait
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return index, holder


async def test_a_file_of_an_earlier_version_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "index.db"
    db = sqlite3.connect(path)
    db.executescript(EARLIER)
    db.close()
    before = path.read_bytes()
    index = open_index(f"sqlite:///{path}", layout=LAYOUT)
    with pytest.raises(ValueError, match="built by an earlier version of scrapy-simhash; this version reads schema 7"):
        await index.open()
    await index.close()
    assert path.read_bytes() == before


async def test_a_file_of_schema_6_is_refused_and_left_as_it_was(tmp_path):
    """Schema 7 stores a record's verification data after its other columns: a schema 6 file's
    columns would be read in the wrong places."""
    path = tmp_path / "index.db"
    index = open_index(f"sqlite:///{path}", layout=LAYOUT)
    await index.open()
    await index.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '6' WHERE name = 'schema'")
    db.close()
    before = path.read_bytes()
    index = open_index(f"sqlite:///{path}", layout=LAYOUT)
    with pytest.raises(ValueError, match="has key schema 6 of scrapy-simhash; this version reads schema 7: build"):
        await index.open()
    await index.close()
    assert path.read_bytes() == before


async def test_calls_queued_behind_a_held_lock_wait_from_when_they_were_made(tmp_path):
    """Another process holding the write lock for minutes: each call waits at most ``lock_wait`` from
    when it was made, so the calls queued on the index's one thread meanwhile fail together, and
    the crawl passes its items on, instead of each waiting its own ``lock_wait`` in turn."""
    import time

    from samples import hashes, record

    index, holder = await index_and_lock_holder(tmp_path, lock_wait=1.0)
    calls = 20
    started = time.monotonic()
    results = await asyncio.gather(
        *(index.check_and_add(record(f"page-{n}", hashes(n))) for n in range(calls)), return_exceptions=True
    )
    waited = time.monotonic() - started
    holder.execute("ROLLBACK")
    assert all(isinstance(r, sqlite3.OperationalError) and "locked" in str(r) for r in results)
    assert waited < calls * index.lock_wait / 4  # one wait, not 20 in turn (20 s)
    assert (await index.check_and_add(record("page-0", hashes(0)))).added  # and the lock's end is seen
    await index.close()


def test_calls_still_queued_when_the_event_loop_stops_are_not_run(tmp_path):
    """A crawl stopped by force (a second Ctrl-C) stops the event loop with calls queued on the index's
    thread, and the interpreter's exit then runs that queue: a join run so would index a member whose
    merge the stopped loop never logs. Calls made on a loop that has stopped are not run."""
    from samples import hashes, record

    path = tmp_path / "index.db"
    loop = asyncio.new_event_loop()
    index = open_index(f"sqlite:///{path}", layout=LAYOUT)
    loop.run_until_complete(index.open())
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the first call waits for it: the others queue behind
    calls = [loop.create_task(index.check_and_add(record(f"page-{n}", hashes(n)))) for n in range(20)]
    loop.call_soon(loop.stop)  # after each call's first step has queued it on the thread
    loop.run_forever()
    holder.execute("ROLLBACK")
    index._executor.shutdown(wait=True)  # what the interpreter's exit does with a pool's queue
    [(records,)] = sqlite3.connect(path).execute("SELECT COUNT(*) FROM records")
    assert records <= 1  # the call the thread was running when the loop stopped
    for call in calls:
        call.cancel()
    loop.close()


async def test_a_wait_for_another_processs_write_lock_is_logged_with_its_cause(tmp_path, monkeypatch, caplog):
    """The lock held by another process while a crawl opens the index: after STALL_NOTICE seconds a
    warning names the file and the cause, before the call's whole wait ends (issue 43)."""
    import logging
    import subprocess
    import sys

    import scrapy_simhash.index.sqlite

    path = tmp_path / "index.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        monkeypatch.setattr(scrapy_simhash.index.sqlite, "STALL_NOTICE", 0.2)
        index = open_index(f"sqlite:///{path}", layout=LAYOUT)
        index.lock_wait = 1.0
        with caplog.at_level(logging.INFO), pytest.raises(sqlite3.OperationalError, match="locked"):
            await index.open()
        await index.close()
    finally:
        holder.communicate("")
    [said] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert str(path) in said.getMessage() and "write lock" in said.getMessage()
    assert "another process" in said.getMessage(), said.getMessage()


async def test_steps_queued_together_commit_once_and_one_that_fails_leaves_the_others(tmp_path):
    """An item's steps queued while the index's thread is busy run in one transaction: one commit for
    all. A step that fails is undone alone; the others' writes stand."""
    import time

    from samples import hashes, record

    from scrapy_simhash.index import Candidate, GroupGone

    index = open_index(f"sqlite:///{tmp_path / 'index.db'}", layout=LAYOUT)
    await index.open()
    statements: list[str] = []
    await index._run(index._db.set_trace_callback, statements.append)  # on the index's thread
    gone = Candidate(rid=999, group=999, canonical=999, fingerprint=0, equal=0, key=b"", canonical_key=b"")
    results = await asyncio.gather(
        index._run(time.sleep, 0.1),  # the thread is busy: the steps queue behind
        *(index.check_and_add(record(f"page-{n}", hashes(n))) for n in range(10)),
        index.join(record("copy", hashes(0)), gone, banded=True),
        *(index.check_and_add(record(f"page-{n}", hashes(n))) for n in range(10, 20)),
        return_exceptions=True,
    )
    results = results[1:]
    assert isinstance(results[10], GroupGone)
    assert all(lookup.added for lookup in results[:10] + results[11:])
    assert statements.count("COMMIT") == 1
    assert await index.count() == 20
    await index.close()


async def test_an_items_step_runs_at_once_while_the_thread_is_idle(tmp_path):
    """No hop to the index's thread and back: the item goes on in the same step of the loop (its
    coroutine finishes on its first send), and its response leaves Scrapy's scraper sooner."""
    from samples import hashes, record

    index = open_index(f"sqlite:///{tmp_path / 'index.db'}", layout=LAYOUT)
    await index.open()
    for n, expected in ((0, True), (0, False)):  # added, then found as its own copy
        lookup = finished_at_once(
            index.check_and_add(record(f"page-{n}", hashes(n)) if expected else record("copy", hashes(n)))
        )
        assert bool(lookup.added) is expected and bool(lookup.candidates) is not expected
    await index.close()


async def test_a_step_finding_another_processs_write_lock_waits_for_it_on_the_thread(tmp_path):
    """The loop never waits for a lock: the step's attempt at once is rolled back whole and the thread
    runs it once the lock is free, once."""
    from samples import hashes, record

    index, holder = await index_and_lock_holder(tmp_path)
    step = asyncio.ensure_future(index.check_and_add(record("page-0", hashes(0))))
    await until(lambda: index._draining is not None)  # its attempt at once found the lock: on to the thread
    holder.execute("ROLLBACK")
    lookup = await step
    assert lookup.added
    assert await index.count() == 1
    await index.close()


async def test_the_locks_end_is_said_when_the_next_step_runs_at_once(tmp_path, monkeypatch, caplog):
    """A wait for another process's lock was logged and its calls failed; the lock's end is said by
    whichever call next gets through, a step run at once on the loop included."""
    import logging

    import scrapy_simhash.index.sqlite
    from samples import hashes, record

    monkeypatch.setattr(scrapy_simhash.index.sqlite, "STALL_NOTICE", 0.1)
    index, holder = await index_and_lock_holder(tmp_path, lock_wait=0.5)
    with caplog.at_level(logging.INFO):
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await index.check_and_add(record("page-0", hashes(0)))
        holder.execute("ROLLBACK")
        assert (await index.check_and_add(record("page-1", hashes(1)))).added
    said = [r.getMessage() for r in caplog.records if r.name == "scrapy_simhash.index.sqlite"]
    assert len(said) == 2 and "write lock" in said[0] and "came free" in said[1], said
    await index.close()


async def test_steps_queued_while_the_thread_was_busy_run_on_the_loop_once_it_answers(tmp_path):
    """Under load the thread is rarely idle when a step is made: the steps queued behind its call run
    together on the loop as soon as it answers, in one transaction, instead of another hop."""
    import threading

    from samples import hashes, record

    index = open_index(f"sqlite:///{tmp_path / 'index.db'}", layout=LAYOUT)
    await index.open()
    commits: list[int] = []

    def trace(statement: str) -> None:
        if statement == "COMMIT":
            commits.append(threading.get_ident())

    await index._run(index._db.set_trace_callback, trace)
    on_thread, release = threading.Event(), threading.Event()

    def busy_thread() -> None:
        on_thread.set()
        release.wait()

    busy = asyncio.ensure_future(index._run(busy_thread))
    await until(on_thread.is_set)
    steps = [asyncio.ensure_future(index.check_and_add(record(f"page-{n}", hashes(n)))) for n in range(5)]
    await until(lambda: len(index._queued) == len(steps))  # the steps queue behind the thread's call
    release.set()
    await busy
    assert all(lookup.added for lookup in await asyncio.gather(*steps))
    assert commits == [threading.get_ident()]  # one transaction, on the loop's thread
    await index.close()
