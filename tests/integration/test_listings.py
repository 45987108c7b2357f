"""The listings benchmark's crawl, small: descriptions of 20-300 words reposted with their sentences
and feature lines in another order, beside distinct descriptions that share template sentences,
crawled with the add-on (and with its learner off). Built from the example project's data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("settings", [[], ["-s", "SIMHASH_BOILERPLATE=False"]], ids=["add-on", "learner off"])
def test_every_reordered_repost_is_dropped_at_every_length_and_no_description_is_merged(tmp_path, settings) -> None:
    out = tmp_path / "listings.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "listings.py"), "--small", "--json", str(out), *settings],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "DeprecationWarning" not in result.stderr, result.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["decided"] == figures["items"] == 160
    assert figures["false_merges"] == 0, figures["false_merge_examples"]
    reposts = figures["reposts"]
    assert set(reposts) == {"20-49", "50-99", "100-199", "200-300"}
    for length, kinds in reposts.items():
        assert kinds["reordered"] == [8, 8], length  # the short ones by their exact digest
    # A long description is still itself with a word changed, a sentence added or dropped.
    assert all(dropped == total for dropped, total in reposts["200-300"].values()), reposts["200-300"]
