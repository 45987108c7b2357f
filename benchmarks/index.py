"""Band index at scale: lookup latency, candidates scanned and recall of planted near-duplicates.

Fills each backend (SQLite file, Redis of this script's own) with random fingerprints, growing
through 10k, 100k and 1M records, and at each size looks up near-duplicates of stored records
(planted at every distance up to the layout's max distance) and random fingerprints. Block layouts
must find 100% of them (their guarantee covers distance 3); a sampled layout's expected recall, from
``Layout.collision_probability``, is printed beside its measured one. Records
carry no verification hashes here: this measures the bands, not the record store. Latency is per
lookup, one at a time; "scanned" counts bucket members the lookup had to compare (read outside the
timing). The baseline is the 4-block layout, measured in the same run.

    python benchmarks/index.py [--max-records 1000000] [--queries 1000] [--backends sqlite,redis]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from pipeline import throwaway_redis
from scrapy_simhash.index import Record, open_index
from scrapy_simhash.index.codec import to_signed
from scrapy_simhash.index.redis import field_width
from scrapy_simhash.layout import BlockLayout, Layout, SampledLayout

SIZES = (10_000, 100_000, 1_000_000)
# name -> (layout, max distance). "auto" is what SIMHASH_MAX_DISTANCE = "auto" chooses at the default
# Jaccard threshold (README "Quality and calibration"); 14 x 11 bits is what it chose before sampled
# tables could multi-probe.
LAYOUTS: dict[str, tuple[Layout, int]] = {
    "4 blocks": (BlockLayout(bands=4), 3),
    "2 blocks + multi-probe": (BlockLayout(bands=2, multiprobe=True), 3),
    "sampled 8 x 16 bits": (SampledLayout(8, 16, seed=1), 3),
    "sampled 14 x 11 bits": (SampledLayout(14, 11), 18),
    "auto: 16 x 16 bits + multi-probe": (SampledLayout(16, 16, multiprobe=True), 18),
}


def flip(rng: random.Random, fingerprint: int, distance: int) -> int:
    for position in rng.sample(range(64), distance):
        fingerprint ^= 1 << position
    return fingerprint


def scanned_counter(backend: str, location: str, prefix: str, layout: Layout):
    """Bucket members a lookup of a fingerprint compares, read straight from the store."""
    if backend == "sqlite":
        db = sqlite3.connect(location)

        def count(fp: int) -> int:
            return sum(
                db.execute("SELECT COUNT(*) FROM bands WHERE tbl = ? AND key = ?", (t, to_signed(k))).fetchone()[0]
                for t, k in layout.probe_keys(fp)
            )

        return count
    client = redis.Redis.from_url(location)

    width = field_width(layout)

    def count(fp: int) -> int:
        # Table t's buckets are fields of the hash P:b:<t>, 8 bytes a member (README "The band index").
        pipe = client.pipeline(transaction=False)
        for t, k in layout.probe_keys(fp):
            pipe.hstrlen(f"{prefix}:b:{t}", k.to_bytes(width, "big"))
        return sum(pipe.execute()) // 8

    return count


async def fill(index, fingerprints: list[int], start: int, stop: int) -> None:
    empty = np.empty(0, dtype=np.uint32)
    queue = iter(range(start, stop))

    async def worker() -> None:
        for i in queue:
            await index.add(Record(id=f"r{i}", fingerprint=fingerprints[i], shingles=empty))

    await asyncio.gather(*(worker() for _ in range(32)))


async def measure(
    index, layout: Layout, max_distance: int, fingerprints: list[int], size: int, queries: int, scanned
) -> dict:
    rng = random.Random(size)
    latencies, scans, hits, planted, expected = [], [], 0, 0, []
    for q in range(queries):
        if q % 2 == 0:
            target = rng.randrange(size)
            distance = rng.randint(0, max_distance)
            expected.append(layout.collision_probability(distance))
            query = flip(rng, fingerprints[target], distance)
        else:
            target, query = None, rng.getrandbits(64)
        started = time.perf_counter()
        found = await index.candidates(query, max_distance)
        latencies.append(time.perf_counter() - started)
        scans.append(scanned(query))
        if target is not None:
            planted += 1
            hits += any(c.record_id == f"r{target}" for c in found)
    ms = np.array(latencies) * 1000
    return {"p50": np.percentile(ms, 50), "p99": np.percentile(ms, 99), "scanned": np.mean(scans),
            "recall": hits / planted, "expected": np.mean(expected)}


async def run_backend(
    backend: str, location: str, layouts: dict[str, tuple[Layout, int]], sizes: list[int], queries: int
) -> None:
    rng = random.Random(0)
    fingerprints = [rng.getrandbits(64) for _ in range(max(sizes))]
    for name, (layout, max_distance) in layouts.items():
        if backend == "sqlite":
            path = Path(location) / f"{name.replace(' ', '-')}.db"
            index, url, prefix = open_index(f"sqlite:///{path}", layout=layout), str(path), ""
        else:
            prefix = f"bench:{{{name.replace(' ', '-')}}}"
            index, url = open_index(location, layout=layout, key_prefix=prefix), location
        scanned = scanned_counter(backend, url, prefix, layout)
        filled = 0
        for size in sizes:
            started = time.perf_counter()
            await fill(index, fingerprints, filled, size)
            fill_rate = (size - filled) / (time.perf_counter() - started)
            filled = size
            r = await measure(index, layout, max_distance, fingerprints, size, queries, scanned)
            print(f"{backend:6s} {name:24s} d<={max_distance:<2d} {size:>9,d}  "
                  f"p50 {r['p50']:6.2f} ms  p99 {r['p99']:6.2f} ms  scanned {r['scanned']:8.1f}  "
                  f"planted recall {r['recall']:6.1%} (expected {r['expected']:6.1%})  "
                  f"(fill {fill_rate:,.0f} records/s)",
                  flush=True)
        await index.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-records", type=int, default=max(SIZES))
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--backends", default="sqlite,redis")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated names of LAYOUTS")
    args = parser.parse_args()
    sizes = [s for s in SIZES if s <= args.max_records] or [args.max_records]
    layouts = {name: LAYOUTS[name] for name in args.layouts.split(",")}
    print(f"{args.queries} lookups per size, half planted near-duplicates at distance 0..max distance "
          f"(3; 18 for the calibrated layout), half random")
    for backend in args.backends.split(","):
        if backend == "sqlite":
            with tempfile.TemporaryDirectory(prefix="simhash-bench-") as folder:
                await run_backend("sqlite", folder, layouts, sizes, args.queries)
        else:
            with throwaway_redis() as url:
                await run_backend("redis", url, layouts, sizes, args.queries)


if __name__ == "__main__":
    asyncio.run(main())
