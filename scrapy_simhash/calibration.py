"""The index layout a Jaccard threshold and a target recall call for, read from the measured table.

``calibration_table.json`` is written by ``benchmarks/calibrate.py``: for each threshold and target,
the MinHash layout whose model finds a pair exactly at the threshold with the target probability,
with short lookups whatever the index size, and its recall measured on the shared corpus.
Pure and fast: no corpus is read at crawl time.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from scrapy_simhash.minhash import Layout

__all__ = ["calibrated_layout", "layout_for"]

TABLE = "calibration_table.json"
_EXPECTED = "{'bands': B, 'rows': R, 'min_estimate': E}"


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads(resources.files("scrapy_simhash").joinpath(TABLE).read_text(encoding="utf-8"))


def calibrated_layout(jaccard_threshold: float, target_recall: float) -> dict[str, Any]:
    """The table row for a threshold and a target: the measured row at or below the threshold
    (a lower threshold's layout finds at least as much) and at or above the target."""
    rows = _table()["rows"]
    thresholds = sorted({row["jaccard_threshold"] for row in rows})
    targets = sorted({row["target_recall"] for row in rows})
    below = [t for t in thresholds if t <= jaccard_threshold + 1e-9]
    if not below:
        raise ValueError(
            f"SIMHASH_JACCARD_THRESHOLD = {jaccard_threshold}: the layout is calibrated for thresholds "
            f"from {thresholds[0]}; set SIMHASH_LAYOUT explicitly"
        )
    above = [t for t in targets if t >= target_recall - 1e-9]
    if not above:
        raise ValueError(f"SIMHASH_TARGET_RECALL = {target_recall}: calibrated up to {targets[-1]}")
    for row in rows:
        if row["jaccard_threshold"] == below[-1] and row["target_recall"] == above[0]:
            return row
    raise ValueError(
        f"SIMHASH_TARGET_RECALL = {target_recall}: no calibrated layout reaches it at Jaccard {below[-1]} "
        "(lookups would grow with the index); lower the target or set SIMHASH_LAYOUT"
    )


def layout_for(jaccard_threshold: float, target_recall: float, explicit: dict[str, Any] | None = None) -> Layout:
    """``SIMHASH_LAYOUT`` when given, else the calibrated layout."""
    if explicit is not None:
        try:
            return Layout.from_dict(explicit)
        except KeyError as exc:
            raise ValueError(f"SIMHASH_LAYOUT = {explicit!r}: missing {exc}; expected {_EXPECTED}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"SIMHASH_LAYOUT = {explicit!r}: {exc}; expected {_EXPECTED}") from None
    return Layout.from_dict(calibrated_layout(jaccard_threshold, target_recall)["layout"])
