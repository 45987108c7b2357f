"""The Redis backend on a real local Redis Cluster (3 primaries, 3 replicas, started by the fixture).

Every test of the index contract runs here again against ``redis+cluster://``, then the pipeline
ingests through a primary failover and must lose nothing.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.cluster import RedisCluster

from pipeline_harness import feed, open_pipeline, simhash_stats
from redis_servers import LocalCluster, TLSFiles, value_of
from scrapy_simhash.index import open_index
from scrapy_simhash.mergelog import read_merge_log
from test_index_contract import *  # noqa: F401,F403 - the contract tests, collected again for the cluster
from test_index_contract import _record
from test_mergelog import record as merge_log_record

pytestmark = pytest.mark.slow

PREFIX = "simhash-test:{spider}"


@pytest.fixture
def backend():
    return "redis-cluster"


def cluster_url(cluster: LocalCluster) -> str:
    scheme, _, rest = cluster.url.partition("://")
    return f"{scheme}+cluster://{rest}"


@pytest.fixture
def location(cluster: LocalCluster):
    return cluster_url(cluster), PREFIX


@pytest.fixture
def snapshot(cluster: LocalCluster):
    """Every key of the index and its value, read through a cluster client."""

    def take():
        with RedisCluster.from_url(cluster.url) as client:
            keys = client.scan_iter(match="simhash-test:{default}*", target_nodes="primaries")
            return {key: value_of(client, key) for key in keys}

    return take


def test_a_cluster_index_needs_a_hash_tag(cluster: LocalCluster) -> None:
    with pytest.raises(ValueError, match="hash tag"):
        open_index(cluster_url(cluster), key_prefix="simhash:no-tag")


async def test_each_index_lives_in_the_slot_of_its_hash_tag(cluster: LocalCluster, snapshot) -> None:
    """Everything a per-item script touches is one slot; two spiders' indexes are two slots."""
    rng = random.Random(3)
    for spider in ("default", "news"):
        index = open_index(cluster_url(cluster), key_prefix=PREFIX, spider=spider)
        for i in range(20):
            await index.add(_record(rng, f"{spider}-{i}"))
        await index.check_and_add_exact(_record(rng, f"{spider}-short"), "digest")
        await index.close()
    client = RedisCluster.from_url(cluster.url)
    slots = {}
    for spider in ("default", "news"):
        keys = client.scan_iter(match=f"simhash-test:{{{spider}}}*", target_nodes="primaries")
        slots[spider] = {client.keyslot(key) for key in keys}
    client.close()
    assert len(slots["default"]) == 1 and len(slots["news"]) == 1
    assert slots["default"] != slots["news"]
    assert len(snapshot()) > 20  # records, buckets, fingerprints, digests: all in that one slot


