"""Judging one record against the index: verify candidates by Jaccard, then join a group or start one.

Shared by the pipeline and by ``simhash-eval``'s replay, so what is measured is what runs. The
insert after rejected candidates is conditional on nothing new having arrived (``since``), so two
near-duplicates in flight at once cannot both become canonical.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from scrapy_simhash.fingerprint import hashes_union, hashes_without, jaccard_hashes
from scrapy_simhash.index import (
    FIRST_READ, Candidate, Details, Exact, GroupGone, Joined, Lookup, Record, StoredRecord,
)
from scrapy_simhash.minhash import Layout
from scrapy_simhash.whole_text import whole_text_jaccard

__all__ = [
    "NOVELTY", "InFlightElsewhere", "Placement", "Recrawl", "Verified", "place", "place_exact", "recrawled", "verify",
]

#: A duplicate is kept findable (its band keys indexed) when its best match is below this Jaccard:
#: it then reaches pages its group's other records do not (a page drifting release after release).
#: A closer copy adds nothing but bucket entries. Measured: docs/decisions/groups.md.
NOVELTY = 0.95
#: How far below the best match a candidate's sketch estimate may be and still be read: three
#: standard errors of a 132-byte sketch's estimate near the threshold (J ~ 0.85); the default's
#: 176 bytes err less.
PLAUSIBLE = 0.1
#: How far below the threshold two same-host pages' texts without furniture may be alike, their
#: whole texts being at the threshold or above, for them to be duplicates: the template makes a page
#: and its next release more alike whole than without it (benchmarks/singlehost.py: such pairs at
#: 0.77-0.82 without furniture, 0.82-0.84 whole), never two articles whose contents are far apart.
CONTENT_MARGIN = 0.07
#: Restarts after the matched record was erased or expired meanwhile, before giving up.
MAX_RESTARTS = 3

Furniture = Callable[[str], Awaitable[np.ndarray]]


class InFlightElsewhere(Exception):
    """The same page stayed pending in another live crawl for longer than a lease, twice over."""


class Judged(Protocol):
    """The index calls judging needs (an :class:`~scrapy_simhash.index.Index` or its guard)."""

    layout: Layout
    lease: float

    async def check_and_add(self, record: Record, since: int = 0) -> Lookup: ...

    async def details(self, candidates: list[Candidate]) -> list[Details | None]: ...

    async def join(self, record: Record, matched: Candidate, banded: bool) -> Joined: ...

    async def check_and_add_exact(self, record: Record, digest: bytes) -> Exact: ...

    async def records(self, key: str) -> list[StoredRecord]: ...

    async def remove(self, rid: int) -> bool | None: ...


class _BusyWait:
    """Waits between lookups while the same page is pending in another live crawl: that crawl
    confirms its item within about a second of scraping it, or its lease lapses if it died."""

    def __init__(self, lease: float) -> None:
        self.lease, self.delay, self.waited = lease, 0.05, 0.0

    async def again(self, record: Record) -> None:
        if self.waited >= 2 * self.lease:
            raise InFlightElsewhere(f"{record.id} stayed pending in another crawl for {self.waited:.0f} s")
        await asyncio.sleep(self.delay)
        self.waited += self.delay
        self.delay = min(2 * self.delay, 1.0)


@dataclass(frozen=True)
class Verified:
    """A candidate, its data, and the Jaccard similarity verification measured (of the texts without
    furniture; of the whole texts for two pages of one host); ``guarded``: rejected because the whole
    texts of two same-host pages are not alike, though their texts without furniture are;
    ``whole_texts``: ``jaccard`` is the whole texts'."""

    candidate: Candidate
    details: Details
    jaccard: float
    guarded: bool = False
    whole_texts: bool = False


@dataclass
class Placement:
    """Where a record went: added as a new group's canonical, or joined to ``match``'s group."""

    added: int | None = None
    joined: Joined | None = None
    match: Verified | None = None
    rejected: list[Verified] = field(default_factory=list)
    unreadable: int = 0  # candidates whose stored data could not be read (counted, skipped)
    same_id: tuple[int, int] = (0, 0)
    seen: StoredRecord | None = None  # the page's own record, with this very content: nothing was done
    replaced: int = 0  # records of the page's earlier crawls, with other content, removed before judging


