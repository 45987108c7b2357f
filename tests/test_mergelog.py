"""Merge-log records: the documented schema, to JSON lines through Scrapy's exporter or to a Redis Stream."""

from __future__ import annotations

import asyncio
import json

import pytest

from scrapy_simhash.mergelog import Rule, merge_record, open_merge_log, read_merge_log

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
    assert r["canonical_fingerprint"] == "fedcba9876543210" and r["duplicate_fingerprint"] == "000000000000001f"
    assert r["timestamp"].endswith("+00:00")
    assert r["rule"] == {"max_distance": 7, "jaccard_threshold": 0.82, "weighting": "frequency",
                         "shingle_width": 4, "boilerplate_version": 3, "layout": RULE.layout}
    with pytest.raises(ValueError, match="decision"):
        record(decision="maybe")


async def test_file_log_appends_json_lines_across_runs(tmp_path) -> None:
    path = tmp_path / "logs" / "merges.jsonl"
    for duplicate in ("b", "c"):  # two crawls: the second extends the first's file
        log = open_merge_log(str(path), "unused")
        await log.write(record(duplicate=duplicate))
        await log.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["duplicate_id"] for line in lines] == ["b", "c"]
    assert '"canonical_fingerprint": "fedcba9876543210"' in lines[0]
    assert [r["duplicate_url"] for r in read_merge_log(str(path))] == ["https://b.example/b", "https://b.example/c"]
    assert list(read_merge_log(path.as_uri())) == list(read_merge_log(str(path)))


async def test_stream_log_round_trips(redis_server_url, redis_prefix) -> None:
    log = open_merge_log(redis_server_url, f"{redis_prefix}:merges")
    written = [record(duplicate="b"), record(decision="rejected", duplicate="c")]
    for r in written:
        await log.write(r)
    await log.close()
    assert list(read_merge_log(redis_server_url, f"{redis_prefix}:merges")) == written


async def test_stream_key_from_uri(redis_server_url, redis_prefix) -> None:
    uri = f"{redis_server_url}?stream={redis_prefix}:audit"
    log = open_merge_log(uri, "ignored")
    await log.write(record())
    await log.close()
    assert [r["duplicate_id"] for r in read_merge_log(uri)] == ["b"]


async def test_stream_log_keeps_every_record_of_a_burst(redis_server_url, redis_prefix) -> None:
    """More concurrent writes than redis-py's default pool allows (100): each waits its turn, none is lost."""
    log = open_merge_log(redis_server_url, f"{redis_prefix}:merges")
    burst = [record(duplicate=f"d{n}") for n in range(300)]
    try:
        await asyncio.gather(*(log.write(r) for r in burst))
    finally:
        await log.close()
    written = list(read_merge_log(redis_server_url, f"{redis_prefix}:merges"))
    assert sorted(r["duplicate_id"] for r in written) == sorted(r["duplicate_id"] for r in burst)


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="merge log"):
        open_merge_log("s3://bucket/merges.jsonl", "x")
