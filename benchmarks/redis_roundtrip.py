"""Redis check-and-add throughput and memory: our one-script index against the seed-style design.

Seed-style: one SMEMBERS per band (4 round trips, members ``"<id>:<fingerprint>"`` decoded and
compared in Python) then a pipeline of 4 SADDs (the 5th round trip). Ours: one script call per item,
the calls of items in flight pipelined on one connection (printed: EVALSHA per item). Both run in the
same process against a redis-server of this script's own (started and killed here), one item at a
time and with many items in flight (the pipeline processes items concurrently).

    python benchmarks/redis_roundtrip.py [--items 20000] [--memory-records 100000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Awaitable, Callable

import numpy as np
import redis
import redis.asyncio as aioredis

from pipeline import throwaway_redis
from scrapy_simhash.index import Record, open_index
from scrapy_simhash.layout import BlockLayout

MAX_DISTANCE = 3
BANDS = 4


class SeedStyle:
    """The seed's design: band sets of ``"<id>:<fingerprint>"`` strings, filtered in Python."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.layout = BlockLayout(bands=BANDS)

    async def check_and_add(self, record_id: str, fingerprint: int) -> bool:
        keys = [f"{self.prefix}:{t}:{key}" for t, key in self.layout.insert_keys(fingerprint)]
        for key in keys:
            for member in await self.client.smembers(key):
                other = int(member.rsplit(b":", 1)[1])
                if (other ^ fingerprint).bit_count() <= MAX_DISTANCE:
                    return False
        async with self.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.sadd(key, f"{record_id}:{fingerprint}")
            await pipe.execute()
        return True


def workload(count: int, seed: int) -> list[tuple[str, int]]:
    """URL-like ids (the pipeline's default id is the URL); one item in ten is a near-duplicate."""
    rng = random.Random(seed)
    items: list[tuple[str, int]] = []
    for i in range(count):
        if items and rng.random() < 0.1:
            fp = rng.choice(items)[1]
            for pos in rng.sample(range(64), rng.randint(0, MAX_DISTANCE)):
                fp ^= 1 << pos
        else:
            fp = rng.getrandbits(64)
        items.append((f"https://docs.example.com/en/latest/topics/page-{seed}-{i}.html", fp))
    return items


async def rate(items: list, call: Callable[[str, int], Awaitable], concurrency: int) -> tuple[float, float]:
    """(items per second, client CPU microseconds per item) with ``concurrency`` calls in flight."""
    started, cpu = time.perf_counter(), time.process_time()
    if concurrency == 1:
        for item in items:
            await call(*item)
    else:
        queue = iter(items)

        async def worker() -> None:
            for item in queue:
                await call(*item)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(items) / (time.perf_counter() - started), (time.process_time() - cpu) / len(items) * 1e6


def server_usec(admin: redis.Redis) -> float:
    """Server time of the commands clients sent since the last CONFIG RESETSTAT, in microseconds
    (a script's own commands are also listed, inside its time: left out here)."""
    stats = admin.info("commandstats")
    if "cmdstat_evalsha" in stats:
        return stats["cmdstat_evalsha"]["usec"] + sum(
            s["usec"] for name, s in stats.items() if name.startswith("cmdstat_script")
        )
    return sum(s["usec"] for s in stats.values())


def evalsha_calls(admin: redis.Redis) -> int:
    return admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


def memory_of(client: redis.Redis, pattern: str) -> tuple[int, int]:
    """(bytes by MEMORY USAGE over every key matching ``pattern``, number of keys)."""
    keys = list(client.scan_iter(match=pattern, count=5000))
    total = 0
    for start in range(0, len(keys), 5000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 5000]:
            pipe.memory_usage(key, samples=0)
        total += sum(pipe.execute())
    return total, len(keys)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--memory-records", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--shingles", type=int, default=1000, help="verification hashes per record (corpus median ~1,077)"
    )
    args = parser.parse_args()
    with throwaway_redis() as url:
        await run(url, args)


