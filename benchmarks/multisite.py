"""Multi-site crawl: syndicated copies across sites of 3 to 200 pages, each page inside its site's furniture.

    python benchmarks/multisite.py [--corpus PATH] [--orders by-site,random-1,...] [--compare]

Articles are sections of the shared Scrapy-docs corpus, rendered as a docs site shows them (rst
directives and labels are markup, not text), of 200 to 2,000 words and far from each other (shingle
Jaccard < 0.2). Seven sites of 200, 80, 40, 15, 6, 3 and 3 pages publish them inside their own
templates: fixed furniture (header, navigation, cookie notice, share bar, newsletter box, footer) and
per-page furniture (a byline with author, date and reading time; "Related stories" naming other pages
of the site; a "More in <section>" sidebar that differs by section; "Originally published on" and
"Read more" on syndicated copies). A third of the pages are copies: verbatim, one word edited, two
paragraphs swapped, cut short (the last paragraphs, at most 8 % of the words, replaced by "Read
more", what a Jaccard >= 0.82 rule can still call a copy), and on one host the same page under a
second URL or republished with a one-word edit.

The sites are served by threaded ``http.server`` instances on 127.0.0.2-8 (one host each) and
crawled, in several orders, by a real Scrapy spider in this process that yields
``html_text.extract_text(response.css("body").get())`` as ``body_text``, through SimhashPipeline with
the boilerplate learner on (SQLite index, default rule). Printed per order: item recall (copies
dropped / copy pages, a copy being every page of an article after the first one judged) per host,
false merges (a merge-log record joining two different articles), and per host what the learner
removed (share of removed words that are template words, share of template words removed), the
Jaccard of verbatim copies on two hosts after removal (plain and symmetric: each side also without
the other host's furniture), how long pages were held and what the learner kept in memory.
``--compare`` first prints the alternatives measured offline on the same pages (each learner fed the
pages in crawl order, an exhaustive index: every page compared with every kept page).
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import os
import random
import re
import statistics
import tempfile
import threading
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import html_text
import numpy as np

from scrapy_simhash.boilerplate import BoilerplateLearner, PageLines, Stripped, documents, encode, learn, page_lines
from scrapy_simhash.fingerprint import Fingerprinter, jaccard_hashes, token_count, verification_hashes

DEFAULT_CORPUS = Path(
    os.environ.get("SIMHASH_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus-scrapy-docs.jsonl")
)
ORDERS = ("by-site", "small-first", "interleaved", "random-1", "random-2", "copies-first")
JACCARD = 0.82  # the pipeline's default SIMHASH_JACCARD_THRESHOLD, for the offline comparison
FINGERPRINTER = Fingerprinter()


# --- articles ---------------------------------------------------------------------------------------

_UNDERLINE = re.compile(r"^([=\-~^\"*+#`:.'_])\1{2,}\s*$")
_DIRECTIVE = re.compile(r"^\.\.\s")
_OPTION = re.compile(r"^\s*:[\w-]+:(\s|$)")


@dataclass(frozen=True)
class Article:
    id: int
    title: str
    paragraphs: tuple[str, ...]


def rendered(block: str) -> str:
    """What a docs site shows of an rst paragraph, on one line: directives, labels and comments are markup."""
    lines = block.strip("\n").split("\n")
    if _DIRECTIVE.match(lines[0]):
        lines = [line for line in lines[1:] if not _OPTION.match(line) and not _DIRECTIVE.match(line.strip())]
    return " ".join(" ".join(lines).split())


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


def articles(rows: Iterable[dict], min_words: int = 200, max_words: int = 2000, max_jaccard: float = 0.2
             ) -> list[Article]:
    """Sections of the corpus pages, newest release first, short ones joined to the next, far from each other."""
    chosen: list[tuple[Article, int]] = []
    owners: dict[int, list[int]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: _release_key(r["release"]), reverse=True):
        sections: list[list] = []
        for block in re.split(r"\n\s*\n", row["body_text"]):
            lines = block.strip("\n").split("\n")
            underlined = len(lines) in (2, 3) and _UNDERLINE.match(lines[-1])
            if underlined and (len(lines) == 2 or _UNDERLINE.match(lines[0])):  # an rst heading
                if sections and sum(len(p.split()) for p in sections[-1][1]) < min_words:
                    continue  # a short section runs on into the next one
                sections.append([lines[-2].strip(), []])
            elif sections and (text := rendered(block)):
                sections[-1][1].append(text)
        for heading, paragraphs in sections:
            if not min_words <= sum(len(p.split()) for p in paragraphs) <= max_words:
                continue
            shingles = np.unique(FINGERPRINTER.shingle_hashes("\n".join(paragraphs)))
            shared: Counter[int] = Counter()
            for value in shingles.tolist():
                shared.update(owners.get(value, ()))
            if any(n / (len(shingles) + chosen[o][1] - n) >= max_jaccard for o, n in shared.items()):
                continue
            title = row["title"] if heading.lower() in row["title"].lower() else f"{row['title']}: {heading}"
            if any(_slug(title) == _slug(a.title) for a, _ in chosen):
                continue  # one page per URL: an older release's section of the same name is left out
            for value in shingles.tolist():
                owners[value].append(len(chosen))
            chosen.append((Article(len(chosen), title, tuple(paragraphs)), len(shingles)))
    return [article for article, _ in chosen]


# --- sites and pages --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    brand: str
    nav: tuple[str, ...]
    sections: tuple[str, ...]
    authors: tuple[str, ...]
    footer: tuple[str, ...]
    cookie: str = ""
    share: str = ""
    newsletter: str = ""
    related: int = 4
    sidebar_first: bool = False


TEMPLATES = (
    Template(
        brand="The Crawler Times",
        nav=("Home", "News", "Tutorials", "Opinion", "Events", "Jobs", "About us"),
        sections=("Tutorials", "Deployment", "Internals", "Community", "Releases"),
        authors=("Ada Byron", "Grace Hopper", "Linus Pauling", "Barbara Liskov", "Ken Thompson"),
        cookie="We use cookies to personalise content and ads, to provide social media features and to analyse"
        " our traffic. You can change your choices at any time.",
        share="Share this article on Twitter, Facebook, LinkedIn or by email",
        newsletter="Get the best of The Crawler Times in your inbox every Friday. Sign up for our newsletter.",
        footer=("The Crawler Times is an independent publication about web data. Contact the newsroom, advertise"
                " with us, read our privacy policy and our terms of use.",
                "Copyright 2024 The Crawler Times Media Group. All rights reserved."),
    ),
    Template(
        brand="DevWire",
        nav=("Latest", "Python", "Data", "Cloud", "Podcasts", "Newsletter"),
        sections=("Python", "Data", "Cloud"),
        authors=("Sam Rivers", "Jo Marsh", "Alex Kim"),
        cookie="This site uses cookies. By continuing to browse you agree to our use of cookies.",
        share="Share: Twitter · Mastodon · Reddit · Hacker News · Copy link",
        related=5,
        sidebar_first=True,
        footer=("DevWire republishes articles with the permission of their authors.",
                "Privacy · Cookies · Terms · Contact · Advertise"),
    ),
    Template(
        brand="Planet Scraping",
        nav=("Planet home", "Sources", "Add your feed", "Archives"),
        sections=("Posts",),
        authors=("planet bot",),
        related=3,
        footer=("Planet Scraping aggregates posts from the community; every post belongs to its author.",),
    ),
    Template(
        brand="Data Engineering Weekly",
        nav=("Issues", "Topics", "Sponsors", "Subscribe"),
        sections=("Pipelines", "Storage"),
        authors=("Priya N.", "Tom O."),
        cookie="Cookies help us deliver our services. Accept all or manage your preferences.",
        share="Share this story",
        newsletter="Subscribe to Data Engineering Weekly: one email, every Monday, no spam.",
        footer=("Data Engineering Weekly, made by engineers for engineers.", "Unsubscribe at any time."),
    ),
    Template(
        brand="Small Blog of Crawling",
        nav=("Blog", "About me"),
        sections=("Blog",),
        authors=("Kim",),
        share="Like this post? Share it with a friend.",
        related=2,
        footer=("Powered by a static site generator. Comments are closed.",),
    ),
    Template(
        brand="Tiny Scraper Notes",
        nav=("Home", "Archive", "Contact"),
        sections=("Notes",),
        authors=("R. Lee", "M. Chan"),
        cookie="This website stores cookies on your computer to improve your experience.",
        related=2,
        footer=("Tiny Scraper Notes, since 2019.", "All opinions are my own."),
    ),
    Template(
        brand="Web Data Digest",
        nav=("Front page", "Digest", "About"),
        sections=("Digest",),
        authors=("The editors",),
        share="Share on social media",
        newsletter="Get the digest by email.",
        related=2,
        footer=("Web Data Digest collects the week's best writing on web data.",),
    ),
)
# Per site: originals, copies of other sites' articles, the same page under a second URL, a
# republication of one of its pages with a one-word edit.
PLAN = ((140, 50, 6, 4), (50, 26, 2, 2), (25, 13, 2, 0), (9, 5, 1, 0), (3, 3, 0, 0), (1, 2, 0, 0), (1, 1, 1, 0))
SMALL_PLAN = ((8, 3, 1, 0), (4, 2, 0, 0), (1, 2, 0, 0), (1, 1, 1, 0))
COPY_KINDS = ("verbatim", "edit", "reorder", "cut")
MONTHS = ("January", "March", "May", "July", "September", "November")


@dataclass
class Page:
    """A page of the web and the truth about it: its article, how it was made, which blocks are template."""

    site: int
    path: str
    article: int
    kind: str  # original, verbatim, edit, reorder, cut, alias (second URL), update (republished, edited)
    blocks: list[tuple[bool, str, str]] = field(default_factory=list)  # (template?, tag, text)
    url: str = ""
    text: str = ""  # what the spider's extraction gives

    def body(self) -> str:
        blocks = "\n".join(f"<{tag}>{html.escape(text)}</{tag}>" for _, tag, text in self.blocks)
        return f"<body>\n{blocks}\n</body>"


def edit_one_word(paragraphs: Iterable[str], rng: random.Random) -> list[str]:
    paragraphs = list(paragraphs)
    i = rng.choice([n for n, p in enumerate(paragraphs) if len(p.split()) > 3])
    words = paragraphs[i].split()
    words[rng.randrange(len(words))] = rng.choice(("data", "crawler", "quickly", "often", "page", "really"))
    paragraphs[i] = " ".join(words)
    return paragraphs


def swap_two(paragraphs: Iterable[str], rng: random.Random) -> list[str]:
    paragraphs = list(paragraphs)
    if len(paragraphs) >= 2:
        i, j = rng.sample(range(len(paragraphs)), 2)
        paragraphs[i], paragraphs[j] = paragraphs[j], paragraphs[i]
    return paragraphs


def cut_short(paragraphs: Iterable[str], keep: float = 0.92) -> list[str]:
    """The last paragraphs dropped (at most 1 - keep of the words), or the last one shortened."""
    kept = list(paragraphs)
    words = [len(p.split()) for p in kept]
    budget = int((1 - keep) * sum(words))
    while len(kept) > 1 and words[len(kept) - 1] <= budget:
        budget -= words[len(kept) - 1]
        kept.pop()
    if len(kept) == len(words):
        last = kept[-1].split()
        kept[-1] = " ".join(last[: max(1, len(last) - budget)])
    return kept


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]


def build_web(pool: list[Article], plan: tuple[tuple[int, ...], ...] = PLAN, seed: int = 1) -> list[list[Page]]:
    """The pages of each site (site i uses TEMPLATES[i]), the truth recorded on each page."""
    rng = random.Random(seed)
    pool = list(pool)
    rng.shuffle(pool)
    originals = [[pool.pop() for _ in range(n)] for n, *_ in plan]
    entries: list[list[tuple[Article, str, int, list[str]]]] = [
        [(a, "original", site, list(a.paragraphs)) for a in mine] for site, mine in enumerate(originals)
    ]
    for site, (_, copies, aliases, updates) in enumerate(plan):
        others = [(a, origin) for origin, mine in enumerate(originals) if origin != site for a in mine]
        rng.shuffle(others)
        others.sort(key=lambda pair: len(originals[pair[1]]))  # small sites' articles are copied first
        for n, (article, origin) in enumerate(others[:copies]):
            kind = COPY_KINDS[(site + n) % len(COPY_KINDS)]
            paragraphs = {"verbatim": list(article.paragraphs), "edit": edit_one_word(article.paragraphs, rng),
                          "reorder": swap_two(article.paragraphs, rng), "cut": cut_short(article.paragraphs)}[kind]
            entries[site].append((article, kind, origin, paragraphs))
        mine = entries[site][: len(originals[site])]
        entries[site] += [(a, "alias", site, p) for a, _, _, p in mine[:aliases]]
        republished = mine[aliases : aliases + updates]
        entries[site] += [(a, "update", site, edit_one_word(p, rng)) for a, _, _, p in republished]
    return [_render_site(site, site_entries, rng) for site, site_entries in enumerate(entries)]


def _render_site(site: int, entries: list[tuple[Article, str, int, list[str]]], rng: random.Random) -> list[Page]:
    template = TEMPLATES[site]
    section_of = {a.id: template.sections[i % len(template.sections)] for i, (a, *_) in enumerate(entries)}
    listed = [a for a, kind, *_ in entries if kind not in ("alias", "update")]
    by_section: dict[str, list[str]] = defaultdict(list)
    for a in listed:
        by_section[section_of[a.id]].append(a.title)
    pages, rendered_blocks = [], {}
    for article, kind, origin, paragraphs in entries:
        section = section_of[article.id]
        folder = {"alias": f"amp/{section.lower()}"}.get(kind, section.lower())
        path = f"/{folder}/{_slug(article.title)}{'-updated' if kind == 'update' else ''}.html"
        page = Page(site, path, article.id, kind)
        if kind == "alias":
            page.blocks = rendered_blocks[article.id]
            pages.append(page)
            continue
        sidebar = [(True, "h2", f"More in {section}")] + [(True, "li", t) for t in by_section[section][:5]]
        head = [(True, "p", template.brand)] + [(True, "li", item) for item in template.nav]
        if template.sidebar_first:
            head += sidebar
        if template.cookie:
            head.append((True, "p", template.cookie))
        head.append((True, "p", f"Home › {section}"))
        byline = (f"By {rng.choice(template.authors)} · {rng.randint(1, 28)} {rng.choice(MONTHS)}"
                  f" {rng.choice((2022, 2023, 2024))} · {rng.randint(2, 14)} min read")
        body = [(False, "h1", article.title), (True, "p", byline)]
        if kind in COPY_KINDS:
            body.append((True, "p", f"Originally published on {TEMPLATES[origin].brand}"))
        if template.share:
            body.append((True, "p", template.share))
        body += [(False, "p", p) for p in paragraphs]
        if kind == "cut":
            body.append((True, "p", "Read more »"))
        related = [a.title for a in listed if a.id != article.id]
        rng.shuffle(related)
        tail = [(True, "h2", "Related stories")] + [(True, "li", t) for t in related[: template.related]]
        if not template.sidebar_first:
            tail += sidebar
        if template.newsletter:
            tail.append((True, "p", template.newsletter))
        tail += [(True, "p", line) for line in template.footer]
        page.blocks = rendered_blocks[article.id] = head + body + tail
        pages.append(page)
    return pages


def crawl_order(web: list[list[Page]], name: str) -> list[Page]:
    """The order the spider requests the pages in."""
    pages = [p for site in web for p in site]
    if name == "by-site":
        return pages
    if name == "small-first":
        return [p for site in sorted(web, key=len) for p in site]
    if name == "interleaved":
        return [site[i] for i in range(max(map(len, web))) for site in web if i < len(site)]
    if name == "copies-first":
        return [p for p in pages if p.kind != "original"] + [p for p in pages if p.kind == "original"]
    if name.startswith("random-"):
        random.Random(int(name.split("-")[1])).shuffle(pages)
        return pages
    raise ValueError(f"unknown order {name!r}, one of {ORDERS}")


# --- what the learner removed -----------------------------------------------------------------------


def removed_words(page: Page, stripped: str) -> tuple[int, int, int, int]:
    """(template words removed, content words removed, template words on the page, title words removed)
    for a line-level removal; the title (the page's h1) is content."""
    kept = [line.strip() for line in stripped.split("\n") if line.strip()]
    template_removed = content_removed = template_words = title_removed = 0
    i = 0
    for is_template, tag, block in page.blocks:
        line = " ".join(block.split())
        words = token_count(line)
        template_words += words if is_template else 0
        if i < len(kept) and kept[i] == line:
            i += 1
        elif is_template:
            template_removed += words
        else:
            content_removed += words
            title_removed += words if tag == "h1" else 0
    return template_removed, content_removed, template_words, title_removed


def furniture_table(pages: list[Page], stripped: dict[str, str]) -> dict[int, tuple[float, float, float]]:
    """Per site: (share of removed words that are template words, share of template words removed,
    the first share with the titles removed left aside)."""
    sums: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for page in pages:
        for i, value in enumerate(removed_words(page, stripped[page.url])):
            sums[page.site][i] += value
    return {site: (t / (t + c) if t + c else 1.0, t / total, t / (t + c - titles) if t + c - titles else 1.0)
            for site, (t, c, total, titles) in sums.items()}


def verbatim_jaccards(
    pages: list[Page], kept: Callable[[Page], np.ndarray], furniture: dict[int, np.ndarray]
) -> tuple[list[float], list[float]]:
    """Jaccard of every verbatim copy with its original: plain, and each side without the other host's furniture."""
    originals = {p.article: p for p in pages if p.kind == "original"}
    plain, symmetric = [], []
    for copy in (p for p in pages if p.kind == "verbatim"):
        original = originals[copy.article]
        a, b = kept(original), kept(copy)
        plain.append(jaccard_hashes(a, b))
        a_symmetric, b_symmetric = np.setdiff1d(a, furniture[copy.site]), np.setdiff1d(b, furniture[original.site])
        symmetric.append(jaccard_hashes(a_symmetric, b_symmetric))
    return plain, symmetric


def shingles_of(text: str) -> np.ndarray:
    return verification_hashes(FINGERPRINTER.shingle_hashes(text))


# --- the offline comparison -------------------------------------------------------------------------


def old_rule(samples: list[np.ndarray], min_share: float = 0.05) -> np.ndarray:
    """The shingle-level rule this learner replaces: a shingle on more than 5 % of the sample's documents
    (and on two), or on half its pages; pages still alike (Jaccard >= 0.5) without the latter are one document."""
    hashes, counts = np.unique(np.concatenate(samples), return_counts=True)
    template = hashes[counts >= 0.5 * len(samples)]
    documents: list[np.ndarray] = []
    for page in samples:
        content = np.setdiff1d(page, template, assume_unique=True)
        for i, document in enumerate(documents):
            if jaccard_hashes(content, document) >= 0.5:
                documents[i] = np.union1d(document, content)
                break
        else:
            documents.append(content)
    spread, per_document = np.unique(np.concatenate(documents), return_counts=True)
    return np.union1d(template, spread[(per_document > min_share * len(documents)) & (per_document >= 2)])


def repeated_lines(pages: list[PageLines]) -> np.ndarray:
    """The segment-level rule alone: lines on two documents or more of the sample (copies counting once)."""
    document = documents(pages)
    pairs = {(line, d) for page, d in zip(pages, document.tolist()) for line in page.hashes[page.counts > 0].tolist()}
    spread = Counter(line for line, _ in pairs)
    return np.array(sorted(line for line, n in spread.items() if n >= 2), dtype=np.uint64)


def simulate(order: list[Page], variant: str, sample: int
             ) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray], dict[str, tuple[int, int, int]]]:
    """Each page's kept verification hashes, each site's furniture hashes and each page's removed words
    (removed_words) under ``variant``, learned from the first ``sample`` pages of each site in ``order``
    (a smaller site: from all its pages; the old rule: none). Shingle-level removal counts a word as
    removed when every shingle it is in was."""
    by_site: dict[int, list[Page]] = defaultdict(list)
    for page in order:
        by_site[page.site].append(page)
    kept, furniture, scores = {}, {}, {}
    for site, pages in by_site.items():
        first = [page_lines(p.text) for p in pages[:sample]]
        if variant.startswith("shingles"):
            samples = [np.unique(FINGERPRINTER.shingle_hashes(p.text)) for p in pages[:sample]]
            hashes = old_rule(samples) if len(samples) == sample else np.empty(0, np.uint64)
            furniture[site] = verification_hashes(hashes)
            for page in pages:
                every = FINGERPRINTER.shingle_hashes(page.text)
                kept[page.url] = verification_hashes(every[~np.isin(every, hashes)])
                scores[page.url] = _shingle_removal(page, np.isin(every, hashes))
            continue
        model = learn(first)
        lines = repeated_lines(first) if variant == "lines repeated" else model.lines
        furniture[site] = model.verification if variant != "lines repeated" else _line_shingles(first, lines)
        for page in pages:
            split = page_lines(page.text)
            if variant == "lines repeated":
                drop = np.isin(split.hashes, lines) & (split.counts > 0)
                text = "\n".join(line for line, gone in zip(split.lines, drop.tolist()) if not gone)
            else:
                text = model.strip(split)
            kept[page.url] = shingles_of(text)
            scores[page.url] = removed_words(page, text)
    return kept, furniture, scores


