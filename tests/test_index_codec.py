"""Verification blobs and fingerprint encodings round-trip exactly and refuse what would not."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash.index import Candidate
from scrapy_simhash.index.codec import decode_hashes, encode_hashes, to_signed, to_unsigned

hash_sets = st.sets(st.integers(0, 2**32 - 1), max_size=300).map(lambda s: np.array(sorted(s), dtype=np.uint32))


@given(hash_sets)
def test_hashes_round_trip(hashes):
    decoded = decode_hashes(encode_hashes(hashes))
    assert decoded.dtype == np.uint32 and np.array_equal(decoded, hashes)


def test_sorted_random_hashes_compress_below_four_bytes_each():
    hashes = np.unique(np.random.default_rng(0).integers(0, 2**32, 2000, dtype=np.uint64)).astype(np.uint32)
    assert len(encode_hashes(hashes)) < 3.5 * len(hashes)


def test_edge_sets_round_trip():
    for hashes in ([], [0], [2**32 - 1], [0, 2**32 - 1], range(0, 2**32, 2**20), range(70_000)):
        values = np.array(hashes, dtype=np.uint32)
        assert np.array_equal(decode_hashes(encode_hashes(values)), values)


def test_blobs_of_the_earlier_byte_plane_format_are_still_read():
    """Indexes written before the Elias-Fano format hold blobs of deltas as byte planes, high ones zlib'ed."""
    hashes = np.unique(np.random.default_rng(1).integers(0, 2**32, 500, dtype=np.uint64)).astype(np.uint32)
    planes = np.diff(hashes, prepend=np.uint32(0)).astype(">u4").view(np.uint8).reshape(-1, 4).T
    blob = len(hashes).to_bytes(4, "big") + planes[2:].tobytes() + zlib.compress(planes[:2].tobytes())
    assert np.array_equal(decode_hashes(blob), hashes)


@pytest.mark.parametrize(
    "junk", [b"", b"\x01", b"\x01" + b"\xff" * 40, b"\x01\x00\x00\x00\x09" + bytes(40), b"\x80pickle"]
)
def test_bytes_that_are_not_a_blob_are_refused(junk):
    with pytest.raises(ValueError, match="not a verification blob"):
        decode_hashes(junk)


@pytest.mark.parametrize(
    "bad", [np.array([3, 1], dtype=np.uint32), np.array([1, 1], dtype=np.uint32), np.array([2**32]), np.array([-1])]
)
def test_unsorted_repeated_or_wide_hashes_are_refused(bad):
    with pytest.raises(ValueError, match="shingle hashes"):
        encode_hashes(bad)


@given(st.integers(0, 2**64 - 1))
def test_fingerprints_survive_sqlite_signed_integers(fingerprint):
    signed = to_signed(fingerprint)
    assert -(2**63) <= signed < 2**63 and to_unsigned(signed) == fingerprint


def test_candidates_decode_their_blob_when_read_and_share_it_read_only():
    hashes = np.arange(0, 3000, 3, dtype=np.uint32)
    blob = encode_hashes(hashes)
    first, again = Candidate("a", 1, 0, blob), Candidate("b", 1, 0, bytes(blob))
    assert np.array_equal(first.shingles, hashes)
    assert again.shingles is first.shingles  # the same blob is decoded once
    with pytest.raises(ValueError):
        first.shingles[0] = 7
    broken = Candidate("c", 1, 0, b"\x01junk")
    with pytest.raises(ValueError):
        broken.shingles
