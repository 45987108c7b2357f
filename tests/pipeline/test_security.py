"""Security of the Redis path: TLS with a password end to end, and stored data that is never executed.

The TLS server is a throwaway redis-server with a self-signed certificate (this redis-server is
built with TLS; ``rediss://`` is tested for real, not only a password on plain TCP).
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from urllib.parse import quote

import pytest
from pipeline_harness import feed, open_pipeline, simhash_stats
from redis_servers import RedisFactory, TLSFiles
from texts import article
from scrapy_simhash.index.wire import page_fields, read_page

pytestmark = pytest.mark.redis

PASSWORD = "s3cret/with:odd@chars"  # percent-encoded in the URL


class Canary:
    """Unpickling this creates ``path``: if the file appears, something unpickled index data."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


@pytest.fixture
def tls_server(redis_factory: RedisFactory, tmp_path):
    return redis_factory.start(password=PASSWORD, tls=TLSFiles.create(tmp_path))


def tls_url(server, password: str = PASSWORD) -> str:
    """The documented form: rediss://:PASSWORD@HOST:PORT/DB?ssl_ca_certs=CA.pem (password percent-encoded)."""
    return f"rediss://:{quote(password, safe='')}@127.0.0.1:{server.port}/0?ssl_ca_certs={server.tls.cert}"


def settings(tmp_path, url: str) -> dict:
    return {
        "SIMHASH_INDEX_URL": url,
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        "SIMHASH_INDEX_RETRIES": 1,
        "SIMHASH_INDEX_RETRY_DELAY": 0.01,
    }


@pytest.fixture
def body() -> str:
    return article(700)


async def test_rediss_with_a_password_works_end_to_end(tls_server, tmp_path, body) -> None:
    pipeline = await open_pipeline(settings(tmp_path, tls_url(tls_server)))
    try:
        assert await feed(pipeline, {"url": "https://a.example/1", "body_text": body})
        assert not await feed(pipeline, {"url": "https://b.example/1", "body_text": body})
        assert await pipeline.index.index.count() == 2  # the page and its copy, in one group
    finally:
        await pipeline.close_spider()


async def test_a_refused_connection_passes_items_unchecked(tls_server, tmp_path, body, caplog) -> None:
    """Plain TCP to the TLS port: no data is exchanged, items are counted. (A wrong password is
    refused at open: tests/index/test_redis.py.)"""
    pipeline = await open_pipeline(settings(tmp_path, f"redis://127.0.0.1:{tls_server.port}/0"))
    try:
        with caplog.at_level(logging.WARNING):
            assert await feed(pipeline, {"url": "https://a.example/1", "body_text": body})
        assert simhash_stats(pipeline)["simhash/unchecked"] == 1
        assert "unchecked" in caplog.text
    finally:
        await pipeline.close_spider()


async def test_stored_data_is_parsed_never_unpickled_or_evaluated(throwaway_redis, tmp_path, body) -> None:
    """Plant pickles and Python/Lua code where the index keeps URLs and verification blobs: reading
    the record back returns inert data or refuses the blob (counted), and nothing runs."""
    canary = tmp_path / "unpickled"
    payload = pickle.dumps(Canary(canary))
    pipeline = await open_pipeline(settings(tmp_path, throwaway_redis.url))
    try:
        assert await feed(pipeline, {"url": "https://a.example/1", "body_text": body})
        index = pipeline.index.index
        with throwaway_redis.client() as admin:
            [key] = admin.keys("*:d:*")
            code = f"__import__('pathlib').Path({str(canary)!r}).touch()"
            stored = read_page(admin.get(key))
            admin.set(key, page_fields(stored.id.decode(), code, "redis.call('FLUSHALL')", stored.retention.decode(),
                                       stored.first_seen) + payload)
            [record] = await index.records("https://a.example/1")
            assert (record.url, record.host) == (code, "redis.call('FLUSHALL')") and len(record.hashes) == 0
        # Another crawl reads the blob (this one verifies its own records with the hashes it computed).
        other = await open_pipeline(settings(tmp_path, throwaway_redis.url))
        try:
            assert await feed(other, {"url": "https://b.example/1", "body_text": body})  # its candidate: unreadable
            assert simhash_stats(other)["simhash/unreadable_records"] == 1
        finally:
            await other.close_spider()
        with throwaway_redis.client() as admin:
            assert admin.dbsize() > 0
        assert not canary.exists()
    finally:
        await pipeline.close_spider()
