"""Byte encodings the index stores: verification blobs and fingerprints. Never pickled, never evaluated.

Shingle hashes are sorted distinct uint32; the blob stores their deltas as byte planes: a 4-byte
count n, the two low byte planes raw (2n bytes: random, zlib cannot shrink them), then the two high
planes zlib-compressed. Deltas of n sorted random 32-bit values are about 2**32 / n, so the high
planes are nearly constant: 2.90 bytes per hash on the shared corpus against 4 raw, and compressing
only half the bytes halves the time (README "The band index" has the figures and the benchmark).
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["decode_fingerprint", "decode_hashes", "encode_fingerprint", "encode_hashes", "to_signed", "to_unsigned"]

_LEVEL = 1  # level 6 saves under 1% here at 15% more time


def encode_hashes(hashes: np.ndarray) -> bytes:
    """Compress sorted distinct 32-bit hashes; raises ValueError on anything else (it would not round-trip)."""
    values = np.asarray(hashes)
    if values.ndim != 1 or (len(values) and (values.min() < 0 or values.max() > 0xFFFFFFFF)):
        raise ValueError("shingle hashes must be a 1-D array of 32-bit unsigned values")
    if not (values[1:] > values[:-1]).all():
        raise ValueError("shingle hashes must be sorted and distinct")
    deltas = np.diff(values.astype(np.uint32), prepend=np.uint32(0))
    planes = deltas.astype(">u4").view(np.uint8).reshape(-1, 4).T
    return len(values).to_bytes(4, "big") + planes[2:].tobytes() + zlib.compress(planes[:2].tobytes(), _LEVEL)


def decode_hashes(blob: bytes) -> np.ndarray:
    count = int.from_bytes(blob[:4], "big")
    low = np.frombuffer(blob, dtype=np.uint8, count=2 * count, offset=4)
    high = np.frombuffer(zlib.decompress(blob[4 + 2 * count :]), dtype=np.uint8)
    deltas = np.concatenate([high, low]).reshape(4, count).T.copy().view(">u4").ravel()
    return np.cumsum(deltas, dtype=np.uint32)


def encode_fingerprint(fingerprint: int) -> bytes:
    """The 8-byte big-endian form the Redis backend keys its fingerprint hash by."""
    return fingerprint.to_bytes(8, "big")


def decode_fingerprint(data: bytes) -> int:
    return int.from_bytes(data, "big")


def to_signed(value: int) -> int:
    """A 64-bit unsigned value as the signed integer SQLite can store."""
    return value - (1 << 64) if value >= 1 << 63 else value


def to_unsigned(value: int) -> int:
    return value + (1 << 64) if value < 0 else value
