"""Items in flight in SimhashPipeline during a real Scrapy crawl, Scrapy's settings left as they are.

    python benchmarks/crawl_in_flight.py [--pages 8000]

``pipeline.py`` keeps ``--concurrency`` items in flight (16 by default). How many a crawl keeps is
Scrapy's business: the downloader fetches ``CONCURRENT_REQUESTS`` pages at once, and the scraper
takes every downloaded response while the bodies of the responses whose items are still in the
item pipelines total at most ``SCRAPER_SLOT_MAX_ACTIVE_SIZE`` (5 MB). When the pipeline is slower
than the downloads, items wait in it until that bound holds the downloads back. This benchmark
measures the count instead of assuming it.

The stream is ``pipeline.py``'s (corpus pages and near-duplicates of them), served as HTML pages by
a local HTTP/1.1 server in a process of its own (title, a site's header and footer, the body's
paragraphs as ``<p>``). A spider with Scrapy's default settings requests every page, extracts
``title`` and ``body_text`` with CSS selectors and yields one item a page. Two crawls: one whose
pipeline only counts (how fast Scrapy fetches and parses here), one through SimhashPipeline against
a throwaway Redis, its merge log in a temporary directory.

Printed per crawl: pages/s, the crawl's CPU a page, the mean response body, and the items in flight
in the last pipeline (entered ``process_item``, not yet returned): the mean over time, the median
and the 90th percentile over time, the most, and the share of time with at least 16 and at least
32; for SimhashPipeline also its index function calls an item (Redis INFO commandstats), which
``pipeline.py`` prints for its own stream.
"""

from __future__ import annotations

import argparse
import html
import json
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from pathlib import Path

import redis

from pipeline import DEFAULT_CORPUS, SITES, make_stream, throwaway_redis  # benchmarks/pipeline.py

RESULT = "result: "


# --- the site --------------------------------------------------------------------------------------


def page_html(position: int, item: dict) -> bytes:
    """The item as a site's page: its title, the site's header and footer, one ``<p>`` a paragraph."""
    site, header, footer = SITES[position % len(SITES)]
    paragraphs = "".join(f"<p>{html.escape(p)}</p>\n" for p in item["body_text"].split("\n\n"))
    return (
        f"<!DOCTYPE html><html><head><title>{html.escape(item['title'])}</title></head><body>\n"
        f"<header><h1>{site}</h1><nav>{header}</nav></header>\n"
        f"<article>\n{paragraphs}</article>\n<footer>{footer}</footer></body></html>\n"
    ).encode()