async def test_a_primary_failover_during_ingestion_loses_nothing(cluster: LocalCluster, corpus, tmp_path) -> None:
    """Stop the primary that holds the spider's slot mid-stream; its replica takes over; every item
    comes out, none unchecked, and every record indexed before the failover is still found after it."""
    pages = {doc["page"]: doc["body_text"] for doc in corpus if 150 < len(doc["body_text"].split()) < 2000}
    bodies = list(pages.values())[:40]
    items = [{"url": f"https://site.example/{i}", "body_text": body} for i, body in enumerate(bodies)]
    copies = [{"url": item["url"] + "/copy", "body_text": item["body_text"]} for item in items]
    pipeline = await open_pipeline(
        {
            "SIMHASH_INDEX_URL": cluster_url(cluster),
            "SIMHASH_KEY_PREFIX": PREFIX,
            "SIMHASH_INDEX_RETRIES": 10,
            "SIMHASH_INDEX_RETRY_DELAY": 0.1,
            "SIMHASH_HTML_FIELDS": [],
            "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        }
    )
    primary = cluster.primary_of(PREFIX.replace("{spider}", "{reliability}"))
    (replica,) = cluster.replicas_of(primary)
    try:
        assert [await feed(pipeline, item) for item in items[:20]] == [True] * 20
        await asyncio.to_thread(primary.stop)  # graceful: the replica has every acknowledged write
        # The slot has no primary until the replica is promoted (about 2 node timeouts): these items
        # are retried through the failover.
        assert [await feed(pipeline, item) for item in items[20:]] == [True] * 20
        await asyncio.to_thread(cluster.wait_primary, replica)
        assert [await feed(pipeline, copy) for copy in copies] == [False] * 40
        stats = simhash_stats(pipeline)
        assert stats["simhash/unchecked"] == 0
        assert stats["simhash/unique"] == 40 and stats["simhash/duplicates"] == 40
        assert await pipeline.index.index.count() == 40
    finally:
        await pipeline.close_spider()


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A cluster whose every connection is TLS, clients and replicas authenticated by a password."""
    directory = tmp_path_factory.mktemp("tls-cluster")
    cluster = LocalCluster(directory, tls=TLSFiles.create(directory), password="s3cret/:@")
    try:
        yield cluster
    finally:
        cluster.close()


async def test_an_index_on_a_tls_cluster_with_a_password(tls_cluster: LocalCluster) -> None:
    cert = tls_cluster.nodes[0].tls.cert
    url = f"{cluster_url(tls_cluster)}?ssl_ca_certs={cert}"
    assert url.startswith("rediss+cluster://:s3cret%2F%3A%40@127.0.0.1:")
    rng = random.Random(8)
    index = open_index(url, key_prefix=PREFIX)
    records = [_record(rng, f"tls-{i}") for i in range(30)]
    for record in records:
        assert await index.check_and_add(record, 3) == []
    near = _record(rng, "near")
    near.fingerprint = records[7].fingerprint ^ 0b1001
    assert [c.record_id for c in await index.check_and_add(near, 3)] == ["tls-7"]
    for record in records:
        assert await index.remove(record.id)
    assert await index.count() == 0
    await index.close()
    plain = open_index(cluster_url(tls_cluster).replace("rediss+", "redis+"), key_prefix=PREFIX)
    with pytest.raises(Exception):  # plain TCP to a TLS-only port: no data is exchanged
        await asyncio.wait_for(plain.count(), 10)
    await plain.close()


async def test_the_merge_log_stream_on_a_cluster_keeps_every_record(cluster: LocalCluster, corpus) -> None:
    """SIMHASH_MERGE_LOG = redis+cluster://...: every merge of a crawl is read back through the cluster,
    and a burst of concurrent writes (more than the writer's connections) loses nothing."""
    bodies = [doc["body_text"] for doc in corpus if 150 < len(doc["body_text"].split()) < 2000][:10]
    pipeline = await open_pipeline(
        {
            "SIMHASH_INDEX_URL": cluster_url(cluster),
            "SIMHASH_KEY_PREFIX": PREFIX,
            "SIMHASH_HTML_FIELDS": [],
            "SIMHASH_MERGE_LOG": cluster_url(cluster),
        }
    )
    stream = pipeline.merge_log.stream
    try:
        for i, body in enumerate(bodies):
            assert await feed(pipeline, {"url": f"https://site.example/{i}", "body_text": body})
        copies = [{"url": f"https://mirror.example/{i}", "body_text": body} for i, body in enumerate(bodies)]
        assert await asyncio.gather(*(feed(pipeline, copy) for copy in copies)) == [False] * 10
        burst = [merge_log_record(duplicate=f"d{n}") for n in range(300)]
        await asyncio.gather(*(pipeline.merge_log.write([sent]) for sent in burst))
    finally:
        await pipeline.close_spider()
    records = list(read_merge_log(cluster_url(cluster), stream))
    merged = {(r["canonical_url"], r["duplicate_url"]) for r in records if r["duplicate_id"].startswith("https:")}
    assert merged == {(f"https://site.example/{i}", f"https://mirror.example/{i}") for i in range(10)}
    assert sorted(r["duplicate_id"] for r in records if not r["duplicate_id"].startswith("https:")) == sorted(
        sent["duplicate_id"] for sent in burst
    )


async def test_merges_ride_along_with_another_call_on_a_cluster(cluster: LocalCluster) -> None:
    """Held merges go out inside the next call's EVALSHA through the cluster pipeline too."""
    rng = random.Random(4)
    index = open_index(cluster_url(cluster), key_prefix=PREFIX, spider="riders")
    canonical, other = _record(rng, "canonical"), _record(rng, "other")
    await index.add(canonical)
    client = RedisCluster.from_url(cluster.url)
    client.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
    mirrors = [f"https://mirror.example/{i}" for i in range(3)]
    *merged, found = await asyncio.gather(
        *(index.merge("canonical", url, 1.0) for url in mirrors), index.check_and_add(other, 3)
    )
    stats = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
    client.close()
    assert merged == [None] * 3 and found == []
    assert sum(node.get("cmdstat_evalsha", {}).get("calls", 0) for node in stats.values()) == 1
    stored = await index.get("canonical")
    assert stored.urls == (canonical.url, *mirrors) and stored.first_seen == 1.0
    await index.close()
