"""The records, candidates and groups of the index, and the interface every backend implements.

Backends are chosen by URL in :func:`scrapy_simhash.index.open_index`; the pipeline sees only this.
docs/how-it-works.md describes the model: records in groups, exactly one canonical per group.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from abc import ABC, abstractmethod
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np

from scrapy_simhash.fingerprint import FINGERPRINT_VERSION
from scrapy_simhash.whole_text import SAME_TEXT, WholeText
from scrapy_simhash.index.codec import decode_verification, encode_verification
from scrapy_simhash.index.retention import Retention
from scrapy_simhash.minhash import Layout

__all__ = [
    "Candidate",
    "Details",
    "Erased",
    "Exact",
    "GroupGone",
    "Index",
    "IndexCorrupt",
    "IndexNotFound",
    "IndexOpenError",
    "Joined",
    "Lookup",
    "Record",
    "StoredRecord",
    "Verification",
    "handle",
]

#: Most group members kept findable (banded) per group: a giant group (an empty extraction field
#: makes every item one group) must not make the buckets it shares long.
MAX_BANDED_MEMBERS = 32
#: Candidates a lookup returns per group, those sharing the most sketch bytes: a page joins a group
#: through any member, so a family of many findable members need not be read whole. Measured:
#: docs/decisions/candidates-per-group.md.
CANDIDATES_PER_GROUP = 4
#: Records of one group a band key lists: a member goes under those of its keys that fewer of its
#: group's records are under, so a lookup reads at most this many of a group's records per band,
#: however many near copies the group has. Measured: docs/decisions/groups.md.
LISTED_PER_KEY = 1
#: Candidates whose data judging reads first (best first); a backend that can returns their data with
#: the lookup, saving a duplicate a call. Measured: docs/decisions/details-with-lookup.md.
FIRST_READ = 4
#: Verification hashes a crawl keeps by write id (4 bytes each: 16 MB), see :class:`_KeptHashes`.
KEPT_HASHES = 4_000_000


#: What to do about an index a later release of scrapy-simhash wrote, and about one an earlier wrote.
UPGRADE = "upgrade scrapy-simhash (pip install -U scrapy-simhash) to use it"
REBUILD = "another SIMHASH_INDEX_URL or SIMHASH_KEY_PREFIX, or empty this one with scrapy simhash-reset"


def _newer(stored: str | None, ours: int) -> bool:
    """Whether a stored version number is a later release's than ``ours``."""
    return stored is not None and stored.isdigit() and int(stored) > ours


def handle(value: str) -> bytes:
    """The 8-byte key under which the index finds records by id or URL (never the id itself)."""
    return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).digest()


class Verification(NamedTuple):
    """A record's stored verification data: its shingle hashes, and how its whole text's differ."""

    hashes: np.ndarray
    whole: WholeText = SAME_TEXT


