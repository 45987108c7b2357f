"""Four real crawler processes, one Redis, the same duplicate-heavy stream in four different orders.

Each process is a separate OS process running a real Scrapy crawl (``tests/crawl_stream.py``); a
barrier makes them ingest at the same moment. Every near-duplicate cluster must end with exactly one
canonical record, every item must be kept or logged as merged (nothing else), and no merge may be
logged twice. Erasing a canonical record afterwards leaves no trace of it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from redis_servers import value_of
from scrapy_simhash.fingerprint import Fingerprinter, hamming, jaccard_hashes
from scrapy_simhash.index import open_index
from scrapy_simhash.layout import make_layout
from scrapy_simhash.mergelog import read_merge_log

pytestmark = pytest.mark.slow

CRAWLERS = 4
CLUSTERS = 25
MEMBERS = 4  # per cluster and crawler: each crawler sees CLUSTERS * MEMBERS items
MAX_DISTANCE, JACCARD = 3, 0.82
DRIVER = Path(__file__).with_name("crawl_stream.py")


def one_word_edits(body: str) -> list[str]:
    """The page and ``MEMBERS - 1`` copies of it, each with one different word replaced."""
    words = body.split(" ")
    copies = [body]
    for j in range(1, MEMBERS):
        edited = list(words)
        edited[j * len(words) // MEMBERS] = f"edit{j}"
        copies.append(" ".join(edited))
    return copies


def clean_clusters(corpus: list[dict]) -> list[list[str]]:
    """Clusters whose members all match each other (distance and Jaccard) and no other cluster's.

    Chosen by brute force, so that "exactly one canonical per cluster" is the only right answer
    whatever order the items arrive in.
    """
    fingerprinter = Fingerprinter()
    chosen: list[tuple[list[str], list[int]]] = []
    pages = set()
    for doc in corpus:
        if doc["page"] in pages or not 200 <= len(doc["body_text"].split()) <= 1500:
            continue
        bodies = one_word_edits(doc["body_text"].strip())
        signatures = [fingerprinter.signature(body) for body in bodies]
        prints = [s.fingerprint for s in signatures]
        hashes = [np.unique(s.shingles.astype(np.uint32)) for s in signatures]
        if any(
            hamming(prints[a], prints[b]) > MAX_DISTANCE or jaccard_hashes(hashes[a], hashes[b]) < JACCARD
            for a, b in combinations(range(MEMBERS), 2)
        ):
            continue
        if any(hamming(p, q) <= 2 * MAX_DISTANCE + 4 for _, others in chosen for p in prints for q in others):
            continue
        chosen.append((bodies, prints))
        pages.add(doc["page"])
        if len(chosen) == CLUSTERS:
            return [bodies for bodies, _ in chosen]
    raise AssertionError("the corpus has too few clean clusters")


def crawler_stream(clusters: list[list[str]], crawler: int) -> list[dict]:
    """Crawler ``crawler``'s copy of the stream: its own URLs, its own order."""
    items = [
        {"url": f"https://site{crawler}.example/{c}/{m}", "body_text": body}
        for c, bodies in enumerate(clusters)
        for m, body in enumerate(bodies)
    ]
    random.Random(crawler).shuffle(items)
    return items


def cluster_of(url: str) -> int:
    return int(url.split("/")[3])


async def test_four_crawler_processes_keep_one_canonical_per_cluster(throwaway_redis, corpus, tmp_path) -> None:
    clusters = clean_clusters(corpus)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    # The pages are reStructuredText: declared plain text, the pipeline sees exactly what was checked above.
    settings = json.dumps(
        {"SIMHASH_INDEX_URL": throwaway_redis.url, "SIMHASH_MAX_DISTANCE": MAX_DISTANCE, "SIMHASH_HTML_FIELDS": []}
    )
    processes, outs = [], []
    for crawler in range(CRAWLERS):
        out = tmp_path / f"crawler{crawler}"
        out.mkdir()
        items = out / "items.jsonl"
        items.write_text("".join(json.dumps(item) + "\n" for item in crawler_stream(clusters, crawler)))
        command = [sys.executable, str(DRIVER), str(items), str(out), settings, str(barrier)]
        processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        outs.append(out)
    try:
        deadline = time.monotonic() + 60
        while len(list(barrier.glob("ready-*"))) < CRAWLERS:
            assert time.monotonic() < deadline, "crawlers did not start"
            assert all(p.poll() is None for p in processes), [p.stderr.read() for p in processes if p.poll()]
            time.sleep(0.02)
        (barrier / "go").touch()
        for process in processes:
            assert process.wait(timeout=120) == 0, process.stderr.read().decode()
    finally:
        for process in processes:
            process.kill()
            process.wait()

    kept = [json.loads(line) for out in outs for line in (out / "kept.jsonl").read_text().splitlines()]
    merges = [entry for out in outs for entry in read_merge_log(str(out / "merges.jsonl"))]
    stats = [json.loads((out / "stats.json").read_text()) for out in outs]
    items_in = CRAWLERS * CLUSTERS * MEMBERS

    assert [s["finish_reason"] for s in stats] == ["finished"] * CRAWLERS
    assert sum(s.get("simhash/unchecked", 0) for s in stats) == 0
    assert {entry["decision"] for entry in merges} == {"merged"}
    assert len(kept) + len(merges) == items_in
    assert Counter(cluster_of(item["url"]) for item in kept) == Counter(range(CLUSTERS))
    canonical = {cluster_of(item["url"]): item["url"] for item in kept}
    duplicates = Counter(entry["duplicate_id"] for entry in merges)
    assert max(duplicates.values()) == 1
    assert all(entry["canonical_id"] == canonical[cluster_of(entry["duplicate_id"])] for entry in merges)

    index = open_index(throwaway_redis.url, layout=make_layout(MAX_DISTANCE), spider="stream")
    try:
        assert await index.count() == CLUSTERS
        for url in canonical.values():
            record = await index.get(url)
            assert len(record.urls) == CRAWLERS * MEMBERS  # every merged URL reached the canonical
        # Erasure after the stress run: no key or value keeps the erased record's id or URLs.
        erased = await index.get(canonical[0])
        assert await index.remove(erased.id)
        assert await index.count() == CLUSTERS - 1
    finally:
        await index.close()
    traces = [url.encode() for url in erased.urls]
    with throwaway_redis.client() as client:
        for key in client.scan_iter():
            stored = key + repr(value_of(client, key)).encode()
            assert not [trace for trace in traces if trace in stored], key