def _line_shingles(pages: list[PageLines], lines: np.ndarray) -> np.ndarray:
    found = [FINGERPRINTER.shingle_hashes(text) for page in pages
             for text, line in zip(page.lines, page.hashes.tolist()) if line in set(lines.tolist())]
    return verification_hashes(np.concatenate(found)) if found else np.empty(0, np.uint32)


def _shingle_removal(page: Page, removed: np.ndarray) -> tuple[int, int, int, int]:
    kinds = [is_template for is_template, _, block in page.blocks for _ in range(token_count(block))]
    alive = np.zeros(len(kinds), dtype=bool)
    width = min(FINGERPRINTER.width, len(kinds))
    for start in np.flatnonzero(~removed).tolist():
        alive[start : start + width] = True
    template = sum(1 for k, a in zip(kinds, alive) if k and not a)
    content = sum(1 for k, a in zip(kinds, alive) if not k and not a)
    return template, content, sum(kinds), 0


def exhaustive_recall(order: list[Page], kept: dict[str, np.ndarray]) -> tuple[float, int]:
    """(recall, false merges) of the decision rule alone: each page matched against every kept page."""
    canon: list[tuple[int, np.ndarray]] = []
    seen: Counter[int] = Counter()
    dropped = false = 0
    for page in order:
        best, article = 0.0, -1
        for other, hashes in canon:
            j = jaccard_hashes(kept[page.url], hashes)
            if j > best:
                best, article = j, other
        seen[page.article] += 1
        if best >= JACCARD:
            dropped += article == page.article
            false += article != page.article
        else:
            canon.append((page.article, kept[page.url]))
    return dropped / sum(n - 1 for n in seen.values()), false


