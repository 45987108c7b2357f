"""End-to-end throughput: a near-duplicate stream through SimhashPipeline and a seed-style baseline.

    python benchmarks/pipeline.py [--items 50000] [--concurrency 16] [--redis-url URL]

The shared corpus (title + body_text) is repeated to ``--items`` items: each corpus page once as it
is, the rest near-duplicates of random pages (a few random word edits, two paragraphs swapped, a
different site header and footer), shuffled. The stream goes through the real pipeline (built from a
Scrapy crawler, ``process_item`` awaited, ``--concurrency`` items in flight as Scrapy does) against a
real Redis, and its first ``--baseline-items`` items through a seed-style baseline (per-bit Python
fingerprint, one SMEMBERS per band, a pipelined SADD) on the same server in the same run. Without
``--redis-url`` a throwaway redis-server is started on a free port, since the figures need CONFIG
RESETSTAT and an otherwise empty server.

Printed: items/s of both and their ratio; the CPU time an item costs in this process and in
redis-server (which side bounds the rate); FCALL (round trips) and server-side commands per item
(INFO commandstats, which also counts the commands a script runs); index calls per new and per
duplicate item, counted item by item with MONITOR on the stream's first ``--sample`` items (a fresh
index, one item at a time: with nothing else in flight a merge has no call to ride along with, so
every call is an FCALL of its own there, while in the run a merge rides with the next item's call);
used_memory per kept item. The baseline's per-bit fingerprint makes it slow, so it runs on a prefix
of the same stream, once before and once after the pipeline's run (the load of a shared machine
drifts): the ratio compares rates. ``--presigned`` signs every item before the timed part: the run
then costs what it would if fingerprinting were free, which sizes fingerprinting's share end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import islice
from contextlib import contextmanager, nullcontext
from pathlib import Path

import redis
from itemadapter import ItemAdapter
from scrapy import Spider
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from fingerprint import naive_simhash  # benchmarks/fingerprint.py: the per-bit Python loop SimHash
import scrapy_simhash.index.base
import scrapy_simhash.index.redis
import scrapy_simhash.signer
from scrapy_simhash.pipelines import SimhashPipeline

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus-scrapy-docs.jsonl"
WORD = re.compile(r"\w+")
SITES = [
    ("Docs Mirror", "Home | Guides | API | Blog", "Mirrored with permission. Content licensed CC BY-SA."),
    ("ScrapeHub News", "News | Tutorials | Jobs | About", "Copyright 2024 ScrapeHub. All rights reserved."),
    ("PyCrawl Weekly", "Latest | Archive | Subscribe", "You are reading PyCrawl Weekly. Unsubscribe any time."),
    ("Spider Wiki", "Main page | Recent changes | Random", "Text is available under the Creative Commons License."),
]
ITEM_MARK, END_MARK = "simhash-bench-item", "simhash-bench-end"
STREAM = "simhash-bench:merges"
# Seed-style layout: 4 bands of 16 bits, members "id:fingerprint", max distance 3.
SEED_BANDS, SEED_DISTANCE = 4, 3


# --- the stream ------------------------------------------------------------------------------------


def near_duplicate(doc: dict, rng: random.Random, vocabulary: list[str]) -> str:
    """``doc``'s body with a few word edits, two adjacent paragraphs swapped, another site's furniture."""
    paragraphs = doc["body_text"].split("\n\n")
    if len(paragraphs) > 2:
        i = rng.randrange(len(paragraphs) - 1)
        paragraphs[i], paragraphs[i + 1] = paragraphs[i + 1], paragraphs[i]
    words = "\n\n".join(paragraphs).split(" ")
    for _ in range(rng.randint(1, 3)):
        position = rng.randrange(len(words))
        edit = rng.choice(("replace", "delete", "insert"))
        if edit == "replace":
            words[position] = rng.choice(vocabulary)
        elif edit == "delete" and len(words) > 1:
            del words[position]
        else:
            words.insert(position, rng.choice(vocabulary))
    name, navigation, footer = rng.choice(SITES)
    return f"{name}\n{navigation}\n\n{' '.join(words)}\n\n{footer}"


def make_stream(corpus: list[dict], count: int, seed: int = 7) -> Iterator[dict]:
    """``count`` items: every corpus page once, the rest near-duplicates of random pages, shuffled.

    Items are built as they are consumed (50,000 bodies held at once would take ~0.5 GB); the same
    arguments always give the same stream.
    """
    rng = random.Random(seed)
    vocabulary = sorted({w for doc in corpus[:50] for w in WORD.findall(doc["body_text"])})
    plan = [(i, None) for i in range(min(count, len(corpus)))]
    plan += [(rng.randrange(len(corpus)), rng.getrandbits(32)) for _ in range(count - len(plan))]
    rng.shuffle(plan)
    for position, (index, variant) in enumerate(plan):
        doc = corpus[index]
        if variant is None:
            yield {"url": doc["url"], "title": doc["title"], "body_text": doc["body_text"]}
        else:
            url = f"https://mirror{position}.example.net/{doc['page']}"
            body = near_duplicate(doc, random.Random(variant), vocabulary)
            yield {"url": url, "title": doc["title"], "body_text": body}


# --- the seed-style baseline -----------------------------------------------------------------------


def seed_check_and_add(client: redis.Redis, item_id: str, fingerprint: int) -> bool:
    """One SMEMBERS per band, compare client-side, then SADD to every band in one pipeline.

    Returns True when the item was new (added). Not atomic: two processes can both add.
    """
    size = 64 // SEED_BANDS
    keys = [f"seed:{band}:{fingerprint >> (band * size) & ((1 << size) - 1)}" for band in range(SEED_BANDS)]
    for key in keys:
        for member in client.smembers(key):
            other = int(member.rsplit(b":", 1)[1])
            if (fingerprint ^ other).bit_count() <= SEED_DISTANCE:
                return False
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.sadd(key, f"{item_id}:{fingerprint}")
        pipe.execute()
    return True


def run_baseline(client: redis.Redis, items: Iterable[dict]) -> tuple[int, float, int]:
    """(items, items/s, items kept) of the seed-style baseline; building the items is not timed."""
    count = kept = 0
    elapsed = 0.0
    for item in items:
        start = time.perf_counter()
        kept += seed_check_and_add(client, item["url"], naive_simhash(f"{item['title']}\n{item['body_text']}"))
        elapsed += time.perf_counter() - start
        count += 1
    return count, count / elapsed, kept


# --- the real pipeline -----------------------------------------------------------------------------


class BenchSpider(Spider):
    name = "bench"


async def open_pipeline(redis_url: str, log_dir: Path, merge_log: str = "file") -> SimhashPipeline:
    crawler = get_crawler(
        BenchSpider,
        {
            "SIMHASH_INDEX_URL": redis_url,
            "SIMHASH_FIELDS": ["title", "body_text"],
            "SIMHASH_HTML_FIELDS": [],  # the corpus is plain text: say so, as a user would
            "SIMHASH_MERGE_LOG": (
                f"{redis_url}?stream={STREAM}" if merge_log == "stream" else str(log_dir / "merges.jsonl")
            ),
            "SIMHASH_REVIEW_LOG": "",
            "LOG_LEVEL": "WARNING",
        },
    )
    crawler.spider = BenchSpider.from_crawler(crawler)
    pipeline = SimhashPipeline.from_crawler(crawler)
    await pipeline.open_spider()
    return pipeline


async def process(pipeline: SimhashPipeline, item: dict) -> str:
    """'new' or 'duplicate' (dropped), the outcome the round-trip accounting groups by."""
    try:
        await pipeline.process_item(dict(item))
    except DropItem:
        return "duplicate"
    return "new"


def hand_out_presigned(pipeline: SimhashPipeline, items: Iterable[dict]) -> None:
    """Sign now every text the pipeline will sign for ``items`` and have its signer hand those
    signatures out: the timed run then costs what it would if fingerprinting cost nothing."""
    signer = pipeline.signer
    texts = list({pipeline.reader.page(ItemAdapter(item)).text: None for item in items})
    signed = dict(zip(texts, signer.sign_all(texts)))
    sign_batch = signer._sign_batch
    signer._sign_batch = lambda batch: [signed.get(text) or sign_batch([text])[0] for text in batch]
    gc.freeze()  # the held signatures out of the collector's passes


async def run_pipeline(
    redis_url: str, items: Iterable[dict], log_dir: Path, concurrency: int, merge_log: str = "file",
    admin: redis.Redis | None = None, presigned: Iterable[dict] | None = None,
) -> tuple[int, float, float, dict, str, list[tuple[float, float, float, float, float]]]:
    """(items, items/s, this process's CPU seconds, simhash/* stats, the rule, and for each chunk of
    1,000: items/s, this process's and redis-server's CPU seconds an item, candidates verified and
    candidates rejected an item), ``concurrency`` items in flight as in a crawl.

    Items are built a chunk at a time outside the timed part (wall and CPU time); redis-server's CPU
    is read from ``admin`` between chunks. With ``presigned`` (the same items), their texts are
    signed before the run (:func:`hand_out_presigned`).
    """
    pipeline = await open_pipeline(redis_url, log_dir, merge_log)
    if presigned is not None:
        hand_out_presigned(pipeline, presigned)
    count, curve = 0, []
    elapsed = cpu = 0.0
    items = iter(items)
    while chunk := list(islice(items, 1000)):
        server_start = server_cpu(admin) if admin else 0.0
        stats = pipeline.crawler.stats
        checked, rejected = (stats.get_value(f"simhash/candidates_{what}", 0) for what in ("checked", "rejected"))
        start, cpu_start = time.perf_counter(), time.process_time()
        pending: set[asyncio.Future] = set()
        for item in chunk:
            if len(pending) >= concurrency:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            pending.add(asyncio.ensure_future(process(pipeline, item)))
        await asyncio.gather(*pending)
        seconds, used = time.perf_counter() - start, time.process_time() - cpu_start
        server_used = server_cpu(admin) - server_start if admin else 0.0
        checked = stats.get_value("simhash/candidates_checked", 0) - checked
        rejected = stats.get_value("simhash/candidates_rejected", 0) - rejected
        curve.append((len(chunk) / seconds, used / len(chunk), server_used / len(chunk), checked / len(chunk),
                      rejected / len(chunk)))
        elapsed += seconds
        cpu += used
        count += len(chunk)
    await pipeline.close_spider()
    stats = pipeline.crawler.stats.get_stats()
    rule = f"Jaccard >= {pipeline.config.jaccard_threshold}, {pipeline.layout!r}"
    return count, count / elapsed, cpu, {k: v for k, v in stats.items() if k.startswith("simhash/")}, rule, curve


async def requests_by_outcome(
    redis_url: str, admin: redis.Redis, items: Iterable[dict], log_dir: Path
) -> dict:
    """Index calls each item made, read from MONITOR, totalled by outcome: new, new after candidates
    that Jaccard rejected (indexed by a second call), duplicate (merged by a second call). Items go
    one at a time, so each call is a request of its own.

    MONITOR shows the commands a script runs as ``lua``: those are server-side work, not requests.
    An ECHO from the admin connection marks where each item starts.
    """
    pipeline = await open_pipeline(redis_url, log_dir)
    commands: list[dict] = []
    monitoring = threading.Event()

    def record() -> None:
        with admin.monitor() as monitor:
            monitoring.set()
            for command in monitor.listen():
                commands.append(command)
                if command["command"] == f"ECHO {END_MARK}":
                    return

    reader = threading.Thread(target=record)
    reader.start()
    monitoring.wait()
    outcomes = []
    stats = pipeline.crawler.stats
    for item in items:
        admin.echo(ITEM_MARK)
        rejected = stats.get_value("simhash/candidates_rejected", 0)
        outcome = await process(pipeline, item)
        if outcome == "new" and stats.get_value("simhash/candidates_rejected", 0) > rejected:
            outcome = "new after rejected candidates"
        outcomes.append(outcome)
    admin.echo(END_MARK)
    reader.join()
    await pipeline.close_spider()

    per_item: list[Counter] = []
    for command in commands:
        if command["command"] == f"ECHO {ITEM_MARK}":
            per_item.append(Counter())
        elif per_item and command["client_type"] != "lua" and not command["command"].startswith("ECHO"):
            per_item[-1][command["command"].split(" ", 1)[0].lower()] += 1
    totals: dict[str, tuple[int, Counter]] = {}
    for outcome, counts in zip(outcomes, per_item):
        seen, total = totals.get(outcome, (0, Counter()))
        totals[outcome] = (seen + 1, total + counts)
    return totals


# --- Redis bookkeeping -----------------------------------------------------------------------------


def command_counts(admin: redis.Redis) -> Counter:
    """Calls per command since the last CONFIG RESETSTAT, without the INFO/CONFIG of this script."""
    stats = admin.info("commandstats")
    counts = Counter({name.removeprefix("cmdstat_"): value["calls"] for name, value in stats.items()})
    for own in ("info", "config|resetstat", "config", "flushall", "memory|usage"):
        counts.pop(own, None)
    return counts


def server_cpu(admin: redis.Redis) -> float:
    """CPU seconds the Redis server has used (user + system, all its threads)."""
    info = admin.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def reset(admin: redis.Redis) -> int:
    """Empty the server and its counters; returns the empty server's used_memory."""
    admin.flushall()
    admin.config_resetstat()
    return admin.info("memory")["used_memory"]


