"""Merge-log records: the documented schema, to JSON lines through Scrapy's exporter or to a Redis Stream.

The audit promise: every item is either kept or has a "merged" record; a burst of concurrent writes
and a log that refuses a record are the two ways one could go missing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from pipeline_harness import feed, open_pipeline, simhash_stats
from scrapy_simhash.mergelog import FIELDS, Rule, merge_record, open_merge_log, read_merge_log

DRIVER = Path(__file__).with_name("crawl_stream.py")

RULE = Rule(max_distance=7, jaccard_threshold=0.82, weighting="frequency", shingle_width=4,
            boilerplate_version=3, layout="BlockLayout(bits=64, bands=8, multiprobe=False)")
BIG = 0xFEDCBA9876543210  # above 2**53: a JSON number would lose its low bits


def record(decision: str = "merged", duplicate: str = "b") -> dict:
    return merge_record(
        decision=decision, canonical_id="a", canonical_url="https://a.example/1", duplicate_id=duplicate,
        duplicate_url=f"https://b.example/{duplicate}", canonical_fingerprint=BIG, duplicate_fingerprint=0x1F,
        distance=3, jaccard=0.9, rule=RULE,
    )


def test_record_schema() -> None:
    r = record()
    assert set(r) == {
        "timestamp", "decision", "canonical_id", "canonical_url", "duplicate_id", "duplicate_url",
        "canonical_fingerprint", "duplicate_fingerprint", "distance", "jaccard", "rule",
    }
    assert tuple(r) == FIELDS  # the file writer exports FIELDS only: a field missing there would be lost
    assert r["canonical_fingerprint"] == "fedcba9876543210" and r["duplicate_fingerprint"] == "000000000000001f"
    assert r["timestamp"].endswith("+00:00")
    assert r["rule"] == {"max_distance": 7, "jaccard_threshold": 0.82, "weighting": "frequency",
                         "shingle_width": 4, "boilerplate_version": 3, "layout": RULE.layout}
    with pytest.raises(ValueError, match="decision"):
        record(decision="maybe")


def test_records_of_one_rule_do_not_share_its_dict() -> None:
    """The rule's serialisation is cached: a consumer that edits one record must not edit the next."""
    first = record()
    first["rule"]["max_distance"] = 99
    assert record()["rule"]["max_distance"] == 7


async def test_file_log_appends_json_lines_across_runs(tmp_path) -> None:
    path = tmp_path / "logs" / "merges.jsonl"
    for duplicate in ("b", "c"):  # two crawls: the second extends the first's file
        log = open_merge_log(str(path), "unused")
        await log.write([record(duplicate=duplicate)])
        await log.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["duplicate_id"] for line in lines] == ["b", "c"]
    assert '"canonical_fingerprint": "fedcba9876543210"' in lines[0]
    assert [r["duplicate_url"] for r in read_merge_log(str(path))] == ["https://b.example/b", "https://b.example/c"]
    assert list(read_merge_log(path.as_uri())) == list(read_merge_log(str(path)))


async def test_stream_log_round_trips(redis_server_url, redis_prefix) -> None:
    log = open_merge_log(redis_server_url, f"{redis_prefix}:merges")
    written = [record(decision="rejected", duplicate="b"), record(duplicate="b"), record(duplicate="c")]
    await log.write(written[:2])  # an item's rejected candidate and its merge, together
    await log.write(written[2:])
    await log.close()
    assert list(read_merge_log(redis_server_url, f"{redis_prefix}:merges")) == written


async def test_stream_key_from_uri(redis_server_url, redis_prefix) -> None:
    uri = f"{redis_server_url}?stream={redis_prefix}:audit"
    log = open_merge_log(uri, "ignored")
    await log.write([record()])
    await log.close()
    assert [r["duplicate_id"] for r in read_merge_log(uri)] == ["b"]


async def test_stream_log_keeps_every_record_of_a_burst(redis_server_url, redis_prefix) -> None:
    """More concurrent writes than redis-py's default pool allows (100): each waits its turn, none is lost.

    1,200 records also make the reader page (XRANGE, 1,000 at a time, from an exclusive start id).
    """
    log = open_merge_log(redis_server_url, f"{redis_prefix}:merges")
    burst = [record(duplicate=f"d{n}") for n in range(1200)]
    try:
        await asyncio.gather(*(log.write([r]) for r in burst))
    finally:
        await log.close()
    written = list(read_merge_log(redis_server_url, f"{redis_prefix}:merges"))
    assert sorted(r["duplicate_id"] for r in written) == sorted(r["duplicate_id"] for r in burst)


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="merge log"):
        open_merge_log("s3://bucket/merges.jsonl", "x")


@pytest.mark.slow
def test_a_crawl_logs_every_dropped_duplicate_to_a_redis_stream(redis_server_url, redis_prefix, tmp_path, corpus):
    """A host's 300 warm-up pages are released at once: a burst of concurrent merges, all recorded.

    Before the stream writer had a blocking pool this crawl lost 108 of its 208 merge records.
    """
    bodies = [doc["body_text"] for doc in corpus if len(doc["body_text"].split()) >= 100][:150]
    pages = [{"url": f"https://site.example/{copy}/{n}", "body_text": body}
             for copy in ("a", "b") for n, body in enumerate(bodies)]
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(page) + "\n" for page in pages))
    stream = f"{redis_server_url}?stream={redis_prefix}:merges"
    settings = {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.sqlite3",
        "SIMHASH_MERGE_LOG": stream,
        "EXTENSIONS": {"scrapy_simhash.extensions.BoilerplateLearner": 500},
        "SIMHASH_BOILERPLATE_MIN_PAGES": len(pages),
        "SIMHASH_BOILERPLATE_MAX_HELD": len(pages),
        "CONCURRENT_REQUESTS": len(pages),
    }
    subprocess.run([sys.executable, str(DRIVER), str(items), str(tmp_path), json.dumps(settings)],
                   check=True, timeout=120, capture_output=True)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["simhash/boilerplate/held_max"] == len(pages)  # the burst happened
    merged = [r["duplicate_url"] for r in read_merge_log(stream) if r["decision"] == "merged"]
    kept = [json.loads(line)["url"] for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert "simhash/merge_log_errors" not in stats
    assert len(merged) == stats["simhash/duplicates"] == stats["simhash/dropped"] >= len(bodies)
    assert sorted(merged + kept) == sorted(page["url"] for page in pages)  # each item kept or logged, once


@pytest.mark.parametrize("words", [400, 10], ids=["simhash", "exact"])
async def test_a_merge_the_log_refuses_keeps_the_duplicate(redis_server_url, redis_prefix, tmp_path, corpus, words):
    """A duplicate whose merge record cannot be written is passed on, never dropped without a record."""
    stream = f"{redis_prefix}:merges"
    with redis.Redis.from_url(redis_server_url) as client:
        client.set(stream, "not a stream")  # every XADD to it fails (WRONGTYPE)
    body = " ".join(next(doc["body_text"] for doc in corpus if len(doc["body_text"].split()) > words).split()[:words])
    pipeline = await open_pipeline({
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.sqlite3",
        "SIMHASH_MERGE_LOG": f"{redis_server_url}?stream={stream}",
    })
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": body})
        assert await feed(pipeline, {"url": "https://b.example/copy", "body_text": body})
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/merge_log_errors"] == 1 and stats["simhash/unchecked"] == 1
    assert stats["simhash/duplicates"] == stats["simhash/dropped"] == 0
