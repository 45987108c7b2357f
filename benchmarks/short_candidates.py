"""What the candidates Jaccard rejects are, in pipeline.py's stream of short texts (issue 45).

    python benchmarks/short_candidates.py [--items 20000] [--body-chars 1000] [--redis-url URL]
    python benchmarks/short_candidates.py --stream        # the stream's pairs alone, no index
    python benchmarks/short_candidates.py --edits-by-length   # pipeline.py, word edits scaled
    python benchmarks/short_candidates.py --site-hosts        # pipeline.py, a site a host, learner on

The default runs pipeline.py's stream through the real pipeline (``run_pipeline``) with
``judge.verify`` and the index's lookups observed: each verified candidate's exact Jaccard, its
sketch estimate, whether it is a record of the same corpus page (any release); by tenth of the run
the candidates a lookup and redis-server's commands an item (INFO commandstats). On the logged
pairs it counts what filters would skip: the size bound, a bound from the sketch bins that differ,
a minimum estimate. ``--stream`` measures the stream's pairs (distinct texts, two variants of one
page). ``--edits-by-length`` runs pipeline.py with each variant's 1-3 word edits made with
probability words / 1,480 (a whole page's rate), everything else as pipeline.py does.
``--site-hosts`` runs pipeline.py with each variant under its site's host (four hosts, not one an
item) and the add-on's furniture learner on, so the site lines can be learned as furniture.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import redis

import pipeline as bench  # benchmarks/pipeline.py
import scrapy_simhash.judge as judge
import scrapy_simhash.pipelines as pipelines
from scrapy_simhash.fingerprint import Fingerprinter, jaccard_hashes
from scrapy_simhash.minhash import Layout

THRESHOLD, MARGIN = 0.82, judge.CONTENT_MARGIN
LAYOUT = Layout(bands=14, rows=6, min_estimate=0.73, size=176)


def load(corpus_path: Path, body_chars: int) -> list[dict]:
    corpus = [json.loads(line) for line in corpus_path.open(encoding="utf-8")]
    if body_chars:
        for doc in corpus:
            doc["body_text"] = doc["body_text"][:body_chars].rsplit(" ", 1)[0]
    return corpus


def bin_minima(hashes: np.ndarray, size: int) -> np.ndarray:
    """Each bin's smallest hash (-1: empty), bins as minhash.Layout cuts them."""
    bins = (hashes.astype(np.uint64) * np.uint64(size) >> np.uint64(32)).astype(np.int64)
    first = np.r_[True, bins[1:] != bins[:-1]]
    minima = np.full(size, -1, np.int64)
    minima[bins[first]] = hashes[first]
    return minima


def differing_bins(a: np.ndarray, b: np.ndarray, size: int) -> int:
    """Bins whose contents provably differ: filled in one set only, or minima with other low bytes.
    Each holds an element of the symmetric difference of its own, so |A ^ B| >= this."""
    ma, mb = bin_minima(a, size), bin_minima(b, size)
    fa, fb = ma >= 0, mb >= 0
    return int(np.count_nonzero(fa != fb) + np.count_nonzero(fa & fb & ((ma & 255) != (mb & 255))))


def upper_bound(a: np.ndarray, b: np.ndarray, size: int) -> float:
    """J <= (S - d) / (S + d), S = |A| + |B|, d <= |A ^ B| (J falls as |A ^ B| grows)."""
    total, d = len(a) + len(b), differing_bins(a, b, size)
    return (total - d) / (total + d)


