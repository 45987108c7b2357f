"""Starting over: one spider's index and logs emptied, every other spider's data left as it was.

``SIMHASH_RESET`` (or ``-a simhash_reset=1``) does it when the spider opens, ``scrapy simhash-reset
--spider NAME`` at any time. A SQLite index and JSON-lines logs are files of their own; a Redis index
is found by its key layout (``index/redis.py``): the keys under the prefix, and the page data keys,
which carry the prefix without its hash-tag braces.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from scrapy_simhash.configured import configured_logs
from scrapy_simhash.mergelog import log_store
from scrapy_simhash.mergelog.jsonlines import FileStore
from scrapy_simhash.mergelog.stream import StreamStore
from scrapy_simhash.redis_url import async_client, is_cluster, mask_url
from scrapy_simhash.settings import SimhashSettings

__all__ = ["Reset", "data_key_patterns", "reset", "targets"]

#: Keys a SCAN asks for, and deletes, per round trip.
SCAN_COUNT = 1000
#: What SQLite keeps beside a database file while it is open (WAL mode).
SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


@dataclass
class Reset:
    """What a reset removed, each line a place and a count, for the command and the log."""

    removed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "; ".join(self.removed) or "nothing to remove"


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern (SCAN MATCH)."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


def data_key_patterns(key_prefix: str) -> list[str]:
    """SCAN patterns of every key of the index under ``key_prefix``: its own keys (``P:...``, in the
    hash tag's slot) and its page data (``P without braces:d:...``, spread over a cluster)."""
    data = key_prefix.replace("{", "").replace("}", "")
    return [f"{_glob_escape(key_prefix)}:*", f"{_glob_escape(data)}:d:*"]


def targets(config: SimhashSettings) -> list[str]:
    """What a reset of this spider removes, in words, for the confirmation question."""
    out = [_index_target(config)]
    for log in configured_logs(config):
        out.append(f"{log.kind} log {log_store(log.uri, log.default_stream).where}")
    return out


def _index_target(config: SimhashSettings) -> str:
    if urlsplit(config.index_url).scheme == "sqlite":
        return f"index file {_sqlite_path(config.index_url)}"
    return f"index keys {' and '.join(data_key_patterns(config.key_prefix))} at {mask_url(config.index_url)}"


def _sqlite_path(url: str) -> str:
    return url[len("sqlite://") :].removeprefix("/")


async def reset(config: SimhashSettings) -> Reset:
    """Empty the spider's index and its merge and review logs; what is absent already is no error."""
    done = Reset()
    for log in configured_logs(config):  # first: a default stream is a key under the index's prefix
        done.removed.append(await _empty_log(log.uri, log.default_stream, log.kind))
    if urlsplit(config.index_url).scheme == "sqlite":
        path = _sqlite_path(config.index_url)
        removed = sum(_unlink(path + suffix) for suffix in SQLITE_SIDE_FILES) if path else 0
        done.removed.append(f"index {path}: {'deleted' if removed else 'absent'}")
    else:
        keys = await _delete_keys(config.index_url, data_key_patterns(config.key_prefix))
        done.removed.append(f"index {mask_url(config.index_url)}: {keys} keys deleted")
    return done


async def _empty_log(uri: str, default_stream: str, kind: str) -> str:
    store = log_store(uri, default_stream)
    if isinstance(store, FileStore):
        return f"{kind} log {store.where}: {'deleted' if _unlink(store.path) else 'absent'}"
    assert isinstance(store, StreamStore)
    client = async_client(store.address.url)
    try:
        deleted = await client.delete(store.address.stream)
    finally:
        await client.aclose()
    return f"{kind} log {store.where}: {'deleted' if deleted else 'absent'}"


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


async def _delete_keys(url: str, patterns: list[str]) -> int:
    """Delete every key matching ``patterns``, on each primary of a cluster; how many went. Keys are
    bytes, never names passed through a shell."""
    client = async_client(url)
    deleted = 0
    try:
        nodes: list[Any] = [None]
        if is_cluster(url):
            await client.initialize()
            nodes = client.get_primaries()
        for pattern, node in itertools.product(patterns, nodes):
            batch: list[bytes] = []
            target = {} if node is None else {"target_nodes": node}
            async for key in client.scan_iter(match=pattern, count=SCAN_COUNT, **target):
                batch.append(key)
                if len(batch) >= SCAN_COUNT:
                    deleted += await _unlink_keys(client, batch)
                    batch = []
            if batch:
                deleted += await _unlink_keys(client, batch)
    finally:
        await client.aclose()
    return deleted


async def _unlink_keys(client: Any, keys: list[bytes]) -> int:
    """UNLINK each key on its own (a cluster's keys of one batch live in many slots), pipelined."""
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.execute_command("UNLINK", key)
        return sum(await pipe.execute())
