"""Evaluation maths on hand-made corpora, the real index run, and ``simhash-eval`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest
import redis

from samples import LAYOUT, hashes, near
from texts import article, edited

from scrapy_simhash.calibration import layout_for
from scrapy_simhash.fingerprint import Signature, jaccard_hashes
from scrapy_simhash.offline.evaluate import (
    Configuration,
    Scores,
    ground_truth,
    pair_rows,
    plot,
    read_documents,
    run_items,
    run_pairs,
)
from scrapy_simhash.settings import DEFAULTS

CONFIGURATION = Configuration("16x6>=0.72", LAYOUT)


def _set(*values: int) -> np.ndarray:
    """Verification hashes: sorted distinct uint32."""
    return np.array(sorted(set(values)), dtype=np.uint32)


def test_scores_count_pairs_by_hand() -> None:
    scores = Scores.of({(0, 1), (0, 2), (1, 3)}, {(0, 1), (1, 3), (2, 3), (0, 3)})
    assert (scores.true_positives, scores.false_positives, scores.false_negatives) == (2, 1, 2)
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(1 / 2)
    assert scores.f1 == pytest.approx(4 / 7)  # 2 * (2/3) * (1/2) / (2/3 + 1/2)


def test_scores_of_empty_sets() -> None:
    nothing_claimed = Scores.of(set(), {(0, 1)})
    assert (nothing_claimed.precision, nothing_claimed.recall, nothing_claimed.f1) == (1.0, 0.0, 0.0)
    nothing_to_find = Scores.of({(0, 1)}, set())
    assert (nothing_to_find.precision, nothing_to_find.recall) == (0.0, 1.0)


def test_ground_truth_by_hand() -> None:
    sets = [
        _set(1, 2, 3, 4),  # 0
        _set(1, 2, 3, 4, 5),  # 1: J(0, 1) = 4/5
        _set(1, 2, 3),  # 2: J(0, 2) = 3/4, J(1, 2) = 3/5
        _set(10, 11),  # 3: shares nothing
        _set(),  # 4: empty content never pairs, not even with another empty set
        _set(),  # 5
    ]
    assert ground_truth(sets, 0.75) == {(0, 1): 0.8, (0, 2): 0.75}
    assert ground_truth(sets, 0.8) == {(0, 1): 0.8}
    assert ground_truth(sets, 0.6) == {(0, 1): 0.8, (0, 2): 0.75, (1, 2): 0.6}


def test_size_pruning_keeps_a_pair_exactly_at_the_threshold() -> None:
    """7 of 10 shared: J is exactly 0.7, while 0.7 * 10 rounds to 7.000000000000001 in floating point."""
    assert ground_truth([_set(*range(7)), _set(*range(10))], 0.7) == {(0, 1): 0.7}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruned_ground_truth_equals_the_naive_all_pairs_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = [rng.choice(400, size=rng.integers(5, 60), replace=False) for _ in range(12)]
    sets = []
    for _ in range(80):  # near copies of a few bases (small edits) plus unrelated sets
        source = base[rng.integers(len(base))] if rng.random() < 0.8 else rng.choice(400, size=30, replace=False)
        edit = rng.choice([0.0, 0.05, 0.1, 0.3])  # share of elements dropped, and as many added
        kept = source[rng.random(len(source)) >= edit]
        added = rng.choice(400, size=int(edit * len(source)))
        sets.append(np.unique(np.concatenate([kept, added]).astype(np.uint64)))
    for threshold in (0.5, 0.7, 0.8, 0.9, 1.0):
        naive = {
            (i, j): jaccard_hashes(sets[i], sets[j])
            for i, j in combinations(range(len(sets)), 2)
            if jaccard_hashes(sets[i], sets[j]) >= threshold
        }
        assert ground_truth(sets, threshold) == naive
        assert naive, "the random corpus must hold pairs at every threshold for this test to mean anything"


def test_read_documents_reads_fields_as_the_pipeline_does_and_skips_bad_lines(tmp_path, caplog) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"id": "a", "url": "u", "title": "T", "body": "<p>B</p>"}\nnot json\n[1]\n\n{"url": "v"}\n'
        '{"id": "w", "body": {"not": "text"}}\n'
    )
    documents = read_documents(path, ["title", "body"])
    assert [(d.id, d.url, d.text) for d in documents] == [("a", "u", "T\n\nB"), ("v", "v", ""), ("w", "", "")]
    assert "2 entries" in caplog.text and "holds dict" in caplog.text


def _chain() -> list[Signature]:
    """A page drifting in three steps: each near the one before, the last far from the first; then a
    copy of the first, and a page of its own, and an empty one (never indexed)."""
    a = hashes(1)
    b = near(a, 0.85, seed=2)
    c = near(b, 0.85, seed=3)
    return [Signature(1, a), Signature(2, b), Signature(3, c), Signature(4, a), Signature(5, hashes(9)),
            Signature(0, np.empty(0, np.uint32))]


async def test_pairs_of_the_real_index_by_hand() -> None:
    signatures = _chain()
    truth = ground_truth([s.hashes for s in signatures], 0.8)
    assert set(truth) == {(0, 1), (1, 2), (0, 3), (1, 3)}
    run = await run_pairs(CONFIGURATION, signatures)
    assert set(truth) <= set(run.candidates) and run.lookups == 5
    table = {row.threshold: row for row in pair_rows(run, truth, (0.8, 0.99))}
    assert (table[0.8].pairs, table[0.8].scores.recall, table[0.8].scores.precision) == (4, 1.0, 1.0)
    assert (table[0.99].pairs, table[0.99].scores.true_positives) == (1, 1)


async def test_the_pipelines_decisions_join_a_drifting_page_through_its_group() -> None:
    """c is near b, not near a: b joined a's group as a findable member, so c joins it through b."""
    signatures = _chain()
    truth = ground_truth([s.hashes for s in signatures], 0.8)
    run = await run_items(CONFIGURATION, signatures, truth, 0.82)
    assert (run.flagged, run.canonicals, run.false_merges) == ({1, 2, 3}, 2, 0)
    assert run.scores.recall == 1.0
    shuffled = await run_items(CONFIGURATION, signatures, truth, 0.82, seed=5)
    assert shuffled.false_merges == 0 and shuffled.order == "shuffled (seed 5)"


