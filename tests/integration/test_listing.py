"""A listing page in a real crawl: its items reach the pipeline in one turn of the event loop, are
fingerprinted in one batch, and each is judged as it would be alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from texts import article, edited

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("crawl_stream.py")


def test_a_listing_pages_items_are_fingerprinted_together_and_judged_each(tmp_path):
    listings = [{"url": f"https://shop/{i}", "body_text": article(900 + i, words=60)} for i in range(30)]
    reposts = [{"url": f"https://shop/re/{i}", "body_text": edited(listing["body_text"])}
               for i, listing in enumerate(listings)]
    stream = tmp_path / "items.jsonl"
    stream.write_text("".join(json.dumps(item) + "\n" for item in listings[:20] + reposts[:10] + listings[20:]))
    overrides = {"SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db", "SIMHASH_BOILERPLATE": False,
                 "STREAM_ITEMS_PER_PAGE": 40}
    result = subprocess.run([sys.executable, str(DRIVER), str(stream), str(tmp_path), json.dumps(overrides)],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["simhash/signed_together_max"] == 40  # the first page's items, all in one batch
    assert stats["simhash/duplicates"] == 10 and stats["simhash/unique"] == 30
    kept = [json.loads(line)["url"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert sorted(kept) == sorted(item["url"] for item in listings)
