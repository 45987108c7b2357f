"""SimHash fingerprints of text: tokens -> word shingles -> 64-bit hashes -> bit votes.

Pure computation, no I/O and no settings. Tokenising and hashing are vectorised with numpy over the
text's code points, so no per-token Python work is done; README "How it works" specifies every step
precisely enough to reimplement it elsewhere.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Fingerprinter",
    "RecordSignature",
    "Shingling",
    "Signature",
    "UNSEGMENTED_RANGES",
    "band_keys",
    "hamming",
    "jaccard",
    "jaccard_hashes",
    "shingle_hash",
    "shingles",
    "simhash",
    "token_count",
    "tokens",
    "verification_hashes",
]

WEIGHTINGS = ("frequency", "presence")

# Scripts written without spaces between words. ``\w+`` would make a whole run of them one token (a
# one-character edit would change the only token), so each of their word characters is a token of
# its own and width-w shingles become character w-grams there. Hangul is absent on purpose: Korean
# separates words with spaces. Inclusive code point ranges.
UNSEGMENTED_RANGES: tuple[tuple[str, int, int], ...] = (
    ("Thai", 0x0E00, 0x0E7F),
    ("Lao", 0x0E80, 0x0EFF),
    ("Myanmar", 0x1000, 0x109F),
    ("Khmer", 0x1780, 0x17FF),
    ("Khmer Symbols", 0x19E0, 0x19FF),
    ("CJK Symbols and Punctuation (iteration marks, ideographic numbers)", 0x3000, 0x303F),
    ("Hiragana", 0x3040, 0x309F),
    ("Katakana", 0x30A0, 0x30FF),
    ("Bopomofo", 0x3100, 0x312F),
    ("Bopomofo Extended", 0x31A0, 0x31BF),
    ("Katakana Phonetic Extensions", 0x31F0, 0x31FF),
    ("CJK Unified Ideographs Extension A", 0x3400, 0x4DBF),
    ("CJK Unified Ideographs", 0x4E00, 0x9FFF),
    ("Yi Syllables", 0xA000, 0xA48F),
    ("Myanmar Extended-B", 0xA9E0, 0xA9FF),
    ("Myanmar Extended-A", 0xAA60, 0xAA7F),
    ("CJK Compatibility Ideographs", 0xF900, 0xFAFF),
    ("Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana Extension", 0x1AFF0, 0x1B16F),
    ("Supplementary and Tertiary Ideographic Planes (CJK Extensions B-I)", 0x20000, 0x3FFFF),
)

# Token hash: polynomial over the token's code points, sum(cp[j] * _BASE**j) mod 2**64 (XXH64's
# PRIME64_1; odd, so its inverse mod 2**64 exists and a token's hash falls out of prefix sums).
_BASE = 0x9E3779B185EBCA87
# Multiplier that folds a shingle's token hashes in order (odd, so the fold is a bijection in each
# position), and the murmur3 fmix64 constants that spread a value over all 64 bits.
_FOLD = np.uint64(0x9E3779B97F4A7C15)
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT33 = np.uint64(33)

_NON_WORD, _WORD, _SOLO = 0, 1, 2


def _code_point_classes() -> np.ndarray:
    """Class of every code point: non-word, ``\\w`` word character, or a word character of its own.

    Built from ``re`` itself, so the word characters are exactly those of ``\\w`` in this Python.
    """
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    classes = np.zeros(0x110000, dtype=np.uint8)
    for run in re.finditer(r"\w+", every):
        classes[run.start() : run.end()] = _WORD
    for _, first, last in UNSEGMENTED_RANGES:
        block = classes[first : last + 1]
        block[block == _WORD] = _SOLO
    return classes


_CLASSES = _code_point_classes()
# Powers of _BASE and of its inverse by position, grown (doubling) to the longest text seen.
_POWERS = (np.ones(0, dtype=np.uint64), np.ones(0, dtype=np.uint64))


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """At least ``n`` powers of _BASE and of its inverse, kept: a cumprod per call costs ~30%."""
    global _POWERS
    if len(_POWERS[0]) < n:
        size = max(1024, 1 << (n - 1).bit_length())
        tables = []
        for factor in (_BASE, pow(_BASE, -1, 1 << 64)):
            table = np.full(size, factor, dtype=np.uint64)
            table[0] = 1
            tables.append(np.cumprod(table, out=table))  # uint64 products wrap mod 2**64
        _POWERS = (tables[0], tables[1])
    return _POWERS


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _segment(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Code points of normalised ``text`` and the [start, end) code point offsets of its tokens."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    # Classes with a non-word sentinel either side, so that every token has an edge at both ends.
    padded = np.zeros(len(points) + 2, dtype=np.uint8)
    classes = padded[1:-1]
    np.take(_CLASSES, points, out=classes, mode="clip")  # every code point is in range
    if padded.max() < _SOLO:  # only \w runs: the class changes at every token's start and end, alternately
        edges = np.flatnonzero(padded[1:] != padded[:-1])
        return points, edges[0::2], edges[1::2]
    word = classes != _NON_WORD
    glue = classes == _WORD
    joins = glue[1:] & glue[:-1]  # joins[i]: code point i + 1 continues the token of code point i
    edge = np.ones(1, dtype=bool)
    starts = np.flatnonzero(word & np.concatenate((edge, ~joins)))
    ends = np.flatnonzero(word & np.concatenate((~joins, edge))) + 1
    return points, starts, ends


def _fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's finaliser, in place on ``x`` (an array the caller owns), which it returns."""
    x ^= x >> _SHIFT33
    x *= _FMIX1
    x ^= x >> _SHIFT33
    x *= _FMIX2
    x ^= x >> _SHIFT33
    return x