async def run(url: str, args: argparse.Namespace) -> None:
    admin = redis.Redis.from_url(url)
    try:
        drawn = np.random.default_rng(0).integers(0, 2**32, args.shingles, dtype=np.uint64)
        shingles = np.unique(drawn).astype(np.uint32)
        print(f"redis-server {admin.info('server')['redis_version']} at {url}; "
              f"{args.items} items, 10% near-duplicates, max distance {MAX_DISTANCE}, {BANDS} bands, "
              f"{len(shingles)} verification hashes per record")
        for concurrency in (1, args.concurrency):
            seed_client = aioredis.Redis.from_url(url)
            seed = SeedStyle(seed_client, f"seed{concurrency}")
            index = open_index(url, spider=f"ours{concurrency}")

            async def ours(record_id: str, fp: int, index=index) -> None:
                record = Record(id=record_id, fingerprint=fp, url=record_id, shingles=shingles)
                await index.check_and_add(record, MAX_DISTANCE)

            figures = []
            for call in (seed.check_and_add, ours):
                admin.config_resetstat()
                items_per_s, client_us = await rate(workload(args.items, 1), call, concurrency)
                figures.append((items_per_s, client_us, server_usec(admin) / args.items))
            (seed_rate, *seed_cost), (our_rate, *our_cost) = figures
            print(f"  {concurrency:3d} in flight: seed-style {seed_rate:8,.0f} items/s   ours {our_rate:8,.0f} items/s"
                  f"   ratio {our_rate / seed_rate:5.1f}x   (us/item client CPU + server: seed-style "
                  f"{seed_cost[0]:.0f} + {seed_cost[1]:.0f}, ours {our_cost[0]:.0f} + {our_cost[1]:.0f}; "
                  f"EVALSHA/item {evalsha_calls(admin) / args.items:.2f})")
            await index.close()
            await seed_client.aclose()

        admin.flushall()
        n = args.memory_records
        print(f"memory at {n:,} records (ids ~{len(workload(1, 2)[0][0])} chars, MEMORY USAGE SAMPLES 0):")
        before = admin.info("memory")["used_memory"]
        seed_client = aioredis.Redis.from_url(url)
        seed = SeedStyle(seed_client, "seed")
        items = workload(n, 2)
        for start in range(0, n, 1000):  # fill without the lookups: memory only
            async with seed_client.pipeline(transaction=False) as pipe:
                for record_id, fp in items[start : start + 1000]:
                    for t, key in seed.layout.insert_keys(fp):
                        pipe.sadd(f"seed:{t}:{key}", f"{record_id}:{fp}")
                await pipe.execute()
        seed_used = admin.info("memory")["used_memory"] - before
        seed_bytes, seed_keys = memory_of(admin, "seed:*")
        await seed_client.aclose()

        index = open_index(url, spider="ours")
        bare = np.empty(0, dtype=np.uint32)
        before = admin.info("memory")["used_memory"]

        async def add(record_id: str, fp: int) -> None:
            await index.add(Record(id=record_id, fingerprint=fp, url=record_id, shingles=bare))

        await rate(items, add, args.concurrency)
        our_used = admin.info("memory")["used_memory"] - before
        bucket_bytes, bucket_keys = memory_of(admin, "simhash:{ours}:b:*")
        map_bytes, _ = memory_of(admin, "simhash:{ours}:f")
        record_bytes, _ = memory_of(admin, "simhash:{ours}:r:*")
        await index.close()
        band = bucket_bytes + map_bytes
        print(f"  seed-style band sets: {seed_bytes / n:6.1f} B/record ({seed_keys:,} keys; INFO used_memory "
              f"{seed_used / n:6.1f} B/record)")
        print(f"  ours, band entries:   {band / n:6.1f} B/record = buckets {bucket_bytes / n:.1f} "
              f"({bucket_keys:,} keys) "
              f"+ fingerprint->id map {map_bytes / n:.1f}   ratio {band / seed_bytes:.2f} of seed-style")
        print(f"  ours, record store (no verification hashes, 1 URL): {record_bytes / n:6.1f} B/record; "
              f"INFO used_memory for everything {our_used / n:6.1f} B/record")
    finally:
        admin.close()


if __name__ == "__main__":
    asyncio.run(main())
