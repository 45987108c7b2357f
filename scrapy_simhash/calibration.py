"""``SIMHASH_MAX_DISTANCE = "auto"``: the distance and index layout a Jaccard threshold needs.

A Jaccard threshold implies a Hamming distance (near-duplicate pairs drift apart by roughly
64 * angle / pi bits), so "3 bits, then Jaccard 0.82" throws away most of what the Jaccard check would
accept. :func:`calibrate` reads the committed table ``calibration_table.json``, measured on real
documents by ``benchmarks/calibrate.py``: for each Jaccard threshold and target recall, the layout
(pigeonhole blocks or sampled-bit tables) and maximum distance with the highest measured recall whose
random candidate rate stays within the budget (0.5% of the indexed records per lookup); when no layout
within the budget reaches the target, the one that reaches it with the fewest candidates; when none
reaches it at all, the one with the highest recall. Pure and fast: no corpus is read at crawl time.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from math import comb
from typing import Any

from scrapy_simhash.layout import Layout, make_layout

logger = logging.getLogger(__name__)

TABLE = "calibration_table.json"


@dataclass(frozen=True)
class Calibration:
    """What ``auto`` chose for a (Jaccard threshold, target recall) and what it measured."""

    jaccard_threshold: float  # the table row used (the largest measured threshold <= the asked one)
    target_recall: float  # the table row used (the smallest measured target >= the asked one)
    max_distance: int
    layout: Layout
    recall: dict[float, float]  # measured recall at J >= each threshold of the calibration corpus
    candidate_fraction: float  # share of random indexed records a lookup reads, before the distance filter
    meets_target: bool
    within_budget: bool


def random_candidate_fraction(layout: Layout, max_distance: int | None = None) -> float:
    """Share of an index of random fingerprints that one lookup reads: the layout's exact collision
    odds over the Binomial(bits, 1/2) distance of random pairs (within ``max_distance`` if given)."""
    bits = layout.bits
    top = bits if max_distance is None else max_distance
    return sum(comb(bits, d) * layout.collision_probability(d) for d in range(top + 1)) / 2**bits


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads(resources.files("scrapy_simhash").joinpath(TABLE).read_text(encoding="utf-8"))


@lru_cache(maxsize=64)
def calibrate(jaccard_threshold: float, target_recall: float = 0.95) -> Calibration:
    """The calibrated layout and max distance; ``ValueError`` outside the measured range."""
    table = _table()
    thresholds = sorted({row["jaccard_threshold"] for row in table["rows"]})
    targets = sorted({row["target_recall"] for row in table["rows"]})
    below = [t for t in thresholds if t <= jaccard_threshold + 1e-9]
    if not below or jaccard_threshold > 1.0:
        raise ValueError(
            f"SIMHASH_MAX_DISTANCE='auto' is calibrated for Jaccard thresholds {thresholds[0]}..1.0, "
            f"not {jaccard_threshold}: set SIMHASH_MAX_DISTANCE explicitly"
        )
    above = [t for t in targets if t >= target_recall - 1e-9]
    if not above:
        raise ValueError(f"SIMHASH_TARGET_RECALL is calibrated up to {targets[-1]}, not {target_recall}")
    row = next(r for r in table["rows"] if r["jaccard_threshold"] == below[-1] and r["target_recall"] == above[0])
    calibration = Calibration(
        jaccard_threshold=row["jaccard_threshold"],
        target_recall=row["target_recall"],
        max_distance=row["max_distance"],
        layout=make_layout(row["max_distance"], **row["layout"]),
        recall={float(t): r for t, r in row["recall"].items()},
        candidate_fraction=row["candidate_fraction"],
        meets_target=row["meets_target"],
        within_budget=row["within_budget"],
    )
    if not calibration.meets_target:
        logger.warning(
            "no measured layout reaches recall %(target).2f at Jaccard >= %(threshold).2f; using %(layout)r",
            {"target": target_recall, "threshold": jaccard_threshold, "layout": calibration.layout},
        )
    elif not calibration.within_budget:
        logger.warning(
            "recall %(target).2f at Jaccard >= %(threshold).2f needs %(fraction).2f%% of the index as "
            "candidates per lookup, over the %(budget).2f%% budget",
            {
                "target": target_recall,
                "threshold": jaccard_threshold,
                "fraction": 100 * calibration.candidate_fraction,
                "budget": 100 * table["candidate_budget"],
            },
        )
    return calibration
