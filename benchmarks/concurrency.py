"""Exactly once under concurrency: many items in flight in several processes on one index, against one at a time.

    python benchmarks/concurrency.py [--items 15000] [--processes 4] [--in-flight 1000] [--overlap 0.5]
                                     [--overlap-urls same|new] [--backend redis|sqlite|both]
                                     [--redis-max-connections N] [--redis-socket-timeout S]

Run it from the repository root with the project's venv (``.venv/bin/python``); the default run
takes about 8 minutes on 2 busy cores. Pipeline warnings go to stderr, the report to stdout.

Why: the pipeline promises one canonical per group whatever the concurrency (docs/how-it-works.md
"Exactly one canonical per group", docs/reliability.md "Concurrency and processes"): an item is
kept only when no record it duplicates is in the index, and that check-then-insert is atomic across
the items in flight of one process and across processes sharing the index. This benchmark holds the
pipeline to it with a stream made to race, and measures what the promise costs in kept items and
in items/s.

The stream is ``benchmarks/pipeline.py``'s (every corpus page once, the rest near-duplicates of
random pages, shuffled) with exact copies mixed in: after an item, with probability 1/4, one to
three copies of it (the same title and body_text, another URL) follow at log-uniform distances of
1 to 5,000 positions, so many copies arrive while their original is still in flight. The corpus
itself repeats pages across releases, which adds more identical texts under different URLs.

Runs, each against a fresh index, through the real SimhashPipeline (built from a Scrapy crawler,
``process_item`` awaited; a kept item is followed by the ``item_scraped`` signal, a dropped one by
``item_dropped``, as Scrapy's scraper sends them, so the pipeline confirms its pending canonicals as
in a crawl):

* one at a time: the whole stream, one process, one item in flight;
* concurrent: ``--processes`` OS processes (spawned, opened, then released together by a barrier),
  ``--in-flight`` items in flight in each (that many tasks pulling from the process's slice).
  Stream position j goes to process j mod P; with ``--overlap F`` a fraction F of the positions
  also goes to process j+1 mod P, which meets it at about the same moment (both walk the stream in
  order at the same pace). ``--overlap-urls same`` (the default) keeps the item as it is, two
  crawlers fetching one page at once; ``new`` gives the second process's copy a URL of its own, a
  mirror of the page;
* SQLite also with one process and ``--in-flight`` items (the backend serialises the statements of
  a process on one thread), then with ``--processes`` processes on one file (BEGIN IMMEDIATE
  transactions, docs/reliability.md).

Printed per run: items, identical texts kept more than once (items grouped by their exact title +
body_text string; the promise says 0; how many of them are one stream position handed to two
processes), kept items against the one-at-a-time run's (the relative difference, goal within 3 %:
concurrency changes which item of a group comes first, not how many groups there are), items/s and
its ratio to the one-at-a-time run's (wall time from the barrier to the last process's last item,
all processes' items), CPU per item in the pipeline processes and in redis-server (which side bounds
the rate), dropped items against merge-log "merged" records, and unchecked items (the run is then
invalid). Redis is a throwaway redis-server on a free port (never the one the test suite uses);
SQLite files live in a temporary directory.

The Redis index URL is the user's default: the pipeline keeps at most 64 index calls in flight per
process, under redis-py's pool size. ``--redis-max-connections N`` and ``--redis-socket-timeout S``
add client options to the URL's query. The machine's load moves during a long
run: compare the items/s of runs of one invocation, and read the CPU per item alongside.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import heapq
import json
import math
import multiprocessing
import queue
import random
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import count, islice
from pathlib import Path

import redis
from scrapy import signals
from scrapy.exceptions import DropItem

from pipeline import DEFAULT_CORPUS, make_stream, open_pipeline, server_cpu, throwaway_redis  # benchmarks/pipeline.py
from scrapy_simhash.mergelog import read_merge_log

COPY_SHARE = 0.25  # items followed by exact copies
MAX_COPIES = 3
MAX_SPREAD = 5_000  # positions between an item and its copy: log-uniform in [1, MAX_SPREAD]
KEPT_GOAL = 0.03


# --- the stream ------------------------------------------------------------------------------------


def racing_stream(corpus: list[dict], items: int, seed: int = 7) -> Iterator[dict]:
    """``items`` items: ``make_stream``'s, each followed with probability COPY_SHARE by 1-MAX_COPIES
    exact copies (same title and body_text, new URL) a log-uniform 1..MAX_SPREAD positions later.
    The same arguments always give the same stream."""

    def endless() -> Iterator[dict]:
        rng = random.Random(seed ^ 0x5EED)
        held: list[tuple[int, int, dict]] = []  # (due position, tie-break, copy)
        ties = count()
        position = 0
        # Copies only add items, so ``items`` base items are always enough; the rest is never built.
        for item in make_stream(corpus, items, seed):
            while held and held[0][0] <= position:
                yield heapq.heappop(held)[2]
                position += 1
            yield item
            position += 1
            if rng.random() < COPY_SHARE:
                for _ in range(rng.randint(1, MAX_COPIES)):
                    due = position + int(math.exp(rng.uniform(0, math.log(MAX_SPREAD))))
                    copy = {"url": f"https://copy{next(ties)}.example.com/page", "title": item["title"],
                            "body_text": item["body_text"]}
                    heapq.heappush(held, (due, next(ties), copy))

    return islice(endless(), items)


def text_key(item: dict) -> bytes:
    """The exact text an item is judged on (title and body_text), as a 16-byte digest."""
    text = f"{item['title']}\x00{item['body_text']}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


def slice_for(corpus: list[dict], items: int, worker: int, processes: int, overlap: float,
              overlap_urls: str) -> list[tuple[int, dict]]:
    """Worker ``worker``'s (stream position, item) pairs, in stream order (see the module docstring)."""
    chooser = random.Random(1234)
    mine = []
    for position, item in enumerate(racing_stream(corpus, items)):
        owner = position % processes
        shared = processes > 1 and chooser.random() < overlap
        if owner == worker:
            mine.append((position, item))
        elif shared and (owner + 1) % processes == worker:
            if overlap_urls == "new":
                item = {**item, "url": f"https://second.example.org/{position}"}
            mine.append((position, item))
    return mine


