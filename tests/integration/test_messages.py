"""What a user reads when something is wrong, in real crawls (one OS process each): one line that
says what and what happens next, never a traceback per item, never a password."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest
from crawls import DRIVER, crawl, wait_for
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


def test_a_dropped_duplicate_is_one_short_info_line_naming_it_and_its_group(tmp_path):
    stats, log = crawl(tmp_path, ITEMS + COPIES)
    dropped = lines_with(log, "Dropped: near-duplicate")
    assert len(dropped) == len(COPIES) == stats["simhash/dropped"]
    assert all("INFO" in line for line in dropped) and not lines_with(log, "WARNING: Dropped")
    named = {frozenset(re.findall(r"https://\w+/\d", line.partition(" (")[0])) for line in dropped}  # duplicate, group
    assert named == {frozenset({f"https://site/{i}", f"https://mirror/{i}"}) for i in range(len(COPIES))}
    assert not any(copy["body_text"][:60] in log for copy in COPIES)  # the item itself is not logged


def test_drop_debug_logs_the_whole_dropped_item_too(tmp_path):
    stats, log = crawl(tmp_path, ITEMS + COPIES, SIMHASH_DROP_DEBUG=True)
    assert stats["simhash/dropped"] == len(COPIES)
    assert all(copy["body_text"][:60] in log for copy in COPIES)


def test_the_addon_alone_enables_the_pipeline(tmp_path):
    """ADDONS = {"scrapy_simhash.Addon": 0} and nothing else: the pipeline runs and drops the copies."""
    stats, log = crawl(tmp_path, ITEMS + COPIES, ITEM_PIPELINES={}, ADDONS={"scrapy_simhash.Addon": 0})
    assert stats["simhash/dropped"] == len(COPIES) and "scrapy_simhash.pipelines.SimhashPipeline" in log


# -- permanent faults stop the crawl, with one line naming the file or setting and what to do ---------


def error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("ERROR")]


def corrupt_pages(path) -> None:
    """Overwrite the body of every page but the first (the schema's) with random bytes."""
    data, page = bytearray(path.read_bytes()), 4096
    for start in range(2 * page, len(data), page):
        data[start + 8 : start + 200] = os.urandom(192)
    path.write_bytes(bytes(data))


def test_a_corrupt_sqlite_index_stops_the_crawl_saying_restore_or_reset(tmp_path):
    many = [{"url": f"https://site/{i}", "body_text": article(900 + i)} for i in range(60)]
    stats, _ = crawl(tmp_path, many)
    assert stats["simhash/unique"] == len(many)
    corrupt_pages(tmp_path / "index.db")

    stats, log = crawl(tmp_path, many + [{**item, "url": item["url"] + "?v=2"} for item in many])

    [line] = error_lines(log)
    assert f"SimHash index sqlite:///{tmp_path}/index.db is corrupt (database disk image is malformed)" in line
    assert "restore it from a backup, or start over with scrapy simhash-reset --spider stream" in line
    assert stats["finish_reason"] == "simhash_index_error" and "Traceback" not in log
    assert "passed on unchecked" not in lines_with(log, "guard")  # no outage warning: nothing to wait for


def test_an_index_of_a_newer_schema_says_upgrade_not_rebuild(tmp_path):
    crawl(tmp_path, ITEMS)
    with sqlite3.connect(tmp_path / "index.db") as db:
        db.execute("UPDATE meta SET value = '99' WHERE name = 'schema'")

    stats, log = crawl(tmp_path, ITEMS)

    [line] = error_lines(log)
    assert "has key schema 99, newer than this version of scrapy-simhash reads (7)" in line
    assert "upgrade scrapy-simhash" in line and "build a new index" not in line
    assert stats["finish_reason"] == "simhash_index_error"


def test_a_merge_log_that_cannot_be_opened_is_named_with_its_setting(tmp_path):
    (tmp_path / "blocker").write_text("a file where the log's directory should be")
    path = tmp_path / "blocker" / "merges.jsonl"

    stats, log = crawl(tmp_path, ITEMS, SIMHASH_MERGE_LOG=str(path))

    [line] = error_lines(log)
    assert f"The SimHash merge log SIMHASH_MERGE_LOG = '{path}' cannot be opened" in line
    assert "point SIMHASH_MERGE_LOG elsewhere" in line and "Cannot use the SimHash index" not in line
    assert stats["finish_reason"] == "simhash_index_error"


def test_a_merge_log_that_cannot_be_written_mid_crawl_stops_it(tmp_path):
    logs = tmp_path / "logs"
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(item) + "\n" for item in ITEMS + COPIES))
    settings = {"SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db", "SIMHASH_BOILERPLATE": False,
                "SIMHASH_MERGE_LOG": str(logs / "merges.jsonl"), "STREAM_BARRIER": True}
    process = subprocess.Popen([sys.executable, str(DRIVER), str(items), str(tmp_path), json.dumps(settings)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(process, lambda line: line == "ready", "the crawl ready")  # the log is open
        shutil.rmtree(logs)
        logs.write_text("a file where the log's directory was")
        process.stdin.write(b"go\n")
        process.stdin.close()
        assert process.wait(timeout=120) == 0, process.stderr.read().decode()[-3000:]
    finally:
        process.kill()
        process.wait()
    log = (tmp_path / "crawl.log").read_text()
    stats = json.loads((tmp_path / "stats.json").read_text())
    [line] = error_lines(log)
    assert f"The SimHash merge log SIMHASH_MERGE_LOG = '{logs / 'merges.jsonl'}' cannot be written" in line
    assert stats["finish_reason"] == "simhash_index_error"
    assert stats.get("simhash/dropped", 0) == 0  # no duplicate dropped unrecorded
