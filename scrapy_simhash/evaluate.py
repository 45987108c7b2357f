"""Recall and precision of the real index, measured against brute-force Jaccard ground truth.

Ground truth: every pair of documents whose shingle sets have Jaccard >= T, found exactly (an
inverted index of shingle hashes plus the size bound below prunes the work, never a pair).

A ground-truth pair (i, j), i earlier than j in corpus order, counts as *found* when the real index
(``open_index`` with the configuration under test), holding every document before j, returns i as a
candidate of j within ``max_distance`` bits, and Jaccard verification against the shingle hashes the
index stored for i confirms J >= T. Recall = found / ground-truth pairs; precision = confirmed pairs
that are ground-truth pairs / confirmed pairs. Every document is indexed here, so these are pair
figures; the pipeline indexes only canonicals, so a duplicate of a duplicate is caught through its
canonical (transitive clustering): it is missed when it is near the duplicate but not near the canonical.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

#: The Jaccard thresholds every evaluation table reports.
THRESHOLDS = (0.8, 0.85, 0.9, 0.95)


@dataclass(frozen=True)
class Scores:
    """Confusion counts of a set of predicted pairs against the true ones."""

    true_positives: int
    false_positives: int
    false_negatives: int

    @classmethod
    def of(cls, predicted: Iterable[tuple[int, int]], truth: Iterable[tuple[int, int]]) -> Scores:
        predicted, truth = set(predicted), set(truth)
        hits = len(predicted & truth)
        return cls(hits, len(predicted) - hits, len(truth) - hits)

    @property
    def precision(self) -> float:
        """1.0 when nothing is predicted: no claim was wrong."""
        claimed = self.true_positives + self.false_positives
        return self.true_positives / claimed if claimed else 1.0

    @property
    def recall(self) -> float:
        """1.0 when there is nothing to find."""
        present = self.true_positives + self.false_negatives
        return self.true_positives / present if present else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class Document:
    id: str
    url: str
    text: str


def read_documents(path: str | Path, fields: Sequence[str]) -> list[Document]:
    """JSON-lines documents, ``fields`` joined in order (absent fields are empty).

    A line that is not a JSON object is skipped, logged and counted, never silently lost.
    """
    documents: list[Document] = []
    skipped = 0
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                obj = exc
            if not isinstance(obj, dict):
                skipped += 1
                logger.warning("%(path)s:%(line)d: not a JSON object, skipped", {"path": path, "line": number})
                continue
            text = "\n".join(str(obj.get(field) or "") for field in fields)
            url = str(obj.get("url", ""))
            documents.append(Document(str(obj.get("id", url or number)), url, text))
    if skipped:
        logger.warning("%(skipped)d of the lines of %(path)s were skipped", {"skipped": skipped, "path": path})
    return documents


def jaccard_from_counts(intersection: np.ndarray, size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
    """The expression :func:`scrapy_simhash.fingerprint.jaccard_hashes` evaluates, vectorised."""
    return intersection / (size_a + size_b - intersection)


def ground_truth(shingle_sets: Sequence[np.ndarray], threshold: float) -> dict[tuple[int, int], float]:
    """Every pair ``(i, j)``, ``i < j``, of sorted distinct hash arrays with Jaccard >= ``threshold``.

    For each set B, an inverted index of hashes counts |A & B| for every earlier A sharing a hash, but
    only over the A that the size bound allows: J(A, B) <= min(|A|, |B|) / max(|A|, |B|), so a pair
    whose sizes differ by more than the threshold ratio cannot qualify and is never counted.
    Empty sets are left out (the index never holds empty content).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    sizes = np.array([len(s) for s in shingle_sets], dtype=np.int64)
    if sizes.sum() == 0:
        return {}
    owners = np.repeat(np.arange(len(sizes)), sizes)
    vocabulary, token_ids = np.unique(np.concatenate(shingle_sets), return_inverse=True)
    by_token = np.argsort(token_ids, kind="stable")  # postings: documents of each token, in order
    postings = owners[by_token]
    bounds = np.searchsorted(token_ids[by_token], np.arange(len(vocabulary) + 1))
    doc_starts = np.concatenate(([0], np.cumsum(sizes)))

    pairs: dict[tuple[int, int], float] = {}
    for j, size in enumerate(sizes):
        if not size:
            continue
        tokens = token_ids[doc_starts[j] : doc_starts[j + 1]]
        starts, lengths = bounds[tokens], bounds[tokens + 1] - bounds[tokens]
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        others = postings[offsets + np.arange(lengths.sum())]
        others = others[others < j]
        # Compared as correctly rounded quotients, like the Jaccard itself: fl(J) <= fl(min / max) holds.
        others = others[np.minimum(sizes[others], size) / np.maximum(sizes[others], size) >= threshold]
        if not len(others):
            continue
        intersection = np.bincount(others, minlength=j)
        earlier = np.flatnonzero(intersection)
        similarity = jaccard_from_counts(intersection[earlier], sizes[earlier], size)
        keep = similarity >= threshold
        pairs.update(((int(i), j), float(s)) for i, s in zip(earlier[keep], similarity[keep]))
    return pairs
