"""What the add-on costs a CPU-bound crawl: the crawl's CPU time with and without it, and its log.

    python benchmarks/crawl_overhead.py [--rounds 3] [--indexes sqlite,redis] [--pages-dir DIR]

The pages are tools/make_crawl_pages.py's (written to a temporary directory unless ``--pages-dir``
holds them): every shared-corpus page on three sites with their own furniture, 3,927 ``file://``
pages. A Scrapy spider (``CONCURRENT_REQUESTS`` 64, ``LOG_LEVEL`` INFO into a file) requests them
and yields ``{"url", "host", "body_text": html_text.extract_text(response.text)}``. The host is a
field (``SIMHASH_HOST_FIELD``) since ``file:`` URLs have none. Three variants, each crawl a process
of its own in a fresh directory (the index, merge and review logs where the defaults put them):

- ``scrapy``: no pipeline;
- ``addon``: ``ADDONS = {"scrapy_simhash.Addon": 0}``, every other setting its default;
- ``pipeline``: the same with ``SIMHASH_BOILERPLATE = False`` (the learner off).

The variants run in turn, ``--rounds`` times (A B C C B A ...), per index: SQLite (the default) and
Redis (a throwaway redis-server unless ``--redis-url``, keys under a prefix of each run's own).
Printed per run: the crawl's CPU time (user + sys of the crawl process, from the engine's start to
its stop: ``resource.getrusage``), items dropped and log bytes; then per variant the median of the
round-by-round ratios to the ``scrapy`` run of the same round, and log bytes per dropped item above
that run's log. ``--base-source DIR`` runs each plugin variant a second time in each round with ``scrapy_simhash``
imported from DIR (a checkout of another commit) and prints the pair ratios of the two commits.
``--profile DIR`` also writes a cProfile of every crawl there (the reactor thread's CPU
time; slower: read shares from it, not ratios).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_crawl_pages import MANIFEST, write_pages  # noqa: E402  (tools/make_crawl_pages.py)
from pipeline import DEFAULT_CORPUS, throwaway_redis  # noqa: E402  (benchmarks/pipeline.py)

VARIANTS = {
    "scrapy": {},
    "addon": {"ADDONS": {"scrapy_simhash.Addon": 0}},
    "pipeline": {"ADDONS": {"scrapy_simhash.Addon": 0}, "SIMHASH_BOILERPLATE": False},
}
RESULT = "result: "
AT_BASE = "@base"  # a variant run at the commit --base-source holds


# --- one crawl, in a process of its own ------------------------------------------------------------


def crawl(pages_dir: Path, variant: str, overrides: dict[str, Any], profile: Path | None) -> None:
    """Crawl the pages in the current directory's project data dir; print the result after RESULT."""
    import html_text
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    listed = [line.split("\t") for line in (pages_dir / MANIFEST).read_text(encoding="utf-8").splitlines()]

    class PagesSpider(Spider):
        name = "overhead"

        async def start(self):
            for host, url in listed:  # one priority: distinct ones make Scrapy's scheduler quadratic
                yield Request(url, cb_kwargs={"host": host})

        def parse(self, response, host: str):
            yield {"url": response.url, "host": host, "body_text": html_text.extract_text(response.text)}

    settings = {
        "CONCURRENT_REQUESTS": 64,
        "LOG_LEVEL": "INFO",
        "LOG_FILE": "crawl.log",
        "TELNETCONSOLE_ENABLED": False,
        "SIMHASH_HOST_FIELD": "host",
        **VARIANTS[variant],
        **overrides,
    }
    process = CrawlerProcess(settings)  # LOG_INSTALL_ROOT_HANDLER (default True): the log goes to LOG_FILE
    crawler = process.create_crawler(PagesSpider)
    process.crawl(crawler)
    profiler = cProfile.Profile(time.thread_time) if profile else None  # the reactor thread's CPU
    before = resource.getrusage(resource.RUSAGE_SELF)
    with profiler or nullcontext():
        process.start()
    after = resource.getrusage(resource.RUSAGE_SELF)
    if profiler is not None:
        profiler.dump_stats(profile)
    stats = crawler.stats.get_stats()
    result = {
        "cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
        "seconds": (stats["finish_time"] - stats["start_time"]).total_seconds(),
        "pages": stats.get("response_received_count", 0),
        "scraped": stats.get("item_scraped_count", 0),
        "dropped": stats.get("item_dropped_count", 0),
        "unchecked": stats.get("simhash/unchecked", 0),
    }
    print(RESULT + json.dumps(result), flush=True)


