"""The single-host benchmark's crawl, small: four sites whose distinct pages share content, five crawl orders.

Real HTTP, a real Scrapy spider extracting each page's whole <body> with html-text, the add-on with
its furniture learner on and off. A merge is false when the dropped page's full-text Jaccard (the
benchmark's own 4-word shingles) to the record it matched is under the threshold. Built from the
example project's data, so it runs without the shared corpus.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ORDERS = ["by-site", "grouped", "random-1", "random-2", "copies-first"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("singlehost") / "reports.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "singlehost.py"), "--small", "--orders", ",".join(ORDERS),
         "--json", str(out), "--corpus", str(ROOT / "example_project" / "data" / "scrapy-docs.jsonl.gz")],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "DeprecationWarning" not in result.stderr, result.stderr[-3000:]
    found = json.loads(out.read_text())
    assert [(r["order"], r["learner"]) for r in found] == [(o, on) for o in ORDERS for on in (True, False)]
    return found


def test_every_page_is_judged_and_there_are_copies_to_find(reports) -> None:
    for report in reports:
        assert report["items"] == 70 and report["never_judged"] == 0
        assert report["near_duplicates"] >= 20 and report["copies"] >= 24


def test_learner_off_merges_no_distinct_pages_and_finds_the_copies(reports) -> None:
    for report in reports:
        if not report["learner"]:
            assert report["false_merges"] == [], report["order"]
            assert report["recall"] == 1.0, (report["order"], report["missed"])
            assert report["copies_dropped"] == report["copies"], report["order"]
            # The benchmark's own shingling and the pipeline's agree on whole texts.
            assert report["logged_vs_full_gap"]["max"] <= 0.05, report["order"]


def test_learner_on_merges_no_distinct_pages(reports) -> None:
    """The add-on as a user sets it up: its furniture learner must not make distinct pages of one
    host alike (issue 39)."""
    for report in reports:
        if report["learner"]:
            false = [(e["duplicate_source"], e["matched_source"], round(e["full_jaccard"], 2))
                     for e in report["false_merges"]]
            assert false == [], report["order"]


def test_learner_on_drops_every_copy_under_a_second_url(reports) -> None:
    """Stripping furniture must not cost the copies: a page under a second URL is dropped with the
    learner on too. A recrawl with a word changed or a republication with a sentence added can be kept
    when the learner strips it and its original differently (docs/boilerplate.md "One site whose
    pages share content")."""
    for report in reports:
        if report["learner"]:
            assert [url for url in report["missed"] if "/print/" in url] == [], report["order"]


def test_the_benchmarks_shingles_stop_where_the_packages_do(monkeypatch) -> None:
    """A sentence end stops a shingle unless a word character follows ("etc., so", "('../page", and
    "[…]/site" once NFKC made "…" "..."), as the package defines its Jaccard: the benchmark's own
    shingling must count the same shingles, or a pair at the threshold by the package's measure is
    scored a false merge."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from singlehost import jaccard, shingles

    from scrapy_simhash.fingerprint import shingles as package_shingles

    first = ("Stripped from ``<img>``, ``<iframe>`` elements, etc., so LinkExtractor strips space chars.\n"
             "<a href=\"javascript:goToPage('../other/page.html'); return false\">Link text</a> in 3.5 […]/site.")
    second = first.replace("strips space", "keeps space").replace("Link text", "Other text")
    for text in (first, second):
        assert len(shingles(text)) == len(set(package_shingles(text)))
    ours, theirs = set(package_shingles(first)), set(package_shingles(second))
    assert jaccard(shingles(first), shingles(second)) == len(ours & theirs) / len(ours | theirs)
