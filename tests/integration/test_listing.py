"""A listing page in a real crawl: its items reach the pipeline in one turn of the event loop, are
fingerprinted in one batch, and each is judged as it would be alone."""

from __future__ import annotations

import json

import pytest
from crawls import crawl
from texts import article, edited

pytestmark = pytest.mark.slow


def test_a_listing_pages_items_are_fingerprinted_together_and_judged_each(tmp_path):
    listings = [{"url": f"https://shop/{i}", "body_text": article(900 + i, words=60)} for i in range(30)]
    reposts = [{"url": f"https://shop/re/{i}", "body_text": edited(listing["body_text"])}
               for i, listing in enumerate(listings)]
    stats, _ = crawl(tmp_path, listings[:20] + reposts[:10] + listings[20:], STREAM_ITEMS_PER_PAGE=40)
    assert stats["simhash/fingerprint_batch_max"] == 40  # the first page's items, all in one batch
    assert stats["simhash/duplicates"] == 10 and stats["simhash/unique"] == 30
    kept = [json.loads(line)["url"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert sorted(kept) == sorted(item["url"] for item in listings)


def test_canonicals_are_confirmed_when_a_later_pipeline_returns_a_new_item(tmp_path):
    """Scrapy's item_scraped carries the last pipeline's output: a record must be confirmed all the
    same, or the next crawl takes it for a crashed crawl's pending page and keeps every copy again."""
    pages = [{"url": f"https://shop/{i}", "body_text": article(950 + i, words=80)} for i in range(12)]
    copies = [{"url": f"https://mirror/{i}", "body_text": page["body_text"]} for i, page in enumerate(pages)]
    index = f"sqlite:///{tmp_path}/index.db"  # both crawls'
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, _ = crawl(tmp_path / "first", pages, SIMHASH_INDEX_URL=index, STREAM_COPY_ITEMS=True)
    second, _ = crawl(tmp_path / "second", copies, SIMHASH_INDEX_URL=index, STREAM_COPY_ITEMS=True)
    assert first["simhash/unique"] == 12 and first["item_scraped_count"] == 12
    assert second.get("simhash/duplicates") == 12, second