async def observed_run(url: str, items: list[dict]) -> tuple[dict, list, list, list, dict]:
    """(stats, verified (query url, candidate url, J, equal), lookups (query url, candidates),
    commandstats at each chunk's start and end, each item's verification hashes by URL)."""
    verified, lookups, commands, hashes = [], [], [], {}
    verify, place = judge.verify, pipelines.place

    async def observed_verify(record, candidates, details, threshold, furniture=None):
        best, rejected, unreadable = await verify(record, candidates, details, threshold, furniture)
        for v in ([best] if best else []) + rejected:
            verified.append((record.url, v.details.url, v.jaccard, v.candidate.equal))
        return best, rejected, unreadable

    async def observed_place(index, record, threshold, furniture=None):
        hashes[record.url] = record.hashes.copy()
        if not getattr(index, "observed", False):
            check_and_add = index.check_and_add

            async def observed_lookup(rec, since=0):
                lookup = await check_and_add(rec, since)
                lookups.append((rec.url, len(lookup.candidates)))
                return lookup
            index.check_and_add, index.observed = observed_lookup, True
        return await place(index, record, threshold, furniture)

    server_cpu = bench.server_cpu

    def observed_cpu(admin):
        commands.append({k: v["calls"] for k, v in admin.info("commandstats").items()})
        return server_cpu(admin)

    judge.verify, pipelines.place, bench.server_cpu = observed_verify, observed_place, observed_cpu
    admin = redis.Redis.from_url(url)
    bench.reset(admin)
    with tempfile.TemporaryDirectory() as log_dir:
        _, _, _, stats, _, _ = await bench.run_pipeline(url, iter(items), Path(log_dir), 16, admin=admin)
    return stats, verified, lookups, commands, hashes


def histogram(values: list[float], edges: list[float]) -> str:
    counts, _ = np.histogram(values, bins=edges)
    return ", ".join(f"[{lo:.2f},{hi:.2f}) {n}" for lo, hi, n in zip(edges[:-1], edges[1:], counts))


