"""Every index call of a crawl goes through :class:`GuardedIndex`: bounded retries, counted failures.

One place for the index-error path, so what an outage costs (latency, stats, the final
``IndexUnavailable``) is decided here and the pipeline only chooses ``pass`` or ``fail``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import TYPE_CHECKING, Any

import redis.exceptions

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from scrapy_simhash.index.base import Index

__all__ = ["GuardedIndex", "IndexUnavailable"]

logger = logging.getLogger(__name__)

# Failures that a retry may cure: the network, a server loading or failing over, a locked database.
# Anything else (corrupt data, a refused command) fails the same way again, so it is not retried.
TRANSIENT = (
    OSError,
    TimeoutError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    sqlite3.OperationalError,
)


class IndexUnavailable(Exception):
    """An index call still failed after its retries."""


class GuardedIndex:
    """Calls index methods, retrying transient failures with a doubling, capped backoff.

    Every failed attempt counts in ``simhash/index_errors``.
    """

    def __init__(self, index: Index, *, retries: int, delay: float, max_delay: float, stats: StatsCollector) -> None:
        self.index = index
        self.retries = retries
        self.delay = delay
        self.max_delay = max_delay
        self.stats = stats

    async def call(self, method: str, *args: Any) -> Any:
        """``await index.<method>(*args)``; raises :class:`IndexUnavailable` once the retries are spent."""
        delay = self.delay
        attempts = 0
        while True:
            try:
                return await getattr(self.index, method)(*args)
            except Exception as exc:  # any backend failure: connection, timeout, disk, server error
                self.stats.inc_value("simhash/index_errors")
                attempts += 1
                if attempts > self.retries or not isinstance(exc, TRANSIENT):
                    raise IndexUnavailable(f"index {method}() failed {attempts} times: {exc!r}") from exc
                logger.debug("index %s() failed (%r), retrying in %.2fs", method, exc, delay)
                await asyncio.sleep(delay)
                delay = min(2 * delay, self.max_delay)

    async def close(self) -> None:
        await self.index.close()
