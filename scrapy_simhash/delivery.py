"""When a scraped item counts as delivered, so that its page's record may stop being pending.

Without feed exports, at ``item_scraped``: the item went through the last pipeline. With them, when
every feed batch holding the item is stored: S3, GCS and FTP feeds upload a batch only when it
closes (at the end of the crawl, or every ``FEED_EXPORT_BATCH_ITEM_COUNT`` items), and a local
file is flushed then. A record confirmed before would make the next crawl drop the copies of a page
that a failed upload or a killed crawl never delivered.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import TYPE_CHECKING, Any

from scrapy.extensions.feedexport import FeedExporter

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.extensions.feedexport import FeedSlot

__all__ = ["FeedDeliveries"]

FAILED_STORES = "feedexport/failed_count/"

# A feed batch: its feed's URI template and its batch number (1 for a feed without batches).
Batch = tuple[str, int]


class FeedDeliveries:
    """The pending records of items that feeds have taken and not yet stored, by batch.

    Batches are numbered as the feed exporter numbers them: it counts the items each feed's filter
    accepts, in ``item_scraped`` order, and starts a new batch every ``batch_item_count`` items.
    Once any feed fails to store a batch nothing more is released: Scrapy reports a failed store
    only in a stat, which cannot be tied to one batch, and a page kept twice is the safe error.
    """

    def __init__(self, exporter: FeedExporter, crawler: Crawler) -> None:
        self._exporter = exporter
        self._stats = crawler.stats
        self._taken: Counter[str] = Counter()
        self._waiting: dict[tuple[Batch, ...], array[int]] = {}
        self._stored: set[Batch] = set()
        self.failed = False

    @classmethod
    def of(cls, crawler: Crawler) -> FeedDeliveries | None:
        """The crawl's feed deliveries; None when it exports no feed."""
        exporters = [ext for ext in crawler.extensions.middlewares if isinstance(ext, FeedExporter)]
        if not exporters or not exporters[0].feeds:
            return None
        return cls(exporters[0], crawler)

    def taken(self, item: Any, rid: int | None) -> bool:
        """Count a scraped item into the batches that take it; True if its record (``rid``, None for an
        item that left none pending) is delivered already: no feed takes the item."""
        batches = []
        for uri, options in self._exporter.feeds.items():
            if not self._exporter.filters[uri].accepts(item):
                continue
            self._taken[uri] += 1
            size = options["batch_item_count"]
            batches.append((uri, (self._taken[uri] - 1) // size + 1 if size else 1))
        if rid is None or not batches:
            return rid is not None
        self._waiting.setdefault(tuple(batches), array("q")).append(rid)
        return False

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
        """Records still waiting for a store."""
        return sum(len(rids) for rids in self._waiting.values())
