"""How a fingerprint maps to band-index keys: pure functions, no I/O, no settings.

A *layout* has ``tables`` hash tables; table ``t`` is keyed by the fingerprint bits at a fixed set of
positions (its *key bits*); the other bits are the table's *residual*. Two fingerprints are candidates
when some probe key of one equals an insert key of the other.

* :class:`BlockLayout` (pigeonhole): ``bands`` contiguous blocks. Fingerprints within ``bands - 1``
  bits share a block exactly, so recall is guaranteed up to that distance.
* :class:`SampledLayout` (Hamming LSH, Manku et al.'s permuted tables): each table is keyed by ``r``
  pseudo-randomly chosen bit positions. Recall is probabilistic (see :meth:`Layout.collision_probability`)
  but buckets stay small when ``r`` is large, so long distances do not mean long candidate lists.

Either layout may *multi-probe*: lookups also probe every key one bit away from the insert key in each
table, so a table collides when at most one of its key bits differs. For blocks this doubles the
guaranteed distance to ``2 * bands - 1`` at the cost of ``bits + bands`` probes instead of ``bands``;
for sampled tables it lets fewer, longer keys (short buckets) reach the same recall. The index does
not grow either way.

API: ``insert_keys(fp) -> [(table, key)]`` (where a fingerprint is stored), ``probe_keys(fp) ->
[(table, key)]`` (where a lookup looks), ``residual(table, fp)`` (the bits a bucket entry must keep to
rebuild the fingerprint), ``key_positions(table)`` / ``residual_positions(table)``, and
:func:`make_layout`, which turns the settings into a layout and refuses one that cannot keep its promise.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from math import comb

import numpy as np

__all__ = ["BlockLayout", "Layout", "SampledLayout", "make_layout"]

LAYOUT_KINDS = ("blocks", "sampled")
MULTIPROBE_SAMPLES = 40_000
_BYTES = np.arange(8)


class Layout(ABC):
    """Tables keyed by fixed sets of fingerprint bit positions; subclasses choose the positions."""

    #: Largest distance at which every near pair is found (0: only identical fingerprints).
    guaranteed_distance: int

    def __init__(self, key_positions: Sequence[Sequence[int]], *, bits: int, multiprobe: bool) -> None:
        if not 1 <= bits <= 64:
            raise ValueError(f"bits must be between 1 and 64, got {bits}")
        self.bits = bits
        self.multiprobe = multiprobe
        self._keys = [tuple(sorted(p)) for p in key_positions]
        self._residuals = [tuple(sorted(set(range(bits)).difference(p))) for p in self._keys]
        # pext by byte lookup tables: _lut[t, j, b] = (key part, residual part) of byte j valued b.
        self._lut = np.array([self._byte_tables(k, r) for k, r in zip(self._keys, self._residuals)], dtype=np.uint64)

    @property
    def tables(self) -> int:
        return len(self._keys)

    def key_positions(self, table: int) -> tuple[int, ...]:
        """Fingerprint bit positions forming the key of ``table``; key bit i is position [i]."""
        return self._keys[table]

    def residual_positions(self, table: int) -> tuple[int, ...]:
        """Fingerprint bit positions outside the key of ``table``; residual bit i is position [i]."""
        return self._residuals[table]

    def split(self, fingerprint: int) -> list[tuple[int, int]]:
        """``(key, residual)`` of ``fingerprint`` in every table, in table order."""
        octets = np.frombuffer(fingerprint.to_bytes(8, "little"), dtype=np.uint8)
        # The parts of different bytes have no bit in common: their sum is their bitwise or.
        parts = self._lut[:, _BYTES, octets].sum(axis=1, dtype=np.uint64)
        return list(map(tuple, parts.tolist()))

    def insert_keys(self, fingerprint: int) -> list[tuple[int, int]]:
        """``(table, key)`` of every bucket that stores ``fingerprint``."""
        return [(t, key) for t, (key, _) in enumerate(self.split(fingerprint))]

    def residual(self, table: int, fingerprint: int) -> int:
        return self.split(fingerprint)[table][1]

    def probe_keys(self, fingerprint: int) -> list[tuple[int, int]]:
        """``(table, key)`` of every bucket a lookup of ``fingerprint`` reads (insert keys first)."""
        keys = self.insert_keys(fingerprint)
        if not self.multiprobe:
            return keys
        return keys + [(t, key ^ (1 << i)) for t, key in keys for i in range(len(self._keys[t]))]

    def join(self, table: int, key: int, residual: int) -> int:
        """The fingerprint whose ``table`` key and residual are ``key`` and ``residual``."""
        fingerprint = 0
        for value, positions in ((key, self._keys[table]), (residual, self._residuals[table])):
            for i, pos in enumerate(positions):
                fingerprint |= ((value >> i) & 1) << pos
        return fingerprint

    @abstractmethod
    def collision_probability(self, distance: int) -> float:
        """Probability that two fingerprints ``distance`` bits apart share a probed bucket, the
        differing bits being uniformly placed (exact; 1.0 up to :attr:`guaranteed_distance`)."""

    def _check_distance(self, distance: int) -> None:
        if not 0 <= distance <= self.bits:
            raise ValueError(f"distance must be between 0 and {self.bits}, got {distance}")

    @staticmethod
    def _byte_tables(key: tuple[int, ...], residual: tuple[int, ...]) -> list[list[tuple[int, int]]]:
        where = {pos: (0, i) for i, pos in enumerate(key)} | {pos: (1, i) for i, pos in enumerate(residual)}
        tables = []
        for j in range(8):
            row = []
            for b in range(256):
                parts = [0, 0]
                for bit in range(8):
                    if b >> bit & 1 and 8 * j + bit in where:
                        part, i = where[8 * j + bit]
                        parts[part] |= 1 << i
                row.append((parts[0], parts[1]))
            tables.append(row)
        return tables


class BlockLayout(Layout):
    """Pigeonhole blocks: ``bands`` contiguous blocks whose sizes differ by at most one bit.

    Block ``t``'s key equals :func:`scrapy_simhash.fingerprint.band_keys`'s value for band ``t``.
    """

    def __init__(self, bits: int = 64, bands: int = 4, multiprobe: bool = False) -> None:
        if not 1 <= bands <= bits:
            raise ValueError(f"bands must be between 1 and {bits}, got {bands}")
        positions, start = [], 0
        for band in range(bands):
            size = bits // bands + (band < bits % bands)
            positions.append(range(start, start + size))
            start += size
        super().__init__(positions, bits=bits, multiprobe=multiprobe)
        self.bands = bands
        self.guaranteed_distance = 2 * bands - 1 if multiprobe else bands - 1
        self._blocks = [(p[0], (1 << len(p)) - 1, (1 << p[0]) - 1) for p in self._keys]

    def split(self, fingerprint: int) -> list[tuple[int, int]]:
        # Contiguous blocks: shifts and masks, several times faster than the generic byte tables.
        return [
            ((fingerprint >> start) & mask, (fingerprint & below) | (fingerprint >> start + mask.bit_length()) << start)
            for start, mask, below in self._blocks
        ]

    def collision_probability(self, distance: int) -> float:
        self._check_distance(distance)
        # Blocks are disjoint: count placements that put more than ``slack`` differing bits in
        # every block (the pairs that are missed), block by block.
        slack = 1 if self.multiprobe else 0
        missed = [1] + [0] * distance  # missed[k]: placements of k bits over the blocks seen so far
        for positions in self._keys:
            size = len(positions)
            missed = [
                sum(missed[k - j] * comb(size, j) for j in range(slack + 1, min(size, k) + 1))
                for k in range(distance + 1)
            ]
        return 1.0 - missed[distance] / comb(self.bits, distance)

    def __repr__(self) -> str:
        return f"BlockLayout(bits={self.bits}, bands={self.bands}, multiprobe={self.multiprobe})"


class SampledLayout(Layout):
    """Hamming LSH: ``tables`` tables, each keyed by ``bits_per_table`` positions drawn with ``seed``.

    The positions depend only on the arguments, so every process (and tomorrow's recrawl) agrees.
    """

    def __init__(
        self, tables: int, bits_per_table: int, *, seed: int = 0, bits: int = 64, multiprobe: bool = False
    ) -> None:
        if not 1 <= tables <= 16:
            raise ValueError(f"tables must be between 1 and 16, got {tables}")
        if not 1 <= bits_per_table <= bits:
            raise ValueError(f"bits_per_table must be between 1 and {bits}, got {bits_per_table}")
        rng = random.Random(seed)
        positions = [rng.sample(range(bits), bits_per_table) for _ in range(tables)]
        super().__init__(positions, bits=bits, multiprobe=multiprobe)
        self.bits_per_table = bits_per_table
        self.seed = seed
        self._estimated: np.ndarray | None = None
        masks = [sum(1 << p for p in positions) for positions in self._keys]
        # _unions[s]: bit positions covered by the tables in subset s (bitmask over tables).
        self._unions = [0] * (1 << tables)
        for s in range(1, 1 << tables):
            low = s & -s
            self._unions[s] = self._unions[s ^ low] | masks[low.bit_length() - 1]
        self.guaranteed_distance = 0
        while self.guaranteed_distance < bits and self._exact_collision_probability(self.guaranteed_distance + 1) == 1:
            self.guaranteed_distance += 1
        if multiprobe:  # a lower bound: one differing bit leaves every table within one flip
            self.guaranteed_distance = max(self.guaranteed_distance, 1)

    def table_collision_probability(self, distance: int) -> float:
        """One table's chance to collide at ``distance``: C(bits - d, r) / C(bits, r)."""
        self._check_distance(distance)
        return comb(self.bits - distance, self.bits_per_table) / comb(self.bits, self.bits_per_table)

    def collision_probability(self, distance: int) -> float:
        """Exact without multi-probe; with it, estimated over a fixed sample (see below)."""
        self._check_distance(distance)
        if self.multiprobe:
            return float(self._estimated_collisions()[distance])
        return self._exact_collision_probability(distance)

    def _exact_collision_probability(self, distance: int) -> float:
        # Inclusion-exclusion: P(some table avoids every differing bit).
        hits = sum(
            (-1) ** (s.bit_count() + 1) * comb(self.bits - union.bit_count(), distance)
            for s, union in enumerate(self._unions)
            if s
        )
        return hits / comb(self.bits, distance)

    def _estimated_collisions(self) -> np.ndarray:
        """P(some table has at most one differing key bit) for every distance, over a fixed sample of
        MULTIPROBE_SAMPLES placements: "at most one" has no inclusion-exclusion form over overlapping
        tables. Deterministic (fixed generator seed), standard error below 0.003."""
        if self._estimated is None:
            order = np.argsort(np.random.default_rng(0).random((MULTIPROBE_SAMPLES, self.bits)), axis=1)
            member = np.zeros((self.tables, self.bits), dtype=np.int8)
            for t, positions in enumerate(self._keys):
                member[t, list(positions)] = 1
            # hits[t, i, d - 1]: key bits of table t among the first d differing positions of placement i
            hits = np.cumsum(member[:, order], axis=2, dtype=np.int8)
            collide = (hits <= 1).any(axis=0).mean(axis=0)
            self._estimated = np.concatenate(([1.0], collide))
        return self._estimated

    def __repr__(self) -> str:
        return (
            f"SampledLayout(tables={self.tables}, bits_per_table={self.bits_per_table}, seed={self.seed}, "
            f"bits={self.bits}, multiprobe={self.multiprobe})"
        )


def make_layout(
    max_distance: int,
    *,
    kind: str = "blocks",
    bands: int | None = None,
    multiprobe: bool = False,
    tables: int | None = None,
    bits_per_table: int | None = None,
    seed: int = 0,
    bits: int = 64,
) -> Layout:
    """The layout the settings ask for.

    ``blocks`` derives ``bands = max_distance + 1`` (or ``ceil((max_distance + 1) / 2)`` with
    multi-probe) unless ``bands`` is given, and raises ``ValueError`` when the bands cannot guarantee
    ``max_distance``. ``sampled`` needs ``tables`` and ``bits_per_table``; it promises no distance.
    """
    if max_distance < 0 or max_distance >= bits:
        raise ValueError(f"max_distance must be between 0 and {bits - 1}, got {max_distance}")
    if kind == "sampled":
        if tables is None or bits_per_table is None:
            raise ValueError("a sampled layout needs tables and bits_per_table (SIMHASH_LAYOUT_TABLES/_BITS)")
        return SampledLayout(tables, bits_per_table, seed=seed, bits=bits, multiprobe=multiprobe)
    if kind != "blocks":
        raise ValueError(f"layout kind must be one of {LAYOUT_KINDS}, got {kind!r}")
    if bands is None:
        bands = (max_distance + 2) // 2 if multiprobe else max_distance + 1
    layout = BlockLayout(bits=bits, bands=bands, multiprobe=multiprobe)
    if layout.guaranteed_distance < max_distance:
        need = f"at least {(max_distance + 2) // 2 if multiprobe else max_distance + 1}"
        raise ValueError(
            f"{bands} bands{' with multi-probe' if multiprobe else ''} guarantee only distance "
            f"{layout.guaranteed_distance}, not max_distance={max_distance}: use {need} bands"
            + ("" if multiprobe else " or enable multi-probe")
        )
    return layout
