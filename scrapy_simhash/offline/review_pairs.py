"""The pairs a review shows: the decisions of the review log, each with the texts of both pages,
found in the log's records and in the crawl's items. review_page.py renders them (docs/review.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from itemadapter import ItemAdapter, is_item

from scrapy_simhash.boilerplate import Furniture, page_lines
from scrapy_simhash.extract import BadFieldError, exact_digest, extract_text, field_value, host_of
from scrapy_simhash.fingerprint import Fingerprinter, jaccard_hashes
from scrapy_simhash.mergelog import (
    DECISIONS,
    FURNITURE_FIELD,
    TEXT_FIELD,
    WHOLE_FIELD,
    furniture_runs,
    is_jaccard,
    is_number,
    raw_text,
)
from scrapy_simhash.offline.input_files import json_objects
from scrapy_simhash.settings import SimhashSettings

__all__ = [
    "FedPage",
    "Found",
    "Pair",
    "Side",
    "TextFinder",
    "feed_pages",
    "item_texts",
    "logged_decisions",
    "pairs_of",
    "read_feed",
    "review_records",
    "review_texts",
    "text_or_none",
]

logger = logging.getLogger(__name__)

# A record's ids and URLs: strings, or None on an erased side; texts are found by them.
PAGE_FIELDS = ("canonical_id", "canonical_url", "matched_id", "matched_url", "duplicate_id", "duplicate_url")
#: A pair whose texts score further than this from the logged Jaccard is flagged: not the texts compared.
JACCARD_TOLERANCE = 0.001


def review_records(records: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The records that are review-log decisions (docs/review.md lists the fields read), and how many
    others there were (each logged)."""
    kept: list[dict[str, Any]] = []
    skipped = 0
    for record, problem in _checked(records):
        if problem:
            skipped += 1
        else:
            kept.append(dict(record))
    return kept, skipped


def logged_decisions(records: Iterable[Mapping[str, Any]]) -> list[tuple[float, str]]:
    """(Jaccard, decision) of each decision of a merge log, for the histogram: a log of millions of
    records is read through, not held."""
    return [(float(record["jaccard"]), record["decision"]) for record, problem in _checked(records) if not problem]


def _checked(records: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Mapping[str, Any], str | None]]:
    """Each record with what makes it no decision, if anything (logged)."""
    for number, record in enumerate(records, 1):
        problem = _problem(record)
        if problem:
            logger.warning("review record %(number)d skipped: %(problem)s", {"number": number, "problem": problem})
        yield record, problem


def _problem(record: Any) -> str | None:
    if not isinstance(record, Mapping):
        return "not a JSON object"
    if record.get("decision") not in DECISIONS:
        return f"decision must be one of {DECISIONS}, got {record.get('decision')!r}"
    rule = record.get("rule")
    if not isinstance(rule, Mapping) or not is_number(rule.get("jaccard_threshold")):
        return "no rule.jaccard_threshold"
    if not is_jaccard(record.get("jaccard")):
        return "no jaccard from 0 to 1"
    for name in PAGE_FIELDS:
        if not isinstance(record.get(name), (str, type(None))):  # None: an erased side
            return f"{name} is not a string"
    return None


def read_feed(path: str | Path) -> Iterator[dict[str, Any]]:
    """The items of a Scrapy feed export: JSON (one array) or JSON lines; other lines are logged and skipped."""
    return (item for _, item in json_objects(path))


Runs = tuple[tuple[int, str], ...]  # a text's furniture: (first line's number in the raw text, its lines)


@dataclass(frozen=True)
class Found:
    """A page's text as the pipeline compared it, where it came from, and the furniture left out of it."""

    text: str
    source: str
    furniture: Runs = ()


