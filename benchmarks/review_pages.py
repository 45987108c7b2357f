"""``simhash-review`` pages: size, load time in headless Chromium and the command's peak memory, for
a review log of N pairs of W-word texts near the threshold, this checkout against another one (the
code before a change: ``git worktree add /tmp/before main``), alternated in the same run.

Each pair is a corpus text cut to W words (the pipeline's words) and a copy with about 2.5 % of its
words replaced (Jaccard 0.76-0.87), plus the furniture lines a review record carries; the page
compared with comes from an items feed. A round runs the command and loads its first page once per
checkout; the figures are medians over rounds, ratios the median of each round's ratio.

    python benchmarks/review_pages.py [--corpus ../shared/corpus-scrapy-docs.jsonl] [--pairs 100,500]
        [--words 1500] [--per-page 0] [--rounds 5] [--before /tmp/before]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

SHIPPED = Path(__file__).resolve().parents[1] / "example_project" / "data" / "scrapy-docs.jsonl.gz"
RULE = {"jaccard_threshold": 0.82, "layout": {"bands": 14, "rows": 6}, "shingle_width": 4, "weighting": "frequency",
        "fingerprint_version": 2, "boilerplate_version": 1}
FURNITURE = [[0, "Docs mirror\nHome · Topics · API · News · About"], [3, "Share this page\nRelated: Spiders · Items"]]
_WORD = re.compile(r"\w+")
# Runs ``python -m scrapy_simhash ARGS`` from the checkout given first ("": the installed one); an
# editable install's import hook would otherwise win over the path.
LAUNCH = """
import sys
checkout = sys.argv.pop(1)
if checkout:
    sys.meta_path[:] = [finder for finder in sys.meta_path if "__editable__" not in getattr(finder, "__module__", "")]
    sys.path.insert(0, checkout)
import scrapy_simhash
assert not checkout or scrapy_simhash.__file__.startswith(checkout), scrapy_simhash.__file__
from scrapy_simhash.__main__ import main
main(sys.argv[1:])
"""


def corpus_texts(path: str | None) -> list[str]:
    lines = Path(path).open(encoding="utf-8") if path else gzip.open(SHIPPED, "rt", encoding="utf-8")
    with lines:
        return [json.loads(line)["body_text"] for line in lines]


def cut(texts: list[str], words: int, count: int) -> list[str]:
    """``count`` texts of ``words`` words each, the corpus's texts laid end to end and cut there."""
    joined = "\n".join(texts)
    ends = [match.end() for match in _WORD.finditer(joined)]
    starts = list(range(0, len(ends) - words, words))
    chosen = [starts[n % len(starts)] for n in range(count)]
    return [joined[(ends[start - 1] if start else 0):ends[start + words - 1]].strip() for start in chosen]


def edited(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    for _ in range(int(len(words) * rng.uniform(0.017, 0.033))):
        words[rng.randrange(len(words))] = f"edit{rng.randrange(10**6)}"
    return " ".join(words)


def write_inputs(folder: Path, texts: list[str], pairs: int, words: int) -> tuple[Path, Path]:
    rng = random.Random(1)
    bases = cut(texts, words, pairs)
    review, items = folder / f"review-{pairs}.jsonl", folder / f"items-{pairs}.jsonl"
    with review.open("w", encoding="utf-8") as log, items.open("w", encoding="utf-8") as feed:
        for n, base in enumerate(bases):
            matched, duplicate = f"https://docs.example/{n}", f"https://mirror.example/{n}"
            feed.write(json.dumps({"url": matched, "body_text": base}) + "\n")
            jaccard = round(rng.uniform(0.79, 0.85), 4)
            log.write(json.dumps({
                "timestamp": "2026-12-06T06:00:00+00:00", "decision": "merged" if jaccard >= 0.82 else "rejected",
                "canonical_id": matched, "canonical_url": matched, "matched_id": matched, "matched_url": matched,
                "duplicate_id": duplicate, "duplicate_url": duplicate, "distance": rng.randint(4, 12),
                "jaccard": jaccard, "retention": "default", "rule": RULE,
                "duplicate_text": edited(base, rng), "duplicate_furniture": FURNITURE,
            }) + "\n")
    return review, items


def review(checkout: Path | None, log: Path, items: Path, output: Path, per_page: int) -> tuple[int, int]:
    """(peak RSS in kB, first page in bytes) of one run of the command, from ``checkout`` (None: this one)."""
    for old in output.parent.glob("*.html"):
        old.unlink()
    measure = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-c", LAUNCH, str(checkout or ""), "review", str(log),
         "--items", str(items), "--per-page", str(per_page), "-o", str(output)],
        check=True, capture_output=True, text=True, cwd=output.parent,
    )
    return int(done.stdout), output.stat().st_size


def browser(profile: Path) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("SIMHASH_CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    service = Service(os.environ.get("SIMHASH_CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


def load_ms(driver: webdriver.Chrome, page: Path) -> float:
    """Milliseconds from navigation to the end of the load event (the page's script has run)."""
    driver.get("about:blank")
    driver.get(page.as_uri())
    return float(driver.execute_script(
        "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;"
    ))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", help="JSON lines with a body_text field (default: the example project's 100 pages)")
    parser.add_argument("--pairs", default="100,500", help="review log sizes, comma-separated")
    parser.add_argument("--words", type=int, default=1500)
    parser.add_argument("--per-page", type=int, default=0, help="0 (default): every pair on the one page measured")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with (its repository root)")
    args = parser.parse_args()
    texts = corpus_texts(args.corpus)
    checkouts: dict[str, Path | None] = {"after": None}
    if args.before:
        checkouts = {"before": args.before.resolve(), "after": None}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        driver = browser(folder / "profile")
        try:
            print(f"{'pairs':>5} {'code':>6} {'page':>9} {'load':>8} {'memory':>8}")
            for pairs in map(int, args.pairs.split(",")):
                log, items = write_inputs(folder, texts, pairs, args.words)
                runs: dict[str, list[tuple[int, int, float]]] = {name: [] for name in checkouts}
                for _ in range(args.rounds):
                    for name, checkout in checkouts.items():
                        out = folder / name / "review.html"
                        out.parent.mkdir(exist_ok=True)
                        rss, size = review(checkout, log, items, out, args.per_page)
                        runs[name].append((rss, size, load_ms(driver, out)))
                for name, measured in runs.items():
                    rss, size, load = (statistics.median(column) for column in zip(*measured))
                    print(f"{pairs:>5} {name:>6} {size / 1e6:>6.2f} MB {load:>5.0f} ms {rss / 1024:>5.0f} MB")
                if "before" in runs:
                    ratios = [[a / b for a, b in zip(after, before)]
                              for after, before in zip(runs["after"], runs["before"])]
                    rss, size, load = (statistics.median(column) for column in zip(*ratios))
                    print(f"{pairs:>5} {'ratio':>6} {size:>8.3f}x {load:>6.3f}x {rss:>6.3f}x  (after / before)")
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