def compare(web: list[list[Page]], orders: list[str]) -> None:
    pages = [p for site in web for p in site]
    sizes = [len(site) for site in web]
    variants = [("shingles, 5 % of 30 pages", 30), ("shingles, 5 % of 3 pages", 3), ("lines repeated", 3)]
    variants += [("lines + runs + bylines", k) for k in (2, 3, 5, 8)]
    print("\nAlternatives, offline (exhaustive index, threshold 0.82): removed words that are template /"
          " template words removed, per site size; Jaccard of verbatim copies on two hosts min/median")
    for name in orders:
        order = crawl_order(web, name)
        print(f"order {name}")
        for variant, sample in variants:
            kept, furniture, scores = simulate(order, variant, sample)
            sums: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
            for page in pages:
                for i, value in enumerate(scores[page.url]):
                    sums[page.site][i] += value
            cells = " ".join(f"{sizes[site]}:{t / (t + c) if t + c else 1:.2f}/{t / n:.2f}"
                             for site, (t, c, n, _) in sorted(sums.items()))
            plain, symmetric = verbatim_jaccards(pages, lambda p: kept[p.url], furniture)
            recall, false = exhaustive_recall(order, kept)
            print(f"  {variant:26s} sample {sample:2d}  {cells}  J {min(plain):.3f}/{statistics.median(plain):.3f}"
                  f" sym {min(symmetric):.3f}/{statistics.median(symmetric):.3f}  recall {recall:.3f} false {false}")


