"""Listings reposted with their descriptions reordered: crawled through the pipeline with the add-on.

    python benchmarks/listings.py [--corpus PATH] [--per-class 100] [--seed 1] [-s NAME=VALUE ...] [--json OUT]

Descriptions are made of real prose: sentences of the newest release of each shared-corpus page (rst
markup out), each used in several descriptions, no two sharing more than one in 80 words. Each
also carries one to three template sentences every listing site repeats ("Pets welcome.", "Viewings
on weekday evenings.") and, one in three, a block of feature lines ("Balcony", "Lift"): distinct
descriptions that share them must stay distinct. Four length classes by word count (20-49, under
SIMHASH_MIN_WORDS and matched exactly; 50-99; 100-199; 200-300), and in each, ``--per-class``
descriptions reposted with their sentences and feature lines in another order and regrouped into
paragraphs, and ``--per-class // 2`` each reposted reordered with one word changed, reordered with a
sentence added, reordered with a sentence dropped. Originals and reposts (one host) are crawled in
a shuffled order by a real Scrapy spider (each item the answer to a ``data:`` request) with
``ADDONS = {"scrapy_simhash.Addon": 0}`` (the furniture learner on; ``-s SIMHASH_BOILERPLATE=False``
turns it off) and a SQLite index.

Printed per length class and kind of repost: reposts dropped (the second of the pair to be judged
dropped into the first one's group) and their share; false merges (a merge-log record joining two
different descriptions). ``--small`` builds 8 descriptions a kind and class from the example
project's data (the test's run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import multisite  # noqa: E402 (a sibling script)
from multisite import _UNDERLINE, _release_key, rendered  # noqa: E402

from scrapy_simhash.fingerprint import token_count  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus-scrapy-docs.jsonl"
SMALL_CORPUS = ROOT / "example_project" / "data" / "scrapy-docs.jsonl.gz"
LENGTHS = ((20, 49), (50, 99), (100, 199), (200, 300))
KINDS = ("reordered", "reordered, one word changed", "reordered, a sentence added", "reordered, a sentence dropped")
TEMPLATES = (
    "Viewings on weekday evenings.", "Pets welcome.", "No smoking.", "Available from next month.",
    "Deposit of two months' rent.", "Bills not included.", "Close to public transport.",
    "Contact us to arrange a viewing.", "Agency fees apply.", "Furnished on request.",
)
FEATURES = ("Balcony", "Lift", "Garden", "Parking space", "Cellar", "Fitted kitchen", "Dishwasher",
            "Washing machine", "Bike storage", "Double glazing", "Gas heating", "Wooden floors")
ADDON_SETTINGS = {"ADDONS": {"scrapy_simhash.Addon": 0}}

# rst inline markup, as a docs site renders it: roles, literals, links, emphasis.
_INLINE = [(re.compile(r":\w+:`([^`<]*?)\s*(<[^`>]*>)?`"), r"\1"), (re.compile(r"``([^`]*)``"), r"\1"),
           (re.compile(r"`([^`<]*?)\s*(<[^`>]*>)?`_+"), r"\1"), (re.compile(r"\*\*?([^*]+)\*\*?"), r"\1")]
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PROSE = re.compile(r"[A-Z][A-Za-z0-9 ,;:'()\-]+[.!?]")
_NOT_PROSE = (" ", "\t", "..", "*", "-", "|", "+", ">>>", "$")


def prose_sentences(rows: Iterable[dict]) -> list[str]:
    """Distinct sentences of 6-30 words of plain prose (no code, lists or headings) from the newest
    release of each page."""
    newest = {row["page"]: row for row in sorted(rows, key=lambda row: _release_key(row["release"]))}
    seen: set[str] = set()
    found = []
    for row in newest.values():
        for block in re.split(r"\n\s*\n", row["body_text"]):
            lines = block.strip("\n").split("\n")
            if lines[0].startswith(_NOT_PROSE) or any(map(_UNDERLINE.match, lines)):
                continue  # code, a list, a table, a directive or a heading
            text = rendered(block)
            for pattern, replacement in _INLINE:
                text = pattern.sub(replacement, text)
            for sentence in _SENTENCE_SPLIT.split(text):
                key = " ".join(re.findall(r"\w+", sentence.lower()))
                if _PROSE.fullmatch(sentence) and 6 <= len(sentence.split()) <= 30 and "::" not in sentence:
                    if key not in seen:
                        seen.add(key)
                        found.append(sentence)
    return found


@dataclass
class Listing:
    family: int  # the description: an original and its repost share it
    length: str  # its length class
    kind: str  # the repost's kind
    role: str  # "original" or "repost"
    url: str
    description: str
    words: int


@dataclass
class Description:
    sentences: list[str]  # prose and template sentences, in order
    features: list[str]  # feature lines, empty for two in three

    def text(self, rng: random.Random | None = None) -> str:
        """As html-text gives it: paragraphs of sentences, a blank line between; the feature lines one
        a line. With ``rng``, regrouped into paragraphs at random and the features placed at random."""
        cuts = sorted(rng.sample(range(1, len(self.sentences)), min(2, len(self.sentences) - 1))) if rng else [
            len(self.sentences) // 2] if len(self.sentences) > 3 else []
        bounds = [0, *cuts, len(self.sentences)]
        blocks = [" ".join(self.sentences[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]
        if self.features:
            blocks.insert(rng.randrange(len(blocks) + 1) if rng else len(blocks), "\n".join(self.features))
        return "\n\n".join(blocks)


class SentencePool:
    """Prose sentences handed out in shuffled rounds; a description is given none that would make it
    share more than ``limit`` sentences with another description."""

    def __init__(self, sentences: list[str], rng: random.Random) -> None:
        self.sentences, self.rng = sentences, rng
        self.queue: list[int] = []
        self.holders: dict[int, set[int]] = defaultdict(set)  # descriptions that hold each sentence

    def draw(self, owner: int, taken: list[int], limit: int = 1) -> int:
        """A sentence for description ``owner``, which holds ``taken``; late in a large run, when no
        sentence keeps within ``limit``, within one more."""
        shared = Counter(holder for sentence in taken for holder in self.holders[sentence] if holder != owner)
        for allowed in (limit, limit + 1, limit + 2):
            for _ in range(len(self.sentences)):
                if not self.queue:
                    self.queue = self.rng.sample(range(len(self.sentences)), len(self.sentences))
                candidate = self.queue.pop()
                if candidate not in taken and all(shared[holder] < allowed for holder in self.holders[candidate]):
                    self.holders[candidate].add(owner)
                    return candidate
                self.queue.insert(0, candidate)
        raise ValueError("the sentence pool is too small for this many descriptions")


def build_listings(sentences: list[str], per_class: int, seed: int = 1) -> list[Listing]:
    """Originals and reposts of every length class and kind, in a shuffled crawl order."""
    rng = random.Random(seed)
    pool = SentencePool(sentences, rng)
    listings: list[Listing] = []
    family = 0
    for low, high in LENGTHS:
        label = f"{low}-{high}"
        for kind in KINDS:
            for _ in range(per_class if kind == KINDS[0] else per_class // 2):
                original = _description(pool, family, low, high, rng)
                repost = _repost(original, kind, pool, family, rng)
                for role, text in (("original", original.text()), ("repost", repost)):
                    url = f"https://listings.example/{role}/{family}"
                    listings.append(Listing(family, label, kind, role, url, text, token_count(text)))
                family += 1
    rng.shuffle(listings)
    return listings


def _description(pool: SentencePool, owner: int, low: int, high: int, rng: random.Random) -> Description:
    target = rng.randint(low, high)
    for _ in range(100):
        features = rng.sample(FEATURES, rng.randint(2, 4)) if rng.random() < 1 / 3 else []
        sentences = rng.sample(TEMPLATES, rng.randint(1, 3))
        taken: list[int] = []
        while len(taken) < 2 or token_count(" ".join(sentences + features)) < target - 5:
            taken.append(pool.draw(owner, taken, limit=max(1, target // 80)))
            sentences.insert(rng.randrange(len(sentences) + 1), pool.sentences[taken[-1]])
        if low <= token_count(" ".join(sentences + features)) <= high:
            return Description(sentences, features)
        for sentence in taken:  # too long: give them back and draw again
            pool.holders[sentence].discard(owner)
    raise ValueError(f"no description of {low}-{high} words")


def _repost(original: Description, kind: str, pool: SentencePool, owner: int, rng: random.Random) -> str:
    """``original`` with its sentences and feature lines in another order, changed as ``kind`` says."""
    sentences = list(original.sentences)
    prose = [i for i, sentence in enumerate(sentences) if sentence not in TEMPLATES]
    if kind == KINDS[1]:
        at = rng.choice(prose)
        words = sentences[at].split(" ")
        words[rng.randrange(len(words) - 1)] = rng.choice(["spacious", "renovated", "sunny", "quiet", "central"])
        sentences[at] = " ".join(words)
    elif kind == KINDS[2]:
        held = [pool.sentences.index(s) for s in sentences if s not in TEMPLATES]
        sentences.append(pool.sentences[pool.draw(owner, held, limit=max(1, len(held) // 5))])
    elif kind == KINDS[3]:
        del sentences[rng.choice(prose)]
    order = list(range(len(sentences)))
    while order == sorted(order):
        rng.shuffle(order)
    features = rng.sample(original.features, len(original.features))
    return Description([sentences[i] for i in order], features).text(rng)


# --- the crawl --------------------------------------------------------------------------------------


def spider_class():
    import scrapy

    class ListingsSpider(multisite.spider_class()):
        """The multi-site benchmark's spider, each listing the answer to a data: request, in order."""

        name = "listings"

        async def start(self):
            for n, listing in enumerate(self.listings):
                yield scrapy.Request(f"data:,{n}", cb_kwargs={"listing": listing}, priority=-n, dont_filter=True)

        def parse(self, response, listing: dict):
            yield dict(listing)

    return ListingsSpider


