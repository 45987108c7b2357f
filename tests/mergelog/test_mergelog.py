"""Merge-log records: the schema every reader and writer uses, written as whole JSON lines or to a Redis Stream.

The audit promise: every item is either kept or has a "merged" record; a burst of concurrent writes
and a log that refuses a record are the two ways one could go missing.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import redis

from scrapy_simhash.mergelog import (
    FIELDS,
    MergeLogError,
    Rule,
    open_merge_log,
    read_merge_log,
    review_record,
)

from merge_records import LAYOUT, RULE, record


def test_record_schema() -> None:
    r = record()
    assert tuple(r) == FIELDS == (
        "timestamp", "decision", "canonical_id", "canonical_url", "canonical_first_seen", "matched_id",
        "matched_url", "matched_fingerprint", "matched_first_seen", "duplicate_id", "duplicate_url",
        "duplicate_fingerprint", "distance", "jaccard", "retention", "rule",
    )
    assert r["timestamp"] == "2026-12-03T16:15:11.410237+00:00"
    assert r["matched_fingerprint"] == "fedcba9876543210" and r["duplicate_fingerprint"] == "000000000000001f"
    assert r["rule"] == {"jaccard_threshold": 0.82, "layout": LAYOUT, "shingle_width": 4, "weighting": "frequency",
                         "fingerprint_version": 2, "boilerplate_version": 3}
    assert r["retention"] == "default" and r["distance"] == 3 and r["jaccard"] == 0.9
    assert r["canonical_first_seen"] is None and r["matched_first_seen"] is None  # not given: unknown
    with pytest.raises(ValueError, match="decision"):
        record(decision="maybe")


def test_a_record_without_a_time_is_stamped_now_in_utc() -> None:
    assert record(at=None)["timestamp"].endswith("+00:00")


def test_the_layout_is_json_data_not_a_repr() -> None:
    with pytest.raises(TypeError, match="layout"):
        Rule(jaccard_threshold=0.8, layout="BlockLayout(bits=64, bands=8)", shingle_width=4, weighting="frequency",
             fingerprint_version=2, boilerplate_version=0)
    with pytest.raises(TypeError, match="layout"):
        Rule(jaccard_threshold=0.8, layout={"positions": {1, 2}}, shingle_width=4, weighting="frequency",
             fingerprint_version=2, boilerplate_version=0)
    with pytest.raises(TypeError, match="plain values"):
        Rule(jaccard_threshold=0.8, layout={"positions": [1, 2]}, shingle_width=4, weighting="frequency",
             fingerprint_version=2, boilerplate_version=0)


def test_records_of_one_rule_do_not_share_its_data() -> None:
    """A consumer that edits one record's rule (its layout included) must not edit the next record."""
    first = record()
    first["rule"]["shingle_width"] = 99
    first["rule"]["layout"]["bands"] = 99
    assert record()["rule"] == RULE.as_dict() and RULE.as_dict()["layout"] == LAYOUT


def test_a_review_record_carries_the_compared_text() -> None:
    assert review_record(record(), "the text") == {**record(), "duplicate_text": "the text"}
    assert review_record(record(), "text", "nav\ntext")["duplicate_furniture"] == [[0, "nav"]]


async def test_file_log_appends_compact_json_lines_across_runs(tmp_path) -> None:
    path = tmp_path / "logs" / "merges.jsonl"
    for duplicate in ("b", "c"):  # two crawls: the second extends the first's file
        log = open_merge_log(str(path), "unused")
        await log.write([record(duplicate=duplicate)])
        await log.close()
    lines = path.read_bytes().splitlines(keepends=True)
    assert [json.loads(line) for line in lines] == [record(duplicate="b"), record(duplicate="c")]
    assert lines[0] == (json.dumps(record(duplicate="b"), separators=(",", ":")) + "\n").encode()
    assert list(read_merge_log(str(path))) == [record(duplicate="b"), record(duplicate="c")]
    assert list(read_merge_log(path.as_uri())) == list(read_merge_log(str(path)))


async def test_file_log_writes_text_as_utf8(tmp_path) -> None:
    path = tmp_path / "review.jsonl"
    log = open_merge_log(str(path), "unused")
    await log.write([review_record(record(), "Grüße, 日本")])
    await log.close()
    assert "Grüße, 日本".encode() in path.read_bytes()
    [read] = read_merge_log(str(path))
    assert read["duplicate_text"] == "Grüße, 日本"


async def test_a_record_that_is_not_json_is_refused_whole(tmp_path) -> None:
    """NaN is not JSON: the item's records are refused together and nothing reaches the file."""
    path = tmp_path / "merges.jsonl"
    log = open_merge_log(str(path), "unused")
    with pytest.raises(MergeLogError):
        await log.write([record(), {**record(), "jaccard": float("nan")}])
    await log.close()
    assert path.read_bytes() == b""


async def test_stream_log_round_trips(redis_server_url, redis_prefix) -> None:
    log = open_merge_log(redis_server_url, f"{redis_prefix}:merges")
    written = [record(decision="rejected", duplicate="b"), record(duplicate="b"),
               review_record(record(duplicate="c"), "text"), {**record(), "canonical_url": ""},
               review_record(record(duplicate="d"), "text", "nav\ntext\nfoot")]
    await log.write(written[:2])  # an item's rejected candidate and its merge, together
    await log.write(written[2:])
    await log.close()
    assert list(read_merge_log(redis_server_url, f"{redis_prefix}:merges")) == written


@pytest.mark.parametrize("refused", [{"jaccard": float("nan")}, {"rule": {1, 2}}], ids=["nan", "set"])
async def test_a_stream_takes_all_of_an_items_records_or_none(redis_server_url, redis_prefix, refused) -> None:
    stream = f"{redis_prefix}:merges"
    log = open_merge_log(redis_server_url, stream)
    try:
        with pytest.raises(MergeLogError):
            await log.write([record(), {**record(), **refused}])
        with redis.Redis.from_url(redis_server_url) as client:
            client.set(stream, "not a stream")  # every XADD fails (WRONGTYPE), inside one MULTI/EXEC
            with pytest.raises(MergeLogError, match="WRONGTYPE"):
                await log.write([record(), record()])
            assert client.get(stream) == b"not a stream"
            client.delete(stream)
        await log.write([record(), record(duplicate="c")])
    finally:
        await log.close()
    assert [r["duplicate_id"] for r in read_merge_log(redis_server_url, stream)] == ["b", "c"]


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