def costs(web: list[list[Page]]) -> None:
    """CPU of learning a site from its first 3 pages and of stripping each page, and the furniture's size."""
    strip_us, learn_ms, memory, stored = [], [], [], []
    for site in web:
        sample = [page_lines(p.text) for p in site[:3]]
        started = time.perf_counter()
        furniture = learn(sample)
        learn_ms.append(1e3 * (time.perf_counter() - started))
        lines = page_lines(site[0].text)
        tracemalloc.start()
        kept = learn(sample)
        kept.strip(lines)  # with the sets strip() keeps
        memory.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
        del kept
        stored.append(len(encode(furniture)))
        for page in site:
            started = time.perf_counter()
            furniture.strip(page_lines(page.text))
            strip_us.append(1e6 * (time.perf_counter() - started))
    words = statistics.median(len(p.text.split()) for site in web for p in site)
    print(f"\nCosts, offline: strip() {statistics.median(strip_us):.0f} us a page median,"
          f" {sorted(strip_us)[int(0.9 * len(strip_us))]:.0f} us at the 90th percentile (pages of {words:.0f} words"
          f" median, line hashing included); learning a site from 3 pages {statistics.median(learn_ms):.1f} ms median,"
          f" {max(learn_ms):.1f} ms at most; furniture {min(memory) / 1e3:.1f}-{max(memory) / 1e3:.1f} kB in memory"
          f" (tracemalloc), {min(stored)}-{max(stored)} bytes stored")