class _KeptHashes:
    """Verification data by write id, the most recently used within a budget of hashes; with them,
    the id, URL and host of the records this crawl stored.

    The data under a write id is written once, so hashes this crawl computed for a record it stored,
    or decoded from one it read, stand for the blob whenever that record is a candidate again: most
    candidates of a crawl are its own pages, and a canonical with many duplicates is one again and
    again. Measured: docs/decisions/kept-hashes.md.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held: OrderedDict[bytes, tuple[Verification, tuple[str, str, str, float] | None]] = OrderedDict()
        self._size = 0

    def get(self, key: bytes) -> Verification | None:
        held = self._held.get(key)
        if held is None:
            return None
        self._held.move_to_end(key)
        return held[0]

    def page(self, key: bytes) -> tuple[Verification, str, str, str, float] | None:
        """The verification data, id, URL, host and first-seen time of a record this crawl stored, if held."""
        held = self._held.get(key)
        if held is None or held[1] is None:
            return None
        self._held.move_to_end(key)
        return (held[0], *held[1])

    def held(self, keys: list[bytes]) -> dict[bytes, Verification]:
        """The data held of ``keys``, by key (those not held are absent)."""
        return {key: data for key in keys if (data := self.get(key)) is not None}

    def put(self, key: bytes, data: Verification, page: tuple[str, str, str, float] | None = None) -> None:
        size = _size(data)
        if key in self._held or size > self.budget:
            return
        self._held[key] = (data, page)
        self._size += size
        while self._size > self.budget:
            self._size -= _size(self._held.popitem(last=False)[1][0])


def _size(data: Verification) -> int:
    return len(data.hashes) + len(data.whole.gained) + len(data.whole.lost)


def _new_write_id() -> bytes:
    # 64 random bits tell two Record objects apart; the stdlib generator is reseeded in a forked child.
    return random.getrandbits(64).to_bytes(8, "big")


def _no_hashes() -> np.ndarray:
    return np.empty(0, dtype=np.uint32)


@dataclass
class Record:
    """What the index keeps of a page instead of its text.

    ``hashes`` are the sorted distinct 32-bit verification hashes Jaccard needs, of the text without
    furniture; ``whole`` how the whole text's differ (same-host pairs are judged on the whole text).
    ``write_id`` is
    random per Record object and stored with it: a retried call (same object) whose earlier attempt
    ran on the server although its reply was lost recognises its own write by it.
    """

    id: str
    url: str
    fingerprint: int
    hashes: np.ndarray = field(default_factory=_no_hashes)
    host: str = ""
    first_seen: float = field(default_factory=time.time)
    retention: str = "default"
    write_id: bytes = field(default_factory=_new_write_id)
    whole: WholeText = SAME_TEXT
    _blob: bytes | None = field(default=None, init=False, repr=False, compare=False)
    _sketch: tuple[Layout, bytes] | None = field(default=None, init=False, repr=False, compare=False)

    def blob(self) -> bytes:
        """The verification hashes as stored, encoded once: a retry and the join after a lookup reuse it."""
        if self._blob is None:
            self._blob = encode_verification(self.hashes, self.whole)
        return self._blob

    @property
    def blob_encoded(self) -> bool:
        """Whether :meth:`blob` was asked for: a backend that encodes it only to write it knows that
        it may have written it."""
        return self._blob is not None

    def sketch(self, layout: Layout) -> bytes:
        """The record's sketch under ``layout``, computed once."""
        if self._sketch is None or self._sketch[0] != layout:
            self._sketch = (layout, layout.sketch(self.hashes))
        return self._sketch[1]

    def keep_sketch(self, layout: Layout, sketch: bytes) -> None:
        """Take ``sketch`` as the record's sketch under ``layout``: computed in a batch with others'."""
        self._sketch = (layout, sketch)


class Candidate(NamedTuple):
    """An indexed record whose sketch says it may be a near-duplicate; verify before believing it."""

    rid: int
    group: int
    canonical: int  # rid of the group's canonical (0: the group has none left)
    fingerprint: int
    equal: int  # sketch bytes shared with the lookup's record
    key: bytes  # where its data lives (its write id)
    canonical_key: bytes


