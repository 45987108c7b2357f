"""Every index call of a crawl goes through :class:`GuardedIndex`: bounded retries, counted failures,
and an outage reported once, then summarised, never one traceback per item.

One place for the index-error path, so what an outage costs (latency, stats, log lines) is decided
here and the pipeline only chooses ``pass`` or ``fail``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy_simhash.index import (
    Candidate,
    Details,
    Erased,
    Exact,
    GroupGone,
    Index,
    IndexCorrupt,
    Joined,
    Lookup,
    Record,
    StoredRecord,
)

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from scrapy_simhash.minhash import Layout

__all__ = ["GuardedIndex", "IndexUnavailable"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Seconds between two summaries of an outage that goes on.
SUMMARY_INTERVAL = 60.0


class IndexUnavailable(Exception):
    """An index call still failed after its retries; ``error`` is the last failure."""

    def __init__(self, message: str, error: BaseException) -> None:
        super().__init__(message)
        self.error = error


class GuardedIndex:
    """The index's methods, each retried on the backend's transient errors with a doubling, capped
    backoff, then raising :class:`IndexUnavailable`. Every failed attempt counts in
    ``simhash/index_errors``. Opening is part of the first call that finds the index not open, so an
    index unreachable at the start is tried again by the next items."""

    def __init__(
        self, index: Index, *, retries: int, delay: float, max_delay: float, stats: StatsCollector, consequence: str
    ) -> None:
        self.index = index
        self.retries = retries
        self.delay = delay
        self.max_delay = max_delay
        self.stats = stats
        self.consequence = consequence  # what happens to an item the index could not judge, for the log
        self._open = False
        self._in_flight = asyncio.Semaphore(index.max_in_flight)
        self._failing_since: float | None = None  # the current outage's start; None while the index answers
        self._failed_items = 0  # failed calls not yet in a log line
        self._summarised_at: float | None = None  # the last warning, which the next waits SUMMARY_INTERVAL after
        self._announced = False  # the current outage had its warning, so its end is said too
        self._answered = False  # the index answered since the last warning: failing on and off
        self._last_error = ""

    @property
    def layout(self) -> Layout:
        return self.index.layout

    @property
    def lease(self) -> float:
        return self.index.lease

    async def open(self) -> None:
        """Open the index now (one attempt and its retries); the caller reports a failure."""
        await self._call(self._open_index, report=False)

    async def _open_index(self) -> None:
        await self.index.open()
        self._open = True

    async def keep_alive(self) -> None:
        await self._call(self.index.keep_alive)

    async def check_and_add(self, record: Record, since: int = 0) -> Lookup:
        return await self._call(self.index.check_and_add, record, since)

    async def details(self, candidates: list[Candidate]) -> list[Details | None]:
        return await self._call(self.index.details, candidates)

    async def join(self, record: Record, matched: Candidate, banded: bool) -> Joined:
        return await self._call(self.index.join, record, matched, banded)

    async def check_and_add_exact(self, record: Record, digest: bytes) -> Exact:
        return await self._call(self.index.check_and_add_exact, record, digest)

    async def confirm(self, rids: list[int]) -> None:
        await self._call(self.index.confirm, rids, report=False)  # the caller says what a failure leaves pending

    async def scraped(self, rids: list[int]) -> None:
        await self._call(self.index.scraped, rids, report=False)

    async def remove(self, rid: int) -> Erased | None:
        return await self._call(self.index.remove, rid, report=False)  # the caller says what is left undone

    async def records(self, key: str) -> list[StoredRecord]:
        return await self._call(self.index.records, key)

    async def release(self, record: Record) -> None:
        """Best effort, no retry: what it fails to drop is one unreferenced record's page data."""
        try:
            await self.index.release(record)
        except Exception as exc:
            logger.debug("Could not release %(id)r: %(error)r", {"id": record.id, "error": exc})

    async def expire(self) -> int:
        return await self._call(self.index.expire)

    async def load_boilerplate(self, host: str) -> bytes | None:
        return await self._call(self.index.load_boilerplate, host)

    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        return await self._call(self.index.save_boilerplate, host, version, blob)

    async def close(self) -> None:
        if self._failed_items:
            self._summarise(closing=True)
        await self.index.close()

    async def _call(self, method: Callable[..., Awaitable[T]], *args: Any, report: bool = True) -> T:
        delay, attempts = self.delay, 0
        while True:
            try:
                async with self._in_flight:
                    if not self._open and method != self._open_index:
                        await self._open_index()
                    result = await method(*args)
            except self.index.transient_errors as exc:
                self.stats.inc_value("simhash/index_errors")
                attempts += 1
                if attempts > self.retries:
                    raise self._unavailable(method, exc, attempts, report) from None
                await asyncio.sleep(delay)
                delay = min(2 * delay, self.max_delay)
                continue
            except (asyncio.CancelledError, IndexUnavailable, GroupGone):
                raise  # GroupGone is an answer (the matched record went meanwhile): judging looks again
            except Exception as exc:  # permanent: a refused command, corrupt data, a wrong schema
                self.stats.inc_value("simhash/index_errors")
                report = report and not isinstance(exc, IndexCorrupt)  # the caller stops the crawl, saying why
                raise self._unavailable(method, exc, attempts + 1, report) from None
            self._recovered()
            return result

    def _unavailable(self, method: Callable[..., Any], exc: Exception, attempts: int, report: bool) -> IndexUnavailable:
        name = getattr(method, "__name__", "call").lstrip("_").replace("open_index", "open")
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        message = f"index {self.index.location} {name}() failed {attempts} time{'s' * (attempts > 1)} ({error})"
        self._last_error = error
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        if not report:  # the caller says it; later failures of the same outage are only counted
            self._summarised_at, self._announced = now, True
            return IndexUnavailable(message, exc)
        self._failed_items += 1
        if self._summarised_at is None or now - self._summarised_at >= SUMMARY_INTERVAL:
            if self._failed_items == 1:
                logger.warning(
                    "SimHash %(message)s: %(consequence)s", {"message": message, "consequence": self.consequence}
                )
                self._failed_items, self._summarised_at, self._answered = 0, now, False
            else:  # failures since the last warning, the index failing on and off meanwhile
                self._summarise()
            self._announced = True
        return IndexUnavailable(message, exc)

    def _summarise(self, closing: bool = False) -> None:
        if self._answered:
            state = "failed on and off"
        else:
            state = "failed until the spider closed" if closing else "still failing"
        logger.warning(
            "SimHash index %(location)s %(state)s: %(items)d calls failed in the last %(seconds).0f s "
            "(last error: %(error)s)",
            {
                "location": self.index.location,
                "state": state,
                "items": self._failed_items,
                "seconds": time.monotonic() - (self._summarised_at or self._failing_since or 0.0),
                "error": self._last_error,
            },
        )
        self._summarised_at = time.monotonic()
        self._failed_items = 0
        self._answered = False

    def _recovered(self) -> None:
        """The outage ends; said only for one that was warned of, so an index failing on and off
        gets a warning and a summary a SUMMARY_INTERVAL, not two lines a failure."""
        if self._failing_since is not None:
            if self._announced:
                logger.info(
                    "SimHash index %(location)s answers again after %(seconds).0f s",
                    {"location": self.index.location, "seconds": time.monotonic() - self._failing_since},
                )
            self._failing_since, self._announced, self._answered = None, False, True