# --- one process's run -----------------------------------------------------------------------------


@dataclass
class WorkerResult:
    worker: int
    items: int
    start: float  # time.monotonic() (system-wide on Linux), after the barrier
    end: float
    cpu: float
    kept: list[tuple[int, bytes, str]]  # (stream position, text key, url) of each kept item
    dropped: int
    merged_records: int  # "merged" records in this process's merge log
    stats: dict = field(default_factory=dict)


async def run_worker(index_url: str, work: list[tuple[int, dict]], in_flight: int, log_dir: Path,
                     worker: int, ready: multiprocessing.Queue, go: multiprocessing.Event) -> WorkerResult:
    pipeline = await open_pipeline(index_url, log_dir)
    crawler = pipeline.crawler
    spider = crawler.spider

    async def one(position: int, item: dict) -> bool:
        # As Scrapy's scraper does after the item pipelines: the signals the pipeline's confirmations hang on.
        try:
            output = await pipeline.process_item(item)
        except DropItem as exc:
            await crawler.signals.send_catch_log_async(
                signal=signals.item_dropped, item=item, response=None, spider=spider, exception=exc
            )
            return False
        await crawler.signals.send_catch_log_async(
            signal=signals.item_scraped, item=output, response=None, spider=spider
        )
        return True

    ready.put(("ready", worker))
    await asyncio.to_thread(go.wait)
    start, cpu_start = time.monotonic(), time.process_time()
    kept: list[tuple[int, bytes, str]] = []
    dropped = 0
    queue_ = iter(work)

    async def lane() -> None:
        # ``in_flight`` lanes pull from one iterator: exactly that many items in flight, O(1) per item.
        nonlocal dropped
        for position, item in queue_:
            if await one(position, item):
                kept.append((position, text_key(item), item["url"]))
            else:
                dropped += 1

    await asyncio.gather(*(lane() for _ in range(min(in_flight, len(work)))))
    end, cpu = time.monotonic(), time.process_time() - cpu_start
    await pipeline.close_spider()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simhash/")}
    merged = sum(1 for r in read_merge_log(str(log_dir / "merges.jsonl")) if r.get("decision") == "merged")
    return WorkerResult(worker, len(work), start, end, cpu, kept, dropped, merged, stats)


