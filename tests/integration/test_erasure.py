"""Erasure that erases: after ``erase(ID|URL)``, no byte the project wrote names the page (index
files and WAL, merge and review logs, Redis keys and streams, a rewritten AOF), and the rest stays."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_harness import feed, open_pipeline
from redis_servers import value_of
from texts import article

from scrapy_simhash.mergelog import read_merge_log
from scrapy_simhash.offline.erase import erase

VICTIM = "https://victim.example/private-page"
MIRRORS = [f"https://mirror{i}.example/copy" for i in range(3)]


def every_byte(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


async def crawl(settings: dict) -> None:
    """A canonical with three copies (4 URLs in its group), and another page with one copy."""
    pipeline = await open_pipeline(settings)
    body, other = article(900), article(901)
    try:
        assert await feed(pipeline, {"url": VICTIM, "body_text": body})
        for mirror in MIRRORS:
            assert not await feed(pipeline, {"url": mirror, "body_text": body})
        assert await feed(pipeline, {"url": "https://kept.example/a", "body_text": other})
        assert not await feed(pipeline, {"url": "https://kept.example/b", "body_text": other})
    finally:
        await pipeline.close_spider()
    return pipeline.config


def file_settings(tmp_path: Path) -> dict:
    return {
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/data/index.db",
        "SIMHASH_MERGE_LOG": str(tmp_path / "data" / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": str(tmp_path / "data" / "review.jsonl"),
        "SIMHASH_REVIEW_MARGIN": 1.0,
        "SIMHASH_REVIEW_RATE": 1.0,
    }


async def test_erasing_a_canonical_leaves_no_byte_in_the_sqlite_index_or_the_logs(tmp_path):
    config = await crawl(file_settings(tmp_path))
    assert VICTIM.encode() in every_byte(tmp_path / "data")
    reader = sqlite3.connect(tmp_path / "data" / "index.db")  # another connection keeps the file open
    try:
        result = await erase(config, VICTIM)
    finally:
        reader.close()
    assert [(r.id, r.canonical) for r in result.records] == [(VICTIM, True)]
    stored = every_byte(tmp_path / "data")
    assert b"victim.example" not in stored
    assert all(mirror.encode() in stored for mirror in MIRRORS)  # the copies' own audit stays
    records = list(read_merge_log(str(tmp_path / "data" / "merges.jsonl")))
    assert [r["erased"] for r in records if r.get("erased")] == [["canonical", "matched"]] * 3


async def test_a_log_that_cannot_be_rewritten_names_what_to_erase_again(tmp_path):
    """The index no longer knows the page's other names once its records are erased: the error says them."""
    settings = file_settings(tmp_path)
    await crawl(settings)
    settings["SIMHASH_MERGE_LOG"] = str(tmp_path)  # a directory: the log cannot be rewritten
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "erase", VICTIM,
         *(arg for name, value in settings.items() for arg in ("-s", f"{name}={value}"))],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "the index no longer holds it, but a log could not be rewritten (IsADirectoryError" in done.stderr
    assert f"erase each of these again: {VICTIM!r}" in done.stderr


async def test_erasing_one_duplicates_url_erases_it_alone(tmp_path):
    config = await crawl(file_settings(tmp_path))
    result = await erase(config, MIRRORS[1])
    assert [(r.id, r.canonical) for r in result.records] == [(MIRRORS[1], False)]
    stored = every_byte(tmp_path / "data")
    assert MIRRORS[1].encode() not in stored
    assert VICTIM.encode() in stored and MIRRORS[0].encode() in stored and MIRRORS[2].encode() in stored


@pytest.mark.redis
async def test_erasing_from_redis_reaches_keys_streams_and_the_rewritten_append_only_file(redis_factory, tmp_path):
    # Plain commands in the rewritten file, no compressed RDB preamble: a grep can find what is there.
    server = redis_factory.start("--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no",
                                 "--rdbcompression", "no")
    settings = {
        **file_settings(tmp_path),
        "SIMHASH_INDEX_URL": server.url,
        "SIMHASH_MERGE_LOG": server.url,
        "SIMHASH_REVIEW_LOG": server.url,
    }
    config = await crawl(settings)
    admin = server.client()
    assert VICTIM.encode() in every_byte(server.directory)
    result = await erase(config, VICTIM)
    assert result.persistence == []
    while admin.info("persistence")["aof_rewrite_in_progress"] or admin.info("persistence")["aof_rewrite_scheduled"]:
        await asyncio.sleep(0.01)
    keys = {key: repr(value_of(admin, key)).encode() for key in admin.scan_iter(count=1000)}
    admin.close()
    assert [key for key, value in keys.items() if b"victim.example" in key + value] == []
    assert any(MIRRORS[0].encode() in value for value in keys.values())
    assert MIRRORS[0].encode() in every_byte(server.directory)
    assert b"victim.example" not in every_byte(server.directory)
