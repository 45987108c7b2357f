"""Review-log records in the shared schema (notes DESIGN.md), with distance and Jaccard computed from the
texts as the pipeline computes them, and a realistic review log built from the shared corpus."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scrapy_simhash.extract import extract_text
from scrapy_simhash.fingerprint import Fingerprinter, hamming, jaccard_hashes
from scrapy_simhash.offline.review_page import render
from scrapy_simhash.offline.review_pairs import Found, TextFinder, pairs_of, review_records

FIELDS = ["title", "description", "body_text"]  # SIMHASH_FIELDS' default
THRESHOLD = 0.82
RULE = {
    "jaccard_threshold": THRESHOLD,
    "layout": {"bands": 16, "rows": 4},
    "shingle_width": 4,
    "weighting": "frequency",
    "fingerprint_version": 1,
    "boilerplate_version": 0,
}

LONG = " ".join(f"word{i}" for i in range(80))
A = {"id": "https://a.example/1", "url": "https://a.example/1"}
B = {"id": "https://b.example/1", "url": "https://b.example/1"}
C = {"id": "https://c.example/1", "url": "https://c.example/1"}


def scores(text_a: str, text_b: str) -> tuple[int, float, int, int]:
    """(distance, Jaccard, fingerprint a, fingerprint b) as the pipeline and simhash-tune compute them."""
    a, b = Fingerprinter().signature(text_a), Fingerprinter().signature(text_b)
    return hamming(a.fingerprint, b.fingerprint), jaccard_hashes(a.hashes, b.hashes), a.fingerprint, b.fingerprint


def review_record(
    matched: dict[str, str], duplicate: dict[str, str], text_a: str, text_b: str, **overrides: Any
) -> dict[str, Any]:
    """A review record of ``duplicate`` (text ``text_b``) compared with ``matched`` (text ``text_a``), the
    group's canonical; ``overrides`` replace fields."""
    distance, jaccard, matched_fp, duplicate_fp = scores(text_a, text_b)
    record = {
        "timestamp": "2026-12-03T16:15:11.410237+00:00",
        "decision": "merged" if jaccard >= THRESHOLD else "rejected",
        "canonical_id": matched["id"],
        "canonical_url": matched["url"],
        "matched_id": matched["id"],
        "matched_url": matched["url"],
        "matched_fingerprint": f"{matched_fp:016x}",
        "duplicate_id": duplicate["id"],
        "duplicate_url": duplicate["url"],
        "duplicate_fingerprint": f"{duplicate_fp:016x}",
        "distance": distance,
        "jaccard": jaccard,
        "retention": "default",
        "rule": dict(RULE),
        "duplicate_text": text_b,
    }
    record.update(overrides)
    return record


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def corpus_review(corpus: Sequence[dict], folder: Path, pairs: int = 8, margin: float = 0.03) -> dict[str, Any]:
    """A crawl of the corpus's releases as the pipeline would log it: each page's next release judged
    against it. Writes the review log (decisions within ``margin`` of the threshold, the shortest
    ``pairs`` of them), the merge log (every decision with Jaccard >= 0.6) and the items feed (the
    pages compared with, as a Scrapy JSON-lines feed). Returns the paths and the sampled records."""
    by_page: dict[str, list[dict]] = defaultdict(list)
    for document in corpus:
        by_page[document["page"]].append(document)
    logged, sampled = [], []
    for versions in by_page.values():
        for earlier, later in zip(versions, versions[1:]):
            text_a, text_b = (extract_text(d, FIELDS).text for d in (earlier, later))
            # Ids are URLs, as the pipeline names pages by default.
            record = review_record(_page(earlier), _page(later), text_a, text_b)
            if record["jaccard"] < 0.6:
                continue
            logged.append({k: v for k, v in record.items() if k != "duplicate_text"})
            if abs(record["jaccard"] - THRESHOLD) <= margin:
                sampled.append((len(text_b.split()), record, earlier))
    chosen = sorted(sampled, key=lambda entry: entry[0])[:pairs]
    chosen.sort(key=lambda entry: entry[1]["duplicate_url"])
    # The items feed holds the pages compared with, with the spider's fields (no id: the URL is it).
    items = [{key: earlier[key] for key in ("url", "title", "body_text")} for _, _, earlier in chosen]
    records = [record for _, record, _ in chosen]
    return {
        "review_log": write_jsonl(folder / "review.jsonl", records),
        "merge_log": write_jsonl(folder / "merges.jsonl", logged),
        "items": write_jsonl(folder / "items.jsonl", items),
        "records": records,
    }


def _page(document: dict) -> dict[str, str]:
    return {"id": document["url"], "url": document["url"]}


# Markup, script endings, comment openers and quotes in a text; URLs a browser would run.
HOSTILE_TEXT = (
    '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    "<!-- \u2028 ]]> {{ '\" & \r\n" + LONG
)
HOSTILE_URLS = [
    "javascript:window.pwned=3",
    'https://evil.example/"><script>window.pwned=4</script>',
    "JAVASCRIPT:window.pwned=5",
    "data:text/html,<script>window.pwned=6</script>",
]


def hostile_records() -> list[dict]:
    """One record per hostile URL, compared with page A (text ``HOSTILE_TEXT``), markup in ids and the rule."""
    records = []
    for number, url in enumerate(HOSTILE_URLS):
        page = {"id": f'<u id="x{number}">{url}', "url": url}
        records.append(review_record(A, page, HOSTILE_TEXT, HOSTILE_TEXT + f" {number}\x00",
                                     timestamp="<script>window.pwned=7</script>",
                                     rule={"jaccard_threshold": 0.82, "layout": {"<script>": "</script>"}}))
    return records


def hostile_page() -> str:
    """The review page of :func:`hostile_records`, page A's text given as if from an items feed."""
    records, _ = review_records(hostile_records())
    finder = TextFinder()
    finder.add(A["id"], A["url"], Found(HOSTILE_TEXT, "<u>items</u>"))
    return render(pairs_of(records, finder), [(0.9, "merged")], "<i>log</i>", ["<script>x</script>"])
