"""Tuning maths on hand-scored pairs, the labelled fixture, and ``simhash-tune`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.tune import ScoredPair, grid, read_labelled, recommend, score_pairs, settings_lines

FIXTURE = Path(__file__).parent / "fixtures" / "labelled.jsonl"

# Two duplicates (one close, one 5 bits apart), a distinct pair close in bits, a distinct pair with a
# high Jaccard far away in bits: the rule needs both conditions.
SCORED = [
    ScoredPair(True, 2, 0.9),
    ScoredPair(True, 5, 0.85),
    ScoredPair(False, 3, 0.5),
    ScoredPair(False, 10, 0.95),
]


def test_grid_by_hand() -> None:
    table = {(row.distance, row.threshold): row.scores for row in grid(SCORED, (3, 5, 10), (0.8, 0.85, 0.9))}
    tight = table[3, 0.8]  # predicts pair 0 only
    assert (tight.true_positives, tight.false_positives, tight.false_negatives) == (1, 0, 1)
    assert (tight.precision, tight.recall, tight.f1) == (1.0, 0.5, pytest.approx(2 / 3))
    loose = table[10, 0.8]  # predicts pairs 0, 1 and the distinct 3
    assert (loose.precision, loose.recall, loose.f1) == (pytest.approx(2 / 3), 1.0, pytest.approx(0.8))
    assert table[5, 0.8].f1 == table[5, 0.85].f1 == 1.0
    assert table[5, 0.9].recall == 0.5


def test_recommend_prefers_the_current_or_middle_tied_threshold_then_the_smallest_distance() -> None:
    best = recommend(grid(SCORED, (3, 5, 6, 10), (0.6, 0.7, 0.8, 0.85, 0.9)))
    # F1 = 1 at d in {5, 6} for T in {0.6, 0.7, 0.8, 0.85}: middle threshold 0.7, smallest distance 5
    assert (best.distance, best.threshold, best.scores.f1) == (5, 0.7, 1.0)
    assert settings_lines(best) == "SIMHASH_MAX_DISTANCE = 5\nSIMHASH_JACCARD_THRESHOLD = 0.70"
    assert settings_lines(best, auto_distance=4).startswith("SIMHASH_MAX_DISTANCE = 5\n")
    assert recommend(grid(SCORED, (5,), (0.6, 0.7, 0.8, 0.85, 0.9)), current=0.82).threshold == 0.8
    assert recommend(grid(SCORED, (5,), (0.6, 0.7, 0.8, 0.85, 0.9)), current=0.95).threshold == 0.85
    assert settings_lines(best, auto_distance=18).startswith('SIMHASH_MAX_DISTANCE = "auto"  # calibrated distance 18')


def test_read_labelled_resolves_ids_and_skips_unusable_lines(tmp_path, caplog) -> None:
    path = tmp_path / "pairs.jsonl"
    lines = [
        {"a": "doc-1", "b": {"text": "inline text"}, "label": "duplicate"},
        {"a": {"text": "x"}, "b": {"text": "y"}, "label": "distinct"},
        {"a": "missing", "b": "doc-1", "label": "duplicate"},
        {"a": "doc-1", "b": "doc-1", "label": "maybe"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    pairs = read_labelled(path, {"doc-1": "text of doc one"})
    assert pairs == [("text of doc one", "inline text", True), ("x", "y", False)]
    assert "3 lines" in caplog.text and "'missing' is not in the corpus" in caplog.text


def test_score_pairs_measures_distance_and_jaccard() -> None:
    text = " ".join(f"word{i}" for i in range(60))
    edited = text.replace("word30", "changed")
    [same, near] = score_pairs([(text, text, True), (text, edited, True)], Fingerprinter())
    assert (same.distance, same.jaccard) == (0, 1.0)
    assert near.jaccard == pytest.approx(53 / 61)  # one word edits 4 of the 57 shingles: 53 shared of 61


def test_the_labelled_fixture_is_real_and_separable(corpus: list[dict]) -> None:
    texts = {doc["id"]: doc["body_text"] for doc in corpus}
    pairs = read_labelled(FIXTURE, texts)
    assert len(pairs) == 300 and sum(duplicate for _, _, duplicate in pairs) == 150
    scored = score_pairs(pairs, Fingerprinter())
    duplicates = [p.jaccard for p in scored if p.duplicate]
    distinct = [p.jaccard for p in scored if not p.duplicate]
    assert min(duplicates) < 1.0  # tiny diffs, not copies
    assert min(duplicates) > max(distinct)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["-m", "scrapy_simhash", "tune"], ["-m", "scrapy", "simhash-tune"]])
def test_tune_command_end_to_end(launcher: list[str], tmp_path) -> None:
    base = " ".join(f"token{i}" for i in range(80))
    path = tmp_path / "pairs.jsonl"
    with path.open("w") as out:
        for i in range(6):
            other = " ".join(f"other{i}x{j}" for j in range(80))
            out.write(json.dumps({"a": {"text": base}, "b": {"text": base.replace(f"token{10 * i}", "edit")},
                                  "label": "duplicate"}) + "\n")
            out.write(json.dumps({"a": {"text": base}, "b": {"text": other}, "label": "distinct"}) + "\n")
    done = subprocess.run(
        [sys.executable, *launcher, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "6 duplicate and 6 distinct pairs" in done.stdout
    assert "F1 1.000" in done.stdout
    assert "SIMHASH_MAX_DISTANCE = " in done.stdout and "SIMHASH_JACCARD_THRESHOLD = " in done.stdout
