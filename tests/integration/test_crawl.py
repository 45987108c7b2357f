"""End to end: real crawls (one process each, as in production) of a small file:// web built in tmp_path.

Two syndicating sites publish the same twelve pages (400 words each, from the example project's
data), each inside its own furniture of 4,800 words, with a byline and related links per page.
Without the boilerplate learner the twelve pages of one site look alike and its copies on the other
site unrelated; with it, each page is kept once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash.mergelog import read_merge_log

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "example_project"
PAGES = 12

# Crawls with the example project's spider and settings plus overrides; writes the stats as JSON.
DRIVER = """
import json, sys, warnings
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import ScrapyDeprecationWarning
warnings.simplefilter("error", ScrapyDeprecationWarning)
from scrapy.settings import Settings
root, overrides, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
settings = Settings()
settings.setmodule("docsproject.settings", priority="project")
settings.update(overrides, priority="cmdline")
process = CrawlerProcess(settings)
crawler = process.create_crawler("docs")
process.crawl(crawler, root=root)
process.start()
with open(out, "w") as f:
    json.dump(crawler.stats.get_stats(), f, default=str)
"""


def _build_site_module():
    spec = importlib.util.spec_from_file_location("example_build_site", EXAMPLE / "build_site.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    build_site = _build_site_module()
    rng = random.Random(4)

    def furniture(name: str) -> tuple[str, ...]:
        return tuple(" ".join(f"{name}{rng.randrange(10**6)}" for _ in range(20)) for _ in range(240))

    sites = tuple(
        build_site.Site(name=name, brand=f"{name} brand", nav=("Home", "About"), sidebar_title="Links",
                        sidebar=furniture(name), footer=f"{name} footer text", authors=("A. Writer",))
        for name in ("alpha.test", "beta.test")
    )
    corpus = build_site.load_docs(build_site.DEFAULT_CORPUS)  # shipped with the example
    newest = max((d["release"] for d in corpus), key=lambda r: tuple(map(int, r.split("."))))
    docs = [{**d, "body_text": " ".join(d["body_text"].split()[:400])} for d in corpus if d["release"] == newest]
    docs = docs[:PAGES]
    root = tmp_path_factory.mktemp("web") / "site"
    assert build_site.build_sites(docs, root, sites) == 2 * PAGES
    return root


def crawl(site: Path, workdir: Path, expect_errors: bool = False, **overrides) -> dict:
    """One crawl in its own process; returns its stats. Index and logs live in ``workdir``."""
    workdir.mkdir(exist_ok=True)
    settings = {
        "SIMHASH_INDEX_URL": f"sqlite:///{workdir}/index.sqlite3",
        "SIMHASH_MERGE_LOG": str(workdir / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": "",
        "FEEDS": {str(workdir / "items.jsonl"): {"format": "jsonlines", "overwrite": True}},
        "LOG_LEVEL": "WARNING",
        **overrides,
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")])}
    stats_file = workdir / "stats.json"
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, str(site), json.dumps(settings), str(stats_file)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "DeprecationWarning" not in result.stderr, result.stderr[-3000:]
    assert expect_errors or "Traceback" not in result.stderr, result.stderr[-3000:]
    return json.loads(stats_file.read_text())


def items(workdir: Path) -> list[dict]:
    return [json.loads(line) for line in (workdir / "items.jsonl").read_text().splitlines()]


def slug(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.fixture(params=["sqlite", "redis"])
def index_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/index.sqlite3"
    return request.getfixturevalue("redis_server_url")


def test_syndicated_copies_are_dropped_and_distinct_pages_on_one_template_kept(site, tmp_path, index_url, request):
    extra = {"SIMHASH_KEY_PREFIX": request.getfixturevalue("redis_prefix")} if index_url.startswith("redis") else {}
    stats = crawl(site, tmp_path / "run", SIMHASH_INDEX_URL=index_url, **extra)
    kept = items(tmp_path / "run")
    assert sorted(slug(i["url"]) for i in kept) == sorted({slug(i["url"]) for i in kept})  # each page once...
    assert len(kept) == PAGES  # ...and every page: none lost to its site's template
    assert stats["simhash/dropped"] == PAGES
    assert stats["simhash/boilerplate/hosts_learned"] == 2
    merged = [r for r in read_merge_log(str(tmp_path / "run" / "merges.jsonl")) if r["decision"] == "merged"]
    assert all(slug(r["canonical_url"]) == slug(r["duplicate_url"]) for r in merged)
    assert all(r["canonical_url"].split("/site/")[1][:5] != r["duplicate_url"].split("/site/")[1][:5] for r in merged)
    # Every contributing URL is in the merge log: both copies of every page.
    urls = {r["canonical_url"] for r in merged} | {r["duplicate_url"] for r in merged}
    assert len(urls) == 2 * PAGES
    assert all(r["rule"]["boilerplate_version"] > 0 for r in merged)  # fingerprinted with a learned set


def test_without_the_learner_one_sites_template_merges_its_distinct_pages(site, tmp_path):
    """The contrast that makes the test above meaningful (and backs the README's figure)."""
    stats = crawl(site, tmp_path / "run", SIMHASH_BOILERPLATE=False)
    assert len(items(tmp_path / "run")) < PAGES // 2
    assert "simhash/boilerplate/hosts_learned" not in stats


def test_a_recrawl_finds_the_first_crawls_records_and_boilerplate(site, tmp_path):
    first = crawl(site, tmp_path / "run")
    assert first["simhash/unique"] == PAGES
    shown = subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-boilerplate", "alpha.test", "--spider", "docs", "-n", "3",
         "-s", f"SIMHASH_INDEX_URL=sqlite:///{tmp_path}/run/index.sqlite3"],
        cwd=tmp_path / "run", capture_output=True, text=True, timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("alpha.test: version ") and int(lines[0].split()[2]) > 0
    # Every page has the same 240 teasers of 20 words, which the prose alone takes for one text's: the
    # host's pages wait for another document until the crawl has no more, and are learned together.
    assert lines[1].startswith(f"learned from {PAGES} pages") and lines[2] == "lines most pages have:"
    assert len(lines) == 6
    logged = list(read_merge_log(str(tmp_path / "run" / "merges.jsonl")))
    second = crawl(site, tmp_path / "run")
    # Tomorrow's pages are stripped with the stored furniture: each comes out as it was stored, seen
    # before, unchanged; none is a merge, none a duplicate of itself.
    assert second["simhash/seen"] == 2 * PAGES
    assert second.get("simhash/unique", 0) == second.get("simhash/duplicates", 0) == 0
    assert second["simhash/boilerplate/hosts_loaded"] == 2 and "simhash/boilerplate/hosts_learned" not in second
    assert list(read_merge_log(str(tmp_path / "run" / "merges.jsonl"))) == logged


