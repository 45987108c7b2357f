"""Several real crawler processes on one index, the same stream in different orders, all at once.

Each process is an OS process running a real Scrapy crawl (``crawl_stream.py``); a barrier makes
them ingest at the same moment. The stream holds clusters of copies and, for each cluster, a near
miss that verification rejects, so the insert after rejected candidates runs under contention.
Every cluster must end with exactly one canonical; every item is kept or logged as merged, once.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from crawls import crawl_at_once
from texts import article, edited

from scrapy_simhash.mergelog import read_merge_log

pytestmark = pytest.mark.slow

CRAWLERS = 3
CLUSTERS = 20
COPIES = 4  # per cluster and crawler


def crawler_stream(crawler: int) -> list[dict]:
    """Crawler ``crawler``'s copy of the stream: its own URLs, its own order."""
    items = []
    for c in range(CLUSTERS):
        text = article(4000 + c, words=200)
        items.append({"url": f"https://cousin{crawler}.example/{c}/x", "body_text": edited(text, edits=6, seed=99)})
        items += [{"url": f"https://site{crawler}.example/{c}/{m}", "body_text": edited(text, seed=m)}
                  for m in range(COPIES)]
    random.Random(crawler).shuffle(items)
    return items


def cluster_of(url: str) -> tuple[str, int]:
    host, cluster = url.split("/")[2:4]
    return ("cousin" if host.startswith("cousin") else "copy", int(cluster))


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def index_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/index.db"
    if request.param == "redis":
        return request.getfixturevalue("throwaway_redis").url
    scheme, _, rest = request.getfixturevalue("cluster").url.partition("://")
    return f"{scheme}+cluster://{rest}"


def test_crawler_processes_keep_one_canonical_per_cluster(index_url, tmp_path):
    outs = crawl_at_once(tmp_path, [crawler_stream(crawler) for crawler in range(CRAWLERS)],
                         SIMHASH_INDEX_URL=index_url, SIMHASH_BOILERPLATE=False, CONCURRENT_REQUESTS=64)

    kept = [json.loads(line) for out in outs for line in (out / "kept.jsonl").read_text().splitlines()]
    merges = [entry for out in outs for entry in read_merge_log(str(out / "merges.jsonl"))]
    merged = [entry for entry in merges if entry["decision"] == "merged"]
    stats = [json.loads((out / "stats.json").read_text()) for out in outs]
    assert [s["finish_reason"] for s in stats] == ["finished"] * CRAWLERS
    assert sum(s.get("simhash/unchecked", 0) for s in stats) == 0
    assert sum(s.get("simhash/candidates_rejected", 0) for s in stats) > 0  # the conditional insert ran
    assert len(kept) + len(merged) == CRAWLERS * CLUSTERS * (COPIES + 1)
    canonicals = Counter(cluster_of(item["url"]) for item in kept)
    assert canonicals == Counter({(kind, c): 1 for kind in ("copy", "cousin") for c in range(CLUSTERS)})
    assert max(Counter(entry["duplicate_id"] for entry in merged).values()) == 1
    assert all(cluster_of(e["canonical_id"]) == cluster_of(e["duplicate_id"]) for e in merged)
