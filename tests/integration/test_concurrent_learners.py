"""Two real crawler processes with the furniture learner on, one Redis index, one host, different orders.

Each process learns the host from its own first pages at the same moment; the first furniture
stored is the one both strip with, so no page is kept by both crawls. Under load a warm-up can end
short (its pages go with what they taught, the host is learned again from a full sample): only what
holds for every interleaving is asserted.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations

import pytest
from crawls import crawl_at_once
from texts import article

from scrapy_simhash.boilerplate import decode
from scrapy_simhash.fingerprint import jaccard

pytestmark = pytest.mark.slow

STORIES = 24
THRESHOLD = 0.82
STATEMENT = article(9000, words=120, paragraph=30).split("\n")  # quoted by every third story


def story(n: int) -> dict:
    """A story of news.example as html-text gives it: template, byline, text, related links, footer."""
    quoted = STATEMENT if n % 3 == 0 else []
    lines = ["News Example", "Home", "World", "About us", f"Story {n}", f"By Ann Author · {n % 28 + 1} May 2024",
             *quoted, *article(n, words=240, paragraph=40).split("\n"), "Related stories",
             *(f"Story {m}" for m in ((n + 1) % STORIES, (n + 5) % STORIES)),
             "News Example is an independent publication. Contact the newsroom, read our privacy policy."]
    return {"url": f"https://news.example/story/{n}", "body_text": "\n\n".join(lines)}


def test_two_learning_crawls_keep_no_page_twice(throwaway_redis, tmp_path):
    quoting = [n for n in range(STORIES) if n % 3 == 0]
    others = [n for n in range(STORIES) if n % 3]
    # The first crawl's sample quotes the statement on every page, the second's never does.
    orders = [quoting + others, others + quoting[::-1]]
    outs = crawl_at_once(tmp_path, [[story(n) for n in order] for order in orders],
                         SIMHASH_INDEX_URL=throwaway_redis.url, SIMHASH_BOILERPLATE=True, CONCURRENT_REQUESTS=3,
                         SIMHASH_JACCARD_THRESHOLD=THRESHOLD)
    kept = [json.loads(line) for out in outs for line in (out / "kept.jsonl").read_text().splitlines()]
    stats = [json.loads((out / "stats.json").read_text()) for out in outs]
    urls = Counter(item["url"] for item in kept)
    assert sorted(urls) == sorted(story(n)["url"] for n in range(STORIES))
    assert max(urls.values()) == 1, [url for url, count in urls.items() if count > 1]
    alike = [(a["url"], b["url"]) for a, b in combinations(kept, 2)
             if jaccard(a["body_text"], b["body_text"]) >= THRESHOLD]
    assert alike == []
    # One furniture set, the one stored: the crawl that stored it kept its own, the other took it
    # (adopted after learning its own, or loaded when stored before this one's first page came).
    stored = decode(throwaway_redis.client().hget("simhash:{stream}:h:news.example", "b"))
    assert stored.version and stored.pages >= 3
    assert sum(s.get("simhash/boilerplate/hosts_adopted", 0) + s.get("simhash/boilerplate/hosts_loaded", 0)
               for s in stats) == 1
