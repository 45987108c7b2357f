"""Redis clients from URLs: ``redis+cluster://`` and ``rediss+cluster://`` name a Redis Cluster.

One place for the scheme, shared by the index and the merge log, so that a setting that works for
one works for the other.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.cluster

__all__ = ["CLUSTER_SCHEMES", "async_client", "is_cluster", "sync_client"]

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster(url: str) -> bool:
    return url.partition("://")[0] in CLUSTER_SCHEMES


def _node_url(url: str) -> str:
    """The URL of one node, as redis-py's cluster clients take it: ``redis+cluster://`` -> ``redis://``."""
    scheme, _, rest = url.partition("://")
    return f"{scheme.removesuffix('+cluster')}://{rest}"


def async_client(url: str, **options: Any) -> redis.asyncio.Redis | redis.asyncio.RedisCluster:
    if is_cluster(url):
        return redis.asyncio.RedisCluster.from_url(_node_url(url), **options)
    return redis.asyncio.Redis.from_url(url, **options)


def sync_client(url: str) -> redis.Redis | redis.cluster.RedisCluster:
    if is_cluster(url):
        return redis.cluster.RedisCluster.from_url(_node_url(url))
    return redis.Redis.from_url(url)
