"""SimhashPipeline driven item by item, as Scrapy awaits it, on a real SQLite index (and a dead Redis)."""

from __future__ import annotations

import logging

import pytest
import scrapy
from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from pipeline_harness import feed, open_pipeline, simhash_stats
from scrapy_simhash import fingerprint
from scrapy_simhash.fingerprint import hamming, simhash
from scrapy_simhash.mergelog import read_merge_log
from scrapy_simhash.pipelines import SimhashPipeline
from scrapy_simhash.settings import read


def edited(text: str) -> str:
    """The same page after a typo fix: one word changed."""
    words = text.split(" ")
    words[len(words) // 2] = "typofix"
    return " ".join(words)


@pytest.fixture
def body(corpus) -> str:
    """A real page of a few hundred words whose typo fix stays within the harness's 3 bits (a one-word
    edit moves a page 0..several bits, see test_fingerprint; these tests are about what follows)."""
    return next(
        doc["body_text"]
        for doc in corpus
        if 300 < len(doc["body_text"].split()) < 600
        and hamming(simhash(doc["body_text"]), simhash(edited(doc["body_text"]))) <= 2
    )


def settings(tmp_path, **extra) -> dict:
    return {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        **extra,
    }


async def test_near_duplicate_is_dropped_naming_its_canonical(tmp_path, body) -> None:
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        with pytest.raises(DropItem, match=r"near-duplicate of https://a\.example/p \(distance \d+, Jaccard 0\.9\d+\)"):
            await pipeline.process_item({"url": "https://b.example/copy", "body_text": edited(body)})
        canonical = await pipeline.index.index.get("https://a.example/p")
        assert "https://b.example/copy" in canonical.urls
    finally:
        await pipeline.close_spider()
    [merged] = read_merge_log(str(tmp_path / "merges.jsonl"))
    assert merged["decision"] == "merged"
    assert (merged["canonical_url"], merged["duplicate_url"]) == ("https://a.example/p", "https://b.example/copy")
    assert merged["rule"]["jaccard_threshold"] == 0.82 and merged["rule"]["max_distance"] == 3
    stats = simhash_stats(pipeline)
    assert stats["simhash/dropped"] == stats["simhash/duplicates"] == 1 and stats["simhash/unique"] == 1


async def test_annotate_mode_passes_the_duplicate_on_with_the_evidence(tmp_path, body) -> None:
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_ACTION="annotate"))
    try:
        first = await pipeline.process_item({"url": "https://a.example/p", "body_text": body})
        second = await pipeline.process_item({"url": "https://b.example/copy", "body_text": edited(body)})
    finally:
        await pipeline.close_spider()
    assert "duplicate_of" not in first
    assert second["duplicate_of"] == "https://a.example/p"
    assert 0 <= second["simhash_distance"] <= 3 and second["jaccard"] >= 0.82
    assert len(second["fingerprint"]) == 16 and int(second["fingerprint"], 16) > 0
    assert simhash_stats(pipeline)["simhash/annotated"] == 1


class UndeclaredItem(scrapy.Item):
    url = scrapy.Field()
    body_text = scrapy.Field()


async def test_annotating_an_item_without_the_fields_is_counted_not_fatal(tmp_path, body) -> None:
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_ACTION="annotate"))
    try:
        await pipeline.process_item(UndeclaredItem(url="https://a.example/p", body_text=body))
        kept = await pipeline.process_item(UndeclaredItem(url="https://b.example/p", body_text=body))
    finally:
        await pipeline.close_spider()
    assert ItemAdapter(kept).get("url") == "https://b.example/p"
    assert simhash_stats(pipeline)["simhash/annotation_errors"] == 1


async def test_a_candidate_failing_jaccard_is_rejected_logged_and_indexed(tmp_path, body) -> None:
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_JACCARD_THRESHOLD=1.0))
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        assert await feed(pipeline, {"url": "https://a.example/q", "body_text": edited(body)})
        assert await pipeline.index.index.count() == 2
    finally:
        await pipeline.close_spider()
    [rejected] = read_merge_log(str(tmp_path / "merges.jsonl"))
    assert rejected["decision"] == "rejected" and rejected["jaccard"] < 1.0
    assert rejected["duplicate_url"] == "https://a.example/q"
    assert simhash_stats(pipeline)["simhash/false_positives"] == 1


