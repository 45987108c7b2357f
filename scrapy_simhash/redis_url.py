"""Redis URLs: which schemes are Redis, clients from them (``redis+cluster://`` names a Redis Cluster),
the options this package reads off them, and the URL masked for messages.

One rule for the index, the merge-log stream and the review-log stream, so that a URL that works for
one works for the others; and one place that keeps a password out of logs, stats and errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.cluster
import redis.exceptions

__all__ = [
    "CLUSTER_SCHEMES", "OWN_OPTIONS", "REDIS_SCHEMES", "async_client", "client_url", "eviction", "is_cluster",
    "is_redis", "mask_url", "split_options", "sync_client",
]

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
REDIS_SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES)
#: Query parameters of a log's stream URL that this package reads and redis-py must not see.
OWN_OPTIONS = ("stream", "max_connections", "maxlen")
MASK = "***"
# A password query parameter's value runs to the next parameter: a # or @ left unencoded in it stays masked.
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*", re.IGNORECASE)
#: What to do about a server that evicts keys, for the error that refuses it.
EVICTION_FIX = (
    "Set maxmemory-policy noeviction on the server (CONFIG SET maxmemory-policy noeviction, redis.conf, or the "
    "service's parameter group), or SIMHASH_ALLOW_EVICTION = True to run on it anyway"
)
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
    rest = _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", rest)
    # From the last @: a password may hold an unescaped @, #, / or ?, which would end the parts below.
    userinfo, at, rest = rest.rpartition("@")
    if at and ":" in userinfo:
        userinfo = f"{userinfo.partition(':')[0]}:{MASK}"
    return f"{scheme}://{userinfo}{at}{rest}"


def is_redis(url: str) -> bool:
    return url.partition("://")[0] in REDIS_SCHEMES


def is_cluster(url: str) -> bool:
    return url.partition("://")[0] in CLUSTER_SCHEMES


def split_options(url: str, names: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """``url`` without its query parameters ``names``, and their values (decoded; the first of a name
    given twice). The rest of the URL is kept as written: a percent-encoded password decoded and put
    back unencoded would be another password, or no URL at all."""
    parts = urlsplit(url)
    kept, found = [], {}
    for part in parts.query.split("&") if parts.query else []:
        name, _, value = part.partition("=")
        if unquote(name) in names:
            found.setdefault(unquote(name), unquote(value))
        else:
            kept.append(part)
    return urlunsplit(parts._replace(query="&".join(kept))), found


def client_url(url: str) -> str:
    """The URL a Redis client connects with: ``url`` less this package's own options."""
    return split_options(url, OWN_OPTIONS)[0]


async def eviction(client: redis.asyncio.Redis | redis.asyncio.RedisCluster) -> str | None:
    """How the server (each primary of a cluster) evicts keys when its memory is full, as
    ``"maxmemory-policy allkeys-lru, maxmemory 2097152"``; None when it never does (``noeviction``,
    or no memory limit). Read with CONFIG GET, or INFO memory where CONFIG is refused or renamed, as
    managed services do (and most of them default to an evicting policy)."""
    nodes = client.get_primaries() if isinstance(client, redis.asyncio.RedisCluster) else [None]
    for node in nodes:
        target = {"target_nodes": node} if node is not None else {}
        try:
            config = {_text(k): _text(v) for k, v in (await client.config_get("maxmemory*", **target)).items()}
            policy, limit = config["maxmemory-policy"], int(config["maxmemory"])
        except (redis.exceptions.ResponseError, KeyError):
            info = await client.info("memory", **target)
            policy, limit = str(info["maxmemory_policy"]), int(info["maxmemory"])
        if limit > 0 and policy != "noeviction":
            return f"maxmemory-policy {policy}, maxmemory {limit}"
    return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


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
