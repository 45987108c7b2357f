"""A Redis at its memory limit under noeviction (issue 43): writes are refused, each kind said once, and
what a refused merge record leaves behind is undone once memory is freed, never silently kept."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from scrapy import signals

from pipeline_harness import feed, open_pipeline, outcomes, simhash_stats
from texts import article

from scrapy_simhash.index import open_index

pytestmark = pytest.mark.redis


def full(server) -> None:
    """The server's memory limit set below what it uses: every write command is refused with OOM."""
    with server.client() as admin:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", "1")


def freed(server) -> None:
    with server.client() as admin:
        admin.config_set("maxmemory", "0")


def settings(server) -> dict:
    return {"SIMHASH_INDEX_URL": server.url, "SIMHASH_MERGE_LOG": f"{server.url}?stream=merges",
            "SIMHASH_INDEX_RETRIES": 0, "SIMHASH_MAX_GROUP_WARN": 10**6}


async def records_of(server, key: str) -> list:
    index = open_index(server.url, key_prefix="simhash:{harness}", layout=layout(), create=False)
    try:
        await index.open()
        return await index.records(key)
    finally:
        await index.close()


def layout():
    from scrapy_simhash.calibration import layout_for

    return layout_for(0.82, 0.99, None)


def merged_duplicates(server) -> set[str]:
    with server.client() as admin:
        return {fields[b"duplicate_id"].decode() for _, fields in admin.xrange("merges")
                if fields[b"decision"] == b"merged"}


async def test_a_join_whose_record_and_undo_were_refused_is_undone_once_memory_is_freed(throwaway_redis, caplog):
    body = article(4301)
    pipeline = await open_pipeline(settings(throwaway_redis))
    write = pipeline.logs.merge_log.write

    async def write_when_full(records):
        full(throwaway_redis)  # the join went through; the server fills before its merge record
        await write(records)

    with caplog.at_level(logging.WARNING):
        try:
            assert await feed(pipeline, {"url": "https://a.example/1", "body_text": body})
            pipeline.logs.merge_log.write = write_when_full
            assert await feed(pipeline, {"url": "https://b.example/1", "body_text": body})  # kept: not recorded
            pipeline.logs.merge_log.write = write
            [undo] = [r.getMessage() for r in caplog.records if "undo the join" in r.getMessage()]
            assert "https://b.example/1" in undo and "OutOfMemoryError" in undo
            freed(throwaway_redis)
        finally:
            await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert (stats["simhash/unique"], stats["simhash/unchecked"], outcomes(pipeline)) == (1, 1, 2), stats
    # Nothing half done: every member of a group in the index has its merge record.
    assert await records_of(throwaway_redis, "https://b.example/1") == []
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("undone" in line for line in said), said


async def test_each_kind_of_refused_write_is_said_once_and_a_rerun_settles_everything(throwaway_redis, caplog):
    """Lookups, confirmations and merge records refused at full memory: one warning per kind, however
    many items; after memory is freed a rerun keeps each page once, in all, and every member of a
    group has its merge record."""
    texts = [article(4310 + n) for n in range(4)]
    first = [{"url": f"https://a.example/{n}", "body_text": text} for n, text in enumerate(texts)]
    copies = [{"url": f"https://b.example/{n}", "body_text": text} for n, text in enumerate(texts)]
    pipeline = await open_pipeline(settings(throwaway_redis))
    with caplog.at_level(logging.WARNING):
        try:
            for item in first[:2]:
                await pipeline.process_item(item)  # indexed, not yet reported scraped
            full(throwaway_redis)
            for item in first[:2]:  # their confirmations are refused
                pipeline.crawler.signals.send_catch_log(signals.item_scraped, item=item, response=None, spider=None)
            await pipeline.upkeep.flush_confirmations()
            for item in first[2:] + copies:
                await feed(pipeline, item)
            await pipeline.upkeep.flush_confirmations()
        finally:
            await pipeline.close_spider()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    kinds = Counter(kind for line in said for kind in ("confirm", "items on unchecked", "merge-log") if kind in line)
    assert kinds["confirm"] == 1 and kinds["items on unchecked"] == 1 and kinds["merge-log"] <= 1, said
    assert any("stay pending" in line and "OutOfMemoryError" in line for line in said), said
    freed(throwaway_redis)
    rerun = await open_pipeline(settings(throwaway_redis))
    try:
        kept = [await feed(rerun, item) for item in first + copies]
    finally:
        await rerun.close_spider()
    assert kept == [True] * 4 + [False] * 4, kept
    for copy in copies:
        [member] = await records_of(throwaway_redis, copy["url"])
        assert not member.canonical and copy["url"] in merged_duplicates(throwaway_redis)
