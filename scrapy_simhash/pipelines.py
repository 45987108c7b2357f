"""The item pipeline: drops or annotates near-duplicate items and records every merge.

Enable it with ``ADDONS = {"scrapy_simhash.Addon": 0}`` (or ``ITEM_PIPELINES``); README.md lists
the settings, the stats and the merge-log format.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from itemadapter import ItemAdapter, is_item
from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured

from scrapy_simhash.boilerplate import BoilerplateLearner, Stripped
from scrapy_simhash.configured import configured_layout, configured_logs
from scrapy_simhash.extract import BadFieldError, exact_digest
from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.guard import GuardedIndex, IndexUnavailable
from scrapy_simhash.index import GroupGone, IndexCorrupt, Record
from scrapy_simhash.judge import InFlightElsewhere, Placement, place, place_exact
from scrapy_simhash.mergelog import Rule
from scrapy_simhash.mergelog.writer import DecisionLogs, LogUnusable, MergeNotLogged
from scrapy_simhash.page_reader import Page, PageReader
from scrapy_simhash.printable import printable
from scrapy_simhash.redis_url import mask_url
from scrapy_simhash.settings import SettingsError, read, unknown_settings
from scrapy_simhash.signer import Signer
from scrapy_simhash.upkeep import IndexUpkeep
from scrapy_simhash.whole_text import SAME_TEXT, WholeText, whole_text

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["SimhashPipeline"]

logger = logging.getLogger(__name__)

DISTANCE_FIELD = "simhash_distance"
JACCARD_FIELD = "jaccard"
FINGERPRINT_FIELD = "fingerprint"


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
    Its records are written by :class:`DecisionLogs`; the index is opened, kept and released by
    :class:`IndexUpkeep`.
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
        self.reader = PageReader(crawler, config)
        self.learner = BoilerplateLearner(crawler, config) if config.boilerplate else None
        self.index: GuardedIndex | None = None
        self.logs = DecisionLogs(crawler, config, configured_logs(config), self.layout, self._warn_once,
                                 self._cannot_open)
        self.upkeep = IndexUpkeep(crawler, config, self.logs, lambda item: self.reader.page_id(ItemAdapter(item)),
                                  self._warn_once, self._cannot_open)
        self._closing: asyncio.Future[None] | None = None
        self._warned: set[str] = set()
        self._unchecked: Counter[str] = Counter()
        self._largest_group = 0
        self._usable = True

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashPipeline:
        return cls(crawler)

    # -- lifecycle --------------------------------------------------------------------------------

    async def open_spider(self) -> None:
        config = self.config
        self.upkeep.watch_feeds()
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
        opened = await self.upkeep.open_index()
        self.index = self.upkeep.index
        if not opened:
            return
        if self.learner is not None:
            await self.learner.open(self.index)
        try:
            await self.logs.open()
        except LogUnusable as exc:
            self._cannot_open(str(exc))
            return
        self.upkeep.start()

    def _cannot_open(self, reason: str) -> None:
        """An index or log that cannot be used at all (a permanent fault, whatever
        SIMHASH_ON_INDEX_ERROR says): one error line naming it and what to do, and the crawl closes
        cleanly; items that still arrive pass on unchecked."""
        if self._usable:
            logger.error("%(reason)s; closing the spider", {"reason": reason}, extra={"spider": self.crawler.spider})
        self._usable = False
        self._close("simhash_index_error")

    async def close_spider(self) -> None:
        try:
            if self.learner is not None:
                await self.learner.close()
            await self.upkeep.flush_confirmations(closing=self.upkeep.deliveries is None)
            self.reader.close()
            await self.logs.close()
            if self._unchecked:
                logger.warning(
                    "SimHash passed %(count)d items on unchecked: %(reasons)s",
                    {"count": sum(self._unchecked.values()), "reasons": dict(self._unchecked)},
                    extra={"spider": self.crawler.spider},
                )
        finally:
            if self.upkeep.deliveries is None:
                await self.upkeep.release()

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
            self.reader.check_fields(adapter)
            page = self.reader.page(adapter)
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
                self._cannot_open(self.upkeep.corrupt_message(exc.error))
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
            raise self._drop(_duplicate_reason(page.id, match))
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
        signed = await self.signer.sign(stripped.text, stripped.shingling)
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
            whole=self._whole_text(page.text, stripped, signed.signature.hashes),
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
        rule = self.logs.rule(stripped.version)
        if placement.added is not None:
            self._inc("simhash/unique")
            self.upkeep.pending.add(item, page.id, placement.added)
            await self.logs.log(record, stripped.text, page.text, rule, placement)  # refused: counted, item kept
            return None
        return await self._merged(page, record, stripped.text, rule, placement)

    def _whole_text(self, text: str, stripped: Stripped, hashes: np.ndarray) -> WholeText:
        """How the page's whole-text verification hashes differ from ``hashes``, its stripped text's:
        same-host pairs are judged on their whole texts (judge.py)."""
        if len(stripped.text) == len(text):  # nothing removed: stripping only ever takes lines away
            return SAME_TEXT
        return whole_text(self.signer.fingerprinter, text, stripped.text, hashes, stripped.removed)

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
        if not await self.logs.log(record, text, page.text, rule, placement):
            await self.upkeep.undo_join(joined.rid, page.id)
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


def _duplicate_reason(page_id: str, match: Match) -> str:
    """The duplicate, its group and the evidence; the record matched is named only when it is not the
    canonical (about half the drops of a crawl name one URL twice otherwise)."""
    via = f"matched {printable(match.matched_id)}, " if match.matched_id != match.canonical_id else ""
    return (f"near-duplicate {printable(page_id)} of {printable(match.canonical_id)} ({via}distance {match.distance},"
            f" Jaccard {match.jaccard:.3f})")


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
