"""A page's record is final once the feed holding its item is stored, not when the item leaves the
last pipeline: S3, GCS and FTP feeds upload a batch when it closes, so a crawl whose upload fails (or
that is killed before it) exported nothing, and the next crawl must keep those pages again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from crawls import crawl, wait_for
from texts import article, edited

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("crawl_stream.py")

ITEMS = [{"url": f"https://site/{i}", "body_text": article(900 + i)} for i in range(6)]
COPIES = [{"url": f"https://mirror/{i}", "body_text": edited(item["body_text"])} for i, item in enumerate(ITEMS)]


def first_crawl(tmp_path: Path, **settings) -> tuple[dict, str]:
    out = tmp_path / "first"
    out.mkdir()
    feed = f"upload://{out}/kept-%(batch_id)d.jsonl"
    return crawl(out, ITEMS, SIMHASH_INDEX_URL=f"sqlite:///{tmp_path}/index.db",
                 FEEDS={feed: {"format": "jsonlines"}}, **settings)


def copies_kept_by_the_next_crawl(tmp_path: Path) -> list[str]:
    out = tmp_path / "next"
    out.mkdir()
    crawl(out, COPIES, SIMHASH_INDEX_URL=f"sqlite:///{tmp_path}/index.db")
    return [json.loads(line)["url"] for line in (out / "kept.jsonl").read_text().splitlines()]


def test_pages_whose_feed_was_stored_make_their_copies_duplicates(tmp_path):
    stats, _ = first_crawl(tmp_path)
    assert stats["feedexport/success_count/UploadStorage"] == 1
    assert copies_kept_by_the_next_crawl(tmp_path) == []


def test_pages_whose_feed_upload_failed_are_kept_by_the_next_crawl(tmp_path):
    stats, log = first_crawl(tmp_path, STREAM_FAILED_UPLOADS=["kept-1.jsonl"])
    assert stats["feedexport/failed_count/UploadStorage"] == 1
    assert sorted(copies_kept_by_the_next_crawl(tmp_path)) == sorted(item["url"] for item in COPIES)
    [line] = [line for line in log.splitlines() if "stay pending" in line]
    assert line.startswith("WARNING") and "6 pages" in line
    assert stats["simhash/undelivered"] == 6


def test_a_batch_that_failed_to_upload_leaves_its_pages_pending(tmp_path):
    """Batches of two: the second (pages 2 and 3) fails to upload, the others are stored."""
    stats, _ = first_crawl(tmp_path, FEED_EXPORT_BATCH_ITEM_COUNT=2, STREAM_FAILED_UPLOADS=["kept-2.jsonl"])
    assert stats["feedexport/failed_count/UploadStorage"] == 1
    assert {"https://mirror/2", "https://mirror/3"} <= set(copies_kept_by_the_next_crawl(tmp_path))


def test_an_item_the_feed_failed_to_export_leaves_its_page_pending(tmp_path):
    """The exporter raised for one item (Scrapy logs it; the item is not in the feed): that page was
    never delivered, though its batch was stored."""
    out = tmp_path / "first"
    out.mkdir()
    stats, _ = crawl(out, ITEMS, SIMHASH_INDEX_URL=f"sqlite:///{tmp_path}/index.db", CONCURRENT_REQUESTS=1,
                     FEEDS={str(out / "kept.jsonl"): {"format": "refusing"}}, STREAM_REFUSED_EXPORTS=["https://site/2"])
    assert len((out / "kept.jsonl").read_text().splitlines()) == len(ITEMS) - 1 and stats["simhash/undelivered"] == 1
    assert copies_kept_by_the_next_crawl(tmp_path) == ["https://mirror/2"]


def test_a_page_scraped_by_a_live_crawl_whose_feed_waits_is_matched_by_another(tmp_path):
    """Two crawls at once with the same pages. The first scraped them; its feed is stored only when
    it ends: the second crawl neither waits for those records (twice the lease, then passed on
    unchecked) nor keeps the pages again: it drops them."""
    first = tmp_path / "first"
    first.mkdir()
    pages = ITEMS + [{"url": f"https://site/held-{i}", "body_text": article(990 + i)} for i in range(10)]
    (first / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in pages))
    settings = {"SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db", "SIMHASH_BOILERPLATE": False,
                "SIMHASH_SESSION_LEASE": 1, "STREAM_STALL_AFTER": len(ITEMS),
                "FEEDS": {f"upload://{first}/kept.jsonl": {"format": "jsonlines"}}}
    running = subprocess.Popen([sys.executable, str(DRIVER), str(first / "items.jsonl"), str(first),
                                json.dumps(settings)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        # its first pages scraped, the rest held: it runs on
        wait_for(running, lambda line: line == "held", "held pages")
        second = tmp_path / "second"
        second.mkdir()
        stats, _ = crawl(second, ITEMS, SIMHASH_INDEX_URL=f"sqlite:///{tmp_path}/index.db")
    finally:
        running.kill()
        running.wait()
    assert stats.get("simhash/unchecked", 0) == 0 and stats["simhash/dropped"] == len(ITEMS)
