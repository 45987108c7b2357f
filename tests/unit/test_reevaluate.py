"""Replaying merge-log decisions under a new rule, and ``simhash-reevaluate`` end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tracemalloc

import pytest

from scrapy_simhash.mergelog import Rule, merge_record
from scrapy_simhash.offline.reevaluate import format_flips, replay

RULE = Rule(jaccard_threshold=0.82, layout={"kind": "minhash", "bands": 16, "rows": 4}, shingle_width=4,
            weighting="frequency", fingerprint_version=2, boilerplate_version=0)
# (decision, distance, jaccard), as logged under the rule above
LOGGED = [("merged", 5, 0.9), ("merged", 12, 0.83), ("rejected", 4, 0.80), ("rejected", 2, 0.5)]


def _entries() -> list[dict]:
    return [
        merge_record(
            decision=decision,
            canonical_id=f"c{i}",
            canonical_url=f"https://example.com/c{i}",
            matched_id=f"c{i}",
            matched_url=f"https://example.com/c{i}",
            matched_fingerprint=i,
            duplicate_id=f"d{i}",
            duplicate_url=f"https://example.com/d{i}",
            duplicate_fingerprint=i + 1,
            distance=distance,
            jaccard=jaccard,
            retention="default",
            rule=RULE,
        )
        for i, (decision, distance, jaccard) in enumerate(LOGGED)
    ]


def _flipped(threshold: float) -> list[tuple[str, str, str]]:
    return [
        (f.decision.entry["duplicate_id"], f.before, f.after) for f in replay(_entries(), threshold).flipped
    ]


def test_replaying_the_logged_rule_flips_nothing() -> None:
    assert _flipped(0.82) == []


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.85, [("d1", "merged", "rejected")]),
        (0.80, [("d2", "rejected", "merged")]),
        (0.95, [("d0", "merged", "rejected"), ("d1", "merged", "rejected")]),
        (0.40, [("d2", "rejected", "merged"), ("d3", "rejected", "merged")]),
    ],
)
def test_flips_by_hand(threshold: float, expected: list) -> None:
    assert _flipped(threshold) == expected


def test_the_table_header_lines_up_with_its_rows() -> None:
    """Issue 14.2: the header's columns stood 7 characters left of the rows' (timestamps are 32 wide)."""
    entries = _entries()
    entries[0]["timestamp"] = "2026-12-03T16:15:11+00:00"  # another writer's precision: a shorter value
    entries[3] = {
        **entries[3], "decision": "merged", "canonical_id": None, "canonical_url": None, "erased": ["canonical"]
    }
    header, *rows, summary = format_flips(replay(entries, 0.95)).splitlines()
    assert len(rows) == 3 and summary.startswith("3 of 4 decisions flip")
    for row in rows:
        columns = re.fullmatch(r"\S+ +(\S+ -> \S+) +(\d+) +([\d.]+)  (.+)", row)
        assert columns.start(1) == header.index("change")  # text columns start together
        assert columns.end(2) == header.index("dist") + len("dist")  # number columns end together
        assert columns.end(3) == header.index("jaccard") + len("jaccard")
        assert columns.start(4) == header.index("canonical <- duplicate")
    assert rows[2].endswith("(erased) <- https://example.com/d3")


def test_unusable_entries_are_skipped_and_logged(caplog) -> None:
    odd = [{"decision": "merged", "distance": d, "jaccard": j} for d, j in (
        (float("inf"), 0.9), (1e400, 0.9), (3, float("nan")), (3, "0.9"), (3, 1e308), (2.5, 0.9), (True, 0.9))]
    entries = [*_entries(), {"decision": "merged"}, {"decision": "maybe", "distance": 1, "jaccard": 1.0}, "text", *odd]
    result = replay(entries, 0.0)
    assert result.total == len(LOGGED) and result.unusable == 3 + len(odd)
    assert f"{3 + len(odd)} merge-log entries were skipped" in caplog.text


def test_a_replay_holds_the_flips_not_the_log() -> None:
    """A log of 20,000 records, none of which flips, replays in the memory of a few records (the
    replay held every record: about 15 MB here, 1.2 GB for a 300 MB log)."""
    [template] = _entries()[:1]

    def entries():  # one at a time, as a reader yields them
        for n in range(20_000):
            yield {**template, "duplicate_id": f"d{n}", "duplicate_url": f"https://example.com/{n:040d}"}

    tracemalloc.start()
    try:
        result = replay(entries(), 0.82)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.total == 20_000 and not result.flipped
    assert peak < 1_000_000


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


@pytest.mark.slow
def test_reevaluate_skips_and_counts_torn_and_invalid_lines(tmp_path) -> None:
    """A log cut short by a full disk, with a line no JSON reader takes: replayed, not refused."""
    log = tmp_path / "merges.jsonl"
    lines = [json.dumps(entry) for entry in _entries()]
    log.write_text("\n".join([*lines, "{not json", '{"decision": "maybe"}', lines[0][:30]]))
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "reevaluate", str(log), "--threshold", "0.85"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "1 of 4 decisions flip" in done.stdout
    assert "2 torn or invalid lines and 1 unusable record skipped" in done.stdout
