"""The item pipeline: drops or annotates near-duplicate items and records every merge.

Enable with ``ITEM_PIPELINES = {"scrapy_simhash.pipelines.SimhashPipeline": 300}``; README "Usage"
lists the settings, stats and the merge-log format.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item
from scrapy.exceptions import DropItem, NotConfigured

from scrapy_simhash.extensions import NO_BOILERPLATE, BoilerplateLearner
from scrapy_simhash.extract import BadFieldError, exact_digest, extract_text, field_value, host_of
from scrapy_simhash.fingerprint import Fingerprinter, RecordSignature, Shingling, jaccard_hashes
from scrapy_simhash.guard import GuardedIndex, IndexUnavailable
from scrapy_simhash.index import Record, open_index
from scrapy_simhash.index.retention import DEFAULT_RETENTION
from scrapy_simhash.layout import Layout, make_layout
from scrapy_simhash.mergelog import MergeLog, MergeLogError, Rule, fingerprint_hex, merge_record, open_merge_log
from scrapy_simhash.settings import MAX_RETRY_DELAY, SimhashSettings, read

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["SimhashPipeline"]

logger = logging.getLogger(__name__)

DISTANCE_FIELD = "simhash_distance"
JACCARD_FIELD = "jaccard"
FINGERPRINT_FIELD = "fingerprint"


@dataclass(frozen=True)
class Page:
    """What the pipeline judges of an item: plain values, taken from the item once."""

    id: str
    url: str
    host: str  # the boilerplate learner's key: "" without the learner, unless SIMHASH_HOST_FIELD names it
    retention: str
    text: str


@dataclass(frozen=True)
class Match:
    """The canonical record an item duplicates, and the evidence."""

    canonical_id: str
    canonical_fingerprint: int
    fingerprint: int
    distance: int
    jaccard: float


def decision_parameters(config: SimhashSettings) -> tuple[int, Layout]:
    """SIMHASH_MAX_DISTANCE and the index layout: calibrated for "auto", else built from the settings."""
    if config.max_distance is not None:
        layout = make_layout(
            config.max_distance,
            kind=config.layout,
            bands=config.bands,
            multiprobe=config.multiprobe,
            tables=config.layout_tables,
            bits_per_table=config.layout_bits,
        )
        return config.max_distance, layout
    try:  # imported here so that an integer SIMHASH_MAX_DISTANCE works without the calibration module
        from scrapy_simhash.calibration import calibrate
    except ImportError as exc:
        raise NotConfigured(
            f"SIMHASH_MAX_DISTANCE='auto' needs scrapy_simhash.calibration ({exc}); set an integer instead"
        ) from exc
    calibration = calibrate(config.jaccard_threshold, config.target_recall)
    return calibration.max_distance, calibration.layout


class SimhashPipeline:
    """Fingerprints each item's content, finds its near-duplicates in the index and verifies them.

    An item the pipeline cannot judge (a field that is not text, an index outage) is passed on and
    counted as ``simhash/unchecked``, or fails the crawl with ``SIMHASH_ON_INDEX_ERROR = "fail"``.
    """

    def __init__(self, crawler: Crawler) -> None:
        assert crawler.spider is not None
        config = read(crawler.settings, crawler.spider.name)
        if not config.enabled:
            raise NotConfigured("SIMHASH_ENABLED is off")
        self.config = config
        self.crawler = crawler
        self.stats = crawler.stats
        # Bound once: each attribute access on Scrapy's StatsCollector runs its __getattribute__ hook.
        self._inc = crawler.stats.inc_value
        self.spider_name = crawler.spider.name
        self.fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
        self.max_distance, self.layout = decision_parameters(config)
        self.retention_classes = frozenset(config.retention or DEFAULT_RETENTION)
        self.learner = crawler.get_extension(BoilerplateLearner)
        self.index: GuardedIndex | None = None
        self.merge_log: MergeLog | None = None
        self.review_log: MergeLog | None = None
        self._expiry: asyncio.Task[None] | None = None
        self._closing: asyncio.Future[None] | None = None
        self._annotation_warned = False
        self._groups: Counter[str] = Counter()
        self._largest_group = 0
        self._rules: dict[int, Rule] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashPipeline:
        return cls(crawler)

    async def open_spider(self) -> None:
        config = self.config
        index = open_index(
            config.index_url,
            layout=self.layout,
            retention=config.retention,
            spider=self.spider_name,
            key_prefix=config.key_prefix,
        )
        self.index = GuardedIndex(
            index,
            retries=config.index_retries,
            delay=config.index_retry_delay,
            max_delay=MAX_RETRY_DELAY,
            stats=self.stats,
        )
        prefix = config.key_prefix.replace("{spider}", self.spider_name)
        if self.learner is not None:
            self.learner.bind(self.index, self.fingerprinter, prefix)
        stream = f"{prefix}:"
        if config.merge_log:
            self.merge_log = open_merge_log(config.merge_log, stream + "merges")
        if config.review_log:
            self.review_log = open_merge_log(config.review_log, stream + "review")
        await self._expire()
        if config.expire_interval > 0:
            self._expiry = asyncio.ensure_future(self._expire_periodically())
        logger.info(
            "SimHash index %(url)s, max distance %(distance)d, %(layout)r, Jaccard >= %(jaccard).2f, action %(action)s",
            {
                "url": config.index_url.replace("{spider}", self.spider_name),
                "distance": self.max_distance,
                "layout": self.layout,
                "jaccard": config.jaccard_threshold,
                "action": config.action,
            },
            extra={"spider": self.crawler.spider},
        )

    async def close_spider(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        if self.learner is not None:
            await self.learner.close()
        for log in (self.merge_log, self.review_log):
            if log is not None:
                await log.close()
        if self.index is not None:
            await self.index.close()

    async def process_item(self, item: Any) -> Any:
        self._inc("simhash/items_seen")
        try:
            if not is_item(item):
                raise BadFieldError(f"{type(item).__name__} is not an item type itemadapter supports")
            adapter = ItemAdapter(item)
            page = self._page(adapter)
        except BadFieldError as exc:
            self._inc("simhash/bad_fields")
            return self._unchecked(item, f"cannot read the item: {exc}")
        try:
            match = await self._judge(page)
        except IndexUnavailable as exc:
            if self.config.on_index_error == "fail":
                # Not awaited: closing waits for in-flight items, this one included.
                closing = self.crawler.engine.close_spider_async(reason="simhash_index_error")
                self._closing = asyncio.ensure_future(closing)
                raise
            return self._unchecked(item, str(exc))
        except MergeLogError as exc:
            return self._unchecked(item, str(exc))
        except Exception:  # a bug of ours must not cost the user the item: pass it on, loudly
            self._inc("simhash/internal_errors")
            logger.exception("Could not judge an item; passing it on unchecked", extra={"spider": self.crawler.spider})
            return self._unchecked(item, "internal error (logged above)")
        if match is None:
            return item
        self._inc("simhash/duplicates")
        if self.config.action == "drop":
            self._inc("simhash/dropped")
            raise DropItem(
                f"near-duplicate of {match.canonical_id} (distance {match.distance}, Jaccard {match.jaccard:.3f})"
            )
        self._inc("simhash/annotated")
        self._annotate(adapter, match)
        return item

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
        return Page(
            id=field_value(adapter, config.id_field or config.url_field) or f"digest:{exact_digest(text)}",
            url=url,
            host=field_value(adapter, config.host_field) if config.host_field else self._host_of(url),
            retention=retention,
            text=text,
        )

    def _host_of(self, url: str) -> str:
        """The URL's host, which only the boilerplate learner reads (parsing every URL cost ~1%)."""
        return host_of(url) if self.learner is not None else ""

    def _unchecked(self, item: Any, reason: str) -> Any:
        self._inc("simhash/unchecked")
        logger.warning(
            "Passing an item on unchecked: %(reason)s", {"reason": reason}, extra={"spider": self.crawler.spider}
        )
        return item

    async def _judge(self, page: Page) -> Match | None:
        """The canonical record ``page`` duplicates, or None after indexing it as a new canonical."""
        shingling = self.fingerprinter.shingling(page.text)  # the text's one tokenisation
        if shingling.words == 0:
            self._inc("simhash/empty_content")
            return None
        if shingling.words < self.config.min_words:
            return await self._judge_exact(page, shingling)
        boilerplate = NO_BOILERPLATE
        if self.learner is not None:
            boilerplate = await self.learner.boilerplate_for(page.host, page.text)
        signature = self.fingerprinter.record_signature(shingling, boilerplate.hashes)
        if signature.fingerprint == 0:  # nothing left beside boilerplate: 0 would match every empty page
            self._inc("simhash/empty_content")
            return None
        self._inc("simhash/fingerprinted")
        record = self._record(page, signature)
        assert self.index is not None
        # Retries pass the same record: the index recognises a write its own timed-out attempt made.
        candidates = await self.index.call("check_and_add", record, self.max_distance)
        rule = self._rule(boilerplate.version)
        rejected: list[Match] = []
        for candidate in candidates:
            self._inc("simhash/candidates_checked")
            similarity = jaccard_hashes(record.shingles, candidate.shingles)
            match = Match(
                candidate.record_id, candidate.fingerprint, record.fingerprint, candidate.distance, similarity
            )
            if similarity >= self.config.jaccard_threshold:
                await self._merge(page, match, rule, rejected)
                return match
            self._inc("simhash/false_positives")
            rejected.append(match)
        if rejected:
            await self._log(page, rule, rejected)  # a failure is counted: the item is kept anyway
            await self.index.call("add", record)
        self._inc("simhash/unique")
        return None

    async def _judge_exact(self, page: Page, shingling: Shingling) -> Match | None:
        """Short texts have too few shingles for SimHash to be meaningful: match them exactly instead."""
        self._inc("simhash/short_texts")
        record = self._record(page, self.fingerprinter.record_signature(shingling))
        assert self.index is not None
        canonical_id = await self.index.call("check_and_add_exact", record, exact_digest(page.text))
        if canonical_id is None:
            self._inc("simhash/unique")
            return None
        self._inc("simhash/exact_matches")
        # Same normalised text, no boilerplate excluded: the canonical has the very same fingerprint.
        match = Match(canonical_id, record.fingerprint, record.fingerprint, 0, 1.0)
        await self._merge(page, match, self._rule(NO_BOILERPLATE.version), [])
        return match

    def _record(self, page: Page, signature: RecordSignature) -> Record:
        return Record(
            id=page.id,
            fingerprint=signature.fingerprint,
            url=page.url,
            first_seen=time.time(),
            retention=page.retention,
            shingles=signature.verification,
        )

    def _rule(self, boilerplate_version: int) -> Rule:
        """The rule records name, one object per boilerplate version (it caches its own serialisation)."""
        rule = self._rules.get(boilerplate_version)
        if rule is None:
            config = self.config
            rule = self._rules[boilerplate_version] = Rule(
                max_distance=self.max_distance,
                jaccard_threshold=config.jaccard_threshold,
                weighting=config.weighting,
                shingle_width=config.shingle_width,
                boilerplate_version=boilerplate_version,
                layout=repr(self.layout),
            )
        return rule

    async def _merge(self, page: Page, match: Match, rule: Rule, rejected: list[Match]) -> None:
        """Log the merge first (the audit trail must not depend on the index), then merge in the index.

        A merge the log did not take is not made: the item is kept (unchecked), never dropped unrecorded.
        """
        if not await self._log(page, rule, rejected, merged=match):
            raise MergeLogError(f"the merge of {page.id} into {match.canonical_id} could not be logged")
        group = self._groups[match.canonical_id] = self._groups[match.canonical_id] + 1
        if group > self._largest_group:
            self._largest_group = group
            self.stats.max_value("simhash/largest_group", group)
        if group == self.config.max_group_warn + 1:
            logger.warning(
                "%(canonical)s has collected more than %(limit)d duplicates: probably an empty or failed"
                " extraction field (check SIMHASH_FIELDS), not real duplication",
                {"canonical": match.canonical_id, "limit": self.config.max_group_warn},
                extra={"spider": self.crawler.spider},
            )
        assert self.index is not None
        try:
            await self.index.call("merge", match.canonical_id, page.url, time.time())
        except IndexUnavailable as exc:
            logger.warning(
                "%(canonical)s did not gain %(url)s in the index (the merge log has it): %(error)s",
                {"canonical": match.canonical_id, "url": page.url, "error": exc},
                extra={"spider": self.crawler.spider},
            )

    async def _log(self, page: Page, rule: Rule, rejected: list[Match], merged: Match | None = None) -> bool:
        """Record an item's decisions: its rejected candidates, then its merge if any, in one write (one
        flush, one round trip). False when the merge log did not take them (a review-log failure is
        only counted)."""
        if self.merge_log is None and self.review_log is None:
            return True
        decisions = [("rejected", match) for match in rejected]
        if merged is not None:
            decisions.append(("merged", merged))
        records = [
            merge_record(
                decision=decision,
                canonical_id=match.canonical_id,
                canonical_url=await self._url_of(match.canonical_id),
                duplicate_id=page.id,
                duplicate_url=page.url,
                canonical_fingerprint=match.canonical_fingerprint,
                duplicate_fingerprint=match.fingerprint,
                distance=match.distance,
                jaccard=match.jaccard,
                rule=rule,
            )
            for decision, match in decisions
        ]
        written = await self._write(self.merge_log, records)
        sampled = [record for record in records if self._sampled_for_review(page.id, record["jaccard"])]
        if sampled:
            self._inc("simhash/review_sampled", len(sampled))
            await self._write(self.review_log, sampled)
        return written

    async def _url_of(self, record_id: str) -> str:
        if self.config.id_field is None:  # ids are URLs
            return record_id
        assert self.index is not None
        try:
            record = await self.index.call("get", record_id)
        except IndexUnavailable:
            return ""
        return record.url if record is not None else ""

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
        except Exception:  # a lost audit record must be loud, not fatal to the crawl
            self._inc("simhash/merge_log_errors", len(records))
            logger.error(
                "Could not write merge-log records %r", records, exc_info=True, extra={"spider": self.crawler.spider}
            )
            return False
        return True

    def _annotate(self, adapter: ItemAdapter, match: Match) -> None:
        fields = {
            self.config.annotation_field: match.canonical_id,
            DISTANCE_FIELD: match.distance,
            JACCARD_FIELD: round(match.jaccard, 4),
            FINGERPRINT_FIELD: fingerprint_hex(match.fingerprint),
        }
        try:
            for name, value in fields.items():
                adapter[name] = value
        except KeyError as exc:  # a scrapy.Item without the fields declared
            self._inc("simhash/annotation_errors")
            if self._annotation_warned:
                return
            self._annotation_warned = True
            logger.warning(
                "Cannot annotate %(type)s items: declare the fields %(fields)s (%(error)s)",
                {"type": type(adapter.item).__name__, "fields": sorted(fields), "error": exc},
                extra={"spider": self.crawler.spider},
            )

    async def _expire(self) -> None:
        assert self.index is not None
        try:
            expired = await self.index.call("expire")
        except IndexUnavailable as exc:
            logger.warning("Index expiry failed: %s", exc, extra={"spider": self.crawler.spider})
            return
        self._inc("simhash/expired", expired)

    async def _expire_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.expire_interval)
            await self._expire()
