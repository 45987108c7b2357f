"""Bytes a page: the shared corpus in a fresh Redis and a fresh SQLite file.

    python benchmarks/memory.py [--corpus PATH] [--limit N]
    PYTHONPATH=../other-checkout python benchmarks/memory.py    # another commit's package, same pages

Two fills of the corpus (its texts as ``scrapy simhash-eval`` reads them; each page's own id, URL and
host), each in a throwaway
redis-server of this run's own on a free port:

* every page added as a record of its own, as a page no other resembles is stored (each keeps its
  verification data): the cost of a page as such;
* the pipeline's decisions in corpus order (``judge.place``: copies join groups, and only findable
  ones keep verification data): what the corpus costs as a crawl stores it.

Printed for each: Redis ``used_memory`` above the server's with the index opened, a page; ``MEMORY
USAGE`` of the keys by kind (the segment after the key prefix, docs/how-it-works.md; ``d`` is page
data), a page; and for every page added, the SQLite file's bytes a page after a WAL checkpoint.
Per-page shares of keys that gather many records (id handles, band hashes) are larger on 1,309
pages than on millions.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import redis
from scrapy.settings import Settings

from pipeline import throwaway_redis  # benchmarks/pipeline.py: a redis-server of this run's own
from scrapy_simhash.configured import configured_layout
from scrapy_simhash.fingerprint import Fingerprinter, Signature
from scrapy_simhash.index import Index, Record, open_index
from scrapy_simhash.judge import place
from scrapy_simhash.offline.evaluate import Document, read_documents
from scrapy_simhash.settings import read

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus-scrapy-docs.jsonl"
PREFIX = "simhash:{memory}"
THRESHOLD = 0.82


def records(pages: list[Document], signatures: list[Signature]) -> list[Record]:
    return [
        Record(id=page.id, url=page.url, fingerprint=signature.fingerprint, hashes=signature.hashes,
               host=urlsplit(page.url).hostname or "")
        for page, signature in zip(pages, signatures)
    ]


async def add_every_page(index: Index, pages: list[Record]) -> str:
    for record in pages:
        lookup = await index.check_and_add(record)
        if lookup.added is None:
            await index.check_and_add(record, since=lookup.seq)  # nothing newer: added
    return "every page added"


async def pipeline_decisions(index: Index, pages: list[Record]) -> str:
    canonicals = findable = 0
    for record in pages:
        placement = await place(index, record, THRESHOLD)
        canonicals += placement.added is not None
        findable += placement.joined is not None and placement.joined.banded
    return f"the pipeline's decisions ({canonicals} canonicals, {findable} findable members)"


async def fill(url: str, layout, fill_with, pages: list[Record], opened=lambda: None) -> str:
    """``pages`` into the index at ``url`` by ``fill_with``; ``opened`` is called once the index is open
    (its function library loaded, its identity written), before the first page."""
    index = open_index(url, layout=layout, key_prefix=PREFIX)
    await index.open()
    opened()
    try:
        return await fill_with(index, pages)
    finally:
        await index.close()


def redis_bytes(layout, fill_with, make: list[Record]) -> None:
    with throwaway_redis() as url:
        admin = redis.Redis.from_url(url)
        empty = []
        how = asyncio.run(fill(url, layout, fill_with, make, lambda: empty.append(admin.info("memory")["used_memory"])))
        used = admin.info("memory")["used_memory"] - empty[0]
        kinds: Counter[str] = Counter()
        keys: Counter[str] = Counter()
        page_data = PREFIX.replace("{", "").replace("}", "") + ":d:"
        for key in admin.scan_iter(count=1000):
            name = key.decode(errors="replace")
            kind = "d" if name.startswith(page_data) else name.removeprefix(PREFIX + ":").split(":")[0]
            kinds[kind] += admin.memory_usage(key, samples=0) or 0
            keys[kind] += 1
        admin.close()
    count = len(make)
    print(f"Redis, {how}: {used / count:,.0f} B a page (used_memory)")
    print("  by key kind, MEMORY USAGE a page: " + ", ".join(
        f"{kind} {size / count:,.0f} ({keys[kind]} keys)" for kind, size in kinds.most_common()))


def sqlite_bytes(layout, make: list[Record]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index.sqlite3"
        asyncio.run(fill(f"sqlite:///{path}", layout, add_every_page, make))
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        print(f"SQLite, every page added: {path.stat().st_size / len(make):,.0f} B a page (file)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, help="the first N pages only")
    args = parser.parse_args()
    config = read(Settings(), "memory")
    pages = [page for page in read_documents(args.corpus, config.fields)[: args.limit] if page.text.strip()]
    fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
    signatures = [fingerprinter.signature(page.text) for page in pages]
    layout = configured_layout(config)
    words = statistics.mean(len(page.text.split()) for page in pages)
    hashes = statistics.mean(len(signature.hashes) for signature in signatures)
    print(f"{len(pages)} pages, {words:,.0f} words and {hashes:,.0f} verification hashes a page on average")
    redis_bytes(layout, add_every_page, records(pages, signatures))
    redis_bytes(layout, pipeline_decisions, records(pages, signatures))
    sqlite_bytes(layout, records(pages, signatures))


if __name__ == "__main__":
    main()
