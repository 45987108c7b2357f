"""What happens to odd items: short, empty, unreadable, broken; settings read per spider."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest
import scrapy
from pipeline_harness import feed, open_pipeline, simhash_stats
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from texts import article, edited

from scrapy_simhash.mergelog import read_merge_log
from scrapy_simhash.pipelines import SimhashPipeline
from scrapy_simhash.settings import SettingsError, read


def settings(tmp_path, **extra) -> dict:
    return {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        **extra,
    }


async def test_short_texts_match_exactly_after_normalisation(tmp_path):
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        assert await feed(pipeline, {"url": "u1", "title": "Price drop: Blue kettle, 1.5 litres"})
        assert not await feed(pipeline, {"url": "u2", "title": "price DROP blue kettle 1 5 litres"})
        assert await feed(pipeline, {"url": "u3", "title": "Price drop: Red kettle, 1.5 litres"})
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/short_texts"] == 3 and stats["simhash/duplicates"] == 1
    assert stats["simhash/fingerprinted"] == 0
    [merged] = read_merge_log(str(tmp_path / "merges.jsonl"))
    assert (merged["matched_id"], merged["duplicate_id"], merged["jaccard"]) == ("u1", "u2", 1.0)


async def test_empty_content_is_passed_on_and_never_indexed(tmp_path):
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        for url in ("u1", "u2"):
            assert await feed(pipeline, {"url": url, "body_text": "<div><script>x()</script></div>", "title": " "})
        assert await pipeline.index.index.count() == 0
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/empty_content"] == 2


async def test_an_unreadable_item_is_passed_on_counted_and_said_once(tmp_path, caplog):
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        assert await feed(pipeline, {"url": "u1", "body_text": {"not": "text"}})
        assert await feed(pipeline, {"url": "u2", "body_text": {"not": "text either"}})
        assert await pipeline.process_item("a bare string") == "a bare string"
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == stats["simhash/bad_fields"] == 3
    assert sum("Passing an item on unchecked" in r.message for r in caplog.records) == 1
    assert "field 'body_text' holds dict" in caplog.text
    assert "SimHash passed 3 items on unchecked" in caplog.text


async def test_a_failure_of_our_own_code_passes_the_item_on_logged(tmp_path, caplog):
    """A bug in a stage must not cost the user the item: it goes on unchecked, counted, with a
    traceback; so do the other items signed in the same batch."""
    pipeline = await open_pipeline(settings(tmp_path))

    def broken_stage(*args, **kwargs):
        raise RuntimeError("a stage broke")

    pipeline.signer.fingerprinter.signatures = broken_stage  # fault injection: no real input triggers a bug
    try:
        items = [{"url": f"https://a.example/{n}", "body_text": article(n)} for n in range(2)]
        assert await asyncio.gather(*map(pipeline.process_item, items)) == items
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == stats["simhash/internal_errors"] == 2
    assert "a stage broke" in caplog.text and "Traceback" in caplog.text


async def test_the_review_log_samples_decisions_near_the_threshold_with_their_text(tmp_path):
    review = tmp_path / "review.jsonl"
    pipeline = await open_pipeline(
        settings(tmp_path, SIMHASH_REVIEW_LOG=str(review), SIMHASH_REVIEW_MARGIN=0.17, SIMHASH_REVIEW_RATE=1.0)
    )
    body = article(2)
    try:
        await feed(pipeline, {"url": "u1", "body_text": body})
        await feed(pipeline, {"url": "u2", "body_text": edited(body, edits=3)})  # Jaccard ~0.94: within 0.17
        await feed(pipeline, {"url": "u3", "body_text": body})  # Jaccard 1.0: outside the margin
    finally:
        await pipeline.close_spider()
    [sampled] = read_merge_log(str(review))
    assert sampled["duplicate_id"] == "u2" and sampled["duplicate_text"] == edited(body, edits=3)
    assert len(list(read_merge_log(str(tmp_path / "merges.jsonl")))) == 2


async def test_a_huge_group_warns_once_and_stays_cheap(tmp_path, caplog):
    """An empty extraction field makes every item one text: one group, one warning, and no bucket
    grows with it (exact copies add no reach, so they are not findable members)."""
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_MAX_GROUP_WARN=2))
    body = article(3)
    try:
        with caplog.at_level(logging.WARNING, logger="scrapy_simhash.pipelines"):
            for n in range(6):
                await feed(pipeline, {"url": f"u{n}", "body_text": body})
    finally:
        await pipeline.close_spider()
    [warning] = [r.getMessage() for r in caplog.records if "SIMHASH_MAX_GROUP_WARN" in r.getMessage()]
    latest = f"the latest joined with Jaccard 1.00 on {len(body):,} characters"
    assert f"u0's group has more than 2 pages; {latest}" in warning
    assert "check SIMHASH_FIELDS" in warning and "raise SIMHASH_MAX_GROUP_WARN" in warning
    stats = simhash_stats(pipeline)
    assert stats["simhash/largest_group"] == 6 and stats["simhash/duplicates_indexed"] == 0


async def test_fields_no_item_has_are_said_once_early(tmp_path, caplog):
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_FIELDS='["title", "body"]'))
    try:
        assert pipeline.config.fields == ["title", "body"]
        for n in range(30):
            await feed(pipeline, {"url": f"u{n}", "headline": "h", "text": article(n)})
    finally:
        await pipeline.close_spider()
    [warning] = [r for r in caplog.records if "SIMHASH_FIELDS" in r.message]
    assert "['title', 'body']" in warning.message and "headline, text, url" in warning.message
    assert simhash_stats(pipeline)["simhash/items_without_fields"] == 30  # every one, not just the first


async def test_a_named_field_no_item_has_is_said_when_the_list_was_given(tmp_path, caplog):
    """One misspelt field of several: items are compared on the others, which may be a title only."""
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_FIELDS="title,bdy"))
    try:
        for n in range(5):  # a crawl shorter than the early check: said when it closes
            await feed(pipeline, {"url": f"u{n}", "title": f"title {n}", "body": article(n)})
    finally:
        await pipeline.close_spider()
    [warning] = [r for r in caplog.records if "SIMHASH_FIELDS" in r.message]
    assert "bdy" in warning.message and "body, title, url" in warning.message and "title" not in warning.args["fields"]


async def test_the_default_fields_an_item_lacks_are_not_said(tmp_path, caplog):
    pipeline = await open_pipeline(settings(tmp_path))  # title, description, body_text: no description
    try:
        for n in range(25):
            await feed(pipeline, {"url": f"u{n}", "title": f"title {n}", "body_text": article(n)})
    finally:
        await pipeline.close_spider()
    assert not [r for r in caplog.records if "SIMHASH_FIELDS" in r.message]


async def test_an_unknown_setting_is_named_with_the_one_meant(tmp_path, caplog):
    """A misspelt or removed setting would silently leave its default in force."""
    pipeline = await open_pipeline(
        settings(tmp_path, SIMHASH_JACARD_THRESHOLD=0.9, SIMHASH_MAX_DISTANCE=3, SIMHASH_ACTION="annotate")
    )
    await pipeline.close_spider()
    [warning] = [r for r in caplog.records if "not a setting" in r.message]
    assert warning.levelname == "WARNING"
    assert "SIMHASH_JACARD_THRESHOLD (SIMHASH_JACCARD_THRESHOLD?)" in warning.message
    assert "SIMHASH_MAX_DISTANCE" in warning.message and "SIMHASH_ACTION" not in warning.message


class CustomSpider(scrapy.Spider):
    name = "custom"
    custom_settings = {"SIMHASH_ACTION": "annotate", "SIMHASH_JACCARD_THRESHOLD": 0.9}


def test_spider_custom_settings_are_honoured_and_defaults_live_under_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    crawler = get_crawler(CustomSpider)
    crawler.spider = crawler._create_spider()
    pipeline = SimhashPipeline.from_crawler(crawler)
    assert pipeline.config.action == "annotate" and pipeline.config.jaccard_threshold == 0.9
    config = read(crawler.settings, "custom")
    assert config.index_url == f"sqlite:///{tmp_path}/.scrapy/simhash/custom.sqlite3"
    assert config.merge_log == f"{tmp_path}/.scrapy/simhash/custom-merges.jsonl"
    assert config.key_prefix == "simhash:{custom}"


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("SIMHASH_ACTION", "delete", "SIMHASH_ACTION = 'delete': must be one of 'drop', 'annotate'"),
        ("SIMHASH_JACCARD_THRESHOLD", 1.5, "SIMHASH_JACCARD_THRESHOLD = 1.5: must be between 0.0 and 1.0"),
        ("SIMHASH_FIELDS", "[title", "SIMHASH_FIELDS = '[title': is not a JSON list of field names"),
        ("SIMHASH_RETENTION", {"short": -1}, "class 'short': a TTL is seconds > 0 or None"),
        ("SIMHASH_RETENTION", {"default": float("inf")}, "class 'default': a TTL is seconds > 0 or None"),
        ("SIMHASH_RETENTION", {"news": 86400}, "needs a 'default' class, the class of an item without one"),
        ("SIMHASH_SESSION_LEASE", float("inf"), "SIMHASH_SESSION_LEASE = inf: must be a finite number"),
        ("SIMHASH_SESSION_LEASE", 1e300, "SIMHASH_SESSION_LEASE = 1e+300: must be between 0.5 and 86400"),
        ("SIMHASH_INDEX_RETRY_DELAY", 60, "SIMHASH_INDEX_RETRY_DELAY = 60: must be between 0.0 and 2.0"),
        ("SIMHASH_EXPIRE_INTERVAL", float("nan"), "SIMHASH_EXPIRE_INTERVAL = nan: must be a finite number"),
        ("SIMHASH_INDEX_RETRIES", 2.7, "SIMHASH_INDEX_RETRIES = 2.7: must be an integer"),
        ("SIMHASH_MIN_WORDS", True, "SIMHASH_MIN_WORDS = True: must be an integer"),
        ("SIMHASH_ALLOW_EVICTION", "sometimes", "SIMHASH_ALLOW_EVICTION = 'sometimes': must be True or False"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it_the_value_and_the_choices(name, value, message):
    with pytest.raises(SettingsError) as raised:
        read(Settings({name: value}), "x")
    assert message in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("off", ["", False, "False", "off", "0", "no"])
def test_a_log_setting_turned_off_in_any_spelling_is_off(off):
    """`-s SIMHASH_MERGE_LOG=False` is the string "False": a log file of that name is not what it means."""
    config = read(Settings({"SIMHASH_MERGE_LOG": off, "SIMHASH_REVIEW_LOG": off}), "x")
    assert config.merge_log is None and config.review_log is None


async def test_retention_expires_groups_from_the_index_and_their_records_from_the_logs(tmp_path):
    classes = {"default": None, "short": 0.5}
    pipeline = await open_pipeline(
        settings(tmp_path, SIMHASH_RETENTION=classes, SIMHASH_RETENTION_FIELD="keep", SIMHASH_EXPIRE_INTERVAL=0)
    )
    body, kept = article(5), article(6)
    try:
        assert await feed(pipeline, {"url": "u1", "body_text": body, "keep": "short"})
        assert not await feed(pipeline, {"url": "u2", "body_text": body, "keep": "short"})
        assert await feed(pipeline, {"url": "k1", "body_text": kept})
        assert not await feed(pipeline, {"url": "k2", "body_text": kept})
        index = pipeline.index.index
        index.retention.clock = lambda: 10**10  # long after: the short group is due
        merges = tmp_path / "merges.jsonl"
        original = merges.read_text()
        merges.write_text(re.sub(r'("timestamp": ?")20', r"\g<1>19", original, count=1))  # its record, old
        await pipeline.upkeep.expire()
        assert await index.records("u1") == [] and await index.records("k1")
    finally:
        await pipeline.close_spider()
    assert [r["duplicate_id"] for r in read_merge_log(str(tmp_path / "merges.jsonl"))] == ["k2"]
    assert simhash_stats(pipeline)["simhash/expired"] == 2


@pytest.mark.parametrize("value", [[], "[]"])
def test_an_empty_html_fields_list_means_no_field_is_html(value):
    assert read(Settings({"SIMHASH_HTML_FIELDS": value}), "x").html_fields == []