async def test_an_items_decisions_are_written_together(tmp_path, body) -> None:
    """Every verified candidate of one item is recorded in one merge-log write (one flush, one round trip)."""
    near_both = next(  # a third version within the harness's 3 bits of the page and of its typo fix
        text
        for position in range(1, 200)
        for text in [edited(body).replace(body.split(" ")[position], "reworded", 1)]
        if max(hamming(simhash(text), simhash(version)) for version in (body, edited(body))) <= 3
    )
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_JACCARD_THRESHOLD=1.0))
    writes = []
    write = pipeline.merge_log.write

    async def recorded_write(records):
        writes.append([(record["decision"], record["duplicate_url"]) for record in records])
        await write(records)

    pipeline.merge_log.write = recorded_write
    try:
        for url, text in (("https://a.example/p", body), ("https://a.example/q", edited(body)),
                          ("https://a.example/r", near_both)):
            assert await feed(pipeline, {"url": url, "body_text": text})
    finally:
        await pipeline.close_spider()
    assert writes == [[("rejected", "https://a.example/q")], [("rejected", "https://a.example/r")] * 2]
    assert len(list(read_merge_log(str(tmp_path / "merges.jsonl")))) == 3


async def test_an_item_is_tokenised_once(tmp_path, body, monkeypatch) -> None:
    """The word count SIMHASH_MIN_WORDS needs comes from the fingerprint's own tokenisation (a second
    pass over the text cost a fifth of fingerprinting)."""
    segmented: list[int] = []
    segment = fingerprint._segment

    def counting(text: str):
        segmented.append(len(text))
        return segment(text)

    monkeypatch.setattr(fingerprint, "_segment", counting)
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        assert not await feed(pipeline, {"url": "https://b.example/copy", "body_text": edited(body)})
    finally:
        await pipeline.close_spider()
    assert len(segmented) == 2


async def test_short_texts_match_exactly_after_normalisation(tmp_path) -> None:
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        assert await feed(pipeline, {"url": "u1", "title": "Price drop: Blue kettle, 1.5 litres"})
        assert not await feed(pipeline, {"url": "u2", "title": "price DROP blue kettle 1 5 litres"})
        assert await feed(pipeline, {"url": "u3", "title": "Price drop: Red kettle, 1.5 litres"})
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/short_texts"] == 3 and stats["simhash/exact_matches"] == 1
    assert stats["simhash/fingerprinted"] == 0


async def test_empty_content_is_passed_on_and_never_indexed(tmp_path) -> None:
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        for url in ("u1", "u2"):
            assert await feed(pipeline, {"url": url, "body_text": "<div><script>x()</script></div>", "title": " "})
        assert await pipeline.index.index.count() == 0
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/empty_content"] == 2


async def test_an_unreadable_item_is_passed_on_and_counted(tmp_path, caplog) -> None:
    pipeline = await open_pipeline(settings(tmp_path))
    try:
        assert await feed(pipeline, {"url": "u1", "body_text": {"not": "text"}})
        assert await pipeline.process_item("a bare string") == "a bare string"
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == stats["simhash/bad_fields"] == 2
    assert "body_text" in caplog.text and "str is not an item" in caplog.text


async def test_a_failure_of_our_own_code_passes_the_item_on_logged(tmp_path, body, caplog) -> None:
    """A bug in a stage must not cost the user the item: it goes on unchecked, counted, with a traceback."""
    pipeline = await open_pipeline(settings(tmp_path))

    def broken_stage(*args, **kwargs):
        raise RuntimeError("a stage broke")

    pipeline.fingerprinter.record_signature = broken_stage  # fault injection: no real input triggers a bug
    try:
        item = {"url": "https://a.example/p", "body_text": body}
        assert await pipeline.process_item(item) is item
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == stats["simhash/internal_errors"] == 1
    assert "a stage broke" in caplog.text and "Traceback" in caplog.text


