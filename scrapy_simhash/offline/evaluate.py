"""Recall and precision of the real index, measured against brute-force Jaccard ground truth.

Ground truth: every pair of documents whose verification hashes have Jaccard >= T, found exactly
(an inverted index plus a size bound prunes the work, never a pair).

Pair figures (:func:`run_pairs`): every document is indexed, in order; a ground-truth pair (i, j)
is *found* when the lookup of j returns i and Jaccard on the data the index stored for i confirms
J >= T. Item figures (:func:`run_items`): the pipeline's own decisions replayed
(:func:`scrapy_simhash.judge.place`: groups, findable members), in corpus order or a shuffled one;
a document should be flagged when some document before it in that order has J >= T with it.
"""

from __future__ import annotations

import logging
import random
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Hashable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scrapy_simhash.extract import BadFieldError, extract_text
from scrapy_simhash.fingerprint import Signature, jaccard_hashes
from scrapy_simhash.index import Index, Record, open_index
from scrapy_simhash.judge import place
from scrapy_simhash.minhash import Layout
from scrapy_simhash.offline.input_files import json_objects
from scrapy_simhash.offline.progress import progress
from scrapy_simhash.redis_url import sync_client

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


def read_documents(path: str | Path, fields: Sequence[str], keys: Counter[str] | None = None) -> list[Document]:
    """JSON-lines documents, their ``fields`` read as the pipeline reads an item's (HTML as text,
    absent fields skipped). ``id`` names a document, else ``url``, else its line number. ``keys``,
    when given, counts the objects that have each field, in the same pass: what a corpus holds, to
    say so when the fields SIMHASH_FIELDS names are not there."""
    documents = []
    for number, obj in json_objects(path):
        if keys is not None:
            keys.update(obj.keys())
        url = str(obj.get("url", ""))
        try:
            text = extract_text(obj, fields).text
        except BadFieldError as exc:
            logger.warning(
                "%(path)s:%(line)d: %(error)s, read as no text", {"path": path, "line": number, "error": exc}
            )
            text = ""
        documents.append(Document(str(obj.get("id", url or number)), url, text))
    return documents


def _recall(scores: Scores, width: int) -> str:
    """The recall column: "-" when there is nothing to find (the 1.0 of :attr:`Scores.recall` measures nothing)."""
    if scores.true_positives + scores.false_negatives == 0:
        return f"{'-':>{width}}"
    return f"{scores.recall:>{width}.3f}"


