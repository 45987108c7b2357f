"""Measure the calibration table behind ``SIMHASH_MAX_DISTANCE = "auto"`` and write it.

For every candidate layout (pigeonhole blocks with and without multi-probe, sampled-bit tables of r
bits x L tables) and every Jaccard threshold T, on the shared corpus fingerprinted with the default
settings:

* recall(T, d): share of the brute-force pairs with Jaccard >= T that the layout's buckets bring
  together *and* that lie within d bits. Two figures: measured with the layout's own key positions
  (seed 0, the shipped layout) and expected over seeds (each table's collision odds at the pair's
  distance, tables independent; blocks: the layout's exact odds). The table uses the smaller one,
  so no layout is chosen because its seed happened to suit this corpus.
* candidate fraction: the share of an index of random fingerprints a lookup reads (before the
  distance filter), exact from the layout's collision odds over the Binomial(64, 1/2) distance of
  random pairs; for the chosen layouts also simulated with 1,000,000 random fingerprints through
  the key masks.

Sampled layouts take the smallest d that loses at most 0.001 recall against no distance filter; block
layouts take their guaranteed distance. Per (T, target recall) the table keeps the layout with the
highest recall within the candidate budget among those reaching the target (ties: fewer tables, then
fewer probes), else the one reaching the target with the fewest candidates, else the highest recall
(the target comes before the budget).

    python benchmarks/calibrate.py [--corpus PATH] [--out scrapy_simhash/calibration_table.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass
from math import comb
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

from scrapy_simhash.calibration import random_candidate_fraction
from scrapy_simhash.evaluate import fresh_index, ground_truth, read_documents
from scrapy_simhash.fingerprint import Fingerprinter, verification_hashes
from scrapy_simhash.index import Record
from scrapy_simhash.index.codec import encode_hashes
from scrapy_simhash.layout import BlockLayout, Layout, make_layout
from scrapy_simhash.settings import DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
BITS = 64
THRESHOLDS = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))
TARGETS = (0.9, 0.95, 0.97, 0.98, 0.99)
REPORT_THRESHOLDS = (0.8, 0.82, 0.85, 0.9, 0.95)
CANDIDATE_BUDGET = 0.005
DISTANCE_SLACK = 0.001
SIMULATED_RECORDS = 1_000_000
RANDOM_RECORDS = 100_000
# The Redis backend keeps a bucket member's residual bits as a Lua double: keys need >= 64 - 53 bits.
MIN_KEY_BITS = 11


def candidate_specs() -> list[dict]:
    """make_layout keyword sets worth measuring; ones the layout module refuses are skipped."""
    specs = [{"kind": "blocks", "bands": b, "multiprobe": mp} for b in range(2, 17) for mp in (False, True)]
    specs += [
        {"kind": "sampled", "tables": tables, "bits_per_table": r, "seed": 0, "multiprobe": mp}
        for r in range(MIN_KEY_BITS, 25)
        for tables in range(1, 41)
        for mp in (False, True)
    ]
    return specs


def build(spec: dict) -> tuple[Layout, int] | None:
    """The layout and the distance filter it comes with (blocks: their guarantee), or None if refused
    by the layout module or by a backend (Redis keeps at most 53 residual bits)."""
    try:
        if spec["kind"] == "blocks":
            probe = BlockLayout(bits=BITS, bands=spec["bands"], multiprobe=spec["multiprobe"])
            built = make_layout(probe.guaranteed_distance, **spec), probe.guaranteed_distance
        else:
            built = make_layout(0, **spec), -1
    except ValueError:
        return None
    layout = built[0]
    return built if min(len(layout.key_positions(t)) for t in range(layout.tables)) >= MIN_KEY_BITS else None


def slack(layout: Layout) -> int:
    """How many key bits may differ in a table that still collides (multi-probe flips one)."""
    return 1 if layout.multiprobe else 0


def key_masks(layout: Layout) -> np.ndarray:
    return np.array([sum(1 << p for p in layout.key_positions(t)) for t in range(layout.tables)], dtype=np.uint64)


def collides(layout: Layout, xor: np.ndarray) -> np.ndarray:
    """Whether the layout's buckets bring together pairs whose fingerprints differ by ``xor``."""
    hit = np.zeros(len(xor), dtype=bool)
    for mask in key_masks(layout):
        hit |= np.bitwise_count(xor & mask) <= slack(layout)
    return hit


def expected_collision(layout: Layout) -> np.ndarray:
    """P(collide | distance d) for d = 0..64, averaged over seeds for sampled tables."""
    if isinstance(layout, BlockLayout):
        return np.array([layout.collision_probability(d) for d in range(BITS + 1)])
    miss = np.ones(BITS + 1)
    for t in range(layout.tables):
        r = len(layout.key_positions(t))
        per_table = [
            sum(comb(r, k) * comb(BITS - r, d - k) for k in range(slack(layout) + 1) if d >= k) / comb(BITS, d)
            for d in range(BITS + 1)
        ]
        miss *= 1 - np.array(per_table)
    return 1 - miss


