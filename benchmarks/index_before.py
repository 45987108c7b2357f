"""The baseline of benchmarks/index.py: the index as it was at commit 1a0d52b, driven by the same harness.

Run by index.py with the old tree first on the path; it prints one JSON line of figures per size:

    PYTHONPATH=/tmp/simhash-before python benchmarks/index_before.py --backend redis \\
        --location redis://127.0.0.1:PORT/0 --sizes 100000,1000000 [--lookups 2000] [--near 200]

(``--location`` is a Redis URL of the caller's own, flushed, or a SQLite file path.) The layout is
what that version's settings chose by default (SIMHASH_MAX_DISTANCE = "auto" at Jaccard 0.82):
16 tables of 16 sampled fingerprint bits with multi-probe, max distance 18. Records are random
64-bit fingerprints with the same ids as index.py's and no verification hashes; the fill uses the
old API's own ``add`` (on Redis its client batches the calls in flight), a lookup is its
``check_and_add(record, 18)``, and a near-duplicate is a stored fingerprint with 0..18 bits flipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import numpy as np

import scrapy_simhash
from index import CHUNK, batched, NEAR_SEED, QUERY_SEED, SEED, fingerprint_of, measure, random_rows, url_of
from scrapy_simhash.index import Record, open_index
from scrapy_simhash.layout import SampledLayout

MAX_DISTANCE = 18


class BeforeDriver:
    label = "before"

    def __init__(self, backend: str, location: str) -> None:
        self.layout = SampledLayout(16, 16, multiprobe=True)
        url = location if backend == "redis" else f"sqlite:///{location}"
        self.backend = backend
        self.index = open_index(url, layout=self.layout, key_prefix="bench:{index}")

    @staticmethod
    def _record(url: str, fingerprint: int) -> Record:
        return Record(id=url, url=url, fingerprint=fingerprint)

    def _records(self, start: int, stop: int) -> list[Record]:
        rows = random_rows(SEED, start, stop, 8)
        return [self._record(url_of("page", i), fingerprint_of(row)) for i, row in zip(range(start, stop), rows)]

    async def open(self) -> None:
        pass  # the old index connects at construction (SQLite) or on its first call (Redis)

    async def fill(self, start: int, stop: int) -> int:
        for at in range(start, stop, CHUNK):
            records = self._records(at, min(at + CHUNK, stop))
            if self.backend == "sqlite":
                await self.index._run(self._fill_sqlite, records)
            else:
                await asyncio.gather(*(self.index.add(r) for r in records))
        return 0

    def new_queries(self, size: int, count: int) -> list:
        rows = random_rows(QUERY_SEED + size, 0, count, 8)
        return [(self._record(url_of(f"new-{size}", n), fingerprint_of(row)), None) for n, row in enumerate(rows)]

    def near_queries(self, size: int, targets: list[int]) -> list:
        queries = []
        for n, target in enumerate(targets):
            fingerprint = fingerprint_of(random_rows(SEED, target, target + 1, 8)[0])
            rng = np.random.default_rng([NEAR_SEED, size, n])
            for bit in rng.choice(64, int(rng.integers(0, MAX_DISTANCE + 1)), replace=False):
                fingerprint ^= 1 << int(bit)
            queries.append((self._record(url_of(f"near-{size}", n), fingerprint), url_of("page", target)))
        return queries

    def _fill_sqlite(self, records: list[Record]) -> None:
        with batched(self.index):
            for record in records:
                self.index._add_sync(record)

    async def lookup(self, query: tuple) -> bool:
        record, target = query
        return any(c.record_id == target for c in await self.index.check_and_add(record, MAX_DISTANCE))

    async def count(self) -> int:
        return await self.index.count()

    async def close(self) -> None:
        await self.index.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("redis", "sqlite"), required=True)
    parser.add_argument("--location", required=True)
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], required=True)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--near", type=int, default=200)
    args = parser.parse_args()
    if not hasattr(scrapy_simhash.layout, "SampledLayout"):
        raise SystemExit(f"{scrapy_simhash.__file__} is not the old tree: put it first on PYTHONPATH")
    await measure(
        BeforeDriver(args.backend, args.location), args.backend, args.location, args.sizes, args.lookups, args.near,
        lambda r: print(json.dumps(r), flush=True),
    )


if __name__ == "__main__":
    asyncio.run(main())
