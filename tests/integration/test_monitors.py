"""The Spidermon monitor suite in real in-process crawls: a spider yields items, the pipeline counts,
Spidermon runs the suite when the spider closes, and each check passes or fails on those stats."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.crawler import AsyncCrawlerRunner
from scrapy.utils.test import get_reactor_settings
from spidermon.core.actions import Action

from scrapy_simhash.monitors import SimhashMonitorSuite

# Spidermon (1.27, the latest) writes its report through Spider.log(), which Scrapy 2.19 deprecates:
# that one warning is Spidermon's; any other deprecation warning still fails these tests.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Spider\.log\(\) is deprecated:scrapy.exceptions.ScrapyDeprecationWarning:spidermon"
)

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connections are refused
MONITORS = {
    "UncheckedItemsMonitor", "LargestGroupMonitor", "IndexErrorsMonitor", "MergeLogErrorsMonitor",
    "StoppedCrawlMonitor",
}


def text(topic: int) -> str:
    return " ".join(f"topic{topic}word{i}" for i in range(80))


class ItemsSpider(Spider):
    """Yields the items it is given from the answer to one ``data:`` request (nothing leaves the machine)."""

    name = "monitored"

    def __init__(self, items: list[dict], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.items = items

    async def start(self):
        yield Request("data:,items")

    def parse(self, response):
        yield from self.items


class RecordResults(Action):
    """Writes each monitor's status and message into the crawl's stats, for the test to read."""

    def run_action(self) -> None:
        stats = self.data.crawler.stats
        for result in self.result.monitor_results:
            name = type(result.item).__name__
            stats.set_value(f"test/monitor/{name}", result.status)
            if result.error:
                stats.set_value(f"test/monitor_error/{name}", result.error)


class RecordedSuite(SimhashMonitorSuite):
    monitors_finished_actions = [RecordResults]


async def crawl(tmp_path, items: list[dict], **settings: Any) -> dict[str, Any]:
    runner = AsyncCrawlerRunner({
        **get_reactor_settings(),
        "ITEM_PIPELINES": {"scrapy_simhash.pipelines.SimhashPipeline": 300},
        # The documented three lines:
        "SPIDERMON_ENABLED": True,
        "EXTENSIONS": {"spidermon.contrib.scrapy.extensions.Spidermon": 500},
        "SPIDERMON_SPIDER_CLOSE_MONITORS": [RecordedSuite],
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path / 'index.sqlite3'}",
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": "",
        "SIMHASH_INDEX_RETRIES": 0,
        "TELNETCONSOLE_ENABLED": False,
        **settings,
    })
    crawler = runner.create_crawler(ItemsSpider)
    await runner.crawl(crawler, items=items)
    return crawler.stats.get_stats()


def failed(stats: dict[str, Any]) -> set[str]:
    statuses = {key.rsplit("/", 1)[1]: value for key, value in stats.items() if key.startswith("test/monitor/")}
    assert set(statuses) == MONITORS, statuses  # every monitor ran
    return {name for name, status in statuses.items() if status != "OK"}


DISTINCT = [{"url": f"https://a.example/{n}", "body_text": text(n)} for n in range(4)]
COPIES = [{"url": f"https://b.example/{n}", "body_text": text(0)} for n in range(3)]
UNREADABLE = [{"url": f"https://c.example/{n}", "body_text": {"not": "text"}} for n in range(2)]


async def test_a_healthy_crawl_passes_every_monitor(tmp_path) -> None:
    stats = await crawl(tmp_path, DISTINCT + COPIES[:1])
    assert stats["simhash/duplicates"] == 1
    assert failed(stats) == set()


async def test_a_canonical_with_too_many_duplicates_fails_the_group_monitor(tmp_path) -> None:
    stats = await crawl(tmp_path, DISTINCT + COPIES, SIMHASH_MAX_GROUP_WARN=2)
    assert stats["simhash/largest_group"] == 4
    assert failed(stats) == {"LargestGroupMonitor"}
    assert "a group holds 4 pages, more than SIMHASH_MAX_GROUP_WARN = 2" in (
        stats["test/monitor_error/LargestGroupMonitor"]
    )


@pytest.mark.parametrize("limit, expected", [(None, {"UncheckedItemsMonitor"}), (0.5, set())])
async def test_unchecked_items_above_the_limit_fail_the_unchecked_monitor(tmp_path, limit, expected) -> None:
    settings = {} if limit is None else {"SPIDERMON_SIMHASH_MAX_UNCHECKED_SHARE": limit}
    stats = await crawl(tmp_path, DISTINCT + UNREADABLE, **settings)
    assert stats["simhash/unchecked"] == 2 and stats["simhash/items_seen"] == 6
    assert failed(stats) == expected
    if expected:
        assert "2 of 6 items (33.3%) were passed on unchecked" in stats["test/monitor_error/UncheckedItemsMonitor"]


async def test_an_unreachable_index_fails_the_index_and_unchecked_monitors(tmp_path) -> None:
    stats = await crawl(tmp_path, DISTINCT, SIMHASH_INDEX_URL=UNREACHABLE)
    assert stats["simhash/index_errors"] >= len(DISTINCT)
    assert failed(stats) == {"IndexErrorsMonitor", "UncheckedItemsMonitor"}
    assert "is SIMHASH_INDEX_URL reachable?" in stats["test/monitor_error/IndexErrorsMonitor"]


async def test_an_unwritable_merge_log_fails_the_merge_log_monitor(tmp_path) -> None:
    stats = await crawl(tmp_path, DISTINCT + COPIES[:1], SIMHASH_MERGE_LOG=f"{UNREACHABLE}?stream=merges")
    assert stats["simhash/merge_log_errors"] >= 1
    assert failed(stats) == {"MergeLogErrorsMonitor", "UncheckedItemsMonitor"}


async def test_a_log_that_cannot_be_opened_fails_the_stopped_crawl_monitor(tmp_path) -> None:
    (tmp_path / "blocker").write_text("a file where the log's directory should be")
    stats = await crawl(tmp_path, DISTINCT, SIMHASH_MERGE_LOG=str(tmp_path / "blocker" / "merges.jsonl"))
    assert stats["finish_reason"] == "simhash_index_error"
    assert "StoppedCrawlMonitor" in failed(stats)
    assert "the SimHash pipeline closed the spider (simhash_index_error)" in (
        stats["test/monitor_error/StoppedCrawlMonitor"]
    )