def worker_main(index_url: str, corpus_path: str, items: int, worker: int, processes: int, overlap: float,
                overlap_urls: str, in_flight: int, log_dir: str, ready: multiprocessing.Queue,
                go: multiprocessing.Event, results: multiprocessing.Queue) -> None:
    """One OS process: build its slice (not timed), open the pipeline, wait for the barrier, run."""
    with open(corpus_path, encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    work = slice_for(corpus, items, worker, processes, overlap, overlap_urls)
    del corpus
    directory = Path(log_dir) / f"worker{worker}"
    directory.mkdir(parents=True, exist_ok=True)
    results.put(asyncio.run(run_worker(index_url, work, in_flight, directory, worker, ready, go)))


# --- a run: several processes, released together ----------------------------------------------------


@dataclass
class Run:
    label: str
    processes: int
    in_flight: int
    items: int
    kept: list[tuple[int, bytes, str]]
    dropped: int
    merged_records: int
    wall: float
    cpu: float
    stats: Counter
    server_cpu: float | None = None  # redis-server's CPU seconds over the run (None: SQLite)

    @property
    def rate(self) -> float:
        return self.items / self.wall

    def kept_twice(self) -> dict[bytes, list[tuple[int, str]]]:
        """Texts kept more than once: text key -> the (position, url) of each kept item."""
        by_text: dict[bytes, list[tuple[int, str]]] = defaultdict(list)
        for position, key, url in self.kept:
            by_text[key].append((position, url))
        return {key: sorted(found) for key, found in by_text.items() if len(found) > 1}


def run(label: str, index_url: str, args: argparse.Namespace, processes: int, in_flight: int, overlap: float,
        log_dir: Path) -> Run:
    context = multiprocessing.get_context("spawn")
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    workers = [
        context.Process(
            target=worker_main,
            args=(index_url, str(args.corpus), args.items, w, processes, overlap, args.overlap_urls, in_flight,
                  str(log_dir / label.replace(" ", "_")), ready, go, results),
            daemon=True,
        )
        for w in range(processes)
    ]
    for worker in workers:
        worker.start()

    def receive(source: multiprocessing.Queue):
        while True:
            try:
                return source.get(timeout=1.0)
            except queue.Empty:
                dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if dead:
                    raise SystemExit(f"{label}: a worker process failed (exit codes {dead})") from None

    try:
        for _ in workers:
            receive(ready)
        go.set()
        outcome: list[WorkerResult] = [receive(results) for _ in workers]
        for worker in workers:
            worker.join()
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
                worker.join()
    stats: Counter = Counter()
    for result in outcome:
        stats.update({k: v for k, v in result.stats.items() if isinstance(v, int)})
    return Run(
        label=label,
        processes=processes,
        in_flight=in_flight,
        items=sum(r.items for r in outcome),
        kept=[kept for r in outcome for kept in r.kept],
        dropped=sum(r.dropped for r in outcome),
        merged_records=sum(r.merged_records for r in outcome),
        wall=max(r.end for r in outcome) - min(r.start for r in outcome),
        cpu=sum(r.cpu for r in outcome),
        stats=stats,
    )


# --- report ----------------------------------------------------------------------------------------


def report(result: Run, baseline: Run | None) -> bool:
    """Print one run; False when it broke the promise (a text kept twice) or is invalid."""
    twice = result.kept_twice()
    kept = len(result.kept)
    print(f"  {result.label}: {result.processes} process(es) x {result.in_flight} in flight, {result.items} items")
    # The same stream position kept twice: one item that both processes it went to kept.
    same_item = sum(1 for found in twice.values() if len({position for position, _ in found}) < len(found))
    print(f"    identical texts kept more than once: {len(twice)}"
          f" ({sum(len(v) - 1 for v in twice.values())} extra items kept; for {same_item} of the texts, one stream"
          f" position kept by both processes it was handed to)")
    for key, found in list(twice.items())[:3]:
        print(f"      e.g. text {key.hex()[:12]} kept {len(found)}x: "
              + ", ".join(f"#{position} {url}" for position, url in found[:4]))
    line = f"    kept: {kept}"
    if baseline is not None and baseline is not result:
        base_kept = len(baseline.kept)
        difference = (kept - base_kept) / base_kept
        verdict = "within" if abs(difference) <= KEPT_GOAL else "OUTSIDE"
        line += f" vs {base_kept} one at a time: {difference:+.2%} ({verdict} the {KEPT_GOAL:.0%} goal)"
    print(line)
    server = "" if result.server_cpu is None else f", {1e3 * result.server_cpu / result.items:.1f} ms in redis-server"
    line = (f"    items/s: {result.rate:.0f} (wall {result.wall:.1f} s; "
            f"CPU/item {1e3 * result.cpu / result.items:.1f} ms in the pipeline processes{server})")
    if baseline is not None and baseline is not result:
        line += f"; {result.rate / baseline.rate:.2f}x the one-at-a-time run's {baseline.rate:.0f}"
    print(line)
    unchecked = result.stats.get("simhash/unchecked", 0)
    print(f"    dropped: {result.dropped}, merge-log 'merged' records: {result.merged_records}; "
          f"unchecked: {unchecked}; index errors (retried): {result.stats.get('simhash/index_errors', 0)}; "
          f"false positives: {result.stats.get('simhash/candidates_rejected', 0)}; "
          f"id collisions: {result.stats.get('simhash/id_collisions', 0)}")
    valid = not unchecked and result.dropped == result.merged_records
    if not valid:
        print("    INVALID RUN: items passed unchecked, or dropped items and merge records disagree")
    return valid and not twice


def fresh_redis(url: str) -> str:
    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()
    return url


def redis_query(url: str | None, args: argparse.Namespace) -> str:
    """The client options added to the index URL's query (redis-py reads them from there, as a user's
    SIMHASH_INDEX_URL would carry them)."""
    options = []
    if args.redis_max_connections:
        options.append(f"max_connections={args.redis_max_connections}")
    if args.redis_socket_timeout:
        timeout = f"{args.redis_socket_timeout:g}"
        options += [f"socket_timeout={timeout}", f"socket_connect_timeout={timeout}"]
    if not options:
        return ""
    return ("&" if url and "?" in url else "?") + "&".join(options)


def backend_runs(backend: str, args: argparse.Namespace, redis_url: str | None, directory: Path) -> bool:
    counter = count()

    def fresh() -> str:
        if backend == "redis":
            assert redis_url is not None
            fresh_redis(redis_url)
            return redis_url + redis_query(redis_url, args)
        return f"sqlite:///{directory}/index{next(counter)}.sqlite3"

    def measured(label: str, processes: int, in_flight: int, overlap: float) -> Run:
        url = fresh()
        if backend != "redis":
            return run(label, url, args, processes, in_flight, overlap, directory)
        admin = redis.Redis.from_url(redis_url)
        before = server_cpu(admin)
        result = run(label, url, args, processes, in_flight, overlap, directory)
        result.server_cpu = server_cpu(admin) - before  # from spawn to close: a little more than the timed part
        admin.close()
        return result

    print(f"\n{backend}:" + (f" index URL ...{redis_query(redis_url, args)}" if backend == "redis" else ""))
    serial = measured(f"{backend} one at a time", 1, 1, 0.0)
    ok = report(serial, serial)
    configurations = [(args.processes, args.in_flight)]
    if backend == "sqlite":
        configurations.insert(0, (1, args.in_flight))
    for processes, in_flight in configurations:
        overlap = args.overlap if processes > 1 else 0.0
        label = f"{backend} concurrent {processes}p"
        result = measured(label, processes, in_flight, overlap)
        ok = report(result, serial) and ok
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--items", type=int, default=15_000, help="stream length (default 15000)")
    parser.add_argument("--processes", type=int, default=4, help="processes sharing the index (default 4)")
    parser.add_argument("--in-flight", type=int, default=1_000, help="items in flight per process (default 1000)")
    parser.add_argument("--overlap", type=float, default=0.5,
                        help="share of stream positions that a second process also gets (default 0.5)")
    parser.add_argument("--overlap-urls", choices=("same", "new"), default="same",
                        help="the second process's copy keeps the URL (same page crawled twice) or gets its own")
    parser.add_argument("--backend", choices=("redis", "sqlite", "both"), default="both")
    parser.add_argument("--redis-url",
                        help="a Redis of this benchmark's own: it is FLUSHALLed (default: a throwaway one)")
    parser.add_argument("--redis-max-connections", type=int, default=0,
                        help="max_connections=N added to the index URL (default: none, redis-py's own)")
    parser.add_argument("--redis-socket-timeout", type=float, default=0.0,
                        help="socket_timeout and socket_connect_timeout added to the index URL, seconds "
                        "(default: none, redis-py's own)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the clean-ups: the redis-server dies too

    with args.corpus.open(encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    texts = Counter(text_key(item) for item in racing_stream(corpus, args.items))
    repeated = {key: n for key, n in texts.items() if n > 1}
    print(f"stream: {args.items} items, {len(texts)} distinct texts; {len(repeated)} texts occur more than once "
          f"({sum(repeated.values())} items); the rest near-duplicates and unique pages")
    print(f"concurrent runs: position j -> process j mod P, {args.overlap:.0%} of positions also to process "
          f"j+1 mod P ({args.overlap_urls} URL)")
    del corpus, texts, repeated

    backends = ("redis", "sqlite") if args.backend == "both" else (args.backend,)
    ok = True
    with tempfile.TemporaryDirectory() as directory:
        needs_redis = "redis" in backends
        with (throwaway_redis() if needs_redis and args.redis_url is None else nullcontext(args.redis_url)) as url:
            for backend in backends:
                ok = backend_runs(backend, args, url, Path(directory)) and ok
    print("\nexactly once: " + ("held" if ok else "BROKEN or invalid (see above)"))


if __name__ == "__main__":
    main()
