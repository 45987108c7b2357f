"""Build the example's offline web: three "syndicating sites" that republish the same docs pages.

Each site wraps every page in its own navigation, sidebar and footer and publishes several releases
of each page, so a crawl meets the two kinds of near-duplicate the pipeline is for: a page copied by
another site under another template, and a page republished with small edits in the next release.

    python build_site.py [CORPUS] [--out site] [--releases 3]
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus-scrapy-docs.jsonl"
# A release's table of contents; no page slug starts with "_", so no page overwrites it.
INDEX = "_toc.html"


@dataclass(frozen=True)
class Site:
    """A syndicating site: a name and the furniture it wraps every page in."""

    name: str
    brand: str
    nav: tuple[str, ...]
    sidebar_title: str
    sidebar: tuple[str, ...]
    footer: str


SITES = (
    Site(
        name="docs.example.org",
        brand="Example Docs, the official documentation",
        nav=("Home", "Download", "Documentation", "Community", "Blog", "Commercial support", "Release notes"),
        sidebar_title="Table of contents",
        sidebar=(),  # filled with every page title: the typical docs sidebar
        footer="Copyright the Example developers and contributors. Licensed under the BSD license. "
        "Built with Sphinx using a theme provided by Read the Docs. Found a typo? Edit this page on GitHub.",
    ),
    Site(
        name="devnews.example.net",
        brand="DevNews: fresh tutorials for working programmers, syndicated daily",
        nav=("Front page", "Python", "JavaScript", "Data engineering", "Careers", "Newsletter", "Podcasts"),
        sidebar_title="Trending this week",
        sidebar=(
            "Ten crawling mistakes everyone makes and how to avoid them in production",
            "Why your async code is slower than your sync code, and what to do about it",
            "Interview: the maintainers behind the web's favourite scraping framework",
            "Sponsored: managed proxies with rotating residential addresses for every budget",
            "Subscribe to our weekly digest of the best programming articles on the web",
        ),
        footer="DevNews republishes articles with permission of their authors. All trademarks belong to their "
        "owners. Privacy policy. Cookie settings. Advertise with us. Contact the editorial team.",
    ),
    Site(
        name="planet.pyhub.example",
        brand="Planet PyHub aggregates posts from the Python community",
        nav=("Planet home", "Sources", "Add your feed", "Archives", "About the planet"),
        sidebar_title="Subscriptions",
        sidebar=(
            "Python Software Foundation news and announcements",
            "The weekly scientific Python digest from our volunteers",
            "Web development with Python, from templates to deployment",
            "Testing, packaging and tooling notes from core developers",
        ),
        footer="Planet PyHub is an aggregator: every post belongs to its author and links back to the original. "
        "The planet is run by volunteers. Report abuse to the planet maintainers.",
    ),
)


def _slug(page: str) -> str:
    return page.removeprefix("docs/").replace("/", "-").rsplit(".", 1)[0]


def _body_html(text: str) -> str:
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    return "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)


def render(site: Site, doc: dict, sidebar: Iterable[str]) -> str:
    """One page of ``site``: the document inside the site's own furniture."""
    nav = "".join(f'<li><a href="#">{html.escape(n)}</a></li>' for n in site.nav)
    side = "".join(f"<li>{html.escape(s)}</li>" for s in sidebar)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(doc["title"])} | {html.escape(site.brand)}</title></head>
<body>
<header><p>{html.escape(site.brand)}</p><nav><ul>{nav}</ul></nav></header>
<aside><h2>{html.escape(site.sidebar_title)}</h2><ul>{side}</ul></aside>
<main><h1>{html.escape(doc["title"])}</h1>
<p class="release">Release {html.escape(doc["release"])}</p>
{_body_html(doc["body_text"])}
</main>
<footer><p>{html.escape(site.footer)}</p></footer>
</body></html>
"""


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


def build_sites(docs: list[dict], out: Path, sites: Iterable[Site] = SITES) -> int:
    """Write every site under ``out/<site name>/`` with one index page per release; return the page count.

    A release's index lists its pages, so a crawl meets a site's distinct pages before the next
    release's copies of them.
    """
    if out.exists():
        shutil.rmtree(out)
    titles = sorted({doc["title"] for doc in docs})
    releases = sorted({doc["release"] for doc in docs}, key=_release_key, reverse=True)
    count = 0
    for site in sites:
        root = out / site.name
        sidebar = site.sidebar or titles
        links = []
        for release in releases:
            pages = [doc for doc in docs if doc["release"] == release]
            (root / release).mkdir(parents=True)
            for doc in pages:
                (root / release / f"{_slug(doc['page'])}.html").write_text(render(site, doc, sidebar), encoding="utf-8")
            entries = "".join(
                f'<li><a href="{_slug(d["page"])}.html">{html.escape(d["title"])}</a></li>' for d in pages
            )
            (root / release / INDEX).write_text(f"<html><body><ul>{entries}</ul></body></html>", encoding="utf-8")
            links.append(f'<li><a rel="index" href="{release}/{INDEX}">Release {release}</a></li>')
            count += len(pages)
        (root / "index.html").write_text(f"<html><body><ul>{''.join(links)}</ul></body></html>", encoding="utf-8")
    return count


def load_docs(corpus: Path, releases: int) -> list[dict]:
    """The corpus documents of its ``releases`` newest releases."""
    with corpus.open(encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    newest = set(sorted({d["release"] for d in docs}, key=_release_key)[-releases:])
    return [d for d in docs if d["release"] in newest]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, default=HERE / "site")
    parser.add_argument("--releases", type=int, default=3, help="newest releases of each page to publish")
    args = parser.parse_args(argv)
    pages = build_sites(load_docs(args.corpus, args.releases), args.out)
    print(f"{pages} pages on {len(SITES)} sites under {args.out}")


if __name__ == "__main__":
    main()
