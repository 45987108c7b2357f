"""An erasure reaches whatever records a Redis still holds (issue 43): after a restart without
persistence mid-crawl, or with the index's identity key gone, ``simhash-erase`` erases the page and
says what it could not reach, instead of "no index"."""

from __future__ import annotations

import logging

import pytest
from pipeline_harness import feed, open_pipeline
from texts import article

from scrapy_simhash.index import open_index
from scrapy_simhash.offline.erase import erase

pytestmark = pytest.mark.redis

PAGE, COPY = "https://a.example/private", "https://b.example/copy"


def settings(server) -> dict:
    return {"SIMHASH_INDEX_URL": server.url, "SIMHASH_MERGE_LOG": f"{server.url}?stream=merges",
            "SIMHASH_INDEX_RETRIES": 3, "SIMHASH_INDEX_RETRY_DELAY": 0.05}


async def page_and_copy(server, body: str):
    """A crawl that kept PAGE and dropped COPY, its copy; the closed pipeline."""
    pipeline = await open_pipeline(settings(server))
    try:
        assert await feed(pipeline, {"url": PAGE, "body_text": body})
        assert not await feed(pipeline, {"url": COPY, "body_text": body})
    finally:
        await pipeline.close_spider()
    return pipeline


async def test_a_restart_without_persistence_mid_crawl_leaves_an_index_that_can_be_erased(throwaway_redis):
    pipeline = await open_pipeline(settings(throwaway_redis))
    try:
        assert await feed(pipeline, {"url": "https://before.example/", "body_text": article(4320)})
        throwaway_redis.restart()  # empty: no AOF, no RDB
        body = article(4321)
        assert await feed(pipeline, {"url": PAGE, "body_text": body})
        assert not await feed(pipeline, {"url": COPY, "body_text": body})
    finally:
        await pipeline.close_spider()
    result = await erase(pipeline.config, PAGE)
    assert [record.id for record in result.records] == [PAGE]
    result = await erase(pipeline.config, COPY)
    assert [record.id for record in result.records] == [COPY]
    assert all(PAGE.encode() not in value and COPY.encode() not in value
               for value in _values(throwaway_redis)), "a byte of the erased pages is left"


async def test_an_index_without_its_identity_key_is_erased_and_the_loss_said(throwaway_redis, caplog):
    pipeline = await page_and_copy(throwaway_redis, article(4322))
    with throwaway_redis.client() as admin:
        assert admin.delete("simhash:{harness}:meta") == 1  # evicted, or lost in a restart
    with caplog.at_level(logging.WARNING):
        result = await erase(pipeline.config, COPY)
    assert [record.id for record in result.records] == [COPY]
    [said] = [r.getMessage() for r in caplog.records if "identity" in r.getMessage()]
    assert "simhash:{harness}" in said and "records that remain" in said
    with throwaway_redis.client() as admin:
        assert not admin.exists("simhash:{harness}:meta")  # a read-only command writes no identity


async def test_a_crawl_puts_back_an_identity_lost_while_it_runs(throwaway_redis):
    pipeline = await open_pipeline(settings(throwaway_redis))
    try:
        with throwaway_redis.client() as admin:
            admin.flushall()  # the function library stays, the keys go
        assert await feed(pipeline, {"url": PAGE, "body_text": article(4323)})
        await pipeline.index.keep_alive()  # the lease renewal a crawl makes every third of its lease
    finally:
        await pipeline.close_spider()
    reader = open_index(throwaway_redis.url, key_prefix="simhash:{harness}", layout=pipeline.layout, create=False)
    try:
        await reader.open()
        assert [r.id for r in await reader.records(PAGE)] == [PAGE]
    finally:
        await reader.close()


def _values(server) -> list[bytes]:
    with server.client() as admin:
        out = []
        for key in admin.keys("*"):
            kind = admin.type(key)
            if kind == b"hash":
                out += [k + v for k, v in admin.hgetall(key).items()]
            elif kind == b"string":
                out.append(admin.get(key))
            elif kind == b"stream":
                out += [b"".join(k + v for k, v in fields.items()) for _, fields in admin.xrange(key)]
        return out


async def test_a_record_whose_page_data_is_gone_is_erased_by_its_handle_and_said(throwaway_redis, caplog):
    """Its id and URL are gone with its page data; the record still sits in its group under the key's
    handle: the erasure takes it out and says it could not check the id."""
    pipeline = await page_and_copy(throwaway_redis, article(4324))
    with throwaway_redis.client() as admin:
        [data] = [key for key in admin.keys("simhash:harness:d:*") if COPY.encode() in admin.get(key)]
        admin.delete(data)
    with caplog.at_level(logging.WARNING):
        result = await erase(pipeline.config, COPY)
    assert [(record.id, record.canonical) for record in result.records] == [(COPY, False)]
    [said] = [r.getMessage() for r in caplog.records if "page data" in r.getMessage()]
    assert "1 record" in said and COPY in said
    reader = open_index(throwaway_redis.url, key_prefix="simhash:{harness}", layout=pipeline.layout, create=False)
    try:
        await reader.open()
        assert await reader.count() == 1 and [r.id for r in await reader.records(PAGE)] == [PAGE]
    finally:
        await reader.close()