def serve(corpus: Path, pages: int) -> None:
    """Serve page ``/N`` of the stream on a free loopback port; print the port, then serve for good."""
    with corpus.open(encoding="utf-8") as lines:
        documents = [json.loads(line) for line in lines]
    bodies = [page_html(i, item) for i, item in enumerate(islice(make_stream(documents, pages), pages))]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the crawler reuses its connections
        disable_nagle_algorithm = True  # headers and body go out as two writes: no delayed-ACK stall

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            try:
                body = bodies[int(self.path.strip("/"))]
            except (ValueError, IndexError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


# --- the crawl -------------------------------------------------------------------------------------


def crawl(port: int, pages: int, redis_url: str | None, log_dir: str) -> None:
    """Crawl the site with Scrapy's defaults; print the result as one JSON line after RESULT."""
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess

    from scrapy_simhash.pipelines import SimhashPipeline

    class InFlight:
        """Time integral of the items inside ``process_item``, by count."""

        def __init__(self) -> None:
            self.now = self.most = 0
            self.since = time.perf_counter()
            self.time_at: dict[int, float] = {}
            self.body_bytes = self.responses = 0

        def change(self, by: int) -> None:
            moment = time.perf_counter()
            self.time_at[self.now] = self.time_at.get(self.now, 0.0) + moment - self.since
            self.now, self.since = self.now + by, moment
            self.most = max(self.most, self.now)

        def summary(self) -> dict:
            total = sum(self.time_at.values())
            ordered = sorted(self.time_at.items())

            def quantile(q: float) -> int:
                seen = 0.0
                for count, spent in ordered:
                    seen += spent
                    if seen >= q * total:
                        return count
                return ordered[-1][0]

            return {
                "mean": sum(count * spent for count, spent in ordered) / total,
                "median": quantile(0.5),
                "p90": quantile(0.9),
                "most": self.most,
                "at_least_16": sum(spent for count, spent in ordered if count >= 16) / total,
                "at_least_32": sum(spent for count, spent in ordered if count >= 32) / total,
                "mean_body": self.body_bytes / max(self.responses, 1),
            }

    in_flight = InFlight()

    class Counted:
        """Counts the items inside the ``process_item`` of the pipeline it comes before."""

        async def process_item(self, item: dict) -> dict:
            in_flight.change(+1)
            try:
                return await super().process_item(item)
            finally:
                in_flight.change(-1)

    class Passing:
        async def process_item(self, item: dict) -> dict:
            return item

    class CountedPassing(Counted, Passing):
        pass

    class CountedSimhashPipeline(Counted, SimhashPipeline):
        pass

    class SiteSpider(Spider):
        name = "site"

        async def start(self):
            for n in range(pages):
                yield Request(f"http://127.0.0.1:{port}/{n}")

        def parse(self, response):
            in_flight.body_bytes += len(response.body)
            in_flight.responses += 1
            yield {
                "url": response.url,
                "title": response.css("title::text").get(),
                "body_text": "\n\n".join(response.css("article p::text").getall()),
            }

    pipeline = CountedSimhashPipeline if redis_url else CountedPassing
    settings = {
        "ITEM_PIPELINES": {pipeline: 300},
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "SIMHASH_INDEX_URL": redis_url,
        "SIMHASH_FIELDS": ["title", "body_text"],
        "SIMHASH_HTML_FIELDS": [],
        "SIMHASH_MERGE_LOG": str(Path(log_dir) / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": "",
        "SIMHASH_DROP_LOG_LEVEL": "DEBUG",
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(SiteSpider)
    process.crawl(crawler)
    start, cpu_start = time.perf_counter(), time.process_time()
    process.start()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    stats = crawler.stats.get_stats()
    result = in_flight.summary() | {
        "pages_per_second": stats.get("response_received_count", 0) / seconds,
        "cpu_per_page": cpu / max(stats.get("response_received_count", 0), 1),
        "responses": stats.get("response_received_count", 0),
        "dropped": stats.get("simhash/dropped", 0),
        "unchecked": stats.get("simhash/unchecked", 0),
    }
    print(RESULT + json.dumps(result), flush=True)


def run_crawl(port: int, pages: int, redis_url: str | None) -> dict:
    with tempfile.TemporaryDirectory() as log_dir:
        command = [sys.executable, __file__, "--crawl", str(port), "--pages", str(pages), "--log-dir", log_dir]
        if redis_url:
            command += ["--redis-url", redis_url]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith(RESULT))[len(RESULT):])


def report(what: str, result: dict) -> None:
    print(f"{what}: {result['pages_per_second']:.0f} pages/s, {1e6 * result['cpu_per_page']:.0f} us of the "
          f"crawl's CPU a page ({result['responses']} responses, {result['mean_body'] / 1000:.1f} kB a body)")
    print(f"  items in flight in the pipeline: mean {result['mean']:.1f}, median {result['median']}, "
          f"90th percentile {result['p90']}, most {result['most']}; "
          f"at least 16 {result['at_least_16']:.0%} of the time, at least 32 {result['at_least_32']:.0%}")
    if result.get("unchecked"):
        raise SystemExit(f"INVALID RUN: {result['unchecked']} items were passed on unchecked")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--pages", type=int, default=8_000, help="pages crawled (default 8000)")
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--crawl", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.corpus, args.pages)
    if args.crawl:
        return crawl(args.crawl, args.pages, args.redis_url, args.log_dir)

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--pages", str(args.pages), "--corpus", str(args.corpus)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        port = int(server.stdout.readline())
        report("Scrapy alone (a pipeline that only counts)", run_crawl(port, args.pages, None))
        with throwaway_redis() as url:
            result = run_crawl(port, args.pages, url)
            calls = redis.Redis.from_url(url).info("commandstats").get("cmdstat_fcall", {}).get("calls", 0)
            report("Scrapy with SimhashPipeline", result)
            print(f"  index function calls an item: {calls / max(result['responses'], 1):.2f}")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