@dataclass
class TextFinder:
    """Texts of the crawl's pages by id and by URL; the first one added for an id or URL is kept."""

    by_id: dict[str, Found] = field(default_factory=dict)
    by_url: dict[str, Found] = field(default_factory=dict)

    def add(self, page_id: str | None, url: str | None, found: Found) -> None:
        if page_id:
            self.by_id.setdefault(page_id, found)
        if url:
            self.by_url.setdefault(url, found)

    def find(self, page_id: str | None, url: str | None) -> Found | None:
        """The text of the page with this id, else of the page at this URL."""
        return (self.by_id.get(page_id) if page_id else None) or (self.by_url.get(url) if url else None)


@dataclass(frozen=True)
class FedPage:
    """An item of the crawl's feed as the pipeline names it, and its text before furniture removal."""

    id: str
    url: str | None
    host: str
    text: str


def feed_pages(items: Iterable[Any], config: SimhashSettings) -> tuple[list[FedPage], int]:
    """Each item's text, extracted with the crawl's settings as the pipeline extracts it, under the id,
    URL and host the pipeline gives the page; and how many items could not be read."""
    pages, unreadable = [], 0
    for item in items:
        if not is_item(item):
            unreadable += 1
            continue
        adapter = ItemAdapter(item)
        try:
            text = extract_text(adapter, config.fields, config.html_fields, config.max_chars).text
            # The page's id as the pipeline names it: the id field, else the URL, else a digest of the text.
            page_id = field_value(adapter, config.id_field or config.url_field) or f"digest:{exact_digest(text)}"
            url = field_value(adapter, config.url_field)
            host = field_value(adapter, config.host_field) if config.host_field else host_of(url or "")
        except BadFieldError:
            unreadable += 1
            continue
        if text:
            pages.append(FedPage(page_id, url, host or "", text))
    return pages, unreadable


def item_texts(
    finder: TextFinder,
    pages: Iterable[FedPage],
    source: str,
    furniture: Mapping[str, Furniture] | None = None,
) -> None:
    """Add each fed page's text; with ``furniture`` (each host's, as the crawl learned it), without
    it, as the pipeline compared it."""
    for page in pages:
        found = furniture.get(page.host) if furniture is not None else None
        if found is None:
            finder.add(page.id, page.url, Found(page.text, source))
            continue
        text = found.strip(page_lines(page.text))
        runs = tuple((start, lines) for start, lines in furniture_runs(page.text, text))
        finder.add(page.id, page.url, Found(text, source, runs))


def review_texts(finder: TextFinder, records: Iterable[Mapping[str, Any]], source: str) -> None:
    """Add the duplicate's text of each review record: the page's text as the pipeline compared it."""
    for record in records:
        text = record.get(TEXT_FIELD)
        if isinstance(text, str) and text:
            finder.add(record.get("duplicate_id"), record.get("duplicate_url"),
                       Found(text, source, _runs(record.get(FURNITURE_FIELD))))


def _runs(value: Any) -> Runs:
    """A record's furniture runs, or none when they are not runs in order (logged)."""
    if value is None:
        return ()
    runs: list[tuple[int, str]] = []
    after = 0
    for run in value if isinstance(value, list) else [None]:
        if not (isinstance(run, list) and len(run) == 2 and isinstance(run[0], int) and isinstance(run[1], str)
                and not isinstance(run[0], bool) and run[0] >= after):
            logger.warning("review record's %(field)s is not line runs in order: ignored", {"field": FURNITURE_FIELD})
            return ()
        runs.append((run[0], run[1]))
        after = run[0] + run[1].count("\n") + 1
    return tuple(runs)


@dataclass(frozen=True)
class Side:
    """One page of a pair: who it is and its text, or why the text is missing."""

    id: str | None
    url: str | None
    erased: bool
    text: str | None
    source: str  # where the text came from, or why there is none
    furniture: Runs = ()


