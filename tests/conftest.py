"""Shared fixtures: a real Redis (never skipped: a missing server fails the test) and corpus access."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
import redis

# Throwaway redis-server processes and a local Redis Cluster (fixtures for fault and cluster tests).
pytest_plugins = ["redis_servers"]

REDIS_URL = os.environ.get("SIMHASH_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
CORPUS = Path(os.environ.get("SIMHASH_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus-scrapy-docs.jsonl"))


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
    """The shared Scrapy-docs corpus; skipped only outside CI when the file is absent."""
    if not CORPUS.exists():
        if os.environ.get("CI"):
            pytest.fail(f"corpus missing in CI: {CORPUS}")
        pytest.skip(f"shared corpus not found at {CORPUS}")
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]
