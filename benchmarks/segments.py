"""Where shingles may not cross: the options measured on the shared corpus and on reordered listings.

    python benchmarks/segments.py [--corpus PATH]

For each option (shingles across the whole text, as fingerprint version 2 made them; within lines and
sentences, version 3; within paragraphs and sentences; within lines; within sentences), on the shared
corpus (default fields, every pair at Jaccard >= 0.6 by brute force): pairs at J >= 0.82, those lost
and gained against version 2, pairs of different pages at J >= 0.82, distinct shingles a page; on
the listings of benchmarks/listings.py (50-300 words): reposts of every kind at J >= 0.82, and the highest
J between two different descriptions; on corpus paragraphs of 40+ words hard-wrapped at 79 and at 60
characters (plain text re-wrapped after an edit): the median and lowest J of the two wrappings.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from listings import DEFAULT_CORPUS, build_listings, prose_sentences  # noqa: E402 (a sibling script)
from multisite import rendered  # noqa: E402

from scrapy_simhash import fingerprint  # noqa: E402
from scrapy_simhash.evaluate import ground_truth, read_documents  # noqa: E402
from scrapy_simhash.fingerprint import jaccard_hashes, verification_hashes  # noqa: E402
from scrapy_simhash.settings import DEFAULTS  # noqa: E402

SENTENCE = r"[.!?\u3002](?!\w)"
OPTIONS = {
    "whole text (version 2)": None,
    "lines and sentences (version 3)": re.compile(rf"{SENTENCE}|\n"),
    "paragraphs and sentences": re.compile(rf"{SENTENCE}|\n\s*\n"),
    "lines": re.compile(r"\n"),
    "sentences": re.compile(SENTENCE),
}


def hashes(text: str, ends: re.Pattern | None, width: int = 4) -> np.ndarray:
    """Verification hashes of ``text`` with no shingle crossing a match of ``ends``."""
    parts = [text] if ends is None else ends.split(text)
    shingled = [fingerprint._shingle_hashes(fingerprint._token_hashes(fingerprint._tokenise(part)), width)
                for part in parts]
    return verification_hashes(np.concatenate(shingled)) if shingled else verification_hashes(np.zeros(0, np.uint64))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    docs = read_documents(args.corpus, DEFAULTS["SIMHASH_FIELDS"])
    pages = [doc.id.split(":", 1)[-1] for doc in docs]
    with args.corpus.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    listings = [x for x in build_listings(prose_sentences(rows), 100) if x.length != "20-49"]
    pairs: dict[int, list[str]] = {}
    for listing in listings:
        pairs.setdefault(listing.family, []).append(listing.description)
    paragraphs = [text for row in rows[::10] for block in re.split(r"\n\s*\n", row["body_text"])
                  if len((text := rendered(block)).split()) >= 40 and not block.startswith((" ", ".."))]
    print(f"{len(docs)} corpus pages; {len(pairs)} listings of 50-300 words; {len(paragraphs)} paragraphs re-wrapped")
    baseline: dict[tuple[int, int], float] = {}
    for name, ends in OPTIONS.items():
        sets = [hashes(doc.text, ends) for doc in docs]
        found = ground_truth(sets, 0.6)
        above = {pair for pair, j in found.items() if j >= 0.82}
        baseline = baseline or found
        lost = sum(1 for pair, j in baseline.items() if j >= 0.82 and pair not in above)
        gained = sum(1 for pair in above if baseline.get(pair, 0) < 0.82)
        cross = sum(1 for a, b in above if pages[a] != pages[b])
        reposts = [jaccard_hashes(*(hashes(text, ends) for text in pair)) for pair in pairs.values()]
        originals = [hashes(pair[0], ends) for pair in pairs.values()]
        closest = max(jaccard_hashes(a, b) for n, a in enumerate(originals) for b in originals[n + 1 :])
        wraps = [jaccard_hashes(*(hashes(textwrap.fill(text, width), ends) for width in (79, 60)))
                 for text in paragraphs]
        print(f"{name}:\n  corpus: {len(above)} pairs at J >= 0.82 ({lost} lost, {gained} gained against version 2), "
              f"{cross} of different pages; {np.mean([len(s) for s in sets]):.0f} shingles a page\n"
              f"  listings: reposts (all kinds) at J >= 0.82 {np.mean(np.array(reposts) >= 0.82):.3f} "
              f"(median J {np.median(reposts):.3f}); two different descriptions at most J {closest:.3f}\n"
              f"  re-wrapped paragraphs: median J {np.median(wraps):.3f}, lowest {min(wraps):.3f}")


if __name__ == "__main__":
    main()
