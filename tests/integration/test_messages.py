"""What a user reads when something is wrong, in real crawls (one OS process each): one line that
says what and what happens next, never a traceback per item, never a password."""

from __future__ import annotations

import pytest
from crawls import crawl
from redis_servers import free_port
from texts import article, edited

pytestmark = pytest.mark.slow

ITEMS = [{"url": f"https://site/{i}", "body_text": article(800 + i)} for i in range(6)]
COPIES = [{"url": f"https://mirror/{i}", "body_text": edited(item["body_text"])} for i, item in enumerate(ITEMS)]


def lines_with(log: str, text: str) -> list[str]:
    return [line for line in log.splitlines() if text in line]


def test_a_bad_setting_is_one_line_and_the_crawl_closes(tmp_path):
    stats, log = crawl(tmp_path, ITEMS, SIMHASH_ACTION="delete")
    [line] = lines_with(log, "SIMHASH_ACTION")
    assert "ERROR" in line and "SIMHASH_ACTION = 'delete': must be one of 'drop', 'annotate'" in line
    assert "spider 'stream' will close" in line  # spiders of one process share a log
    assert "Traceback" not in log and stats["finish_reason"] == "simhash_settings_error"


def test_an_index_file_that_cannot_be_opened_is_one_error_and_a_clean_close(tmp_path):
    stats, log = crawl(tmp_path, ITEMS, SIMHASH_INDEX_URL="sqlite:////proc/simhash/x.db")
    [line] = [line for line in lines_with(log, "/proc/simhash/x.db") if not line.startswith("INFO")]
    assert line.startswith("ERROR") and "Cannot use the SimHash index" in line and "closing the spider" in line
    assert "Traceback" not in log and "Task exception was never retrieved" not in log
    assert "AssertionError" not in log and stats["finish_reason"] == "simhash_index_error"


def test_an_unreachable_redis_is_said_once_with_what_happens_next_and_no_password(tmp_path):
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/3"
    stats, log = crawl(tmp_path, ITEMS + COPIES, SIMHASH_INDEX_URL=url, SIMHASH_INDEX_RETRIES=1,
                       SIMHASH_INDEX_RETRY_DELAY=0.01)
    assert "hunter2" not in log
    said = [line for line in lines_with(log, "redis://:***@127.0.0.1:") if line.startswith("WARNING")]
    assert len(said) == 2  # at open, and a summary at close
    assert "passed on unchecked" in said[0] and "Traceback" not in log
    assert stats["simhash/unchecked"] == len(ITEMS + COPIES) and stats["item_scraped_count"] == len(ITEMS + COPIES)


def test_fail_mode_closes_the_crawl_and_keeps_the_item(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    stats, log = crawl(tmp_path, ITEMS, SIMHASH_INDEX_URL=url, SIMHASH_ON_INDEX_ERROR="fail", SIMHASH_INDEX_RETRIES=0)
    assert stats["finish_reason"] == "simhash_index_error" and "Traceback" not in log


def test_a_dropped_duplicate_is_one_info_line(tmp_path):
    stats, log = crawl(tmp_path, ITEMS + COPIES)
    dropped = lines_with(log, "Dropped: near-duplicate of")
    assert len(dropped) == len(COPIES) == stats["simhash/dropped"]
    assert all("INFO" in line for line in dropped) and not lines_with(log, "WARNING: Dropped")


def test_the_addon_alone_enables_the_pipeline(tmp_path):
    """ADDONS = {"scrapy_simhash.Addon": 0} and nothing else: the pipeline runs and drops the copies."""
    stats, log = crawl(tmp_path, ITEMS + COPIES, ITEM_PIPELINES={}, ADDONS={"scrapy_simhash.Addon": 0})
    assert stats["simhash/dropped"] == len(COPIES) and "scrapy_simhash.pipelines.SimhashPipeline" in log
