"""The record and candidate types and the interface every band-index backend implements.

Backends are chosen by URL in :func:`scrapy_simhash.index.open_index`; the pipeline only sees this.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from scrapy_simhash.index.codec import decode_hashes


def _no_shingles() -> np.ndarray:
    return np.empty(0, dtype=np.uint32)


def _new_write_id() -> bytes:
    # 64 random bits tell two Record objects apart; the stdlib generator is reseeded in a forked child.
    return random.getrandbits(64).to_bytes(8, "big")


@dataclass
class Record:
    """A canonical record: what the index keeps of a page instead of its text.

    ``shingles`` holds the sorted distinct 32-bit shingle hashes that Jaccard verification needs.
    ``urls`` lists every source URL merged into this record (filled when read back).
    ``write_id`` is random per Record object and stored with it: a retried call (same object) whose
    earlier attempt ran on the server although its reply was lost recognises its own write by it.
    """

    id: str
    fingerprint: int
    url: str = ""
    first_seen: float = field(default_factory=time.time)
    retention: str = "default"
    shingles: np.ndarray = field(default_factory=_no_shingles)
    urls: tuple[str, ...] = ()
    write_id: bytes = field(default_factory=_new_write_id)


@lru_cache(maxsize=1024)
def _decoded(blob: bytes) -> np.ndarray:
    """Decoded blobs, recent ones kept: a canonical record with many duplicates, or a near page that
    verification keeps rejecting, is a candidate again and again, with the same blob (~4 MB at most)."""
    hashes = decode_hashes(blob)
    hashes.flags.writeable = False  # shared between candidates
    return hashes


class Candidate:
    """An indexed record within the asked distance of a fingerprint, with its verification data.

    ``shingles`` is decoded from the stored blob on first use: the pipeline verifies candidates
    nearest first and stops at the first match, so most blobs an index returns are never read.
    """

    __slots__ = ("record_id", "fingerprint", "distance", "_blob", "_shingles")

    def __init__(self, record_id: str, fingerprint: int, distance: int, blob: bytes) -> None:
        self.record_id = record_id
        self.fingerprint = fingerprint
        self.distance = distance
        self._blob = blob
        self._shingles: np.ndarray | None = None

    @property
    def shingles(self) -> np.ndarray:
        """Sorted distinct 32-bit shingle hashes (read-only); ValueError when the blob is not one."""
        if self._shingles is None:
            self._shingles = _decoded(self._blob)
        return self._shingles

    def __repr__(self) -> str:
        return f"Candidate({self.record_id!r}, fingerprint={self.fingerprint:#018x}, distance={self.distance})"


class Index(ABC):
    """A band index of fingerprints plus the record store behind it.

    Every method is a coroutine so the pipeline never blocks the reactor, whatever the backend.
    """

    @abstractmethod
    async def add(self, record: Record) -> None:
        """Index ``record``; an existing record with the same id is replaced (urls and first_seen merged)."""

    @abstractmethod
    async def candidates(self, fingerprint: int, max_distance: int) -> list[Candidate]:
        """Indexed records within ``max_distance`` bits of ``fingerprint``, nearest first."""

    @abstractmethod
    async def check_and_add(self, record: Record, max_distance: int) -> list[Candidate]:
        """Atomically: return the candidates within ``max_distance``, or add ``record`` if there are none.

        Idempotent under retry: when ``record`` (the same object, same ``write_id``) is already stored,
        an earlier attempt of this call added it, and the answer is again ``[]``, not the record
        itself. A new Record of the same page (a recrawl) has another ``write_id`` and finds it.
        """

    @abstractmethod
    async def merge(self, canonical_id: str, url: str, first_seen: float) -> None:
        """Record that ``url`` duplicates ``canonical_id``: gain the URL, keep the earliest first-seen."""

    @abstractmethod
    async def check_and_add_exact(self, record: Record, digest: str) -> str | None:
        """Exact-match index for short texts: the canonical id already holding ``digest``, or None
        after storing ``record`` (not banded) under it. Atomic and idempotent like :meth:`check_and_add`."""

    @abstractmethod
    async def get(self, record_id: str) -> Record | None: ...

    @abstractmethod
    async def remove(self, record_id: str) -> bool:
        """Erase the record and every band entry, URL and verification blob it had."""

    @abstractmethod
    async def expire(self) -> int:
        """Remove every record whose retention class TTL has passed; return how many."""

    @abstractmethod
    async def load_boilerplate(self, host: str) -> tuple[int, np.ndarray] | None:
        """The learned boilerplate set of ``host``: (version, sorted 64-bit shingle hashes)."""

    @abstractmethod
    async def save_boilerplate(self, host: str, version: int, hashes: np.ndarray) -> None: ...

    @abstractmethod
    async def count(self) -> int: ...

    @abstractmethod
    async def close(self) -> None: ...
