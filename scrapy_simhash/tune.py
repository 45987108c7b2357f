"""Choose the Hamming distance and Jaccard threshold that best separate a user's labelled pairs.

A labelled file has one JSON object per line: ``{"a": ..., "b": ..., "label": "duplicate" | "distinct"}``
where ``a`` and ``b`` are either an object with a ``text`` or a document id looked up in a corpus
(JSON lines with ``id`` and the content fields). A pair is predicted duplicate under (d, T) when its
fingerprints are within d bits and its shingle Jaccard is >= T: the pipeline's rule for a candidate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scrapy_simhash.evaluate import Scores
from scrapy_simhash.fingerprint import Fingerprinter, hamming, jaccard_hashes

logger = logging.getLogger(__name__)

LABELS = {"duplicate": True, "distinct": False}
DISTANCES = tuple(range(0, 25))
THRESHOLDS = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))


@dataclass(frozen=True)
class ScoredPair:
    """A labelled pair reduced to its two scores."""

    duplicate: bool
    distance: int
    jaccard: float


@dataclass(frozen=True)
class Row:
    distance: int
    threshold: float
    scores: Scores


def read_labelled(
    path: str | Path, texts: Mapping[str, str] | None = None
) -> list[tuple[str, str, bool]]:
    """``(text_a, text_b, is_duplicate)`` per valid line; a line that cannot be used is logged and skipped."""

    def text(side: object) -> str:
        if isinstance(side, dict) and isinstance(side.get("text"), str):
            return side["text"]
        if isinstance(side, str):
            if texts is None:
                raise ValueError(f"document id {side!r} needs a corpus to look it up in")
            if side not in texts:
                raise ValueError(f"document id {side!r} is not in the corpus")
            return texts[side]
        raise ValueError("a side must be a document id or an object with a text")

    pairs, skipped = [], 0
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or entry.get("label") not in LABELS:
                    raise ValueError(f"needs a label, one of {sorted(LABELS)}")
                pairs.append((text(entry.get("a")), text(entry.get("b")), LABELS[entry["label"]]))
            except ValueError as exc:
                skipped += 1
                logger.warning("%(path)s:%(line)d: skipped: %(error)s", {"path": path, "line": number, "error": exc})
    if skipped:
        logger.warning("%(skipped)d lines of %(path)s were skipped", {"skipped": skipped, "path": path})
    return pairs


def score_pairs(pairs: Sequence[tuple[str, str, bool]], fingerprinter: Fingerprinter) -> list[ScoredPair]:
    scored = []
    for text_a, text_b, duplicate in pairs:
        a, b = fingerprinter.signature(text_a), fingerprinter.signature(text_b)
        distance = hamming(a.fingerprint, b.fingerprint)
        scored.append(ScoredPair(duplicate, distance, jaccard_hashes(a.shingles, b.shingles)))
    return scored


def grid(
    scored: Sequence[ScoredPair], distances: Sequence[int] = DISTANCES, thresholds: Sequence[float] = THRESHOLDS
) -> list[Row]:
    """Precision, recall and F1 of the rule (d, T) for every d in ``distances`` and T in ``thresholds``."""
    truth = {i for i, pair in enumerate(scored) if pair.duplicate}
    rows = []
    for d in distances:
        for t in thresholds:
            predicted = {i for i, pair in enumerate(scored) if pair.distance <= d and pair.jaccard >= t}
            rows.append(Row(d, t, Scores.of(predicted, truth)))
    return rows


def recommend(rows: Sequence[Row], current: float | None = None) -> Row:
    """The rule that separates best: highest F1, then highest precision. Among the thresholds tied
    on both, the one closest to the ``current`` setting (no change without a gain), else the middle
    one (the widest margin on both sides); then the smallest distance (the cheapest index)."""
    best = max((row.scores.f1, row.scores.precision) for row in rows)
    tied = [row for row in rows if (row.scores.f1, row.scores.precision) == best]
    thresholds = sorted({row.threshold for row in tied})
    if current is None:
        chosen = thresholds[(len(thresholds) - 1) // 2]
    else:
        chosen = min(thresholds, key=lambda t: (abs(t - current), t))
    return min((row for row in tied if row.threshold == chosen), key=lambda row: row.distance)


def format_rows(rows: Sequence[Row]) -> str:
    lines = [f"{'distance':>8} {'jaccard':>7} {'precision':>9} {'recall':>6} {'f1':>6} {'tp':>5} {'fp':>5} {'fn':>5}"]
    for row in rows:
        s = row.scores
        lines.append(
            f"{row.distance:>8} {row.threshold:>7.2f} {s.precision:>9.3f} {s.recall:>6.3f} {s.f1:>6.3f} "
            f"{s.true_positives:>5} {s.false_positives:>5} {s.false_negatives:>5}"
        )
    return "\n".join(lines)


def settings_lines(row: Row, auto_distance: int | None = None) -> str:
    """The lines to paste into a project's settings.py: ``"auto"`` when its calibrated distance
    (``auto_distance``, at this threshold) reaches the recommended one, since its layout keeps
    candidate lists short where pigeonhole blocks for a large distance would not."""
    if auto_distance is not None and auto_distance >= row.distance:
        distance = f'"auto"  # calibrated distance {auto_distance} covers the {row.distance} these pairs need'
    else:
        distance = str(row.distance)
    return f"SIMHASH_MAX_DISTANCE = {distance}\nSIMHASH_JACCARD_THRESHOLD = {row.threshold:.2f}"