def format_counts(counts: Counter, items: int) -> str:
    return ", ".join(f"{name} {calls / items:.2f}" for name, calls in counts.most_common()) or "none"


def wait_until_answering(client: redis.Redis, attempts: int, pause: float) -> None:
    """Ping a redis-server that is starting until it answers; past ``attempts`` the next call says why."""
    for _ in range(attempts):
        try:
            client.ping()
            return
        except redis.ConnectionError:
            time.sleep(pause)


@contextmanager
def throwaway_redis() -> Iterator[str]:
    """A redis-server of this run's own on a free loopback port, killed at the end."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
             "--dir", directory],
            stdout=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}/0"
            client = redis.Redis.from_url(url)
            wait_until_answering(client, attempts=100, pause=0.05)
            client.close()
            yield url
        finally:
            server.kill()
            server.wait()


# --- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--items", type=int, default=50_000, help="stream length (default 50000)")
    parser.add_argument("--baseline-items", type=int, default=3_000,
                        help="the baseline runs on the stream's first N items (default 3000)")
    parser.add_argument("--sample", type=int, default=2_000,
                        help="items whose index calls are counted one by one with MONITOR (default 2000)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="items in flight in the pipeline (default 16; a crawl: up to CONCURRENT_ITEMS)")
    parser.add_argument("--redis-url", help="a Redis of this benchmark's own: it is FLUSHALLed")
    parser.add_argument("--merge-log", choices=["file", "stream"], default="file",
                        help="the merge log as a JSON-lines file (default) or a stream in the same Redis")
    parser.add_argument("--candidates-per-group", type=int,
                        help="patch CANDIDATES_PER_GROUP (0: every candidate), to measure the default")
    parser.add_argument("--listed-per-key", type=int,
                        help="patch LISTED_PER_KEY, to measure the default")
    parser.add_argument("--batches-in-flight", type=int,
                        help="patch BATCHES_IN_FLIGHT (0: no limit, a call each turn)")
    parser.add_argument("--body-chars", type=int,
                        help="cut each corpus page's body to its first N characters: short items, as a listing's")
    parser.add_argument("--batch-characters", type=int,
                        help="patch BATCH_CHARACTERS (texts signed together), to measure the default")
    parser.add_argument("--presigned", action="store_true",
                        help="sign every item before the timed part: what the run costs without fingerprinting")
    args = parser.parse_args()
    if args.batch_characters is not None:
        scrapy_simhash.signer.BATCH_CHARACTERS = args.batch_characters
    if args.batches_in_flight is not None:
        scrapy_simhash.index.redis.BATCHES_IN_FLIGHT = args.batches_in_flight or 1_000_000
    if args.candidates_per_group is not None:
        cap = args.candidates_per_group or 1_000_000
        scrapy_simhash.index.base.CANDIDATES_PER_GROUP = scrapy_simhash.index.redis.CANDIDATES_PER_GROUP = cap
    if args.listed_per_key is not None:
        scrapy_simhash.index.redis.LISTED_PER_KEY = args.listed_per_key
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the clean-ups: the redis-server dies too

    with args.corpus.open(encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    if args.body_chars:
        for doc in corpus:
            doc["body_text"] = doc["body_text"][: args.body_chars].rsplit(" ", 1)[0]

    def stream(limit: int) -> Iterator[dict]:
        return islice(make_stream(corpus, args.items), limit)

    with throwaway_redis() if args.redis_url is None else nullcontext(args.redis_url) as url, \
            tempfile.TemporaryDirectory() as log_dir:
        admin = redis.Redis.from_url(url)

        empty = reset(admin)
        base_count, base_rate, base_kept = run_baseline(admin, stream(args.baseline_items))
        base_commands = command_counts(admin)
        base_memory = admin.info("memory")["used_memory"] - empty

        empty = reset(admin)
        server_start = server_cpu(admin)
        count, rate, client_cpu, stats, rule, curve = asyncio.run(
            run_pipeline(url, stream(args.items), Path(log_dir), args.concurrency, args.merge_log, admin,
                         presigned=stream(args.items) if args.presigned else None)
        )
        server_used = server_cpu(admin) - server_start
        commands = command_counts(admin)
        network = admin.info("stats")
        stream_entries = admin.xlen(STREAM) if args.merge_log == "stream" else 0
        stream_bytes = (admin.memory_usage(STREAM, samples=0) or 0) if stream_entries else 0
        memory = admin.info("memory")["used_memory"] - empty - stream_bytes
        kept = count - stats.get("simhash/duplicates", 0)

        # The baseline again on the same items: the machine's load moves during a long run, and the
        # ratio uses both measurements (harmonic mean), one before and one after the pipeline's.
        reset(admin)
        _, base_rate_after, _ = run_baseline(admin, stream(args.baseline_items))

        reset(admin)
        by_outcome = asyncio.run(
            requests_by_outcome(url, admin, stream(args.sample), Path(log_dir))
        )
        admin.close()

    print(f"stream: {count} items from {len(corpus)} corpus pages (each page once, the rest near-duplicates)")
    base_mean = 2 / (1 / base_rate + 1 / base_rate_after)
    print(f"\nseed-style baseline on the first {base_count}: {base_mean:8.0f} items/s "
          f"({base_rate:.0f} before the pipeline's run, {base_rate_after:.0f} after), kept {base_kept}")
    print(f"  commands/item: {format_counts(base_commands, base_count)}")
    print(f"  round trips/new item: {SEED_BANDS + 1} ({SEED_BANDS} SMEMBERS + 1 pipelined SADD)")
    print(f"  used_memory/kept item: {base_memory / max(base_kept, 1):.0f} B")
    print(f"\nSimhashPipeline on all {count}, {args.concurrency} in flight: {rate:8.0f} items/s, kept {kept}")
    print(f"  rule: {rule}")
    # Which side bounds the rate: both share the machine's cores with each other and everything else.
    print(f"  CPU/item: {1e6 * client_cpu / count:.0f} us in this process (timed part), "
          f"{1e6 * server_used / count:.0f} us in redis-server (the whole run); wall {1e6 / rate:.0f} us")
    calls = commands["fcall"] + commands["evalsha"]  # the index's calls: a function, or an older version's script
    print(f"  FCALL/item: {calls / count:.2f}; server-side commands/item, scripts' included: "
          f"{format_counts(commands, count)}")
    print(f"  network: {network['total_net_input_bytes'] / count:.0f} B an item to redis-server, "
          f"{network['total_net_output_bytes'] / count:.0f} B from it")
    for outcome, (seen, counts) in sorted(by_outcome.items()):
        print(f"  index calls/{outcome} item (MONITOR, one at a time, {seen} of the first {args.sample} items): "
              f"{sum(counts.values()) / seen:.2f} = {format_counts(counts, seen)}")
    print(f"  used_memory: {memory / max(kept, 1):.0f} B per kept item, {memory / count:.0f} B per item "
          f"(records, page data, bands; merge stream apart)")
    if stream_entries:
        print(f"  merge stream: {stream_entries} entries, {stream_bytes / 2**20:.1f} MB "
              f"({stream_bytes / count:.0f} B per item)")
    tenth = max(1, len(curve) // 10)
    tenths = [curve[i:i + tenth] for i in range(0, len(curve), tenth)]
    rates = (len(part) / sum(1 / chunk[0] for chunk in part) for part in tenths)
    print("  by tenth of the run, items/s: " + " ".join(f"{rate:.0f}" for rate in rates))
    for column, what, scale in ((1, "CPU/item in this process, us", 1e6), (2, "CPU/item in redis-server, us", 1e6),
                                (3, "candidates verified an item", 1)):
        means = (scale * sum(chunk[column] for chunk in part) / len(part) for part in tenths)
        print(f"    {what}: " + " ".join(f"{mean:.{0 if scale > 1 else 2}f}" for mean in means))
    # Rejected: verified by Jaccard and under the threshold; the share says how sharp the sketch filter is.
    shares = (sum(chunk[4] for chunk in part) / max(sum(chunk[3] for chunk in part), 1e-9) for part in tenths)
    print("    candidates rejected, % of those verified: " + " ".join(f"{100 * share:.0f}" for share in shares))
    print(f"  stats: {json.dumps(stats, sort_keys=True, default=str)}")
    print(f"\nthroughput ratio: {rate / base_mean:.1f}x the baseline's items/s (target >= 20x)")
    if stats.get("simhash/unchecked"):
        raise SystemExit(f"INVALID RUN: {stats['simhash/unchecked']} items were passed on unchecked (index errors)")


if __name__ == "__main__":
    main()
