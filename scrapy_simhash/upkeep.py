"""What a crawl keeps up in the index besides judging items: it opens the index (emptied first for
SIMHASH_RESET), confirms each canonical's record once its item is delivered (delivery.py), renews the
session's lease, sweeps retention, undoes joins whose merge record was refused, and lets the index
go at the end.

A record stays pending until its item is delivered, so that a crawl killed meanwhile has its rerun
keep the page again (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from itemadapter import is_item
from scrapy import signals

from scrapy_simhash.configured import configured_index
from scrapy_simhash.delivery import Delivery, FeedDeliveries
from scrapy_simhash.guard import GuardedIndex, IndexUnavailable
from scrapy_simhash.index import IndexCorrupt, IndexOpenError
from scrapy_simhash.printable import printable
from scrapy_simhash.reset import reset
from scrapy_simhash.settings import MAX_RETRY_DELAY

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_simhash.mergelog.writer import DecisionLogs
    from scrapy_simhash.settings import SimhashSettings

__all__ = ["IndexUpkeep", "PendingItems"]

logger = logging.getLogger(__name__)

# Confirmations (items scraped) sent to the index together, or after this many seconds.
CONFIRM_BATCH, CONFIRM_DELAY = 100, 1.0


class IndexUpkeep:
    """The crawl's index from open to release, and the pending records of the items judged.

    ``page_id(item)`` reads the page id of an item a signal names; ``logs`` are swept with the
    index; ``warn_once(key, message, args)`` says a fault once; ``fail(reason)`` closes the crawl.
    """

    def __init__(
        self,
        crawler: Crawler,
        config: SimhashSettings,
        logs: DecisionLogs,
        page_id: Callable[[Any], str],
        warn_once: Callable[[str, str, dict[str, Any]], None],
        fail: Callable[[str], None],
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.logs = logs
        self._page_id = page_id
        self._warn_once = warn_once
        self._fail = fail
        self._inc = crawler.stats.inc_value
        self.index: GuardedIndex | None = None
        self.pending = PendingItems()
        self.deliveries: FeedDeliveries | None = None
        self._background: list[asyncio.Future[None]] = []  # retention sweeps, lease renewals
        self._released = False
        self._confirm: list[int] = []
        self._mark_scraped: list[int] = []  # scraped, waiting for a feed: see FeedDeliveries
        self._confirming: asyncio.Task[None] | None = None
        self._unjoined: dict[int, str] = {}  # rid -> page id: joins whose record and undo were both refused
        crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(self._item_gone, signal=signals.item_dropped)
        crawler.signals.connect(self._item_gone, signal=signals.item_error)

    def watch_feeds(self) -> None:
        """With feed exports, records are confirmed as the feeds store their batches."""
        self.deliveries = FeedDeliveries.of(self.crawler)
        if self.deliveries is not None:
            self.crawler.signals.connect(self._feed_slot_closed, signal=signals.feed_slot_closed)
            self.crawler.signals.connect(self._feeds_closed, signal=signals.feed_exporter_closed)
            self.crawler.signals.connect(self._feeds_closed, signal=signals.engine_stopped)  # if feeds never close

    async def open_index(self) -> bool:
        """Open the index behind its guard, emptied first with its logs if SIMHASH_RESET says so;
        False when it cannot be used at all (said, and the crawl closes). An outage with
        SIMHASH_ON_INDEX_ERROR = "pass" is said and the crawl goes on."""
        config = self.config
        if config.reset or _truthy(getattr(self.crawler.spider, "simhash_reset", None)):
            try:
                done = await reset(config)
            except Exception as exc:  # a Redis that does not answer: starting on the old index would mislead
                self._fail(f"SIMHASH_RESET could not empty the index and logs ({type(exc).__name__}: {exc})")
                return False
            logger.info("SimHash: starting over (SIMHASH_RESET): %(done)s", {"done": done},
                        extra={"spider": self.crawler.spider})
        consequence = (
            "closing the spider (SIMHASH_ON_INDEX_ERROR = 'fail')"
            if config.on_index_error == "fail"
            else "items it cannot judge are passed on unchecked (simhash/unchecked), and each item tries it "
            "again (SIMHASH_ON_INDEX_ERROR = 'pass')"
        )
        try:
            index = configured_index(config)
        except ValueError as exc:
            self._fail(f"Cannot use the SimHash index: {exc}")
            return False
        self.index = GuardedIndex(
            index,
            retries=config.index_retries,
            delay=config.index_retry_delay,
            max_delay=MAX_RETRY_DELAY,
            stats=self.crawler.stats,
            consequence=consequence,
        )
        try:
            await self.index.open()
        except IndexUnavailable as exc:
            if isinstance(exc.error, IndexCorrupt):
                self._fail(self.corrupt_message(exc.error))
                return False
            if isinstance(exc.error, (IndexOpenError, ValueError)):  # said whole: what is wrong and what to do
                self._fail(f"Cannot use the SimHash index: {exc.error}")
                return False
            if config.on_index_error == "fail":
                self._fail(f"Cannot use the SimHash index: {exc}")
                return False
            logger.warning(
                "SimHash %(error)s: %(consequence)s", {"error": exc, "consequence": consequence},
                extra={"spider": self.crawler.spider},
            )
        return True

    def corrupt_message(self, error: IndexCorrupt) -> str:
        assert self.crawler.spider is not None
        return (
            f"SimHash index {error}: restore it from a backup, or start over with "
            f"scrapy simhash-reset --spider {self.crawler.spider.name}"
        )

    def start(self) -> None:
        """Start the retention sweeps and the lease renewals."""
        self._background = [
            asyncio.ensure_future(self._expire_periodically()),
            asyncio.ensure_future(self._keep_alive_periodically()),
        ]

    async def _feeds_closed(self) -> None:
        """The feeds are stored, or failed to be: what they delivered is confirmed, the rest stays
        pending, and the index (its lease held meanwhile) is let go."""
        if self._released:
            return
        assert self.deliveries is not None
        undelivered = self.deliveries.undelivered()
        if undelivered and self.index is not None:
            self._inc("simhash/undelivered", undelivered)
            logger.warning(
                "SimHash: %(count)d pages were not delivered (a feed failed to export or to store them): their "
                "records stay pending, and the next crawl keeps those pages again", {"count": undelivered},
                extra={"spider": self.crawler.spider},
            )
        await self.flush_confirmations(closing=True)
        await self.release()

    async def release(self) -> None:
        """Stop the retention sweeps and the lease renewals, and close the index."""
        self._released = True
        for task in self._background:
            task.cancel()
        if self.index is not None:
            await self.index.close()

    # -- confirmations --------------------------------------------------------------------------

    def _item_scraped(self, item: Any) -> None:
        """The item went out of the last pipeline: delivered, unless a feed is still to store it
        (delivery.py). A delivered page's record is no longer pending: a crash from now on keeps it as
        a canonical."""
        rid = self._settle(item)
        delivery = Delivery.DELIVERED if self.deliveries is None else self.deliveries.taken(item, rid)
        if rid is None:
            return
        if delivery is Delivery.DELIVERED:
            self._send_soon(self._confirm, [rid])
        elif delivery is Delivery.AWAITING_FEED:
            self._send_soon(self._mark_scraped, [rid])

    def _feed_slot_closed(self, slot: Any) -> None:
        """A stored batch's pages count at once, not after CONFIRM_DELAY: a crawl killed meanwhile would
        have its rerun export them again (docs/reliability.md "Feeds of a killed crawl")."""
        assert self.deliveries is not None
        rids = self.deliveries.stored(slot)
        if rids:
            self._confirm.extend(rids)
            self._confirming = asyncio.ensure_future(self.flush_confirmations())

    def _send_soon(self, queue: list[int], rids: list[int]) -> None:
        """Confirmations and scraped marks are sent in batches, or after CONFIRM_DELAY."""
        if not rids:
            return
        queue.extend(rids)
        if len(self._confirm) + len(self._mark_scraped) >= CONFIRM_BATCH:
            self._confirming = asyncio.ensure_future(self.flush_confirmations())
        elif self._confirming is None or self._confirming.done():
            self._confirming = asyncio.ensure_future(self._confirm_later())

    def _item_gone(self, item: Any) -> None:
        """Dropped or failed after this pipeline: its record stays pending, so a rerun keeps the page."""
        self._settle(item)

    def _settle(self, item: Any) -> int | None:
        """The pending rid of the item a signal names, no longer waited for; None if there is none."""
        if not self.pending or not is_item(item):
            return None
        return self.pending.take(item, lambda: self._page_id(item))

    async def _confirm_later(self) -> None:
        await asyncio.sleep(CONFIRM_DELAY)
        await self.flush_confirmations()

    async def flush_confirmations(self, closing: bool = False) -> None:
        marks, self._mark_scraped = self._mark_scraped, []
        rids, self._confirm = self._confirm, []
        if self.index is None:
            return
        try:
            if marks:  # before the confirmations: a mark arriving after its record's confirmation does nothing
                await self.index.scraped(marks)
            if rids:
                await self.index.confirm(rids)
        except IndexUnavailable as exc:  # still pending: a rerun keeps these pages again rather than lose them
            self._warn_once(
                "confirm",
                "Could not confirm %(count)d delivered pages (%(error)s): their records stay pending, and the "
                "next crawl keeps those pages again; further failures to confirm are not repeated",
                {"count": len(rids) + len(marks), "error": exc},
            )
        if self._unjoined:
            await self._undo_joins_left(closing)

    # -- joins without a merge record -------------------------------------------------------------

    async def undo_join(self, rid: int, page_id: str) -> None:
        """A join whose merge record was refused leaves the group; refused too (a full Redis refuses
        every write), it is tried again with each batch of confirmations and at close."""
        assert self.index is not None
        try:
            await self.index.remove(rid)
        except IndexUnavailable as exc:
            self._unjoined[rid] = page_id
            self._warn_once(
                "undo join",
                "Could not undo the join of %(id)s, whose merge record the log refused (%(error)s): it is undone "
                "when the index takes writes again; joins left to undo are said at close",
                {"id": printable(page_id), "error": exc},
            )

    async def _undo_joins_left(self, closing: bool = False) -> None:
        """Try the refused undos again; at close, one error names the pages still joined unrecorded."""
        assert self.index is not None
        for rid, page_id in list(self._unjoined.items()):
            try:
                await self.index.remove(rid)
            except IndexUnavailable:
                continue
            del self._unjoined[rid]
            logger.info("SimHash: the join of %(id)s, which has no merge record, is undone",
                        {"id": printable(page_id)}, extra={"spider": self.crawler.spider})
        if closing and self._unjoined:
            logger.error(
                "SimHash: %(count)d pages are members of a group without a merge record, and the index refused "
                "to undo it: erase them (scrapy simhash-erase ID) once the index takes writes again: %(ids)s",
                {"count": len(self._unjoined), "ids": ", ".join(map(printable, self._unjoined.values()))},
                extra={"spider": self.crawler.spider},
            )

    # -- leases and retention ---------------------------------------------------------------------

    async def _keep_alive_periodically(self) -> None:
        """Renew the index session's lease: while it holds, another crawl with the same page in flight
        waits for this one's item instead of taking its pending record for a crashed crawl's."""
        assert self.index is not None
        while True:
            await asyncio.sleep(self.config.session_lease / 3)
            try:
                await self.index.keep_alive()
            except IndexUnavailable:
                pass  # reported by the guard

    async def _expire_periodically(self) -> None:
        """Retention at open, then every SIMHASH_EXPIRE_INTERVAL seconds (0: at open only)."""
        while True:
            await self.expire()
            if self.config.expire_interval <= 0:
                return
            await asyncio.sleep(self.config.expire_interval)

    async def expire(self) -> None:
        """Retention: groups past their TTL leave the index, their log records leave the logs."""
        assert self.index is not None
        try:
            self._inc("simhash/expired", await self.index.expire())
        except IndexUnavailable as exc:
            if isinstance(exc.error, IndexOpenError):  # the server turned to evicting keys: stop writing to it
                self._fail(str(exc))
                return
        await self.logs.expire()


def _truthy(value: Any) -> bool:
    """A spider argument read as a flag, as Scrapy reads a boolean setting (``-a simhash_reset=1``)."""
    return str(value).strip().lower() in ("1", "true", "yes", "on") if value is not None else False


class PendingItems:
    """The canonicals this crawl's items became, until Scrapy reports each item scraped, dropped or
    failed. A signal carries the object judged here, perhaps with its id or URL changed by a later
    pipeline (found by identity: held here, it cannot be another object's), or another object, the
    last pipeline's output or the spider's item (found by its page id). Oldest first, either way."""

    def __init__(self) -> None:
        self._by_item: dict[int, list[tuple[Any, str, int]]] = {}
        self._by_page: dict[str, list[tuple[Any, str, int]]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_page)

    def add(self, item: Any, page_id: str, rid: int) -> None:
        entry = (item, page_id, rid)
        self._by_item.setdefault(id(item), []).append(entry)
        self._by_page.setdefault(page_id, []).append(entry)

    def take(self, item: Any, page_id: Callable[[], str]) -> int | None:
        """The rid of ``item``'s canonical, forgotten; ``page_id`` reads its id when the object is
        not one judged here. None if there is none, or its id can no longer be read."""
        entries = self._by_item.get(id(item))
        if entries is None:
            try:
                entries = self._by_page.get(page_id())
            except Exception:  # a later pipeline made the item unreadable: its record stays pending (safe)
                return None
            if not entries:
                return None
        judged, page, rid = entry = entries[0]
        _forget(self._by_item, id(judged), entry)
        _forget(self._by_page, page, entry)
        return rid


def _forget(entries: dict[Any, list[tuple[Any, str, int]]], key: Any, entry: tuple[Any, str, int]) -> None:
    listed = entries[key]
    del listed[next(n for n, other in enumerate(listed) if other is entry)]
    if not listed:
        del entries[key]
