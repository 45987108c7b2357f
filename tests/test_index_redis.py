"""Redis-only behaviour, each on a throwaway server of its own: script cache loss, key schema, layouts."""

from __future__ import annotations

import asyncio
import json
import random
import signal

import numpy as np
import pytest
import redis

from scrapy_simhash.index import Record, open_index
from scrapy_simhash.index.redis import _IN_FLIGHT
from scrapy_simhash.layout import BlockLayout, SampledLayout

pytestmark = pytest.mark.redis


def _records(count: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    return [
        Record(id=f"r:{i} ü", fingerprint=rng.getrandbits(64), url=f"https://example.com/{i}",
               shingles=np.arange(i, dtype=np.uint32))
        for i in range(count)
    ]


async def test_a_flushed_script_cache_is_reloaded(throwaway_redis):
    index = open_index(throwaway_redis.url, spider="s")
    first, second = _records(2, seed=1)
    second.fingerprint = first.fingerprint ^ 0b101
    assert await index.check_and_add(first, 3) == []
    admin = throwaway_redis.client()
    admin.script_flush()
    assert admin.script_exists(index._script.sha) == [False]
    [candidate] = await index.check_and_add(second, 3)
    assert (candidate.record_id, candidate.distance) == (first.id, 2)
    assert await index.remove(first.id)
    # Every call in flight answers NOSCRIPT after a flush: one load serves them all.
    admin.script_flush()
    admin.config_resetstat()
    others = _records(12, seed=13)
    assert await asyncio.gather(*(index.check_and_add(record, 3) for record in others)) == [[]] * 12
    stats = admin.info("commandstats")
    assert stats["cmdstat_script|load"]["calls"] == 1 and stats["cmdstat_evalsha"]["failed_calls"] == 12
    admin.close()
    await index.close()


async def test_every_key_is_under_the_prefix_and_its_hash_tag(throwaway_redis):
    index = open_index(throwaway_redis.url, spider="news", retention={"default": None, "short": 60})
    for record in _records(20, seed=2):
        record.retention = "short"
        await index.add(record)
    await index.check_and_add_exact(Record(id="exact", fingerprint=7), "digest")
    await index.save_boilerplate("example.com", 1, np.arange(3, dtype=np.uint64))
    admin = throwaway_redis.client()
    keys = [key.decode() for key in admin.scan_iter(count=1000)]
    assert keys and all(key.startswith("simhash:{news}:") for key in keys)
    kinds = {key.split(":")[2] for key in keys}
    assert kinds == {"b", "f", "r", "e", "x", "n", "h", "meta"}
    buckets = {key for key in keys if key.split(":")[2] == "b"}
    assert buckets == {f"simhash:{{news}}:b:{table}" for table in range(4)}  # one hash per table
    assert all(admin.type(key) == b"hash" and admin.hlen(key) == 21 for key in buckets)  # + the marker
    admin.close()
    await index.close()


@pytest.mark.parametrize(
    "layout",
    [
        BlockLayout(bands=1),
        BlockLayout(bands=5),
        BlockLayout(bands=8),  # 56 bits outside each key: members are whole fingerprints, not Lua numbers
        BlockLayout(bands=3, multiprobe=True),
        SampledLayout(6, 14, seed=9),
        SampledLayout(6, 14, seed=9, multiprobe=True),
    ],
    ids=repr,
)
async def test_the_script_unindexes_exactly_what_the_client_indexed(throwaway_redis, layout):
    """The Lua side recomputes buckets to erase; a mismatch with Python's layout would leave members."""
    index = open_index(throwaway_redis.url, layout=layout)
    records = _records(60, seed=3)
    for record in records:
        await index.add(record)
    distance = min(1, layout.guaranteed_distance)
    for record in records[:30]:
        near = record.fingerprint ^ (distance << random.Random(record.id).randrange(64))
        assert [c.record_id for c in await index.candidates(near, distance)][:1] == [record.id]
    for record in records:
        assert await index.remove(record.id)
    admin = throwaway_redis.client()
    assert [key.decode() for key in admin.scan_iter()] == ["simhash:{default}:meta"]
    admin.close()
    await index.close()


async def test_an_unsendable_id_fails_its_own_call_not_the_calls_written_with_it(redis_server_url, redis_prefix):
    index = open_index(redis_server_url, key_prefix=redis_prefix + ":{spider}")
    good = _records(20, seed=4)
    bad = Record(id="lone \udc80 surrogate", fingerprint=1)
    assert await index.count() == 0  # from here on, calls made together are sent as one pipeline
    results = await asyncio.gather(
        *(index.add(record) for record in good), index.add(bad), return_exceptions=True
    )
    assert isinstance(results[-1], UnicodeEncodeError) and results[:-1] == [None] * len(good)
    assert await index.count() == len(good)
    await index.close()


async def _stalled_call(server, call, timeout: float):
    """Run ``call`` while the server sleeps past the client's socket timeout; the attempt times out
    on the client but stays queued on the server, which runs it when it wakes."""
    with server.client() as admin:
        stall = asyncio.ensure_future(asyncio.to_thread(admin.execute_command, "DEBUG SLEEP", 3 * timeout))
        await asyncio.sleep(timeout / 4)
        with pytest.raises(redis.exceptions.TimeoutError):
            await call()
        await stall


async def _stored(index, record_id: str) -> bool:
    for _ in range(100):  # the server runs the orphaned call right after its sleep
        if await index.get(record_id) is not None:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_call_whose_reply_was_lost_is_not_its_own_duplicate_when_retried(throwaway_redis):
    timeout = 0.2
    index = open_index(throwaway_redis.url + f"?socket_timeout={timeout}", spider="s")
    earlier, page, short = _records(3, seed=5)
    for record in (earlier, short):  # layout checked and scripts loaded before the stall
        await index.check_and_add_exact(record, "earlier")
    assert await index.get(short.id) is None and await index.candidates(page.fingerprint, 3) == []
    await _stalled_call(throwaway_redis, lambda: index.check_and_add(page, 3), timeout)
    assert await _stored(index, page.id)  # the attempt did run
    assert await index.check_and_add(page, 3) == []  # the retry: added, not a duplicate of itself
    await _stalled_call(throwaway_redis, lambda: index.check_and_add_exact(short, "digest"), timeout)
    assert await _stored(index, short.id)
    assert await index.check_and_add_exact(short, "digest") is None
    assert await index.count() == 3
    recrawl = Record(id=page.id, fingerprint=page.fingerprint, url=page.url)
    assert [c.record_id for c in await index.check_and_add(recrawl, 3)] == [page.id]
    await index.close()


async def test_a_call_that_fails_on_the_server_fails_alone(throwaway_redis):
    """Calls in flight are pipelined on one connection; an error reply settles its own call only."""
    index = open_index(throwaway_redis.url, spider="s")
    a, b, c = _records(3, seed=4)
    await index.add(a)
    await index.add(b)
    admin = throwaway_redis.client()
    admin.hset(f"simhash:{{s}}:r:{a.id}", "u", "not json")  # merging into ``a`` now fails in the script
    merged_b, merged_a, added_c = await asyncio.gather(
        index.merge(b.id, "https://mirror.example/b", 1.0),
        index.merge(a.id, "https://mirror.example/a", 1.0),
        index.check_and_add(c, 3),
        return_exceptions=True,
    )
    assert isinstance(merged_a, redis.ResponseError) and "expected value" in str(merged_a).lower()
    assert merged_b is None and added_c == []
    assert (await index.get(b.id)).urls == (b.url, "https://mirror.example/b")
    assert (await index.get(c.id)).fingerprint == c.fingerprint
    admin.close()
    await index.close()


async def test_a_merge_rides_along_with_the_next_call(throwaway_redis):
    """A verified duplicate costs one script call: its merge is held and goes out with the next call
    written (here another item's check-and-add), or alone when no call follows within _HOLD."""
    index = open_index(throwaway_redis.url, spider="s")
    a, b = _records(2, seed=11)
    await index.add(a)
    admin = throwaway_redis.client()
    admin.config_resetstat()
    merged, found = await asyncio.gather(
        index.merge(a.id, "https://mirror.example/1", 5.0), index.check_and_add(b, 3)
    )
    assert merged is None and found == []
    assert admin.info("commandstats")["cmdstat_evalsha"]["calls"] == 1
    await index.merge(a.id, "https://mirror.example/2", 0.5)  # nothing to ride with: sent alone
    assert admin.info("commandstats")["cmdstat_evalsha"]["calls"] == 2
    stored = await index.get(a.id)
    assert stored.urls == (a.url, "https://mirror.example/1", "https://mirror.example/2")
    assert stored.first_seen == 0.5 and (await index.get(b.id)).id == b.id
    admin.close()
    await index.close()


async def test_closing_the_index_sends_the_held_merges_first(throwaway_redis):
    index = open_index(throwaway_redis.url, spider="s")
    (a,) = _records(1, seed=12)
    await index.add(a)
    merging = asyncio.ensure_future(index.merge(a.id, "https://mirror.example/1", 5.0))
    await asyncio.sleep(0)  # held, waiting for a call to ride along with
    await index.close()
    assert merging.done() and merging.result() is None
    admin = throwaway_redis.client()
    assert json.loads(admin.hget(f"simhash:{{s}}:r:{a.id}", "u")) == [a.url, "https://mirror.example/1"]
    admin.close()


async def test_concurrent_first_calls_check_the_layout_once(throwaway_redis):
    admin = throwaway_redis.client()
    admin.config_resetstat()
    index = open_index(throwaway_redis.url, spider="s")
    added = await asyncio.gather(*(index.check_and_add(record, 3) for record in _records(64, seed=5)))
    assert added == [[]] * 64
    assert admin.info("commandstats")["cmdstat_hsetnx"]["calls"] == 2  # schema and layout, once
    assert admin.info("clients")["connected_clients"] <= 3  # the admin, the check, the pipelined calls
    admin.close()
    await index.close()


async def test_an_index_of_the_earlier_key_schema_is_refused(throwaway_redis):
    """Before schema 2 every bucket was a set of its own: reading such an index would find nothing."""
    admin = throwaway_redis.client()
    admin.hset("simhash:{s}:meta", "layout", repr(BlockLayout(bands=4)))
    index = open_index(throwaway_redis.url, spider="s")
    with pytest.raises(ValueError, match="key schema None"):
        await index.check_and_add(_records(1, seed=6)[0], 3)
    assert admin.keys("simhash:{s}:r:*") == []
    fresh = open_index(throwaway_redis.url, spider="other")
    assert await fresh.check_and_add(_records(1, seed=6)[0], 3) == []
    assert admin.hget("simhash:{other}:meta", "schema") == b"2"
    admin.close()
    await index.close()
    await fresh.close()


async def test_script_calls_go_out_while_earlier_ones_run_and_replies_reach_their_callers(throwaway_redis):
    """A call is written at once while fewer than _IN_FLIGHT calls are in flight; beyond that calls
    wait for a reply and then go out together. Every reply reaches its own caller."""
    index = open_index(throwaway_redis.url, spider="s")
    records = _records(90, seed=7)
    await index.add(records[0])  # the layout check, out of the way
    admin = throwaway_redis.client()
    sleeping = asyncio.create_task(asyncio.to_thread(admin.execute_command, "DEBUG", "SLEEP", "0.5"))
    await asyncio.sleep(0.1)
    waves = []
    for start in range(0, 90, 30):  # three waves, each written while the earlier ones wait
        waves.append(asyncio.gather(*(index.add(record) for record in records[start : start + 30])))
        await asyncio.sleep(0.05)
    # Wave one went out (its first call, then the calls queued while that was written): 30 >= _IN_FLIGHT,
    # so waves two and three wait for a reply.
    assert len(index._in_flight) == 30 >= _IN_FLIGHT
    assert len(index._queue) == 60
    await asyncio.gather(*waves, sleeping)
    for record in records:
        near = Record(id=f"near {record.id}", fingerprint=record.fingerprint ^ 0b11, url="u")
        assert [c.record_id for c in await index.check_and_add(near, 3)] == [record.id]
    admin.close()
    await index.close()


async def test_a_cancelled_writer_leaves_no_call_waiting(throwaway_redis):
    """The first caller writes for everyone queued behind it; cancelled mid-write (the server frozen,
    the socket full), it must not leave their calls waiting for ever, nor the connection half-used."""
    index = open_index(throwaway_redis.url, spider="s")
    records = _records(6, seed=9)
    for record in records:
        record.shingles = np.arange(record.fingerprint % 3, 3_000_000, 3, dtype=np.uint32)  # ~2.5 MB blobs
    # The writer's own call, ~11 MB: more than a frozen server's socket (which grows its buffer only
    # as it reads) and ours can hold, so its write cannot finish until the server is thawed.
    records[0].shingles = np.arange(0, 2**32 - 1, 512, dtype=np.uint32)
    await index.add(Record(id="first", fingerprint=1))  # the layout check, out of the way
    throwaway_redis.process.send_signal(signal.SIGSTOP)
    try:
        tasks = [asyncio.create_task(index.add(record)) for record in records]
        while not index._in_flight:  # the first task is the writer, now inside its write
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the other tasks queue their calls behind it
        assert not tasks[0].done()
        tasks[0].cancel()
        while not tasks[0].done():
            await asyncio.sleep(0)
    finally:
        throwaway_redis.process.send_signal(signal.SIGCONT)
    await asyncio.wait(tasks)
    assert tasks[0].cancelled()
    for task in tasks[1:]:
        assert task.exception() is None or isinstance(task.exception(), redis.ConnectionError)
    for record, task in zip(records[1:], tasks[1:]):  # the index still answers, on a fresh connection
        if task.exception() is None:  # (a failed call may still have run: its reply was lost)
            assert await index.get(record.id) is not None
    await index.close()