def test_annotate_mode_keeps_every_item_with_the_evidence(site, tmp_path):
    stats = crawl(site, tmp_path / "run", SIMHASH_ACTION="annotate")
    annotated = [i for i in items(tmp_path / "run") if "duplicate_of" in i]
    assert len(items(tmp_path / "run")) == 2 * PAGES and len(annotated) == PAGES == stats["simhash/annotated"]
    for item in annotated:
        assert slug(item["duplicate_of"]) == slug(item["url"]) and item["duplicate_of"] != item["url"]
        assert item["jaccard"] >= 0.82 and len(item["fingerprint"]) == 16
        assert isinstance(item["simhash_distance"], int)


def test_unreachable_redis_with_pass_lets_every_item_through_counted(site, tmp_path):
    stats = crawl(site, tmp_path / "run", SIMHASH_INDEX_URL="redis://127.0.0.1:1/0", SIMHASH_INDEX_RETRIES=0)
    assert len(items(tmp_path / "run")) == 2 * PAGES
    assert stats["simhash/unchecked"] == 2 * PAGES and stats["simhash/index_errors"] >= 2 * PAGES


def test_unreachable_redis_with_fail_stops_the_crawl(site, tmp_path):
    stats = crawl(site, tmp_path / "run", expect_errors=True, SIMHASH_INDEX_URL="redis://127.0.0.1:1/0",
                  SIMHASH_INDEX_RETRIES=0, SIMHASH_ON_INDEX_ERROR="fail")
    assert stats["finish_reason"] == "simhash_index_error"
