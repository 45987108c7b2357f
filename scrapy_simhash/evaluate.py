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
:func:`run_pipeline_decisions` replays those decisions and scores them per document.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Hashable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

from scrapy_simhash.calibration import random_candidate_fraction
from scrapy_simhash.fingerprint import Signature, jaccard_hashes, verification_hashes
from scrapy_simhash.index import Index, Record, open_index
from scrapy_simhash.layout import Layout

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
    def of(cls, predicted: Iterable[Hashable], truth: Iterable[Hashable]) -> Scores:
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
    """A corpus line reduced to what the evaluation needs: the content fields joined as the pipeline does."""

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
            except json.JSONDecodeError:
                obj = None
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


def _jaccard_from_counts(intersection: np.ndarray, size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
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
        similarity = _jaccard_from_counts(intersection[earlier], sizes[earlier], size)
        keep = similarity >= threshold
        pairs.update(((int(i), j), float(s)) for i, s in zip(earlier[keep], similarity[keep]))
    return pairs


@dataclass(frozen=True)
class Configuration:
    """One rule under test: its label (the SIMHASH_MAX_DISTANCE value), distance filter and layout."""

    label: str
    max_distance: int
    layout: Layout


@dataclass(frozen=True)
class IndexRun:
    """What the real index returned for every document, looked up before the document was added."""

    configuration: Configuration
    # (earlier, later) document positions -> (Hamming distance, Jaccard against the stored hashes)
    candidates: dict[tuple[int, int], tuple[int, float]]
    lookups: int
    seconds: float


@dataclass(frozen=True)
class Row:
    """One line of the evaluation table: a configuration at one Jaccard threshold."""

    configuration: Configuration
    threshold: float
    pairs: int
    scores: Scores  # candidates confirmed by Jaccard >= threshold, against the ground truth
    candidate_precision: float  # share of the returned candidates that are ground-truth pairs
    candidates_per_lookup: float
    random_fraction: float  # share of random indexed records a lookup reads, before the distance filter
    ms_per_document: float  # lookup and insert


async def run_index(
    configuration: Configuration, index: Index, documents: Sequence[Document], signatures: Sequence[Signature]
) -> IndexRun:
    """Look every document up in ``index``, then add it, in corpus order; empty content is never indexed."""
    candidates: dict[tuple[int, int], tuple[int, float]] = {}
    lookups = 0
    started = time.perf_counter()
    for j, (document, signature) in enumerate(zip(documents, signatures)):
        if signature.fingerprint == 0:  # empty content, as the pipeline skips it
            continue
        hashes = verification_hashes(signature.shingles)
        for found in await index.candidates(signature.fingerprint, configuration.max_distance):
            candidates[int(found.record_id), j] = (found.distance, jaccard_hashes(hashes, found.shingles))
        lookups += 1
        await index.add(Record(id=str(j), fingerprint=signature.fingerprint, url=document.url, shingles=hashes))
    return IndexRun(configuration, candidates, lookups, time.perf_counter() - started)


@asynccontextmanager
async def fresh_index(layout: Layout, redis_url: str | None = None) -> AsyncIterator[Index]:
    """An empty index that disappears afterwards: a temporary SQLite file, or on ``redis_url`` a key
    prefix of its own (``simhash-eval:{<random>}``) whose keys are deleted on exit."""
    if redis_url is None:
        with tempfile.TemporaryDirectory(prefix="simhash-eval-") as folder:
            index = open_index(f"sqlite:///{Path(folder) / 'index.sqlite3'}", layout=layout)
            try:
                yield index
            finally:
                await index.close()
        return
    prefix = f"simhash-eval:{{{uuid.uuid4().hex}}}"
    index = open_index(redis_url, layout=layout, key_prefix=prefix)
    try:
        yield index
    finally:
        await index.close()
        client = aioredis.Redis.from_url(redis_url)
        try:
            async for key in client.scan_iter(match=f"{prefix}*", count=1000):
                await client.unlink(key)
        finally:
            await client.aclose()


async def run_configuration(
    configuration: Configuration,
    documents: Sequence[Document],
    signatures: Sequence[Signature],
    redis_url: str | None = None,
) -> IndexRun:
    """:func:`run_index` on a :func:`fresh_index`."""
    async with fresh_index(configuration.layout, redis_url) as index:
        return await run_index(configuration, index, documents, signatures)


@dataclass(frozen=True)
class PipelineRun:
    """The pipeline's own decisions: only canonicals are indexed, so matches go through them."""

    configuration: Configuration
    threshold: float
    flagged: set[int]  # positions of the documents judged duplicates of an earlier canonical
    canonicals: int
    scores: Scores  # flagged documents against those with an earlier ground-truth near-duplicate


async def run_pipeline_decisions(
    configuration: Configuration,
    signatures: Sequence[Signature],
    truth: dict[tuple[int, int], float],
    threshold: float,
    redis_url: str | None = None,
) -> PipelineRun:
    """Decide each document as the pipeline does: ``check_and_add``, verify the candidates in order,
    the first with Jaccard >= ``threshold`` makes it a duplicate (not indexed); a document whose
    candidates all fail is added as a canonical. Scored per document: a document should be flagged
    when some earlier document (canonical or not) has Jaccard >= ``threshold`` with it."""
    flagged: set[int] = set()
    canonicals = 0
    async with fresh_index(configuration.layout, redis_url) as index:
        for j, signature in enumerate(signatures):
            if signature.fingerprint == 0:
                continue
            record = Record(id=str(j), fingerprint=signature.fingerprint, shingles=verification_hashes(signature.shingles))
            candidates = await index.check_and_add(record, configuration.max_distance)
            if any(jaccard_hashes(record.shingles, c.shingles) >= threshold for c in candidates):
                flagged.add(j)
                continue
            if candidates:
                await index.add(record)
            canonicals += 1
    should = {j for (_, j), similarity in truth.items() if similarity >= threshold}
    return PipelineRun(configuration, threshold, flagged, canonicals, Scores.of(flagged, should))


def format_pipeline_runs(runs: Sequence[PipelineRun]) -> str:
    lines = [
        f"{'distance':>8} {'J>=':>5} {'should':>6} {'flagged':>7} {'recall':>6} {'precision':>9} {'canonicals':>10}"
    ]
    for run in runs:
        s = run.scores
        lines.append(
            f"{run.configuration.label:>8} {run.threshold:>5.2f} {s.true_positives + s.false_negatives:>6} "
            f"{len(run.flagged):>7} {s.recall:>6.3f} {s.precision:>9.3f} {run.canonicals:>10}"
        )
    return "\n".join(lines)


def rows(run: IndexRun, truth: dict[tuple[int, int], float], thresholds: Sequence[float] = THRESHOLDS) -> list[Row]:
    """The evaluation of one index run at each threshold (``truth`` must reach down to the lowest)."""
    configuration = run.configuration
    random_fraction = random_candidate_fraction(configuration.layout)
    out = []
    for threshold in thresholds:
        true_pairs = {pair for pair, similarity in truth.items() if similarity >= threshold}
        confirmed = {pair for pair, (_, similarity) in run.candidates.items() if similarity >= threshold}
        returned = len(run.candidates)
        out.append(
            Row(
                configuration=configuration,
                threshold=threshold,
                pairs=len(true_pairs),
                scores=Scores.of(confirmed, true_pairs),
                candidate_precision=len(true_pairs.intersection(run.candidates)) / returned if returned else 1.0,
                candidates_per_lookup=returned / max(run.lookups, 1),
                random_fraction=random_fraction,
                ms_per_document=1000 * run.seconds / max(run.lookups, 1),
            )
        )
    return out


def format_rows(table: Sequence[Row]) -> str:
    """The evaluation table, one line per configuration and threshold."""
    lines = [
        f"{'distance':>8} {'dist':>4} {'J>=':>5} {'pairs':>6} {'found':>6} {'recall':>6} {'precision':>9} "
        f"{'cand.prec':>9} {'cand/lookup':>11} {'random@1M':>9} {'ms/doc':>6}  layout"
    ]
    for row in table:
        c = row.configuration
        lines.append(
            f"{c.label:>8} {c.max_distance:>4} {row.threshold:>5.2f} {row.pairs:>6} {row.scores.true_positives:>6} "
            f"{row.scores.recall:>6.3f} {row.scores.precision:>9.3f} {row.candidate_precision:>9.3f} "
            f"{row.candidates_per_lookup:>11.2f} {row.random_fraction * 1e6:>9,.0f} {row.ms_per_document:>6.2f}  "
            f"{c.layout!r}"
        )
    return "\n".join(lines)


def plot(table: Sequence[Row], path: str | Path) -> None:
    """Recall and candidates per lookup against the distance filter (needs the ``plot`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (recall_axes, cost_axes) = plt.subplots(1, 2, figsize=(11, 4))
    for threshold in sorted({row.threshold for row in table}):
        points = sorted((r.configuration.max_distance, r.scores.recall) for r in table if r.threshold == threshold)
        recall_axes.plot(*zip(*points), marker="o", label=f"J >= {threshold:.2f}")
    first = table[0].threshold
    costs = sorted(
        (r.configuration.max_distance, r.candidates_per_lookup, r.random_fraction * 1e6, r.configuration.label)
        for r in table
        if r.threshold == first
    )
    distances = [c[0] for c in costs]
    cost_axes.plot(distances, [c[1] for c in costs], marker="o", label="candidates per lookup (corpus)")
    cost_axes.plot(distances, [c[2] for c in costs], marker="s", label="records read per lookup at 1M random")
    for distance, _, random_reads, label in costs:
        cost_axes.annotate(label, (distance, random_reads), textcoords="offset points", xytext=(4, 4))
    recall_axes.set(xlabel="max distance", ylabel="recall", title="Recall (verified) against brute force")
    cost_axes.set(xlabel="max distance", ylabel="records", yscale="log", title="Cost per lookup")
    recall_axes.legend()
    cost_axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
