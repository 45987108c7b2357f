"""When a scraped item counts as delivered, so that its page's record may stop being pending.

Without feed exports, at ``item_scraped``: the item went through the last pipeline. With them, when
every feed batch holding the item is stored: S3, GCS and FTP feeds upload a batch only when it
closes (at the end of the crawl, or every ``FEED_EXPORT_BATCH_ITEM_COUNT`` items), and a local
file is flushed then. A record confirmed before would make the next crawl drop the copies of a page
that a failed upload or a killed crawl never delivered; one confirmed later than needed has a killed
crawl's stored pages exported again (docs/reliability.md "Feeds of a killed crawl" measures both).
"""

from __future__ import annotations

from array import array
from enum import Enum
from typing import TYPE_CHECKING, Any

from scrapy.extensions.feedexport import FeedExporter

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.extensions.feedexport import FeedSlot

__all__ = ["Delivery", "FeedDeliveries"]


class Delivery(Enum):
    """What became of a scraped item, for its record."""

    DELIVERED = "no feed takes it: the record is confirmed now"
    AWAITING_FEED = "its feed batches are still to be stored"
    NOT_DELIVERED = "a feed that accepted it failed to export it: the record stays pending"


FAILED_STORES = "feedexport/failed_count/"

# A feed batch: its feed's URI template and its batch number (1 for a feed without batches).
Batch = tuple[str, int]


class FeedDeliveries:
    """The pending records of items that feeds have taken and not yet stored, by batch.

    Which batch of each feed took an item is read off the feed exporter, whose ``item_scraped``
    handler runs before the pipeline's (extensions connect first): the current batch of a feed that
    took the item counted one item more, or was full and replaced by the next. A feed whose filter
    accepted the item and that counted nothing failed to export it (Scrapy logs the error): that
    record is never confirmed. Once any feed fails to store a batch nothing more is released: Scrapy
    reports a failed store only in a stat, which cannot be tied to one batch, and a page kept twice
    is the safe error.
    """

    def __init__(self, exporter: FeedExporter, crawler: Crawler) -> None:
        self._exporter = exporter
        self._stats = crawler.stats
        self._counted: dict[str, tuple[int, int]] = {}  # per feed: its batch and items, as last seen
        self._waiting: dict[tuple[Batch, ...], array[int]] = {}
        self._stored: set[Batch] = set()
        self.failed = False
        self.not_exported = 0

    @classmethod
    def of(cls, crawler: Crawler) -> FeedDeliveries | None:
        """The crawl's feed deliveries; None when it exports no feed."""
        exporters = [ext for ext in crawler.extensions.middlewares if isinstance(ext, FeedExporter)]
        if not exporters or not exporters[0].feeds:
            return None
        return cls(exporters[0], crawler)

    def taken(self, item: Any, rid: int | None) -> Delivery:
        """Note the batches that took a scraped item; what became of it for its record (``rid``, None
        for an item that left none pending)."""
        batches, lost = [], False
        for slot in self._exporter.slots:
            uri = slot.uri_template
            batch, count = self._counted.get(uri, (1, 0))
            now = self._counted[uri] = (slot.batch_id, slot.itemcount)
            if now in ((batch, count + 1), (batch + 1, 0)):  # one more in the batch, or it filled it
                batches.append((uri, batch))
            elif self._exporter.filters[uri].accepts(item):
                lost = True
        if rid is None:
            return Delivery.NOT_DELIVERED
        if lost:
            self.not_exported += 1
            return Delivery.NOT_DELIVERED
        if not batches:
            return Delivery.DELIVERED
        self._waiting.setdefault(tuple(batches), array("q")).append(rid)
        return Delivery.AWAITING_FEED

    def stored(self, slot: FeedSlot) -> list[int]:
        """A batch was closed: the records all of whose batches are now stored."""
        if not self.failed:
            stats = self._stats.get_stats()
            self.failed = any(value for key, value in stats.items() if key.startswith(FAILED_STORES))
        if self.failed:
            return []
        self._stored.add((slot.uri_template, slot.batch_id))
        ready = [batches for batches in self._waiting if all(batch in self._stored for batch in batches)]
        return [rid for batches in ready for rid in self._waiting.pop(batches)]

    def undelivered(self) -> int:
        """Records whose item a feed failed to export, or that still wait for a store."""
        return self.not_exported + sum(len(rids) for rids in self._waiting.values())
