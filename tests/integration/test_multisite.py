"""The multi-site benchmark's crawl, small: four sites of 3 to 12 pages served on loopback, three crawl orders.

Real HTTP, a real Scrapy spider extracting each page's whole <body> with html-text, the pipeline with
the boilerplate learner: every copy dropped, none merged into another article, furniture out and
articles kept on every host, the 3-page ones included. Built from the example project's data.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(out: Path, orders: str, *settings: str) -> list[dict]:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "multisite.py"), "--small", "--orders", orders,
         "--json", str(out), "--corpus", str(ROOT / "example_project" / "data" / "scrapy-docs.jsonl.gz"),
         *(arg for setting in settings for arg in ("-s", setting))],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "DeprecationWarning" not in result.stderr, result.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> list[dict]:
    return run_benchmark(tmp_path_factory.mktemp("multisite") / "reports.json", "by-site,random-1,copies-first")


def test_every_copy_is_dropped_and_nothing_else_in_every_order(reports) -> None:
    assert [r["order"] for r in reports] == ["by-site", "random-1", "copies-first"]
    for report in reports:
        assert report["never_judged"] == 0 and report["false_merges"] == []
        assert report["copies"] == 10 and report["recall"] == 1.0, report["missed"]
        assert {site["pages"] for site in report["sites"] if site["copies"] == site["caught"]} == {3, 6, 12}


def test_furniture_goes_and_articles_stay_on_every_host(reports) -> None:
    for report in reports:
        for site in report["sites"]:
            assert site["template_removed"] >= 0.95, site
            # What else goes is a title the site also lists among its related links.
            assert site["template_share_of_removed"] >= 0.95, site
        assert statistics.median(report["verbatim_plain"]) == 1.0
        assert min(report["verbatim_symmetric"]) >= 0.98


def test_every_host_learns_from_its_first_pages_and_stores_a_few_kilobytes(reports) -> None:
    for report in reports:
        assert report["hosts"] == {"learned": 4, "relearned": 0, "without": 0}
        assert 0 < report["held_max"] <= 24
        assert len(report["stored_bytes"]) == 4 and max(report["stored_bytes"]) < 4096


def test_held_pages_never_stall_the_crawl(tmp_path) -> None:
    """Warm-ups that could only end at their ten-minute deadline, and a scraper slot that a single held
    response fills: each page that comes ends the oldest warm-up, and the crawl goes on to its end."""
    (report,) = run_benchmark(tmp_path / "reports.json", "random-1", "SIMHASH_BOILERPLATE_SAMPLE_PAGES=64",
                              "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT=600", "SCRAPER_SLOT_MAX_ACTIVE_SIZE=1")
    assert report["never_judged"] == 0 and report["dropped"] + report["kept"] == 24
    assert report["hosts"]["without"] == 4 and report["held_max"] == 1