@dataclass(frozen=True)
class Pair:
    """A sampled decision: the page compared with (``matched``) and the judged page (``duplicate``)."""

    number: int
    record: dict[str, Any]
    matched: Side
    duplicate: Side

    @property
    def threshold(self) -> float:
        return float(self.record["rule"]["jaccard_threshold"])

    @property
    def labellable(self) -> bool:
        return self.matched.text is not None and self.duplicate.text is not None

    @property
    def whole(self) -> bool:
        """Judged on the two pages' whole texts (two pages of one host: the furniture guard), whose
        Jaccard was logged."""
        return self.record.get(WHOLE_FIELD) is True

    @property
    def as_logged(self) -> bool | None:
        """Whether the texts shown score the logged Jaccard (None: not to be told, a text missing)."""
        if self.texts_jaccard is None:
            return None
        return abs(self.texts_jaccard - float(self.record["jaccard"])) <= JACCARD_TOLERANCE

    @property
    def key(self) -> str:
        """What names this decision in the browser's saved labels, whichever page or review shows it."""
        record = self.record
        named = [record.get(name) for name in ("matched_id", "duplicate_id", "timestamp", "decision", "jaccard")]
        return hashlib.blake2b(json.dumps(named).encode(), digest_size=9).hexdigest()

    @cached_property
    def texts_jaccard(self) -> float | None:
        """The Jaccard of the two texts shown, as ``simhash-tune`` scores them with the record's rule."""
        if self.matched.text is None or self.duplicate.text is None:
            return None
        rule = self.record["rule"]
        width, weighting = rule.get("shingle_width", 4), rule.get("weighting", "frequency")
        try:
            fingerprinter = Fingerprinter(width=width, weighting=weighting)
        except (TypeError, ValueError):
            return None
        a, b = (fingerprinter.signature(text).hashes for text in (self.matched.text, self.duplicate.text))
        return jaccard_hashes(a, b)


def text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


ERASED = "erased: the page was removed from the index and the logs"


def pairs_of(records: Sequence[Mapping[str, Any]], finder: TextFinder, items_given: bool = False) -> list[Pair]:
    """Each record with its two texts: the duplicate's from the record, the matched page's from
    ``finder`` (another review record of that page, or the crawl's items, ``items_given`` or not)."""
    if items_given:
        not_found = ("text not available: the page is in no review record and in none of the items given "
                     "(matched by id, else URL: do SIMHASH_ID_FIELD and SIMHASH_URL_FIELD name the crawl's fields?)")
    else:
        not_found = ("text not available: give the crawl's items with --items (a feed export holding this "
                     "page), or review a log that has it")
    pairs = []
    for number, record in enumerate(records, 1):
        erased = set(record.get("erased") or ())
        whole = record.get(WHOLE_FIELD) is True
        matched_id, matched_url = text_or_none(record.get("matched_id")), text_or_none(record.get("matched_url"))
        if "matched" in erased:
            matched = Side(None, None, True, None, ERASED)
        else:
            found = finder.find(matched_id, matched_url)
            if found is None:
                matched = Side(matched_id, matched_url, False, None, not_found)
            elif whole:
                text = raw_text(found.text, found.furniture)
                matched = Side(matched_id, matched_url, False, text, f"{found.source}, whole text")
            else:
                matched = Side(matched_id, matched_url, False, found.text, found.source, found.furniture)
        text = record.get(TEXT_FIELD)
        duplicate_id = text_or_none(record.get("duplicate_id"))
        duplicate_url = text_or_none(record.get("duplicate_url"))
        if "duplicate" in erased:
            duplicate = Side(None, None, True, None, ERASED)
        elif isinstance(text, str) and text and whole:
            duplicate = Side(duplicate_id, duplicate_url, False, raw_text(text, _runs(record.get(FURNITURE_FIELD))),
                             "review log, whole text")
        elif isinstance(text, str) and text:
            duplicate = Side(duplicate_id, duplicate_url, False, text, "review log", _runs(record.get(FURNITURE_FIELD)))
        else:
            duplicate = Side(duplicate_id, duplicate_url, False, None,
                             "text not available: the review record has no duplicate_text")
        pairs.append(Pair(number, dict(record), matched, duplicate))
    return pairs
