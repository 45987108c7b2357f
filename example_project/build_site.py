"""Build the example's offline web: four sites that republish the same Scrapy documentation pages.

docs.example.org publishes every page of the two newest releases (a page and its next release are
near-duplicates); devnews.example.net and planet.pyhub.example syndicate some of the newest pages,
and tinyblog.example, a host of three pages, two of them, one under a second URL as well. Each site
wraps a page in its own furniture: fixed (header, navigation, cookie notice, share bar, footer) and
per page (a byline with author and date, links to other pages of the site, a sidebar that differs
by section), the furniture the boilerplate learner has to find.

    python build_site.py [CORPUS] [--out site]

CORPUS defaults to ``data/scrapy-docs.jsonl.gz``, the pages of Scrapy's documentation (BSD licence)
of releases 2.17.0 and 2.18.0, shipped with the example.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE / "data" / "scrapy-docs.jsonl.gz"
MONTHS = ("January", "March", "May", "July", "September", "November")


@dataclass(frozen=True)
class Site:
    """A site: its name, the furniture it wraps every page in, and which pages it publishes."""

    name: str
    brand: str
    nav: tuple[str, ...]
    footer: str
    authors: tuple[str, ...] = ()
    cookie: str = ""
    share: str = ""
    sidebar_title: str = ""
    sidebar: tuple[str, ...] = ()  # empty: "More in <section>", the section's pages
    related: int = 3
    credit: str = ""  # a line syndicated copies carry
    pick: Callable[[list[dict]], list[dict]] = field(default=lambda docs: docs, compare=False)
    aliases: int = 0  # pages also published under a second URL


def _newest(docs: list[dict]) -> list[dict]:
    newest = max((d["release"] for d in docs), key=_release_key)
    return [d for d in docs if d["release"] == newest]


SITES = (
    Site(
        name="docs.example.org",
        brand="Example Docs, the official documentation",
        nav=("Home", "Download", "Documentation", "Community", "Blog", "Release notes"),
        footer="Copyright the Example developers and contributors. Licensed under the BSD license. "
        "Built with Sphinx using a theme provided by Read the Docs. Found a typo? Edit this page on GitHub.",
        authors=("the Example developers",),
        related=2,
    ),
    Site(
        name="devnews.example.net",
        brand="DevNews: fresh tutorials for working programmers, syndicated daily",
        nav=("Front page", "Python", "JavaScript", "Data engineering", "Careers", "Newsletter"),
        footer="DevNews republishes articles with permission of their authors. All trademarks belong to their "
        "owners. Privacy policy. Cookie settings. Advertise with us. Contact the editorial team.",
        authors=("Sam Rivers", "Jo Marsh", "Alex Kim"),
        cookie="We use cookies to personalise content and ads and to analyse our traffic. Accept or manage them.",
        share="Share this article on Twitter, Mastodon, LinkedIn or by email",
        sidebar_title="Trending this week",
        sidebar=("Ten crawling mistakes everyone makes and how to avoid them in production",
                 "Why your async code is slower than your sync code, and what to do about it",
                 "Interview: the maintainers behind the web's favourite scraping framework"),
        related=4,
        pick=lambda docs: _newest(docs)[::2],
    ),
    Site(
        name="planet.pyhub.example",
        brand="Planet PyHub aggregates posts from the Python community",
        nav=("Planet home", "Sources", "Add your feed", "Archives"),
        footer="Planet PyHub is an aggregator: every post belongs to its author and links back to the original.",
        authors=("planet bot",),
        related=3,
        credit="Originally published on docs.example.org",
        pick=lambda docs: _newest(docs)[1::3],
    ),
    Site(
        name="tinyblog.example",
        brand="Kim's tiny blog about crawling",
        nav=("Blog", "About me"),
        footer="Powered by a static site generator. Comments are closed.",
        authors=("Kim",),
        share="Liked this post? Share it with a friend.",
        related=1,
        pick=lambda docs: [d for d in _newest(docs) if d["page"] in ("docs/topics/spiders.rst", "docs/faq.rst")],
        aliases=1,
    ),
)


def _slug(page: str) -> str:
    return page.removeprefix("docs/").replace("/", "-").rsplit(".", 1)[0]


def _section(doc: dict) -> str:
    parts = doc["page"].split("/")
    return parts[1].capitalize() if len(parts) > 2 else "General"


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


def _body_html(text: str) -> str:
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    return "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)


def _items(tag: str, texts: list[str] | tuple[str, ...]) -> str:
    return "".join(f"<{tag}>{html.escape(t)}</{tag}>" for t in texts)


def render(site: Site, doc: dict, related: list[str], sidebar: list[str], rng: random.Random) -> str:
    """One page of ``site``: the document inside the site's furniture, fixed and per page."""
    day = f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.choice((2024, 2025))}"
    byline = f"By {rng.choice(site.authors)} · {day} · {rng.randint(2, 14)} min read"
    header = f"<header><p>{html.escape(site.brand)}</p><nav><ul>{_items('li', site.nav)}</ul></nav></header>"
    cookie = f'<div class="cookies"><p>{html.escape(site.cookie)}</p></div>' if site.cookie else ""
    aside = site.sidebar_title or f"More in {_section(doc)}"
    credit = f"<p>{html.escape(site.credit)}</p>" if site.credit else ""
    share = f'<p class="share">{html.escape(site.share)}</p>' if site.share else ""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(doc["title"])} | {html.escape(site.brand)}</title></head>
