"""Writing a crawl's decisions: each item's merge and closest rejections to the merge log, and those
near the threshold, sampled, to the review log.

A merge the merge log does not take does not stand (:class:`MergeNotLogged`: the pipeline keeps the
item); a review-log failure is only counted; a fault no later write can cure closes the crawl.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy_simhash.fingerprint import FINGERPRINT_VERSION
from scrapy_simhash.mergelog import (
    MergeLog, MergeLogError, Rule, expire_log, merge_record, open_merge_log, review_record,
)
from scrapy_simhash.redis_url import mask_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_simhash.configured import ConfiguredLog
    from scrapy_simhash.index import Record
    from scrapy_simhash.judge import Placement, Verified
    from scrapy_simhash.minhash import Layout
    from scrapy_simhash.settings import SimhashSettings

__all__ = ["DecisionLogs", "LogUnusable", "MergeNotLogged"]

logger = logging.getLogger(__name__)

# Rejected candidates logged per item, the most similar first: what re-evaluation at a lower
# threshold can use, and a bound on the log's bytes per item.
LOGGED_REJECTIONS = 3

#: Why a log file cannot be written that no later write cures: permissions, a read-only file
#: system, a directory gone or a file where a directory should be. A full disk or an I/O error may pass.
_PERMANENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR})


class MergeNotLogged(Exception):
    """A duplicate's merge could not be recorded: it is kept, never dropped unrecorded."""


class LogUnusable(Exception):
    """A log that cannot be opened at all: the message names it, its setting, and what to do."""


