"""Byte encodings the index stores: verification blobs and fingerprints. Never pickled, never evaluated.

Shingle hashes are sorted distinct uint32, stored Elias-Fano coded: n values in [0, 2**32) split
into l = 32 - bit_length(n) low bits, kept verbatim (whole bytes, then the remaining bits packed 8
values to a group), and the high bits, written as a bit vector with a 1 at ``high[i] + i`` (about 2
bits a value, since the high parts of sorted values only grow). That is within a few percent of the
entropy of a random sorted set: 2.87 bytes per hash on the shared corpus against 4 raw, with
numpy only and no zlib pass: 1.8x cheaper to encode than the zlib-compressed byte planes it
replaced (docs/decisions/verification-codec.md).

Blob: a format byte, the 4-byte big-endian count n, the low bytes, the packed low bits, the high bit
vector. Its length follows from n exactly, so a blob is checked whole, and n against the caller's
bound, before anything is allocated: a planted blob cannot make the crawler allocate gigabytes.

A page stripped of furniture stores two more sections after the first, coded the same way: the
hashes only its whole text has and those only its stripped text has (:mod:`scrapy_simhash.whole_text`).
"""

from __future__ import annotations

import numpy as np

from scrapy_simhash.whole_text import SAME_TEXT, WholeText

__all__ = [
    "decode_hashes",
    "decode_verification",
    "encode_hashes",
    "encode_verification",
    "encoded_size",
    "to_signed",
    "to_unsigned",
]

_ELIAS_FANO = 1
_GROUP_SHIFTS = np.arange(8, dtype=np.uint64)  # bit offsets of 8 values in a group, times the bit width


def _split(count: int) -> tuple[int, int, int]:
    """(low bits l, whole low bytes, remaining low bits) for ``count`` values: 2**(32 - l) ~ count."""
    low_bits = 32 - count.bit_length() if count else 32
    return low_bits, *divmod(low_bits, 8)


def encode_hashes(hashes: np.ndarray) -> bytes:
    """Encode sorted distinct 32-bit hashes; raises ValueError on anything else (it would not round-trip)."""
    values = np.asarray(hashes)
    wide = values.dtype != np.uint32 and len(values) and (values.min() < 0 or values.max() > 0xFFFFFFFF)
    if values.ndim != 1 or wide:
        raise ValueError("shingle hashes must be a 1-D array of 32-bit unsigned values")
    values = np.ascontiguousarray(values, dtype="<u4")
    if not (values[1:] > values[:-1]).all():
        raise ValueError("shingle hashes must be sorted and distinct")
    count = len(values)
    low_bits, whole, rest = _split(count)
    octets = values.view(np.uint8).reshape(count, 4)
    # A narrower unsigned cast keeps the low bytes and copies contiguously (3 bytes: small sets only).
    low = octets[:, :whole] if whole in (0, 3) else values.astype(f"<u{whole}")
    parts = [bytes([_ELIAS_FANO]), count.to_bytes(4, "big"), low.tobytes()]
    if rest:
        groups = np.zeros((-(-count // 8), 8), dtype="<u8")
        groups.ravel()[:count] = octets[:, whole]
        groups &= np.uint64((1 << rest) - 1)
        groups <<= _GROUP_SHIFTS * np.uint64(rest)
        # The fields do not overlap, so a sum is their bitwise or (and ~2x faster than or.reduce).
        parts.append(groups.sum(axis=1, dtype="<u8").view(np.uint8).reshape(-1, 8)[:, :rest].tobytes())
    upper = np.zeros(count + (1 << (32 - low_bits)), dtype=bool)
    high = (values >> np.uint32(low_bits)).astype(np.intp)
    high += np.arange(count)
    upper[high] = True
    parts.append(np.packbits(upper).tobytes())
    return b"".join(parts)


def encoded_size(count: int) -> int:
    """Bytes of the blob of ``count`` hashes: fixed by the count alone."""
    low_bits, whole, rest = _split(count)
    return 5 + count * whole + -(-count // 8) * rest + -(-(count + (1 << (32 - low_bits))) // 8)


def encode_verification(hashes: np.ndarray, whole: WholeText = SAME_TEXT) -> bytes:
    """A record's stored verification data: its hashes, then how its whole text's differ, if they do."""
    if whole.same:
        return encode_hashes(hashes)
    return encode_hashes(hashes) + encode_hashes(whole.gained) + encode_hashes(whole.lost)


def decode_verification(blob: bytes, max_count: int) -> tuple[np.ndarray, WholeText]:
    """What :func:`encode_verification` wrote; ValueError for anything else (as :func:`decode_hashes`)."""
    sections, start = [], 0
    while start < len(blob) and len(sections) < 3:
        end = start + encoded_size(_count(blob[start:], max_count))
        sections.append(decode_hashes(blob[start:end], max_count))
        start = end
    if start != len(blob) or len(sections) == 2:
        raise ValueError("not a verification blob: its length does not match its counts")
    if len(sections) == 1:
        return sections[0], SAME_TEXT
    return sections[0], WholeText(sections[1], sections[2])


def _count(blob: bytes, max_count: int) -> int:
    if blob[:1] != bytes([_ELIAS_FANO]) or len(blob) < 5:
        raise ValueError("not a verification blob")
    count = int.from_bytes(blob[1:5], "big")
    if count > max_count:
        raise ValueError(f"verification blob of {count} hashes, more than the {max_count} a text can have")
    return count


def decode_hashes(blob: bytes, max_count: int) -> np.ndarray:
    """The sorted uint32 hashes of a blob; ValueError for bytes that are not one, or for more than
    ``max_count`` hashes (checked before anything is allocated)."""
    count = _count(blob, max_count)
    if len(blob) != encoded_size(count):
        raise ValueError("not a verification blob: its length does not match its count")
    low_bits, whole, rest = _split(count)
    if whole in (1, 2, 4):
        values = np.frombuffer(blob, f"<u{whole}", count, 5).astype(np.uint32)
    else:  # 0 or 3 low bytes (small sets only): column by column
        octets = np.frombuffer(blob, np.uint8, count * whole, 5).reshape(count, whole)
        values = np.zeros(count, dtype=np.uint32)
        for i in range(whole):
            values |= octets[:, i].astype(np.uint32) << np.uint32(8 * i)
    at = 5 + count * whole
    if rest:
        groups = -(-count // 8)
        packed = np.zeros((groups, 8), dtype=np.uint8)
        packed[:, :rest] = np.frombuffer(blob, np.uint8, groups * rest, at).reshape(groups, rest)
        at += groups * rest
        bits = (packed.view("<u8") >> (_GROUP_SHIFTS * np.uint64(rest))) & np.uint64((1 << rest) - 1)
        values |= bits.ravel()[:count].astype(np.uint32) << np.uint32(8 * whole)
    # nonzero() of a bool view: numpy's count-then-fill path for uint8 took 3x as long.
    high = np.unpackbits(np.frombuffer(blob, np.uint8, offset=at)).view(bool).nonzero()[0]
    if len(high) != count:
        raise ValueError("not a verification blob: its high bits do not match its count")
    if low_bits < 32:
        values |= (high - np.arange(count)).astype(np.uint32) << np.uint32(low_bits)
    return values


def to_signed(value: int) -> int:
    """A 64-bit unsigned value as the signed integer SQLite can store."""
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value