@pytest.mark.redis
async def test_the_real_redis_index_leaves_no_key(redis_server_url: str) -> None:
    signatures = _chain()
    run = await run_pairs(CONFIGURATION, signatures, redis_server_url)
    assert run.candidates
    client = redis.Redis.from_url(redis_server_url)
    try:
        assert list(client.scan_iter(match="simhash-eval*")) == []
    finally:
        client.close()


def _write_corpus(tmp_path, count: int = 30):
    """Articles, each with two edited copies: a corpus of known pairs, no shared corpus needed."""
    path = tmp_path / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            for copy in range(3):
                text = article(i) if copy == 0 else edited(article(i), edits=copy * 2, seed=copy)
                out.write(json.dumps({"id": f"{i}-{copy}", "body_text": text}) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["-m", "scrapy_simhash", "eval"], ["-m", "scrapy", "simhash-eval"]])
def test_eval_command_end_to_end(launcher: list[str], tmp_path) -> None:
    path = _write_corpus(tmp_path)
    done = subprocess.run(
        [sys.executable, *launcher, str(path), "--layouts", "configured,8x4>=0.6", "--orders", "1"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    pairs, decisions = done.stdout.split("The pipeline's decisions")
    labels = (layout_for(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"], DEFAULTS["SIMHASH_TARGET_RECALL"]).label, "8x4")
    rows = [line.split() for line in pairs.splitlines() if line.startswith(labels)]
    assert len(rows) == 2 * 5 and all(row[4] == "1.000" for row in rows)  # recall: every pair found
    items = [line.split() for line in decisions.splitlines() if line.startswith(labels)]
    assert len(items) == 4 and all(row[-3] == "0" for row in items)  # no false merge in any order


async def test_plot_draws_the_candidate_curve_and_the_measured_recall(tmp_path) -> None:
    signatures = _chain()
    run = await run_pairs(CONFIGURATION, signatures)
    path = tmp_path / "out.png"
    plot([run], ground_truth([s.hashes for s in signatures], 0.8), path)
    assert path.read_bytes().startswith(b"\x89PNG")