def crawl(listings: list[Listing], workdir: Path, overrides: dict[str, Any]
          ) -> tuple[list[tuple[str, str]], list[dict]]:
    """One crawl of ``listings`` with the add-on (SQLite index in ``workdir``): outcomes and merge-log records."""
    from scrapy.crawler import AsyncCrawlerRunner
    from scrapy.utils.defer import deferred_from_coro
    from scrapy.utils.log import configure_logging
    from scrapy.utils.reactor import install_reactor

    from scrapy_simhash.mergelog import read_merge_log

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    configure_logging({"LOG_LEVEL": "WARNING"})
    settings = {
        **ADDON_SETTINGS,
        "SIMHASH_FIELDS": ["description"],
        "SIMHASH_INDEX_URL": f"sqlite:///{workdir}/index.sqlite3",
        "SIMHASH_MERGE_LOG": str(workdir / "merges.jsonl"),
        "SIMHASH_REVIEW_LOG": "",
        "CONCURRENT_REQUESTS": 16,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "DEFAULT_DROPITEM_LOG_LEVEL": "DEBUG",
        **overrides,
    }
    outcomes: list[tuple[str, str]] = []
    runner = AsyncCrawlerRunner(settings)
    failure: list[BaseException] = []
    items = [{"url": listing.url, "description": listing.description} for listing in listings]
    done = deferred_from_coro(runner.crawl(spider_class(), urls=[], outcomes=outcomes, listings=items))
    done.addErrback(lambda f: failure.append(f.value))
    done.addBoth(lambda _: reactor.stop())
    reactor.run()
    if failure:
        raise failure[0]
    return outcomes, list(read_merge_log(str(workdir / "merges.jsonl")))


