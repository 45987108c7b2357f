"""Learns, per host, which shingles are site furniture (navigation, sidebars, footers) to leave out of fingerprints.

Enabled in ``EXTENSIONS``; the pipeline asks it for a host's set. README "Boilerplate" explains the
warm-up design: a host's first pages wait until its set is learned, so every page of a host is
fingerprinted with the same set.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from scrapy_simhash.fingerprint import jaccard_hashes, shingles
from scrapy_simhash.guard import IndexUnavailable
from scrapy_simhash.settings import data_file, read

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_simhash.fingerprint import Fingerprinter
    from scrapy_simhash.guard import GuardedIndex

__all__ = ["NO_BOILERPLATE", "Boilerplate", "BoilerplateLearner", "learn_boilerplate", "summary_path"]

logger = logging.getLogger(__name__)

# How often held pages are checked for a warm-up that can no longer complete.
TICK_SECONDS = 0.5
# How many of the most widespread boilerplate shingles are written out as text for people to read.
TOP_SHINGLES = 50
# Learned sets kept in memory (~16 kB each), least recently used dropped first: a dropped set is
# loaded from the index again when its host comes back, so a broad crawl's memory stays flat.
CACHED_SETS = 1000


# A shingle on at least this share of the sample is furniture whatever else is true.
TEMPLATE_SHARE = 0.5
# Sample pages this similar once the template is gone are copies of one document (its releases,
# a page reachable under two URLs): they count as one page, or their text would pass for furniture.
SAME_DOCUMENT_JACCARD = 0.5


def learn_boilerplate(pages: list[np.ndarray], min_share: float) -> tuple[np.ndarray, np.ndarray]:
    """The boilerplate of a page sample (one sorted distinct hash array per page), with page counts.

    A shingle is boilerplate when it is on more than ``min_share`` of the sample's distinct
    documents and on at least two, or on ``TEMPLATE_SHARE`` of its pages. Documents are the pages
    grouped by Jaccard >= ``SAME_DOCUMENT_JACCARD`` once the template shingles are left out.
    """
    hashes, counts = np.unique(np.concatenate(pages), return_counts=True)
    template = hashes[counts >= TEMPLATE_SHARE * len(pages)]
    documents: list[np.ndarray] = []  # per document: the union of its pages' non-template shingles
    for page in pages:
        content = np.setdiff1d(page, template, assume_unique=True)
        for i, document in enumerate(documents):
            if jaccard_hashes(content, document) >= SAME_DOCUMENT_JACCARD:
                documents[i] = np.union1d(document, content)
                break
        else:
            documents.append(content)
    spread, per_document = np.unique(np.concatenate(documents), return_counts=True)
    keep = (per_document > min_share * len(documents)) & (per_document >= 2)
    furniture = np.union1d(template, spread[keep])
    return furniture, counts[np.isin(hashes, furniture, assume_unique=True)]


class Boilerplate(NamedTuple):
    """A host's boilerplate set: sorted distinct 64-bit shingle hashes and the version that names it.

    Version 0 is the empty set of a host that had too few pages to learn from.
    """

    version: int
    hashes: np.ndarray


NO_BOILERPLATE = Boilerplate(0, np.empty(0, dtype=np.uint64))


@dataclass
class _Warmup:
    """The pages of a host held back while its set is learned: bounded by SIMHASH_BOILERPLATE_MIN_PAGES."""

    ready: asyncio.Future[Boilerplate]
    pages: list[np.ndarray] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    last_page: float = field(default_factory=time.monotonic)


def summary_path(key_prefix: str, host: str) -> str:
    """Where the readable summary of a host's learned set is written (for ``scrapy simhash-boilerplate``)."""
    safe = re.sub(r"[^\w.-]+", "_", f"{key_prefix}/{host or '_'}")
    return data_file(f"boilerplate/{safe}.json")


