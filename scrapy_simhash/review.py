"""The review page: the decisions sampled near the threshold, as one self-contained HTML file.

Both texts side by side with word-level differences, a Jaccard histogram, and a duplicate/distinct
choice per pair that downloads as the labelled pairs ``simhash-tune`` reads (docs/review.md).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from difflib import SequenceMatcher
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from itemadapter import ItemAdapter, is_item

from scrapy_simhash.extract import BadFieldError, exact_digest, extract_text, field_value
from scrapy_simhash.jsonl import json_objects
from scrapy_simhash.mergelog import DECISIONS, is_jaccard, is_number
from scrapy_simhash.settings import SimhashSettings

__all__ = [
    "Diff",
    "Pair",
    "Paging",
    "Side",
    "TextFinder",
    "histogram_svg",
    "item_texts",
    "logged_decisions",
    "pairs_of",
    "read_feed",
    "remove_stale_pages",
    "render",
    "render_pages",
    "review_pages",
    "review_records",
    "safe_link",
    "word_diff",
]

logger = logging.getLogger(__name__)

# A record's ids and URLs: strings, or None on an erased side; texts are found by them.
PAGE_FIELDS = ("canonical_id", "canonical_url", "matched_id", "matched_url", "duplicate_id", "duplicate_url")
# Words of a text that are compared for the side-by-side view; a longer text is cut there for
# display only (the labels carry the whole text): difflib's matching grows faster than linearly.
MAX_DIFF_WORDS = 10_000
LABELS_FILE = "simhash-labels.jsonl"
#: Pairs a page shows by default. A pair of 13 kB pages takes 60 kB of page (both texts marked up, and
#: again as labels data): 6 MB a page, where a 76 MB review log made one page of 311 MB and took the
#: command 1.6 GB. Measured: docs/benchmarks.md "Review pages".
PER_PAGE = 100

_TITLE = b"<title>scrapy-simhash review</title>"  # in the head of every page: what marks a file as one
_WORD = re.compile(r"\s*\S+")
# Only these become links; anything else (javascript:, data:, a URL with spaces or control
# characters that a browser would strip) is shown as text.
_LINKABLE = re.compile(r"(?:https?|file)://[^\s\x00-\x1f\x7f]*", re.IGNORECASE)


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


@dataclass
class TextFinder:
    """Texts of the crawl's pages by id and by URL, each with where it came from; the first one
    added for an id or URL is kept."""

    by_id: dict[str, tuple[str, str]] = field(default_factory=dict)
    by_url: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, page_id: str | None, url: str | None, text: str, source: str) -> None:
        if page_id:
            self.by_id.setdefault(page_id, (text, source))
        if url:
            self.by_url.setdefault(url, (text, source))

    def find(self, page_id: str | None, url: str | None) -> tuple[str, str] | None:
        """The text of the page with this id, else of the page at this URL."""
        return (self.by_id.get(page_id) if page_id else None) or (self.by_url.get(url) if url else None)


def item_texts(finder: TextFinder, items: Iterable[Any], config: SimhashSettings, source: str) -> int:
    """Add each item's text, extracted with the crawl's settings as the pipeline extracts it, under
    the id and URL the pipeline gives the page; returns how many items could not be read."""
    unreadable = 0
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
        except BadFieldError:
            unreadable += 1
            continue
        if text:
            finder.add(page_id, url, text, source)
    return unreadable


def review_texts(finder: TextFinder, records: Iterable[Mapping[str, Any]], source: str) -> None:
    """Add the duplicate's text of each review record: the page's text as the pipeline compared it."""
    for record in records:
        text = record.get("duplicate_text")
        if isinstance(text, str) and text:
            finder.add(record.get("duplicate_id"), record.get("duplicate_url"), text, source)


@dataclass(frozen=True)
class Side:
    """One page of a pair: who it is and its text, or why the text is missing."""

    id: str | None
    url: str | None
    erased: bool
    text: str | None
    source: str  # where the text came from, or why there is none


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


def _str(value: Any) -> str | None:
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
        matched_id, matched_url = _str(record.get("matched_id")), _str(record.get("matched_url"))
        if "matched" in erased:
            matched = Side(None, None, True, None, ERASED)
        else:
            found = finder.find(matched_id, matched_url)
            if found is None:
                matched = Side(matched_id, matched_url, False, None, not_found)
            else:
                matched = Side(matched_id, matched_url, False, *found)
        text = record.get("duplicate_text")
        if "duplicate" in erased:
            duplicate = Side(None, None, True, None, ERASED)
        elif isinstance(text, str) and text:
            duplicate = Side(
                _str(record.get("duplicate_id")), _str(record.get("duplicate_url")), False, text, "review log"
            )
        else:
            duplicate = Side(
                _str(record.get("duplicate_id")), _str(record.get("duplicate_url")), False, None,
                "text not available: the review record has no duplicate_text",
            )
        pairs.append(Pair(number, dict(record), matched, duplicate))
    return pairs


@dataclass(frozen=True)
class Diff:
    """Two texts as HTML with their differences marked, and how many words each side alone has."""

    left: str
    right: str
    removed: int  # words only in the left text
    added: int  # words only in the right text


def word_diff(a: str, b: str, max_words: int = MAX_DIFF_WORDS) -> Diff:
    """Both texts as HTML (escaped), words only in ``a`` in ``<del>``, words only in ``b`` in ``<ins>``.

    Words are compared as they are written (case and punctuation count); the whitespace before a
    word is kept as it is, so line breaks show with ``white-space: pre-wrap``.
    """
    words_a, cut_a = _words(a, max_words)
    words_b, cut_b = _words(b, max_words)
    matcher = SequenceMatcher(None, [w.lstrip() for w in words_a], [w.lstrip() for w in words_b], autojunk=False)
    left: list[str] = []
    right: list[str] = []
    removed = added = 0
    for operation, i1, i2, j1, j2 in matcher.get_opcodes():
        if operation == "equal":
            left.append(escape("".join(words_a[i1:i2])))
            right.append(escape("".join(words_b[j1:j2])))
            continue
        if i2 > i1:
            left.append(_marked(words_a[i1:i2], "del"))
            removed += i2 - i1
        if j2 > j1:
            right.append(_marked(words_b[j1:j2], "ins"))
            added += j2 - j1
    return Diff("".join(left) + cut_a, "".join(right) + cut_b, removed, added)


def _words(text: str, max_words: int) -> tuple[list[str], str]:
    words = _WORD.findall(text)
    if len(words) <= max_words:
        return words, ""
    note = f'<span class="note">[cut here for display: {len(words):,} words in all]</span>'
    return words[:max_words], f"\n{note}"


def _marked(words: Sequence[str], tag: str) -> str:
    text = "".join(words)
    stripped = text.lstrip()
    return f"{escape(text[: len(text) - len(stripped)])}<{tag}>{escape(stripped)}</{tag}>"


def safe_link(url: str | None) -> str:
    """``url`` as a link when it is an http(s) or file URL, else as text; escaped either way."""
    if url is None:
        return '<span class="missing">none</span>'
    if not url:
        return '<span class="missing">no URL</span>'
    if _LINKABLE.fullmatch(url):
        return f'<a href="{escape(url)}" target="_blank" rel="noopener noreferrer">{escape(url)}</a>'
    return f'<span class="url">{escape(url)}</span>'


def histogram_svg(
    decisions: Sequence[tuple[float, str]], thresholds: Iterable[float], width: int = 960, height: int = 240
) -> str:
    """Bars of 0.01 Jaccard, merged and rejected stacked, a dashed line at each threshold; inline SVG.

    Heights are on a square-root scale, so that the few decisions near the threshold still show
    beside the many identical copies at 1.0.
    """
    thresholds = sorted(set(thresholds))
    if not decisions:
        return '<p class="missing">No decision to draw.</p>'
    bin_width = 0.01
    low = math.floor(min(min(j for j, _ in decisions), *thresholds, 1.0) / bin_width) * bin_width
    low = max(0.0, round(low - bin_width, 2))
    bins = max(1, round((1.0 - low) / bin_width) + 1)  # the last bin holds 1.0 itself
    counts = [{"merged": 0, "rejected": 0} for _ in range(bins)]
    for jaccard, decision in decisions:
        index = min(bins - 1, max(0, math.floor(round((jaccard - low) / bin_width, 6))))
        counts[index][decision] += 1
    tallest = max(c["merged"] + c["rejected"] for c in counts)
    left, right, top, bottom = 56, 10, 24, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    bar_w = plot_w / bins

    def x(value: float) -> float:
        return left + (value - low) / bin_width * bar_w

    def y(count: float) -> float:
        return top + plot_h - math.sqrt(count / tallest) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="histogram" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="Jaccard histogram">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#444"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>',
    ]
    for count in sorted({0, *(c for c in (10, 100, 1000, 10000) if c < tallest * 0.8), tallest}):
        parts.append(
            f'<line x1="{left - 4}" y1="{y(count):.2f}" x2="{left}" y2="{y(count):.2f}" stroke="#444"/>'
            f'<text x="{left - 6}" y="{y(count) + 4:.2f}" text-anchor="end" class="tick">{count}</text>'
        )
    for index, count in enumerate(counts):
        start = low + index * bin_width
        base = 0
        for decision in DECISIONS:
            if count[decision]:
                y0, y1 = y(base), y(base + count[decision])
                parts.append(
                    f'<rect class="{decision}" x="{left + index * bar_w + 0.5:.2f}" y="{y1:.2f}" '
                    f'width="{max(bar_w - 1, 1):.2f}" height="{y0 - y1:.2f}"><title>'
                    f"Jaccard {start:.2f} to {min(start + bin_width, 1.0):.2f}: {count['merged']} merged, "
                    f"{count['rejected']} rejected</title></rect>"
                )
                base += count[decision]
    step = 0.05 if bins <= 40 else 0.1
    tick = math.ceil(round(low / step, 6)) * step
    while tick <= 1.0 + 1e-9:
        parts.append(
            f'<line x1="{x(tick):.2f}" y1="{top + plot_h}" x2="{x(tick):.2f}" y2="{top + plot_h + 4}" stroke="#444"/>'
            f'<text x="{x(tick):.2f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{tick:.2f}</text>'
        )
        tick = round(tick + step, 6)
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" class="tick">Jaccard</text>'
        f'<text x="12" y="{top + plot_h / 2}" text-anchor="middle" class="tick" '
        f'transform="rotate(-90 12 {top + plot_h / 2})">decisions (square-root scale)</text>'
    )
    for threshold in thresholds:
        parts.append(
            f'<line class="threshold" x1="{x(threshold):.2f}" y1="{top - 6}" x2="{x(threshold):.2f}" '
            f'y2="{top + plot_h}" stroke="#c00" stroke-width="2" stroke-dasharray="5,3"/>'
            f'<text x="{x(threshold) + 4:.2f}" y="{top - 10}" class="threshold-label">threshold {threshold:g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _json_for_script(value: Any) -> str:
    """JSON that cannot end or comment out the ``<script type="application/json">`` element holding it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode() + "'"


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1400px; padding: 0 1.5em 4em; color: #222; }
h1 { font-size: 1.5em; margin: 1em 0 0.3em; }
h2 { font-size: 1.1em; margin: 0 0 0.4em; }
h3 { font-size: 0.95em; margin: 0 0 0.3em; font-weight: 600; }
.summary { color: #444; margin: 0.2em 0; }
.toolbar { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ccc; padding: 0.6em 0;
           display: flex; gap: 1em; align-items: center; z-index: 1; }
.toolbar button { font: inherit; padding: 0.3em 1em; }
nav.pages { margin: 0.8em 0; }
.pair { border: 1px solid #ccc; border-radius: 6px; margin: 1.2em 0; padding: 0.8em 1em; }
.pair.labelled { border-color: #6a6; }
.decision { font-weight: 600; padding: 0 0.4em; border-radius: 3px; }
.decision.merged { background: #dbe9ff; }
.decision.rejected { background: #fde2c8; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 0.15em 1em; margin: 0.4em 0 0.8em; }
dl.meta dt { color: #666; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.texts { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 26em; overflow: auto; border: 1px solid #ddd;
        padding: 0.5em; background: #fafafa; font-size: 13px; }
del { background: #ffd0d0; text-decoration: line-through; }
ins { background: #c8f0c8; text-decoration: none; }
.missing, .note { color: #a00; font-style: italic; }
.source { color: #666; font-weight: normal; }
fieldset.label { border: none; padding: 0.6em 0 0; margin: 0; display: flex; gap: 1.5em; }
code { font-size: 12px; overflow-wrap: anywhere; }
svg.histogram .merged { fill: #4a7fd4; }
svg.histogram .rejected { fill: #e8954a; }
svg.histogram .tick, svg.histogram .threshold-label { font-size: 11px; fill: #333; }
svg.histogram .threshold-label { fill: #c00; }
.legend span { margin-right: 1em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em; margin-right: 0.3em; }
.swatch.merged { background: #4a7fd4; }
.swatch.rejected { background: #e8954a; }
"""

# Reads the labellable pairs from the JSON element, counts the choices, and downloads them as the
# labelled-pairs JSON lines simhash-tune reads. Nothing is sent anywhere.
SCRIPT = r"""
"use strict";
const pairs = JSON.parse(document.getElementById("simhash-pairs").textContent);
const button = document.getElementById("download");
const counter = document.getElementById("counter");
const total = Object.keys(pairs).length;
function choices() {
  const chosen = [];
  for (const input of document.querySelectorAll("input.label:checked")) {
    const pair = pairs[input.dataset.pair];
    chosen.push({a: pair.a, b: pair.b, label: input.value});
  }
  return chosen;
}
function update() {
  const count = choices().length;
  counter.textContent = count + " of " + total + " pairs marked";
  button.disabled = count === 0;
  for (const section of document.querySelectorAll("section.pair")) {
    section.classList.toggle("labelled", section.querySelector("input.label:checked") !== null);
  }
}
document.addEventListener("change", update);
button.addEventListener("click", function () {
  // U+2028 and U+2029 escaped too: some line readers (Python's str.splitlines) break lines there.
  const lines = choices().map(function (choice) {
    return JSON.stringify(choice).replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029") + "\n";
  });
  const url = URL.createObjectURL(new Blob(lines, {type: "application/x-ndjson"}));
  const link = document.createElement("a");
  link.href = url;
  link.download = button.dataset.filename;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
});
update();
"""


def _side_html(role: str, side: Side, body: str, only: str) -> str:
    if side.text is None:
        content = f'<p class="missing">{escape(side.source)}</p>'
        source = ""
    else:
        content = f'<div class="text">{body}</div>'
        source = f" · {escape(side.source)}"
    return f'<div class="side"><h3>{role}<span class="source">{only}{source}</span></h3>{content}</div>'


def _who(side: Side) -> str:
    if side.erased:
        return '<span class="missing">erased</span>'
    shown = safe_link(side.url)
    if side.id != side.url:
        shown += f" <code>id {escape(str(side.id))}</code>"
    return shown


def _rule_html(rule: Mapping[str, Any]) -> str:
    parts = []
    for key, value in rule.items():
        shown = json.dumps(value, sort_keys=True, ensure_ascii=False) if isinstance(value, (dict, list)) else value
        parts.append(f"{escape(str(key))} {escape(str(shown))}")
    return "<code>" + " · ".join(parts) + "</code>"


def _pair_html(pair: Pair) -> str:
    record = pair.record
    jaccard = float(record["jaccard"])
    delta = jaccard - pair.threshold
    decision = escape(str(record["decision"]))
    meta = [
        f"<dt>compared with</dt><dd>{_who(pair.matched)}</dd>",
        f"<dt>duplicate</dt><dd>{_who(pair.duplicate)}</dd>",
    ]
    canonical_id, canonical_url = record.get("canonical_id"), record.get("canonical_url")
    if "canonical" in (record.get("erased") or ()):
        meta.append('<dt>canonical</dt><dd><span class="missing">erased</span></dd>')
    elif canonical_id != pair.matched.id:
        canonical = Side(_str(canonical_id), _str(canonical_url), False, None, "")
        meta.append(f"<dt>canonical</dt><dd>{_who(canonical)}</dd>")
    meta.append(f"<dt>decided</dt><dd>{escape(str(record.get('timestamp', '')))}</dd>")
    if "retention" in record:
        meta.append(f"<dt>retention</dt><dd>{escape(str(record['retention']))}</dd>")
    meta.append(f"<dt>rule</dt><dd>{_rule_html(record['rule'])}</dd>")
    if pair.labellable:
        assert pair.matched.text is not None and pair.duplicate.text is not None
        diff = word_diff(pair.matched.text, pair.duplicate.text)
        left, right = diff.left, diff.right
        only_left, only_right = f" · {diff.removed:,} words only here", f" · {diff.added:,} words only here"
        choice = "".join(
            f'<label><input type="radio" class="label" name="label-{pair.number}" data-pair="{pair.number}" '
            f'value="{label}"> {label}</label>'
            for label in ("duplicate", "distinct")
        )
        label = f'<fieldset class="label"><legend>Your label</legend>{choice}</fieldset>'
    else:
        left, right = escape(pair.matched.text or ""), escape(pair.duplicate.text or "")
        only_left = only_right = ""
        label = '<p class="missing">Not labellable: both texts are needed.</p>'
    distance = record.get("distance")
    return (
        f'<section class="pair" id="pair-{pair.number}">'
        f'<h2>#{pair.number} <span class="decision {decision}">{decision}</span> '
        f"Jaccard {jaccard:.4f} <small>(threshold {pair.threshold:g}, {delta:+.4f})</small>"
        f" · distance {escape(str(distance))}</h2>"
        f'<dl class="meta">{"".join(meta)}</dl>'
        f'<div class="texts">{_side_html("compared with", pair.matched, left, only_left)}'
        f'{_side_html("duplicate", pair.duplicate, right, only_right)}</div>'
        f"{label}</section>"
    )


def _side_data(side: Side) -> dict[str, Any]:
    return {"text": side.text, "id": side.id, "url": side.url}


@dataclass(frozen=True)
class Paging:
    """Which pairs a page of the review shows, and every page's file name, for the links between them."""

    files: tuple[str, ...] = ("review.html",)
    number: int = 1  # this page's, from 1
    per_page: int = 0  # 0: every pair on one page

    def shown(self, pairs: Sequence[Pair]) -> Sequence[Pair]:
        if not self.per_page:
            return pairs
        return pairs[(self.number - 1) * self.per_page : self.number * self.per_page]

    @property
    def labels_file(self) -> str:
        return LABELS_FILE if self.number == 1 else LABELS_FILE.replace(".jsonl", f"-{self.number}.jsonl")

    def links(self) -> str:
        if len(self.files) == 1:
            return ""
        parts = []
        if self.number > 1:
            parts.append(self._link(self.number - 1, "previous page"))
        parts.append(f"page {self.number} of {len(self.files)}")
        if self.number < len(self.files):
            parts.append(self._link(self.number + 1, "next page"))
        return f'<nav class="pages">{" · ".join(parts)}</nav>'

    def _link(self, number: int, text: str) -> str:
        return f'<a class="page" href="{escape(quote(self.files[number - 1]))}">{text}</a>'


def review_pages(output: Path, pairs: int, per_page: int = PER_PAGE) -> tuple[Path, ...]:
    """The files a review of ``pairs`` pairs is written to: ``output``, then ``stem-2.html``..."""
    count = max(1, math.ceil(pairs / per_page)) if per_page else 1
    return (output, *(_page_file(output, n) for n in range(2, count + 1)))


def _page_file(output: Path, number: int) -> Path:
    return output.with_name(f"{output.stem}-{number}{output.suffix}")


def remove_stale_pages(output: Path, pages: int) -> int:
    """Remove the review pages past the last one written that an earlier, longer review left (their
    links would lead on from this review's last page); a file that is no review page stays."""
    removed = 0
    for number in itertools.count(pages + 1):
        stale = _page_file(output, number)
        try:
            with stale.open("rb") as file:
                if _TITLE not in file.read(4096):
                    break
        except OSError:
            break
        stale.unlink()
        removed += 1
    return removed


def render(
    pairs: Sequence[Pair],
    histogram: Sequence[tuple[float, str]],
    histogram_source: str,
    sources: Sequence[str],
    generated: datetime | None = None,
) -> str:
    """The review of ``pairs`` as one page. ``histogram`` holds (Jaccard, decision) of every logged
    decision to draw."""
    return next(render_pages(pairs, histogram, histogram_source, sources, ("review.html",), 0, generated))


def render_pages(
    pairs: Sequence[Pair],
    histogram: Sequence[tuple[float, str]],
    histogram_source: str,
    sources: Sequence[str],
    files: Sequence[str],
    per_page: int,
    generated: datetime | None = None,
) -> Iterator[str]:
    """Each page of the review of ``pairs``, one a file name of ``files`` (every page says what the
    whole review holds); what all pages share, the histogram of a whole merge log among it, is made
    once."""
    generated = generated or datetime.now(timezone.utc)
    merged = sum(pair.record["decision"] == "merged" for pair in pairs)
    labellable = sum(pair.labellable for pair in pairs)
    thresholds = sorted({pair.threshold for pair in pairs})
    policy = (
        f"default-src 'none'; style-src {_csp_hash(STYLE)}; script-src {_csp_hash(SCRIPT)}; "
        "base-uri 'none'; form-action 'none'"
    )
    summary = (
        f"{len(pairs)} sampled decisions ({merged} merged, {len(pairs) - merged} rejected), {labellable} with both "
        f"texts; threshold {', '.join(f'{t:g}' for t in thresholds) or 'none'}."
    )
    download, tune = "download the labels", LABELS_FILE
    if len(files) > 1:
        download, tune = "download each page's labels", LABELS_FILE.replace(".jsonl", "*.jsonl")
    head = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{_TITLE.decode()}"
        f"<style>{STYLE}</style></head><body>"
        "<h1>scrapy-simhash review</h1>"
    )
    about = (
        f'<p class="summary">From {escape(", ".join(sources))}; '
        f'written {escape(generated.isoformat(timespec="seconds"))}.</p>'
        f'<p class="summary">Mark each pair <b>duplicate</b> or <b>distinct</b>, then {download} and run '
        f"<code>scrapy simhash-tune {tune}</code> for the rule that separates them best.</p>"
        f"<figure><figcaption>Jaccard of {len(histogram)} logged decisions ({escape(histogram_source)})"
        '<span class="legend"> · <span><span class="swatch merged"></span>merged</span>'
        '<span><span class="swatch rejected"></span>rejected</span></span></figcaption>'
        f"{histogram_svg(histogram, thresholds)}</figure>"
    )
    for number in range(1, len(files) + 1):
        paging = Paging(tuple(files), number, per_page)
        shown = paging.shown(pairs)
        data = {
            str(pair.number): {"a": _side_data(pair.matched), "b": _side_data(pair.duplicate)}
            for pair in shown
            if pair.labellable
        }
        this_page = f" This page: #{shown[0].number} to #{shown[-1].number}." if len(files) > 1 else ""
        body = "".join(_pair_html(pair) for pair in shown) or '<p class="missing">The review log has no decision.</p>'
        links = paging.links()
        yield (
            f'{head}<p class="summary">{escape(summary + this_page)}</p>{about}{links}'
            '<div class="toolbar"><span id="counter">0 pairs marked</span>'
            f'<button id="download" type="button" data-filename="{paging.labels_file}" disabled>Download labels'
            "</button></div>"
            f"{body}{links}"
            f'<script type="application/json" id="simhash-pairs">{_json_for_script(data)}</script>'
            f"<script>{SCRIPT}</script></body></html>\n"
        )