def _token_hashes(normalised: str) -> np.ndarray:
    """fmix64 of each token's polynomial hash, in text order, from one prefix sum over the text."""
    points, starts, ends = _segment(normalised)
    n = len(points)
    powers, inverses = _powers(n)
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    np.multiply(points, powers[:n], out=prefix[1:])
    np.cumsum(prefix[1:], out=prefix[1:])
    hashes = prefix[ends]
    hashes -= prefix[starts]
    hashes *= inverses[starts]
    return _fmix64(hashes)


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


def tokens(text: str) -> list[str]:
    """Tokens of NFKC-normalised, lower-cased ``text``: ``\\w+`` runs, except that every word
    character of an unsegmented script (:data:`UNSEGMENTED_RANGES`) is a token of its own."""
    normalised = _normalise(text)
    _, starts, ends = _segment(normalised)
    return [normalised[start:end] for start, end in zip(starts.tolist(), ends.tolist(), strict=True)]


def token_count(text: str) -> int:
    """``len(tokens(text))`` without building the token strings (a word count for length rules)."""
    return len(_segment(_normalise(text))[1])


def shingles(text: str, width: int = 4) -> list[str]:
    """Overlapping ``width``-grams of :func:`tokens`, space-joined.

    A text shorter than ``width`` tokens is one shingle of all its tokens; empty text gives ``[]``.
    """
    _check_width(width)
    toks = tokens(text)
    if len(toks) <= width:
        return [" ".join(toks)] if toks else []
    return [" ".join(toks[i : i + width]) for i in range(len(toks) - width + 1)]


def shingle_hash(shingle: str) -> int:
    """The 64-bit hash fingerprinting gives ``shingle``, a string as :func:`shingles` returns it.

    The shingle is re-tokenised, so the hash is the fold over all its tokens: exactly the value the
    text path computes for the same run of tokens.
    """
    token_hashes = _token_hashes(_normalise(shingle))
    if len(token_hashes) == 0:
        raise ValueError(f"a shingle needs at least one token, got {shingle!r}")
    return int(_shingle_hashes(token_hashes, width=len(token_hashes))[0])


def _check_width(width: int) -> None:
    if width < 1:
        raise ValueError(f"shingle width must be >= 1, got {width}")


# _BYTE_BITS[v, k] is bit k of byte value v: turns per-byte vote tallies into per-bit votes.
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little").astype(np.float64)


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, sorted: a sort and a neighbour comparison.

    ``np.unique`` took several times as long (numpy 2 hashes, then sorts its result).
    """
    return _distinct_of_sorted(np.sort(values))


def _distinct_of_sorted(ordered: np.ndarray) -> np.ndarray:
    """The first of each run of equal values of sorted ``ordered``."""
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


@dataclass(frozen=True)
class Shingling:
    """A text tokenised once: its token count and every shingle's hash in text order, repeats included."""

    words: int
    hashes: np.ndarray


@dataclass(frozen=True)
class Signature:
    """A text's fingerprint and the sorted distinct shingle hashes that Jaccard verification needs."""

    fingerprint: int
    shingles: np.ndarray


