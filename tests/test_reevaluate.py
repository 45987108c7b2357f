"""Replaying merge-log decisions under a new rule, and ``simhash-reevaluate`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scrapy_simhash.mergelog import Rule, merge_record
from scrapy_simhash.reevaluate import LoggedDecision, flips, parse_decisions

RULE = Rule(
    max_distance=18, jaccard_threshold=0.82, weighting="frequency", shingle_width=4, boilerplate_version=0, layout="L"
)
# (decision, distance, jaccard), as logged under the rule above
LOGGED = [("merged", 5, 0.9), ("merged", 12, 0.83), ("rejected", 4, 0.80), ("rejected", 2, 0.5)]


def _entries() -> list[dict]:
    return [
        merge_record(
            decision=decision,
            canonical_id=f"c{i}",
            canonical_url=f"https://example.com/c{i}",
            duplicate_id=f"d{i}",
            duplicate_url=f"https://example.com/d{i}",
            canonical_fingerprint=i,
            duplicate_fingerprint=i + 1,
            distance=distance,
            jaccard=jaccard,
            rule=RULE,
        )
        for i, (decision, distance, jaccard) in enumerate(LOGGED)
    ]


def _flipped(threshold: float, max_distance: int | None = None) -> list[tuple[str, str, str]]:
    return [
        (f.decision.entry["duplicate_id"], f.before, f.after)
        for f in flips(parse_decisions(_entries()), threshold, max_distance)
    ]


def test_replaying_the_logged_rule_flips_nothing() -> None:
    assert _flipped(0.82) == []


@pytest.mark.parametrize(
    ("threshold", "max_distance", "expected"),
    [
        (0.85, None, [("d1", "merged", "rejected")]),
        (0.80, None, [("d2", "rejected", "merged")]),
        (0.85, 4, [("d0", "merged", "rejected"), ("d1", "merged", "rejected")]),
        # d2 passes the new threshold but lies 4 bits away; d0 and d1 lie beyond 3 bits
        (0.80, 3, [("d0", "merged", "rejected"), ("d1", "merged", "rejected")]),
        (0.40, 2, [("d0", "merged", "rejected"), ("d1", "merged", "rejected"), ("d3", "rejected", "merged")]),
    ],
)
def test_flips_by_hand(threshold: float, max_distance: int | None, expected: list) -> None:
    assert _flipped(threshold, max_distance) == expected


def test_unusable_entries_are_skipped_and_logged(caplog) -> None:
    entries = [*_entries(), {"decision": "merged"}, {"decision": "maybe", "distance": 1, "jaccard": 1.0}, "text"]
    assert len(parse_decisions(entries)) == len(LOGGED)
    assert "3 merge-log entries were skipped" in caplog.text


def test_an_entry_without_a_rule_keeps_every_distance() -> None:
    entry = {"decision": "rejected", "distance": 40, "jaccard": 0.9}
    assert LoggedDecision.from_entry(entry).replay(0.85) == "merged"


@pytest.mark.slow
@pytest.mark.parametrize(
    "launcher", [["-m", "scrapy_simhash", "reevaluate"], ["-m", "scrapy", "simhash-reevaluate"]]
)
def test_reevaluate_command_end_to_end(launcher: list[str], tmp_path) -> None:
    log = tmp_path / "merges.jsonl"
    log.write_text("".join(json.dumps(entry) + "\n" for entry in _entries()))
    done = subprocess.run(
        [sys.executable, *launcher, str(log), "--threshold", "0.85"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "https://example.com/c1 <- https://example.com/d1" in done.stdout
    assert "d0" not in done.stdout
    assert "1 of 4 decisions flip: 1 merges would be undone, 0 rejections would become merges" in done.stdout