def run_crawl(pages_dir: Path, variant: str, overrides: dict[str, Any], profile: Path | None,
              source: Path | None = None) -> dict[str, Any]:
    """One crawl in a child process and a fresh directory (importing scrapy_simhash from ``source`` if
    given): its result and its log's size."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as workdir:
        command = [sys.executable, __file__, "--crawl", variant, "--pages-dir", str(pages_dir),
                   "--overrides", json.dumps(overrides)]
        if profile is not None:
            command += ["--profile", str(profile)]
        out = subprocess.run(command, cwd=workdir, check=True, capture_output=True, text=True,
                             env=env if source else None).stdout
        result = json.loads(next(line for line in out.splitlines() if line.startswith(RESULT))[len(RESULT):])
        result["log_bytes"] = (Path(workdir) / "crawl.log").stat().st_size
    if result["unchecked"]:
        raise SystemExit(f"INVALID RUN: {variant} passed {result['unchecked']} items on unchecked")
    return result


# --- the comparison --------------------------------------------------------------------------------


def compare(pages_dir: Path, index: str, redis_url: str | None, variants: list[str], rounds: int,
            overrides: dict[str, Any], profile_dir: Path | None, base: Path | None) -> None:
    print(f"\n{index} index")
    if base is not None:  # each plugin variant followed by the same at the other commit
        variants = [name for v in variants for name in ([v] if v == "scrapy" else [v, f"{v}{AT_BASE}"])]
    runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    for turn in range(rounds):
        for variant in variants if turn % 2 == 0 else variants[::-1]:  # no variant always first or last
            settings = dict(overrides)
            prefix = f"overhead-{uuid.uuid4().hex[:8]}"
            if variant != "scrapy" and redis_url is not None:  # keys of its own, deleted after it
                settings |= {"SIMHASH_INDEX_URL": redis_url, "SIMHASH_KEY_PREFIX": prefix + ":{spider}"}
            profile = profile_dir / f"{index}-{variant}-{turn}.prof" if profile_dir else None
            name = variant.removesuffix(AT_BASE)
            result = run_crawl(pages_dir, name, settings, profile, base if name != variant else None)
            if variant != "scrapy" and redis_url is not None:
                client = redis.Redis.from_url(redis_url)
                for keys in _chunks(client.scan_iter(f"{prefix}:*", count=1000), 1000):
                    client.delete(*keys)
                client.close()
            runs[variant].append(result)
            per_page = 1e3 * result["cpu"] / result["pages"]
            print(f"  round {turn + 1} {variant:13s}: CPU {result['cpu']:6.2f} s ({per_page:.2f} ms a page), "
                  f"{result['seconds']:5.1f} s, {result['scraped']} kept, {result['dropped']} dropped,"
                  f" log {result['log_bytes']:,} bytes", flush=True)
    if "scrapy" not in runs:
        return
    for variant in (v for v in variants if v != "scrapy"):
        ratios = [run["cpu"] / bare["cpu"] for run, bare in zip(runs[variant], runs["scrapy"])]
        extra = [(run["log_bytes"] - bare["log_bytes"]) / max(run["dropped"], 1)
                 for run, bare in zip(runs[variant], runs["scrapy"])]
        cost = [(run["cpu"] - bare["cpu"]) / run["pages"] for run, bare in zip(runs[variant], runs["scrapy"])]
        print(f"  {variant}: CPU {statistics.median(ratios):.3f}x the crawl without it (pairs "
              f"{', '.join(f'{r:.3f}' for r in ratios)}), {1e3 * statistics.median(cost):.2f} ms a page;"
              f" log {statistics.median(extra):,.0f} bytes a dropped item above Scrapy's own")
        if variant.endswith(AT_BASE) or f"{variant}{AT_BASE}" not in runs:
            continue
        against = [run["cpu"] / other["cpu"] for run, other in zip(runs[variant], runs[f"{variant}{AT_BASE}"])]
        print(f"  {variant} against {variant}{AT_BASE}: CPU {statistics.median(against):.3f}x (pairs "
              f"{', '.join(f'{r:.3f}' for r in against)})")


def _chunks(values, size: int):
    chunk = []
    for value in values:
        chunk.append(value)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--pages-dir", type=Path, help="tools/make_crawl_pages.py's output (default: written now)")
    parser.add_argument("--corpus-pages", type=int, help="only the corpus's first N pages (a quicker run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--indexes", default="sqlite,redis")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--redis-url", help="default: a throwaway redis-server")
    parser.add_argument("--base-source", type=Path, metavar="DIR",
                        help="also run each plugin variant with scrapy_simhash imported from DIR (another commit)")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="write a cProfile of each crawl here")
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of every crawl")
    parser.add_argument("--crawl", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    overrides = json.loads(args.overrides) | dict(pair.split("=", 1) for pair in args.settings)
    if args.crawl:
        return crawl(args.pages_dir, args.crawl, overrides, args.profile)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        pages_dir = args.pages_dir
        if pages_dir is None or not (pages_dir / MANIFEST).exists():
            pages_dir = pages_dir or Path(tmp)
            with args.corpus.open(encoding="utf-8") as lines:
                rows = [json.loads(line) for line in lines][: args.corpus_pages]
            print(f"{write_pages(rows, pages_dir)} pages written to {pages_dir}")
        for index in args.indexes.split(","):
            if index == "redis":
                with nullcontext(args.redis_url) if args.redis_url else throwaway_redis() as url:
                    compare(pages_dir, index, url, variants, args.rounds, overrides, args.profile, args.base_source)
            else:
                compare(pages_dir, index, None, variants, args.rounds, overrides, args.profile, args.base_source)


if __name__ == "__main__":
    main()
