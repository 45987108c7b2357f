"""The item pipeline: drops or annotates near-duplicate items and records every merge.

Enable it with ``ADDONS = {"scrapy_simhash.Addon": 0}`` (or ``ITEM_PIPELINES``); README.md lists
the settings, the stats and the merge-log format.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from itemadapter import ItemAdapter, is_item
from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured

from scrapy_simhash.boilerplate import BoilerplateLearner, Stripped
from scrapy_simhash.configured import configured_index, configured_layout
from scrapy_simhash.delivery import Delivery, FeedDeliveries
from scrapy_simhash.extract import BadFieldError, exact_digest, extract_text, field_value, host_of
from scrapy_simhash.fingerprint import FINGERPRINT_VERSION, Fingerprinter, verification_hashes
from scrapy_simhash.guard import GuardedIndex, IndexUnavailable
from scrapy_simhash.index import GroupGone, IndexCorrupt, IndexOpenError, Record
from scrapy_simhash.index.retention import DEFAULT_RETENTION
from scrapy_simhash.judge import InFlightElsewhere, Placement, Verified, place, place_exact
from scrapy_simhash.mergelog import (
    MergeLog, MergeLogError, Rule, expire_log, merge_record, open_merge_log, review_record,
)
from scrapy_simhash.printable import printable
from scrapy_simhash.redis_url import mask_url
from scrapy_simhash.reset import reset
from scrapy_simhash.settings import MAX_RETRY_DELAY, SettingsError, read, stream_key, unknown_settings
from scrapy_simhash.signer import Signer
from scrapy_simhash.whole_text import SAME_TEXT, WholeText, whole_text

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["SimhashPipeline"]

logger = logging.getLogger(__name__)

DISTANCE_FIELD = "simhash_distance"
JACCARD_FIELD = "jaccard"
FINGERPRINT_FIELD = "fingerprint"
# Items looked at before saying that none of them has any SIMHASH_FIELDS field.
FIELD_CHECK_ITEMS = 20
# Rejected candidates logged per item, the most similar first: what re-evaluation at a lower
# threshold can use, and a bound on the log's bytes per item.
LOGGED_REJECTIONS = 3
# Confirmations (items scraped) sent to the index together, or after this many seconds.
CONFIRM_BATCH, CONFIRM_DELAY = 100, 1.0


@dataclass(frozen=True)
class Page:
    """What the pipeline judges of an item: plain values, taken from the item once."""

    id: str
    url: str
    host: str
    retention: str
    text: str


@dataclass(frozen=True)
class Match:
    """The group an item duplicates, the record it matched, and the evidence."""

    canonical_id: str
    matched_id: str
    distance: int
    jaccard: float
    fingerprint: int


class _Seen:
    """The type of :data:`SEEN`."""


#: What judging a page the index holds already, with this very content, comes to: no decision.
SEEN = _Seen()


class SimhashPipeline:
    """Fingerprints each item's content, finds its near-duplicates in the index and verifies them.

    An item the pipeline cannot judge (a field that is not text, an index outage) is passed on and
    counted as ``simhash/unchecked``, or fails the crawl with ``SIMHASH_ON_INDEX_ERROR = "fail"``.
    """

    def __init__(self, crawler: Crawler) -> None:
        assert crawler.spider is not None
        try:
            config = read(crawler.settings, crawler.spider.name)
            self.layout = configured_layout(config)
        except (SettingsError, ValueError) as exc:
            _refuse(crawler, str(exc))
        if not config.enabled:
            raise NotConfigured("SIMHASH_ENABLED is off")
        unknown = unknown_settings(crawler.settings)
        if unknown:
            logger.warning(
                "SimHash pipeline: %(names)s not a setting of scrapy-simhash, ignored",
                {"names": ", ".join(f"{name} ({meant}?)" if meant else name for name, meant in unknown.items())},
            )
        self.config = config
        self.crawler = crawler
        self.stats = crawler.stats
        # Bound once: each attribute access on Scrapy's StatsCollector runs its __getattribute__ hook.
        self._inc = crawler.stats.inc_value
        self._drop_level = logging.getLevelName(config.drop_log_level)
        fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
        self.signer = Signer(fingerprinter, self.layout, crawler.stats)
        self.retention_classes = frozenset(config.retention or DEFAULT_RETENTION)
        self.learner = BoilerplateLearner(crawler, config) if config.boilerplate else None
        self.index: GuardedIndex | None = None
        self.merge_log: MergeLog | None = None
        self.review_log: MergeLog | None = None
        self._background: list[asyncio.Future[None]] = []  # retention sweeps, lease renewals
        self._closing: asyncio.Future[None] | None = None
        self._rules: dict[int, Rule] = {}
        self._pending = _PendingItems()
        self._deliveries: FeedDeliveries | None = None
        self._released = False
        self._confirm: list[int] = []
        self._mark_scraped: list[int] = []  # scraped, waiting for a feed: see FeedDeliveries
        self._confirming: asyncio.Task[None] | None = None
        self._unjoined: dict[int, str] = {}  # rid -> page id: joins whose record and undo were both refused
        self._warned: set[str] = set()
        self._unchecked: Counter[str] = Counter()
        self._fields_seen: Counter[str] = Counter()
        self._fields_given = crawler.settings.getpriority("SIMHASH_FIELDS") is not None
        self._items_checked = 0
        self._largest_group = 0
        self._usable = True
        crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(self._item_gone, signal=signals.item_dropped)
        crawler.signals.connect(self._item_gone, signal=signals.item_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashPipeline:
        return cls(crawler)

    # -- lifecycle --------------------------------------------------------------------------------

    async def open_spider(self) -> None:
        config = self.config
        self._deliveries = FeedDeliveries.of(self.crawler)
        if self._deliveries is not None:
            self.crawler.signals.connect(self._feed_slot_closed, signal=signals.feed_slot_closed)
            self.crawler.signals.connect(self._feeds_closed, signal=signals.feed_exporter_closed)
            self.crawler.signals.connect(self._feeds_closed, signal=signals.engine_stopped)  # if feeds never close
        logger.info(
            "SimHash pipeline: fields %(fields)s, Jaccard >= %(jaccard).2f, layout %(layout)s, index %(url)s, "
            "action %(action)s, boilerplate %(boilerplate)s",
            {
                "fields": config.fields,
                "jaccard": config.jaccard_threshold,
                "layout": self.layout.to_json(),
                "url": mask_url(config.index_url),
                "action": config.action,
                "boilerplate": "learned per host" if self.learner else "off",
            },
            extra={"spider": self.crawler.spider},
        )
        consequence = (
            "closing the spider (SIMHASH_ON_INDEX_ERROR = 'fail')"
            if config.on_index_error == "fail"
            else "items it cannot judge are passed on unchecked (simhash/unchecked), and each item tries it "
            "again (SIMHASH_ON_INDEX_ERROR = 'pass')"
        )
        if config.reset or _truthy(getattr(self.crawler.spider, "simhash_reset", None)):
            try:
                done = await reset(config)
            except Exception as exc:  # a Redis that does not answer: starting on the old index would mislead
                self._cannot_open(f"SIMHASH_RESET could not empty the index and logs ({type(exc).__name__}: {exc})")
                return
            logger.info("SimHash: starting over (SIMHASH_RESET): %(done)s", {"done": done},
                        extra={"spider": self.crawler.spider})
        try:
            index = configured_index(config)
        except ValueError as exc:
            self._cannot_open(f"Cannot use the SimHash index: {exc}")
            return
        self.index = GuardedIndex(
            index,
            retries=config.index_retries,
            delay=config.index_retry_delay,
            max_delay=MAX_RETRY_DELAY,
            stats=self.stats,
            consequence=consequence,
        )
        try:
            await self.index.open()
        except IndexUnavailable as exc:
            if isinstance(exc.error, IndexCorrupt):
                self._cannot_open(self._corrupt_message(exc.error))
                return
            if isinstance(exc.error, (IndexOpenError, ValueError)):  # said whole: what is wrong and what to do
                self._cannot_open(f"Cannot use the SimHash index: {exc.error}")
                return
            if config.on_index_error == "fail":
                self._cannot_open(f"Cannot use the SimHash index: {exc}")
                return
            logger.warning(
                "SimHash %(error)s: %(consequence)s", {"error": exc, "consequence": consequence},
                extra={"spider": self.crawler.spider},
            )
        if self.learner is not None:
            await self.learner.open(self.index)
        for kind in ("merge", "review"):
            uri = config.merge_log if kind == "merge" else config.review_log
            if not uri:
                continue
            try:
                log = open_merge_log(uri, stream_key(config, "merges" if kind == "merge" else "review"),
                                     config.allow_eviction)
                await log.check()
            except (OSError, ValueError, MergeLogError) as exc:  # a directory that cannot be written, a bad URI
                self._cannot_open(_log_fault(kind, uri, "cannot be opened", exc))
                return
            if kind == "merge":
                self.merge_log = log
            else:
                self.review_log = log
        self._background = [
            asyncio.ensure_future(self._expire_periodically()),
            asyncio.ensure_future(self._keep_alive_periodically()),
        ]

    def _cannot_open(self, reason: str) -> None:
        """An index or log that cannot be used at all (a permanent fault, whatever
        SIMHASH_ON_INDEX_ERROR says): one error line naming it and what to do, and the crawl closes
        cleanly; items that still arrive pass on unchecked."""
        if self._usable:
            logger.error("%(reason)s; closing the spider", {"reason": reason}, extra={"spider": self.crawler.spider})
        self._usable = False
        self._close("simhash_index_error")

    def _corrupt_message(self, error: IndexCorrupt) -> str:
        assert self.crawler.spider is not None
        return (
            f"SimHash index {error}: restore it from a backup, or start over with "
            f"scrapy simhash-reset --spider {self.crawler.spider.name}"
        )

    async def close_spider(self) -> None:
        try:
            if self.learner is not None:
                await self.learner.close()
            await self._flush_confirmations(closing=self._deliveries is None)
            if 0 < self._items_checked < FIELD_CHECK_ITEMS:  # a crawl shorter than the early check
                self._say_missing_fields()
            for log in (self.merge_log, self.review_log):
                if log is not None:
                    try:
                        await log.close()
                    except Exception:
                        logger.exception("Could not close the merge log", extra={"spider": self.crawler.spider})
            if self._unchecked:
                logger.warning(
                    "SimHash passed %(count)d items on unchecked: %(reasons)s",
                    {"count": sum(self._unchecked.values()), "reasons": dict(self._unchecked)},
                    extra={"spider": self.crawler.spider},
                )
        finally:
            if self._deliveries is None:
                await self._release()

    async def _feeds_closed(self) -> None:
        """The feeds are stored, or failed to be: what they delivered is confirmed, the rest stays
        pending, and the index (its lease held meanwhile) is let go."""
        if self._released:
            return
        assert self._deliveries is not None
        undelivered = self._deliveries.undelivered()
        if undelivered and self.index is not None:
            self._inc("simhash/undelivered", undelivered)
            logger.warning(
                "SimHash: %(count)d pages were not delivered (a feed failed to export or to store them): their "
                "records stay pending, and the next crawl keeps those pages again", {"count": undelivered},
                extra={"spider": self.crawler.spider},
            )
        await self._flush_confirmations(closing=True)
        await self._release()

    async def _release(self) -> None:
        """Stop the retention sweeps and the lease renewals, and close the index."""
        self._released = True
        for task in self._background:
            task.cancel()
        if self.index is not None:
            await self.index.close()

    def _close(self, reason: str) -> None:
        if self._closing is None:  # not awaited: closing waits for the items in flight
            self._closing = asyncio.ensure_future(self.crawler.engine.close_spider_async(reason=reason))

    # -- items ------------------------------------------------------------------------------------

    async def process_item(self, item: Any) -> Any:
        self._inc("simhash/items_seen")
        try:
            if not is_item(item):
                raise BadFieldError(f"{type(item).__name__} is not an item type itemadapter supports")
            adapter = ItemAdapter(item)
            self._check_fields(adapter)
            page = self._page(adapter)
        except BadFieldError as exc:
            self._inc("simhash/bad_fields")
            return self._pass_unchecked(item, "unreadable field", str(exc))
        except Exception:
            return self._internal_error(item, "read")
        if not self._usable:
            return self._pass_unchecked(item, "no index", "the index or a log cannot be used", logged=True)
        try:
            match = await self._judge(page, item)
        except MergeNotLogged as exc:
            return self._pass_unchecked(item, "merge not logged", str(exc), logged=True)
        except InFlightElsewhere as exc:
            return self._pass_unchecked(item, "in flight in another crawl", str(exc))
        except IndexUnavailable as exc:
            if isinstance(exc.error, IndexCorrupt):
                self._cannot_open(self._corrupt_message(exc.error))
                return self._pass_unchecked(item, "index corrupt", str(exc), logged=True)
            if self.config.on_index_error == "fail":
                self._close("simhash_index_error")
            return self._pass_unchecked(item, "index unavailable", str(exc), logged=True)
        except Exception:
            return self._internal_error(item, "judge")
        if match is None:
            return item
        if match is SEEN:
            if self.config.seen_action == "pass":
                return item
            raise self._drop(f"seen before, unchanged: {page.id}")
        assert isinstance(match, Match)
        self._inc("simhash/duplicates")
        if self.config.action == "drop":
            self._inc("simhash/dropped")
            reason = (f"near-duplicate {printable(page.id)} of {printable(match.canonical_id)} (matched"
                      f" {printable(match.matched_id)}, distance {match.distance}, Jaccard {match.jaccard:.3f})")
            raise self._drop(reason)
        self._annotate(adapter, match)
        return item

    def _drop(self, reason: str) -> DropItem:
        """One short line a dropped duplicate, and Scrapy's "Dropped:" line, which also logs the whole
        item, at DEBUG; with SIMHASH_DROP_DEBUG, only Scrapy's line, at the drop level."""
        level = self.config.drop_log_level
        if self.config.drop_debug:
            return DropItem(reason, log_level=level)
        logger.log(self._drop_level, "Dropped: %(reason)s", {"reason": reason}, extra={"spider": self.crawler.spider})
        return DropItem(reason, log_level="DEBUG")

    def _internal_error(self, item: Any, step: str) -> Any:
        """A bug of ours, or input no check foresaw, must not cost the user the item: pass it on, loudly."""
        self._inc("simhash/internal_errors")
        logger.exception("Could not %(step)s an item; passing it on unchecked", {"step": step},
                         extra={"spider": self.crawler.spider})
        return self._pass_unchecked(item, "internal error", "logged above", logged=True)

    def _check_fields(self, adapter: ItemAdapter) -> None:
        """Count items without any field SIMHASH_FIELDS names, and say once, early, which fields none
        of the first items has (:meth:`_say_missing_fields`)."""
        present = [name for name in self.config.fields if not _empty(adapter.get(name))]
        if not present:
            self._inc("simhash/items_without_fields")
        if self._items_checked >= FIELD_CHECK_ITEMS:
            return
        self._items_checked += 1
        self._fields_seen.update(present)
        self._fields_seen.update(f"item:{name}" for name in adapter.keys())
        if self._items_checked == FIELD_CHECK_ITEMS:
            self._say_missing_fields()

    def _say_missing_fields(self) -> None:
        """No first item has any of the fields: nothing is compared. A field of a list the user gave
        that none has (a typo): items are compared on the others, perhaps a title alone. (The default
        list's fields are each optional.)"""
        missing = [name for name in self.config.fields if not self._fields_seen[name]]
        if not missing or len(missing) < len(self.config.fields) and not self._fields_given:
            return
        have = ", ".join(sorted(name.removeprefix("item:") for name in self._fields_seen if name.startswith("item:")))
        consequence = "nothing is compared" if len(missing) == len(self.config.fields) else "compared without it"
        logger.warning(
            "None of the first %(count)d items has the field(s) %(fields)s that SIMHASH_FIELDS names: "
            "%(consequence)s. The items have: %(have)s",
            {"count": self._items_checked, "fields": missing, "consequence": consequence, "have": have},
            extra={"spider": self.crawler.spider},
        )

    def _page(self, adapter: ItemAdapter) -> Page:
        config = self.config
        text, truncated = extract_text(adapter, config.fields, config.html_fields, config.max_chars)
        if truncated:
            self._inc("simhash/truncated")
        url = field_value(adapter, config.url_field)
        retention = field_value(adapter, config.retention_field) or "default"
        if retention not in self.retention_classes:
            known = sorted(self.retention_classes)
            raise BadFieldError(f"unknown retention class {retention!r} (SIMHASH_RETENTION: {known})")
        host = field_value(adapter, config.host_field) if config.host_field else host_of(url)
        return Page(
            id=self._page_id(adapter, text),
            url=url,
            host=host,
            retention=retention,
            text=text,
        )

    def _page_id(self, adapter: ItemAdapter, text: str | None = None) -> str:
        """What a page's records are kept under: its SIMHASH_ID_FIELD, else its URL, else a digest of
        its text (``text``, or extracted again)."""
        config = self.config
        found = field_value(adapter, config.id_field or config.url_field)
        if found:
            return found
        if text is None:
            text = extract_text(adapter, config.fields, config.html_fields, config.max_chars).text
        return f"digest:{exact_digest(text).hex()}"

    def _pass_unchecked(self, item: Any, reason: str, detail: str, logged: bool = False) -> Any:
        """Pass an item on unjudged: counted; the first of each reason logged, the rest summed up at close."""
        self._inc("simhash/unchecked")
        self._unchecked[reason] += 1
        if self._unchecked[reason] == 1 and not logged:
            logger.warning(
                "Passing an item on unchecked (%(reason)s: %(detail)s); further ones are counted in "
                "simhash/unchecked and summed up when the spider closes",
                {"reason": reason, "detail": printable(detail)},
                extra={"spider": self.crawler.spider},
            )
        return item

    async def _judge(self, page: Page, item: Any) -> Match | _Seen | None:
        """The match of ``page``, or None after indexing it as a new group's canonical, or SEEN when the
        index holds it already with this content."""
        stripped = await self.learner.strip(page.host, page.text) if self.learner else Stripped(page.text, 0)
        signed = await self.signer.sign(stripped.text)
        if signed.words == 0:
            self._inc("simhash/empty_content")
            return None
        record = Record(
            id=page.id,
            url=page.url,
            fingerprint=signed.signature.fingerprint,
            hashes=signed.signature.hashes,
            host=page.host,
            retention=page.retention,
            whole=self._whole_text(page.text, stripped.text, signed.signature.hashes),
        )
        record.keep_sketch(self.layout, signed.sketch)
        assert self.index is not None
        try:
            if signed.words < self.config.min_words:
                # Too few shingles for the sketch to mean anything: the normalised tokens must match exactly.
                self._inc("simhash/short_texts")
                placement = await place_exact(
                    self.index, record, exact_digest(stripped.text), self.config.jaccard_threshold
                )
            else:
                self._inc("simhash/fingerprinted")
                furniture = self.learner.furniture if self.learner else None
                placement = await place(self.index, record, self.config.jaccard_threshold, furniture)
        except (IndexUnavailable, GroupGone):
            await self.index.release(record)
            raise
        if placement.seen is not None:
            await self.index.release(record)
            self._inc("simhash/seen")
            return SEEN
        self._count(page, placement)
        rule = self._rule(stripped.version)
        if placement.added is not None:
            self._inc("simhash/unique")
            self._pending.add(item, page.id, placement.added)
            await self._log(page, record, stripped.text, rule, placement)  # a failure is counted: the item is kept
            return None
        return await self._merged(page, record, stripped.text, rule, placement)

    def _whole_text(self, text: str, stripped: str, hashes: np.ndarray) -> WholeText:
        """How the page's whole-text verification hashes differ from ``hashes``, its stripped text's:
        same-host pairs are judged on their whole texts (judge.py)."""
        if len(stripped) == len(text):  # nothing removed: stripping only ever takes lines away
            return SAME_TEXT
        return whole_text(verification_hashes(self.signer.fingerprinter.shingle_hashes(text)), hashes)

    def _count(self, page: Page, placement: Placement) -> None:
        self._inc("simhash/candidates_checked", len(placement.rejected) + (placement.match is not None))
        if placement.rejected:
            self._inc("simhash/candidates_rejected", len(placement.rejected))
            guarded = sum(verified.guarded for verified in placement.rejected)
            if guarded:
                self._inc("simhash/boilerplate/guarded", guarded)
        if placement.unreadable:
            self._inc("simhash/unreadable_records", placement.unreadable)
        this_crawl, _ = placement.same_id
        if this_crawl:
            self._inc("simhash/id_collisions")
            self._warn_once(
                "id",
                "Several items of this crawl share an id (%(field)s = %(id)r) and differ in content: each is kept "
                "and indexed (simhash/id_collisions). Give each item an id of its own with SIMHASH_ID_FIELD",
                {"field": self.config.id_field or self.config.url_field, "id": page.id},
            )
        if placement.replaced:
            self._inc("simhash/changed_pages")

    async def _merged(self, page: Page, record: Record, text: str, rule: Rule, placement: Placement) -> Match:
        """The item joined a group: record the decision, undoing the join if the log does not take it."""
        assert placement.joined is not None and placement.match is not None and self.index is not None
        joined, verified = placement.joined, placement.match
        if not await self._log(page, record, text, rule, placement):
            await self._undo_join(joined.rid, page.id)
            raise MergeNotLogged(f"the merge of {page.id} into {verified.details.canonical_id} could not be logged")
        if joined.banded:
            self._inc("simhash/duplicates_indexed")
        if joined.size > self._largest_group:
            self._largest_group = joined.size
            self.stats.max_value("simhash/largest_group", joined.size)
        if joined.size == self.config.max_group_warn + 1:
            logger.warning(
                "%(canonical)s's group has more than %(limit)d pages; the latest joined with Jaccard %(jaccard).2f "
                "on %(chars)s characters. Identical or near-empty texts across unrelated pages mean an empty or "
                "failed extraction field (check SIMHASH_FIELDS); a page republished or edited many times is a "
                "real family (raise SIMHASH_MAX_GROUP_WARN)",
                {"canonical": printable(verified.details.canonical_id), "limit": self.config.max_group_warn,
                 "jaccard": verified.jaccard, "chars": f"{len(text):,}"},
                extra={"spider": self.crawler.spider},
            )
        return Match(
            canonical_id=verified.details.canonical_id,
            matched_id=verified.details.id,
            distance=(verified.candidate.fingerprint ^ record.fingerprint).bit_count(),
            jaccard=verified.jaccard,
            fingerprint=record.fingerprint,
        )

    async def _undo_join(self, rid: int, page_id: str) -> None:
        """A join whose merge record was refused leaves the group; refused too (a full Redis refuses
        every write), it is tried again with each batch of confirmations and at close."""
        assert self.index is not None
        try:
            await self.index.remove(rid)
        except IndexUnavailable as exc:
            self._unjoined[rid] = page_id
            self._warn_once(
                "undo join",
                "Could not undo the join of %(id)s, whose merge record the log refused (%(error)s): it is undone "
                "when the index takes writes again; joins left to undo are said at close",
                {"id": printable(page_id), "error": exc},
            )

    async def _undo_joins_left(self, closing: bool = False) -> None:
        """Try the refused undos again; at close, one error names the pages still joined unrecorded."""
        assert self.index is not None
        for rid, page_id in list(self._unjoined.items()):
            try:
                await self.index.remove(rid)
            except IndexUnavailable:
                continue
            del self._unjoined[rid]
            logger.info("SimHash: the join of %(id)s, which has no merge record, is undone",
                        {"id": printable(page_id)}, extra={"spider": self.crawler.spider})
        if closing and self._unjoined:
            logger.error(
                "SimHash: %(count)d pages are members of a group without a merge record, and the index refused "
                "to undo it: erase them (scrapy simhash-erase ID) once the index takes writes again: %(ids)s",
                {"count": len(self._unjoined), "ids": ", ".join(map(printable, self._unjoined.values()))},
                extra={"spider": self.crawler.spider},
            )

    def _rule(self, boilerplate_version: int) -> Rule:
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

    async def _log(self, page: Page, record: Record, text: str, rule: Rule, placement: Placement) -> bool:
        """Record an item's decisions (its closest rejected candidates, then its merge) in one write.
        False when the merge log did not take them; a review-log failure is only counted."""
        if self.merge_log is None and self.review_log is None:
            return True
        decisions = [("rejected", v) for v in sorted(placement.rejected, key=lambda v: -v.jaccard)]
        decisions = decisions[:LOGGED_REJECTIONS]
        if placement.match is not None:
            decisions.append(("merged", placement.match))
        if not decisions:
            return True
        records = [self._record(decision, verified, page, record, rule) for decision, verified in decisions]
        if not await self._write(self.merge_log, records):
            return False  # the decision does not stand: nothing to review
        sampled = [
            review_record(r, text, page.text, whole=verified.whole_texts)
            for r, (_, verified) in zip(records, decisions)
            if self._sampled_for_review(page.id, r["jaccard"])
        ]
        if sampled and await self._write(self.review_log, sampled):
            self._inc("simhash/review_sampled", len(sampled))
        return True

    def _record(self, decision: str, verified: Verified, page: Page, record: Record, rule: Rule) -> dict[str, Any]:
        details = verified.details
        return merge_record(
            decision=decision,
            canonical_id=details.canonical_id,
            canonical_url=details.canonical_url,
            matched_id=details.id,
            matched_url=details.url,
            matched_fingerprint=verified.candidate.fingerprint,
            duplicate_id=page.id,
            duplicate_url=page.url,
            duplicate_fingerprint=record.fingerprint,
            distance=(verified.candidate.fingerprint ^ record.fingerprint).bit_count(),
            jaccard=verified.jaccard,
            retention=page.retention,
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
            if _permanent_log_fault(exc):  # no later write can succeed either: said once, and the crawl stops
                kind = "merge" if log is self.merge_log else "review"
                uri = self.config.merge_log if kind == "merge" else self.config.review_log
                assert uri is not None
                self._cannot_open(_log_fault(kind, uri, "cannot be written", exc.__cause__ or exc))
            kind, consequence = (
                ("merge", "a duplicate whose merge cannot be recorded is kept (simhash/unchecked)")
                if log is self.merge_log
                else ("review", "the decisions stand, the review sample lacks them")
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

    def _annotate(self, adapter: ItemAdapter, match: Match) -> None:
        fields = {
            self.config.annotation_field: match.canonical_id,
            DISTANCE_FIELD: match.distance,
            JACCARD_FIELD: round(match.jaccard, 4),
            FINGERPRINT_FIELD: f"{match.fingerprint:016x}",
        }
        missing = [name for name in fields if not _can_set(adapter, name)]
        if missing:
            problem = f"declare the fields {missing}"
        else:
            try:
                for name, value in fields.items():
                    adapter[name] = value
            except (AttributeError, TypeError) as exc:  # a frozen dataclass or attrs class, a read-only mapping
                problem = f"their fields cannot be set ({type(exc).__name__}: {exc})"
            else:
                self._inc("simhash/annotated")
                return
        self._inc("simhash/annotation_errors")
        self._warn_once(
            "annotate",
            "Cannot annotate %(type)s items: %(problem)s; duplicates pass on unmarked (simhash/annotation_errors)",
            {"type": type(adapter.item).__name__, "problem": problem},
        )

    def _warn_once(self, key: str, message: str, args: dict[str, Any]) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, args, extra={"spider": self.crawler.spider})

    # -- confirmations and expiry -------------------------------------------------------------------

    def _item_scraped(self, item: Any) -> None:
        """The item went out of the last pipeline: delivered, unless a feed is still to store it
        (delivery.py). A delivered page's record is no longer pending: a crash from now on keeps it as
        a canonical."""
        rid = self._settle(item)
        delivery = Delivery.DELIVERED if self._deliveries is None else self._deliveries.taken(item, rid)
        if rid is None:
            return
        if delivery is Delivery.DELIVERED:
            self._send_soon(self._confirm, [rid])
        elif delivery is Delivery.AWAITING_FEED:
            self._send_soon(self._mark_scraped, [rid])

    def _feed_slot_closed(self, slot: Any) -> None:
        """A stored batch's pages count at once, not after CONFIRM_DELAY: a crawl killed meanwhile would
        have its rerun export them again (docs/reliability.md "Feeds of a killed crawl")."""
        assert self._deliveries is not None
        rids = self._deliveries.stored(slot)
        if rids:
            self._confirm.extend(rids)
            self._confirming = asyncio.ensure_future(self._flush_confirmations())

    def _send_soon(self, queue: list[int], rids: list[int]) -> None:
        """Confirmations and scraped marks are sent in batches, or after CONFIRM_DELAY."""
        if not rids:
            return
        queue.extend(rids)
        if len(self._confirm) + len(self._mark_scraped) >= CONFIRM_BATCH:
            self._confirming = asyncio.ensure_future(self._flush_confirmations())
        elif self._confirming is None or self._confirming.done():
            self._confirming = asyncio.ensure_future(self._confirm_later())

    def _item_gone(self, item: Any) -> None:
        """Dropped or failed after this pipeline: its record stays pending, so a rerun keeps the page."""
        self._settle(item)

    def _settle(self, item: Any) -> int | None:
        """The pending rid of the item a signal names, no longer waited for; None if there is none."""
        if not self._pending or not is_item(item):
            return None
        return self._pending.take(item, lambda: self._page_id(ItemAdapter(item)))

    async def _confirm_later(self) -> None:
        await asyncio.sleep(CONFIRM_DELAY)
        await self._flush_confirmations()

    async def _flush_confirmations(self, closing: bool = False) -> None:
        marks, self._mark_scraped = self._mark_scraped, []
        rids, self._confirm = self._confirm, []
        if self.index is None:
            return
        try:
            if marks:  # before the confirmations: a mark arriving after its record's confirmation does nothing
                await self.index.scraped(marks)
            if rids:
                await self.index.confirm(rids)
        except IndexUnavailable as exc:  # still pending: a rerun keeps these pages again rather than lose them
            self._warn_once(
                "confirm",
                "Could not confirm %(count)d delivered pages (%(error)s): their records stay pending, and the "
                "next crawl keeps those pages again; further failures to confirm are not repeated",
                {"count": len(rids) + len(marks), "error": exc},
            )
        if self._unjoined:
            await self._undo_joins_left(closing)

    async def _keep_alive_periodically(self) -> None:
        """Renew the index session's lease: while it holds, another crawl with the same page in flight
        waits for this one's item instead of taking its pending record for a crashed crawl's."""
        assert self.index is not None
        while True:
            await asyncio.sleep(self.config.session_lease / 3)
            try:
                await self.index.keep_alive()
            except IndexUnavailable:
                pass  # reported by the guard

    async def _expire_periodically(self) -> None:
        """Retention at open, then every SIMHASH_EXPIRE_INTERVAL seconds (0: at open only)."""
        while True:
            await self._expire()
            if self.config.expire_interval <= 0:
                return
            await asyncio.sleep(self.config.expire_interval)

    async def _expire(self) -> None:
        """Retention: groups past their TTL leave the index, their log records leave the logs."""
        assert self.index is not None
        try:
            self._inc("simhash/expired", await self.index.expire())
        except IndexUnavailable as exc:
            if isinstance(exc.error, IndexOpenError):  # the server turned to evicting keys: stop writing to it
                self._cannot_open(str(exc))
                return
        classes = self.config.retention
        if not classes or all(ttl is None for ttl in classes.values()):
            return
        for uri, kind in ((self.config.merge_log, "merges"), (self.config.review_log, "review")):
            if not uri:
                continue
            try:
                rewrite = await expire_log(uri, classes, time.time(), stream_key(self.config, kind))
            except Exception as exc:  # the log keeps its records until the next run: said, not fatal
                self._warn_once(f"expire {kind}", "Could not apply retention to the %(kind)s log: %(error)s",
                                {"kind": kind, "error": f"{type(exc).__name__}: {exc}"})
                continue
            self._inc("simhash/expired_log_records", rewrite.removed)


class _PendingItems:
    """The canonicals this crawl's items became, until Scrapy reports each item scraped, dropped or
    failed. A signal carries the object judged here, perhaps with its id or URL changed by a later
    pipeline (found by identity: held here, it cannot be another object's), or another object, the
    last pipeline's output or the spider's item (found by its page id). Oldest first, either way."""

    def __init__(self) -> None:
        self._by_item: dict[int, list[tuple[Any, str, int]]] = {}
        self._by_page: dict[str, list[tuple[Any, str, int]]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_page)

    def add(self, item: Any, page_id: str, rid: int) -> None:
        entry = (item, page_id, rid)
        self._by_item.setdefault(id(item), []).append(entry)
        self._by_page.setdefault(page_id, []).append(entry)

    def take(self, item: Any, page_id: Callable[[], str]) -> int | None:
        """The rid of ``item``'s canonical, forgotten; ``page_id`` reads its id when the object is
        not one judged here. None if there is none, or its id can no longer be read."""
        entries = self._by_item.get(id(item))
        if entries is None:
            try:
                entries = self._by_page.get(page_id())
            except Exception:  # a later pipeline made the item unreadable: its record stays pending (safe)
                return None
            if not entries:
                return None
        judged, page, rid = entry = entries[0]
        _forget(self._by_item, id(judged), entry)
        _forget(self._by_page, page, entry)
        return rid


def _forget(entries: dict[Any, list[tuple[Any, str, int]]], key: Any, entry: tuple[Any, str, int]) -> None:
    listed = entries[key]
    del listed[next(n for n, other in enumerate(listed) if other is entry)]
    if not listed:
        del entries[key]


class MergeNotLogged(Exception):
    """A duplicate's merge could not be recorded: it is kept, never dropped unrecorded."""


def _empty(value: Any) -> bool:
    """No value in a field: absent, None, or an empty string or list (any other value counts: its
    reading says what is wrong with it)."""
    return value is None or isinstance(value, (str, bytes, list, tuple)) and len(value) == 0


#: Why a log file cannot be written that no later write cures: permissions, a read-only file
#: system, a directory gone or a file where a directory should be. A full disk or an I/O error may pass.
_PERMANENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR})


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


def _truthy(value: Any) -> bool:
    """A spider argument read as a flag, as Scrapy reads a boolean setting (``-a simhash_reset=1``)."""
    return str(value).strip().lower() in ("1", "true", "yes", "on") if value is not None else False


def _can_set(adapter: ItemAdapter, name: str) -> bool:
    """Whether the item takes field ``name``: any key of a dict, a declared field of anything else."""
    return isinstance(adapter.item, dict) or name in adapter.field_names()


def _refuse(crawler: Crawler, reason: str) -> None:
    """A setting the pipeline cannot work with: one error line, and the spider closes as soon as it opens."""
    logger.error(
        "SimHash pipeline: %(reason)s; spider %(spider)r will close", {"reason": reason, "spider": crawler.spider.name}
    )

    def close(spider: Any) -> None:
        asyncio.ensure_future(crawler.engine.close_spider_async(reason="simhash_settings_error"))

    crawler.signals.connect(close, signal=signals.spider_opened, weak=False)
    raise NotConfigured
