"""Build the labelled pair sample ``tests/fixtures/labelled.jsonl`` from the shared corpus.

Labels come from how the pages relate, never from our own similarity measure:

* duplicate: the same page in two adjacent releases whose texts differ, but only slightly
  (difflib line ratio >= 0.97: a typo fix, a renamed setting, a new sentence);
* distinct: two different pages. Half are the different-page pairs whose shingle Jaccard is highest
  (one per page pair: same-template pages, the hard cases), half are random different-page pairs.

The fixture holds document ids only (the texts stay in the corpus): ``simhash-tune --corpus`` resolves them.

    python tools/make_labelled.py [--corpus PATH] [--out tests/fixtures/labelled.jsonl]
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
from collections import defaultdict
from itertools import combinations
from pathlib import Path

from scrapy_simhash.fingerprint import Fingerprinter, jaccard_hashes

ROOT = Path(__file__).resolve().parents[1]
DUPLICATES = 150
HARD_DISTINCT = 75
RANDOM_DISTINCT = 75
MIN_LINE_RATIO = 0.97
SEED = 5


def _version(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def duplicate_pairs(docs: list[dict], rng: random.Random) -> list[dict]:
    by_page = defaultdict(list)
    for doc in docs:
        by_page[doc["page"]].append(doc)
    pairs = []
    for page in sorted(by_page):
        releases = sorted(by_page[page], key=lambda d: _version(d["release"]))
        for a, b in zip(releases, releases[1:]):
            if a["body_text"] == b["body_text"]:
                continue
            ratio = difflib.SequenceMatcher(
                None, a["body_text"].splitlines(), b["body_text"].splitlines(), autojunk=False
            ).ratio()
            if ratio >= MIN_LINE_RATIO:
                basis = f"same page, releases {a['release']} -> {b['release']}, line ratio {ratio:.3f}"
                pairs.append({"a": a["id"], "b": b["id"], "label": "duplicate", "basis": basis})
    return rng.sample(pairs, min(DUPLICATES, len(pairs)))


def distinct_pairs(docs: list[dict], rng: random.Random) -> list[dict]:
    fingerprinter = Fingerprinter()
    hashes = {doc["id"]: fingerprinter.signature(doc["body_text"]).hashes for doc in docs}
    by_release = defaultdict(list)
    for doc in docs:
        by_release[doc["release"]].append(doc)
    best: dict[tuple[str, str], tuple[float, dict, dict]] = {}
    for release_docs in by_release.values():
        for a, b in combinations(release_docs, 2):
            key = tuple(sorted((a["page"], b["page"])))
            similarity = jaccard_hashes(hashes[a["id"]], hashes[b["id"]])
            if key not in best or similarity > best[key][0]:
                best[key] = (similarity, a, b)
    hardest = sorted(best.values(), key=lambda item: (-item[0], item[1]["id"]))[:HARD_DISTINCT]
    pairs = [
        {"a": a["id"], "b": b["id"], "label": "distinct", "basis": "different pages, most similar pair"}
        for _, a, b in hardest
    ]
    taken = {(p["a"], p["b"]) for p in pairs}
    while len(pairs) < HARD_DISTINCT + RANDOM_DISTINCT:
        a, b = rng.sample(docs, 2)
        if a["page"] != b["page"] and (a["id"], b["id"]) not in taken:
            taken.add((a["id"], b["id"]))
            pairs.append({"a": a["id"], "b": b["id"], "label": "distinct", "basis": "different pages, random"})
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=ROOT.parent / "shared" / "corpus-scrapy-docs.jsonl", type=Path)
    parser.add_argument("--out", default=ROOT / "tests" / "fixtures" / "labelled.jsonl", type=Path)
    args = parser.parse_args()
    with args.corpus.open(encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    rng = random.Random(SEED)
    pairs = duplicate_pairs(docs, rng) + distinct_pairs(docs, rng)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(pair) + "\n")
    labels = [p["label"] for p in pairs]
    print(f"{args.out}: {labels.count('duplicate')} duplicate and {labels.count('distinct')} distinct pairs")


if __name__ == "__main__":
    main()
