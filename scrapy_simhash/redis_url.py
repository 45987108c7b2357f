"""Store URLs: Redis clients from them (``redis+cluster://`` names a Redis Cluster), and masked for messages.

One place for the scheme, shared by the index and the merge log, so that a setting that works for
one works for the other; and one place that keeps a password out of logs, stats and errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
import redis.asyncio
import redis.cluster

__all__ = ["CLUSTER_SCHEMES", "async_client", "is_cluster", "mask_url", "sync_client"]

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
MASK = "***"
#: Seconds a command waits for its reply unless the URL says (``?socket_timeout=``): a server that
#: accepts connections and never answers (frozen, behind a half-open link) would hold each item for
#: good. Calls take milliseconds; redis-py 8 waits 5 s by default, older releases forever.
SOCKET_TIMEOUT = 5.0


def mask_url(url: str) -> str:
    """``url`` with its password, in the user part or in a ``password=`` query parameter, as ``***``.

    The user name stays. Text that is not a URL (a file path) is returned as it is; a malformed URL
    is masked all the same, never refused: this runs on the way to an error message.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    # From the last @: a password may hold an unescaped @, #, / or ?, which would end the parts below.
    userinfo, at, rest = rest.rpartition("@")
    if at and ":" in userinfo:
        userinfo = f"{userinfo.partition(':')[0]}:{MASK}"
    rest, hash_sign, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    if query:
        query = "&".join(
            f"{key}={MASK}" if key.lower() == "password" else part
            for part in query.split("&")
            for key in [part.partition("=")[0]]
        )
    return f"{scheme}://{userinfo}{at}{rest}{question}{query}{hash_sign}{fragment}"


def is_cluster(url: str) -> bool:
    return url.partition("://")[0] in CLUSTER_SCHEMES


def _node_url(url: str) -> str:
    """The URL of one node, as redis-py's cluster clients take it: ``redis+cluster://`` -> ``redis://``."""
    scheme, _, rest = url.partition("://")
    return f"{scheme.removesuffix('+cluster')}://{rest}"


def async_client(url: str, **options: Any) -> redis.asyncio.Redis | redis.asyncio.RedisCluster:
    options.setdefault("socket_timeout", SOCKET_TIMEOUT)  # the URL's own wins
    with _parsed(url):
        if is_cluster(url):
            return redis.asyncio.RedisCluster.from_url(_node_url(url), **options)
        return redis.asyncio.Redis.from_url(url, **options)


def sync_client(url: str) -> redis.Redis | redis.cluster.RedisCluster:
    with _parsed(url):
        if is_cluster(url):
            return redis.cluster.RedisCluster.from_url(_node_url(url), socket_timeout=SOCKET_TIMEOUT)
        return redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT)


@contextmanager
def _parsed(url: str) -> Iterator[None]:
    """redis-py's own message for a URL it cannot parse quotes the part it choked on, which can be a
    piece of the password: it is replaced by one that cannot."""
    try:
        yield
    except ValueError:
        raise ValueError(
            f"cannot read {mask_url(url)} as a Redis URL (in a password, #, /, ? and @ must be percent-encoded)"
        ) from None
