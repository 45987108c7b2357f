"""Redis faults under a running pipeline: crash and restart, a slow or frozen server, a flushed
function library, a full server. Each test has a Redis of its own (``throwaway_redis``).

What must hold: every item comes out (passed on, or dropped as a verified duplicate), nothing
raises out of ``process_item``, nothing waits forever, and the stats say what happened.
"""

from __future__ import annotations

import asyncio
import signal

import pytest
import redis
from pipeline_harness import feed, feed_judged, open_pipeline, simhash_stats, until
from redis_servers import RedisServer
from texts import article

from scrapy_simhash import redis_url

pytestmark = pytest.mark.redis

RETRIES, DELAY = 3, 0.05
PAGES = [{"url": f"https://site.example/{i}", "body_text": article(600 + i)} for i in range(30)]


def copy_of(item: dict) -> dict:
    return {"url": item["url"] + "/copy", "body_text": item["body_text"]}


def fault_settings(server: RedisServer, tmp_path, *, socket_timeout: float | None = None, **extra) -> dict:
    """Settings for a pipeline on ``server``; ``socket_timeout`` (seconds) makes its client give up sooner."""
    return {
        "SIMHASH_INDEX_URL": server.url if socket_timeout is None else f"{server.url}?socket_timeout={socket_timeout}",
        "SIMHASH_INDEX_RETRIES": RETRIES,
        "SIMHASH_INDEX_RETRY_DELAY": DELAY,
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        **extra,
    }


@pytest.fixture
async def pipeline(throwaway_redis, tmp_path):
    opened = await open_pipeline(fault_settings(throwaway_redis, tmp_path))
    yield opened
    await opened.close_spider()


async def feed_all(pipeline, items) -> list[bool]:
    """Feed items one by one; each must come out (True: passed on, False: dropped as a duplicate)."""
    return [await feed_judged(pipeline, item) for item in items]


async def stalled(server: RedisServer, admin, seconds: float) -> asyncio.Future:
    """Start ``DEBUG SLEEP`` and return once the server no longer answers (the stall is on)."""
    stall = asyncio.ensure_future(asyncio.to_thread(admin.execute_command, "DEBUG SLEEP", seconds))
    with server.client(socket_timeout=0.05) as probe:
        while True:
            try:
                await asyncio.to_thread(probe.ping)
            except redis.TimeoutError:
                return stall
            if stall.done():
                raise AssertionError("DEBUG SLEEP ended before it could be seen")


async def test_redis_killed_and_restarted_mid_crawl(pipeline, throwaway_redis):
    first, during, after = PAGES[:10], PAGES[10:20], PAGES[20:30]
    assert await feed_all(pipeline, first + [copy_of(first[0])]) == [True] * 10 + [False]
    throwaway_redis.kill()
    assert await feed_all(pipeline, during) == [True] * 10  # passed on unchecked, not lost
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == 10 and stats["simhash/index_errors"] >= 10 * (RETRIES + 1)
    throwaway_redis.start()  # no persistence: an empty index, as after losing the server
    assert await feed_all(pipeline, after + [copy_of(after[0])]) == [True] * 10 + [False]
    assert simhash_stats(pipeline)["simhash/unchecked"] == 10


async def test_a_restart_within_the_retry_budget_costs_no_item(throwaway_redis, tmp_path):
    settings = fault_settings(throwaway_redis, tmp_path, SIMHASH_INDEX_RETRIES=8, SIMHASH_INDEX_RETRY_DELAY=0.1)
    pipeline = await open_pipeline(settings)
    try:
        await feed_all(pipeline, PAGES[:2])
        throwaway_redis.kill()
        pending = asyncio.ensure_future(feed(pipeline, PAGES[2]))
        await until(lambda: simhash_stats(pipeline)["simhash/index_errors"] >= 1)  # backing off now
        await asyncio.to_thread(throwaway_redis.start)
        assert await pending
        stats = simhash_stats(pipeline)
        assert stats["simhash/unchecked"] == 0 and stats["simhash/unique"] == 3
    finally:
        await pipeline.close_spider()


