"""The pipeline and its merge log: every dropped duplicate has a record, and a refused record keeps its item."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from pipeline_harness import feed, open_pipeline, simhash_stats
from texts import article

from scrapy_simhash.mergelog import read_merge_log

DRIVER = Path(__file__).with_name("crawl_stream.py")


@pytest.mark.slow
def test_a_crawl_logs_every_dropped_duplicate_to_a_redis_stream(redis_server_url, redis_prefix, tmp_path):
    """300 pages in flight at once: a burst of concurrent merges, every one recorded."""
    bodies = [article(2000 + n, words=150) for n in range(150)]
    pages = [{"url": f"https://site.example/{copy}/{n}", "body_text": body}
             for copy in ("a", "b") for n, body in enumerate(bodies)]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(page) + "\n" for page in pages))
    stream = f"{redis_server_url}?stream={redis_prefix}:merges"
    settings = {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.sqlite3",
        "SIMHASH_MERGE_LOG": stream,
        "SIMHASH_BOILERPLATE": False,
        "CONCURRENT_REQUESTS": len(pages),
    }
    subprocess.run([sys.executable, str(DRIVER), str(items), str(tmp_path), json.dumps(settings)],
                   check=True, timeout=120, capture_output=True)
    stats = json.loads((tmp_path / "stats.json").read_text())
    merged = [r["duplicate_url"] for r in read_merge_log(stream) if r["decision"] == "merged"]
    kept = [json.loads(line)["url"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert "simhash/merge_log_errors" not in stats
    assert len(merged) == stats["simhash/duplicates"] == stats["simhash/dropped"] >= len(bodies)
    assert sorted(merged + kept) == sorted(page["url"] for page in pages)  # each item kept or logged, once


@pytest.mark.parametrize("words", [400, 10], ids=["simhash", "exact"])
async def test_a_merge_the_log_refuses_keeps_the_duplicate(redis_server_url, redis_prefix, tmp_path, words):
    """A duplicate whose merge record cannot be written is passed on, never dropped without a record."""
    stream = f"{redis_prefix}:merges"
    with redis.Redis.from_url(redis_server_url) as client:
        client.set(stream, "not a stream")  # every XADD to it fails (WRONGTYPE)
    body = " ".join(article(3000).split()[:words])
    pipeline = await open_pipeline({
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.sqlite3",
        "SIMHASH_MERGE_LOG": f"{redis_server_url}?stream={stream}",
    })
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        assert await feed(pipeline, {"url": "https://b.example/copy", "body_text": body})
        [record] = await pipeline.index.index.records("https://a.example/p")  # the undone join left nothing
        assert await pipeline.index.index.records("https://b.example/copy") == []
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/merge_log_errors"] == 1 and stats["simhash/unchecked"] == 1
    assert stats["simhash/duplicates"] == stats["simhash/dropped"] == 0


def refusing_stream(redis_url: str, key: str) -> str:
    """A log URI whose every write fails: the stream's key holds a string (WRONGTYPE)."""
    with redis.Redis.from_url(redis_url) as client:
        client.set(key, "not a stream")
    return f"{redis_url}?stream={key}"


def sampling_all(tmp_path, merge_log: str, review_log: str) -> dict:
    """Both logs, every decision sampled for review."""
    return {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.sqlite3",
        "SIMHASH_MERGE_LOG": merge_log,
        "SIMHASH_REVIEW_LOG": review_log,
        "SIMHASH_REVIEW_MARGIN": 1.0,
        "SIMHASH_REVIEW_RATE": 1.0,
    }


async def test_a_merge_the_log_refuses_leaves_no_review_record(redis_server_url, redis_prefix, tmp_path):
    """The review log samples decisions that stand: an undone merge is not one."""
    body = article(3001)
    merges = refusing_stream(redis_server_url, f"{redis_prefix}:merges")
    pipeline = await open_pipeline(sampling_all(tmp_path, merges, str(tmp_path / "review.jsonl")))
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        assert await feed(pipeline, {"url": "https://b.example/copy", "body_text": body})  # kept: not logged
    finally:
        await pipeline.close_spider()
    assert [r for r in read_merge_log(str(tmp_path / "review.jsonl")) if r["decision"] == "merged"] == []
    assert "simhash/review_sampled" not in simhash_stats(pipeline)