def report_run(args: argparse.Namespace) -> None:
    corpus = load(args.corpus, args.body_chars)
    items = list(bench.make_stream(corpus, args.items))
    page_of_url = {doc["url"]: doc["page"] for doc in corpus}

    def page(url: str) -> str:
        return page_of_url.get(url) or url.split("/", 3)[3]

    with bench.throwaway_redis() if args.redis_url is None else nullcontext(args.redis_url) as url:
        stats, verified, lookups, commands, hashes = asyncio.run(observed_run(url, items))
    position = {item["url"]: i for i, item in enumerate(items)}
    tenth = len(items) / 10
    rejected = [v for v in verified if v[2] < THRESHOLD]
    accepted = [v for v in verified if v[2] >= THRESHOLD]
    print(f"{len(items)} items, body cut at {args.body_chars or 'nothing'}: kept {stats['simhash/unique']}, "
          f"checked {stats['simhash/candidates_checked']}, rejected {stats['simhash/candidates_rejected']} "
          f"({stats['simhash/candidates_rejected'] / stats['simhash/candidates_checked']:.1%})")
    print(f"observed verifications: {len(rejected)} rejected, {len(accepted)} matched")
    same = sum(page(q) == page(c) for q, c, _, _ in rejected)
    print(f"rejected of the same corpus page (any release): {same} ({same / len(rejected):.1%})")
    print("rejected, exact J: " + histogram([v[2] for v in rejected],
                                            [0, 0.6, 0.65, 0.7, 0.72, 0.74, 0.76, 0.78, 0.8, 0.81, 0.82]))
    estimates = [0.73, 0.76, 0.78, 0.8, 0.82, 0.85, 0.9, 0.95, 1.01]
    print("rejected, sketch estimate: " + histogram([LAYOUT.estimate(v[3]) for v in rejected], estimates))
    print("matched, sketch estimate: " + histogram([LAYOUT.estimate(v[3]) for v in accepted], estimates))
    print(f"lowest estimate of a match: {min(LAYOUT.estimate(v[3]) for v in accepted):.4f} "
          f"(min_equal {LAYOUT.min_equal} bytes)")
    sizes = np.array([len(h) for h in hashes.values()])
    filled = np.array([np.count_nonzero(bin_minima(h, LAYOUT.size) >= 0) for h in hashes.values()])
    print(f"hashes a text: median {np.median(sizes):.0f} (p10 {np.percentile(sizes, 10):.0f}, "
          f"p90 {np.percentile(sizes, 90):.0f}); filled bins of {LAYOUT.size}: median {np.median(filled):.0f}")
    print("model P(candidate) of the layout at J: " + ", ".join(
        f"{j} {LAYOUT.candidate_probability(j):.3f}" for j in (0.67, 0.7, 0.74, 0.78, 0.8, 0.82)))

    by_tenth = defaultdict(lambda: [0, 0])
    for q, _, j, _ in verified:
        by_tenth[int(position[q] // tenth)][j < THRESHOLD] += 1
    print("by tenth, rejected an item: " + " ".join(f"{by_tenth[t][1] / tenth:.2f}" for t in range(10)))
    print("by tenth, matched an item: " + " ".join(f"{by_tenth[t][0] / tenth:.2f}" for t in range(10)))
    per_lookup = defaultdict(list)
    for q, n in lookups:
        per_lookup[int(position[q] // tenth)].append(n)
    print("by tenth, candidates a lookup: " + " ".join(f"{np.mean(per_lookup[t]):.1f}" for t in range(10)))
    chunks = [(commands[2 * i], commands[2 * i + 1]) for i in range(len(commands) // 2)]
    per_tenth = max(1, len(chunks) // 10)
    for name in ("getrange", "get", "hget"):
        key = f"cmdstat_{name}"
        calls = [sum(end.get(key, 0) - start.get(key, 0) for start, end in chunks[t:t + per_tenth])
                 / (1000 * per_tenth) for t in range(0, len(chunks), per_tenth)]
        print(f"by tenth, {name.upper()} an item (scripts' commands): " + " ".join(f"{c:.1f}" for c in calls))

    pairs = [(hashes[q], hashes[c], j) for q, c, j, _ in verified if c in hashes]
    no_rejected = sum(j < THRESHOLD for _, _, j in pairs)
    size_bound = sum(j < THRESHOLD and min(len(a), len(b)) < THRESHOLD * max(len(a), len(b)) for a, b, j in pairs)
    print(f"\nfilters on the {len(pairs)} logged pairs ({no_rejected} rejected):")
    print(f"  size bound min/max < {THRESHOLD}: skips {size_bound} rejected")
    for size in (176, 512, 1024):
        bounds = [(upper_bound(a, b, size), j) for a, b, j in pairs]
        wrong = sum(ub < j - 1e-12 for ub, j in bounds)
        skipped = sum(ub < THRESHOLD for ub, j in bounds if j < THRESHOLD)
        same_host = sum(ub < THRESHOLD - MARGIN for ub, j in bounds if j < THRESHOLD)
        lost = sum(ub < THRESHOLD for ub, j in bounds if j >= THRESHOLD)
        print(f"  differing bins of {size} (both sets' filled bins known): skips {skipped} "
              f"({skipped / no_rejected:.1%}), {same_host} under {THRESHOLD - MARGIN:.2f}; matches skipped {lost}; "
              f"bound under the exact J {wrong}")
    best = defaultdict(float)
    for q, _, j, equal in verified:
        if j >= THRESHOLD:
            best[q] = max(best[q], LAYOUT.estimate(equal))
    for floor in (0.75, 0.77, 0.8, 0.82):
        cut = sum(LAYOUT.estimate(v[3]) < floor for v in rejected)
        lost = sum(b < floor for b in best.values())
        print(f"  minimum estimate {floor}: skips {cut} rejected ({cut / len(rejected):.0%}); "
              f"{lost} of {len(best)} dropped items have no verified match at or above it")


def report_stream(args: argparse.Namespace) -> None:
    fingerprinter = Fingerprinter()

    def hashes(doc: dict, body: str | None = None) -> np.ndarray:
        text = f"{doc['title']}\n\n{doc['body_text'] if body is None else body}"
        return fingerprinter.signature(text).hashes.astype(np.uint32)

    for body_chars in (args.body_chars, 0):
        corpus = load(args.corpus, body_chars)
        distinct = len({(doc["title"], doc["body_text"]) for doc in corpus})
        rng = random.Random(1)
        vocabulary = sorted({w for doc in corpus[:50] for w in bench.WORD.findall(doc["body_text"])})
        two, bare = [], []
        for doc in rng.sample(corpus, 200):
            a, b = (bench.near_duplicate(doc, random.Random(rng.getrandbits(32)), vocabulary) for _ in range(2))
            two.append(jaccard_hashes(hashes(doc, a), hashes(doc, b)))
            site_off = ["\n".join(text.split("\n")[3:-2]) for text in (a, b)]
            bare.append(jaccard_hashes(hashes(doc, site_off[0]), hashes(doc, site_off[1])))
        print(f"body cut at {body_chars or 'nothing'}: {distinct} distinct texts of {len(corpus)} pages")
        for what, values in (("two variants of one page", two), ("the same without the site lines", bare)):
            values = np.array(values)
            print(f"  {what}: J >= {THRESHOLD} {np.mean(values >= THRESHOLD):.0%}, median {np.median(values):.3f}, "
                  f"in [0.65, {THRESHOLD}) {np.mean((values >= 0.65) & (values < THRESHOLD)):.0%}")


def edits_by_length(doc: dict, rng: random.Random, vocabulary: list[str]) -> str:
    """pipeline.near_duplicate with its word edits made with probability words / 1,480."""
    paragraphs = doc["body_text"].split("\n\n")
    if len(paragraphs) > 2:
        i = rng.randrange(len(paragraphs) - 1)
        paragraphs[i], paragraphs[i + 1] = paragraphs[i + 1], paragraphs[i]
    words = "\n\n".join(paragraphs).split(" ")
    for _ in range(rng.randint(1, 3) if rng.random() < len(words) / 1480 else 0):
        position = rng.randrange(len(words))
        edit = rng.choice(("replace", "delete", "insert"))
        if edit == "replace":
            words[position] = rng.choice(vocabulary)
        elif edit == "delete" and len(words) > 1:
            del words[position]
        else:
            words.insert(position, rng.choice(vocabulary))
    name, navigation, footer = rng.choice(bench.SITES)
    return f"{name}\n{navigation}\n\n{' '.join(words)}\n\n{footer}"


def site_hosts(corpus: list[dict], count: int, seed: int = 7):
    """pipeline.make_stream's items, each variant's URL under its site's host."""
    for position, item in enumerate(make_stream(corpus, count, seed)):
        if ".example.net/" in item["url"]:
            site = item["body_text"].split("\n", 1)[0].replace(" ", "").lower()
            item["url"] = f"https://{site}.example.net/{position}/{item['url'].split('/', 3)[3]}"
        yield item


make_stream, get_crawler = bench.make_stream, bench.get_crawler


def main() -> None:
    if "--site-hosts" in sys.argv:
        sys.argv.remove("--site-hosts")
        bench.make_stream = site_hosts
        bench.get_crawler = lambda spider, settings: get_crawler(spider, {**settings, "SIMHASH_BOILERPLATE": True})
        bench.main()
        return
    if "--edits-by-length" in sys.argv:
        sys.argv.remove("--edits-by-length")
        bench.near_duplicate = edits_by_length
        bench.main()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=bench.DEFAULT_CORPUS)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--body-chars", type=int, default=1000)
    parser.add_argument("--redis-url", help="a Redis of this script's own: it is FLUSHALLed")
    parser.add_argument("--stream", action="store_true", help="the stream's pairs alone")
    args = parser.parse_args()
    report_stream(args) if args.stream else report_run(args)


if __name__ == "__main__":
    main()