async def test_unreachable_redis_with_pass_lets_items_through_counted(tmp_path, body) -> None:
    pipeline = await open_pipeline(
        settings(
            tmp_path, SIMHASH_INDEX_URL="redis://127.0.0.1:1/0", SIMHASH_INDEX_RETRIES=1, SIMHASH_INDEX_RETRY_DELAY=0
        )
    )
    try:
        assert await feed(pipeline, {"url": "u1", "body_text": body})
        assert await feed(pipeline, {"url": "u2", "body_text": body})
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/unchecked"] == 2
    assert stats["simhash/index_errors"] >= 4  # every attempt of both items (plus the expiry at open)


async def test_review_log_samples_decisions_near_the_threshold(tmp_path, body) -> None:
    review = tmp_path / "review.jsonl"
    pipeline = await open_pipeline(
        settings(tmp_path, SIMHASH_REVIEW_LOG=str(review), SIMHASH_REVIEW_MARGIN=0.17, SIMHASH_REVIEW_RATE=1.0)
    )
    try:
        await feed(pipeline, {"url": "u1", "body_text": body})
        await feed(pipeline, {"url": "u2", "body_text": edited(body)})  # Jaccard ~0.97: within 0.17 of 0.82
        await feed(pipeline, {"url": "u3", "body_text": body})  # Jaccard 1.0: outside the margin
    finally:
        await pipeline.close_spider()
    assert [r["duplicate_id"] for r in read_merge_log(str(review))] == ["u2"]
    assert len(list(read_merge_log(str(tmp_path / "merges.jsonl")))) == 2


async def test_a_huge_merge_group_warns_once(tmp_path, body, caplog) -> None:
    pipeline = await open_pipeline(settings(tmp_path, SIMHASH_MAX_GROUP_WARN=2))
    try:
        with caplog.at_level(logging.WARNING, logger="scrapy_simhash.pipelines"):
            for n in range(5):
                await feed(pipeline, {"url": f"u{n}", "body_text": body})
    finally:
        await pipeline.close_spider()
    assert caplog.text.count("probably an empty or failed extraction field") == 1
    assert simhash_stats(pipeline)["simhash/largest_group"] == 4


async def test_a_second_pipeline_finds_the_first_ones_records(tmp_path, body) -> None:
    first = await open_pipeline(settings(tmp_path))
    await feed(first, {"url": "https://a.example/p", "body_text": body})
    await first.close_spider()
    second = await open_pipeline(settings(tmp_path))
    try:
        assert not await feed(second, {"url": "https://b.example/copy", "body_text": edited(body)})
    finally:
        await second.close_spider()


class CustomSpider(scrapy.Spider):
    name = "custom"
    custom_settings = {"SIMHASH_ACTION": "annotate", "SIMHASH_MAX_DISTANCE": 5}


def test_spider_custom_settings_are_honoured_and_defaults_live_under_the_data_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    crawler = get_crawler(CustomSpider)
    crawler.spider = crawler._create_spider()
    pipeline = SimhashPipeline.from_crawler(crawler)
    assert pipeline.config.action == "annotate" and pipeline.max_distance == 5
    config = read(crawler.settings, "custom")
    assert config.index_url == f"sqlite:///{tmp_path}/.scrapy/simhash/{{spider}}.sqlite3"
    assert config.merge_log == f"{tmp_path}/.scrapy/simhash/custom-merges.jsonl"
    assert config.key_prefix == "simhash:{spider}"


def test_bad_settings_fail_at_startup_naming_the_setting() -> None:
    from scrapy.settings import Settings

    with pytest.raises(ValueError, match="SIMHASH_ACTION"):
        read(Settings({"SIMHASH_ACTION": "delete"}), "x")
    with pytest.raises(ValueError, match="SIMHASH_JACCARD_THRESHOLD"):
        read(Settings({"SIMHASH_JACCARD_THRESHOLD": 1.5}), "x")
