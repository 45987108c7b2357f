"""A real SimhashPipeline built from a Scrapy crawler, driven item by item as Scrapy awaits it.

Only the engine is absent; tests of what needs it (closing the spider, scraped signals) run a real crawl.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from scrapy import Spider, signals
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from scrapy_simhash.pipelines import SimhashPipeline

# Each item ends in exactly one of these: indexed as new, matched, seen before, empty (not indexed) or skipped.
OUTCOMES = ("simhash/unique", "simhash/duplicates", "simhash/seen", "simhash/empty_content", "simhash/unchecked")


class HarnessSpider(Spider):
    name = "harness"


async def open_pipeline(settings: dict[str, Any], spider_name: str = HarnessSpider.name) -> SimhashPipeline:
    """An opened pipeline; the caller awaits ``close_spider()``."""
    crawler = get_crawler(HarnessSpider, {"SIMHASH_REVIEW_LOG": "", "SIMHASH_BOILERPLATE": False, **settings})
    crawler.spider = crawler._create_spider(name=spider_name)
    pipeline = SimhashPipeline.from_crawler(crawler)
    await pipeline.open_spider()
    return pipeline


async def feed(pipeline: SimhashPipeline, item: Any, scraped: bool = True) -> bool:
    """True when the item went on, False when it was dropped as a duplicate. An item that went on is
    reported scraped, as Scrapy's engine would once the last pipeline passed it."""
    try:
        await pipeline.process_item(item)
    except DropItem:
        return False
    if scraped:
        pipeline.crawler.signals.send_catch_log(signals.item_scraped, item=item, response=None, spider=None)
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


async def until(condition) -> None:
    """Let the event loop run until ``condition()`` holds: a wait on a state, not on the clock (the
    pause between checks only keeps the loop from spinning)."""
    while not condition():
        await asyncio.sleep(0.001)


def finished_at_once(coroutine):
    """The value of ``coroutine`` run to its end in one step: it must not wait for the loop (an
    AssertionError if it does), so its item goes on in the step that made it."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("it waited for the event loop")