async def verify(
    record: Record,
    candidates: list[Candidate],
    details: list[Details | None],
    threshold: float,
    furniture: Furniture | None = None,
) -> tuple[Verified | None, list[Verified], int]:
    """The best candidate at or above ``threshold`` (None if none), the rejected ones, and how many
    could not be read. Candidates come best sketch first; verification stops at a match so close
    that no other could matter (>= NOVELTY).

    What either host now calls furniture is left out of both sides: two hosts' different furniture
    cannot make a copy look distinct, nor can furniture learned since the candidate was stored.
    """
    best: Verified | None = None
    rejected: list[Verified] = []
    unreadable = 0
    own = None
    for candidate, data in zip(candidates, details):
        if data is None:  # erased or expired since the lookup
            continue
        if data.hashes is None:
            unreadable += 1
            continue
        ours, theirs = record.hashes, data.hashes
        if furniture is not None:
            own = await furniture(record.host) if own is None else own
            left_out = own if data.host == record.host else hashes_union(own, await furniture(data.host))
            ours, theirs = hashes_without(ours, left_out), hashes_without(theirs, left_out)
        verified = _guarded(record, data, Verified(candidate, data, jaccard_hashes(ours, theirs)), threshold)
        if verified.jaccard < threshold:  # a guarded pair's whole texts are under it
            rejected.append(verified)
            continue
        if best is None or verified.jaccard > best.jaccard:
            best = verified
        if best.jaccard >= NOVELTY:
            break
    return best, rejected, unreadable


def _guarded(record: Record, data: Details, verified: Verified, threshold: float) -> Verified:
    """Two pages of one host are judged on their whole texts, as long as their texts without furniture
    are alike too (at most ``CONTENT_MARGIN`` below the threshold): their furniture is the same
    template, so it cannot make copies look distinct, while content the learner took for furniture can
    make distinct pages look alike (``guarded``: alike only without it), and a template can make two
    short articles look alike. Across hosts, the texts without furniture decide."""
    if data.host != record.host or verified.jaccard < threshold - CONTENT_MARGIN:
        return verified
    if record.whole.same and data.whole.same:
        return verified  # nothing was removed from either
    whole = whole_text_jaccard(record.hashes, record.whole, data.hashes, data.whole)
    return Verified(verified.candidate, data, whole, guarded=whole < threshold <= verified.jaccard, whole_texts=True)


@dataclass(frozen=True)
class Recrawl:
    """What the index holds under a page's id already: its record of this very content (``seen``),
    or how many records of earlier crawls with other content went (``replaced``)."""

    seen: StoredRecord | None = None
    replaced: int = 0


def same_content(stored: StoredRecord, record: Record) -> bool:
    """The same SimHash, and the same shingle hashes where the index keeps them (findable records)."""
    if stored.fingerprint != record.fingerprint:
        return False
    return len(stored.hashes) == 0 or np.array_equal(stored.hashes, record.hashes)


async def recrawled(index: Judged, record: Record, same_id: tuple[int, int], added: int | None) -> Recrawl:
    """A page whose id the index holds already (``same_id``, this crawl's and earlier ones'): seen
    again unchanged, or changed since an earlier crawl, whose records then go so that the page is
    judged on its new content alone, never against itself. This crawl's own records under the id stay
    (several items sharing an id). Pending records are left out: their items are not delivered yet."""
    stored = [
        s for s in await index.records(record.id) if s.id == record.id and not s.pending and s.rid != added
    ]
    for candidate in stored:
        if same_content(candidate, record):
            return Recrawl(seen=candidate)
    this, earlier = same_id
    if not earlier or this:
        return Recrawl()
    for old in stored:
        await index.remove(old.rid)
    return Recrawl(replaced=len(stored))


