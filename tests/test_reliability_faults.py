"""Redis faults under a running pipeline: crash and restart, a slow or frozen server, a flushed
script cache, a full server. Each test has a Redis of its own (``throwaway_redis``), so killing,
pausing or filling it disturbs nobody else.

What must hold: every item comes out (passed on, or dropped as a verified duplicate), nothing
raises out of ``process_item``, nothing waits forever, and the stats say what happened.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from pipeline_harness import feed, feed_judged, open_pipeline, simhash_stats
from redis_servers import RedisServer

RETRIES, DELAY = 3, 0.05
DRIVER = Path(__file__).with_name("crawl_stream.py")


@pytest.fixture
def pages(corpus) -> list[dict]:
    """Real pages of a few hundred words, one release of each (releases are near-duplicates), as items."""
    bodies = {doc["page"]: doc["body_text"] for doc in corpus if 150 < len(doc["body_text"].split()) < 2000}
    return [{"url": f"https://site.example/{i}", "body_text": body} for i, body in enumerate(list(bodies.values()))]


def copy_of(item: dict) -> dict:
    return {"url": item["url"] + "/copy", "body_text": item["body_text"]}


def fault_settings(server: RedisServer, tmp_path, *, socket_timeout: float | None = None, **extra) -> dict:
    """Settings for a pipeline on ``server``; ``socket_timeout`` (seconds) makes its client give up sooner."""
    return {
        "SIMHASH_INDEX_URL": server.url if socket_timeout is None else f"{server.url}?socket_timeout={socket_timeout}",
        "SIMHASH_INDEX_RETRIES": RETRIES,
        "SIMHASH_INDEX_RETRY_DELAY": DELAY,
        "SIMHASH_HTML_FIELDS": [],
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


async def debug_sleep(server: RedisServer, admin, seconds: float) -> asyncio.Future:
    """Start ``DEBUG SLEEP`` and return once the server has stopped answering (the stall is on)."""
    stall = asyncio.ensure_future(asyncio.to_thread(admin.execute_command, "DEBUG SLEEP", seconds))
    with server.client(socket_timeout=0.02) as probe:
        for _ in range(100):
            try:
                probe.ping()
            except redis.TimeoutError:
                return stall
            await asyncio.sleep(0.005)
    raise AssertionError("DEBUG SLEEP did not stall the server")


async def test_redis_killed_and_restarted_mid_crawl(pipeline, throwaway_redis, pages) -> None:
    first, during, after = pages[:10], pages[10:20], pages[20:30]
    assert await feed_all(pipeline, first + [copy_of(first[0])]) == [True] * 10 + [False]

    throwaway_redis.kill()
    assert await feed_all(pipeline, during) == [True] * 10  # passed on unchecked, not lost
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == 10
    assert stats["simhash/index_errors"] == 10 * (RETRIES + 1)

    throwaway_redis.start()  # no persistence: an empty index, as after losing the server
    assert await feed_all(pipeline, after + [copy_of(after[0])]) == [True] * 10 + [False]
    assert simhash_stats(pipeline)["simhash/unchecked"] == 10


async def test_a_restart_within_the_retry_budget_costs_no_item(throwaway_redis, tmp_path, pages) -> None:
    # 6 retries from 0.1 s: about 5 s of budget, far more than a restart takes even on a loaded machine.
    settings = fault_settings(throwaway_redis, tmp_path, SIMHASH_INDEX_RETRIES=6, SIMHASH_INDEX_RETRY_DELAY=0.1)
    pipeline = await open_pipeline(settings)
    try:
        await feed_all(pipeline, pages[:2])
        throwaway_redis.kill()
        pending = asyncio.ensure_future(feed(pipeline, pages[2]))
        await asyncio.sleep(0.05)  # the first attempt has failed, the item is backing off
        await asyncio.to_thread(throwaway_redis.start)
        assert await pending
        stats = simhash_stats(pipeline)
        assert stats["simhash/index_errors"] >= 1
        assert stats["simhash/unchecked"] == 0 and stats["simhash/unique"] == 3
    finally:
        await pipeline.close_spider()


async def test_a_flushed_script_cache_is_reloaded_transparently(pipeline, throwaway_redis, pages) -> None:
    await feed_all(pipeline, pages[:5])
    with throwaway_redis.client() as admin:
        admin.script_flush()
    assert await feed_all(pipeline, [copy_of(pages[0]), pages[5]]) == [False, True]
    stats = simhash_stats(pipeline)
    assert stats["simhash/index_errors"] == 0 and stats["simhash/unchecked"] == 0


async def test_a_full_redis_passes_items_unchecked_then_recovers(pipeline, throwaway_redis, pages) -> None:
    await feed_all(pipeline, pages[:5])
    count = await pipeline.index.index.count()
    with throwaway_redis.client() as admin:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", admin.info("memory")["used_memory"] // 2)
        assert await feed_all(pipeline, pages[5:10]) == [True] * 5
        assert simhash_stats(pipeline)["simhash/unchecked"] == 5
        admin.config_set("maxmemory", 0)
    assert await pipeline.index.index.count() == count  # a refused script wrote nothing
    assert await feed_all(pipeline, pages[10:12] + [copy_of(pages[0])]) == [True, True, False]
    assert simhash_stats(pipeline)["simhash/unchecked"] == 5


async def test_a_slow_redis_delays_items_but_loses_none(pipeline, throwaway_redis, pages) -> None:
    """DEBUG SLEEP shorter than the socket timeout: the item waits for the answer, nothing fails."""
    await feed_all(pipeline, pages[:3])
    with throwaway_redis.client() as admin:
        stall = await debug_sleep(throwaway_redis, admin, 0.5)
        assert await feed_all(pipeline, [pages[3], copy_of(pages[0])]) == [True, False]
        await stall
    stats = simhash_stats(pipeline)
    assert stats["simhash/index_errors"] == 0 and stats["simhash/unique"] == 4


async def test_a_call_that_timed_out_but_ran_does_not_make_the_item_its_own_duplicate(
    throwaway_redis, tmp_path, pages
) -> None:
    """DEBUG SLEEP longer than the socket timeout: the client gives up, the server still runs the
    call afterwards, and the retry finds the record that call stored. That record is this item: it
    must be kept, and only a later crawl of the same page is a duplicate."""
    settings = fault_settings(throwaway_redis, tmp_path, socket_timeout=0.2, SIMHASH_INDEX_RETRIES=6,
                              SIMHASH_INDEX_RETRY_DELAY=0.2)
    pipeline = await open_pipeline(settings)
    try:
        await feed_all(pipeline, pages[:2])
        with throwaway_redis.client() as admin:
            stall = await debug_sleep(throwaway_redis, admin, 0.6)
            assert await feed_all(pipeline, [pages[2]]) == [True]
            await stall
        assert await feed_all(pipeline, [pages[2]]) == [False]  # the page crawled again
        stats = simhash_stats(pipeline)
        assert stats["simhash/index_errors"] >= 1
        assert stats["simhash/unique"] == 3 and stats["simhash/duplicates"] == 1
    finally:
        await pipeline.close_spider()


async def test_a_pause_longer_than_the_socket_timeout_is_retried(throwaway_redis, tmp_path, pages) -> None:
    """CLIENT PAUSE outlasting the client's socket timeout: attempts time out, a later one succeeds."""
    settings = fault_settings(throwaway_redis, tmp_path, socket_timeout=0.2, SIMHASH_INDEX_RETRIES=6,
                              SIMHASH_INDEX_RETRY_DELAY=0.1)
    pipeline = await open_pipeline(settings)
    try:
        await feed_all(pipeline, pages[:3])
        with throwaway_redis.client() as admin:
            admin.execute_command("CLIENT PAUSE", 600, "ALL")
        assert await feed_all(pipeline, [pages[3], copy_of(pages[3])]) == [True, False]
        stats = simhash_stats(pipeline)
        assert stats["simhash/index_errors"] >= 1
        assert stats["simhash/unique"] == 4 and stats["simhash/unchecked"] == 0
    finally:
        await pipeline.close_spider()