class BoilerplateLearner:
    """Per-host boilerplate sets: loaded from the index, or learned from a host's first pages.

    The sample is a host's first ``SIMHASH_BOILERPLATE_MIN_PAGES`` pages (see :func:`learn_boilerplate`
    for the rule). Memory per host is one array of shingle hashes per held page, freed once the set
    is learned; learned sets are cached (``CACHED_SETS``) and reloaded from the index when dropped.
    """

    def __init__(self, crawler: Crawler) -> None:
        config = read(crawler.settings, spider_name="")  # only the learner's settings are used
        self.min_share = config.boilerplate_min_share
        self.min_pages = config.boilerplate_min_pages
        self.max_held = config.boilerplate_max_held
        self.warmup_timeout = config.boilerplate_warmup_timeout
        self.key_prefix = ""  # of the pipeline's index, given by bind()
        self.crawler = crawler
        self.stats = crawler.stats
        self.store: GuardedIndex | None = None
        self.fingerprinter: Fingerprinter | None = None
        self.held = 0
        self._sets: OrderedDict[str, Boilerplate] = OrderedDict()
        self._without: set[str] = set()  # hosts with no set for this crawl (never dropped: not stored)
        self._warmups: dict[str, _Warmup] = {}
        self._loads: dict[str, asyncio.Task[None]] = {}
        self._saves: set[asyncio.Task[None]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._stalled_ticks = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BoilerplateLearner:
        return cls(crawler)

    def bind(self, store: GuardedIndex, fingerprinter: Fingerprinter, key_prefix: str) -> None:
        """Called by the pipeline once its index is open: sets are loaded from and saved to it."""
        self.store = store
        self.fingerprinter = fingerprinter
        self.key_prefix = key_prefix
        self._ticker = asyncio.ensure_future(self._tick())

    async def boilerplate_for(self, host: str, text: str) -> Boilerplate:
        """The set to fingerprint ``text`` of ``host`` with; during a host's warm-up, waits for it."""
        assert self.fingerprinter is not None, "bind() the learner to an index first"
        known = self._known(host)
        if known is not None:
            return known
        if host not in self._warmups:
            await self._load(host)
            known = self._known(host)
            if known is not None:
                return known
        warmup = self._warmups.get(host)
        if warmup is None:
            warmup = self._warmups[host] = _Warmup(asyncio.get_running_loop().create_future())
        warmup.pages.append(np.unique(self.fingerprinter.shingle_hashes(text)))
        warmup.texts.append(text)
        warmup.last_page = time.monotonic()
        self.held += 1
        self.stats.max_value("simhash/boilerplate/held_max", self.held)
        if len(warmup.pages) >= self.min_pages:
            self._finish(host, "learned")
        elif self.held > self.max_held:
            self._finish(self._largest_warmup(), "buffer full")
        return await asyncio.shield(warmup.ready)

    def flush(self, reason: str) -> None:
        """End every warm-up now (a host with too few pages gets no set for this crawl)."""
        for host in list(self._warmups):
            self._finish(host, reason)

    async def close(self) -> None:
        """Release held pages and wait for pending saves; the pipeline calls this before closing its index."""
        if self._ticker is not None:
            self._ticker.cancel()
        self.flush("spider closing")
        if self._saves:
            await asyncio.gather(*self._saves, return_exceptions=True)

    async def _load(self, host: str) -> None:
        task = self._loads.get(host)
        if task is None:
            task = self._loads[host] = asyncio.ensure_future(self._fetch(host))
            task.add_done_callback(lambda _: self._loads.pop(host, None))
        await asyncio.shield(task)

    async def _fetch(self, host: str) -> None:
        assert self.store is not None
        try:
            stored = await self.store.call("load_boilerplate", host)
        except IndexUnavailable as exc:
            logger.warning("Could not load the boilerplate of %r, learning it again: %s", host, exc)
            return
        if stored is not None:
            version, hashes = stored
            self._publish(host, Boilerplate(int(version), np.asarray(hashes, dtype=np.uint64)), "loaded")

    def _known(self, host: str) -> Boilerplate | None:
        if host in self._without:
            return NO_BOILERPLATE
        boilerplate = self._sets.get(host)
        if boilerplate is not None:
            self._sets.move_to_end(host)
        return boilerplate

    def _publish(self, host: str, boilerplate: Boilerplate, how: str) -> None:
        if boilerplate.version:
            self._sets[host] = boilerplate
            if len(self._sets) > CACHED_SETS:
                self._sets.popitem(last=False)
        else:
            self._without.add(host)
        self.stats.inc_value(f"simhash/boilerplate/hosts_{how}")
        if boilerplate.version:
            self.stats.set_value(f"simhash/boilerplate/version/{host}", boilerplate.version)
            self.stats.set_value(f"simhash/boilerplate/shingles/{host}", len(boilerplate.hashes))

    def _finish(self, host: str, reason: str) -> None:
        warmup = self._warmups.pop(host)
        self.held -= len(warmup.pages)
        if len(warmup.pages) >= self.min_pages:
            boilerplate = self._learn(host, warmup)
            self._publish(host, boilerplate, "learned")
        else:
            boilerplate = NO_BOILERPLATE
            self._publish(host, boilerplate, "without")
            logger.info(
                "No boilerplate for %(host)r in this crawl: %(pages)d pages before warm-up ended (%(reason)s),"
                " %(needed)d needed",
                {"host": host, "pages": len(warmup.pages), "reason": reason, "needed": self.min_pages},
                extra={"spider": self.crawler.spider},
            )
        warmup.ready.set_result(boilerplate)

    def _learn(self, host: str, warmup: _Warmup) -> Boilerplate:
        hashes, counts = learn_boilerplate(warmup.pages, self.min_share)
        boilerplate = Boilerplate(int(time.time()), hashes)
        self._write_summary(host, boilerplate, warmup, dict(zip(hashes.tolist(), counts.tolist())))
        assert self.store is not None
        save = asyncio.ensure_future(self._save(host, boilerplate))
        self._saves.add(save)
        save.add_done_callback(self._saves.discard)
        return boilerplate

    async def _save(self, host: str, boilerplate: Boilerplate) -> None:
        assert self.store is not None
        try:
            await self.store.call("save_boilerplate", host, boilerplate.version, boilerplate.hashes)
        except IndexUnavailable as exc:
            logger.warning("Could not save the boilerplate of %r; the next crawl learns it again: %s", host, exc)

    def _write_summary(self, host: str, boilerplate: Boilerplate, warmup: _Warmup, counts: dict[int, int]) -> None:
        """The most widespread boilerplate shingles as text: the index keeps hashes only."""
        assert self.fingerprinter is not None
        top = sorted(counts, key=counts.__getitem__, reverse=True)[:TOP_SHINGLES]
        # Only the shingles the summary shows are spelled out (~0.5 ms per page read): the search stops
        # once they are all found, about half the held pages, where all of them took nearly every page.
        wanted = frozenset(top)
        texts: dict[int, str] = {}
        for text in warmup.texts:
            if len(texts) == len(wanted):
                break
            hashes = self.fingerprinter.shingle_hashes(text).tolist()
            texts.update((h, s) for h, s in zip(hashes, shingles(text, self.fingerprinter.width)) if h in wanted)
        summary = {
            "host": host,
            "version": boilerplate.version,
            "pages": len(warmup.pages),
            "size": len(boilerplate.hashes),
            "top": [{"shingle": texts.get(h, ""), "pages": counts[h]} for h in top],
        }
        path = Path(summary_path(self.key_prefix, host))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
        except OSError as exc:  # only the readable copy is lost; the set itself is in the index
            logger.warning("Could not write the boilerplate summary %s: %s", path, exc)
        logger.info(
            "Learned the boilerplate of %(host)r from %(pages)d pages: %(size)d shingles, version %(version)d",
            {"host": host, "pages": len(warmup.pages), "size": len(boilerplate.hashes), "version": boilerplate.version},
            extra={"spider": self.crawler.spider},
        )

    async def _tick(self) -> None:
        """End warm-ups that cannot complete: a quiet host, a stalled crawl or a full scraper slot."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            if not self._warmups:
                continue
            try:
                self._end_stuck_warmups()
            except Exception:  # the ticker must survive, or held pages could wait for ever
                logger.exception("Boilerplate warm-up check failed", extra={"spider": self.crawler.spider})
                self.flush("warm-up check failed")

    def _end_stuck_warmups(self) -> None:
        now = time.monotonic()
        for host in [h for h, w in self._warmups.items() if now - w.last_page >= self.warmup_timeout]:
            self._finish(host, "no new page for SIMHASH_BOILERPLATE_WARMUP_TIMEOUT")
        self._stalled_ticks = self._stalled_ticks + 1 if self._crawl_stalled() else 0
        if self._stalled_ticks >= 2:
            self.flush("nothing left to crawl")
        elif self._warmups and self._scraper_full():
            self._finish(self._largest_warmup(), "scraper slot full")

    def _largest_warmup(self) -> str:
        return max(self._warmups, key=lambda h: len(self._warmups[h].pages))

    def _crawl_stalled(self) -> bool:
        """True when every page still in flight is one this learner holds: nothing else can end a warm-up."""
        engine = self.crawler.engine
        if engine is None or engine.scheduler is None or engine.scraper.slot is None:
            return False
        slot = engine.scraper.slot
        return (
            not engine.downloader.active
            and not engine.scheduler.has_pending_requests()
            and not slot.queue
            and slot.itemproc_size <= self.held
        )

    def _scraper_full(self) -> bool:
        """Held pages keep their responses active; past SCRAPER_SLOT_MAX_ACTIVE_SIZE the engine stops downloading."""
        engine = self.crawler.engine
        slot = engine.scraper.slot if engine is not None else None
        return slot is not None and slot.needs_backout()
