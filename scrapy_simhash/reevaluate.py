"""Replay past merge decisions under a new rule, from the scores the merge log stored.

Each merge-log line holds the Hamming distance and Jaccard of a candidate pair and the decision taken
(``merged`` or ``rejected``). A new Jaccard threshold (and optionally a smaller maximum distance) is
applied to those stored scores, without recomputing any fingerprint. Only pairs that surfaced as
candidates were logged, so a larger maximum distance cannot reveal merges that were never considered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scrapy_simhash.mergelog import DECISIONS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoggedDecision:
    """One merge-log entry, reduced to what a replay needs (``entry`` keeps the whole record)."""

    decision: str
    distance: int
    jaccard: float
    max_distance: int | None
    entry: dict[str, Any]

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> LoggedDecision:
        """Raise ``ValueError`` for an entry that lacks a decision, distance or Jaccard."""
        if not isinstance(entry, dict):
            raise ValueError("not a JSON object")
        decision = entry.get("decision")
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
        try:
            distance, jaccard = int(entry["distance"]), float(entry["jaccard"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"distance and jaccard must be numbers: {exc}") from None
        rule = entry.get("rule") if isinstance(entry.get("rule"), dict) else {}
        max_distance = rule.get("max_distance")
        return cls(decision, distance, jaccard, int(max_distance) if max_distance is not None else None, entry)

    def replay(self, threshold: float, max_distance: int | None = None) -> str:
        """The decision the rule (``threshold``, ``max_distance`` or the logged one) takes on these scores."""
        limit = self.max_distance if max_distance is None else max_distance
        within = limit is None or self.distance <= limit
        return "merged" if within and self.jaccard >= threshold else "rejected"


@dataclass(frozen=True)
class Flip:
    before: str
    after: str
    decision: LoggedDecision


def parse_decisions(entries: Iterable[dict[str, Any]]) -> list[LoggedDecision]:
    """The usable entries of a merge log; an unusable one is logged and skipped, never fatal."""
    decisions, skipped = [], 0
    for number, entry in enumerate(entries, 1):
        try:
            decisions.append(LoggedDecision.from_entry(entry))
        except ValueError as exc:
            skipped += 1
            logger.warning("merge-log entry %(number)d skipped: %(error)s", {"number": number, "error": exc})
    if skipped:
        logger.warning("%(skipped)d merge-log entries were skipped", {"skipped": skipped})
    return decisions


def flips(decisions: Iterable[LoggedDecision], threshold: float, max_distance: int | None = None) -> list[Flip]:
    """The decisions that change under the new rule, in log order."""
    out = []
    for decision in decisions:
        after = decision.replay(threshold, max_distance)
        if after != decision.decision:
            out.append(Flip(decision.decision, after, decision))
    return out


def format_flips(flipped: list[Flip], total: int) -> str:
    """A table of the flipped decisions and a one-line summary."""
    lines = [f"{'timestamp':<25} {'change':<19} {'dist':>4} {'jaccard':>7}  canonical <- duplicate"]
    for flip in flipped:
        entry = flip.decision.entry
        lines.append(
            f"{str(entry.get('timestamp', '')):<25} {flip.before + ' -> ' + flip.after:<19} "
            f"{flip.decision.distance:>4} {flip.decision.jaccard:>7.4f}  "
            f"{entry.get('canonical_url') or entry.get('canonical_id', '')} <- "
            f"{entry.get('duplicate_url') or entry.get('duplicate_id', '')}"
        )
    unmerged = sum(f.before == "merged" for f in flipped)
    lines.append(
        f"{len(flipped)} of {total} decisions flip: {unmerged} merges would be undone, "
        f"{len(flipped) - unmerged} rejections would become merges"
    )
    return "\n".join(lines)
