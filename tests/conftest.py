"""Shared fixtures: a real Redis (never skipped: a missing server fails the test) and corpus access."""

from __future__ import annotations

import gzip
import json
import os
import uuid
from pathlib import Path

import pytest
import redis

# Throwaway redis-server processes and a local Redis Cluster (fixtures for fault and cluster tests).
pytest_plugins = ["redis_servers"]

REDIS_URL = os.environ.get("SIMHASH_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SIMHASH_CORPUS", ROOT.parent / "shared" / "corpus-scrapy-docs.jsonl"))
# Shipped with the example project: 100 of the corpus's pages (two releases), always at hand.
SHIPPED = ROOT / "example_project" / "data" / "scrapy-docs.jsonl.gz"


@pytest.fixture(scope="session")
def redis_server_url() -> str:
    """URL of a real Redis on a dedicated database number; fails loudly when none answers."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"these tests need a real Redis at {REDIS_URL} (set SIMHASH_TEST_REDIS_URL): {exc}")
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture
def redis_prefix(redis_server_url: str):
    """A key prefix of this test's own; its keys (and only they) are deleted afterwards."""
    prefix = f"simhash-test:{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_server_url)
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)
    client.close()


@pytest.fixture(scope="session")
def corpus() -> list[dict]:
    """Scrapy documentation pages: the shared corpus (1,309 pages) beside the clone when it is there,
    else the 100 pages the example project ships, so that a clone alone runs every test."""
    if CORPUS.exists():
        with CORPUS.open(encoding="utf-8") as lines:
            return [json.loads(line) for line in lines]
    with gzip.open(SHIPPED, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="session")
def full_corpus(corpus) -> list[dict]:
    """The shared corpus itself, for tests of data built from it (skipped without it)."""
    if not CORPUS.exists():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    return corpus
