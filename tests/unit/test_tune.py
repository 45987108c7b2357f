"""Tuning maths on hand-scored pairs, the labelled fixture, and ``simhash-tune`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.offline.tune import ScoredPair, read_labelled, recommend, score_pairs, separations

FIXTURE = Path(__file__).parents[1] / "fixtures" / "labelled.jsonl"

# Two duplicates, a distinct pair of low Jaccard, a distinct pair of high Jaccard (0.95): no threshold
# separates all four; 0.85 up to 0.9 gets both duplicates and no distinct pair but the 0.95 one.
SCORED = [
    ScoredPair(True, 2, 0.9),
    ScoredPair(True, 5, 0.85),
    ScoredPair(False, 3, 0.5),
    ScoredPair(False, 10, 0.95),
]


def test_separations_by_hand() -> None:
    table = {row.threshold: row.scores for row in separations(SCORED, (0.8, 0.85, 0.9, 0.96))}
    assert (table[0.85].true_positives, table[0.85].false_positives, table[0.85].false_negatives) == (2, 1, 0)
    assert (table[0.9].true_positives, table[0.9].false_negatives) == (1, 1)
    assert (table[0.96].precision, table[0.96].recall) == (1.0, 0.0)


def test_recommend_prefers_the_current_then_the_middle_of_the_tied_thresholds() -> None:
    separable = [ScoredPair(True, 2, 0.9), ScoredPair(True, 5, 0.86), ScoredPair(False, 3, 0.5)]
    rows = separations(separable, (0.6, 0.7, 0.8, 0.85, 0.9))
    assert recommend(rows).threshold == 0.7  # F1 = 1 from 0.6 to 0.85: the middle one
    assert recommend(rows, current=0.82).threshold == 0.8
    assert recommend(rows, current=0.95).threshold == 0.85


def test_read_labelled_resolves_ids_and_skips_unusable_lines(tmp_path, caplog) -> None:
    path = tmp_path / "pairs.jsonl"
    lines = [
        {"a": "doc-1", "b": {"text": "inline text"}, "label": "duplicate"},
        {"a": {"text": "x"}, "b": {"text": "y"}, "label": "distinct", "jaccard": 0.83},
        {"a": "missing", "b": "doc-1", "label": "duplicate"},
        {"a": "doc-1", "b": "doc-1", "label": "maybe"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    pairs = read_labelled(path, {"doc-1": "text of doc one"})
    assert pairs == [("text of doc one", "inline text", True, None), ("x", "y", False, 0.83)]
    assert "2 lines" in caplog.text and "'missing' is not in the corpus" in caplog.text
    assert "not a JSON object" in caplog.text


def test_score_pairs_measures_distance_and_jaccard() -> None:
    text = " ".join(f"word{i}" for i in range(60))
    edited = text.replace("word30", "changed")
    [same, near] = score_pairs([(text, text, True), (text, edited, True)], Fingerprinter())
    assert (same.distance, same.jaccard) == (0, 1.0)
    assert near.jaccard == pytest.approx(53 / 61)  # one word edits 4 of the 57 shingles: 53 shared of 61


def test_the_labelled_fixture_is_real_and_separable(full_corpus: list[dict]) -> None:
    """The fixture refers to corpus pages by id (built by tools/make_labelled.py)."""
    texts = {doc["id"]: doc["body_text"] for doc in full_corpus}
    pairs = read_labelled(FIXTURE, texts)
    assert len(pairs) == 300 and sum(pair.duplicate for pair in pairs) == 150
    scored = score_pairs(pairs, Fingerprinter())
    duplicates = [p.jaccard for p in scored if p.duplicate]
    distinct = [p.jaccard for p in scored if not p.duplicate]
    assert min(duplicates) < 1.0  # tiny diffs, not copies
    assert min(duplicates) > max(distinct)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["-m", "scrapy_simhash", "tune"], ["-m", "scrapy", "simhash-tune"]])
def test_tune_command_end_to_end(launcher: list[str], tmp_path) -> None:
    """Pairs labelled on several review pages: one file each."""
    base = " ".join(f"token{i}" for i in range(80))
    paths = [tmp_path / "simhash-labels.jsonl", tmp_path / "simhash-labels-2.jsonl"]
    for page, path in enumerate(paths):
        with path.open("w") as out:
            for i in range(3 * page, 3 * page + 3):
                other = " ".join(f"other{i}x{j}" for j in range(80))
                out.write(json.dumps({"a": {"text": base}, "b": {"text": base.replace(f"token{10 * i}", "edit")},
                                      "label": "duplicate"}) + "\n")
                out.write(json.dumps({"a": {"text": base}, "b": {"text": other}, "label": "distinct"}) + "\n")
    done = subprocess.run(
        [sys.executable, *launcher, *map(str, paths)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "6 duplicate and 6 distinct pairs" in done.stdout
    assert "F1 1.000" in done.stdout
    assert "SIMHASH_JACCARD_THRESHOLD = " in done.stdout and "calibrated index layout" in done.stdout
