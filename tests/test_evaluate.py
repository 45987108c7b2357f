"""Evaluation maths on hand-made corpora, the real index run, and ``simhash-eval`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest
import redis

from scrapy_simhash.evaluate import (
    Configuration,
    Document,
    Scores,
    ground_truth,
    plot,
    read_documents,
    rows,
    run_configuration,
    run_pipeline_decisions,
)
from scrapy_simhash.fingerprint import Signature, jaccard_hashes
from scrapy_simhash.layout import BlockLayout


def _set(*values: int) -> np.ndarray:
    return np.array(sorted(set(values)), dtype=np.uint64)


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


def test_read_documents_joins_fields_and_skips_bad_lines(tmp_path, caplog) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "url": "u", "title": "T", "body": "B"}\nnot json\n[1]\n\n{"url": "v"}\n')
    documents = read_documents(path, ["title", "body"])
    assert [(d.id, d.url, d.text) for d in documents] == [("a", "u", "T\nB"), ("v", "v", "\n")]
    assert "2 of the lines" in caplog.text


# Hand-made signatures: fingerprints chosen for their distances, shingle sets for their Jaccard.
#   doc 1 is 1 bit from doc 0, J = 5/6; doc 2 equals doc 0's shingles but is 64 bits away;
#   doc 3 is 2 bits from doc 0 and 1 from doc 1 but shares no shingle; doc 4 is empty (fingerprint 0,
#   never indexed).
SIGNATURES = [
    Signature(0b100, _set(1, 2, 3, 4, 5)),
    Signature(0b101, _set(1, 2, 3, 4, 5, 6)),
    Signature(2**64 - 1, _set(1, 2, 3, 4, 5)),
    Signature(0b111, _set(100, 101)),
    Signature(0, _set()),
]


def _documents() -> list[Document]:
    return [Document(str(i), f"https://example.com/{i}", "") for i in range(len(SIGNATURES))]


async def _evaluate(redis_url: str | None = None):
    configuration = Configuration("3", 3, BlockLayout(bands=4))
    run = await run_configuration(configuration, _documents(), SIGNATURES, redis_url)
    truth = ground_truth([s.shingles for s in SIGNATURES], 0.8)
    return run, {row.threshold: row for row in rows(run, truth, (0.8, 0.9))}


def _check_hand_made_evaluation(run, table) -> None:
    # Candidates: doc 1 finds 0; doc 3 finds 0 and 1; doc 2 is too far from everything.
    assert set(run.candidates) == {(0, 1), (0, 3), (1, 3)}
    assert run.lookups == 4
    # J >= 0.8: true pairs (0, 1) 5/6, (0, 2) 1.0, (1, 2) 5/6; only (0, 1) is found and confirmed.
    low = table[0.8]
    assert (low.pairs, low.scores.true_positives, low.scores.false_positives) == (3, 1, 0)
    assert low.scores.recall == pytest.approx(1 / 3)
    assert low.scores.precision == 1.0
    assert low.candidate_precision == pytest.approx(1 / 3)
    assert low.candidates_per_lookup == pytest.approx(3 / 4)
    # J >= 0.9: only (0, 2) is true, and the index never returns it.
    high = table[0.9]
    assert (high.pairs, high.scores.true_positives, high.scores.recall, high.scores.precision) == (1, 0, 0.0, 1.0)


async def test_the_real_sqlite_index_by_hand() -> None:
    _check_hand_made_evaluation(*await _evaluate())


@pytest.mark.redis
async def test_the_real_redis_index_by_hand_leaves_no_key(redis_server_url: str) -> None:
    _check_hand_made_evaluation(*await _evaluate(redis_server_url))
    client = redis.Redis.from_url(redis_server_url)
    try:
        assert list(client.scan_iter(match="simhash-eval:*")) == []
    finally:
        client.close()


def _write_corpus(tmp_path, corpus: list[dict], count: int = 120):
    path = tmp_path / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for doc in corpus[:count]:
            out.write(json.dumps(doc) + "\n")
    return path


def _table_lines(output: str) -> dict[tuple[str, float], list[str]]:
    lines = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) > 10 and parts[1].isdigit():
            lines[parts[0], float(parts[2])] = parts
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["-m", "scrapy_simhash", "eval"], ["-m", "scrapy", "simhash-eval"]])
def test_eval_command_end_to_end(launcher: list[str], corpus: list[dict], tmp_path) -> None:
    path = _write_corpus(tmp_path, corpus)
    done = subprocess.run(
        [sys.executable, *launcher, str(path), "--distances", "auto,3"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    table = _table_lines(done.stdout)
    thresholds = (0.8, 0.82, 0.85, 0.9, 0.95)  # the reported ones and SIMHASH_JACCARD_THRESHOLD
    assert set(table) == {(label, t) for label in ("auto", "3") for t in thresholds}
    recall = {key: float(parts[5]) for key, parts in table.items()}
    # auto reaches further than 3 bits, and every recall grows with the threshold
    assert all(recall["auto", t] >= recall["3", t] for t in thresholds)
    assert recall["3", 0.8] <= recall["3", 0.95]
    decisions = done.stdout.split("The pipeline's decisions")[1]
    assert sum(line.split()[0] in ("auto", "3") for line in decisions.splitlines()[2:]) == 2


async def test_plot_draws_recall_and_cost(tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="--plot is the optional 'plot' extra")
    run, table = await _evaluate()
    path = tmp_path / "out.png"
    plot(list(table.values()), path)
    assert path.read_bytes().startswith(b"\x89PNG")


async def test_pipeline_decisions_match_through_canonicals_only() -> None:
    """A chain 0 ~ 1 ~ 2 where 2 is not near 0: 1 is merged into 0 and never indexed, so 2 meets only
    0, fails verification and becomes a canonical itself (transitive clustering)."""
    chain = [
        Signature(0b1000, _set(*range(1, 11))),
        Signature(0b1001, _set(*range(1, 10), 11)),  # J(0, 1) = 9/11
        Signature(0b1011, _set(*range(1, 9), 11, 12)),  # J(1, 2) = 9/11, J(0, 2) = 8/12
    ]
    truth = ground_truth([s.shingles for s in chain], 0.8)
    assert truth == {(0, 1): 9 / 11, (1, 2): 9 / 11}
    run = await run_pipeline_decisions(Configuration("3", 3, BlockLayout(bands=4)), chain, truth, 0.8)
    assert (run.flagged, run.canonicals) == ({1}, 2)
    assert (run.scores.recall, run.scores.precision) == (0.5, 1.0)
