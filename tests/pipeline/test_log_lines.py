"""What reaches a log line from an item is escaped: an id, URL or text cannot forge log lines (issue 43)."""

from __future__ import annotations

import logging

import pytest
from scrapy.exceptions import DropItem

from pipeline_harness import feed, open_pipeline
from texts import article

from scrapy_simhash.printable import printable

pytestmark = pytest.mark.redis

FORGED = "https://a.example/1\n2026-12-06 02:00:00 [scrapy.core.engine] INFO: Spider closed (finished)\x1b[2J\u2028"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://a.example/p?q=1", "https://a.example/p?q=1"),
        ("a\nb\rc\td", "a\\nb\\rc\\td"),
        ("\x1b[31mred\x00", "\\x1b[31mred\\x00"),
        ("line\u2028sep\u0085", "line\\u2028sep\\x85"),
        ("naïve 日本", "naïve 日本"),
    ],
)
def test_printable_escapes_control_characters_only(text, shown) -> None:
    assert printable(text) == shown
    assert printable(text).isprintable()


async def test_a_dropped_items_message_escapes_the_canonical_id(throwaway_redis, tmp_path, caplog) -> None:
    """The canonical id, on a real Redis index, comes back from the index as stored: the DropItem
    message Scrapy logs, and every warning on the way, hold no control character."""
    body = article(43)
    settings = {"SIMHASH_INDEX_URL": throwaway_redis.url, "SIMHASH_MERGE_LOG": str(tmp_path / "m.jsonl"),
                "SIMHASH_MAX_GROUP_WARN": 1}
    pipeline = await open_pipeline(settings)
    try:
        with caplog.at_level(logging.DEBUG):
            assert await feed(pipeline, {"url": FORGED, "body_text": body})
            with pytest.raises(DropItem) as dropped:
                await pipeline.process_item({"url": FORGED + "copy\n", "body_text": body})
            with pytest.raises(DropItem):
                await pipeline.process_item({"url": "https://b.example/\r\n", "body_text": body})
    finally:
        await pipeline.close_spider()
    message = str(dropped.value)
    assert message.isprintable(), message
    assert "https://a.example/1\\n2026-12-06" in message
    for record in caplog.records:
        assert record.getMessage().isprintable(), record.getMessage()
