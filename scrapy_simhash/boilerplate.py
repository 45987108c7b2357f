"""Learns each host's site furniture (navigation, bylines, related links, footers) and strips it from page text.

Built and driven by the pipeline when ``SIMHASH_BOILERPLATE`` is on; docs/boilerplate.md states the
rule, the figures that chose it and what it costs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import time
import unicodedata
import zlib
from collections import Counter, OrderedDict
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import compress
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from scrapy_simhash.fingerprint import (
    Fingerprinter,
    LineShingles,
    Shingling,
    segment_hashes,
    verification_hashes,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_simhash.settings import SimhashSettings

__all__ = [
    "BoilerplateLearner",
    "BoilerplateStore",
    "Furniture",
    "NO_FURNITURE",
    "Stripped",
    "decode",
    "encode",
    "learn",
    "page_lines",
]

logger = logging.getLogger(__name__)

# A line of at least this many words is prose: a run of lines between furniture lines that has
# none is furniture too (related links, a section's sidebar, a title and its byline).
LONG_LINE = 20
# A furniture line this short standing alone among other lines is the article's, by coincidence.
COINCIDENCE_WORDS = 2
# Sample pages this similar (line Jaccard, each line weighted by its words and by how few sample
# pages have it) are copies of one document: its releases, one page under two URLs.
SAME_DOCUMENT = 0.5
# Sample pages whose prose (lines of LONG_LINE words or more, weighted by their words) is this alike are
# versions of one text (a page at several releases, the variants of one product): one document
# (docs/decisions/sample-documents.md).
SAME_TEXT = 0.3
# A line on at least this share of a sample's documents, and on three (on every document of a sample
# of two or three), is template.
TEMPLATE_SHARE = 0.5
# Most pages a sample grows to while it holds one document (a host's first pages all copies or versions
# of one page), and most a learning step compares (documents() is quadratic in them).
# docs/decisions/sample-documents.md
MAX_SAMPLE_PAGES = 64
# Hosts whose furniture is kept in memory, least recently used dropped first (and loaded again
# from the index when the host comes back); hosts that still collect pages after an early warm-up.
CACHED_HOSTS = 1000
PENDING_SAMPLES = 100
# How often held pages are checked for a warm-up that can no longer complete (a stalled crawl,
# a full scraper slot); a warm-up's own deadline is a timer, not this tick.
TICK_SECONDS = 0.5
_WORD = re.compile(r"\w+")
# Furniture lines written into the stored set as text, for `scrapy simhash-boilerplate` to show.
EXAMPLES = 40
EXAMPLE_CHARS = 120


class PageLines(NamedTuple):
    """A text cut into its lines (html-text's blocks): each line's hash and word count."""

    lines: list[str]
    hashes: np.ndarray  # uint64 per line, 0 for a line without words
    counts: np.ndarray  # words per line


def page_lines(text: str) -> PageLines:
    hashes, counts = segment_hashes(text)
    return PageLines(text.split("\n"), hashes, counts)


def _distinct(page: PageLines) -> tuple[np.ndarray, np.ndarray]:
    """A page's distinct line hashes (sorted) and their word counts."""
    worded = page.counts > 0
    hashes, first = np.unique(page.hashes[worded], return_index=True)
    return hashes, page.counts[worded][first]


def _words(line: str) -> frozenset[int]:
    """CRC-32 of a line's lower-cased words, every number written 0 (a byline's date is one word on every page)."""
    words = _WORD.findall(unicodedata.normalize("NFKC", line).lower())
    return frozenset(zlib.crc32(b"0" if word.isdigit() else word.encode("utf-8")) for word in words)


def _alike(words: frozenset[int], pattern: frozenset[int]) -> bool:
    """Half of a line's words or more are the slot's recurring words."""
    return bool(words) and 2 * len(words & pattern) >= len(words)


def documents(pages: list[PageLines]) -> np.ndarray:
    """A document number per sample page: pages alike by either measure below are one.

    Their lines: the lines two pages have in common weigh SAME_DOCUMENT of their union or more, a line
    weighing its words times log(n / pages having it): a line on every page (the template, when there
    are three pages or more) weighs nothing and a document's own lines weigh most; pages with nothing
    of their own are one document. Of two pages, nothing tells the template apart: a line on both
    weighs log(3 / 2) against log(3) for a line on one.
    Their prose: the lines of LONG_LINE words or more two pages have in common, weighed by their words
    alone, are SAME_TEXT of their union or more: versions of one text, whose shared lines the first
    measure weighs as nothing when every sample page is one of them.
    When the prose makes every page one document but the lines tell several apart, the lines decide:
    nothing tells one text's versions from a template of long lines on every page (a sidebar of
    teasers), and the learner's sample waits for other pages first (versions_of_one_text).
    """
    by_lines, by_either = _document_numbers(pages)
    return by_lines if by_either.max() == 0 else by_either


def versions_of_one_text(pages: list[PageLines]) -> bool:
    """Every page's prose is another's: copies or versions of one text, or a template of long lines."""
    return bool(_document_numbers(pages)[1].max() == 0)


def _document_numbers(pages: list[PageLines]) -> tuple[np.ndarray, np.ndarray]:
    """documents() by the lines alone, and by the lines or the prose."""
    n = len(pages)
    distinct = [_distinct(page) for page in pages]
    every = np.concatenate([hashes for hashes, _ in distinct])
    words = np.concatenate([counts for _, counts in distinct]).astype(np.float64)
    unique, index, spread = np.unique(every, return_inverse=True, return_counts=True)
    line_words = np.zeros(len(unique))
    line_words[index] = words
    page_of = np.repeat(np.arange(n), [len(hashes) for hashes, _ in distinct])
    rare = line_words * np.log((n + (n == 2)) / spread)
    shared, union = _overlap(page_of, index, spread, rare, n)
    alike = shared >= SAME_DOCUMENT * union  # 0 >= 0 too: pages with nothing of their own are one document
    shared, union = _overlap(page_of, index, spread, np.where(line_words >= LONG_LINE, line_words, 0.0), n)
    return _groups(alike), _groups(alike | ((shared > 0) & (shared >= SAME_TEXT * union)))


def _groups(alike: np.ndarray) -> np.ndarray:
    """A number per page, 0 up: pages alike, directly or through others, share theirs (the smallest)."""
    group = np.arange(len(alike))
    for i, j in zip(*np.nonzero(np.triu(alike, 1))):
        low, high = sorted((group[i], group[j]))
        group[group == high] = low
    return np.unique(group, return_inverse=True)[1]


def _overlap(
    page_of: np.ndarray, index: np.ndarray, spread: np.ndarray, weight: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Weight of the lines each two pages have in common, and of the lines either has (n x n).

    Only lines on two pages or more enter the product: most of a sample's lines are one page's own."""
    own = np.bincount(page_of, weights=weight[index], minlength=n)
    columns = np.full(len(spread), -1)
    common = np.flatnonzero(spread >= 2)
    columns[common] = np.arange(len(common))
    on = columns[index] >= 0
    incidence = np.zeros((n, len(common)))
    incidence[page_of[on], columns[index[on]]] = 1.0
    shared = (incidence * weight[common]) @ incidence.T
    np.fill_diagonal(shared, own)
    return shared, own[:, None] + own[None, :] - shared


def _slot_keys(
    hashes: list[int], counts: list[int], furniture: list[bool], after: dict[int, int]
) -> Iterator[tuple[int, tuple[int, int]]]:
    """Positions of a page's short lines (its worded lines, in order) before its first or after its last long
    line, where bylines stand, with their slot: (the anchor before, lines since it; 0 and the position + 1
    before any). An anchor counts where it follows the anchor the template has before it (``after``)."""
    long_lines = [i for i, (count, marked) in enumerate(zip(counts, furniture)) if count >= LONG_LINE and not marked]
    first, last = (long_lines[0], long_lines[-1]) if long_lines else (len(counts), -1)
    anchor, since = 0, -1
    for i, line in enumerate(hashes):
        if after.get(line, -1) == anchor:
            anchor, since = line, i
        elif (i < first or i > last) and counts[i] < LONG_LINE and not furniture[i]:
            yield i, (anchor, i - since)


@dataclass(frozen=True)
class Furniture:
    """What a host's template looks like, learned from a sample of its pages.

    ``lines``: hashes of lines that are furniture wherever they appear; ``anchors``: the template lines
    (on most documents) always after the same template line (``after``, 0 for the page's start), the
    page's skeleton; ``grouped``: the template lines always between two others (menu items);
    ``slots``: (anchor, lines since it) places where every page has a line of recurring words (a
    byline), with those words.
    """

    lines: np.ndarray
    anchors: np.ndarray
    after: np.ndarray
    grouped: np.ndarray
    slots: dict[tuple[int, int], frozenset[int]]
    verification: np.ndarray  # uint32 verification hashes of the furniture lines' shingles
    pages: int  # sample pages and documents it was learned from
    documents: int
    examples: tuple[str, ...] = ()

    @property
    def version(self) -> int:
        """A number naming this furniture: the same furniture has the same version anywhere; 0 is none."""
        if not len(self.lines) and not self.slots:
            return 0
        digest = hashlib.blake2b(digest_size=8)
        for values in (self.lines, self.anchors, self.after, self.grouped):
            digest.update(values.astype("<u8").tobytes())
        for (anchor, offset), words in sorted(self.slots.items()):
            digest.update(np.array([anchor, offset, *sorted(words)], dtype="<u8").tobytes())
        return int.from_bytes(digest.digest(), "big") % (2**31 - 1) + 1

    @cached_property
    def _sets(self) -> tuple[frozenset[int], frozenset[int], dict[int, int]]:
        """The arrays as Python sets and a dict: a page has tens to hundreds of lines, too few for numpy."""
        return (frozenset(self.lines.tolist()), frozenset(self.grouped.tolist()),
                dict(zip(self.anchors.tolist(), self.after.tolist())))

    def mask(self, page: PageLines) -> tuple[list[int], list[bool]]:
        """The page's worded lines (their positions), and which of them are furniture.

        Python lists and sets: a page has tens to hundreds of lines, too few for numpy calls to pay."""
        lines, grouped, after = self._sets
        worded_at = np.flatnonzero(page.counts)
        worded = worded_at.tolist()
        hashes = page.hashes.take(worded_at).tolist()
        counts = page.counts.take(worded_at).tolist()
        furniture = list(map(lines.__contains__, hashes))
        for i, key in list(_slot_keys(hashes, counts, furniture, after)) if self.slots else ():
            pattern = self.slots.get(key)
            if pattern is not None:
                furniture[i] = _alike(_words(page.lines[worded[i]]), pattern)
        # A line of one or two words that the template always has between two others, alone here among
        # other lines, is the article's own ("Python": a menu item, a line of a list): kept, no border.
        alone = [i for i in range(1, len(hashes) - 1) if furniture[i] and counts[i] <= COINCIDENCE_WORDS
                 and not furniture[i - 1] and not furniture[i + 1] and hashes[i] in grouped] if grouped else ()
        for i in alone:
            furniture[i] = False
        # Runs of other lines between furniture lines: a run without one long line is furniture too,
        # except the page's largest run (a list-like article), and nothing when no run has a long line.
        runs = []  # (first line, end, words, has a long line) of each run, one after each furniture line
        first, words, prose = 0, 0, False
        for i, (marked, count) in enumerate(zip(furniture, counts)):
            if marked:
                runs.append((first, i, words, prose))
                first, words, prose = i + 1, 0, False
            else:
                words += count
                prose = prose or count >= LONG_LINE
        runs.append((first, len(counts), words, prose))
        if any(run[3] for run in runs):
            largest = max(range(len(runs)), key=lambda r: runs[r][2])  # the first of the most words
            for r, (first, end, _, prose) in enumerate(runs):
                if r != largest and not prose and first < end:
                    furniture[first:end] = [True] * (end - first)
        return worded, furniture

    def strip(self, page: PageLines) -> str:
        stripped = self.remove(page)
        return "\n".join(page.lines) if stripped is None else stripped

    def remove(self, page: PageLines) -> str | None:
        """The page's text without its furniture; None when every word of the page would go: a page
        is never all furniture, the learner took its content for some."""
        keep = self.kept(page)
        return None if keep is None else "\n".join(compress(page.lines, keep))

    def kept(self, page: PageLines) -> list[bool] | None:
        """Which of the page's lines stay once its furniture is out; None as for :meth:`remove`."""
        every = [True] * len(page.lines)
        if not len(self.lines) and not self.slots:
            return every
        worded, furniture = self.mask(page)
        if not any(furniture):
            return every
        if all(furniture):
            return None if worded else every
        for i, marked in zip(worded, furniture):
            if marked:
                every[i] = False
        return every


_NONE = np.empty(0, np.uint64)
NO_FURNITURE = Furniture(_NONE, _NONE, _NONE, _NONE, {}, np.empty(0, np.uint32), pages=0, documents=0)


def learn(pages: list[PageLines], fingerprinter: Fingerprinter | None = None) -> Furniture:
    """A host's furniture from sample pages (see docs/boilerplate.md for the rule, in words)."""
    if len(pages) < 2:
        return replace(NO_FURNITURE, pages=len(pages), documents=len(pages))
    document = documents(pages)
    count = int(document.max()) + 1
    if count < 2:  # copies of one page: nothing tells its furniture from its text
        return replace(NO_FURNITURE, pages=len(pages), documents=1)
    pairs = np.unique(  # (line, document), once each
        np.concatenate([np.stack([_distinct(page)[0], np.full(len(_distinct(page)[0]), d, np.uint64)], axis=1)
                        for page, d in zip(pages, document.tolist())]),
        axis=0,
    )
    hashes, spread = np.unique(pairs[:, 0], return_counts=True)
    sequences = [page.hashes[page.counts > 0].tolist() for page in pages]
    repeated = set(hashes[spread >= 2].tolist())
    inside = _inside_prose(sequences, [page.counts[page.counts > 0].tolist() for page in pages], repeated)
    repeated -= inside
    template = set(hashes[spread >= _template_documents(count)].tolist()) - inside
    furniture = template | _template_blocks(sequences, template, repeated)
    lines = np.array(sorted(furniture), dtype=np.uint64)
    anchors, after = _skeleton(sequences, template)
    # Menu items: template lines with template lines on both sides on every sample page.
    outside = {line for sequence in sequences for i, line in enumerate(sequence)
               if line in template and not template.issuperset(_neighbours(sequence, i))}
    grouped = np.array(sorted(template - outside), dtype=np.uint64)
    slots = _learn_slots(pages, document, lines, anchors, after)
    fingerprinter = fingerprinter or Fingerprinter()
    shingles, examples = [], Counter()
    for page in pages:
        for i in np.flatnonzero(np.isin(page.hashes, lines) & (page.counts > 0)).tolist():
            shingles.append(fingerprinter.shingle_hashes(page.lines[i]))
            examples[page.lines[i].strip()[:EXAMPLE_CHARS]] += 1
    verification = verification_hashes(np.concatenate(shingles)) if shingles else NO_FURNITURE.verification
    shown = tuple(line for line, _ in examples.most_common(EXAMPLES))
    return Furniture(lines, anchors, after, grouped, slots, verification, len(pages), count, shown)


def _inside_prose(sequences: list[list[int]], counts: list[list[int]], shared: set[int]) -> set[int]:
    """Shared lines that stand between two lines of prose of a sample page's own: a template sits
    before and after the content, so such a line is the content's, however many pages have it (a
    sentence every page of a manual has, a quoted statement, a line of a page's other version)."""
    inside: set[int] = set()
    for sequence, words in zip(sequences, counts):
        own = [i for i, (line, n) in enumerate(zip(sequence, words)) if n >= LONG_LINE and line not in shared]
        if len(own) >= 2:
            inside.update(line for line in sequence[own[0] + 1 : own[-1]] if line in shared)
    return inside


def _neighbours(sequence: list[int], i: int) -> list[int]:
    return sequence[max(i - 1, 0) : i] + sequence[i + 1 : i + 2]


def _template_documents(documents: int) -> int:
    """How many of a sample's documents a template line is on."""
    return documents if documents <= 3 else max(3, math.ceil(TEMPLATE_SHARE * documents))


def _template_blocks(sequences: list[list[int]], template: set[int], repeated: set[int]) -> set[int]:
    """Repeated lines that belong to the template's blocks: related links, a section's sidebar.

    A line on two documents or more is furniture when, on some page, it stands between lines that are
    template or repeated, in a block that touches the template; the first sentence two articles share
    (template on one side, the article on the other) is not.
    """
    between = set()
    for sequence in sequences:
        for i, line in enumerate(sequence):
            if line in repeated and line not in template:
                if all(n in template or n in repeated for n in _neighbours(sequence, i)):
                    between.add(line)
    blocks: set[int] = set()
    grown = True
    while grown:  # keep the lines connected to the template through other such lines
        grown = False
        for sequence in sequences:
            for i, line in enumerate(sequence):
                if line in between and line not in blocks:
                    if any(n in template or n in blocks for n in _neighbours(sequence, i)):
                        blocks.add(line)
                        grown = True
    return blocks


def _skeleton(sequences: list[list[int]], template: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """Template lines each always after the same one of them on every sample page (sorted), and that one."""
    anchors = set(template)
    while True:
        before: dict[int, set[int]] = {}
        for sequence in sequences:
            marked = [line for line in sequence if line in anchors]
            for previous, line in zip([0, *marked], marked):
                before.setdefault(line, set()).add(previous)
        unstable = {line for line, previous in before.items() if len(previous) > 1}
        if not unstable:
            ordered = sorted(before)
            previous = [before[line].pop() for line in ordered]
            return np.array(ordered, dtype=np.uint64), np.array(previous, dtype=np.uint64)
        anchors -= unstable


def _learn_slots(
    pages: list[PageLines], document: np.ndarray, lines: np.ndarray, anchors: np.ndarray, after: np.ndarray
) -> dict[tuple[int, int], frozenset[int]]:
    """Places after an anchor where the short lines of most documents share their words (bylines)."""
    furniture, previous = frozenset(lines.tolist()), dict(zip(anchors.tolist(), after.tolist()))
    seen: dict[tuple[int, int], dict[int, frozenset[int]]] = {}
    for page, doc in zip(pages, document.tolist()):
        worded = [i for i, count in enumerate(page.counts.tolist()) if count]
        hashes = [int(h) for h in page.hashes[worded].tolist()]
        marked = [line in furniture for line in hashes]
        for i, key in _slot_keys(hashes, page.counts[worded].tolist(), marked, previous):
            seen.setdefault(key, {}).setdefault(doc, _words(page.lines[worded[i]]))
    slots = {}
    for key, by_document in seen.items():
        if len(by_document) < 2:
            continue
        recurring = Counter(word for words in by_document.values() for word in words)
        pattern = frozenset(word for word, n in recurring.items() if n >= 2)
        alike = sum(_alike(words, pattern) for words in by_document.values())
        if alike >= 2 and 2 * alike >= len(by_document):
            slots[key] = pattern
    return slots


# --- the stored form --------------------------------------------------------------------------------

MAGIC = b"SBP"
FORMAT = 1
_HEADER = np.dtype([("pages", "<u2"), ("documents", "<u2"), ("lines", "<u4"), ("anchors", "<u4"),
                    ("grouped", "<u4"), ("slots", "<u4"), ("words", "<u4"), ("verification", "<u4"),
                    ("examples", "<u4")])


class BlobError(ValueError):
    """A stored furniture blob this version cannot read."""


def encode(furniture: Furniture) -> bytes:
    """The stored form: magic, format byte, a header of counts, then little-endian arrays and UTF-8 examples."""
    keys = sorted(furniture.slots)
    patterns = [sorted(furniture.slots[key]) for key in keys]
    shown = [line.encode("utf-8") for line in furniture.examples]  # EXAMPLE_CHARS characters: a u2 length
    counts = (min(furniture.pages, 65535), min(furniture.documents, 65535), len(furniture.lines),
              len(furniture.anchors), len(furniture.grouped), len(keys), sum(map(len, patterns)),
              len(furniture.verification), len(shown))
    header = np.array([counts], dtype=_HEADER)
    parts = [
        MAGIC, bytes([FORMAT]), header.tobytes(),
        furniture.lines.astype("<u8").tobytes(), furniture.anchors.astype("<u8").tobytes(),
        furniture.after.astype("<u8").tobytes(), furniture.grouped.astype("<u8").tobytes(),
        np.array([anchor for anchor, _ in keys], dtype="<u8").tobytes(),
        np.array([offset for _, offset in keys], dtype="<i4").tobytes(),
        np.array([len(p) for p in patterns], dtype="<u4").tobytes(),
        np.array([w for p in patterns for w in p], dtype="<u8").tobytes(),
        furniture.verification.astype("<u4").tobytes(),
        np.array([len(s) for s in shown], dtype="<u2").tobytes(),
        *shown,
    ]
    return b"".join(parts)


def decode(blob: bytes) -> Furniture:
    """The furniture :func:`encode` wrote; BlobError for anything else. Zero bytes after the end are ignored."""
    if blob[:3] != MAGIC or len(blob) < 4:
        raise BlobError("not a furniture blob of scrapy-simhash")
    if blob[3] != FORMAT:
        raise BlobError(f"furniture blob format {blob[3]}, this version reads format {FORMAT}")
    if len(blob) < 4 + _HEADER.itemsize:
        raise BlobError("furniture blob is truncated")
    header = np.frombuffer(blob, dtype=_HEADER, count=1, offset=4)[0]
    offset = 4 + _HEADER.itemsize

    def take(dtype: str, count: int) -> np.ndarray:
        nonlocal offset
        size = np.dtype(dtype).itemsize * int(count)
        if offset + size > len(blob):
            raise BlobError("furniture blob is truncated")
        values = np.frombuffer(blob, dtype=dtype, count=int(count), offset=offset)
        offset += size
        return values

    lines = take("<u8", header["lines"]).astype(np.uint64)
    anchors = take("<u8", header["anchors"]).astype(np.uint64)
    after = take("<u8", header["anchors"]).astype(np.uint64)
    grouped = take("<u8", header["grouped"]).astype(np.uint64)
    slot_anchors = take("<u8", header["slots"]).tolist()
    slot_offsets = take("<i4", header["slots"]).tolist()
    sizes = take("<u4", header["slots"]).tolist()
    words = take("<u8", header["words"]).tolist()
    verification = take("<u4", header["verification"]).astype(np.uint32)
    lengths = take("<u2", header["examples"]).tolist()
    examples = tuple(bytes(take("u1", length)).decode("utf-8", errors="replace") for length in lengths)
    if blob[offset:].strip(b"\0"):
        raise BlobError("furniture blob has trailing data")
    slots, start = {}, 0
    for anchor, slot_offset, size in zip(slot_anchors, slot_offsets, sizes):
        slots[(anchor, slot_offset)] = frozenset(words[start : start + size])
        start += size
    return Furniture(lines, anchors, after, grouped, slots, verification, int(header["pages"]),
                     int(header["documents"]), examples)


# --- the learner -----------------------------------------------------------------------------------


class BoilerplateStore(Protocol):
    """Where learned furniture persists (the index): one blob per host, the first stored for good."""

    async def load_boilerplate(self, host: str) -> bytes | None: ...

    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        """Store ``blob`` unless the host has one: return the one the host has now."""


class Stripped(NamedTuple):
    """A page's text without its host's furniture, and the version of the furniture that was removed (0: none).

    Where the page is :func:`shingled_by_line`, the learner's tokenisation of it also gives the
    stripped text's shingling (its kept lines') and the shingle hashes of the lines taken out: the text
    is not tokenised again to be signed, nor those lines for the whole-text difference."""

    text: str
    version: int
    removed: np.ndarray | None = None  # shingle hashes of the lines taken out; None: not known
    shingling: Shingling | None = None  # the stripped text's; None: not known


@dataclass
class _Host:
    furniture: Furniture
    version: int
    sample: list[PageLines] | None = None  # pages collected after a warm-up that ended early


@dataclass
class _Warmup:
    """A host's first pages, held until its furniture is learned from them."""

    ready: asyncio.Future[_Host]
    deadline: asyncio.TimerHandle
    started: float = field(default_factory=time.monotonic)
    pages: list[PageLines] = field(default_factory=list)
    settling: bool = False  # learned, agreeing with the index: later pages wait, not join the sample


class BoilerplateLearner:
    """Per-host furniture: loaded from the store, or learned from the host's first pages, which wait for it.

    A host's first pages are held (their ``strip`` awaits) until they are
    ``SIMHASH_BOILERPLATE_SAMPLE_PAGES`` pages holding two distinct documents or more (copies and
    versions of one text count once), or ``MAX_SAMPLE_PAGES`` pages,
    ``SIMHASH_BOILERPLATE_WARMUP_TIMEOUT`` seconds after the first, or the crawl needs them to go on;
    the furniture is learned from them, they and every later page of the host are stripped with it. A
    warm-up that ended short of a complete sample is learned again, once, when the host's pages make
    one. Memory: the held pages (at most ``SIMHASH_BOILERPLATE_MAX_HELD``), the furniture of
    ``CACHED_HOSTS`` hosts (a few kB each) and the pages of ``PENDING_SAMPLES`` hosts learned short (up
    to ``MAX_SAMPLE_PAGES`` each).
    """

    def __init__(self, crawler: Crawler, config: SimhashSettings) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self._inc = crawler.stats.inc_value  # bound once: StatsCollector hooks every attribute access
        self.sample_pages = config.boilerplate_sample_pages
        self.max_held = config.boilerplate_max_held
        self.warmup_timeout = config.boilerplate_warmup_timeout
        self.fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
        self.store: BoilerplateStore | None = None
        self.held = 0
        self._hosts: OrderedDict[str, _Host] = OrderedDict()
        self._pending: OrderedDict[str, None] = OrderedDict()  # hosts whose _Host.sample is collecting
        self._warmups: dict[str, _Warmup] = {}
        self._loads: dict[str, asyncio.Task[_Host | None]] = {}
        self._saves: set[asyncio.Task[None]] = set()
        self._failed_steps: set[str] = set()  # "load", "save": said once each
        self._ticker: asyncio.Task[None] | None = None
        self._stalled_ticks = 0

    async def open(self, store: BoilerplateStore) -> None:
        """Start: furniture is loaded from and saved to ``store``."""
        self.store = store
        self._ticker = asyncio.ensure_future(self._tick())

    async def close(self) -> None:
        """Release every held page and wait for pending saves; call before closing the store."""
        if self._ticker is not None:
            self._ticker.cancel()
        self.flush("spider closing", out_of_pages=True)
        if self._saves:
            await asyncio.gather(*self._saves, return_exceptions=True)

    async def strip(self, host: str, text: str) -> Stripped:
        """``text`` without the furniture of ``host``; during the host's warm-up, waits for it."""
        shingled = self.fingerprinter.line_shingles(text)
        page = PageLines(text.split("\n"), shingled.hashes, shingled.counts)
        state = await self._state(host)
        if state is None:
            warmup = self._warmups.get(host)
            if warmup is None:
                loop = asyncio.get_running_loop()
                deadline = loop.call_later(self.warmup_timeout, self._finish, host, "warm-up timeout")
                warmup = self._warmups[host] = _Warmup(loop.create_future(), deadline)
            if not warmup.settling:
                warmup.pages.append(page)
                self.held += 1
                self.stats.max_value("simhash/boilerplate/held_max", self.held)
                if self._enough(warmup.pages):
                    self._finish(host, "sample complete")
                else:
                    self._relieve()
            state = await asyncio.shield(warmup.ready)
        elif state.sample is not None:
            self._collect(host, state, page)
            state = self._hosts.get(host, state)
        return self._strip(state, text, page, shingled if shingled.by_line else None)

    async def furniture(self, host: str) -> np.ndarray:
        """The host's furniture as sorted distinct uint32 verification hashes (empty when it has none)."""
        state = await self._state(host)
        return state.furniture.verification if state is not None else NO_FURNITURE.verification

    def flush(self, reason: str, out_of_pages: bool = False) -> None:
        """End every warm-up now: each host's furniture is learned from the pages it has, and kept as
        a complete sample's when the crawl has no more pages for it (``out_of_pages``)."""
        for host in list(self._warmups):
            self._finish(host, reason, out_of_pages)

    def _strip(self, state: _Host, whole: str, page: PageLines, shingled: LineShingles | None) -> Stripped:
        keep = state.furniture.kept(page)
        if keep is None:  # judged on its whole text, as without the learner
            self._inc("simhash/boilerplate/pages_kept_whole")
            keep, version = [True] * len(page.lines), 0
        else:
            self._inc("simhash/boilerplate/pages_stripped")
            version = state.version
        text = "\n".join(compress(page.lines, keep))
        chars = len(whole) - len(text)
        if chars:
            self._inc("simhash/boilerplate/chars_removed", chars)
        if shingled is None:
            return Stripped(text, version)
        shingling, removed = shingled.kept(np.frombuffer(bytes(keep), dtype=bool))  # a fifth of np.array()'s time
        return Stripped(text, version, removed, shingling)

    async def _state(self, host: str) -> _Host | None:
        """The host's furniture when known (loading it from the store first if needed); None during a warm-up."""
        state = self._hosts.get(host)
        if state is not None:
            self._hosts.move_to_end(host)
            return state
        if host in self._warmups:
            return None
        task = self._loads.get(host)
        if task is None:
            task = self._loads[host] = asyncio.ensure_future(self._load(host))
            task.add_done_callback(lambda _: self._loads.pop(host, None))
        await asyncio.shield(task)
        return self._hosts.get(host)

    async def _load(self, host: str) -> _Host | None:
        assert self.store is not None, "open() the learner first"
        try:
            stored = await self.store.load_boilerplate(host)
        except Exception as exc:  # any store failure: learn again rather than fail the item
            self._store_failed("load", "Could not load the furniture of %r, learning it again: %s", host, exc)
            return None
        furniture = self._readable(host, stored, "learning it again") if stored is not None else None
        if furniture is None:
            return None
        sample = [] if furniture.pages < self.sample_pages else None
        state = _Host(furniture, furniture.version, sample)
        # Published by the load itself, before anyone awaiting it runs: a page of the host arriving
        # between the load's end and its caller's turn must find it, not load it again. Another page
        # may have started or even ended a warm-up meanwhile: that one wins, and counts the host.
        if host not in self._hosts and host not in self._warmups:
            self._publish(host, state)
            self.stats.inc_value("simhash/boilerplate/hosts_loaded")
        return state

    def _publish(self, host: str, state: _Host) -> _Host:
        self._hosts[host] = state
        self._hosts.move_to_end(host)
        while len(self._hosts) > CACHED_HOSTS:
            dropped, _ = self._hosts.popitem(last=False)
            self._pending.pop(dropped, None)
        if state.sample is not None:
            self._pending[host] = None
            self._pending.move_to_end(host)
            while len(self._pending) > PENDING_SAMPLES:
                dropped, _ = self._pending.popitem(last=False)
                if dropped in self._hosts:
                    self._hosts[dropped].sample = None
        else:
            self._pending.pop(host, None)
        return state

    def _collect(self, host: str, state: _Host, page: PageLines) -> None:
        """A page of a host whose warm-up ended short: learn again, once, when the sample is complete."""
        assert state.sample is not None
        state.sample.append(page)
        if self._enough(state.sample):
            sample, state.sample = state.sample, None
            self._track(self._learned(host, sample, "relearned"))

    def _track(self, step: Coroutine[Any, Any, object]) -> None:
        """Run a step that close() waits for."""
        task = asyncio.ensure_future(step)
        self._saves.add(task)
        task.add_done_callback(self._saves.discard)

    def _finish(self, host: str, reason: str, out_of_pages: bool = False) -> None:
        warmup = self._warmups.get(host)
        if warmup is None or warmup.settling:
            return
        warmup.settling = True
        warmup.deadline.cancel()
        self.held -= len(warmup.pages)  # released for the sake of MAX_HELD: they go within a round trip
        self._track(self._settle(host, warmup, reason, out_of_pages))

    async def _settle(self, host: str, warmup: _Warmup, reason: str, out_of_pages: bool) -> None:
        """Learn from the warm-up's pages, agree with the index, then let them and every later page go."""
        try:
            how = "learned" if len(warmup.pages) >= 2 else "without"
            state = await self._learned(host, warmup.pages, how, out_of_pages)
        except Exception:  # held pages must never wait for good: they go on unstripped
            logger.exception("Could not learn the furniture of %r", host, extra={"spider": self.crawler.spider})
            state = self._publish(host, _Host(NO_FURNITURE, 0))
        del self._warmups[host]
        waited = time.monotonic() - warmup.started
        self.stats.max_value("simhash/boilerplate/held_seconds_max", round(waited, 3))
        logger.debug(
            "Warm-up of %(host)r over (%(reason)s) after %(waited).2fs: %(pages)d pages, furniture version %(version)d",
            {"host": host, "reason": reason, "waited": waited, "pages": len(warmup.pages), "version": state.version},
            extra={"spider": self.crawler.spider},
        )
        warmup.ready.set_result(state)

    def _enough(self, pages: list[PageLines]) -> bool:
        """A complete sample: SAMPLE_PAGES pages holding two documents or more, or MAX_SAMPLE_PAGES pages."""
        if len(pages) >= MAX_SAMPLE_PAGES:
            return True
        return len(pages) >= self.sample_pages and not versions_of_one_text(pages)

    async def _learned(self, host: str, pages: list[PageLines], how: str, out_of_pages: bool = False) -> _Host:
        """Learn from ``pages``; a complete sample's furniture (or the host's last pages' in this crawl,
        SAMPLE_PAGES of them or more) is stored and never learned again."""
        sample = pages[-MAX_SAMPLE_PAGES:]
        furniture = learn(sample, self.fingerprinter)
        self.stats.max_value("simhash/boilerplate/sample_pages_max", furniture.pages)
        complete = self._enough(sample) or (out_of_pages and len(sample) >= self.sample_pages)
        if complete:
            furniture = await self._agreed(host, furniture)
        state = self._publish(host, _Host(furniture, furniture.version, None if complete else list(pages)))
        self.stats.inc_value(f"simhash/boilerplate/hosts_{how}")
        return state

    async def _agreed(self, host: str, furniture: Furniture) -> Furniture:
        """The host's furniture as every crawl on this index has it: the first set learned from a full
        sample that was stored, which this one is if no other came first. Pages stripped of different
        furniture by two crawls would not look alike, copies of one page included."""
        assert self.store is not None
        blob = encode(furniture)
        try:
            if furniture.version:
                stored = await self.store.save_boilerplate(host, furniture.version, blob)
            else:
                stored = await self.store.load_boilerplate(host)
        except Exception as exc:  # the crawl goes on with its own; the next one learns the host again
            self._store_failed(
                "save", "Could not save the furniture of %r; the next crawl learns it again: %s", host, exc
            )
            return furniture
        if stored is None or stored == blob:
            return furniture
        adopted = self._readable(host, stored, "keeping what this crawl learned")
        if adopted is None:
            return furniture
        self.stats.inc_value("simhash/boilerplate/hosts_adopted")
        return adopted

    @staticmethod
    def _readable(host: str, blob: bytes, otherwise: str) -> Furniture | None:
        try:
            return decode(blob)
        except BlobError as exc:
            logger.warning("Stored furniture of %r is unreadable (%s): %s", host, exc, otherwise)
            return None

    def _store_failed(self, step: str, message: str, *args: object) -> None:
        """The first failure of a step is a warning, later ones are debug: an index that is down fails
        every host's load and save, and the index's guard reports the outage itself."""
        if step in self._failed_steps:
            logger.debug(message, *args)
            return
        self._failed_steps.add(step)
        logger.warning(message + " (further failures to %s furniture are logged at DEBUG)", *args, step)

    def _relieve(self) -> None:
        """Past SIMHASH_BOILERPLATE_MAX_HELD pages, or with Scrapy's scraper slot full, the oldest warm-ups end."""
        collecting = (host for host, warmup in self._warmups.items() if not warmup.settling)
        while self.held > self.max_held and (host := next(collecting, None)) is not None:
            self._finish(host, "SIMHASH_BOILERPLATE_MAX_HELD")
        if self._scraper_full() and (host := next(collecting, None)) is not None:
            self._finish(host, "scraper slot full")

    async def _tick(self) -> None:
        """End warm-ups the crawl cannot complete: nothing else in flight, or a full scraper slot."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            if not self._warmups:
                self._stalled_ticks = 0
                continue
            try:
                self._stalled_ticks = self._stalled_ticks + 1 if self._crawl_stalled() else 0
                if self._stalled_ticks >= 2:
                    self.flush("nothing left to crawl", out_of_pages=True)
                else:
                    self._relieve()
            except Exception:  # the ticker must survive, or held pages could wait until their deadline
                logger.exception("Boilerplate warm-up check failed", extra={"spider": self.crawler.spider})
                self.flush("warm-up check failed")

    def _crawl_stalled(self) -> bool:
        """True when every item still in flight is one this learner holds: nothing else can end a warm-up."""
        engine = self.crawler._engine  # None until the crawl starts (a pipeline driven alone)
        if engine is None or engine.scheduler is None or engine.scraper.slot is None:
            return False
        slot = engine.scraper.slot
        return (
            not engine.downloader.active
            and not engine.scheduler.has_pending_requests()
            and not slot.queue
            and slot.itemproc_size <= self.held
        )

    def _scraper_full(self) -> bool:
        """Held pages keep their responses active; past SCRAPER_SLOT_MAX_ACTIVE_SIZE the engine stops downloading."""
        engine = self.crawler._engine
        slot = engine.scraper.slot if engine is not None else None
        return slot is not None and slot.needs_backout()
