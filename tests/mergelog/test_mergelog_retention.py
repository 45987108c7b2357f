"""Retention of merge-log records (issue 15.5 and 15.6): records older than their class's TTL go, from
files and streams, and a stream can be capped with ``?maxlen=N``."""

from __future__ import annotations

import json

import pytest
import redis

from scrapy_simhash.mergelog import expire_log, open_merge_log, read_merge_log
from scrapy_simhash.mergelog.record import written_at
from scrapy_simhash.mergelog.stream import stream_fields
from merge_records import RULE

from scrapy_simhash.mergelog import merge_record

NOW = 1_800_000_000.0
HOUR, DAY = 3600, 86400
CLASSES = {"short": HOUR, "long": DAY, "forever": None}


def aged(age: float, retention: str, n: int = 0) -> dict:
    return merge_record(
        decision="merged", canonical_id="c", canonical_url="https://site.example/c", matched_id="c",
        matched_url="https://site.example/c", matched_fingerprint=1, duplicate_id=f"{retention}-{age}-{n}",
        duplicate_url=f"https://site.example/{retention}/{age}/{n}", duplicate_fingerprint=2, distance=1,
        jaccard=0.95, retention=retention, rule=RULE, at=NOW - age,
    )


# In time order, as a log is written.
OLD = [aged(100 * DAY, "short"), aged(100 * DAY, "long"), aged(100 * DAY, "forever")]
MIDDLE = [aged(2 * HOUR, "short"), aged(2 * HOUR, "long"), aged(2 * HOUR, "forever")]
RECENT = [aged(10, "short"), aged(10, "long")]
KEPT = [OLD[2], MIDDLE[1], MIDDLE[2], *RECENT]


def write_lines(path, records: list[dict]) -> None:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))


async def test_a_file_loses_the_records_older_than_their_class_ttl(tmp_path) -> None:
    path = tmp_path / "merges.jsonl"
    write_lines(path, OLD + MIDDLE + RECENT)
    done = await expire_log(str(path), CLASSES, NOW)
    assert (done.removed, done.unjudged, done.rewritten) == (3, 0, True)
    assert list(read_merge_log(str(path))) == KEPT
    assert not any(r["duplicate_url"].encode() in path.read_bytes() for r in OLD[:2] + MIDDLE[:1])


async def test_a_file_with_nothing_expired_is_left_alone(tmp_path) -> None:
    path = tmp_path / "merges.jsonl"
    write_lines(path, KEPT)
    inode = path.stat().st_ino
    done = await expire_log(str(path), CLASSES, NOW)
    assert (done.removed, done.rewritten) == (0, False)
    assert path.stat().st_ino == inode and list(read_merge_log(str(path))) == KEPT


async def test_the_scan_stops_at_the_first_record_too_recent_to_have_expired(tmp_path) -> None:
    """Files are appended in time order: what follows a record younger than the shortest TTL is not read."""
    path = tmp_path / "merges.jsonl"
    after = [aged(100 * DAY, "short", n=1), {"timestamp": "garbage"}]  # out of order: never looked at
    write_lines(path, [OLD[0], RECENT[0], *after])
    done = await expire_log(str(path), CLASSES, NOW)
    assert (done.removed, done.unjudged) == (1, 0)
    assert list(read_merge_log(str(path))) == [RECENT[0], *after]


async def test_records_of_an_unknown_class_or_time_are_kept_and_counted(tmp_path) -> None:
    path = tmp_path / "merges.jsonl"
    write_lines(path, [aged(100 * DAY, "gone-class"), {**OLD[0], "timestamp": None}, OLD[1], RECENT[0]])
    done = await expire_log(str(path), CLASSES, NOW)
    assert (done.removed, done.unjudged) == (1, 2)
    assert [r["duplicate_id"] for r in read_merge_log(str(path))] == [
        f"gone-class-{100 * DAY}-0", OLD[0]["duplicate_id"], RECENT[0]["duplicate_id"]
    ]


async def test_keeping_everything_for_good_reads_nothing(tmp_path) -> None:
    path = tmp_path / "merges.jsonl"
    path.write_bytes(b"not even json\n")
    done = await expire_log(str(path), {"default": None}, NOW)
    assert (done.removed, done.unjudged, done.rewritten) == (0, 0, False)


def _add_at(client: redis.Redis, stream: str, records: list[dict]) -> None:
    """XADD with ids at each record's decision time, as the server would have given them."""
    for n, one in enumerate(records):
        client.xadd(stream, stream_fields(one), id=f"{int(written_at(one) * 1000)}-{n}")


async def test_a_stream_with_one_ttl_is_trimmed_by_minid(redis_server_url, redis_prefix) -> None:
    stream = f"{redis_prefix}:merges"
    records = [aged(100 * DAY, "default"), aged(2 * HOUR, "default"), aged(HOUR - 1, "default"), aged(10, "default")]
    with redis.Redis.from_url(redis_server_url) as client:
        _add_at(client, stream, records)
        done = await expire_log(f"{redis_server_url}?stream={stream}", {"default": HOUR}, NOW)
        assert (done.removed, done.rewritten) == (2, True)
        assert client.xlen(stream) == 2
    assert list(read_merge_log(f"{redis_server_url}?stream={stream}")) == records[2:]


async def test_a_stream_with_several_ttls_loses_records_by_class(redis_server_url, redis_prefix) -> None:
    stream = f"{redis_prefix}:merges"
    uri = f"{redis_server_url}?stream={stream}"
    with redis.Redis.from_url(redis_server_url) as client:
        _add_at(client, stream, OLD + MIDDLE + RECENT)
        kept_ids = [entry_id for entry_id, _ in client.xrange(stream)][2:]
        del kept_ids[1]  # MIDDLE[0], a short one
        done = await expire_log(uri, CLASSES, NOW)
        assert [entry_id for entry_id, _ in client.xrange(stream)] == kept_ids
    assert (done.removed, done.rewritten) == (3, True)
    assert list(read_merge_log(uri)) == KEPT


async def test_a_stream_capped_by_maxlen(redis_server_url, redis_prefix) -> None:
    stream = f"{redis_prefix}:merges"
    uri = f"{redis_server_url}?stream={stream}&maxlen=500"
    log = open_merge_log(uri, "unused")
    try:
        for n in range(30):
            await log.write([aged(10, "default", n=100 * n + k) for k in range(100)])
    finally:
        await log.close()
    with redis.Redis.from_url(redis_server_url) as client:
        node = int(client.config_get("stream-node-max-entries")["stream-node-max-entries"])
        length = client.xlen(stream)
        newest = client.xrevrange(stream, count=1)[0][1][b"duplicate_id"]
    assert 500 <= length < 500 + node  # MAXLEN ~: whole nodes only, never below the cap
    assert newest == b"default-10-2999"


def test_maxlen_must_be_a_positive_number() -> None:
    with pytest.raises(ValueError, match="maxlen"):
        open_merge_log("redis://127.0.0.1:6379/9?stream=x&maxlen=0", "unused")