def simulated_random_fraction(layout: Layout, records: int = SIMULATED_RECORDS) -> float:
    """Share of ``records`` random fingerprints a lookup of a random fingerprint reads."""
    rng = np.random.default_rng(0)
    fingerprints = rng.integers(0, 2**64, size=records, dtype=np.uint64, endpoint=False)
    query = rng.integers(0, 2**64, dtype=np.uint64, endpoint=False)
    return float(collides(layout, fingerprints ^ query).mean())


async def redis_bytes(url: str, layout: Layout, fingerprints: np.ndarray) -> float:
    """Growth of the Redis server's used_memory per record added through the real index, without a
    verification blob. Use a server of your own: other clients' writes would count too."""
    client = aioredis.Redis.from_url(url)
    try:
        async with fresh_index(layout, url) as index:
            await index.count()
            before = (await client.info("memory"))["used_memory"]
            for i, fingerprint in enumerate(fingerprints):
                await index.add(Record(id=f"r{i}", fingerprint=int(fingerprint)))
            after = (await client.info("memory"))["used_memory"]
    finally:
        await client.aclose()
    return (after - before) / len(fingerprints)


def report_redis_bytes(url: str, layouts: dict[str, Layout], signatures: list) -> None:
    """Redis bytes per record of each layout at RANDOM_RECORDS random fingerprints, against 4 pigeonhole
    blocks measured in the same run; plus the verification blob, the same for every layout."""
    rng = np.random.default_rng(1)
    fingerprints = rng.integers(1, 2**63, size=RANDOM_RECORDS, dtype=np.int64).astype(np.uint64)
    blob = np.mean([len(encode_hashes(verification_hashes(s.shingles))) for s in signatures])
    baseline_layout = BlockLayout(bits=BITS, bands=4)
    by_layout = {repr(baseline_layout): (baseline_layout, ["baseline: distance 3"])}
    for name, layout in layouts.items():
        by_layout.setdefault(repr(layout), (layout, []))[1].append(name)
    print(f"Redis bytes per record at {RANDOM_RECORDS:,} random records (record + band entries, no verification blob); "
          f"the corpus's verification blobs add {blob:,.0f} bytes per record on average")
    baseline = None
    for layout, names in by_layout.values():
        measured = asyncio.run(redis_bytes(url, layout, fingerprints))
        baseline = baseline or measured
        print(f"  {measured:,.0f} bytes ({measured / baseline:.2f}x baseline) | {layout!r} | {', '.join(names)}")


@dataclass
class Measured:
    """A layout's cumulative recall curves: ``measured[t][d]`` / ``expected[t][d]`` at J >= t within d bits."""

    spec: dict
    layout: Layout
    fixed_distance: int  # blocks: the guaranteed distance; -1: chosen per threshold
    measured: dict[float, np.ndarray]
    expected: dict[float, np.ndarray]
    candidate_fraction: float
    probes: int

    def recall(self, threshold: float, distance: int) -> float:
        return float(min(self.measured[threshold][distance], self.expected[threshold][distance]))

    def distance_for(self, threshold: float) -> int:
        if self.fixed_distance >= 0:
            return self.fixed_distance
        score = np.minimum(self.measured[threshold], self.expected[threshold])
        return min(int(np.argmax(score >= score[-1] - DISTANCE_SLACK)), BITS - 1)

    def recall_for(self, threshold: float) -> float:
        return self.recall(threshold, self.distance_for(threshold))


def measure(spec: dict, xor: np.ndarray, distances: np.ndarray, masks: dict[float, np.ndarray]) -> Measured | None:
    built = build(spec)
    if built is None:
        return None
    layout, fixed_distance = built
    hit = collides(layout, xor)
    odds = expected_collision(layout)
    measured, expected = {}, {}
    for threshold, mask in masks.items():
        total = max(int(mask.sum()), 1)
        measured[threshold] = np.cumsum(np.bincount(distances[mask & hit], minlength=BITS + 1)) / total
        weights = odds[distances[mask]]
        expected[threshold] = np.cumsum(np.bincount(distances[mask], weights=weights, minlength=BITS + 1)) / total
    fraction = random_candidate_fraction(layout)
    return Measured(spec, layout, fixed_distance, measured, expected, fraction, len(layout.probe_keys(0)))


