"""Replay past merge decisions under a new rule, from the scores the merge log stored.

Each merge-log record holds the SimHash distance and Jaccard of a candidate pair and the decision taken
(``merged`` or ``rejected``). A new Jaccard threshold (and optionally a maximum distance) is applied to
those stored scores, without recomputing any fingerprint. Only candidates were logged, and not every
rejected one, so a lower threshold cannot reveal merges that were never considered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scrapy_simhash.mergelog import DECISIONS, is_jaccard, is_number

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoggedDecision:
    """One merge-log entry, reduced to what a replay needs (``entry`` keeps the whole record)."""

    decision: str
    distance: int
    jaccard: float
    entry: dict[str, Any]

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> LoggedDecision:
        """Raise ``ValueError`` for an entry that lacks a decision, distance or Jaccard."""
        if not isinstance(entry, dict):
            raise ValueError("not a JSON object")
        decision = entry.get("decision")
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
        distance, jaccard = entry.get("distance"), entry.get("jaccard")
        if not is_number(distance) or not float(distance).is_integer() or not 0 <= distance <= 64:
            raise ValueError(f"distance must be a whole number of bits from 0 to 64, got {distance!r}")
        if not is_jaccard(jaccard):
            raise ValueError(f"jaccard must be a number from 0 to 1, got {jaccard!r}")
        return cls(decision, int(distance), float(jaccard), entry)

    def replay(self, threshold: float) -> str:
        """The decision ``threshold`` takes on this verified Jaccard."""
        return "merged" if self.jaccard >= threshold else "rejected"


@dataclass(frozen=True)
class Flip:
    before: str
    after: str
    decision: LoggedDecision


@dataclass
class Replay:
    """A merge log replayed under a new threshold: the decisions that flip, in log order, and how many
    entries were replayed (``total``) or not usable (``unusable``)."""

    flipped: list[Flip] = field(default_factory=list)
    total: int = 0
    unusable: int = 0


def replay(entries: Iterable[dict[str, Any]], threshold: float) -> Replay:
    """One pass over a merge log's entries: only the flips are kept, so a log of any size replays in
    the memory of its flips. An unusable entry is logged and skipped, never fatal."""
    result = Replay()
    for number, entry in enumerate(entries, 1):
        try:
            decision = LoggedDecision.from_entry(entry)
        except ValueError as exc:
            result.unusable += 1
            logger.warning("merge-log entry %(number)d skipped: %(error)s", {"number": number, "error": exc})
            continue
        result.total += 1
        after = decision.replay(threshold)
        if after != decision.decision:
            result.flipped.append(Flip(decision.decision, after, decision))
    if result.unusable:
        logger.warning("%(skipped)d merge-log entries were skipped", {"skipped": result.unusable})
    return result


def format_flips(result: Replay, unreadable: int = 0) -> str:
    """A table of the flipped decisions and a summary, with the lines (``unreadable``) and records
    (``result.unusable``) of the log that were skipped. Columns are as wide as their widest value."""
    flipped, total, unusable = result.flipped, result.total, result.unusable
    rows = [
        (
            str(flip.decision.entry.get("timestamp", "")),
            f"{flip.before} -> {flip.after}",
            str(flip.decision.distance),
            f"{flip.decision.jaccard:.4f}",
            f"{_page(flip.decision.entry, 'canonical')} <- {_page(flip.decision.entry, 'duplicate')}",
        )
        for flip in flipped
    ]
    header = ("timestamp", "change", "dist", "jaccard", "canonical <- duplicate")
    widths = [max(map(len, column)) for column in zip(header, *rows)]
    lines = [
        f"{time:<{widths[0]}} {change:<{widths[1]}} {dist:>{widths[2]}} {jaccard:>{widths[3]}}  {pair}"
        for time, change, dist, jaccard, pair in (header, *rows)
    ]
    unmerged = sum(f.before == "merged" for f in flipped)
    lines.append(
        f"{len(flipped)} of {total} decisions flip: {unmerged} merges would be undone, "
        f"{len(flipped) - unmerged} rejections would become merges"
    )
    if unreadable or unusable:
        lines.append(
            f"{_count(unreadable, 'torn or invalid line')} and {_count(unusable, 'unusable record')} skipped"
        )
    return "\n".join(lines)


def _page(entry: dict[str, Any], side: str) -> str:
    """A side of a logged pair by URL, else id; "(erased)" once erased."""
    erased = "(erased)" if side in (entry.get("erased") or ()) else ""
    return entry.get(f"{side}_url") or entry.get(f"{side}_id") or erased


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