async def test_a_frozen_redis_never_hangs_the_pipeline(throwaway_redis, tmp_path, pages) -> None:
    """SIGSTOP: the server accepts connections and never answers. Each attempt ends at the socket
    timeout (redis-py's default is 5 s; 0.3 s here to keep the test short), then the item is passed
    on unchecked."""
    pipeline = await open_pipeline(fault_settings(throwaway_redis, tmp_path, socket_timeout=0.3))
    try:
        await feed_all(pipeline, pages[:2])
        throwaway_redis.process.send_signal(signal.SIGSTOP)
        try:
            assert await asyncio.wait_for(feed(pipeline, pages[2]), timeout=30) is True
        finally:
            throwaway_redis.process.send_signal(signal.SIGCONT)
        stats = simhash_stats(pipeline)
        assert stats["simhash/unchecked"] == 1 and stats["simhash/index_errors"] == RETRIES + 1
    finally:
        await pipeline.close_spider()


@pytest.mark.slow
def test_fail_mode_closes_the_crawl_with_a_clear_reason(throwaway_redis, tmp_path, pages) -> None:
    """SIMHASH_ON_INDEX_ERROR = "fail" against a full Redis: a real crawl stops, says why, and exits."""
    with throwaway_redis.client() as admin:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", admin.info("memory")["used_memory"] // 2)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(page) + "\n" for page in pages))
    settings = fault_settings(throwaway_redis, tmp_path, SIMHASH_ON_INDEX_ERROR="fail")
    subprocess.run([sys.executable, str(DRIVER), str(items), str(tmp_path), json.dumps(settings)],
                   check=True, timeout=120, capture_output=True)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "simhash_index_error"
    assert stats["simhash/index_errors"] >= RETRIES + 1
    log = (tmp_path / "crawl.log").read_text()
    assert "OOM" in log or "maxmemory" in log
    with throwaway_redis.client() as admin:
        assert admin.dbsize() <= 1  # the layout marker at most: no item was indexed
