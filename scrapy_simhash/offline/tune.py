"""The Jaccard threshold that best separates a user's labelled pairs.

A labelled file has one JSON object per line: ``{"a": ..., "b": ..., "label": "duplicate" | "distinct"}``
where ``a`` and ``b`` are either an object with a ``text`` or a document id looked up in a corpus
(JSON lines with ``id`` and the content fields), and, from the review page, ``jaccard``: what the
crawl logged for the pair. A pair is predicted duplicate at T when its verification hashes have
Jaccard >= T: the pipeline's rule for a candidate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from scrapy_simhash.fingerprint import Fingerprinter, hamming, jaccard_hashes
from scrapy_simhash.mergelog import is_jaccard
from scrapy_simhash.offline.evaluate import Scores
from scrapy_simhash.offline.input_files import json_objects

logger = logging.getLogger(__name__)

LABELS = {"duplicate": True, "distinct": False}
#: Every threshold the recommendation considers.
GRID = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))


#: A pair whose texts score further than this from the Jaccard logged for it is not the pair compared.
LOGGED_TOLERANCE = 0.001


class Labelled(NamedTuple):
    """A labelled pair: its two texts, the label, and the Jaccard the crawl logged for it (if given)."""

    text_a: str
    text_b: str
    duplicate: bool
    logged: float | None = None


@dataclass(frozen=True)
class ScoredPair:
    """A labelled pair reduced to its scores (the distance is reported, the Jaccard decides)."""

    duplicate: bool
    distance: int
    jaccard: float
    logged: float | None = None

    @property
    def as_logged(self) -> bool:
        """The texts score what the crawl logged for them: the texts it compared."""
        return self.logged is not None and abs(self.jaccard - self.logged) <= LOGGED_TOLERANCE


@dataclass(frozen=True)
class Separation:
    """How well "Jaccard >= threshold" separates the labelled pairs."""

    threshold: float
    scores: Scores


def read_labelled(path: str | Path, texts: Mapping[str, str] | None = None) -> list[Labelled]:
    """A :class:`Labelled` per valid line; a line that cannot be used is logged and skipped."""

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
    for number, entry in json_objects(path):
        try:
            if entry.get("label") not in LABELS:
                raise ValueError(f"needs a label, one of {sorted(LABELS)}")
            logged = entry.get("jaccard")
            logged = float(logged) if is_jaccard(logged) else None
            pairs.append(Labelled(text(entry.get("a")), text(entry.get("b")), LABELS[entry["label"]], logged))
        except ValueError as exc:
            skipped += 1
            logger.warning("%(path)s:%(line)d: skipped: %(error)s", {"path": path, "line": number, "error": exc})
    if skipped:
        logger.warning("%(skipped)d lines of %(path)s were skipped", {"skipped": skipped, "path": path})
    return pairs


def score_pairs(pairs: Sequence[Labelled | tuple[str, str, bool]], fingerprinter: Fingerprinter) -> list[ScoredPair]:
    scored = []
    for pair in pairs:
        text_a, text_b, duplicate = pair[:3]
        logged = pair.logged if isinstance(pair, Labelled) else None
        a, b = fingerprinter.signature(text_a), fingerprinter.signature(text_b)
        distance, jaccard = hamming(a.fingerprint, b.fingerprint), jaccard_hashes(a.hashes, b.hashes)
        scored.append(ScoredPair(duplicate, distance, jaccard, logged))
    return scored


def separations(scored: Sequence[ScoredPair], thresholds: Sequence[float] = GRID) -> list[Separation]:
    """Precision, recall and F1 of "Jaccard >= T" for every T in ``thresholds``."""
    truth = {i for i, pair in enumerate(scored) if pair.duplicate}
    return [
        Separation(t, Scores.of({i for i, pair in enumerate(scored) if pair.jaccard >= t}, truth)) for t in thresholds
    ]


def recommend(rows: Sequence[Separation], current: float | None = None) -> Separation:
    """The threshold that separates best: highest F1, then highest precision; among those tied, the
    one closest to the ``current`` setting (no change without a gain), else the middle one (the
    widest margin on both sides)."""
    best = max((row.scores.f1, row.scores.precision) for row in rows)
    tied = sorted((row for row in rows if (row.scores.f1, row.scores.precision) == best), key=lambda r: r.threshold)
    if current is None:
        return tied[(len(tied) - 1) // 2]
    return min(tied, key=lambda row: (abs(row.threshold - current), row.threshold))


def format_separations(rows: Sequence[Separation]) -> str:
    lines = [f"{'jaccard':>7} {'precision':>9} {'recall':>6} {'f1':>6} {'tp':>5} {'fp':>5} {'fn':>5}"]
    for row in rows:
        s = row.scores
        lines.append(
            f"{row.threshold:>7.2f} {s.precision:>9.3f} {s.recall:>6.3f} {s.f1:>6.3f} "
            f"{s.true_positives:>5} {s.false_positives:>5} {s.false_negatives:>5}"
        )
    return "\n".join(lines)
