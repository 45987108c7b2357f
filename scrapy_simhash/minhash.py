"""How a record's verification hashes become index keys: MinHash bands, pure functions, no I/O.

A record's *sketch* is ``size`` one-byte MinHash values (``bands * rows`` unless more are asked
for); band ``i``'s key is the sketch's bytes ``[i * rows, (i + 1) * rows)``. Two records are
candidates when some band key is equal and the whole sketch's Jaccard estimate is at least
``min_estimate``. A lookup reads ``bands`` exact-match buckets, so its cost does not grow with the
index (docs/how-it-works.md has the figures).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property, lru_cache
from math import ceil, comb
from typing import Any

import numpy as np

from scrapy_simhash.fingerprint import GOLDEN_64, first_of_runs, fmix64

__all__ = ["Layout"]

_U64 = np.uint64
# One-byte values agree by chance with probability 1/256, so an estimate corrects for it.
_CHANCE = 1 / 256
_SHIFT32 = np.array(32, dtype=_U64)


#: Sketch bytes at most: a record slot holds its sketch, and the index compares sketches byte by byte.
MAX_SIZE = 1024

#: Donor attempts an empty bin makes at once. A 1 kB text fills ~60 % of the default layout's bins;
#: one round found a donor for every empty bin of 99.75 % of the shared corpus cut in 1 kB pieces.
_DONOR_ROUND = 16


def _donor_tries(size: int, first: int, bins: np.ndarray) -> np.ndarray:
    """``tries[i, a]``: the bin that empty bin ``bins[i]`` of a ``size``-byte sketch borrows from at
    attempt ``first + a``, if that bin is filled."""
    attempts = np.arange(first + 1, first + _DONOR_ROUND + 1, dtype=_U64)
    return (fmix64(bins.astype(_U64)[:, None] * _U64(GOLDEN_64) + attempts) % _U64(size)).astype(np.intp)


@lru_cache(maxsize=16)
def _first_tries(size: int) -> np.ndarray:
    """The first round's tries of every bin, kept: a short text has about 40 % of its bins empty, and
    hashing their attempts anew cost more than the rest of its fingerprinting."""
    tries = _donor_tries(size, 0, np.arange(size))
    tries.flags.writeable = False
    return tries


@dataclass(frozen=True)
class Layout:
    """MinHash bands over verification hashes (sorted distinct uint32 values, already pseudo-random).

    The sketch is one-permutation hashing: the 32-bit hash space is cut into ``size`` equal ranges,
    a value's range is its bin, and a bin's MinHash is the lowest hash in it (its low byte is kept).
    An empty bin borrows the value of a non-empty bin chosen by a fixed hash of its number
    (Shrivastava's densification), so short texts get a full sketch too.

    ``size`` (0: ``bands * rows``) may exceed what the bands key: bins past them sharpen the estimate
    that filters candidates, so fewer bands, each a bucket read per lookup, keep near misses out.
    """

    bands: int
    rows: int
    min_estimate: float
    size: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.bands <= 255:
            raise ValueError(f"bands must be between 1 and 255, got {self.bands}")
        if not 3 <= self.rows <= 16:
            raise ValueError(f"rows must be between 3 and 16 (a band key of 3..16 bytes), got {self.rows}")
        if self.bands * self.rows < 16:
            raise ValueError(f"a sketch needs 16 bytes or more, got {self.bands} x {self.rows}")
        if not 0.0 <= self.min_estimate <= 1.0:
            raise ValueError(f"min_estimate must be between 0 and 1, got {self.min_estimate}")
        if self.size == 0:
            object.__setattr__(self, "size", self.bands * self.rows)
        if not self.bands * self.rows <= self.size <= MAX_SIZE:
            raise ValueError(
                f"size must be between bands x rows ({self.bands * self.rows}) and {MAX_SIZE}, got {self.size}"
            )

    @cached_property
    def min_equal(self) -> int:
        """Sketch bytes two records must share to pass ``min_estimate``: the integer both the client
        and the index's server side compare with, so they never disagree on a rounding."""
        return ceil(self.size * (self.min_estimate * (1 - _CHANCE) + _CHANCE) - 1e-9)

    def sketch(self, hashes: np.ndarray) -> bytes:
        """The sketch of sorted distinct uint32 ``hashes`` (all zeros for no hashes: never indexed)."""
        return self.sketches([hashes])[0]

    def sketches(self, hash_sets: Sequence[np.ndarray]) -> list[bytes]:
        """The sketch of each of ``hash_sets`` (as :meth:`sketch`), computed together: on a short text
        a sketch costs its ~20 numpy calls more than its values, and a batch pays for them once."""
        k, count = self.size, len(hash_sets)
        if not count:
            return []
        sizes = np.fromiter(map(len, hash_sets), dtype=np.intp, count=count)
        values = np.concatenate(hash_sets) if count > 1 else np.asarray(hash_sets[0])
        # Bin j holds [ceil(j * 2**32 / k), ceil((j + 1) * 2**32 / k)): exactly the values v with
        # v * k >> 32 == j. Cell ``set * k + bin`` of the flat result; values are sorted within each
        # set, so a cell's first value is its minimum.
        cells = (values.astype(_U64) * self._size_u64 >> _SHIFT32).astype(np.intp)
        if count > 1:
            cells += np.repeat(np.arange(0, count * k, k), sizes)
        first = first_of_runs(cells)
        filled = np.zeros(count * k, dtype=bool)
        sketch = np.zeros(count * k, dtype=np.uint8)
        cells = cells[first]
        filled[cells] = True
        sketch[cells] = values[first]  # the low byte of each bin's minimum
        empty = (~filled if sizes.all() else ~filled & np.repeat(sizes > 0, k)).nonzero()[0]
        attempt = 0
        while len(empty):
            bins = empty % k if count > 1 else empty
            tries = _first_tries(k)[bins] if attempt == 0 else _donor_tries(k, attempt, bins)
            if count > 1:
                tries += (empty - bins)[:, None]  # the cell where the set starts
            donors = tries[np.arange(len(empty)), filled[tries].argmax(axis=1)]  # first filled try, else the first
            found = filled[donors]
            sketch[empty[found]] = sketch[donors[found]]
            empty = empty[~found]
            attempt += _DONOR_ROUND
        return [sketch.tobytes()] if count == 1 else [row.tobytes() for row in sketch.reshape(count, k)]

    @cached_property
    def _size_u64(self) -> np.ndarray:
        return np.array(self.size, dtype=_U64)  # 0-d: a numpy scalar operand is converted on every call

    def band_keys(self, sketch: bytes) -> list[bytes]:
        """Band ``i``'s key: its ``rows`` sketch bytes (the bands take the sketch's first bytes)."""
        r = self.rows
        return [sketch[i * r : (i + 1) * r] for i in range(self.bands)]

    def equal(self, a: bytes, b: bytes) -> int:
        """Sketch bytes ``a`` and ``b`` share, position by position."""
        return int(np.count_nonzero(np.frombuffer(a, np.uint8) == np.frombuffer(b, np.uint8)))

    def estimate(self, equal: int) -> float:
        """The Jaccard estimate of two sketches that share ``equal`` bytes."""
        return max(0.0, (equal / self.size - _CHANCE) / (1 - _CHANCE))

    def candidate_probability(self, jaccard: float) -> float:
        """Model: P(some band key equal and at least ``min_equal`` sketch bytes equal) for a pair at
        ``jaccard``, each byte equal independently with probability J + (1 - J) / 256."""
        p = jaccard + (1 - jaccard) * _CHANCE
        r, b = self.rows, self.bands
        beyond = self.size - b * r  # bytes past the bands: each equal with probability p
        # Count over the number of bands that agree wholly (m) and the equal bytes elsewhere.
        band = p**r
        total = 0.0
        for m in range(1, b + 1):
            whole = comb(b, m) * band**m * (1 - band) ** (b - m)
            need = max(0, self.min_equal - m * r)
            total += whole * _equal_elsewhere_at_least(b - m, r, beyond, p, need)
        return total

    @property
    def label(self) -> str:
        """``BANDSxROWS[/SIZE]>=ESTIMATE``, as ``simhash-eval --layouts`` takes it."""
        size = f"/{self.size}" if self.size != self.bands * self.rows else ""
        return f"{self.bands}x{self.rows}{size}>={self.min_estimate:.2f}"

    def as_dict(self) -> dict[str, Any]:
        """The layout's identity as data: stored in the index (an index refuses another layout)."""
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Layout:
        """``size`` may be left out: ``bands * rows``."""
        return cls(
            bands=int(data["bands"]),
            rows=int(data["rows"]),
            min_estimate=float(data["min_estimate"]),
            size=int(data.get("size", 0)),
        )


def _equal_elsewhere_at_least(bands: int, rows: int, beyond: int, p: float, need: int) -> float:
    """P(at least ``need`` equal bytes over ``bands`` bands that each have fewer than ``rows`` equal
    and ``beyond`` more bytes, each equal with probability ``p``)."""
    total = np.ones(1)
    if bands:
        one = np.array([comb(rows, j) * p**j * (1 - p) ** (rows - j) for j in range(rows)])  # j < rows equal
        if one.sum() == 0:  # every band agrees wholly (p = 1): the caller's weight of this case is 0
            return 0.0
        one /= one.sum()
        for _ in range(bands):
            total = np.convolve(total, one)
    if beyond:
        total = np.convolve(total, [comb(beyond, j) * p**j * (1 - p) ** (beyond - j) for j in range(beyond + 1)])
    return float(total[need:].sum())
