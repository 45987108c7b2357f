"""A real SimhashPipeline built from a Scrapy crawler, for the reliability tests that drive it directly.

``process_item`` is awaited as Scrapy would; only the engine is absent (tests that need the engine's
close-spider path run a real crawl instead).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from scrapy import Spider
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from scrapy_simhash.pipelines import SimhashPipeline

# Each item ends in exactly one of these: indexed as new, matched, empty (not indexed) or skipped.
OUTCOMES = ("simhash/unique", "simhash/duplicates", "simhash/empty_content", "simhash/unchecked")


class HarnessSpider(Spider):
    name = "reliability"


async def open_pipeline(settings: dict[str, Any], spider_name: str = HarnessSpider.name) -> SimhashPipeline:
    """An opened pipeline; the caller awaits ``close_spider()``."""
    crawler = get_crawler(HarnessSpider, {"SIMHASH_MAX_DISTANCE": 3, "SIMHASH_REVIEW_LOG": "", **settings})
    crawler.spider = crawler._create_spider(name=spider_name)
    pipeline = SimhashPipeline.from_crawler(crawler)
    await pipeline.open_spider()
    return pipeline


async def feed(pipeline: SimhashPipeline, item: Any) -> bool:
    """True when the item went on, False when it was dropped as a duplicate."""
    try:
        await pipeline.process_item(item)
    except DropItem:
        return False
    return True


def simhash_stats(pipeline: SimhashPipeline) -> Counter:
    return Counter({k: v for k, v in pipeline.crawler.stats.get_stats().items() if k.startswith("simhash/")})


def outcomes(pipeline: SimhashPipeline) -> int:
    stats = simhash_stats(pipeline)
    return sum(stats[name] for name in OUTCOMES)


async def feed_judged(pipeline: SimhashPipeline, item: Any) -> bool:
    """:func:`feed`, asserting that the item ended in exactly one outcome (nothing lost, nothing twice)."""
    before = outcomes(pipeline)
    kept = await feed(pipeline, item)
    assert outcomes(pipeline) == before + 1, simhash_stats(pipeline)
    return kept
