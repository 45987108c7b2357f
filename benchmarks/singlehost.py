"""Single-host crawl: sites whose distinct pages legitimately share content, each in one template.

    python benchmarks/singlehost.py [--corpus PATH] [--orders by-site,grouped,...] [--learner both|on|off]
                                    [-s NAME=VALUE] [--small] [--json OUT]

Four sites, each one host with one template (header, navigation, sidebar, byline, footer), built
from real text (the shared Scrapy-docs corpus: a page at several releases, and its paragraphs as
prose for the rest):

- docs: the documentation at several releases, one page per (page, release);
- releases: release notes of parallel branches carrying the same security advisory, with their own
  version line, date and a share of backported fixes, and ordinary release notes between them;
- shop: product families, each variant with the family's description and its own specification lines;
- news: articles of their own, several of them quoting the same statement paragraph.

Every site also has the same page under a second URL (``alias``), recrawls with one word changed
(``typo``) and pages republished with a sentence added (``republished``).

The sites are served on loopback (one address each, multisite.py's servers) and crawled by
multisite.py's Scrapy spider (``html_text.extract_text(response.css("body").get())`` as
``body_text``) with ``ADDONS = {"scrapy_simhash.Addon": 0}`` (learner on) and with
``SIMHASH_BOILERPLATE=False`` as well (learner off), each crawl with a fresh SQLite index, in
several orders: ``by-site`` (each site as generated: the newest release's docs first, then the
older releases; each advisory's notes together; each family's variants together), ``grouped`` (the
pages sharing content together, a docs page at every release in turn: a host's first pages are one
group's), ``random-N`` (shuffled with seed N) and ``copies-first`` (the second URLs, recrawls and
republications before the originals).

Scored with a shingling of this script's own (NFKC, lower-cased ``\\w+`` words, 4-word shingles within
each line and sentence, as the package defines them, over the whole extracted text), not the
package's: a merge is **false** when the dropped page's full-text
Jaccard to the record it matched is under the threshold (0.82); a page is a **true near-duplicate**
when its full-text Jaccard to a page kept before it (in the order the pipeline decided) is at the
threshold or above, and item recall is the share of those dropped. Against the ground truth (which
source page and release each page was built from), merges across sources are counted too, with
those at full-text Jaccard >= 0.82 (a page and its next release, unchanged) apart. With the learner
on, per site: the share of removed words that are template words, the share of template words removed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import re
import statistics
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import html_text
import numpy as np

from multisite import (  # benchmarks/multisite.py
    _UNDERLINE,
    DEFAULT_CORPUS,
    MONTHS,
    SITE_HOSTS,
    Page,
    _release_key,
    _slug,
    crawl_order,
    crawl_settings,
    edit_one_word,
    furniture_table,
    rendered,
    run_in_reactor,
    serve,
    spider_class,
)

ORDERS = ("by-site", "grouped", "random-1", "random-2", "copies-first")
THRESHOLD = 0.82  # the pipeline's default SIMHASH_JACCARD_THRESHOLD
SHINGLE = 4
SITES = ("docs", "releases", "shop", "news")


@dataclass(frozen=True)
class Plan:
    """How many pages: docs pages x releases, advisories x branches, families x variants, statements x articles."""

    docs_pages: int
    docs_releases: int
    advisories: int
    branches: int
    plain_releases: int
    families: int
    variants: int
    statements: int
    articles: int
    aliases: int  # pages under a second URL per site; as many recrawls, and half as many and one republished
    seed: int = 1


PLAN = Plan(docs_pages=57, docs_releases=14, advisories=40, branches=3, plain_releases=60, families=60, variants=4,
            statements=50, articles=4, aliases=20)
SMALL_PLAN = Plan(docs_pages=8, docs_releases=2, advisories=3, branches=3, plain_releases=3, families=3, variants=3,
                  statements=3, articles=3, aliases=2)


# --- the text ----------------------------------------------------------------------------------------


def doc_blocks(body_text: str) -> list[tuple[str, str]]:
    """A corpus page as a docs site shows it: (tag, text) per heading and paragraph."""
    blocks = []
    for block in re.split(r"\n\s*\n", body_text):
        lines = block.strip("\n").split("\n")
        if len(lines) in (2, 3) and _UNDERLINE.match(lines[-1]) and (len(lines) == 2 or _UNDERLINE.match(lines[0])):
            blocks.append(("h2", lines[-2].strip()))
        elif (text := rendered(block)) and re.search(r"\w", text):
            blocks.append(("p", text))
    return blocks


class Prose:
    """Distinct prose paragraphs of the corpus (20 to 120 words, no code), handed out once each, in a seeded order."""

    def __init__(self, rows: Iterable[dict], rng: random.Random) -> None:
        seen: set[str] = set()
        self.paragraphs: list[str] = []
        self.sentences: list[str] = []
        for row in sorted(rows, key=lambda r: (r["page"], _release_key(r["release"]))):
            for tag, text in doc_blocks(row["body_text"]):
                words = text.split()
                if tag != "p" or not 20 <= len(words) <= 120 or text in seen or re.search(r"[{}()=\[\]]", text):
                    continue
                seen.add(text)
                self.paragraphs.append(text)
                for sentence in re.split(r"(?<=\.) ", text):
                    if 6 <= len(sentence.split()) <= 25 and sentence not in seen:
                        seen.add(sentence)
                        self.sentences.append(sentence)
        rng.shuffle(self.paragraphs)
        rng.shuffle(self.sentences)

    def paragraph(self) -> str:
        return self.paragraphs.pop()

    def sentence(self, max_words: int = 25) -> str:
        for i in range(len(self.sentences) - 1, -1, -1):
            if len(self.sentences[i].split()) <= max_words:
                return self.sentences.pop(i)
        raise ValueError(f"the corpus has too few sentences of at most {max_words} words for this plan")

    def change(self, rng: random.Random) -> str:
        """A line of a changelog: a short sentence and an issue number."""
        return f"{self.sentence(14)} (issue {rng.randint(3000, 6999)})"


# --- the sites ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """What a page is built from: its key (page@release, advisory and version, product, article), the group
    of sources that share content (a docs page, an advisory, a product family, a statement), its content."""

    key: str
    group: str
    title: str
    blocks: tuple[tuple[str, str], ...]  # (tag, text)
    path: str
    byline: str  # per-page furniture: the release a docs page is of, a date


def template(site: str, titles: list[str]) -> tuple[list[tuple[bool, str, str]], list[tuple[bool, str, str]]]:
    """The site's fixed furniture before and after the content: header, navigation, sidebar, footer."""
    brand, nav, sidebar, footer = {
        "docs": ("Scrapy documentation", ("Home", "First steps", "Basic concepts", "Built-in services",
                                          "Solving specific problems", "Extending Scrapy", "Release notes"),
                 titles[:12], ("© Copyright Scrapy developers. Built with Sphinx using a theme provided by"
                               " Read the Docs.", "Found a mistake? Edit this page on GitHub.")),
        "releases": ("Scrapy project blog", ("Blog", "Releases", "Security", "Community", "Download"),
                     ("Subscribe to release announcements", "Security policy", "Supported versions",
                      "Report a vulnerability"),
                     ("The Scrapy project is maintained by Zyte and many other contributors.",
                      "Licensed under BSD-3-Clause. Privacy policy.")),
        "shop": ("Crawler Supply Co.", ("All products", "Spider kits", "Proxies", "Storage", "Support", "Cart"),
                 ("Free shipping on orders over $50", "30-day returns", "Secure checkout", "Gift cards"),
                 ("Crawler Supply Co. ships worldwide from Lisbon. Prices include VAT where applicable.",
                  "Terms of sale · Privacy · Cookies · Contact us")),
        "news": ("The Web Data Herald", ("Front page", "Industry", "Open source", "Policy", "Opinion", "Events"),
                 ("Most read this week", "Newsletter sign-up", "Podcasts", "Corrections"),
                 ("The Web Data Herald is an independent newsroom. Read our editorial standards and our"
                  " corrections policy.", "Copyright 2024 The Web Data Herald. All rights reserved.")),
    }[site]
    head = [(True, "p", brand)] + [(True, "li", item) for item in nav]
    tail = [(True, "h2", "On this site")] + [(True, "li", item) for item in sidebar]
    return head, tail + [(True, "p", line) for line in footer]


