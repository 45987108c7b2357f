"""Merge-log records: the one schema every reader and writer uses, built, redacted and aged here.

Pure functions on plain dicts, no I/O, so the file and stream backends share one meaning of each.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "DECISIONS",
    "FIELDS",
    "FIRST_SEEN_FIELDS",
    "FURNITURE_FIELD",
    "REMOVE",
    "WHOLE_FIELD",
    "SIDES",
    "TEXT_FIELD",
    "Edit",
    "Erasure",
    "Expiry",
    "Removed",
    "Rule",
    "expired",
    "fingerprint_hex",
    "furniture_runs",
    "raw_text",
    "is_jaccard",
    "is_number",
    "merge_record",
    "redact",
    "review_record",
    "written_at",
]

DECISIONS = ("merged", "rejected")
# The fields of a record, in the order they are written (docs: DESIGN.md "Merge-log record").
FIELDS = (
    "timestamp",
    "decision",
    "canonical_id",
    "canonical_url",
    "canonical_first_seen",
    "matched_id",
    "matched_url",
    "matched_fingerprint",
    "matched_first_seen",
    "duplicate_id",
    "duplicate_url",
    "duplicate_fingerprint",
    "distance",
    "jaccard",
    "retention",
    "rule",
)
# The fields that name each page of a record: an erased page's become null.
SIDES: dict[str, tuple[str, ...]] = {
    "canonical": ("canonical_id", "canonical_url"),
    "matched": ("matched_id", "matched_url", "matched_fingerprint"),
    "duplicate": ("duplicate_id", "duplicate_url", "duplicate_fingerprint"),
}
# The review log's extra fields: the duplicate's compared text, and the site furniture left out of it
# (for the review page's raw view); removed with the duplicate's side.
TEXT_FIELD = "duplicate_text"
FURNITURE_FIELD = "duplicate_furniture"
# True when the Jaccard is of the two pages' whole texts (two pages of one host the guard judged whole).
WHOLE_FIELD = "whole_texts"
# When the index first met the group's canonical (the content's first meeting) and the record matched:
# ISO 8601 times, null when the index did not say (a record of an earlier version).
FIRST_SEEN_FIELDS = ("canonical_first_seen", "matched_first_seen")


@dataclass(frozen=True)
class Rule:
    """The parameters that decided: recorded with each decision so that it can be re-checked.

    ``layout`` is the index layout as JSON data (a mapping of plain values), never a ``repr``.
    """

    jaccard_threshold: float
    layout: Mapping[str, Any]
    shingle_width: int
    weighting: str
    fingerprint_version: int
    boilerplate_version: int
    _plain: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.layout, Mapping):
            raise TypeError(f"the rule's layout must be a mapping of JSON data, got {type(self.layout).__name__}")
        data = {item.name: getattr(self, item.name) for item in fields(self) if item.init}
        try:
            plain = json.loads(json.dumps(data, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the rule and its layout must be JSON data: {exc}") from None
        if any(isinstance(value, (dict, list)) for value in plain["layout"].values()):
            raise TypeError("the rule's layout must map names to plain values (numbers, strings)")
        object.__setattr__(self, "_plain", plain)

    def as_dict(self) -> dict[str, Any]:
        """The rule as a record holds it: fresh plain data on each call, shared with nothing."""
        return {**self._plain, "layout": dict(self._plain["layout"])}


def is_number(value: Any) -> bool:
    """A number a record may hold: finite, and not a bool (JSON's true is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_jaccard(value: Any) -> bool:
    """A Jaccard a record may hold: a number from 0 to 1."""
    return is_number(value) and 0 <= value <= 1


def fingerprint_hex(fingerprint: int) -> str:
    """16 lower-case hex digits: JSON numbers lose 64-bit precision in most readers."""
    return f"{fingerprint:016x}"


def merge_record(
    *,
    decision: str,
    canonical_id: str,
    canonical_url: str,
    matched_id: str,
    matched_url: str,
    matched_fingerprint: int,
    duplicate_id: str,
    duplicate_url: str,
    duplicate_fingerprint: int,
    distance: int,
    jaccard: float,
    retention: str,
    rule: Rule,
    at: float | None = None,
    canonical_first_seen: float | None = None,
    matched_first_seen: float | None = None,
) -> dict[str, Any]:
    """One record in the schema of :data:`FIELDS`; ``at`` (Unix time, default now) is when it was decided,
    the first-seen times (Unix time; None or 0: unknown) when the index first met the group's
    canonical and the record matched."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
    when = datetime.now(timezone.utc) if at is None else datetime.fromtimestamp(at, timezone.utc)
    return {
        "timestamp": when.isoformat(),
        "decision": decision,
        "canonical_id": canonical_id,
        "canonical_url": canonical_url,
        "canonical_first_seen": _iso(canonical_first_seen),
        "matched_id": matched_id,
        "matched_url": matched_url,
        "matched_fingerprint": fingerprint_hex(matched_fingerprint),
        "matched_first_seen": _iso(matched_first_seen),
        "duplicate_id": duplicate_id,
        "duplicate_url": duplicate_url,
        "duplicate_fingerprint": fingerprint_hex(duplicate_fingerprint),
        "distance": int(distance),
        "jaccard": float(jaccard),
        "retention": retention,
        "rule": rule.as_dict(),
    }


def _iso(at: float | None) -> str | None:
    return _iso_time(at) if at else None


@functools.lru_cache(maxsize=4096)
def _iso_time(at: float) -> str:
    """Remembered: the duplicates of one group name its canonical's first-seen time over and over."""
    return datetime.fromtimestamp(at, timezone.utc).isoformat()


def review_record(record: dict[str, Any], text: str, raw: str | None = None, whole: bool = False) -> dict[str, Any]:
    """A review-log record: the merge-log record, the duplicate's compared text (boilerplate removed)
    and, when ``raw`` (the text before) differs, the lines removed from it: the two hold the raw text
    once, so a record stays within SIMHASH_MAX_CHARS of text. ``whole``: the Jaccard is of the whole texts."""
    runs = furniture_runs(raw, text) if raw is not None and raw != text else []
    extra = {**({FURNITURE_FIELD: runs} if runs else {}), **({WHOLE_FIELD: True} if whole else {})}
    return {**record, TEXT_FIELD: text, **extra}


def furniture_runs(raw: str, kept: str) -> list[list[Any]]:
    """The runs of ``raw``'s lines left out of ``kept`` (raw's lines, some left out, in order), each as
    ``[number of its first line in raw, its lines joined by newlines]``; ValueError when ``kept`` is not that."""
    lines, wanted = raw.split("\n"), kept.split("\n") if kept else []
    runs: list[list[Any]] = []
    at = 0
    for number, line in enumerate(lines):
        if at < len(wanted) and line == wanted[at]:
            at += 1
        elif runs and runs[-1][0] + runs[-1][1].count("\n") + 1 == number:
            runs[-1][1] += "\n" + line
        else:
            runs.append([number, line])
    if at < len(wanted):
        raise ValueError("the kept text is not the raw text with lines left out")
    return runs


def raw_text(kept: str, runs: list[list[Any]] | tuple[tuple[int, str], ...]) -> str:
    """The text :func:`furniture_runs` took ``runs`` from, with ``kept`` left: the runs put back."""
    lines, wanted = [], iter(kept.split("\n") if kept else [])
    for start, run in runs:
        lines.extend(itertools.islice(wanted, max(0, start - len(lines))))
        lines.extend(run.split("\n"))
    lines.extend(wanted)
    return "\n".join(lines)


def redact(record: dict[str, Any], pages: Collection[str]) -> dict[str, Any] | None:
    """``record`` with every side naming one of ``pages`` (by id or URL) erased; None when none does.

    An erased side keeps its keys with null values and is listed in ``"erased"``; the duplicate's
    text goes with the duplicate's side. The record itself stays, so the other pages' audit does.
    """
    erased = [
        side
        for side, (id_field, url_field, *_) in SIDES.items()
        if record.get(id_field) in pages or record.get(url_field) in pages
    ]
    if not erased:
        return None
    redacted = dict(record)
    for side in erased:
        for name in SIDES[side]:
            redacted[name] = None
    if "duplicate" in erased:
        redacted.pop(TEXT_FIELD, None)
        redacted.pop(FURNITURE_FIELD, None)
    before = record.get("erased") or []
    redacted["erased"] = [side for side in SIDES if side in erased or side in before]
    return redacted


def written_at(record: dict[str, Any]) -> float:
    """The Unix time of a record's decision; ValueError when its timestamp is missing or unreadable."""
    stamp = record.get("timestamp")
    if not isinstance(stamp, str):
        raise ValueError(f"timestamp must be an ISO 8601 string, got {stamp!r}")
    return datetime.fromisoformat(stamp).timestamp()


def expired(record: dict[str, Any], classes: Mapping[str, float | None], now: float) -> bool:
    """Whether ``record`` is older than its retention class's TTL (None: kept for good).

    ValueError for a record whose class or time is unknown: it is kept and counted by the caller.
    """
    retention = record.get("retention")
    if not isinstance(retention, str) or retention not in classes:
        raise ValueError(f"retention class {retention!r} is not one of {sorted(classes)}")
    ttl = classes[retention]
    return ttl is not None and written_at(record) < now - ttl


class Removed:
    """The type of :data:`REMOVE`."""


REMOVE = Removed()


class Edit(ABC):
    """What a rewrite of a log does to each record: keep it, replace it or remove it."""

    @abstractmethod
    def __call__(self, record: dict[str, Any]) -> dict[str, Any] | Removed | None:
        """None: keep the record as it is; a dict: its replacement; :data:`REMOVE`: remove it.

        ValueError or TypeError: the record cannot be judged; it is treated as an unreadable line.
        """

    def keeps_unreadable(self, raw: bytes) -> bool:
        """Whether a line or entry that cannot be read as a record stays (it cannot be judged)."""
        return True

    def done(self, record: dict[str, Any]) -> bool:
        """True when this record and every later one stay as they are (a log is in time order)."""
        return False


class Erasure(Edit):
    """Redact every side naming one of ``pages`` (ids or URLs); an unreadable line naming one goes."""

    def __init__(self, pages: Collection[str]) -> None:
        if isinstance(pages, (str, bytes)):
            raise TypeError("give the pages to erase as a collection of ids or URLs, not one string")
        self.pages = frozenset(pages)
        if not self.pages or not all(isinstance(page, str) and page for page in self.pages):
            raise ValueError("give the ids or URLs to erase, as non-empty strings")
        # Each page as raw UTF-8 and as JSON writes it inside a string (escaped, or ASCII only).
        self._needles = {
            form.encode()
            for page in self.pages
            for form in (page, json.dumps(page)[1:-1], json.dumps(page, ensure_ascii=False)[1:-1])
        }

    def __call__(self, record: dict[str, Any]) -> dict[str, Any] | None:
        return redact(record, self.pages)

    def keeps_unreadable(self, raw: bytes) -> bool:
        return not any(needle in raw for needle in self._needles)


class Expiry(Edit):
    """Remove the records older than their retention class's TTL at ``now``; ValueError (the record is
    kept and counted) for an unknown class or time."""

    def __init__(self, classes: Mapping[str, float | None], now: float) -> None:
        self.classes = dict(classes)
        self.now = now
        ttls = [ttl for ttl in self.classes.values() if ttl is not None]
        # No record written at or after this time can have expired.
        self.horizon = now - min(ttls) if ttls else float("-inf")

    def __call__(self, record: dict[str, Any]) -> Removed | None:
        return REMOVE if expired(record, self.classes, self.now) else None

    def done(self, record: dict[str, Any]) -> bool:
        try:
            return written_at(record) >= self.horizon
        except ValueError:
            return False
