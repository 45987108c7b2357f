"""Sample records for index tests: random verification-hash sets and near copies of them."""

from __future__ import annotations

import asyncio
import multiprocessing
import random

import numpy as np

from scrapy_simhash.index import Record, open_index
from scrapy_simhash.minhash import Layout

LAYOUT = Layout(bands=16, rows=6, min_estimate=0.72)
ODD_IDS = ["a:b:c", "with space", "line\nbreak", "ünïcødé·id", "{tag}", "x" * 300]


def hashes(seed: int, count: int = 1200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.unique(rng.integers(0, 2**32, count, dtype=np.uint64)).astype(np.uint32)


def near(base: np.ndarray, jaccard: float, seed: int) -> np.ndarray:
    """A set with Jaccard ~``jaccard`` to ``base``: some of its hashes swapped for new ones."""
    rng = np.random.default_rng(seed)
    swap = round(len(base) * (1 - jaccard) / (1 + jaccard))
    kept = rng.choice(base, len(base) - swap, replace=False)
    return np.unique(np.concatenate([kept, rng.integers(0, 2**32, swap, dtype=np.uint64).astype(np.uint32)]))


def record(record_id: str, values: np.ndarray, **fields) -> Record:
    fields.setdefault("url", f"https://example.com/{record_id}")
    fields.setdefault("fingerprint", random.Random(record_id).getrandbits(64))
    return Record(id=record_id, hashes=values, **fields)


def with_sketch(record_id: str, layout: Layout, sketch: bytes) -> Record:
    """A record without verification hashes whose sketch is ``sketch``: band keys placed by hand."""
    r = record(record_id, hashes(0, count=0))
    r._sketch = (layout, sketch)
    return r


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def race(url: str, prefix: str, values: list[np.ndarray], start, finished, results) -> None:
    """One crawler process of a race: ingest ``values`` as the pipeline does, report what it added.
    Its session closes once every process is ``finished``: live crawls' pending records are canonicals,
    a closed session's are a crashed crawl's."""

    async def run() -> list[int]:
        index = open_index(url, layout=LAYOUT, key_prefix=prefix)
        await index.open()
        added = []
        start.wait()
        for i, v in enumerate(values):
            since = 0
            while True:  # the pipeline's loop: verification by the sketch alone is enough here
                lookup = await index.check_and_add(record(f"{multiprocessing.current_process().name}-{i}", v), since)
                if lookup.added or lookup.candidates[0].equal >= LAYOUT.size * 0.9:
                    break
                since = lookup.seq
            if lookup.added:
                added.append(i)
        finished.wait()
        await index.close()
        return added

    results.put(asyncio.run(run()))
