"""What the record store keeps per page: verification-blob bytes and the Jaccard error of 32-bit hashes.

On the shared corpus: bytes and encode/decode time of the stored blob (verification hashes: sorted
distinct uint32, Elias-Fano coded, ``scrapy_simhash.index.codec``) against raw uint32 and raw uint64
arrays and the earlier delta + byte-plane + zlib encoding (the baselines, timed in the same run),
and, over every pair of pages sharing a ``page`` name across releases, the difference between
Jaccard on the 64-bit hashes and on the 32-bit hashes the index stores.

    python benchmarks/record_store.py [--corpus /work/shared/corpus-scrapy-docs.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections.abc import Callable
from collections import defaultdict
from itertools import combinations

import numpy as np

from scrapy_simhash.fingerprint import Fingerprinter, jaccard_hashes, verification_hashes
from scrapy_simhash.index.codec import decode_hashes, encode_hashes


def byte_planes_zlib(hashes: np.ndarray) -> bytes:
    """The earlier blob: deltas as byte planes, the two low raw, the two high zlib-compressed."""
    planes = np.diff(hashes, prepend=np.uint32(0)).astype(">u4").view(np.uint8).reshape(-1, 4).T
    return len(hashes).to_bytes(4, "big") + planes[2:].tobytes() + zlib.compress(planes[:2].tobytes(), 1)


def byte_planes_zlib_decode(blob: bytes) -> np.ndarray:
    count = int.from_bytes(blob[:4], "big")
    low = np.frombuffer(blob, np.uint8, 2 * count, 4)
    high = np.frombuffer(zlib.decompress(blob[4 + 2 * count :]), np.uint8)
    planes = np.concatenate((high, low)).reshape(4, count)
    return np.cumsum(np.ascontiguousarray(planes.T).view(">u4").ravel(), dtype=np.uint32)


def per_page_us(function: Callable, inputs: list) -> float:
    """Best of 3 passes over every input, microseconds per input."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for value in inputs:
            function(value)
        best = min(best, time.perf_counter() - started)
    return best / len(inputs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/shared/corpus-scrapy-docs.jsonl")
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    fingerprinter = Fingerprinter()
    wide = [np.unique(fingerprinter.shingle_hashes(doc["body_text"])) for doc in docs]
    narrow = [verification_hashes(h) for h in wide]

    blobs = [encode_hashes(h) for h in narrow]
    bound = max(map(len, narrow))
    encode_us = per_page_us(encode_hashes, narrow)
    decode_us = per_page_us(lambda blob: decode_hashes(blob, bound), blobs)
    earlier = [byte_planes_zlib(h) for h in narrow]
    earlier_encode_us = per_page_us(byte_planes_zlib, narrow)
    earlier_decode_us = per_page_us(byte_planes_zlib_decode, earlier)
    raw_us = per_page_us(np.ndarray.tobytes, narrow)
    hashes = sum(map(len, narrow))
    stored = sum(map(len, blobs))
    print(f"{len(docs)} pages, {hashes / len(docs):,.0f} distinct shingle hashes per page (median "
          f"{np.median([len(h) for h in narrow]):,.0f}); 64->32-bit collisions inside a page: "
          f"{sum(len(w) - len(n) for w, n in zip(wide, narrow))}")
    print(f"blob: {stored / len(docs):,.0f} B/page = {stored / hashes:.2f} B/hash; "
          f"raw uint32 {4 * hashes / len(docs):,.0f} "
          f"B/page (ratio {stored / (4 * hashes):.2f}), raw uint64 {8 * hashes / len(docs):,.0f} B/page "
          f"(ratio {stored / (8 * hashes):.2f}); encode {encode_us:.0f} us, decode {decode_us:.0f} us per page")
    print(f"earlier byte planes + zlib: {sum(map(len, earlier)) / hashes:.2f} B/hash, "
          f"encode {earlier_encode_us:.0f} us "
          f"(ours: {encode_us / earlier_encode_us:.2f} of it), decode {earlier_decode_us:.0f} us (ours: "
          f"{decode_us / earlier_decode_us:.2f} of it); raw uint32 bytes {raw_us:.1f} us")

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
