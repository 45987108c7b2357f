"""The local Redis Cluster fixture, and the redis-py cluster behaviour the index's cluster support uses."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio.cluster import RedisCluster

from redis_servers import LocalCluster

pytestmark = pytest.mark.slow

# Both keys carry the same hash tag, so they live in one slot and one script may touch both.
TWO_KEYS = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('GET', KEYS[2])"


def test_cluster_has_three_primaries_each_with_a_replica(cluster: LocalCluster) -> None:
    with cluster.nodes[0].client() as client:
        shards = client.execute_command("CLUSTER SLOTS")
    assert sum(end - start + 1 for start, end, *_ in shards) == 16384
    assert len(shards) == 3 and all(len(nodes) == 2 for _, _, *nodes in shards)


async def test_a_script_may_touch_keys_of_one_hash_tag_only(cluster: LocalCluster) -> None:
    client = RedisCluster.from_url(cluster.url)
    try:
        script = client.register_script(TWO_KEYS)
        assert await script(keys=["simhash:{news}:a", "simhash:{news}:b"], args=["v"]) == b"v"
        with pytest.raises(redis.RedisClusterException, match="same key slot"):
            await script(keys=["simhash:{news}:a", "simhash:{blogs}:a"], args=["v"])
        await client.script_flush()
        assert await script(keys=["simhash:{news}:a", "simhash:{news}:b"], args=["w"]) == b"w"
    finally:
        await client.aclose()


async def test_stopped_primary_is_replaced_by_its_replica_without_loss(cluster: LocalCluster) -> None:
    key = "simhash:{failover}:k"
    primary = cluster.primary_of(key)
    (replica,) = cluster.replicas_of(primary)
    client = RedisCluster.from_url(cluster.url)
    try:
        await client.set(key, "before")
        primary.stop()
        cluster.wait_primary(replica)
        cluster.wait_healthy()
        assert cluster.primary_of(key) is replica
        assert await client.get(key) == b"before"
    finally:
        await client.aclose()