@dataclass(frozen=True)
class RecordSignature:
    """What an index record keeps of a text: its fingerprint and its :func:`verification_hashes`."""

    fingerprint: int
    verification: np.ndarray


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

    def shingling(self, text: str) -> Shingling:
        """Tokenise ``text`` once: its token count (:func:`token_count`) and its shingle hashes."""
        token_hashes = _token_hashes(_normalise(text))
        return Shingling(len(token_hashes), _shingle_hashes(token_hashes, self.width))

    def shingle_hashes(self, text: str) -> np.ndarray:
        """Hashes of every shingle of ``text`` in text order, repeats included."""
        return self.shingling(text).hashes

    def boilerplate_hashes(self, boilerplate: Iterable[str]) -> np.ndarray:
        """Sorted hashes of boilerplate shingle strings, ready for :meth:`signature`."""
        return np.unique(np.fromiter(map(shingle_hash, boilerplate), dtype=np.uint64))

    def signature(self, text: str | Shingling, boilerplate: np.ndarray | None = None) -> Signature:
        """Fingerprint ``text`` (or its :meth:`shingling`), ignoring shingles whose hashes are in ``boilerplate``."""
        hashes = self._content_hashes(text, boilerplate)
        distinct = _sorted_distinct(hashes)
        # Frequency weighting: a shingle's weight is its number of occurrences, one vote each.
        return Signature(self.vote(hashes if self.weighting == "frequency" else distinct), distinct)

    def record_signature(self, text: str | Shingling, boilerplate: np.ndarray | None = None) -> RecordSignature:
        """:meth:`signature`'s fingerprint and the verification hashes of its shingles, without the sorted
        64-bit set in between (frequency weighting votes with every occurrence and needs no distinct set)."""
        hashes = self._content_hashes(text, boilerplate)
        if self.weighting == "frequency":
            return RecordSignature(self.vote(hashes), verification_hashes(hashes))
        distinct = _sorted_distinct(hashes)
        return RecordSignature(self.vote(distinct), verification_hashes(distinct))

    def _content_hashes(self, text: str | Shingling, boilerplate: np.ndarray | None) -> np.ndarray:
        """Every shingle hash of ``text`` not in sorted ``boilerplate``, repeats included."""
        hashes = (text if isinstance(text, Shingling) else self.shingling(text)).hashes
        if boilerplate is not None and len(boilerplate) and len(hashes):
            hashes = hashes[~np.isin(hashes, boilerplate)]
        return hashes

    def vote(self, hashes: np.ndarray) -> int:
        """Charikar's bit vote, one vote per element of ``hashes`` (repeats vote again): bit i is set
        where more than half of the elements have bit i set.

        Tallies byte values (8 bincounts) instead of unpacking 64 bits per hash.
        """
        if len(hashes) == 0:
            return 0
        columns = hashes.astype("<u8", copy=False).view(np.uint8).reshape(-1, 8).T
        # float64 sums of integer tallies are exact up to 2**53, far beyond any text's shingle count.
        tallies = np.empty((8, 256), dtype=np.float64)
        for byte, column in enumerate(columns):
            tallies[byte] = np.bincount(column, minlength=256)
        majority = 2 * (tallies @ _BYTE_BITS).ravel() > len(hashes)
        return int(np.packbits(majority, bitorder="little").view("<u8")[0]) & self._mask

    def fingerprint(self, text: str, boilerplate: np.ndarray | None = None) -> int:
        """The fingerprint alone (see :meth:`signature`)."""
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
    """Number of differing bits between two fingerprints (non-negative ints)."""
    if a < 0 or b < 0:
        raise ValueError(f"fingerprints are non-negative, got {a} and {b}")
    return (a ^ b).bit_count()


def verification_hashes(shingles: np.ndarray) -> np.ndarray:
    """The sorted distinct 32-bit hashes a record keeps for Jaccard: the low bits of its shingle hashes
    (distinct or not: repeats are dropped here)."""
    low = shingles.astype(np.uint32)
    low.sort()
    return _distinct_of_sorted(low)


def jaccard_hashes(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted, distinct hash arrays; two empty sets give 1.0.

    The intersection is counted in one merge: a stable sort (timsort) of the two concatenated sorted
    runs merges them in linear time, and each common hash becomes a pair of equal neighbours.
    ``np.intersect1d`` took ~4x as long (a full sort and an extra copy).
    """
    if len(a) == 0 and len(b) == 0:
        return 1.0
    merged = np.concatenate((a, b))
    merged.sort(kind="stable")
    inter = int(np.count_nonzero(merged[1:] == merged[:-1]))
    return inter / (len(a) + len(b) - inter)


def jaccard(a_text: str, b_text: str, width: int = 4) -> float:
    """Shingle-set Jaccard similarity of two texts; two empty texts give 1.0."""
    return jaccard_hashes(*(np.unique(Fingerprinter(width=width).shingle_hashes(t)) for t in (a_text, b_text)))


def band_keys(fingerprint: int, bands: int = 4, bits: int = 64) -> list[tuple[int, int]]:
    """Split a fingerprint into ``bands`` contiguous blocks: ``(block index, block value)``.

    Pigeonhole: two fingerprints within ``bands - 1`` bits agree on at least one block.
    Block sizes differ by at most one bit when ``bands`` does not divide ``bits``.
    """
    if not 1 <= bits <= 64:
        raise ValueError(f"bits must be between 1 and 64, got {bits}")
    if not 1 <= bands <= bits:
        raise ValueError(f"bands must be between 1 and {bits}, got {bands}")
    if not 0 <= fingerprint < 1 << bits:
        raise ValueError(f"fingerprint {fingerprint} does not fit in {bits} unsigned bits")
    keys = []
    start = 0
    for band in range(bands):
        size = bits // bands + (band < bits % bands)
        keys.append((band, (fingerprint >> start) & ((1 << size) - 1)))
        start += size
    return keys
