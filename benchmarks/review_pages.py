"""``simhash-review`` of a long review log: the largest page written and the command's peak memory,
one page (``--per-page 0``, the baseline: how every review was written before paging) against the
default page size, alternated in the same run.

The review log is made from corpus pages: record n judges page n against page n - 1 (its text is
then another record's ``duplicate_text``, as in a real log), Jaccard near the threshold.

    python benchmarks/review_pages.py [--corpus ../shared/corpus-scrapy-docs.jsonl] [--records 6000]
        [--per-page 100] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from scrapy_simhash.review import PER_PAGE

SHIPPED = Path(__file__).resolve().parents[1] / "example_project" / "data" / "scrapy-docs.jsonl.gz"
RULE = {"jaccard_threshold": 0.82, "layout": {"kind": "minhash"}, "shingle_width": 4, "weighting": "frequency"}


def corpus_texts(path: str | None) -> list[str]:
    lines = Path(path).open(encoding="utf-8") if path else gzip.open(SHIPPED, "rt", encoding="utf-8")
    with lines:
        return [json.loads(line)["body_text"] for line in lines]


def write_log(path: Path, texts: list[str], records: int) -> None:
    rng = random.Random(1)
    with path.open("w", encoding="utf-8") as out:
        for n in range(1, records + 1):
            jaccard = round(rng.uniform(0.79, 0.85), 4)
            matched, duplicate = f"https://docs.example/{n - 1}", f"https://docs.example/{n}"
            out.write(json.dumps({
                "timestamp": "2026-12-05T06:00:00+00:00", "decision": "merged" if jaccard >= 0.82 else "rejected",
                "canonical_id": matched, "canonical_url": matched, "matched_id": matched, "matched_url": matched,
                "duplicate_id": duplicate, "duplicate_url": duplicate, "distance": rng.randint(8, 20),
                "jaccard": jaccard, "retention": "default", "rule": RULE,
                "duplicate_text": texts[n % len(texts)],
            }) + "\n")


def review(log: Path, folder: Path, per_page: int) -> tuple[int, int, int]:
    """(peak RSS in kB, largest page in bytes, pages) of one run of the command."""
    for old in folder.glob("*.html"):
        old.unlink()
    measure = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "scrapy_simhash", "review", str(log),
         "--per-page", str(per_page), "-o", str(folder / "review.html")],
        check=True, capture_output=True, text=True,
    )
    pages = list(folder.glob("*.html"))
    return int(done.stdout), max(page.stat().st_size for page in pages), len(pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", help="JSON lines with a body_text field (default: the example project's 100 pages)")
    parser.add_argument("--records", type=int, default=6000)
    parser.add_argument("--per-page", type=int, default=PER_PAGE)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        log = folder / "review.jsonl"
        write_log(log, corpus_texts(args.corpus), args.records)
        print(f"review log: {args.records:,} records, {log.stat().st_size / 2**20:.1f} MB")
        results: dict[int, list[tuple[int, int, int]]] = {0: [], args.per_page: []}
        for _ in range(args.rounds):
            for per_page in results:
                results[per_page].append(review(log, folder, per_page))
        print(f"{'layout':>22} {'peak memory':>12} {'largest page':>13} {'pages':>6}")
        best = {per_page: min(runs) for per_page, runs in results.items()}
        for per_page, (rss, page, pages) in best.items():
            name = "one page (baseline)" if per_page == 0 else f"--per-page {per_page}"
            print(f"{name:>22} {rss / 1024:>9.0f} MB {page / 2**20:>10.1f} MB {pages:>6}")
        (base_rss, base_page, _), (rss, page, _) = best[0], best[args.per_page]
        print(f"ratio (paged / one page): memory {rss / base_rss:.2f}x, largest page {page / base_page:.3f}x")


if __name__ == "__main__":
    main()