<body>
{header}{cookie}
<main><h1>{html.escape(doc["title"])}</h1>
<p class="byline">{html.escape(byline)}</p>{credit}{share}
{_body_html(doc["body_text"])}
<section><h2>Related pages</h2><ul>{_items("li", related)}</ul></section>
</main>
<aside><h2>{html.escape(aside)}</h2><ul>{_items("li", sidebar)}</ul></aside>
<footer><p>{html.escape(site.footer)}</p></footer>
</body></html>
"""


def build_sites(docs: list[dict], out: Path, sites: tuple[Site, ...] = SITES, seed: int = 1) -> int:
    """Write every site under ``out/<site name>/`` with an index page linking its pages; return the page count."""
    if out.exists():
        shutil.rmtree(out)
    rng = random.Random(seed)
    count = 0
    for site in sites:
        root = out / site.name
        pages = sorted(site.pick(docs), key=lambda d: (d["page"], _release_key(d["release"])))
        titles = sorted({d["title"] for d in pages})
        by_section: dict[str, list[str]] = {}
        for doc in pages:
            titles_of = by_section.setdefault(_section(doc), [])
            if doc["title"] not in titles_of:
                titles_of.append(doc["title"])
        links = []
        for n, doc in enumerate(pages):
            folder = root / doc["release"]
            folder.mkdir(parents=True, exist_ok=True)
            related = rng.sample([t for t in titles if t != doc["title"]], min(site.related, len(titles) - 1))
            sidebar = list(site.sidebar) or by_section[_section(doc)][:6]
            page = render(site, doc, related, sidebar, rng)
            paths = [f"{doc['release']}/{_slug(doc['page'])}.html"]
            if n < site.aliases:
                paths.append(f"{doc['release']}/amp-{_slug(doc['page'])}.html")
            for path in paths:
                (root / path).write_text(page, encoding="utf-8")
                links.append(f'<li><a href="{path}">{html.escape(doc["title"])}</a></li>')
                count += 1
        (root / "index.html").write_text(f"<html><body><ul>{''.join(links)}</ul></body></html>", encoding="utf-8")
    return count


def load_docs(corpus: Path) -> list[dict]:
    """The corpus documents (JSON lines, gzip-compressed when the name ends in .gz)."""
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--out", type=Path, default=HERE / "site")
    args = parser.parse_args(argv)
    pages = build_sites(load_docs(args.corpus), args.out)
    print(f"{pages} pages on {len(SITES)} sites under {args.out}")


if __name__ == "__main__":
    main()
