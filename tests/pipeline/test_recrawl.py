"""Recrawls: a page the index holds under its id with the same content is seen (its own outcome, no
merge, never a duplicate of itself); with other content its earlier record goes and it is judged again."""

from __future__ import annotations

import pytest
from pipeline_harness import feed_judged, open_pipeline, simhash_stats
from texts import article, edited

from scrapy_simhash.mergelog import read_merge_log

CANONICAL = {"url": "https://a.example/p", "body_text": article(21)}
COPY = {"url": "https://b.example/p", "body_text": edited(article(21), edits=1)}  # Jaccard >= NOVELTY
DRIFTED = {"url": "https://c.example/p", "body_text": edited(article(21), edits=5, seed=3)}  # a findable member
SHORT = {"url": "https://a.example/short", "body_text": "a short note"}
PAGES = [CANONICAL, COPY, DRIFTED, SHORT]


@pytest.fixture(params=["sqlite", "redis"])
def settings(request, tmp_path):
    def make(**extra):
        if request.param == "sqlite":
            where = {"SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db"}
        else:
            where = {"SIMHASH_INDEX_URL": request.getfixturevalue("redis_server_url"),
                     "SIMHASH_KEY_PREFIX": request.getfixturevalue("redis_prefix") + ":{spider}"}
        return {**where, "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"), **extra}

    return make


async def crawl(settings: dict, items: list[dict]) -> tuple[list[bool], dict, int]:
    """(kept per item, simhash stats, records in the index) of one crawl."""
    pipeline = await open_pipeline(settings)
    try:
        kept = [await feed_judged(pipeline, dict(item)) for item in items]
        count = await pipeline.index.index.count()
    finally:
        await pipeline.close_spider()
    return kept, simhash_stats(pipeline), count


def merges(tmp_path) -> list[dict]:
    path = tmp_path / "merges.jsonl"
    return [r for r in read_merge_log(str(path)) if r["decision"] == "merged"] if path.exists() else []


async def test_a_recrawl_sees_every_page_again_and_merges_none(settings, tmp_path):
    kept, first, count = await crawl(settings(), PAGES)
    assert kept == [True, False, False, True] and first["simhash/duplicates"] == 2
    logged = merges(tmp_path)

    kept, second, count_after = await crawl(settings(), PAGES)

    assert kept == [False] * len(PAGES)  # dropped, as before: nothing new
    assert second["simhash/seen"] == len(PAGES)
    assert second["simhash/duplicates"] == second["simhash/unique"] == second["simhash/dropped"] == 0
    assert merges(tmp_path) == logged  # no record of the recrawl, no page merged into itself
    assert count_after == count  # nothing indexed twice


async def test_seen_pages_pass_on_when_asked_and_are_never_their_own_duplicate(settings, tmp_path):
    await crawl(settings(), PAGES)
    pipeline = await open_pipeline(settings(SIMHASH_SEEN_ACTION="pass", SIMHASH_ACTION="annotate"))
    try:
        out = []
        for item in PAGES:
            item = dict(item)
            assert await feed_judged(pipeline, item)
            out.append(item)
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/seen"] == len(PAGES)
    assert all("duplicate_of" not in item for item in out)


async def test_a_changed_page_replaces_its_record_and_is_judged_again(settings, tmp_path):
    _, _, count = await crawl(settings(), PAGES)
    changed = {**CANONICAL, "body_text": edited(CANONICAL["body_text"], edits=4, seed=9)}
    moved = {**SHORT, "body_text": "a short note, rewritten"}

    kept, stats, count_after = await crawl(settings(), [changed, moved])

    assert stats["simhash/changed_pages"] == 2 and stats["simhash/seen"] == 0
    assert count_after == count  # each page's earlier record went, its new one came
    assert all(r["duplicate_id"] != r["canonical_id"] for r in merges(tmp_path))
    assert all(r["duplicate_id"] != r["matched_id"] for r in merges(tmp_path))
    again, stats, _ = await crawl(settings(), [changed, moved])  # the new content is what is held now
    assert stats["simhash/seen"] == 2 and again == [False, False]
