"""The index-error path: transient failures are retried with a bounded backoff, the others are not."""

from __future__ import annotations

import pytest
import redis.exceptions
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from scrapy_simhash.guard import GuardedIndex, IndexUnavailable


class FlakyIndex:
    """Fails its first ``failures`` calls with ``error``, then answers (a backend stand-in: an
    outage of a chosen length and kind is not cheap to stage with a real server)."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def count(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return 7


def guarded(index: FlakyIndex, retries: int) -> GuardedIndex:
    stats = MemoryStatsCollector(get_crawler())
    return GuardedIndex(index, retries=retries, delay=0.001, max_delay=0.002, stats=stats)


async def test_a_transient_failure_is_retried_until_it_clears() -> None:
    index = FlakyIndex(2, redis.exceptions.ConnectionError("reset"))
    guard = guarded(index, retries=2)
    assert await guard.call("count") == 7
    assert index.calls == 3 and guard.stats.get_value("simhash/index_errors") == 2


async def test_retries_are_bounded() -> None:
    index = FlakyIndex(10, TimeoutError())
    guard = guarded(index, retries=2)
    with pytest.raises(IndexUnavailable, match="count\\(\\) failed 3 times"):
        await guard.call("count")
    assert index.calls == 3


async def test_a_permanent_failure_is_not_retried() -> None:
    index = FlakyIndex(10, ValueError("corrupt record"))
    guard = guarded(index, retries=5)
    with pytest.raises(IndexUnavailable, match="corrupt record"):
        await guard.call("count")
    assert index.calls == 1 and guard.stats.get_value("simhash/index_errors") == 1