def best_first(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Candidates sharing the most sketch bytes first (then the oldest), ``CANDIDATES_PER_GROUP`` of
    each group at most."""
    taken: Counter[int] = Counter()
    out = []
    for candidate in sorted(candidates, key=lambda c: (-c.equal, c.rid)):
        taken[candidate.group] += 1
        if taken[candidate.group] <= CANDIDATES_PER_GROUP:
            out.append(candidate)
    return out


class Details(NamedTuple):
    """A candidate's data, read after the lookup: what verification and the merge log need."""

    id: str
    url: str
    host: str
    hashes: np.ndarray  # empty for a record kept without verification data
    canonical_id: str
    canonical_url: str
    whole: WholeText = SAME_TEXT
    first_seen: float = 0.0  # Unix time; 0.0: unknown
    canonical_first_seen: float = 0.0  # when the group's canonical was first seen: the content's first meeting


class Lookup(NamedTuple):
    """The answer of :meth:`Index.check_and_add`.

    ``added`` is the new record's rid when it was inserted as a group's canonical (then there are no
    candidates). ``seq`` is the last rid the lookup could see: pass it as ``since`` to ask again for
    records that arrived afterwards only. ``same_id``: other records already indexed under this id,
    (by this session, by earlier ones), added or not: a spider that gives several pages one id,
    or a recrawl.
    ``busy``: nothing was done, because a record under this id is pending in another live session
    (two crawls have the same page in flight): ask again once it is confirmed or that session is gone.
    ``read``: data of candidates the backend read with the lookup, by their ``key``, as
    :meth:`Index.details` gives it.
    """

    added: int | None
    candidates: list[Candidate]
    seq: int
    same_id: tuple[int, int] = (0, 0)
    busy: bool = False
    read: dict[bytes, Details | None] = {}


class Exact(NamedTuple):
    """The answer of :meth:`Index.check_and_add_exact`: the new rid, or the record holding the text."""

    added: int | None
    holder: Candidate | None
    busy: bool = False  # as in Lookup
    same_id: tuple[int, int] = (0, 0)  # as in Lookup


class Joined(NamedTuple):
    rid: int
    group: int
    canonical: int
    size: int  # records in the group now
    banded: bool  # the member is findable by content (it adds reach to the group)


class StoredRecord(NamedTuple):
    rid: int
    group: int
    canonical: bool
    id: str
    url: str
    host: str
    fingerprint: int
    first_seen: float
    retention: str
    pending: bool
    hashes: np.ndarray


class Erased(NamedTuple):
    """One record erased: what the logs must forget about it."""

    id: str
    url: str
    canonical: bool
    promoted: str | None  # id of the member that became the group's canonical, if any


class GroupGone(Exception):
    """The record a duplicate matched was erased or expired meanwhile: look the item up again."""


class Index(ABC):
    """Records in groups, found through MinHash band buckets; every method is a coroutine.

    Exactly one canonical per group, whatever the concurrency: :meth:`check_and_add` inserts a record
    only when no record newer than ``since`` is a candidate, atomically. A canonical is *pending*
    until :meth:`confirm` (the pipeline confirms when Scrapy reports the item scraped). Each session
    holds a lease for ``lease`` seconds, renewed by :meth:`keep_alive`: a pending record of another
    session under the same id is a crashed crawl's when that session's lease has lapsed (never a
    duplicate's canonical then), and makes the lookup wait (``busy``) while it holds.
    """

    #: The backend's key schema: a change of what it stores bumps it, and an index of another schema
    #: is refused with a message saying so.
    schema: ClassVar[int]
    #: Failures a retry may cure (a network blip, a locked database); each backend names its own.
    transient_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    #: Calls a crawl may have in flight at once; more wait their turn. redis-py's asyncio pools
    #: (100 connections a server) refuse a connection past their size instead of waiting for one.
    max_in_flight: ClassVar[int] = 64

    def __init__(
        self,
        *,
        location: str,
        layout: Layout,
        retention: Retention,
        max_hashes: int,
        create: bool,
        session: bytes,
        lease: float,
    ) -> None:
        self.location = location  # for messages: the URL without credentials
        self.layout = layout
        self.retention = retention
        self.max_hashes = max_hashes
        self.create = create
        self.session = session
        self.lease = lease
        self._kept = _KeptHashes(KEPT_HASHES)

    def _verification(self, blob: bytes | None, key: bytes = b"") -> Verification | None:
        """Stored verification data, decoded within the bound; None for data that is not a blob.
        ``key``, the write id it is stored under, finds data this crawl already holds."""
        if not blob:
            return None
        data = self._kept.get(key) if key else None
        if data is not None:
            return data
        try:
            data = Verification(*decode_verification(blob, self.max_hashes))
        except ValueError:
            return None
        data.hashes.flags.writeable = False  # shared between candidates
        if key:
            self._kept.put(key, data)
        return data

    def _stored_hashes(self, blob: bytes | None) -> np.ndarray:
        """A stored record's verification hashes, empty for a record without (or with unreadable) data."""
        data = self._verification(blob)
        return _no_hashes() if data is None else data.hashes

    def _stored(self, record: Record) -> None:
        """Note that ``record`` is stored with its verification data: its hashes stand for its blob
        (within the bound a blob is read with, so a record reads the same whoever stored it), its id,
        URL and host for the rest of its page data."""
        if len(record.hashes) <= self.max_hashes:
            self._kept.put(record.write_id, Verification(record.hashes, record.whole),
                           (record.id, record.url, record.host, record.first_seen))

    def _check_identity(self, stored: dict[str, str], where: str) -> None:
        """Refuse an index of another schema, layout or fingerprint version: read with this one's
        rules, its records would silently stop matching."""
        if stored.get("schema") != str(self.schema):
            if _newer(stored.get("schema"), self.schema):
                raise ValueError(
                    f"{where} has key schema {stored['schema']}, newer than this version of scrapy-simhash reads"
                    f" ({self.schema}): {UPGRADE}"
                )
            built = f"has key schema {stored['schema']}" if stored.get("schema") else "was built by an earlier version"
            raise ValueError(
                f"{where} {built} of scrapy-simhash; this version reads schema {self.schema}: build a new index"
                f" ({REBUILD})"
            )
        if stored.get("fingerprint") != str(FINGERPRINT_VERSION):
            if _newer(stored.get("fingerprint"), FINGERPRINT_VERSION):
                raise ValueError(
                    f"{where} holds fingerprints of version {stored['fingerprint']}, newer than this version of"
                    f" scrapy-simhash computes ({FINGERPRINT_VERSION}): {UPGRADE}"
                )
            raise ValueError(
                f"{where} holds fingerprints of version {stored.get('fingerprint')}, this version computes "
                f"version {FINGERPRINT_VERSION}: build a new index ({REBUILD})"
            )
        if Layout.from_dict(json.loads(stored["layout"])) != self.layout:
            raise ValueError(
                f"{where} was built with the layout {stored['layout']}, not {self.layout.to_json()}: "
                "use the same SIMHASH_JACCARD_THRESHOLD / SIMHASH_TARGET_RECALL / SIMHASH_LAYOUT, or a new index"
            )

    def _identity(self) -> dict[str, str]:
        return {"schema": str(self.schema), "fingerprint": str(FINGERPRINT_VERSION), "layout": self.layout.to_json()}

    @abstractmethod
    async def open(self) -> None:
        """Connect, create or check the schema and the layout; raise ``ValueError`` for an index of
        another schema, layout or fingerprint version, ``IndexNotFound`` where ``create`` is off."""

    @abstractmethod
    async def keep_alive(self) -> None:
        """Renew this session's lease (call it every ``lease / 3`` seconds at least)."""

    @abstractmethod
    async def check_and_add(self, record: Record, since: int = 0) -> Lookup:
        """Candidates among records newer than ``since``, or, when there are none, ``record`` added
        as a new group's canonical (pending), atomically. Idempotent under retry of the same Record."""

    @abstractmethod
    async def details(self, candidates: list[Candidate]) -> list[Details | None]:
        """The candidates' data (None for one erased meanwhile, or whose stored data is unreadable)."""

    @abstractmethod
    async def join(self, record: Record, matched: Candidate, banded: bool) -> Joined:
        """Add ``record`` to ``matched``'s group as a member, findable by content when ``banded`` (and
        the group has fewer than MAX_BANDED_MEMBERS findable); ``GroupGone`` when ``matched`` is gone."""

    @abstractmethod
    async def check_and_add_exact(self, record: Record, digest: bytes) -> Exact:
        """Short texts: the record holding ``digest``, or ``record`` added as a canonical under it."""

    @abstractmethod
    async def remove(self, rid: int) -> bool:
        """Erase the record ``rid`` (undoing a join whose decision could not be recorded)."""

    async def release(self, record: Record) -> None:
        """``record`` will not be indexed (its item ended otherwise): drop any data written for it ahead."""

    @abstractmethod
    async def confirm(self, rids: list[int]) -> None:
        """These canonicals' items were delivered: they are no longer pending."""

    @abstractmethod
    async def scraped(self, rids: list[int]) -> None:
        """These canonicals' items were scraped and wait for a feed to be stored: still pending (a
        crash leaves the pages to the rerun), but another live crawl no longer waits for them."""

    @abstractmethod
    async def records(self, key: str) -> list[StoredRecord]:
        """Every record whose id or URL is ``key``."""

    @abstractmethod
    async def erase(self, key: str) -> list[Erased]:
        """Erase every record whose id or URL is ``key``: its band entries, data and handles; a
        group whose canonical goes gets its earliest findable member as canonical."""

    @abstractmethod
    async def expire(self) -> int:
        """Erase the groups whose retention has passed; return how many records went."""

    @abstractmethod
    async def load_boilerplate(self, host: str) -> bytes | None:
        """The host's stored furniture blob."""

    @abstractmethod
    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        """Store ``blob`` as the host's furniture unless it has some, atomically: the first one stored
        stays (every crawl on the index strips a host alike). Returns the blob the host has now."""

    @abstractmethod
    async def count(self) -> int:
        """Records in the index."""

    @abstractmethod
    async def close(self) -> None:
        """Give up the lease (this session's pending records are then a crashed crawl's) and disconnect."""


class IndexNotFound(Exception):
    """A read-only command asked for an index that does not exist (nothing was created)."""


class IndexOpenError(Exception):
    """The index cannot be opened at all (a path that cannot hold a database, say): no retry cures it."""


class IndexCorrupt(Exception):
    """The index's stored data is damaged (a SQLite file with corrupt pages): no retry cures it, and
    judging on it would pass items unchecked one by one; restore it from a backup or start over."""