class DecisionLogs:
    """The merge and review logs the settings name (``logs``), and the records the pipeline writes.

    ``warn_once(key, message, args)`` says a fault once; ``fail(reason)`` closes the crawl.
    """

    def __init__(
        self,
        crawler: Crawler,
        config: SimhashSettings,
        logs: list[ConfiguredLog],
        layout: Layout,
        warn_once: Callable[[str, str, dict[str, Any]], None],
        fail: Callable[[str], None],
    ) -> None:
        self.config = config
        self.places = {place.name: place for place in logs}
        self.layout = layout
        self.crawler = crawler
        self._inc = crawler.stats.inc_value
        self._warn_once = warn_once
        self._fail = fail
        self.merge_log: MergeLog | None = None
        self.review_log: MergeLog | None = None
        self._rules: dict[int, Rule] = {}

    async def open(self) -> None:
        """Open each log and check it takes writes; :class:`LogUnusable` when one cannot."""
        for place in self.places.values():
            try:
                log = open_merge_log(place.uri, place.default_stream, self.config.allow_eviction)
                await log.check()
            except (OSError, ValueError, MergeLogError) as exc:  # a directory that cannot be written, a bad URI
                raise LogUnusable(_log_fault(place.name, place.uri, "cannot be opened", exc)) from exc
            if place.name == "merge":
                self.merge_log = log
            else:
                self.review_log = log

    async def close(self) -> None:
        for log in (self.merge_log, self.review_log):
            if log is not None:
                try:
                    await log.close()
                except Exception:
                    logger.exception("Could not close the merge log", extra={"spider": self.crawler.spider})

    def rule(self, boilerplate_version: int) -> Rule:
        """The rule records name, one object per boilerplate version (it caches its serialisation)."""
        rule = self._rules.get(boilerplate_version)
        if rule is None:
            config = self.config
            rule = self._rules[boilerplate_version] = Rule(
                jaccard_threshold=config.jaccard_threshold,
                layout=self.layout.as_dict(),
                shingle_width=config.shingle_width,
                weighting=config.weighting,
                fingerprint_version=FINGERPRINT_VERSION,
                boilerplate_version=boilerplate_version,
            )
        return rule

    async def log(self, record: Record, text: str, raw: str, rule: Rule, placement: Placement) -> bool:
        """Record an item's decisions (its closest rejected candidates, then its merge) in one write;
        ``text`` is what was compared, ``raw`` the page's text before its boilerplate was removed.
        False when the merge log did not take them; a review-log failure is only counted."""
        if self.merge_log is None and self.review_log is None:
            return True
        decisions = [("rejected", v) for v in sorted(placement.rejected, key=lambda v: -v.jaccard)]
        decisions = decisions[:LOGGED_REJECTIONS]
        if placement.match is not None:
            decisions.append(("merged", placement.match))
        if not decisions:
            return True
        records = [self._record(decision, verified, record, rule) for decision, verified in decisions]
        if not await self._write(self.merge_log, records):
            return False  # the decision does not stand: nothing to review
        sampled = [
            review_record(r, text, raw, whole=verified.whole_texts)
            for r, (_, verified) in zip(records, decisions)
            if self._sampled_for_review(record.id, r["jaccard"])
        ]
        if sampled and await self._write(self.review_log, sampled):
            self._inc("simhash/review_sampled", len(sampled))
        return True

    @staticmethod
    def _record(decision: str, verified: Verified, record: Record, rule: Rule) -> dict[str, Any]:
        details = verified.details
        return merge_record(
            decision=decision,
            canonical_id=details.canonical_id,
            canonical_url=details.canonical_url,
            matched_id=details.id,
            matched_url=details.url,
            matched_fingerprint=verified.candidate.fingerprint,
            duplicate_id=record.id,
            duplicate_url=record.url,
            duplicate_fingerprint=record.fingerprint,
            distance=(verified.candidate.fingerprint ^ record.fingerprint).bit_count(),
            jaccard=verified.jaccard,
            retention=record.retention,
            rule=rule,
            canonical_first_seen=details.canonical_first_seen,
            matched_first_seen=details.first_seen,
        )

    def _sampled_for_review(self, duplicate_id: str, similarity: float) -> bool:
        """Decisions near the threshold, either side, sampled by a hash of the id so reruns pick the same."""
        config = self.config
        if self.review_log is None or abs(similarity - config.jaccard_threshold) > config.review_margin:
            return False
        draw = int.from_bytes(hashlib.blake2b(duplicate_id.encode("utf-8"), digest_size=8).digest(), "big")
        return draw < config.review_rate * 2**64

    async def _write(self, log: MergeLog | None, records: list[dict[str, Any]]) -> bool:
        if log is None:
            return True
        try:
            await log.write(records)
        except Exception as exc:  # a lost audit record must be loud, not fatal to the crawl
            kind = "merge" if log is self.merge_log else "review"
            if _permanent_log_fault(exc):  # no later write can succeed either: said once, and the crawl stops
                self._fail(_log_fault(kind, self.places[kind].uri, "cannot be written", exc.__cause__ or exc))
            consequence = (
                "a duplicate whose merge cannot be recorded is kept (simhash/unchecked)"
                if kind == "merge"
                else "the decisions stand, the review sample lacks them"
            )
            self._inc(f"simhash/{kind}_log_errors", len(records))
            self._warn_once(
                f"{kind} log",
                "Could not write %(count)d %(kind)s-log records (%(error)s); %(consequence)s; further failures "
                "are counted in simhash/%(kind)s_log_errors",
                {"count": len(records), "kind": kind, "error": f"{type(exc).__name__}: {exc}",
                 "consequence": consequence},
            )
            return False
        return True

    async def expire(self) -> None:
        """Retention: the records of groups past their TTL leave the logs."""
        classes = self.config.retention
        if not classes or all(ttl is None for ttl in classes.values()):
            return
        for place in self.places.values():
            kind = place.kind
            try:
                rewrite = await expire_log(place.uri, classes, time.time(), place.default_stream)
            except Exception as exc:  # the log keeps its records until the next run: said, not fatal
                self._warn_once(f"expire {kind}", "Could not apply retention to the %(kind)s log: %(error)s",
                                {"kind": kind, "error": f"{type(exc).__name__}: {exc}"})
                continue
            self._inc("simhash/expired_log_records", rewrite.removed)


def _permanent_log_fault(exc: BaseException) -> bool:
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    return isinstance(cause, OSError) and cause.errno in _PERMANENT_ERRNOS


def _log_fault(kind: str, uri: str, what: str, exc: BaseException) -> str:
    """One line naming the log, its setting and its place, the error, and what to do."""
    setting = f"SIMHASH_{kind.upper()}_LOG"
    return (
        f"The SimHash {kind} log {setting} = {mask_url(uri)!r} {what} ({type(exc).__name__}: {exc}): fix that path "
        f"or its permissions, or point {setting} elsewhere ({setting} = \"\" turns the log off)"
    )
