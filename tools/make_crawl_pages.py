"""Write the pages benchmarks/crawl_overhead.py crawls: every shared-corpus page on three sites, as files.

    python tools/make_crawl_pages.py OUT [--corpus PATH] [--sites 3] [--pages N]

Each corpus page (a release of a Scrapy documentation page, ~1,100 words median) becomes an article
published by each of ``--sites`` sites inside its own template, the templates and the page layout of
benchmarks/multisite.py (header, navigation, cookie notice, byline, share bar, "Related stories",
sidebar, newsletter box, footer; "Originally published on" on the syndicating sites). A page is
``OUT/<host>/<release>/<section>/<slug>.html``; ``OUT/pages.tsv`` lists ``host<TAB>file URL`` in the
order the spider requests them (shuffled with a fixed seed: sites and releases interleave). The
default, 1,309 pages on 3 sites, is the 3,927-page crawl of issue 44.
"""

from __future__ import annotations

import argparse
import html
import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from multisite import _UNDERLINE, DEFAULT_CORPUS, TEMPLATES, Article, _render_site, rendered  # noqa: E402

MANIFEST = "pages.tsv"


def host_name(site: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", TEMPLATES[site].brand.lower()) + ".example"


def article(n: int, row: dict) -> Article:
    """A corpus page as a docs site shows it: rst headings without their underlines, markup left out."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", row["body_text"]):
        lines = [line for line in block.strip("\n").split("\n") if not _UNDERLINE.match(line)]
        if lines and (text := rendered("\n".join(lines))):
            paragraphs.append(text)
    return Article(n, row["title"], tuple(paragraphs))


def write_pages(rows: list[dict], out: Path, sites: int = 3, seed: int = 1) -> int:
    """Write every row's page on each site and the manifest; the number of pages written."""
    rng = random.Random(seed)
    pool = [article(n, row) for n, row in enumerate(rows)]
    listed: list[tuple[str, str]] = []
    for site in range(sites):
        kind = "original" if site == 0 else "verbatim"  # the others syndicate site 0's articles
        pages = _render_site(site, [(a, kind, 0, list(a.paragraphs)) for a in pool], rng)
        for row, page in zip(rows, pages, strict=True):
            path = out / host_name(site) / row["release"] / page.path.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            title = html.escape(row["title"])
            path.write_text(f"<!DOCTYPE html>\n<html><head><title>{title}</title></head>\n{page.body()}\n</html>\n",
                            encoding="utf-8")
            listed.append((host_name(site), path.resolve().as_uri()))
    rng.shuffle(listed)
    (out / MANIFEST).write_text("".join(f"{host}\t{url}\n" for host, url in listed), encoding="utf-8")
    return len(listed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sites", type=int, default=3, choices=range(1, len(TEMPLATES) + 1))
    parser.add_argument("--pages", type=int, help="only the corpus's first N pages (default: all)")
    args = parser.parse_args(argv)
    with args.corpus.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines][: args.pages]
    written = write_pages(rows, args.out, args.sites)
    print(f"{written} pages on {args.sites} sites in {args.out}")


if __name__ == "__main__":
    main()