def _date(rng: random.Random) -> str:
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.choice((2022, 2023, 2024))}"


def docs_sources(rows: list[dict], plan: Plan) -> list[Source]:
    """Each of the most released corpus pages at evenly spread releases, newest first."""
    by_page: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        by_page[row["page"]][row["release"]] = row
    releases = sorted({row["release"] for row in rows}, key=_release_key, reverse=True)
    step = max(1, len(releases) // plan.docs_releases)
    chosen = releases[::step][: plan.docs_releases]
    pages = sorted(by_page, key=lambda page: (-len(by_page[page]), page))[: plan.docs_pages]
    sources = []
    for release in chosen:
        for page in sorted(pages):
            row = by_page[page].get(release)
            if row is None:
                continue
            blocks = doc_blocks(row["body_text"])
            if blocks and blocks[0][0] == "h2":
                blocks = blocks[1:]
            name = page.removeprefix("docs/").removesuffix(".rst")
            sources.append(Source(f"{page}@{release}", page, row["title"], tuple(blocks),
                                  f"/en/{release}/{name}.html", f"Scrapy {release} documentation"))
    return sources


def release_sources(prose: Prose, plan: Plan, rng: random.Random) -> list[Source]:
    """Security releases of parallel branches, each followed by ordinary releases of the newest branch.

    The notes of one security release carry the same advisory; they differ in their version line and
    date, and, for every other advisory, in which of the backported fixes they list.
    """
    sources: list[Source] = []
    minor, patches, plain = 1, Counter[str](), 0
    for advisory in range(plan.advisories):
        advisory_text = [("p", prose.paragraph()) for _ in range(rng.randint(1, 3))]
        backports = [prose.change(rng) for _ in range(rng.randint(2, 6))]
        for branch in [f"2.{minor}", f"2.{minor - 1}", "1.8"][: plan.branches]:
            patches[branch] += 1
            version = f"{branch}.{patches[branch]}"
            fixes = backports if advisory % 2 else [s for s in backports if rng.random() < 0.6] + [prose.change(rng)]
            blocks = [("h2", "Security bug fixes"), *advisory_text, ("h2", "Other changes"),
                      *(("li", fix) for fix in fixes), ("p", f"Upgrade: pip install scrapy=={version}")]
            sources.append(Source(f"advisory {advisory} {version}", f"advisory {advisory}", f"Scrapy {version}",
                                  tuple(blocks), f"/releases/{version}.html", f"Released on {_date(rng)}"))
        while plain < (advisory + 1) * plan.plain_releases / plan.advisories:
            plain, minor = plain + 1, minor + 1
            version = f"2.{minor}.0"
            fixes = [("li", prose.change(rng)) for _ in range(rng.randint(4, 8))]
            blocks = [("h2", "Highlights"), ("p", prose.paragraph()), ("h2", "Bug fixes"), *fixes,
                      ("p", f"Upgrade: pip install scrapy=={version}")]
            sources.append(Source(f"release {version}", f"release {version}", f"Scrapy {version}", tuple(blocks),
                                  f"/releases/{version}.html", f"Released on {_date(rng)}"))
    return sources


_SPECS = (
    ("Capacity", ("2 TB", "4 TB", "8 TB", "16 TB", "500 GB")),
    ("Colour", ("black", "white", "graphite", "sand")),
    ("Weight", ("1.2 kg", "850 g", "2.4 kg", "640 g")),
    ("Connector", ("USB-C", "Thunderbolt 4", "SATA", "NVMe")),
    ("Warranty", ("1 year", "2 years", "3 years", "5 years")),
    ("Price", ("$49", "$89", "$129", "$219", "$349")),
    ("Dimensions", ("12 x 8 x 2 cm", "20 x 14 x 4 cm", "9 x 6 x 1 cm")),
    ("In the box", ("cable and case", "cable, case and stand", "quick-start guide only")),
    ("Stock", ("in stock", "ships in 3 days", "pre-order", "2 left")),
)


def shop_sources(prose: Prose, plan: Plan, rng: random.Random) -> list[Source]:
    """Product families: one description for every variant, each variant its own specification lines."""
    sources = []
    for family in range(plan.families):
        name = f"Spider Kit {family + 1:03d}"
        description = [("p", prose.paragraph()) for _ in range(rng.randint(1, 3))]
        for variant in range(plan.variants):
            specs = [("li", f"{label}: {rng.choice(values)}") for label, values in _SPECS]
            specs.append(("li", f"Model number: SK-{family:03d}-{variant}{rng.randint(100, 999)}"))
            review = [("p", f"Customer review: {prose.sentence()}")] if rng.random() < 0.5 else []
            variant_name = f"{name} {'ABCDEFGH'[variant]}"
            blocks = [("h2", "Description"), *description, ("h2", "Specifications"), *specs, *review]
            sources.append(Source(f"product {family}/{variant}", f"family {family}", variant_name, tuple(blocks),
                                  f"/products/{_slug(variant_name)}.html",
                                  f"Item {family:03d}-{variant} · listed {_date(rng)}"))
    return sources


def news_sources(prose: Prose, plan: Plan, rng: random.Random) -> list[Source]:
    """Articles of their own, each group quoting one statement paragraph."""
    sources = []
    for statement in range(plan.statements):
        quoted = f"\u201c{prose.paragraph()}\u201d said the maintainers in a statement."
        for article in range(plan.articles):
            paragraphs = [("p", prose.paragraph()) for _ in range(rng.randint(2, 5))]
            at = rng.randint(1, len(paragraphs))
            blocks = [*paragraphs[:at], ("p", quoted), *paragraphs[at:]]
            title = prose.sentence().rstrip(".")
            path = f"/{2022 + statement % 3}/{statement:03d}{article}-{_slug(title)}.html"
            sources.append(Source(f"article {statement}/{article}", f"statement {statement}", title, tuple(blocks),
                                  path, f"By staff · {_date(rng)}"))
    return sources


def build_web(rows: list[dict], plan: Plan = PLAN) -> tuple[list[list[Page]], list[Source]]:
    """The pages of the four sites (Page.article indexes the sources) and the sources they were built from."""
    rng = random.Random(plan.seed)
    prose = Prose(rows, rng)
    per_site = [docs_sources(rows, plan), release_sources(prose, plan, rng), shop_sources(prose, plan, rng),
                news_sources(prose, plan, rng)]
    sources = [source for site in per_site for source in site]
    web, first = [], 0
    for site, own in enumerate(per_site):
        head, tail = template(SITES[site], [s.title for s in own])
        pages = []
        for n, source in enumerate(own):
            pages.append(_page(site, first + n, "original", source.path, source, list(source.blocks), head, tail))
        picks = rng.sample(range(len(own)), min(len(own), 2 * plan.aliases + plan.aliases // 2 + 1))
        for n, i in enumerate(picks):
            source = own[i]
            if n < plan.aliases:
                kind, path, blocks = "alias", f"/print{source.path}", list(source.blocks)
            elif n < 2 * plan.aliases:
                kind, path = "typo", source.path.replace(".html", "-rev2.html")
                edited = edit_one_word([text for _, text in source.blocks], rng)
                blocks = [(tag, text) for (tag, _), text in zip(source.blocks, edited)]
            else:
                kind, path = "republished", source.path.replace(".html", "-updated.html")
                blocks = list(source.blocks) + [("p", f"Update: {prose.sentence()}")]
            pages.append(_page(site, first + i, kind, path, source, blocks, head, tail))
        first += len(own)
        assert len({p.path for p in pages}) == len(pages), SITES[site]
        web.append(pages)
    return web, sources


def _page(site: int, source_id: int, kind: str, path: str, source: Source, blocks: list[tuple[str, str]],
          head: list[tuple[bool, str, str]], tail: list[tuple[bool, str, str]]) -> Page:
    page = Page(site, path, source_id, kind)
    byline = [(True, "p", f"{SITES[site].capitalize()} › {source.title[:40]}"), (False, "h1", source.title),
              (True, "p", source.byline)]
    page.blocks = head + byline + [(False, tag, text) for tag, text in blocks] + tail
    return page


def load_web(corpus: Path, plan: Plan = PLAN) -> tuple[list[list[Page]], list[Source]]:
    """The web built from ``corpus`` (JSON lines, gzip-compressed when its name ends in .gz), each page's
    extracted text checked against the blocks the generator put in it."""
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    web, sources = build_web(rows, plan)
    for site in web:
        for page in site:
            page.text = html_text.extract_text(page.body()).strip()
            expected = [" ".join(text.split()) for _, _, text in page.blocks]
            assert [line for line in page.text.split("\n") if line.strip()] == expected, page.path
    return web, sources


def order_of(web: list[list[Page]], sources: list[Source], name: str) -> list[Page]:
    """The order the spider requests the pages in: multisite.py's orders, or ``grouped``: site by site,
    the pages that share content together (a docs page at every release, then the next page), so that
    a host's first pages are one group's."""
    if name != "grouped":
        return crawl_order(web, name)
    ordered = []
    for site in web:
        first: dict[str, int] = {}
        for n, page in enumerate(site):
            first.setdefault(sources[page.article].group, n)
        ordered += sorted(site, key=lambda page: first[sources[page.article].group])
    return ordered


# --- the independent shingling -----------------------------------------------------------------------


# Where a shingle stops, as the package defines it (fingerprint version 3): a line end, or a sentence
# end that no word character follows ("etc., so" and "('../page" stop too, "3.5" does not).
_SEGMENT_END = re.compile(r"\n|[.!?](?!\w)")


def shingles(text: str) -> np.ndarray:
    """Sorted distinct hashes of the text's 4-word shingles (NFKC, lower-cased \\w+ words) within each
    line and sentence; a shorter segment is one shingle."""
    grams = set()
    for segment in _SEGMENT_END.split(unicodedata.normalize("NFKC", text).lower()):
        words = re.findall(r"\w+", segment)
        if words:
            grams.update(hash(tuple(words[i : i + SHINGLE])) for i in range(max(1, len(words) - SHINGLE + 1)))
    return np.array(sorted(grams), dtype=np.int64)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common) if len(a) + len(b) else 1.0


def near_pairs(sets: dict[str, np.ndarray], threshold: float = THRESHOLD) -> dict[str, set[str]]:
    """Every pair at Jaccard >= threshold, exactly (prefix filtering: two such sets share one of the
    rarest |x| - ceil(t|x|) + 1 shingles of each)."""
    frequency = Counter(value for hashes in sets.values() for value in hashes.tolist())
    index: dict[int, list[str]] = defaultdict(list)
    near: dict[str, set[str]] = defaultdict(set)
    for url, hashes in sorted(sets.items(), key=lambda pair: len(pair[1])):
        rarest = sorted(hashes.tolist(), key=lambda value: (frequency[value], value))
        prefix = rarest[: len(rarest) - math.ceil(threshold * len(rarest)) + 1]
        candidates = {other for value in prefix for other in index[value]}
        for other in candidates:
            if len(sets[other]) >= threshold * len(hashes) and jaccard(hashes, sets[other]) >= threshold:
                near[url].add(other)
                near[other].add(url)
        for value in prefix:
            index[value].append(url)
    return near


# --- the crawls --------------------------------------------------------------------------------------


def recording_spider() -> type:
    """multisite.py's spider, also recording the text the pipeline's learner returns for each text it strips."""
    from scrapy import signals

    base = spider_class()

    class SinglehostSpider(base):
        name = "singlehost"

        def __init__(self, *args: Any, stripped: dict[str, str], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.stripped = stripped

        @classmethod
        def from_crawler(cls, crawler, *args: Any, **kwargs: Any):
            spider = super().from_crawler(crawler, *args, **kwargs)
            crawler.signals.connect(spider.observe_learner, signals.spider_opened)
            return spider

        def observe_learner(self) -> None:
            from scrapy_simhash.pipelines import SimhashPipeline

            for pipeline in self.crawler.engine.scraper.itemproc.middlewares:
                learner = getattr(pipeline, "learner", None) if isinstance(pipeline, SimhashPipeline) else None
                if learner is not None:
                    strip, stripped = learner.strip, self.stripped

                    async def recorded(host: str, text: str, *args: Any, **kwargs: Any):
                        result = await strip(host, text, *args, **kwargs)
                        stripped[text] = result.text
                        return result

                    learner.strip = recorded

    return SinglehostSpider


async def crawl(order: list[Page], workdir: Path, learner: bool, overrides: dict[str, str]
                ) -> tuple[list[tuple[str, str]], dict, dict]:
    """One crawl of ``order`` with the add-on (SQLite index in ``workdir``): outcomes, stats, stripped texts."""
    from scrapy.crawler import AsyncCrawlerRunner

    settings: dict[str, Any] = {"ADDONS": {"scrapy_simhash.Addon": 0}, **crawl_settings(workdir)}
    if not learner:
        settings["SIMHASH_BOILERPLATE"] = False
    settings.update(overrides)
    runner = AsyncCrawlerRunner(settings)
    outcomes: list[tuple[str, str]] = []
    stripped: dict[str, str] = {}
    crawler = runner.create_crawler(recording_spider())
    await runner.crawl(crawler, urls=[p.url for p in order], outcomes=outcomes, stripped=stripped)
    return outcomes, crawler.stats.get_stats(), stripped


def score(web: list[list[Page]], sources: list[Source], full: dict[str, np.ndarray], near: dict[str, set[str]],
          outcomes: list[tuple[str, str]], merges: list[dict], stripped: dict[str, str]) -> dict[str, Any]:
    """The figures of one crawl (JSON-ready)."""
    pages = {p.url: p for site in web for p in site}
    merged = {r["duplicate_url"]: r for r in merges if r["decision"] == "merged"}
    false, across, gaps = [], [], []
    for url, record in merged.items():
        matched = record.get("matched_url") or record["canonical_url"]
        similarity = jaccard(full[url], full[matched])
        entry = {"duplicate": url, "matched": matched, "logged_jaccard": record["jaccard"], "full_jaccard": similarity,
                 "duplicate_source": sources[pages[url].article].key,
                 "matched_source": sources[pages[matched].article].key}
        gaps.append(abs(record["jaccard"] - similarity))
        if similarity < THRESHOLD:
            false.append(entry)
        if pages[url].article != pages[matched].article:
            across.append(entry)
    kept: set[str] = set()
    near_duplicates: Counter[int] = Counter()
    caught: Counter[int] = Counter()
    missed = []
    for url, outcome in outcomes:
        if near[url] & kept:
            near_duplicates[pages[url].site] += 1
            caught[pages[url].site] += outcome == "dropped"
            if outcome == "kept":
                missed.append(url)
        if outcome == "kept":
            kept.add(url)
    dropped = {url for url, outcome in outcomes if outcome == "dropped"}
    first_judged: dict[int, str] = {}
    for url, _ in outcomes:
        first_judged.setdefault(pages[url].article, url)
    built_from = Counter(p.article for p in pages.values())
    copies = [url for url, p in pages.items() if built_from[p.article] > 1 and first_judged.get(p.article) != url]
    sites = []
    table = furniture_table(list(pages.values()), {url: stripped.get(p.text, p.text) for url, p in pages.items()})
    for site, name in enumerate(SITES):
        own = [url for url, p in pages.items() if p.site == site]
        sites.append({"site": name, "host": SITE_HOSTS[site], "pages": len(own),
                      "dropped": sum(url in dropped for url in own),
                      "false_merges": sum(pages[e["duplicate"]].site == site for e in false),
                      "near_duplicates": near_duplicates[site], "caught": caught[site],
                      "template_share_of_removed": table[site][0], "template_removed": table[site][1],
                      "template_share_of_removed_titles_aside": table[site][2]})
    return {
        "items": len(pages),
        "kept": len(kept),
        "dropped": len(dropped),
        "never_judged": len(pages) - len(outcomes),
        "false_merges": false,
        "merges": len(merged),
        "logged_vs_full_gap": {"median": statistics.median(gaps) if gaps else 0.0, "max": max(gaps, default=0.0)},
        "across_sources": across,
        "near_duplicates": sum(near_duplicates.values()),
        "caught": sum(caught.values()),
        "recall": sum(caught.values()) / sum(near_duplicates.values()) if near_duplicates else 1.0,
        "missed": missed,
        "copies": len(copies),
        "copies_dropped": sum(url in dropped for url in copies),
        "sites": sites,
    }


def run_crawls(web: list[list[Page]], sources: list[Source], orders: list[str], learners: tuple[bool, ...],
               overrides: dict[str, str]) -> list[dict[str, Any]]:
    """Every order crawled with the learner on, then off, in this process (one reactor), each with a fresh index."""
    from scrapy_simhash.mergelog import read_merge_log

    full = {p.url: shingles(p.text) for site in web for p in site}
    near = near_pairs(full)
    for url in full:
        near.setdefault(url, set())
    reports: list[dict[str, Any]] = []

    async def all_orders() -> None:
        for name in orders:
            for learner in learners:
                with tempfile.TemporaryDirectory() as tmp:
                    started = time.perf_counter()
                    outcomes, stats, stripped = await crawl(order_of(web, sources, name), Path(tmp), learner, overrides)
                    merges = list(read_merge_log(str(Path(tmp) / "merges.jsonl")))
                    report = score(web, sources, full, near, outcomes, merges, stripped)
                    report.update(order=name, learner=learner, seconds=time.perf_counter() - started,
                                  empty_content=stats.get("simhash/empty_content", 0),
                                  stats={k: v for k, v in stats.items() if k.startswith("simhash/")})
                    if learner:
                        report["unrecorded"] = sum(p.text not in stripped for site in web for p in site)
                    reports.append(report)
                    print(f"  crawled {name}, learner {'on' if learner else 'off'}: {len(report['false_merges'])}"
                          f" false merges, item recall {report['recall']:.3f} ({report['seconds']:.0f} s)", flush=True)

    run_in_reactor(all_orders)
    return reports


# --- the report --------------------------------------------------------------------------------------


def describe(web: list[list[Page]], sources: list[Source]) -> None:
    """What the web holds: pages per site and kind, and how alike the pages that share content are."""
    print(f"{sum(map(len, web))} pages on {len(web)} hosts:")
    for site, pages in enumerate(web):
        kinds = Counter(p.kind for p in pages)
        print(f"  {SITES[site]:9s} {SITE_HOSTS[site]:>10s}  {len(pages):5d} pages  {dict(kinds)}")
    groups: dict[tuple[int, str], list[Page]] = defaultdict(list)
    for site in web:
        for page in site:
            if page.kind == "original":
                groups[(page.site, sources[page.article].group)].append(page)
    print("  full-text Jaccard between distinct pages that share content (min / median / max, share >= 0.82):")
    for site, name in enumerate(SITES):
        values = [jaccard(shingles(a.text), shingles(b.text)) for (s, _), members in groups.items() if s == site
                  for i, a in enumerate(members[:6]) for b in members[i + 1 : 6]]
        if values:
            print(f"  {name:9s} {min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"
                  f"  ({sum(v >= THRESHOLD for v in values) / len(values):.2f} of {len(values)} pairs)")


def _recall(site: dict[str, Any]) -> str:
    return f"{site['caught'] / site['near_duplicates']:.3f}" if site["near_duplicates"] else "-"


def print_reports(reports: list[dict[str, Any]]) -> None:
    print(f"\nFalse merge: full-text Jaccard (this script's 4-word shingles) to the matched record < {THRESHOLD};"
          f" item recall: true near-duplicates (full-text J >= {THRESHOLD} to a page kept before) dropped;"
          " across sources: merges of pages built from different sources (a page and another release),"
          " of which false; copies: pages of a source after its first, dropped; |logged J - full-text J| of"
          " the merges, median/max.")
    print("order          learner  items  kept dropped  false merges  item recall          across sources"
          "  copies dropped  empty  |logged-full|   s")
    for r in reports:
        across_false = sum(e["full_jaccard"] < THRESHOLD for e in r["across_sources"])
        recall = f"{r['recall']:.3f} ({r['caught']}/{r['near_duplicates']})"
        gap = r["logged_vs_full_gap"]
        print(f"{r['order']:14s} {'on' if r['learner'] else 'off':>7s}  {r['items']:5d} {r['kept']:5d}"
              f" {r['dropped']:7d}  {len(r['false_merges']):12d}  {recall:19s} {len(r['across_sources']):5d}"
              f" ({across_false:3d} false)  {r['copies_dropped']:6d}/{r['copies']:<6d}  {r['empty_content']:5d}"
              f"  {gap['median']:.2f}/{gap['max']:.2f}  {r['seconds']:4.0f}")
    print("\nlearner on: simhash/* stats of the learner and the short-text path")
    for r in reports:
        if r["learner"]:
            learned = {name: value for name, value in r["stats"].items()
                       if name.startswith(("simhash/boilerplate/", "simhash/short_texts", "simhash/empty_content"))}
            listed = ", ".join(f"{name.removeprefix('simhash/')} {value}" for name, value in sorted(learned.items()))
            print(f"  {r['order']:14s} {listed}")
    print("\nper site: false merges and item recall with the learner on and off; with it on, removed words"
          " that are template (titles aside), template words removed")
    print("order          site       false on/off  recall on / off   template share of removed  template removed")
    for r in reports:
        if r["learner"]:
            off = {s["site"]: s for o in reports if o["order"] == r["order"] and not o["learner"] for s in o["sites"]}
            for s in r["sites"]:
                other = off.get(s["site"], {"false_merges": "-", "near_duplicates": 0})
                print(f"{r['order']:14s} {s['site']:9s} {s['false_merges']:7d}/{other['false_merges']:<5}"
                      f" {_recall(s):>6s} / {_recall(other):6s} {s['template_share_of_removed']:13.2f}"
                      f" ({s['template_share_of_removed_titles_aside']:.2f}) {s['template_removed']:17.2f}")
            if r["unrecorded"]:
                print(f"    (what the learner left of {r['unrecorded']} pages was not seen: nothing removed, counted)")
    for r in reports:
        shown: set[str] = set()
        for e in r["false_merges"]:
            kind = e["duplicate_source"].split()[0]
            if kind not in shown:
                shown.add(kind)
                print(f"  FALSE MERGE ({r['order']}, learner {'on' if r['learner'] else 'off'}):"
                      f" {e['duplicate_source']} -> {e['matched_source']}, logged J {e['logged_jaccard']:.2f},"
                      f" full-text J {e['full_jaccard']:.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--small", action="store_true", help="the test's web: 70 pages")
    parser.add_argument("--learner", choices=("both", "on", "off"), default="both")
    parser.add_argument("--json", type=Path, help="also write the figures of every crawl to this file")
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every crawl (SIMHASH_BOILERPLATE_SAMPLE_PAGES=10)")
    args = parser.parse_args(argv)
    web, sources = load_web(args.corpus, SMALL_PLAN if args.small else PLAN)
    describe(web, sources)
    orders = args.orders.split(",")
    with serve(web):
        learners = {"both": (True, False), "on": (True,), "off": (False,)}[args.learner]
        reports = run_crawls(web, sources, orders, learners, dict(pair.split("=", 1) for pair in args.settings))
    print_reports(reports)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