def report(listings: list[Listing], outcomes: list[tuple[str, str]], merges: list[dict]) -> dict[str, Any]:
    """Reposts dropped by length class and kind, and false merges (JSON-ready)."""
    by_url = {listing.url: listing for listing in listings}
    decided = {url: n for n, (url, _) in enumerate(outcomes)}
    dropped = {url for url, outcome in outcomes if outcome == "dropped"}
    merged = [m for m in merges if m.get("decision") == "merged"]
    false = [m for m in merged if by_url[m["canonical_url"]].family != by_url[m["duplicate_url"]].family]
    families: dict[int, list[Listing]] = defaultdict(list)
    for listing in listings:
        families[listing.family].append(listing)
    table: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for pair in families.values():
        second = max(pair, key=lambda listing: decided.get(listing.url, -1))
        cell = table[pair[0].length][pair[0].kind]
        cell[0] += second.url in dropped
        cell[1] += 1
    return {
        "items": len(listings), "decided": len(outcomes), "dropped": len(dropped), "false_merges": len(false),
        "false_merge_examples": [(m["canonical_url"], m["duplicate_url"], m.get("jaccard")) for m in false[:5]],
        "reposts": {length: dict(kinds) for length, kinds in table.items()},
        "words": {length: [min(ws), max(ws)] for length, ws in _words_by_class(listings).items()},
    }


def _words_by_class(listings: list[Listing]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for listing in listings:
        if listing.role == "original":
            found[listing.length].append(listing.words)
    return found


def print_report(figures: dict[str, Any]) -> None:
    print(f"{figures['items']} items, {figures['decided']} decided, {figures['dropped']} dropped; "
          f"false merges {figures['false_merges']} {figures['false_merge_examples'] or ''}")
    print(f"  {'words':<9} " + "".join(f"{kind:>32}" for kind in KINDS))
    for length, kinds in sorted(figures["reposts"].items(), key=lambda item: int(item[0].split("-")[0])):
        low, high = figures["words"][length]
        cells = "".join(f"{f'{d}/{n} ({d / n:.1%})':>32}" for d, n in (kinds[kind] for kind in KINDS))
        print(f"  {length:<9} {cells}   (descriptions of {low}-{high} words)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--per-class", type=int, default=100, help="reordered reposts per length class")
    parser.add_argument("--small", action="store_true", help="the test's run: 8 a class, the example project's data")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    corpus = SMALL_CORPUS if args.small else args.corpus
    with (gzip.open if corpus.suffix == ".gz" else open)(corpus, "rt", encoding="utf-8") as lines:
        sentences = prose_sentences(json.loads(line) for line in lines)
    listings = build_listings(sentences, 8 if args.small else args.per_class, args.seed)
    print(f"{len(sentences)} prose sentences; {len(listings)} listings, {Counter(x.role for x in listings)}")
    overrides = dict(pair.split("=", 1) for pair in args.settings)
    with tempfile.TemporaryDirectory() as tmp:
        outcomes, merges = crawl(listings, Path(tmp), overrides)
    figures = report(listings, outcomes, merges)
    figures["settings"] = overrides
    print_report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
