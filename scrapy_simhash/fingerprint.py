"""SimHash fingerprints of text: tokens -> word shingles -> 64-bit hashes -> bit votes.

Pure computation, no I/O and no settings. See README "How it works" for the hash choices.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Fingerprinter",
    "Signature",
    "band_keys",
    "hamming",
    "jaccard",
    "jaccard_hashes",
    "shingle_hash",
    "shingles",
    "simhash",
    "tokens",
]

WEIGHTINGS = ("frequency", "presence")

_TOKEN_RE = re.compile(r"\w+")
# Multiplier that folds a shingle's token hashes in order (odd, so the fold is a bijection
# in each position), and the murmur3 fmix64 constants that spread the result over all bits.
_FOLD = np.uint64(0x9E3779B97F4A7C15)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT33 = np.uint64(33)

# Token -> 64-bit hash memo. Vocabularies repeat across the pages of a crawl, so most tokens are
# hashed once per process; the memo is cleared when it grows past the bound to keep memory flat.
_TOKEN_HASHES: dict[str, int] = {}
_TOKEN_MEMO_LIMIT = 500_000


def tokens(text: str) -> list[str]:
    """NFKC-normalised, lower-cased ``\\w+`` runs of ``text``."""
    return _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).lower())


def shingles(text: str, width: int = 4) -> list[str]:
    """Overlapping word ``width``-grams of ``text``, space-joined.

    A text shorter than ``width`` tokens is one shingle of all its tokens; empty text gives ``[]``.
    """
    _check_width(width)
    toks = tokens(text)
    if len(toks) <= width:
        return [" ".join(toks)] if toks else []
    return [" ".join(toks[i : i + width]) for i in range(len(toks) - width + 1)]


def _token_hash(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


def _token_hashes(toks: list[str]) -> np.ndarray:
    memo = _TOKEN_HASHES
    try:
        return np.array(list(map(memo.__getitem__, toks)), dtype=np.uint64)
    except KeyError:
        missing = set(toks).difference(memo)
    if len(memo) + len(missing) > _TOKEN_MEMO_LIMIT:
        memo.clear()
        missing = set(toks)
    memo.update((t, _token_hash(t)) for t in missing)
    return np.array(list(map(memo.__getitem__, toks)), dtype=np.uint64)


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _SHIFT33)
    x = x * _FMIX1
    x = x ^ (x >> _SHIFT33)
    x = x * _FMIX2
    return x ^ (x >> _SHIFT33)


def _shingle_hashes(token_hashes: np.ndarray, width: int) -> np.ndarray:
    """One 64-bit hash per shingle: fmix64 of the ordered fold of its tokens' hashes."""
    n = len(token_hashes)
    if n == 0:
        return token_hashes
    span = min(width, n)
    folded = token_hashes[: n - span + 1].copy()
    for offset in range(1, span):
        folded *= _FOLD
        folded += token_hashes[offset : n - span + 1 + offset]
    return _fmix64(folded)


def shingle_hash(shingle: str) -> int:
    """The 64-bit hash :func:`simhash` gives ``shingle`` (a space-joined run of tokens)."""
    return int(_shingle_hashes(_token_hashes(shingle.split(" ")), width=len(shingle.split(" ")))[0])


def _check_width(width: int) -> None:
    if width < 1:
        raise ValueError(f"shingle width must be >= 1, got {width}")


@dataclass(frozen=True)
class Signature:
    """A text's fingerprint and the sorted distinct shingle hashes that Jaccard verification needs."""

    fingerprint: int
    shingles: np.ndarray


class Fingerprinter:
    """Fingerprints texts with fixed parameters; the object the pipeline builds once from settings.

    ``bits`` may be 1..64: a fingerprint of fewer bits is the low bits of the 64-bit one, since
    bit i is voted by bit i of the shingle hashes alone.
    """

    def __init__(self, *, bits: int = 64, width: int = 4, weighting: str = "frequency") -> None:
        if not 1 <= bits <= 64:
            raise ValueError(f"bits must be between 1 and 64, got {bits}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        _check_width(width)
        self.bits = bits
        self.width = width
        self.weighting = weighting
        self._mask = (1 << bits) - 1

    def shingle_hashes(self, text: str) -> np.ndarray:
        """Hashes of every shingle of ``text`` in text order, repeats included."""
        return _shingle_hashes(_token_hashes(tokens(text)), self.width)

    def boilerplate_hashes(self, boilerplate: Iterable[str]) -> np.ndarray:
        """Sorted hashes of boilerplate shingle strings, ready for :meth:`signature`."""
        return np.unique(np.fromiter(map(shingle_hash, boilerplate), dtype=np.uint64))

    def signature(self, text: str, boilerplate: np.ndarray | None = None) -> Signature:
        """Fingerprint ``text``, ignoring shingles whose hashes are in sorted ``boilerplate``."""
        hashes, counts = np.unique(self.shingle_hashes(text), return_counts=True)
        if boilerplate is not None and len(boilerplate) and len(hashes):
            keep = ~np.isin(hashes, boilerplate, assume_unique=True)
            hashes, counts = hashes[keep], counts[keep]
        return Signature(self.vote(hashes, counts), hashes)

    def vote(self, hashes: np.ndarray, counts: np.ndarray) -> int:
        """Charikar's bit vote: bit i is set where the weights of hashes with bit i set outweigh the rest."""
        if len(hashes) == 0:
            return 0
        # float64 sums of integer weights are exact far beyond any text SIMHASH_MAX_CHARS admits.
        weights = counts.astype(np.float64) if self.weighting == "frequency" else np.ones(len(hashes))
        bits = np.unpackbits(hashes.astype("<u8").view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        majority = 2 * (weights @ bits) > weights.sum()
        value = int(np.packbits(majority, bitorder="little").view("<u8")[0])
        return value & self._mask

    def fingerprint(self, text: str, boilerplate: np.ndarray | None = None) -> int:
        return self.signature(text, boilerplate).fingerprint


def simhash(
    text: str,
    *,
    bits: int = 64,
    width: int = 4,
    boilerplate: Iterable[str] = frozenset(),
    weighting: str = "frequency",
) -> int:
    """Charikar SimHash of ``text``'s word shingles; 0 when no content is left (never index 0)."""
    fingerprinter = Fingerprinter(bits=bits, width=width, weighting=weighting)
    excluded = fingerprinter.boilerplate_hashes(boilerplate) if boilerplate else None
    return fingerprinter.fingerprint(text, excluded)


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    return (a ^ b).bit_count()


def jaccard_hashes(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted, distinct hash arrays; two empty sets give 1.0."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def jaccard(a_text: str, b_text: str, width: int = 4) -> float:
    """Shingle-set Jaccard similarity of two texts; two empty texts give 1.0."""
    return jaccard_hashes(*(np.unique(Fingerprinter(width=width).shingle_hashes(t)) for t in (a_text, b_text)))


def band_keys(fingerprint: int, bands: int = 4, bits: int = 64) -> list[tuple[int, int]]:
    """Split a fingerprint into ``bands`` contiguous blocks: ``(block index, block value)``.

    Pigeonhole: two fingerprints within ``bands - 1`` bits agree on at least one block.
    Block sizes differ by at most one bit when ``bands`` does not divide ``bits``.
    """
    if not 1 <= bands <= bits:
        raise ValueError(f"bands must be between 1 and {bits}, got {bands}")
    keys = []
    start = 0
    for band in range(bands):
        size = bits // bands + (band < bits % bands)
        keys.append((band, (fingerprint >> start) & ((1 << size) - 1)))
        start += size
    return keys
