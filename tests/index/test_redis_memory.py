"""A Redis that evicts keys when full is refused, at open and at each retention sweep (issue 43).

An evicted key is a lost record, a reused record id or a lost index identity, and nothing says so:
the index reads the server's maxmemory-policy (CONFIG GET, or INFO where CONFIG is refused, as on
managed services) and refuses any policy but noeviction, unless SIMHASH_ALLOW_EVICTION accepts it.
"""

from __future__ import annotations

import logging

import pytest
from crawls import crawl
from texts import article

from scrapy_simhash.index import IndexOpenError, open_index
from scrapy_simhash.minhash import Layout
from scrapy_simhash.mergelog import MergeLogError, open_merge_log

pytestmark = pytest.mark.redis

LAYOUT = Layout(14, 6, 0.73)


def index_at(url: str, **options):
    return open_index(url, key_prefix="simhash:{s}", layout=LAYOUT, **options)


@pytest.mark.parametrize("config", ["allowed", "renamed"])
async def test_an_evicting_server_is_refused_at_open_with_the_fix_named(redis_factory, config) -> None:
    """CONFIG renamed away (as managed services do): the policy is read from INFO memory instead."""
    args = ["--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"]
    if config == "renamed":
        args += ["--rename-command", "CONFIG", ""]
    server = redis_factory.start(*args)
    index = index_at(server.url)
    try:
        with pytest.raises(IndexOpenError) as refused:
            await index.open()
    finally:
        await index.close()
    message = str(refused.value)
    assert "maxmemory-policy allkeys-lru" in message and "maxmemory-policy noeviction" in message, message
    assert "SIMHASH_ALLOW_EVICTION" in message and "\n" not in message
    with server.client() as admin:
        assert admin.dbsize() == 0  # refused before anything was written


async def test_eviction_accepted_by_the_setting_is_said_loudly(redis_factory, caplog) -> None:
    server = redis_factory.start("--maxmemory", "2mb", "--maxmemory-policy", "volatile-lru")
    index = index_at(server.url, allow_eviction=True)
    with caplog.at_level(logging.WARNING):
        try:
            await index.open()
        finally:
            await index.close()
    [warning] = [r.getMessage() for r in caplog.records if "evict" in r.getMessage()]
    assert "volatile-lru" in warning and "SIMHASH_ALLOW_EVICTION" in warning


async def test_no_memory_limit_or_noeviction_opens(redis_factory) -> None:
    """Without maxmemory nothing is ever evicted, whatever the policy says."""
    for args in (["--maxmemory-policy", "allkeys-lru"], ["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"]):
        index = index_at(redis_factory.start(*args).url)
        try:
            await index.open()
        finally:
            await index.close()


async def test_a_policy_turned_evicting_mid_crawl_is_refused_at_the_next_sweep(throwaway_redis) -> None:
    index = index_at(throwaway_redis.url)
    try:
        await index.open()
        assert await index.expire() == 0
        with throwaway_redis.client() as admin:
            admin.config_set("maxmemory", "64mb")
            admin.config_set("maxmemory-policy", "allkeys-lfu")
        with pytest.raises(IndexOpenError, match="maxmemory-policy allkeys-lfu"):
            await index.expire()
    finally:
        await index.close()


async def test_a_read_only_command_is_not_refused(redis_factory) -> None:
    """An erasure must reach what remains on any server: only a crawl, which writes, is refused."""
    server = redis_factory.start()
    index = index_at(server.url)
    await index.open()
    await index.close()
    with server.client() as admin:
        admin.config_set("maxmemory", "64mb")
        admin.config_set("maxmemory-policy", "allkeys-lru")
    reader = index_at(server.url, create=False)
    try:
        await reader.open()
        assert await reader.erase("https://nothing.example/") == []
    finally:
        await reader.close()


def test_a_crawl_on_an_evicting_server_closes_at_open_with_one_line_naming_the_fix(redis_factory, tmp_path) -> None:
    server = redis_factory.start("--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
    items = [{"url": f"https://a.example/{n}", "body_text": article(n)} for n in range(3)]
    stats, log = crawl(tmp_path, items, SIMHASH_INDEX_URL=server.url)
    [error] = [line for line in log.splitlines() if line.startswith("ERROR")]
    assert "maxmemory-policy allkeys-lru" in error and "maxmemory-policy noeviction" in error, error
    assert stats["finish_reason"] == "simhash_index_error" and "Traceback" not in log
    with server.client() as admin:
        assert admin.dbsize() == 0


async def test_a_merge_stream_on_an_evicting_server_is_refused_at_open(redis_factory) -> None:
    """Evicted stream entries are lost audit records: the one rule holds for a log's stream too."""
    server = redis_factory.start("--maxmemory", "2mb", "--maxmemory-policy", "allkeys-random")
    log = open_merge_log(f"{server.url}?stream=merges", "unused")
    try:
        with pytest.raises(MergeLogError, match="maxmemory-policy allkeys-random.*maxmemory-policy noeviction"):
            await log.check()
    finally:
        await log.close()
    accepted = open_merge_log(f"{server.url}?stream=merges", "unused", allow_eviction=True)
    try:
        await accepted.check()
    finally:
        await accepted.close()