def _jaccard_from_counts(intersection: np.ndarray, size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
    """The expression :func:`scrapy_simhash.fingerprint.jaccard_hashes` evaluates, vectorised."""
    return intersection / (size_a + size_b - intersection)


def ground_truth(hash_sets: Sequence[np.ndarray], threshold: float) -> dict[tuple[int, int], float]:
    """Every pair ``(i, j)``, ``i < j``, of sorted distinct hash arrays (verification hashes) with
    Jaccard >= ``threshold``.

    For each set B, an inverted index of hashes counts |A & B| for every earlier A sharing a hash, but
    only over the A that the size bound allows: J(A, B) <= min(|A|, |B|) / max(|A|, |B|), so a pair
    whose sizes differ by more than the threshold ratio cannot qualify and is never counted.
    Empty sets are left out (the index never holds empty content).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    sizes = np.array([len(s) for s in hash_sets], dtype=np.int64)
    if sizes.sum() == 0:
        return {}
    owners = np.repeat(np.arange(len(sizes)), sizes)
    vocabulary, token_ids = np.unique(np.concatenate(hash_sets), return_inverse=True)
    by_token = np.argsort(token_ids, kind="stable")  # postings: documents of each token, in order
    postings = owners[by_token]
    bounds = np.searchsorted(token_ids[by_token], np.arange(len(vocabulary) + 1))
    doc_starts = np.concatenate(([0], np.cumsum(sizes)))

    pairs: dict[tuple[int, int], float] = {}
    for j, size in enumerate(progress(sizes, "brute-force Jaccard, documents")):
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
    """One rule under test: its label and the index layout."""

    label: str
    layout: Layout


@dataclass(frozen=True)
class PairRun:
    """What the real index returned for every document, looked up before the document was added."""

    configuration: Configuration
    # (earlier, later) document positions -> (Hamming distance, Jaccard against the stored data)
    candidates: dict[tuple[int, int], tuple[int, float]]
    lookups: int
    seconds: float


@dataclass(frozen=True)
class PairRow:
    """One line of the pair table: a configuration at one Jaccard threshold."""

    configuration: Configuration
    threshold: float
    pairs: int
    scores: Scores  # candidates confirmed by Jaccard >= threshold, against the ground truth
    candidate_precision: float  # share of the returned candidates that are ground-truth pairs
    candidates_per_lookup: float
    ms_per_document: float  # lookup and insert


@asynccontextmanager
async def fresh_index(layout: Layout, redis_url: str | None = None) -> AsyncIterator[Index]:
    """An empty, open index that disappears afterwards: a temporary SQLite file, or on ``redis_url``
    a key prefix of its own (``simhash-eval:{<random>}``) whose keys are deleted on exit."""
    if redis_url is None:
        with tempfile.TemporaryDirectory(prefix="simhash-eval-") as folder:
            index = open_index(f"sqlite:///{Path(folder) / 'index.sqlite3'}", layout=layout)
            await index.open()
            try:
                yield index
            finally:
                await index.close()
        return
    tag = uuid.uuid4().hex
    index = open_index(redis_url, layout=layout, key_prefix=f"simhash-eval:{{{tag}}}")
    await index.open()
    try:
        yield index
    finally:
        await index.close()
        client = sync_client(redis_url)
        try:
            for pattern in (f"simhash-eval:[{{]{tag}[}}]*", f"simhash-eval:{tag}:*"):
                for key in client.scan_iter(match=pattern, count=1000):
                    client.unlink(key)
        finally:
            client.close()


async def run_pairs(
    configuration: Configuration, signatures: Sequence[Signature], redis_url: str | None = None
) -> PairRun:
    """Look every document up, then add it as a canonical of its own, in corpus order; empty
    content is never indexed."""
    candidates: dict[tuple[int, int], tuple[int, float]] = {}
    lookups = 0
    started = time.perf_counter()
    async with fresh_index(configuration.layout, redis_url) as index:
        for j, signature in enumerate(progress(signatures, f"{configuration.label}: pairs, documents")):
            if signature.fingerprint == 0:
                continue
            record = Record(id=str(j), url="", fingerprint=signature.fingerprint, hashes=signature.hashes)
            lookup = await index.check_and_add(record)
            lookups += 1
            if lookup.added is not None:
                continue
            for candidate, data in zip(lookup.candidates, await index.details(lookup.candidates)):
                i = int(data.id)
                distance = (signatures[i].fingerprint ^ signature.fingerprint).bit_count()
                candidates[i, j] = (distance, jaccard_hashes(signature.hashes, data.hashes))
            await index.check_and_add(record, since=lookup.seq)  # nothing newer: added
    return PairRun(configuration, candidates, lookups, time.perf_counter() - started)


def pair_rows(
    run: PairRun, truth: dict[tuple[int, int], float], thresholds: Sequence[float] = THRESHOLDS
) -> list[PairRow]:
    """The evaluation of one index run at each threshold (``truth`` must reach down to the lowest)."""
    out = []
    for threshold in thresholds:
        true_pairs = {pair for pair, similarity in truth.items() if similarity >= threshold}
        confirmed = {pair for pair, (_, similarity) in run.candidates.items() if similarity >= threshold}
        returned = len(run.candidates)
        out.append(
            PairRow(
                configuration=run.configuration,
                threshold=threshold,
                pairs=len(true_pairs),
                scores=Scores.of(confirmed, true_pairs),
                candidate_precision=len(true_pairs.intersection(run.candidates)) / returned if returned else 1.0,
                candidates_per_lookup=returned / max(run.lookups, 1),
                ms_per_document=1000 * run.seconds / max(run.lookups, 1),
            )
        )
    return out


def format_pair_rows(table: Sequence[PairRow]) -> str:
    """The pair table, one line per configuration and threshold; no figure for a threshold without pairs."""
    lines = [
        f"{'layout':<24} {'J>=':>5} {'pairs':>6} {'found':>6} {'recall':>6} {'precision':>9} "
        f"{'cand.prec':>9} {'cand/lookup':>11} {'ms/doc':>6}"
    ]
    for row in table:
        lines.append(
            f"{row.configuration.label:<24} {row.threshold:>5.2f} {row.pairs:>6} {row.scores.true_positives:>6} "
            f"{_recall(row.scores, 6)} {row.scores.precision:>9.3f} {row.candidate_precision:>9.3f} "
            f"{row.candidates_per_lookup:>11.2f} {row.ms_per_document:>6.2f}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class ItemRun:
    """The pipeline's own decisions over one order of the documents."""

    configuration: Configuration
    order: str  # "corpus" or "shuffled (seed N)"
    threshold: float
    flagged: set[int]  # documents judged duplicates (joined a group)
    false_merges: int  # joined a record they are not a ground-truth pair with
    canonicals: int
    findable_members: int
    scores: Scores  # flagged documents against those with an earlier ground-truth near-duplicate


async def run_items(
    configuration: Configuration,
    signatures: Sequence[Signature],
    truth: dict[tuple[int, int], float],
    threshold: float,
    seed: int | None = None,
    redis_url: str | None = None,
) -> ItemRun:
    """Decide each document as the pipeline does, in corpus order (``seed`` None) or shuffled."""
    order = list(range(len(signatures)))
    if seed is not None:
        random.Random(seed).shuffle(order)
    position = {doc: at for at, doc in enumerate(order)}
    flagged: set[int] = set()
    false_merges = canonicals = findable = 0
    label = "corpus" if seed is None else f"shuffled (seed {seed})"
    async with fresh_index(configuration.layout, redis_url) as index:
        for doc in progress(order, f"{configuration.label}: decisions in {label} order, documents"):
            signature = signatures[doc]
            if signature.fingerprint == 0:
                continue
            record = Record(id=str(doc), url="", fingerprint=signature.fingerprint, hashes=signature.hashes)
            placement = await place(index, record, threshold)
            if placement.added is not None:
                canonicals += 1
                continue
            flagged.add(doc)
            findable += placement.joined.banded
            matched = int(placement.match.details.id)
            if truth.get((min(matched, doc), max(matched, doc)), 0.0) < threshold:
                false_merges += 1
    should = {
        later
        for (i, j), similarity in truth.items()
        if similarity >= threshold
        for later in ((j,) if position[i] < position[j] else (i,))
    }
    return ItemRun(
        configuration, label, threshold, flagged, false_merges, canonicals, findable, Scores.of(flagged, should)
    )


def format_item_runs(runs: Sequence[ItemRun]) -> str:
    lines = [
        f"{'layout':<24} {'order':<18} {'J>=':>5} {'should':>6} {'flagged':>7} {'recall':>6} {'false merges':>12} "
        f"{'canonicals':>10} {'findable members':>16}"
    ]
    for run in runs:
        s = run.scores
        should = s.true_positives + s.false_negatives
        lines.append(
            f"{run.configuration.label:<24} {run.order:<18} {run.threshold:>5.2f} {should:>6} {len(run.flagged):>7} "
            f"{_recall(s, 6)} {run.false_merges:>12} {run.canonicals:>10} {run.findable_members:>16}"
        )
    return "\n".join(lines)


def plot(runs: Sequence[PairRun], truth: dict[tuple[int, int], float], path: str | Path) -> None:
    """Each layout's modelled candidate probability against Jaccard, and the share of true pairs it
    found per Jaccard band (needs the ``plot`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    curve = np.linspace(min(truth.values(), default=0.5), 1.0, 100)
    edges = np.round(np.arange(0.5, 1.0001, 0.025), 3)
    for run in runs:
        layout = run.configuration.layout
        line = axes.plot(
            curve, [layout.candidate_probability(j) for j in curve], label=f"{run.configuration.label} (model)"
        )
        centres, found = [], []
        for low, high in zip(edges[:-1], edges[1:]):
            pairs = [pair for pair, j in truth.items() if low <= j < high or (high == 1.0 and j == 1.0)]
            if pairs:
                centres.append((low + high) / 2)
                found.append(sum(pair in run.candidates for pair in pairs) / len(pairs))
        axes.plot(centres, found, "o", color=line[0].get_color(), label=f"{run.configuration.label} (measured)")
    axes.set(xlabel="Jaccard of the pair", ylabel="share found as a candidate", title="Candidates against Jaccard")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
