"""Records read per lookup, measured on the real index, against the calibration's exact prediction.

Fills a temporary SQLite index (``open_index`` with the layout under test) with random fingerprints,
then looks up other random fingerprints with no distance filter (max distance 64), so every record
sharing a probed bucket comes back. The share of the index returned is compared with
``random_candidate_fraction(layout)``, and the calibrated layout with 4 pigeonhole blocks
(``SIMHASH_MAX_DISTANCE = 3``) measured in the same run.

    python benchmarks/candidates.py [--records 100000] [--lookups 200] [--threshold 0.82]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from scrapy_simhash.calibration import calibrate, random_candidate_fraction
from scrapy_simhash.evaluate import fresh_index
from scrapy_simhash.index import Record
from scrapy_simhash.layout import BlockLayout, Layout


async def measure(layout: Layout, records: int, lookups: int) -> tuple[float, float]:
    """(mean records returned per lookup, seconds per lookup)."""
    rng = np.random.default_rng(7)
    stored = rng.integers(1, 2**64, size=records, dtype=np.uint64, endpoint=False)
    queries = rng.integers(1, 2**64, size=lookups, dtype=np.uint64, endpoint=False)
    async with fresh_index(layout) as index:
        for i, fingerprint in enumerate(stored):
            await index.add(Record(id=str(i), fingerprint=int(fingerprint)))
        started = time.perf_counter()
        returned = [len(await index.candidates(int(query), 64)) for query in queries]
        return float(np.mean(returned)), (time.perf_counter() - started) / lookups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--lookups", type=int, default=200)
    parser.add_argument("--threshold", type=float, default=0.82, help="SIMHASH_JACCARD_THRESHOLD for auto")
    args = parser.parse_args()
    layouts = {
        "baseline (4 blocks)": BlockLayout(bands=4),
        f"auto at {args.threshold}": calibrate(args.threshold).layout,
    }
    print(f"{args.records:,} random records, {args.lookups} random lookups, no distance filter")
    baseline = None
    for name, layout in layouts.items():
        started = time.perf_counter()
        mean, seconds = asyncio.run(measure(layout, args.records, args.lookups))
        predicted = random_candidate_fraction(layout)
        baseline = baseline or mean
        print(
            f"{name}: {mean:,.1f} records per lookup = {mean / args.records:.4%} of the index "
            f"(predicted {predicted:.4%}, measured/predicted {mean / args.records / predicted:.3f}; "
            f"{mean / baseline:.1f}x baseline), {1000 * seconds:.2f} ms per lookup, "
            f"{time.perf_counter() - started:.0f}s | {layout!r}"
        )


if __name__ == "__main__":
    main()