async def test_a_review_log_that_refuses_costs_no_merge_and_is_said_as_such(
    redis_server_url, redis_prefix, tmp_path, caplog
):
    body = article(3002)
    review = refusing_stream(redis_server_url, f"{redis_prefix}:review")
    pipeline = await open_pipeline(sampling_all(tmp_path, str(tmp_path / "merges.jsonl"), review))
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        assert not await feed(pipeline, {"url": "https://b.example/copy", "body_text": body})  # dropped, logged
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/review_log_errors"] == 1 and "simhash/merge_log_errors" not in stats
    assert "simhash/review_sampled" not in stats and stats["simhash/dropped"] == 1
    [warning] = [r for r in caplog.records if "review-log" in r.message]
    assert "kept" not in warning.message


async def test_a_review_record_holds_the_compared_text_and_the_furniture_left_out(tmp_path):
    """The review page shows the text compared and, on demand, the raw text: the record holds both, once."""
    template = ["Brand of the site", "Home · News · About · Contact", "Related: more stories from us"]

    def page(body: str) -> str:
        return "\n".join([*template[:2], body, template[2]])

    bodies = [article(3100 + n, words=120) for n in range(3)]
    settings = {**sampling_all(tmp_path, str(tmp_path / "merges.jsonl"), str(tmp_path / "review.jsonl")),
                "SIMHASH_BOILERPLATE": True}
    pipeline = await open_pipeline(settings)
    try:
        # The host's three first pages wait for each other: the furniture is learned from them.
        kept = await asyncio.gather(*(feed(pipeline, {"url": f"https://a.example/{n}", "body_text": page(body)})
                                      for n, body in enumerate(bodies)))
        assert kept == [True, True, True]
        raw = page(bodies[0] + " one word more")
        assert not await feed(pipeline, {"url": "https://a.example/copy", "body_text": raw})
    finally:
        await pipeline.close_spider()
    [record] = [r for r in read_merge_log(str(tmp_path / "review.jsonl")) if r["decision"] == "merged"]
    assert record["duplicate_text"] == bodies[0] + " one word more"
    footer = raw.split("\n").index(template[2])
    assert record["duplicate_furniture"] == [[0, "\n".join(template[:2])], [footer, template[2]]]


async def test_a_pair_of_one_host_judged_on_its_whole_texts_is_marked_so_in_the_review_log(tmp_path):
    """Two pages of one host, the same article under another byline, are judged on their whole texts,
    and the logged Jaccard is theirs: the review page must show those texts, not the stripped ones."""
    template = ["Brand of the site", "Home · News · About · Contact"]

    def page(body: str, day: int) -> str:
        return "\n".join([*template, f"By A. Writer · {day} July 2024 · {day % 9 + 1} min read", body,
                          "Related: more stories from us"])

    bodies = [article(3200 + n, words=60) for n in range(3)]
    settings = {**sampling_all(tmp_path, str(tmp_path / "merges.jsonl"), str(tmp_path / "review.jsonl")),
                "SIMHASH_BOILERPLATE": True}
    pipeline = await open_pipeline(settings)
    try:
        assert await asyncio.gather(*(feed(pipeline, {"url": f"https://a.example/{n}", "body_text": page(body, n + 1)})
                                      for n, body in enumerate(bodies))) == [True, True, True]
        assert not await feed(pipeline, {"url": "https://a.example/again", "body_text": page(bodies[0], 28)})
    finally:
        await pipeline.close_spider()
    [record] = [r for r in read_merge_log(str(tmp_path / "review.jsonl")) if r["duplicate_url"].endswith("/again")]
    assert record["decision"] == "merged" and record["whole_texts"] is True and 0.82 <= record["jaccard"] < 1.0
    assert record["duplicate_text"] == bodies[0]