# --- the crawl --------------------------------------------------------------------------------------

SITE_HOSTS = [f"127.0.0.{2 + i}" for i in range(len(TEMPLATES))]


@contextmanager
def serve(web: list[list[Page]]) -> Iterator[None]:
    """Each site on its own loopback address (its own host for the learner), one threaded server each."""
    servers = []
    for site, pages in enumerate(web):
        bodies = {page.path: page.body().encode("utf-8") for page in pages}

        class Handler(BaseHTTPRequestHandler):
            pages = bodies

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = self.pages.get(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer((SITE_HOSTS[site], 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        for page in pages:
            page.url = f"http://{SITE_HOSTS[site]}:{server.server_address[1]}{page.path}"
    try:
        yield
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def spider_class():
    import scrapy
    from scrapy import signals

    class MultisiteSpider(scrapy.Spider):
        """Requests the pages in the given order and yields each page's whole <body> as text."""

        name = "multisite"

        def __init__(self, urls: list[str], outcomes: list[tuple[str, str]], **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.urls = urls
            self.outcomes = outcomes  # (url, "kept" | "dropped") in the order the pipeline decided

        @classmethod
        def from_crawler(cls, crawler, *args: Any, **kwargs: Any):
            spider = super().from_crawler(crawler, *args, **kwargs)
            crawler.signals.connect(spider.kept, signals.item_scraped)
            crawler.signals.connect(spider.dropped, signals.item_dropped)
            return spider

        def kept(self, item: dict) -> None:
            self.outcomes.append((item["url"], "kept"))

        def dropped(self, item: dict) -> None:
            self.outcomes.append((item["url"], "dropped"))

        async def start(self):
            for n, url in enumerate(self.urls):
                yield scrapy.Request(url, priority=-n)

        def parse(self, response):
            yield {"url": response.url, "body_text": html_text.extract_text(response.css("body").get())}

    return MultisiteSpider


class Recorder:
    """What the crawl's learner did: each page's stripped text, how long each strip() waited, what was held."""

    def __init__(self) -> None:
        self.stripped: dict[str, str] = {}  # by the text the learner saw
        self.waits: list[float] = []
        self.in_flight_chars = self.peak_chars = 0
        self.saved: dict[str, int] = {}  # bytes of each host's stored furniture
        self.learner: BoilerplateLearner | None = None


def recording_pipeline(recorder: Recorder) -> type:
    """SimhashPipeline whose learner also reports to ``recorder`` (the real learner, observed)."""
    from scrapy_simhash.pipelines import SimhashPipeline

    class RecordingStore:
        def __init__(self, store: Any) -> None:
            self.store = store

        async def load_boilerplate(self, host: str) -> bytes | None:
            return await self.store.load_boilerplate(host)

        async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
            recorder.saved[host] = len(blob)
            return await self.store.save_boilerplate(host, version, blob)

    class RecordingLearner(BoilerplateLearner):
        async def open(self, store: Any) -> None:
            await super().open(RecordingStore(store))

        async def strip(self, host: str, text: str) -> Stripped:
            started = time.perf_counter()
            recorder.in_flight_chars += len(text)
            recorder.peak_chars = max(recorder.peak_chars, recorder.in_flight_chars)
            try:
                result = await super().strip(host, text)
            finally:
                recorder.in_flight_chars -= len(text)
            recorder.waits.append(time.perf_counter() - started)
            recorder.stripped[text] = result.text
            return result

    class RecordingPipeline(SimhashPipeline):
        def __init__(self, crawler: Any) -> None:
            super().__init__(crawler)
            self.learner = recorder.learner = RecordingLearner(crawler, self.config)

    return RecordingPipeline


def crawl_settings(workdir: Path) -> dict[str, Any]:
    """What a benchmark crawl sets: a SQLite index and a merge log in ``workdir``, 16 requests a host, quiet logs."""
    return {
        "SIMHASH_INDEX_URL": f"sqlite:///{workdir}/index.sqlite3",
        "SIMHASH_MERGE_LOG": str(workdir / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": "",
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "DEFAULT_DROPITEM_LOG_LEVEL": "DEBUG",
    }


async def crawl(order: list[Page], workdir: Path, overrides: dict[str, Any]
                ) -> tuple[list[tuple[str, str]], dict, Recorder]:
    """One crawl of ``order`` through the pipeline (SQLite index in ``workdir``): outcomes, stats, the recorder."""
    from scrapy.crawler import AsyncCrawlerRunner

    recorder = Recorder()
    settings = {
        "ITEM_PIPELINES": {recording_pipeline(recorder): 300},
        "SIMHASH_BOILERPLATE": True,
        **crawl_settings(workdir),
        **overrides,
    }
    runner = AsyncCrawlerRunner(settings)
    outcomes: list[tuple[str, str]] = []
    crawler = runner.create_crawler(spider_class())
    await runner.crawl(crawler, urls=[p.url for p in order], outcomes=outcomes)
    return outcomes, crawler.stats.get_stats(), recorder


def crawl_report(web: list[list[Page]], order_name: str, outcomes: list[tuple[str, str]], merges: list[dict],
                 stats: dict, recorder: Recorder, furniture: dict[int, np.ndarray]) -> dict[str, Any]:
    """The figures of one crawl (JSON-ready): recall and false merges from the outcomes and the merge log,
    what the learner removed, how long it held pages.

    Of an article's pages, one is kept (the first kept, in the order the pipeline decided); every other
    page of it is a copy, caught when the merge log joins it to the same article.
    """
    pages = {p.url: p for site in web for p in site}
    per_article = Counter(p.article for p in pages.values())
    canonical: dict[int, str] = {}
    for url, outcome in outcomes:
        if outcome == "kept":
            canonical.setdefault(pages[url].article, url)
    merged = {r["duplicate_url"]: r for r in merges if r["decision"] == "merged"}
    stripped = {url: recorder.stripped[p.text] for url, p in pages.items()}
    copies: Counter[int] = Counter()
    caught: Counter[int] = Counter()
    missed = []
    for url, page in pages.items():
        if per_article[page.article] < 2 or canonical.get(page.article) == url:
            continue
        copies[page.site] += 1
        record = merged.get(url)
        if record is not None and pages[record["canonical_url"]].article == page.article:
            caught[page.site] += 1
        elif page.article in canonical:
            kept_text = stripped[canonical[page.article]]
            missed.append([page.kind, url, jaccard_hashes(shingles_of(stripped[url]), shingles_of(kept_text))])
    false = [[r["duplicate_url"], r["canonical_url"], r["jaccard"]] for r in merged.values()
             if any(pages[r[side]].article != pages[r["duplicate_url"]].article  # matched_url: where the log has it
                    for side in ("canonical_url", "matched_url") if r.get(side))]
    every = list(pages.values())
    plain, symmetric = verbatim_jaccards(every, lambda p: shingles_of(stripped[p.url]), furniture)
    verbatim = [p.url for p in every if p.kind == "verbatim"]
    table = furniture_table(every, stripped)
    waits = sorted(recorder.waits)
    return {
        "order": order_name,
        "recall": sum(caught.values()) / max(sum(copies.values()), 1),
        "copies": sum(copies.values()),
        "caught": sum(caught.values()),
        "false_merges": false,
        "missed": missed,
        "never_judged": len(pages) - len(outcomes),
        "sites": [{"host": SITE_HOSTS[site], "pages": len(web[site]), "copies": copies[site], "caught": caught[site],
                   "template_share_of_removed": table[site][0], "template_removed": table[site][1],
                   "template_share_of_removed_titles_aside": table[site][2]}
                  for site in range(len(web))],
        "verbatim_plain": plain,
        "verbatim_symmetric": symmetric,
        "verbatim_below_0.98": sorted([url, j] for j, url in zip(plain, verbatim) if j < 0.98),
        "held_max": stats.get("simhash/boilerplate/held_max", 0),
        "held_seconds_max": stats.get("simhash/boilerplate/held_seconds_max", 0),
        "held_characters_max": recorder.peak_chars,
        "strip_wait_ms": {"median": 1e3 * waits[len(waits) // 2], "p99": 1e3 * waits[int(0.99 * (len(waits) - 1))],
                          "max": 1e3 * waits[-1]},
        "hosts": {how: stats.get(f"simhash/boilerplate/hosts_{how}", 0) for how in ("learned", "relearned", "without")},
        "stored_bytes": sorted(recorder.saved.values()),
        "dropped": stats.get("simhash/dropped", 0),
        "kept": stats.get("item_scraped_count", 0),
    }


def print_report(report: dict[str, Any]) -> None:
    print(f"\norder {report['order']}: item recall {report['recall']:.3f} ({report['caught']}/{report['copies']} copy"
          f" pages dropped), false merges {len(report['false_merges'])}, pages never judged {report['never_judged']}")
    print("  site       pages  copies dropped  recall  removed words that are template (titles aside)"
          "  template words removed")
    for site in report["sites"]:
        recall = site["caught"] / site["copies"] if site["copies"] else 1.0
        print(f"  {site['host']:>10s}  {site['pages']:4d}    {site['copies']:4d} {site['caught']:6d}  {recall:6.3f}"
              f"  {site['template_share_of_removed']:31.3f} ({site['template_share_of_removed_titles_aside']:.3f})"
              f"  {site['template_removed']:22.3f}")
    plain, symmetric = report["verbatim_plain"], report["verbatim_symmetric"]
    print(f"  verbatim copies on two hosts ({len(plain)}), Jaccard after removal: plain min {min(plain):.3f}"
          f" median {statistics.median(plain):.3f}; symmetric min {min(symmetric):.3f}"
          f" median {statistics.median(symmetric):.3f}")
    for url, similarity in report["verbatim_below_0.98"]:
        print(f"    {url}: {similarity:.3f}")
    waits, hosts, stored = report["strip_wait_ms"], report["hosts"], report["stored_bytes"]
    print(f"  held: at most {report['held_max']} pages at once ({report['held_characters_max'] / 1e6:.2f} M characters"
          f" in strip()), longest warm-up {report['held_seconds_max']:.3f} s; strip() took median {waits['median']:.1f}"
          f" ms, p99 {waits['p99']:.1f} ms, max {waits['max']:.1f} ms")
    print(f"  hosts learned {hosts['learned']}, relearned {hosts['relearned']}, with one page {hosts['without']};"
          f" furniture stored {min(stored, default=0)}-{max(stored, default=0)} bytes a host;"
          f" dropped {report['dropped']}, kept {report['kept']}")
    for kind, url, similarity in report["missed"]:
        print(f"  missed: {kind} copy {url} (Jaccard {similarity:.3f} with the page kept)")
    for duplicate, canonical, similarity in report["false_merges"][:5]:
        print(f"  FALSE MERGE {duplicate} -> {canonical} (Jaccard {similarity:.3f})")


def run_crawls(web: list[list[Page]], orders: list[str], overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """Every order crawled in turn in this process (one reactor), each with a fresh index."""
    from scrapy_simhash.mergelog import read_merge_log

    reports: list[dict[str, Any]] = []

    async def all_orders() -> None:
        for name in orders:
            with tempfile.TemporaryDirectory() as tmp:
                outcomes, stats, recorder = await crawl(crawl_order(web, name), Path(tmp), overrides)
                merges = list(read_merge_log(str(Path(tmp) / "merges.jsonl")))
                assert recorder.learner is not None
                furniture = {site: await recorder.learner.furniture(SITE_HOSTS[site]) for site in range(len(web))}
                reports.append(crawl_report(web, name, outcomes, merges, stats, recorder, furniture))

    run_in_reactor(all_orders)
    return reports


def run_in_reactor(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``main()`` in this process's asyncio Twisted reactor until it ends; raise what it raised."""
    from scrapy.utils.defer import deferred_from_coro
    from scrapy.utils.log import configure_logging
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    configure_logging({"LOG_LEVEL": "WARNING"})
    failure: list[BaseException] = []
    done = deferred_from_coro(main())
    done.addErrback(lambda f: failure.append(f.value))
    done.addBoth(lambda _: reactor.stop())
    reactor.run()
    if failure:
        raise failure[0]


def load_web(corpus: Path, plan: tuple[tuple[int, ...], ...] = PLAN) -> list[list[Page]]:
    """The web built from ``corpus`` (JSON lines, gzip-compressed when its name ends in .gz), each page's
    extracted text checked against what the generator put in it, line by line."""
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    web = build_web(articles(rows), plan)
    for site in web:
        for page in site:
            page.text = html_text.extract_text(page.body()).strip()
            expected = [" ".join(text.split()) for _, _, text in page.blocks]
            assert [line for line in page.text.split("\n") if line.strip()] == expected, page.path
    return web


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--compare", action="store_true", help="first print the alternatives, measured offline")
    parser.add_argument("--small", action="store_true", help="the test's web: 4 sites of 3 to 12 pages")
    parser.add_argument("--json", type=Path, help="also write the figures of every crawl to this file")
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    web = load_web(args.corpus, SMALL_PLAN if args.small else PLAN)
    orders = args.orders.split(",")
    kinds = Counter(p.kind for site in web for p in site)
    print(f"{sum(map(len, web))} pages on {len(web)} sites of {[len(site) for site in web]} pages; {dict(kinds)}")
    with serve(web):
        if args.compare:
            compare(web, [o for o in orders if o in ("by-site", "random-1")] or orders[:1])
            costs(web)
        started = time.perf_counter()
        reports = run_crawls(web, orders, dict(pair.split("=", 1) for pair in args.settings))
    for report in reports:
        print_report(report)
    print(f"\n{len(orders)} crawls in {time.perf_counter() - started:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
