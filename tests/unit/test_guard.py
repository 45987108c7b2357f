"""The index-error path: a backend's transient failures are retried with a bounded backoff, others not."""

from __future__ import annotations

import logging

import pytest
import redis.exceptions
from samples import LAYOUT
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from scrapy_simhash.guard import GuardedIndex, IndexUnavailable
from scrapy_simhash.index.redis import RedisIndex
from scrapy_simhash.index.retention import Retention


class FlakyIndex(RedisIndex):
    """A Redis index (never connected) whose ``count`` fails ``failures`` times with ``error``: an
    outage of a chosen length and kind, where staging one with a real server would take seconds."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__(
            "redis://:secret@127.0.0.1:1/0", key_prefix="p:{t}", layout=LAYOUT, retention=Retention(),
            max_hashes=10, create=True, session=b"test", lease=30.0,
        )
        self.failures, self.error, self.calls = failures, error, 0

    async def open(self) -> None:
        pass

    async def count(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return 7


def guarded(index: FlakyIndex, retries: int) -> GuardedIndex:
    stats = MemoryStatsCollector(get_crawler())
    return GuardedIndex(index, retries=retries, delay=0.001, max_delay=0.002, stats=stats, consequence="passed on")


async def test_a_transient_failure_is_retried_until_it_clears():
    index = FlakyIndex(2, redis.exceptions.ConnectionError("reset"))
    guard = guarded(index, retries=2)
    assert await guard._call(index.count) == 7
    assert index.calls == 3 and guard.stats.get_value("simhash/index_errors") == 2


async def test_retries_are_bounded_and_the_message_names_the_index_without_its_password():
    index = FlakyIndex(10, TimeoutError())
    guard = guarded(index, retries=2)
    with pytest.raises(IndexUnavailable, match=r"index redis://:\*\*\*@127\.0\.0\.1:1/0 count\(\) failed 3 times"):
        await guard._call(index.count)
    assert index.calls == 3


async def test_a_permanent_failure_is_not_retried():
    index = FlakyIndex(10, ValueError("corrupt record"))
    guard = guarded(index, retries=5)
    with pytest.raises(IndexUnavailable, match="corrupt record"):
        await guard._call(index.count)
    assert index.calls == 1 and guard.stats.get_value("simhash/index_errors") == 1


async def test_an_outage_is_reported_once_then_counted(caplog):
    index = FlakyIndex(100, redis.exceptions.ConnectionError("refused"))
    guard = guarded(index, retries=0)
    for _ in range(5):
        with pytest.raises(IndexUnavailable):
            await guard._call(index.count)
    [report] = [r for r in caplog.records if "SimHash index" in r.message]
    assert "passed on" in report.message and "secret" not in caplog.text


class AlternatingIndex(FlakyIndex):
    """Fails every other call: an index on a full disk or behind a flapping link."""

    async def count(self) -> int:
        self.calls += 1
        if self.calls % 2:
            raise self.error
        return 7

    async def close(self) -> None:
        pass


async def test_an_index_failing_on_and_off_is_reported_once_then_summarised(caplog):
    caplog.set_level(logging.INFO, "scrapy_simhash.guard")
    index = AlternatingIndex(0, redis.exceptions.ConnectionError("reset"))
    guard = guarded(index, retries=0)
    for _ in range(10):
        with pytest.raises(IndexUnavailable):
            await guard._call(index.count)
        assert await guard._call(index.count) == 7
    said = [r.message for r in caplog.records if "SimHash index" in r.message]
    assert len(said) == 2 and "passed on" in said[0] and "answers again" in said[1]
    caplog.clear()
    await guard.close()
    [summary] = [r.message for r in caplog.records if "SimHash index" in r.message]
    assert "9 calls failed" in summary and "on and off" in summary
