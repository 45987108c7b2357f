"""Erasure: one page (by id or URL) out of the index and out of every log the crawl wrote.

The index goes first, so no later lookup finds the page, then the merge and review logs are
rewritten without it (docs/reliability.md "Erasure" says what stays and why; an item a live crawl
had in flight meanwhile can still name it: docs/how-it-works.md "Erasure and retention").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from scrapy_simhash.configured import configured_index, configured_logs
from scrapy_simhash.index import Erased
from scrapy_simhash.mergelog import LogRewrite, erase_pages
from scrapy_simhash.redis_url import client_url, is_redis, mask_url, sync_client
from scrapy_simhash.settings import SimhashSettings

__all__ = ["Erasure", "ErasureIncomplete", "connection_urls", "erase"]

logger = logging.getLogger(__name__)


class ErasureIncomplete(Exception):
    """The index no longer holds the page, but a log could not be rewritten: ``pages`` are what an
    erasure run again must name, since the index no longer knows them."""

    def __init__(self, pages: list[str], error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.pages = pages


@dataclass
class Erasure:
    """What one erasure removed: the index's records, and each log's rewrite."""

    records: list[Erased] = field(default_factory=list)
    logs: dict[str, LogRewrite] = field(default_factory=dict)
    persistence: list[str] = field(default_factory=list)  # what the caller still has to do on disk

    @property
    def pages(self) -> set[str]:
        """Every id and URL the erased records had: what the logs must forget."""
        return {value for record in self.records for value in (record.id, record.url) if value}


async def erase(config: SimhashSettings, key: str) -> Erasure:
    """Erase the records whose id or URL is ``key`` from the index, then every page they named
    (``key`` included) from the merge and review logs."""
    index = configured_index(config, create=False)
    result = Erasure()
    try:
        await index.open()
        result.records = await index.erase(key)
    finally:
        await index.close()
    pages = result.pages | {key}
    try:
        for log in configured_logs(config):
            result.logs[log.kind] = await erase_pages(log.uri, pages, log.default_stream)
    except Exception as exc:
        raise ErasureIncomplete(sorted(pages), exc) from exc
    for url in connection_urls([config.index_url, config.merge_log or "", config.review_log or ""]):
        result.persistence += _rewrite_append_only_file(url)
    return result


def connection_urls(uris: list[str]) -> list[str]:
    """The Redis servers among the index and log ``uris``, each once, as a client connects to them."""
    return list(dict.fromkeys(client_url(uri) for uri in uris if is_redis(uri)))


def _rewrite_append_only_file(url: str) -> list[str]:
    """Ask a Redis that appends to a file to rewrite it, so the erased bytes leave the disk too."""
    client = sync_client(url)
    try:
        nodes = client.get_primaries() if hasattr(client, "get_primaries") else [None]
        left = []
        for node in nodes:
            target = {"target_nodes": node} if node is not None else {}
            try:
                if client.config_get("appendonly", **target).get("appendonly") == "yes":
                    client.bgrewriteaof(**target)
            except Exception as exc:  # an ACL without CONFIG: say what to do instead
                left.append(f"run BGREWRITEAOF on {mask_url(url)} ({type(exc).__name__}: {exc})")
        return left
    finally:
        client.close()
