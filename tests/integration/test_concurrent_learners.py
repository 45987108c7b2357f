"""Two real crawler processes with the furniture learner on, one Redis index, one host, different orders.

Each process learns the host from its own first pages at the same moment; the first furniture
stored is the one both strip with, so no page is kept by both crawls.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from crawls import crawl_at_once
from texts import article

pytestmark = pytest.mark.slow

STORIES = 24
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
                         SIMHASH_INDEX_URL=throwaway_redis.url, SIMHASH_BOILERPLATE=True, CONCURRENT_REQUESTS=3)
    kept = Counter(json.loads(line)["url"] for out in outs for line in (out / "kept.jsonl").read_text().splitlines())
    stats = [json.loads((out / "stats.json").read_text()) for out in outs]
    # One crawl strips with the other's furniture: adopted after learning its own, or loaded when the
    # other had stored it before this one's first page came.
    assert sum(s.get("simhash/boilerplate/hosts_adopted", 0) + s.get("simhash/boilerplate/hosts_loaded", 0)
               for s in stats) == 1
    assert sorted(kept) == sorted(story(n)["url"] for n in range(STORIES))
    assert max(kept.values()) == 1, [url for url, count in kept.items() if count > 1]
