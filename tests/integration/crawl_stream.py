"""One real Scrapy crawl, in its own OS process, whose spider scrapes the items of a JSON-lines file.

    python tests/crawl_stream.py ITEMS.jsonl OUT_DIR '{"SIMHASH_INDEX_URL": ...}'

Each item is the answer to a request (a ``data:`` URL, nothing leaves the machine), so it reaches
``SimhashPipeline`` exactly as a scraped page's item does; the kept ones are exported to
``OUT_DIR/kept.jsonl`` (a feed), the merge log goes to ``OUT_DIR/merges.jsonl`` and the crawl's
stats (``finish_reason`` included) to ``OUT_DIR/stats.json``. The crawl reports on its standard
output, a line each, what a test waits for: ``held`` (``StallPipeline``), ``stored N`` (N items in
the feed's stored batches so far), ``confirmed N`` (N records the SimHash pipeline confirmed on its
index so far) and, with the setting ``STREAM_BARRIER``, ``ready``, after which
the spider emits nothing until a line arrives on its standard input, so that several crawler
processes really ingest at the same moment. Used by the multi-process and fail-mode tests. With
the setting ``STREAM_ITEMS_PER_PAGE`` a response yields that many items, as a listing page does;
with ``STREAM_COPY_ITEMS`` a later pipeline replaces each item with a copy. A feed URI
``upload://PATH`` stores as S3, GCS and FTP do (``UploadStorage``); the feed format ``refusing``
fails to export the items whose URL ``STREAM_REFUSED_EXPORTS`` lists.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from pathlib import Path

from scrapy import Request, Spider, signals
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.exporters import JsonLinesItemExporter
from scrapy.extensions.feedexport import BlockingFeedStorage


class StreamSpider(Spider):
    name = "stream"

    def __init__(self, items_path: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.items_path = items_path

    async def start(self):
        if self.settings.getbool("STREAM_BARRIER"):
            report("ready")
            await asyncio.to_thread(sys.stdin.readline)  # the test's go, once every crawler is ready
        per_page = self.settings.getint("STREAM_ITEMS_PER_PAGE", 1)
        with open(self.items_path, encoding="utf-8") as lines:
            items = [json.loads(line) for line in lines]
        for number in range(0, len(items), per_page):
            yield Request(f"data:,{number}", cb_kwargs={"items": items[number : number + per_page]}, dont_filter=True)

    def parse(self, response, items: list[dict]) -> list[dict]:
        return items


class StallPipeline:
    """After ``STREAM_STALL_AFTER`` items, holds every item for ever: items the SimHash pipeline has
    indexed that never reach the feed, as when a crawl is killed between the two."""

    HELD = 10  # items held before the pipeline reports ``held``

    def __init__(self, after: int) -> None:
        self.after = after
        self.seen = 0

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getint("STREAM_STALL_AFTER"))

    async def process_item(self, item):
        self.seen += 1
        if self.after and self.seen > self.after:
            if self.seen == self.after + self.HELD:
                report("held")
            await asyncio.get_running_loop().create_future()
        return item


class CopyPipeline:
    """With ``STREAM_COPY_ITEMS``, returns a new item object, as a pipeline that builds its output does
    (Scrapy's item_scraped then carries that object, not the one earlier pipelines saw)."""

    def __init__(self, copy: bool) -> None:
        self.copy = copy

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getbool("STREAM_COPY_ITEMS"))

    def process_item(self, item):
        return dict(item) if self.copy else item


class UploadStorage(BlockingFeedStorage):
    """``upload://PATH``: a temporary file, uploaded to PATH when the batch closes, as S3, GCS and FTP
    feeds are; the upload of a file named in ``STREAM_FAILED_UPLOADS`` fails."""

    def __init__(self, uri: str, failing: list[str]) -> None:
        self.path = Path(uri.removeprefix("upload://"))
        self.fails = self.path.name in failing

    @classmethod
    def from_crawler(cls, crawler, uri: str, *, feed_options=None):
        return cls(uri, crawler.settings.getlist("STREAM_FAILED_UPLOADS"))

    def _store_in_thread(self, file) -> None:
        if self.fails:
            raise OSError(f"upload of {self.path.name} refused")
        file.seek(0)
        self.path.write_bytes(file.read())
        file.close()


class RefusingExporter(JsonLinesItemExporter):
    """JSON lines, but an item whose URL is in ``refused`` raises, as one with a value the format cannot
    hold does: Scrapy logs the error and the item is not in the feed."""

    refused: frozenset[str] = frozenset()

    def export_item(self, item) -> None:
        if item["url"] in self.refused:
            raise TypeError(f"cannot export {item['url']}")
        super().export_item(item)


def report(line: str) -> None:
    """A line on standard output, where a test waits for it (tests/crawls.py ``wait_for``)."""
    print(line, flush=True)


class StoredReport:
    """Reports ``stored N`` each time a feed batch is stored, N the items stored so far."""

    def __init__(self) -> None:
        self.stored = 0

    def slot_closed(self, slot) -> None:
        self.stored += slot.itemcount
        report(f"stored {self.stored}")


class ConfirmedReport:
    """Reports ``confirmed N`` each time the SimHash pipeline's confirmation of delivered pages has
    returned from its index, N the records confirmed so far: the pipeline's own call, observed."""

    def __init__(self, crawler) -> None:
        self.crawler = crawler
        self.confirmed = 0

    def spider_opened(self) -> None:  # sent once every pipeline has opened, its index included
        for pipeline in self.crawler.engine.scraper.itemproc.middlewares:
            index = getattr(getattr(pipeline, "upkeep", None), "index", None)
            if index is not None:
                index.confirm = self._reported(index.confirm)

    def _reported(self, confirm):
        async def reported(rids: list[int]) -> None:
            await confirm(rids)
            self.confirmed += len(rids)
            report(f"confirmed {self.confirmed}")

        return reported


def crawl(items_path: str, out_dir: Path, overrides: dict) -> None:
    settings = {
        "ITEM_PIPELINES": {"scrapy_simhash.pipelines.SimhashPipeline": 300},
        "FEEDS": {str(out_dir / "kept.jsonl"): {"format": "jsonlines"}},
        "SIMHASH_MERGE_LOG": str(out_dir / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": "",
        "LOG_FILE": str(out_dir / "crawl.log"),
        "LOG_LEVEL": "INFO",
        "LOG_FORMAT": "%(levelname)s %(name)s: %(message)s",
        "TELNETCONSOLE_ENABLED": False,
        "FEED_STORAGES": {"upload": UploadStorage},
        "FEED_EXPORTERS": {"refusing": RefusingExporter},
        **overrides,
    }
    settings["ITEM_PIPELINES"] = {**settings["ITEM_PIPELINES"], CopyPipeline: 980, StallPipeline: 990}
    RefusingExporter.refused = frozenset(settings.get("STREAM_REFUSED_EXPORTS", ()))
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(StreamSpider)
    stored = StoredReport()
    crawler.signals.connect(stored.slot_closed, signal=signals.feed_slot_closed)
    confirmed = ConfirmedReport(crawler)
    crawler.signals.connect(confirmed.spider_opened, signal=signals.spider_opened)
    process.crawl(crawler, items_path=items_path)
    process.start()
    (out_dir / "stats.json").write_text(json.dumps(crawler.stats.get_stats(), default=str))


if __name__ == "__main__":
    warnings.simplefilter("error", ScrapyDeprecationWarning)
    crawl(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]))
