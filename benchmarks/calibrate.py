"""Choose the index layout for each Jaccard threshold and target recall, and write the table.

For a threshold T and a target recall R the layout (bands b x rows r, sketch bound E, sketch bytes
K >= b * r) is chosen from the model alone, so no choice depends on one corpus's pairs:

* P(candidate | J = T) >= R: a pair exactly at the threshold is found with probability R (pairs
  above it more often);
* background: b * (T / 4)**r <= 0.002: pages that share a quarter of what a duplicate shares (a
  site's leftover template, a common quotation) meet in some bucket at most 0.2 % of the time, so
  lookups stay short whatever the index size;
* near misses: a pair at J = T - 0.15 is a candidate at most 5 % of the time (each candidate
  costs a read of its data and a verification);
* then the fewest bands (each is a bucket read and a bucket write per new page's lookup, and a
  bucket entry per record); for each shape the smallest sketch that qualifies, b * r or more in steps
  of 16 bytes up to 256 (bytes past the bands sharpen the estimate that keeps near misses out, and
  cost a record as many bytes); the highest E, the fewest rows.

Each chosen layout is then measured on the shared corpus (its real sketches, every pair found by
brute force): pair recall at J >= 0.82 / 0.90 / 0.95, candidates per lookup and the share of them
that are true pairs at T. The table is what ``calibration.layout_for`` reads.

    python benchmarks/calibrate.py [--corpus PATH] [--out scrapy_simhash/calibration_table.json] [--thresholds 0.8,0.82]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import time
from pathlib import Path

import numpy as np

from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.minhash import Layout
from scrapy_simhash.offline.evaluate import ground_truth, read_documents
from scrapy_simhash.settings import DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus-scrapy-docs.jsonl"
THRESHOLDS = (0.6, 0.65, 0.7, 0.75, 0.8, 0.82, 0.85, 0.88, 0.9, 0.92, 0.95, 0.97, 0.99)
TARGETS = (0.9, 0.95, 0.99)
REPORTED = (0.82, 0.9, 0.95)
BACKGROUND_SHARE, BACKGROUND_BUDGET = 0.25, 0.002
NEAR_MISS, NEAR_MISS_BUDGET = 0.15, 0.05
MAX_BANDS = 48
SIZE_STEP, MAX_SKETCH = 16, 256


def choose(threshold: float, target: float) -> Layout:
    """The layout the rules in the module docstring pick (ValueError when none qualifies)."""
    for bands in range(4, MAX_BANDS + 1, 2):
        found = []
        for rows in range(3, 11):
            if bands * rows < 16 or bands * (BACKGROUND_SHARE * threshold) ** rows > BACKGROUND_BUDGET:
                continue
            longer = range(-(-bands * rows // SIZE_STEP) * SIZE_STEP, MAX_SKETCH + 1, SIZE_STEP)
            for size in dict.fromkeys([bands * rows, *longer]):
                layout = _highest_bound(bands, rows, size, threshold, target)
                if layout and layout.candidate_probability(threshold - NEAR_MISS) <= NEAR_MISS_BUDGET:
                    found.append(((layout.min_estimate, -rows), layout))
                    break
        if found:
            return max(found, key=lambda pair: pair[0])[1]
    raise ValueError(f"no layout reaches recall {target} at Jaccard {threshold}")


def _highest_bound(bands: int, rows: int, size: int, threshold: float, target: float) -> Layout | None:
    """The shape with the highest sketch bound (a step of 0.01, at most T) that still reaches the
    target, if any does: bisected, since a higher bound only finds less."""
    bounds = [b for b in (round(max(0.0, threshold - 0.4) + 0.01 * step, 2) for step in range(41)) if b <= threshold]
    best, low, high = None, 0, len(bounds) - 1
    while low <= high:
        middle = (low + high) // 2
        layout = Layout(bands, rows, bounds[middle], size)
        if layout.candidate_probability(threshold) >= target:
            best, low = layout, middle + 1
        else:
            high = middle - 1
    return best


def measure(layout: Layout, hashes: list[np.ndarray], truth: dict[tuple[int, int], float], threshold: float) -> dict:
    """Pair recall and candidates of ``layout`` on the corpus, every document indexed."""
    sketches = np.array([np.frombuffer(layout.sketch(h), np.uint8) for h in hashes])
    met: set[tuple[int, int]] = set()
    for band in range(layout.bands):
        buckets = collections.defaultdict(list)
        for i, row in enumerate(sketches[:, band * layout.rows : (band + 1) * layout.rows]):
            buckets[row.tobytes()].append(i)
        for members in buckets.values():
            met.update(itertools.combinations(members, 2))
    candidates = {p for p in met if np.count_nonzero(sketches[p[0]] == sketches[p[1]]) >= layout.min_equal}
    recall = {}
    for at in REPORTED:
        pairs = [p for p, j in truth.items() if j >= at]
        recall[str(at)] = round(sum(p in candidates for p in pairs) / len(pairs), 4) if pairs else 1.0
    true = sum(truth.get(p, 0.0) >= threshold for p in candidates)
    return {
        "recall": recall,
        "candidates_per_lookup": round(len(candidates) / len(hashes), 2),
        "candidate_precision": round(true / len(candidates), 3) if candidates else 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, default=ROOT / "scrapy_simhash" / "calibration_table.json")
    parser.add_argument("--thresholds", type=lambda s: [float(x) for x in s.split(",")], default=list(THRESHOLDS),
                        help="the thresholds calibrated (default: the table's; fewer write a partial table)")
    args = parser.parse_args()
    started = time.perf_counter()
    fields = DEFAULTS["SIMHASH_FIELDS"]
    documents = read_documents(args.corpus, fields)
    fingerprinter = Fingerprinter()
    hashes = [fingerprinter.signature(d.text).hashes for d in documents]
    truth = ground_truth(hashes, min(args.thresholds))
    print(
        f"{len(documents)} documents, {len(truth)} pairs with J >= {min(args.thresholds)} "
        f"({time.perf_counter() - started:.0f}s)"
    )
    rows, measured = [], {}
    print(
        f"{'J>=':>5} {'target':>6}  layout{'':14} {'P(T)':>6} {'P(T-.1)':>7}  "
        "recall .82/.90/.95  cand/lookup  cand.prec"
    )
    for threshold in args.thresholds:
        for target in TARGETS:
            try:
                layout = choose(threshold, target)
            except ValueError:
                print(f"{threshold:>5.2f} {target:>6.2f}  none qualifies (set SIMHASH_LAYOUT)")
                continue
            key = (layout, threshold)
            if key not in measured:
                measured[key] = measure(layout, hashes, truth, threshold)
            m = measured[key]
            row = {
                "jaccard_threshold": threshold,
                "target_recall": target,
                "layout": layout.as_dict(),
                "model_recall_at_threshold": round(layout.candidate_probability(threshold), 4),
                "model_near_miss": round(layout.candidate_probability(threshold - NEAR_MISS), 4),
                **m,
            }
            rows.append(row)
            print(
                f"{threshold:>5.2f} {target:>6.2f}  {layout.label:<20} "
                f"{row['model_recall_at_threshold']:>6.3f} {row['model_near_miss']:>7.3f}  "
                f"{'/'.join(f'{v:.4f}' for v in m['recall'].values())}  {m['candidates_per_lookup']:>11.2f}  "
                f"{m['candidate_precision']:>9.3f}",
                flush=True,
            )
    table = {
        "generated_by": "benchmarks/calibrate.py",
        "corpus": args.corpus.name,
        "documents": len(documents),
        "fingerprint": {"fields": fields, "shingle_width": 4, "weighting": "frequency"},
        "rows": rows,
    }
    args.out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"written to {args.out} ({time.perf_counter() - started:.0f}s)")


if __name__ == "__main__":
    main()