async def place(
    index: Judged, record: Record, threshold: float, furniture: Furniture | None = None
) -> Placement:
    """Add ``record`` as a new group's canonical, or join the group of its best verified match;
    nothing when the index holds the page already with this content (``seen``)."""
    since, placement, restarts, busy = 0, Placement(), 0, _BusyWait(index.lease)
    recrawl: Recrawl | None = None
    while True:
        lookup = await index.check_and_add(record, since)
        if lookup.busy:
            await busy.again(record)
            since, placement = 0, Placement()
            continue
        if recrawl is None and any(lookup.same_id):
            recrawl = await recrawled(index, record, lookup.same_id, lookup.added)
            if lookup.added is None and recrawl.seen is not None:
                return Placement(seen=recrawl.seen)
            if lookup.added is None and recrawl.replaced:
                since = 0  # judged again, without its earlier records
                continue
        replaced = recrawl.replaced if recrawl is not None else 0
        if lookup.added is not None:
            placement.added, placement.same_id, placement.replaced = lookup.added, lookup.same_id, replaced
            return placement
        match = await _verify_best_first(index, record, lookup, threshold, furniture, placement)
        if match is None:
            since = lookup.seq  # judged everything up to here: only newer records can stop the insert
            continue
        try:
            placement.joined = await index.join(record, match.candidate, banded=match.jaccard < NOVELTY)
        except GroupGone:
            restarts += 1
            if restarts > MAX_RESTARTS:
                raise
            since, placement = 0, Placement()
            continue
        placement.match, placement.replaced = match, replaced
        return placement


async def _verify_best_first(
    index: Judged,
    record: Record,
    lookup: Lookup,
    threshold: float,
    furniture: Furniture | None,
    placement: Placement,
) -> Verified | None:
    """:func:`verify`, reading candidates' data best sketch first: the ``FIRST_READ`` best, then only
    those whose sketch estimate could still beat the best match (within ``PLAUSIBLE`` of it). A
    copy's best sketch is nearly always its match, and reading every candidate's data was most of a
    duplicate's cost. Data the lookup brought along is not read again."""
    best: Verified | None = None
    candidates, read = lookup.candidates, dict(lookup.read)
    for chunk in (candidates[:FIRST_READ], candidates[FIRST_READ:]):
        if best is not None:
            if best.jaccard >= NOVELTY:
                break
            chunk = [c for c in chunk if index.layout.estimate(c.equal) >= best.jaccard - PLAUSIBLE]
        if not chunk:
            break
        unread = [c for c in chunk if c.key not in read]
        if unread:
            read.update(zip((c.key for c in unread), await index.details(unread)))
        details = [read[c.key] for c in chunk]
        match, rejected, unreadable = await verify(record, chunk, details, threshold, furniture)
        placement.rejected += rejected
        placement.unreadable += unreadable
        if match is not None and (best is None or match.jaccard > best.jaccard):
            best = match
    return best


async def place_exact(index: Judged, record: Record, digest: bytes, threshold: float) -> Placement:
    """Short texts: join the group of the record holding the same normalised text, or start one. A
    holder of the same host whose whole text differs (:func:`_guarded`) is no match: the record is
    then placed by its sketch, as a longer text is."""
    restarts, busy, recrawl = 0, _BusyWait(index.lease), None
    while True:
        exact = await index.check_and_add_exact(record, digest)
        if exact.busy:
            await busy.again(record)
            continue
        if recrawl is None and any(exact.same_id):  # as in place()
            recrawl = await recrawled(index, record, exact.same_id, exact.added)
            if exact.added is None and recrawl.seen is not None:
                return Placement(seen=recrawl.seen)
            if exact.added is None and recrawl.replaced:
                continue
        replaced = recrawl.replaced if recrawl is not None else 0
        if exact.holder is None:
            return Placement(added=exact.added, replaced=replaced)
        [data] = await index.details([exact.holder])
        if data is not None and data.hashes is not None:
            verified = _guarded(record, data, Verified(exact.holder, data, 1.0), threshold)
            if verified.guarded:
                placement = await place(index, record, threshold)
                placement.rejected.insert(0, verified)
                return placement
        try:
            if data is None:
                raise GroupGone(f"record {exact.holder.rid} is gone")
            joined = await index.join(record, exact.holder, banded=False)
        except GroupGone:
            restarts += 1
            if restarts > MAX_RESTARTS:
                raise GroupGone(f"{record.id}: the record holding its text kept going away") from None
            continue
        return Placement(joined=joined, match=Verified(exact.holder, data, 1.0), replaced=replaced)