def choose(options: list[Measured], threshold: float, target: float) -> tuple[Measured, bool, bool]:
    """(layout, meets target, within budget) by the rule in the module docstring."""
    reach = [m for m in options if m.recall_for(threshold) >= target]
    affordable = [m for m in reach if m.candidate_fraction <= CANDIDATE_BUDGET]
    if affordable:
        best = max(affordable, key=lambda m: (round(m.recall_for(threshold), 4), -m.layout.tables, -m.probes))
        return best, True, True
    if reach:
        return min(reach, key=lambda m: (m.candidate_fraction, m.layout.tables)), True, False
    best = max(options, key=lambda m: (round(m.recall_for(threshold), 4), -m.candidate_fraction))
    return best, False, best.candidate_fraction <= CANDIDATE_BUDGET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=ROOT.parent / "shared" / "corpus-scrapy-docs.jsonl", type=Path)
    parser.add_argument("--out", default=ROOT / "scrapy_simhash" / "calibration_table.json", type=Path)
    parser.add_argument("--redis-url", help="also measure Redis bytes per record there (a server of your own)")
    args = parser.parse_args()

    started = time.perf_counter()
    fields = DEFAULTS["SIMHASH_FIELDS"]
    fingerprinter = Fingerprinter(width=DEFAULTS["SIMHASH_SHINGLE_WIDTH"], weighting=DEFAULTS["SIMHASH_WEIGHTING"])
    signatures = [fingerprinter.signature(doc.text) for doc in read_documents(args.corpus, fields)]
    truth = ground_truth([s.shingles for s in signatures], THRESHOLDS[0])
    fingerprints = np.array([s.fingerprint for s in signatures], dtype=np.uint64)
    pairs = np.array(list(truth), dtype=np.int64).reshape(-1, 2)
    similarity = np.array(list(truth.values()))
    xor = fingerprints[pairs[:, 0]] ^ fingerprints[pairs[:, 1]]
    distances = np.bitwise_count(xor).astype(np.int64)
    masks = {t: similarity >= t for t in THRESHOLDS}
    print(f"{len(signatures)} documents, {len(truth)} pairs with Jaccard >= {THRESHOLDS[0]} "
          f"({time.perf_counter() - started:.1f}s)")

    options = [m for spec in candidate_specs() if (m := measure(spec, xor, distances, masks)) is not None]
    print(f"{len(options)} layouts measured ({time.perf_counter() - started:.1f}s)")

    rows, checked = [], {}
    for threshold in THRESHOLDS:
        for target in TARGETS:
            best, meets, within = choose(options, threshold, target)
            key = repr(best.layout)
            if key not in checked:
                checked[key] = simulated_random_fraction(best.layout)
            distance = best.distance_for(threshold)
            rows.append({
                "jaccard_threshold": threshold,
                "target_recall": target,
                "max_distance": distance,
                "layout": best.spec,
                "recall": {str(t): round(best.recall(t, distance), 4) for t in REPORT_THRESHOLDS if t >= threshold},
                "measured_recall": round(float(best.measured[threshold][distance]), 4),
                "expected_recall": round(float(best.expected[threshold][distance]), 4),
                "candidate_fraction": round(best.candidate_fraction, 6),
                "simulated_candidate_fraction": round(checked[key], 6),
                "probes": best.probes,
                "tables": best.layout.tables,
                "meets_target": meets,
                "within_budget": within,
            })
    table = {
        "generated_by": "benchmarks/calibrate.py",
        "corpus": args.corpus.name,
        "documents": len(signatures),
        "fingerprint": {"fields": fields, "shingle_width": fingerprinter.width, "weighting": fingerprinter.weighting},
        "candidate_budget": CANDIDATE_BUDGET,
        "rows": rows,
    }
    with args.out.open("w", encoding="utf-8") as out:
        out.write("{\n")
        for name, value in table.items():
            if name != "rows":
                out.write(f"  {json.dumps(name)}: {json.dumps(value)},\n")
        out.write('  "rows": [\n' + ",\n".join("    " + json.dumps(r) for r in rows) + "\n  ]\n}\n")
    print(f"wrote {args.out} ({time.perf_counter() - started:.1f}s)\n")

    print(
        "target 0.95 | J >= T | layout | max distance | recall measured / expected | "
        "candidates at 1M (exact, simulated) | probes"
    )
    for row in rows:
        if row["target_recall"] == 0.95 and row["jaccard_threshold"] in REPORT_THRESHOLDS:
            print(
                f"{row['jaccard_threshold']:.2f} | {row['layout']} | {row['max_distance']} | "
                f"{row['measured_recall']:.4f} / {row['expected_recall']:.4f} | "
                f"{row['candidate_fraction']:.4%} ({row['candidate_fraction'] * 1e6:,.0f}), "
                f"{row['simulated_candidate_fraction']:.4%} | {row['probes']}"
            )
    if args.redis_url:
        chosen = {
            f"J >= {row['jaccard_threshold']:.2f}": make_layout(row["max_distance"], **row["layout"])
            for row in rows
            if row["target_recall"] == 0.95 and row["jaccard_threshold"] in REPORT_THRESHOLDS
        }
        print()
        report_redis_bytes(args.redis_url, chosen, signatures)


if __name__ == "__main__":
    main()
