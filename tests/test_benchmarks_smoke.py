"""Every script in benchmarks/ still runs on today's code: each at a tiny size, its exit status checked.

Figures are not checked (benchmarks are not tests). A new script gets its row in ``TINY``: the
arguments that make it finish in seconds, ``{corpus}`` standing for the example project's 100 pages
as JSON lines and ``{tmp}`` for a folder of its own. Scripts that need Redis start a throwaway
redis-server (on the path, as for tests/redis_servers.py).
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SHIPPED = ROOT / "example_project" / "data" / "scrapy-docs.jsonl.gz"

TINY: dict[str, list[str]] = {
    "calibrate.py": ["--corpus", "{corpus}", "--thresholds", "0.82", "--out", "{tmp}/table.json"],
    "concurrency.py": ["--corpus", "{corpus}", "--items", "150", "--processes", "2", "--in-flight", "8",
                       "--backend", "redis"],
    "crawl_overhead.py": ["--corpus", "{corpus}", "--corpus-pages", "10", "--rounds", "1", "--indexes", "sqlite"],
    "crawl_in_flight.py": ["--corpus", "{corpus}", "--pages", "20"],
    "fingerprint.py": ["--corpus", "{corpus}", "--repeat", "1", "--pieces", "8", "--naive-every", "100",
                       "--edits", "10"],
    "forced_stop.py": ["--pages", "40", "--gap", "1.5"],
    "index.py": ["--sizes", "2000", "--lookups", "50", "--near", "10", "--base-source", str(ROOT), "--rounds", "2"],
    "listings.py": ["--small"],
    "singlehost.py": ["--small", "--orders", "by-site", "--learner", "on"],
    "killed_feeds.py": ["--pages", "40", "--kill-at", "10", "--batch-items", "5", "--jitter", "0"],
    "memory.py": ["--corpus", "{corpus}", "--limit", "40"],
    "mergelog.py": ["--corpus", "{corpus}", "--items", "200", "--rounds", "1"],
    "multisite.py": ["--small", "--orders", "by-site", "--corpus", str(SHIPPED)],
    "pipeline.py": ["--corpus", "{corpus}", "--items", "300", "--baseline-items", "20", "--sample", "20"],
    "review_pages.py": ["--pairs", "5", "--words", "200", "--rounds", "1"],
    "server_replay.py": ["record", "{tmp}/calls.pkl", "--corpus", "{corpus}", "--items", "100", "--baseline-items",
                         "10", "--sample", "0"],
}
#: Scripts run at once: most of a tiny run is waiting (process start-up, a crawl's lease).
PARALLEL = 4

pytestmark = pytest.mark.slow  # runs in the whole suite; `-m "not slow"` leaves it out


def test_every_benchmark_has_a_tiny_run():
    assert sorted(path.name for path in BENCHMARKS.glob("*.py")) == sorted(TINY)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    folder = tmp_path_factory.mktemp("benchmarks")
    corpus = folder / "corpus.jsonl"
    with gzip.open(SHIPPED, "rt", encoding="utf-8") as pages:
        corpus.write_text(pages.read(), encoding="utf-8")

    def run(script: str) -> subprocess.CompletedProcess:
        tmp = folder / script.removesuffix(".py")
        tmp.mkdir()
        args = [arg.format(corpus=corpus, tmp=tmp) for arg in TINY[script]]
        return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], cwd=tmp,
                              capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(PARALLEL) as pool:
        return dict(zip(TINY, pool.map(run, TINY)))


@pytest.mark.parametrize("script", sorted(TINY))
def test_the_benchmark_runs_at_a_tiny_size(script, runs):
    result = runs[script]
    assert result.returncode == 0, f"{script} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
