"""Merge records name when the index first met the group's canonical and the record matched, on
every backend and in a file or a stream: a reviewer sees when the content was first met."""

from __future__ import annotations

from datetime import datetime

import pytest
from pipeline_harness import feed, open_pipeline
from texts import article, edited

from scrapy_simhash.mergelog import read_merge_log

FIRST = {"url": "https://a.example/p", "body_text": article(31)}
DRIFT = {"url": "https://b.example/p", "body_text": edited(article(31), edits=5, seed=1)}  # a findable member
COPY = {"url": "https://c.example/p", "body_text": edited(DRIFT["body_text"], edits=1, seed=2)}
SAME_CRAWL_COPY = {**COPY, "url": "https://d.example/p"}  # matched on what the crawl itself holds


def at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@pytest.fixture(params=["sqlite", "redis", "redis stream", "cluster"])
def settings(request, tmp_path) -> dict:
    if request.param == "sqlite":
        return {"SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db", "SIMHASH_MERGE_LOG": str(tmp_path / "m.jsonl")}
    if request.param == "cluster":
        scheme, _, rest = request.getfixturevalue("cluster").url.partition("://")
        url = f"{scheme}+cluster://{rest}"
    else:
        url = request.getfixturevalue("redis_server_url")
    log = url if request.param == "redis stream" else str(tmp_path / "m.jsonl")
    return {"SIMHASH_INDEX_URL": url, "SIMHASH_KEY_PREFIX": request.getfixturevalue("redis_prefix") + ":{spider}",
            "SIMHASH_MERGE_LOG": log}


async def test_a_merge_names_when_its_group_and_match_were_first_seen(settings):
    first = await open_pipeline(settings)
    try:
        assert await feed(first, FIRST) and not await feed(first, DRIFT)
        assert not await feed(first, SAME_CRAWL_COPY)
        stored = {s.id: s.first_seen for key in (FIRST["url"], DRIFT["url"]) for s in await first.index.records(key)}
    finally:
        await first.close_spider()
    second = await open_pipeline(settings)  # a later crawl: what the index stored is what it says
    try:
        assert not await feed(second, COPY)
    finally:
        await second.close_spider()
    stream = f"{settings.get('SIMHASH_KEY_PREFIX', '').replace('{spider}', '{harness}')}:merges"
    merged = [r for r in read_merge_log(settings["SIMHASH_MERGE_LOG"], stream) if r["decision"] == "merged"]
    assert stored[FIRST["url"]] <= stored[DRIFT["url"]]
    for page in (SAME_CRAWL_COPY, COPY):
        copy = next(r for r in merged if r["duplicate_url"] == page["url"])
        assert copy["matched_id"] == DRIFT["url"] and copy["canonical_id"] == FIRST["url"]
        assert at(copy["canonical_first_seen"]) == pytest.approx(stored[FIRST["url"]], abs=1e-5)
        assert at(copy["matched_first_seen"]) == pytest.approx(stored[DRIFT["url"]], abs=1e-5)