async def test_a_flushed_function_library_is_reloaded_transparently(pipeline, throwaway_redis):
    await feed_all(pipeline, PAGES[:5])
    with throwaway_redis.client() as admin:
        admin.function_flush()
    assert await feed_all(pipeline, [copy_of(PAGES[0]), PAGES[5]]) == [False, True]
    stats = simhash_stats(pipeline)
    assert stats["simhash/index_errors"] == 0 and stats["simhash/unchecked"] == 0


async def test_a_full_redis_passes_items_unchecked_then_recovers(pipeline, throwaway_redis):
    await feed_all(pipeline, PAGES[:5])
    count = await pipeline.index.index.count()
    with throwaway_redis.client() as admin:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", admin.info("memory")["used_memory"] // 2)
        assert await feed_all(pipeline, PAGES[5:10]) == [True] * 5
        assert simhash_stats(pipeline)["simhash/unchecked"] == 5
        admin.config_set("maxmemory", 0)
    assert await pipeline.index.index.count() == count  # a refused script wrote nothing
    assert await feed_all(pipeline, PAGES[10:12] + [copy_of(PAGES[0])]) == [True, True, False]
    assert simhash_stats(pipeline)["simhash/unchecked"] == 5


async def test_a_slow_redis_delays_items_but_loses_none(pipeline, throwaway_redis):
    """A stall without a socket timeout: the item waits for the answer, nothing fails."""
    await feed_all(pipeline, PAGES[:3])
    with throwaway_redis.client() as admin:
        stall = await stalled(throwaway_redis, admin, 0.5)
        assert await feed_all(pipeline, [PAGES[3], copy_of(PAGES[0])]) == [True, False]
        await stall
    stats = simhash_stats(pipeline)
    assert stats["simhash/index_errors"] == 0 and stats["simhash/unique"] == 4


async def test_a_call_that_timed_out_but_ran_does_not_make_the_item_its_own_duplicate(throwaway_redis, tmp_path):
    """The client gives up, the server still runs the call afterwards, and the retry finds the record
    that call stored. That record is this item: it is kept; only a later crawl of the page is a duplicate."""
    settings = fault_settings(
        throwaway_redis, tmp_path, socket_timeout=0.2, SIMHASH_INDEX_RETRIES=6, SIMHASH_INDEX_RETRY_DELAY=0.2
    )
    pipeline = await open_pipeline(settings)
    try:
        await feed_all(pipeline, PAGES[:2])
        with throwaway_redis.client() as admin:
            stall = await stalled(throwaway_redis, admin, 0.6)
            assert await feed_all(pipeline, [PAGES[2]]) == [True]
            await stall
        assert await feed_all(pipeline, [PAGES[2]]) == [False]  # the page crawled again
        stats = simhash_stats(pipeline)
        assert stats["simhash/index_errors"] >= 1
        assert stats["simhash/unique"] == 3 and stats["simhash/duplicates"] == 1
    finally:
        await pipeline.close_spider()


async def test_a_frozen_redis_never_hangs_the_pipeline(throwaway_redis, tmp_path, monkeypatch):
    """SIGSTOP: the server accepts connections and never answers. Each attempt ends at the default
    socket timeout (the URL names none), then the item is passed on unchecked."""
    monkeypatch.setattr(redis_url, "SOCKET_TIMEOUT", 0.3)
    pipeline = await open_pipeline(fault_settings(throwaway_redis, tmp_path))
    try:
        await feed_all(pipeline, PAGES[:2])
        throwaway_redis.process.send_signal(signal.SIGSTOP)
        try:
            assert await feed(pipeline, PAGES[2]) is True
        finally:
            throwaway_redis.process.send_signal(signal.SIGCONT)
        stats = simhash_stats(pipeline)
        assert stats["simhash/unchecked"] == 1 and stats["simhash/index_errors"] >= RETRIES + 1
    finally:
        await pipeline.close_spider()
