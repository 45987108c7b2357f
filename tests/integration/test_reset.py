"""Starting over: ``simhash-reset``, ``SIMHASH_RESET`` and ``-a simhash_reset=1`` empty one spider's index
and logs, on SQLite, Redis and a Redis Cluster, and leave every other spider's data as it was."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pipeline_harness import feed, open_pipeline, simhash_stats
from redis_servers import keyspace
from texts import article, edited

from scrapy_simhash.reset import data_key_patterns

SPIDERS = ("alpha", "beta")


def settings_for(url: str, prefix: str, logs: str | Path) -> dict:
    """Each spider its own index and logs: SQLite files named after it, or keys under its prefix
    (merge and review logs as streams beside them)."""
    if url.startswith("sqlite"):
        merge_log, review_log = f"{logs}/{{spider}}-merges.jsonl", f"{logs}/{{spider}}-review.jsonl"
    else:
        merge_log = review_log = url
    return {
        "SIMHASH_INDEX_URL": url,
        "SIMHASH_KEY_PREFIX": f"{prefix}:{{spider}}",
        "SIMHASH_MERGE_LOG": merge_log,
        "SIMHASH_REVIEW_LOG": review_log,
        "SIMHASH_REVIEW_MARGIN": 1.0,
        "SIMHASH_REVIEW_RATE": 1.0,
    }


async def crawl_some(settings: dict, spider: str, seed: int) -> None:
    """A canonical, a copy of it (a merge, with a review record), and a short text."""
    pipeline = await open_pipeline(settings, spider_name=spider)
    text = article(seed)
    try:
        assert await feed(pipeline, {"url": f"https://{spider}.example/p", "body_text": text})
        assert not await feed(pipeline, {"url": f"https://{spider}.example/copy", "body_text": edited(text, 3)})
        assert await feed(pipeline, {"url": f"https://{spider}.example/short", "body_text": f"short {seed}"})
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/review_sampled"] >= 1


def snapshot(url: str, prefix: str) -> dict:
    return {spider: keyspace(url, f"{prefix}:{{{spider}}}") for spider in SPIDERS}


@pytest.fixture(params=["redis", "cluster"])
def redis_url(request) -> str:
    if request.param == "redis":
        return request.getfixturevalue("redis_server_url")
    scheme, _, rest = request.getfixturevalue("cluster").url.partition("://")
    return f"{scheme}+cluster://{rest}"


def reset_command(tmp_path: Path, settings: dict, *args: str) -> subprocess.CompletedProcess:
    sets = [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-reset", *args, *sets],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL,
    )


async def test_reset_on_redis_leaves_no_key_of_the_spider_and_every_other_key(redis_url, tmp_path):
    prefix = f"simhash-test:{uuid.uuid4().hex[:12]}"
    settings = settings_for(redis_url, prefix, tmp_path)
    for seed, spider in enumerate(SPIDERS):
        await crawl_some(settings, spider, seed)
    before = snapshot(redis_url, prefix)
    assert all(len(keys) > 10 for keys in before.values())
    assert any(b":d:" in key for key in before["alpha"])  # page data keys, without the braces
    assert any(key.endswith(b":merges") for key in before["alpha"])

    done = reset_command(tmp_path, settings, "--spider", "alpha", "--yes")

    assert done.returncode == 0, done.stderr
    after = snapshot(redis_url, prefix)
    assert after["alpha"] == {}, done.stdout
    assert after["beta"] == before["beta"]
    assert f"{len(before['alpha']) - 2} keys deleted" in done.stdout  # the two streams go first
    assert "merges log" in done.stdout and "deleted" in done.stdout


async def test_reset_on_sqlite_deletes_the_spiders_files_only(tmp_path):
    settings = settings_for(f"sqlite:///{tmp_path}/{{spider}}.sqlite3", "simhash", tmp_path)
    for seed, spider in enumerate(SPIDERS):
        await crawl_some(settings, spider, seed)
    beta = {path.name: path.read_bytes() for path in tmp_path.glob("beta*")}
    assert {"beta.sqlite3", "beta-merges.jsonl", "beta-review.jsonl"} <= set(beta)

    done = reset_command(tmp_path, settings, "--spider", "alpha", "--yes")

    assert done.returncode == 0, done.stderr
    assert list(tmp_path.glob("alpha*")) == []
    assert {path.name: path.read_bytes() for path in tmp_path.glob("beta*")} == beta


async def test_reset_asks_first_and_without_a_terminal_removes_nothing(tmp_path):
    settings = settings_for(f"sqlite:///{tmp_path}/{{spider}}.sqlite3", "simhash", tmp_path)
    await crawl_some(settings, "alpha", 1)

    done = reset_command(tmp_path, settings, "--spider", "alpha")

    assert done.returncode == 2
    assert f"index file {tmp_path}/alpha.sqlite3" in done.stdout and "--yes" in done.stderr
    assert (tmp_path / "alpha.sqlite3").exists() and (tmp_path / "alpha-merges.jsonl").exists()


@pytest.mark.parametrize("how", ["setting", "spider argument"])
async def test_simhash_reset_starts_the_crawl_over(how, redis_server_url, redis_prefix, tmp_path):
    settings = settings_for(redis_server_url, redis_prefix, tmp_path)
    await crawl_some(settings, "alpha", 1)
    again = {**settings, "SIMHASH_RESET": True} if how == "setting" else settings
    pipeline = await open_pipeline(again, spider_name="alpha")
    if how == "spider argument":  # -a simhash_reset=1 sets it on the spider before it opens
        await pipeline.close_spider()
        pipeline.crawler.spider.simhash_reset = "1"
        pipeline = type(pipeline).from_crawler(pipeline.crawler)
        await pipeline.open_spider()
    try:
        # the same pages again: nothing is known of them
        assert await feed(pipeline, {"url": "https://alpha.example/p", "body_text": article(1)})
        stats = simhash_stats(pipeline)
        assert stats["simhash/unique"] == 1 and stats["simhash/seen"] == 0
    finally:
        await pipeline.close_spider()


def test_the_patterns_escape_what_a_redis_glob_reads():
    assert data_key_patterns("a*b:{s?}") == ["a\\*b:{s\\?}:*", "a\\*b:s\\?:d:*"]
