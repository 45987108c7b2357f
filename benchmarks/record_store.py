"""What the record store keeps per page: verification-blob bytes and the Jaccard error of 32-bit hashes.

On the shared corpus: bytes of the stored blob (sorted distinct uint32 shingle hashes, delta +
byte-plane + zlib, ``scrapy_simhash.index.codec``) against raw uint32 and raw uint64 arrays (the
baselines), and, over every pair of pages sharing a ``page`` name across releases, the difference
between Jaccard on the 64-bit hashes and on the 32-bit hashes the index stores.

    python benchmarks/record_store.py [--corpus /work/shared/corpus-scrapy-docs.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from itertools import combinations

import numpy as np

from scrapy_simhash.fingerprint import Fingerprinter, jaccard_hashes
from scrapy_simhash.index.codec import decode_hashes, encode_hashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/shared/corpus-scrapy-docs.jsonl")
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    fingerprinter = Fingerprinter()
    wide = [fingerprinter.signature(doc["body_text"]).shingles for doc in docs]
    narrow = [np.unique(h.astype(np.uint32)) for h in wide]

    started = time.perf_counter()
    blobs = [encode_hashes(h) for h in narrow]
    encode_us = (time.perf_counter() - started) / len(docs) * 1e6
    started = time.perf_counter()
    for blob in blobs:
        decode_hashes(blob)
    decode_us = (time.perf_counter() - started) / len(docs) * 1e6
    hashes = sum(map(len, narrow))
    stored = sum(map(len, blobs))
    print(f"{len(docs)} pages, {hashes / len(docs):,.0f} distinct shingle hashes per page (median "
          f"{np.median([len(h) for h in narrow]):,.0f}); 64->32-bit collisions inside a page: "
          f"{sum(len(w) - len(n) for w, n in zip(wide, narrow))}")
    print(f"blob: {stored / len(docs):,.0f} B/page = {stored / hashes:.2f} B/hash; "
          f"raw uint32 {4 * hashes / len(docs):,.0f} "
          f"B/page (ratio {stored / (4 * hashes):.2f}), raw uint64 {8 * hashes / len(docs):,.0f} B/page "
          f"(ratio {stored / (8 * hashes):.2f}); encode {encode_us:.0f} us, decode {decode_us:.0f} us per page")

    by_page = defaultdict(list)
    for i, doc in enumerate(docs):
        by_page[doc["page"]].append(i)
    errors = np.array(
        [
            jaccard_hashes(narrow[a], narrow[b]) - jaccard_hashes(wide[a], wide[b])
            for group in by_page.values()
            for a, b in combinations(group, 2)
        ]
    )
    print(f"Jaccard(32-bit) - Jaccard(64-bit) over {len(errors):,} same-page pairs: max |error| "
          f"{np.abs(errors).max():.2e}, mean {errors.mean():.2e}, pairs with any error {np.count_nonzero(errors)}")


if __name__ == "__main__":
    main()
