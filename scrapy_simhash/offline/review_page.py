"""The review page: the decisions sampled near the threshold, as one self-contained HTML file.

Both texts side by side with word-level differences, a Jaccard histogram, and a duplicate/distinct
choice per pair that downloads as the labelled pairs ``simhash-tune`` reads (docs/review.md).
The pairs come from review_pairs.py.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from difflib import SequenceMatcher
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from scrapy_simhash.mergelog import DECISIONS
from scrapy_simhash.offline.review_pairs import Pair, Side, text_or_none

__all__ = [
    "Diff",
    "Paging",
    "histogram_svg",
    "remove_stale_pages",
    "render",
    "render_pages",
    "review_pages",
    "safe_link",
    "text_html",
    "word_diff",
]

# Words of a text whose differences are marked in the side-by-side view (the rest is shown unmarked):
# difflib's matching grows faster than linearly.
MAX_DIFF_WORDS = 10_000
LABELS_FILE = "simhash-labels.jsonl"
#: Pairs a page shows by default: a page a browser opens at once and a reviewer's sitting
#: (docs/decisions/review-pages.md).
PER_PAGE = 100

_TITLE = b"<title>scrapy-simhash review</title>"  # in the head of every page: what marks a file as one
_WORD = re.compile(r"\s*\S+")
_BLANKS = re.compile(r"(\n[^\S\n]*\n)((?:[^\S\n]*\n)+)")
# Only these become links; anything else (javascript:, data:, a URL with spaces or control
# characters that a browser would strip) is shown as text.
_LINKABLE = re.compile(r"(?:https?|file)://[^\s\x00-\x1f\x7f]*", re.IGNORECASE)


@dataclass(frozen=True)
class Diff:
    """Two texts as one piece of HTML: what both have once, words only in the first in ``<del>``,
    words only in the second in ``<ins>``; and how many words each side alone has."""

    html: str
    removed: int  # words only in the first text
    added: int  # words only in the second text
    cut: bool = False  # the differences are marked in the first ``max_words`` words only


def word_diff(a: str, b: str, max_words: int = MAX_DIFF_WORDS) -> Diff:
    """``a`` and ``b`` as one HTML text: the first is its text less the ``<ins>`` elements, the second
    its text less the ``<del>`` ones, each exactly (the page reads the labels' texts there and shows
    each side by hiding the other's words). Each text is in the page once, the words both have once.

    Words are compared as they are written (case and punctuation count); the whitespace before a
    word is kept as it is, so line breaks show with ``white-space: pre-wrap`` (where the two differ
    in it alone, it is marked ``class="ws"``, unhighlighted). Past ``max_words`` words the rest of
    each text is shown unmarked: difflib's matching grows faster than linearly.
    """
    words_a, rest_a = _words(a, max_words)
    words_b, rest_b = _words(b, max_words)
    matcher = SequenceMatcher(None, [w.lstrip() for w in words_a], [w.lstrip() for w in words_b], autojunk=False)
    parts: list[str] = []
    removed = added = 0
    for operation, i1, i2, j1, j2 in matcher.get_opcodes():
        run_a, run_b = words_a[i1:i2], words_b[j1:j2]
        if operation == "equal":
            parts.append(_common(run_a, run_b))
            continue
        removed += len(run_a)
        added += len(run_b)
        space_a, space_b = _space(run_a), _space(run_b)
        text_a, text_b = "".join(run_a)[len(space_a):], "".join(run_b)[len(space_b):]
        if run_a and run_b and space_a == space_b:  # the same break before both: shown once
            parts.append(text_html(space_a))
            space_a = space_b = ""
        parts.append(_side("del", space_a, text_a))
        parts.append(_side("ins", space_b, text_b))
    cut = bool(rest_a.strip() or rest_b.strip())
    if rest_a == rest_b:
        parts.append(text_html(rest_a))
    else:
        parts.append(_side("del", "", rest_a, "rest") + _side("ins", "", rest_b, "rest"))
    return Diff("".join(parts), removed, added, cut)


def _words(text: str, max_words: int) -> tuple[list[str], str]:
    """The first ``max_words`` words, each with the whitespace before it, and the rest of the text."""
    words = list(itertools.islice(_WORD.finditer(text), max_words))
    end = words[-1].end() if words else 0
    return [word.group() for word in words], text[end:]


def _space(run: Sequence[str]) -> str:
    return run[0][: len(run[0]) - len(run[0].lstrip())] if run else ""


def _common(run_a: Sequence[str], run_b: Sequence[str]) -> str:
    """Words both texts have: once, with the whitespace before a word marked where the two differ."""
    text_a = "".join(run_a)
    if text_a == "".join(run_b):
        return text_html(text_a)
    parts: list[str] = []
    for word_a, word_b in zip(run_a, run_b):
        space_a, space_b = _space([word_a]), _space([word_b])
        if space_a == space_b:
            parts.append(text_html(word_a))
        else:
            parts.append(_side("del", "", space_a, "ws") + _side("ins", "", space_b, "ws"))
            parts.append(text_html(word_a[len(space_a):]))
    return "".join(parts)


def _side(tag: str, space: str, text: str, kind: str = "") -> str:
    """One side's own text in ``tag``, the whitespace before it unhighlighted."""
    marked = f'<{tag} class="ws">{text_html(space)}</{tag}>' if space else ""
    if text:
        marked += f'<{tag} class="{kind}">{text_html(text)}</{tag}>' if kind else f"<{tag}>{text_html(text)}</{tag}>"
    return marked


def text_html(text: str) -> str:
    """``text`` as HTML whose parsed text is ``text`` again (a carriage return too), but for NUL; blank
    lines past the first of a run are hidden (where furniture was), not left out."""
    return _BLANKS.sub(r'\1<span class="gap">\2</span>', escape(text, quote=False).replace("\r", "&#13;"))


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
    decisions: Sequence[tuple[float, str]], thresholds: Iterable[float], width: int = 720, height: int = 220
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
        f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" class="axis">Jaccard</text>'
        f'<text x="12" y="{top + plot_h / 2}" text-anchor="middle" class="axis" '
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
h3 { font-size: 0.95em; margin: 0; font-weight: 600; align-self: end; }
.summary { color: #444; margin: 0.2em 0; }
figure { margin: 1em 0; }
svg.histogram { display: block; width: 100%; max-width: 900px; height: auto; }
.toolbar { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ccc; padding: 0.5em 0;
           display: flex; flex-wrap: wrap; gap: 0.5em 1em; align-items: center; z-index: 1; }
.toolbar button, .toolbar select { font: inherit; padding: 0.25em 0.8em; }
.toolbar #counter { font-weight: 600; }
.toolbar #status:empty { display: none; }
.keys { color: #444; font-size: 0.9em; }
kbd { border: 1px solid #aaa; border-radius: 3px; padding: 0 0.3em; font-size: 0.9em; background: #f4f4f4; }
noscript p { border: 1px solid #c90; background: #fff6dd; padding: 0.5em 0.8em; }
nav.pages { margin: 0.8em 0; }
.pair { border: 1px solid #ccc; border-radius: 6px; margin: 1.2em 0; padding: 0.8em 1em;
        content-visibility: auto; contain-intrinsic-size: auto 760px; scroll-margin-top: 4em; }
.pair.labelled { border-color: #6a6; }
.pair.current { box-shadow: 0 0 0 3px #4a7fd4; }
.decision { font-weight: 600; padding: 0 0.4em; border-radius: 3px; }
.decision.merged { background: #dbe9ff; }
.decision.rejected { background: #fde2c8; }
dl.meta { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.15em 1em; margin: 0.4em 0 0.8em; }
dl.meta dt { color: #666; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.texts { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); grid-template-rows: auto auto;
         grid-auto-flow: column; gap: 0.3em 1em; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 26em; overflow: auto; border: 1px solid #ddd;
        padding: 0.5em; background: #fafafa; font-size: 13px; margin: 0; }
.raw-view, body.raw .text.compared.has-raw, .gap { display: none; }
body.raw .raw-view { display: block; }
s.furniture { color: #777; background: #eee; text-decoration: line-through; }
del { background: #ffd0d0; text-decoration: line-through; }
ins { background: #c8f0c8; text-decoration: none; }
del.ws, ins.ws, del.rest, ins.rest { background: none; text-decoration: none; }
.side-a ins, .side-b del { display: none; }
.missing, .note { color: #a00; font-style: italic; }
.source { color: #666; font-weight: normal; }
fieldset.label { border: none; padding: 0.6em 0 0; margin: 0; display: flex; flex-wrap: wrap; gap: 0.5em 1.5em; }
code { font-size: 12px; overflow-wrap: anywhere; }
svg.histogram .merged { fill: #4a7fd4; }
svg.histogram .rejected { fill: #e8954a; }
svg.histogram .tick, svg.histogram .axis, svg.histogram .threshold-label { font-size: 13px; fill: #333; }
svg.histogram .threshold-label { fill: #c00; }
.legend span { margin-right: 1em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em; margin-right: 0.3em; }
.swatch.merged { background: #4a7fd4; }
.swatch.rejected { background: #e8954a; }
@media (max-width: 700px) {
  body { padding: 0 0.6em 3em; }
  .texts { grid-template-columns: minmax(0, 1fr); grid-auto-flow: row; }
  .text { max-height: 60vh; }
  .pair { padding: 0.6em; contain-intrinsic-size: auto 1400px; scroll-margin-top: 6.5em; }
  .toolbar { gap: 0.4em 0.6em; }
  svg.histogram .tick, svg.histogram .threshold-label { font-size: 20px; }
  svg.histogram .axis { display: none; }
  .toolbar button, .toolbar select { padding: 0.2em 0.5em; }
}
"""

# Keeps each pair's label in the browser's storage (by the decision's key, so a reload or a new review
# of the same log finds it), filters and moves through the pairs, builds the raw-text view from the
# furniture runs, and downloads the labels as the JSON lines simhash-tune reads: the texts are read
# from the page itself, which holds each once. Nothing is sent anywhere.
SCRIPT = r"""
"use strict";
const pairs = JSON.parse(document.getElementById("simhash-pairs").textContent);
const STORE = "scrapy-simhash-labels";
const LABELS = ["duplicate", "distinct"];
const sections = Array.from(document.querySelectorAll("section.pair"));
const button = document.getElementById("download");
const counter = document.getElementById("counter");
const status = document.getElementById("status");
const filter = document.getElementById("filter");
const total = Object.keys(pairs).length;
let current = null;
let storage = null;
try {
  storage = window.localStorage;
  storage.getItem(STORE);
} catch (error) {
  storage = null;
}
function stored() {
  try {
    const value = JSON.parse(storage.getItem(STORE) || "{}");
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch (error) {
    return {};
  }
}
function keep(section) {
  if (!storage) return;
  const all = stored();
  const key = pairs[section.dataset.pair].key;
  const chosen = labelOf(section);
  if (chosen) all[key] = chosen; else delete all[key];
  try {
    storage.setItem(STORE, JSON.stringify(all));
  } catch (error) {
    say("Labels could not be saved in this browser: download them before leaving the page.");
  }
}
function say(message) { status.textContent = message; }
function labelOf(section) {
  const input = section.querySelector("input.label:checked");
  return input ? input.value : null;
}
function labellable(section) { return Object.prototype.hasOwnProperty.call(pairs, section.dataset.pair); }
// The page holds both texts in the first box: a side is its text less the other side's own words.
function sideText(node, skip) {
  let text = "";
  for (const child of node.childNodes) {
    if (child.nodeType === Node.TEXT_NODE) text += child.data;
    else if (child.nodeType === Node.ELEMENT_NODE && child.tagName !== skip) text += sideText(child, skip);
  }
  return text;
}
function textOf(section, side) {
  const data = pairs[section.dataset.pair][side];
  if (typeof data.text === "string") return data.text;
  return sideText(section.querySelector('.text.compared[data-side="a"]'), side === "a" ? "INS" : "DEL");
}
function choices() {
  const chosen = [];
  for (const section of sections) {
    const label = labellable(section) ? labelOf(section) : null;
    if (!label) continue;
    const pair = pairs[section.dataset.pair];
    const side = function (name) {
      return {text: textOf(section, name), id: pair[name].id, url: pair[name].url};
    };
    chosen.push({a: side("a"), b: side("b"), label: label, jaccard: pair.jaccard});
  }
  return chosen;
}
function shows(section) {
  const wanted = filter.value;
  if (wanted === "unlabelled") return labellable(section) && labelOf(section) === null;
  return wanted === "all" || section.dataset.decision === wanted;
}
function update() {
  let count = 0;
  for (const section of sections) {
    const labelled = labellable(section) && labelOf(section) !== null;
    count += labelled;
    section.classList.toggle("labelled", labelled);
    section.hidden = !shows(section) && section !== current;
  }
  counter.textContent = count + " of " + total + " pairs marked";
  button.disabled = count === 0;
}
function focus(section) {
  pick(section);
  update();
  section.scrollIntoView({block: "start"});
}
function move(step) {
  const visible = sections.filter(function (section) { return !section.hidden; });
  if (!visible.length) return;
  const at = visible.indexOf(current);
  const next = at === -1 ? (step > 0 ? 0 : visible.length - 1) : at + step;
  if (next >= 0 && next < visible.length) focus(visible[next]);
}
function nextUnlabelled() {
  const start = current ? sections.indexOf(current) : -1;
  for (let i = 1; i <= sections.length; i++) {
    const section = sections[(start + i) % sections.length];
    if (section !== current && labellable(section) && labelOf(section) === null && shows(section)) {
      say("");
      focus(section);
      return;
    }
  }
  say("Every pair shown is marked.");
  update();
}
function choose(section, label) {
  if (!section || !labellable(section)) return;
  for (const input of section.querySelectorAll("input.label")) input.checked = input.value === label;
  keep(section);
  update();
}
function rawViews() {
  for (const section of sections) {
    for (const side of ["a", "b"]) {
      const data = pairs[section.dataset.pair] && pairs[section.dataset.pair][side];
      if (!data || !data.furniture.length) continue;
      const shown = section.querySelector('.text.compared[data-side="' + side + '"]');
      if (shown.nextElementSibling && shown.nextElementSibling.classList.contains("raw-view")) continue;
      const kept = textOf(section, side) === "" ? [] : textOf(section, side).split("\n");
      const view = document.createElement("div");
      view.className = "text raw-view";
      let line = 0, k = 0, first = true;
      const add = function (text, furniture) {
        if (!first) view.appendChild(document.createTextNode("\n"));
        first = false;
        if (!furniture) { view.appendChild(document.createTextNode(text)); return; }
        const mark = document.createElement("s");
        mark.className = "furniture";
        mark.textContent = text;
        view.appendChild(mark);
      };
      for (const [start, lines] of data.furniture) {
        while (line < start && k < kept.length) { add(kept[k++], false); line++; }
        add(lines, true);
        line = start + lines.split("\n").length;
      }
      while (k < kept.length) add(kept[k++], false);
      shown.classList.add("has-raw");
      shown.after(view);
    }
  }
}
function toggleRaw() {
  rawViews();
  const raw = document.body.classList.toggle("raw");
  document.getElementById("raw").textContent = raw ? "Compared texts" : "Raw texts";
}
function pick(section) {
  if (current === section) return;
  if (current) current.classList.remove("current");
  current = section;
  section.classList.add("current");
}
for (const section of sections) {
  section.addEventListener("click", function () { pick(section); });
  if (!labellable(section)) continue;
  const [a, b] = section.querySelectorAll(".text.compared");
  b.replaceChildren(...Array.from(a.childNodes, function (node) { return node.cloneNode(true); }));
  a.classList.add("side-a");
  b.classList.add("side-b");
}
const saved = storage ? stored() : {};
for (const section of sections) {
  if (!labellable(section)) continue;
  const label = saved[pairs[section.dataset.pair].key];
  for (const input of section.querySelectorAll("input.label")) input.checked = input.value === label;
}
if (!storage) say("This browser keeps no labels for this page: download them before leaving it.");
document.addEventListener("change", function (event) {
  if (event.target === filter) { update(); return; }
  const section = event.target.closest("section.pair");
  if (section && labellable(section)) { keep(section); update(); }
});
document.getElementById("next").addEventListener("click", nextUnlabelled);
document.getElementById("raw").addEventListener("click", toggleRaw);
document.addEventListener("keydown", function (event) {
  if (event.ctrlKey || event.metaKey || event.altKey || event.target === filter) return;
  switch (event.key) {
    case "j": move(1); break;
    case "k": move(-1); break;
    case "d": if (current) { choose(current, "duplicate"); nextUnlabelled(); } else nextUnlabelled(); break;
    case "n": if (current) { choose(current, "distinct"); nextUnlabelled(); } else nextUnlabelled(); break;
    case "x": choose(current, null); break;
    case "u": nextUnlabelled(); break;
    case "r": toggleRaw(); break;
    default: return;
  }
  event.preventDefault();
});
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

KEYS = (
    '<p class="keys">Keys: <kbd>j</kbd> / <kbd>k</kbd> next / previous pair · <kbd>d</kbd> duplicate · '
    "<kbd>n</kbd> distinct (both go on to the next unmarked pair) · <kbd>x</kbd> clear · "
    "<kbd>u</kbd> next unmarked · <kbd>r</kbd> raw / compared texts</p>"
)
NOSCRIPT = (
    "<noscript><p>JavaScript is off: you can read the pairs and choose labels, but counting them, keeping "
    "them across reloads, the filters, the keys, the raw texts and <b>downloading the labels</b> need the "
    "page's script (it runs offline and sends nothing anywhere).</p></noscript>"
)


def _side_html(role: str, side: Side, name: str, body: str, only: str) -> tuple[str, str]:
    """The side's header and its text (or why there is none): two cells of the pair's grid."""
    if side.text is None:
        content = f'<p class="missing">{escape(side.source)}</p>'
        source = ""
    else:
        content = f'<div class="text compared" data-side="{name}">{body}</div>'
        source = f" · {escape(side.source)}"
    if side.furniture:
        lines = sum(run.count("\n") + 1 for _, run in side.furniture)
        source += f" · {lines:,} furniture lines left out"
    return f'<h3>{role}<span class="source">{only}{source}</span></h3>', content


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


# What the duplicate's box says until the script fills it from the box beside (or with the script off).
BOTH_BESIDE = (
    '<span class="note">Both texts are in the box beside: struck-out words are only in the page '
    "compared with, green ones only in this one.</span>"
)


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
        canonical = Side(text_or_none(canonical_id), text_or_none(canonical_url), False, None, "")
        meta.append(f"<dt>canonical</dt><dd>{_who(canonical)}</dd>")
    if pair.whole:
        meta.append("<dt>compared</dt><dd>the whole texts: two pages of one host are judged on them as well "
                    "(the furniture guard)</dd>")
    if pair.as_logged is False:
        meta.append(
            f'<dt>these texts</dt><dd class="note">Jaccard {pair.texts_jaccard:.4f}, not the logged {jaccard:.4f}: '
            "not exactly the texts compared (furniture learned or erased since?); simhash-tune scores these</dd>"
        )
    meta.append(f"<dt>decided</dt><dd>{escape(str(record.get('timestamp', '')))}</dd>")
    if "retention" in record:
        meta.append(f"<dt>retention</dt><dd>{escape(str(record['retention']))}</dd>")
    meta.append(f"<dt>rule</dt><dd>{_rule_html(record['rule'])}</dd>")
    if pair.labellable:
        assert pair.matched.text is not None and pair.duplicate.text is not None
        diff = word_diff(pair.matched.text, pair.duplicate.text)
        # Both texts in one: the script shows it twice, each side without the other's own words.
        left, right = diff.html, BOTH_BESIDE
        only_left, only_right = (f" · {count:,} word{'' if count == 1 else 's'} only here"
                                 for count in (diff.removed, diff.added))
        if diff.cut:
            meta.append(f"<dt>differences</dt><dd>marked in the first {MAX_DIFF_WORDS:,} words of each text</dd>")
        choice = "".join(
            f'<label><input type="radio" class="label" name="label-{pair.number}" data-pair="{pair.number}" '
            f'value="{label}" autocomplete="off"> {label}</label>'
            for label in ("duplicate", "distinct")
        )
        label = f'<fieldset class="label"><legend>Your label</legend>{choice}</fieldset>'
    else:
        left, right = text_html(pair.matched.text or ""), text_html(pair.duplicate.text or "")
        only_left = only_right = ""
        label = '<p class="missing">Not labellable: both texts are needed.</p>'
    distance = record.get("distance")
    head_a, text_a = _side_html("compared with", pair.matched, "a", left, only_left)
    head_b, text_b = _side_html("duplicate", pair.duplicate, "b", right, only_right)
    return (
        f'<section class="pair" id="pair-{pair.number}" data-pair="{pair.number}" data-decision="{decision}">'
        f'<h2>#{pair.number} <span class="decision {decision}">{decision}</span> '
        f"Jaccard {jaccard:.4f} <small>(threshold {pair.threshold:g}, {delta:+.4f})</small>"
        f" · distance {escape(str(distance))}</h2>"
        f'<dl class="meta">{"".join(meta)}</dl>'
        f'<div class="texts">{head_a}{text_a}{head_b}{text_b}</div>'
        f"{label}</section>"
    )


def _side_data(side: Side) -> dict[str, Any]:
    """What the script needs of a side besides its text, which it reads from the page: a text the HTML
    parser would change (a NUL) travels here instead."""
    data: dict[str, Any] = {"id": side.id, "url": side.url, "furniture": [list(run) for run in side.furniture]}
    if side.text is not None and "\x00" in side.text:
        data["text"] = side.text
    return data


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
        f"<code>scrapy simhash-tune {tune}</code> for the rule that separates them best. Both texts are shown "
        "as the pipeline compared them, site furniture removed; <b>Raw texts</b> shows it struck out. "
        "Your marks are kept in this browser.</p>"
        f"{NOSCRIPT}"
        f"<figure><figcaption>Jaccard of {len(histogram)} logged decisions ({escape(histogram_source)})"
        '<span class="legend"> · <span><span class="swatch merged"></span>merged</span>'
        '<span><span class="swatch rejected"></span>rejected</span></span></figcaption>'
        f"{histogram_svg(histogram, thresholds)}</figure>"
    )
    for number in range(1, len(files) + 1):
        paging = Paging(tuple(files), number, per_page)
        shown = paging.shown(pairs)
        data = {
            str(pair.number): {
                "key": pair.key,
                "jaccard": pair.record["jaccard"],
                "a": _side_data(pair.matched),
                "b": _side_data(pair.duplicate),
            }
            for pair in shown
            if pair.labellable
        }
        this_page = f" This page: #{shown[0].number} to #{shown[-1].number}." if len(files) > 1 else ""
        body = "".join(_pair_html(pair) for pair in shown) or '<p class="missing">The review log has no decision.</p>'
        links = paging.links()
        yield (
            f'{head}<p class="summary">{escape(summary + this_page)}</p>{about}{links}'
            '<div class="toolbar"><span id="counter">0 pairs marked</span>'
            '<select id="filter" aria-label="Show"><option value="all">all pairs</option>'
            '<option value="merged">merged</option><option value="rejected">rejected</option>'
            '<option value="unlabelled">unmarked</option></select>'
            '<button id="next" type="button">Next unmarked</button>'
            '<button id="raw" type="button">Raw texts</button>'
            f'<button id="download" type="button" data-filename="{paging.labels_file}" disabled>Download labels'
            '</button><span id="status" class="note"></span></div>'
            f"{KEYS}{body}{links}"
            f'<script type="application/json" id="simhash-pairs">{_json_for_script(data)}</script>'
            f"<script>{SCRIPT}</script></body></html>\n"
        )
