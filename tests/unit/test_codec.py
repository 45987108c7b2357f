"""Verification blobs and fingerprint encodings round-trip exactly and refuse what would not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.index.codec import (
    decode_hashes,
    decode_verification,
    encode_hashes,
    encode_verification,
    encoded_size,
    to_signed,
    to_unsigned,
)
from scrapy_simhash.whole_text import WholeText

hash_sets = st.sets(st.integers(0, 2**32 - 1), max_size=300).map(lambda s: np.array(sorted(s), dtype=np.uint32))


@given(hash_sets)
def test_hashes_round_trip(hashes):
    decoded = decode_hashes(encode_hashes(hashes), 10**6)
    assert decoded.dtype == np.uint32 and np.array_equal(decoded, hashes)


def test_sorted_random_hashes_compress_below_four_bytes_each():
    hashes = np.unique(np.random.default_rng(0).integers(0, 2**32, 2000, dtype=np.uint64)).astype(np.uint32)
    assert len(encode_hashes(hashes)) < 3.5 * len(hashes)


def test_edge_sets_round_trip():
    for hashes in ([], [0], [2**32 - 1], [0, 2**32 - 1], range(0, 2**32, 2**20), range(70_000)):
        values = np.array(hashes, dtype=np.uint32)
        assert np.array_equal(decode_hashes(encode_hashes(values), 10**6), values)


@given(hash_sets)
def test_a_blobs_length_follows_from_its_count(hashes):
    assert len(encode_hashes(hashes)) == encoded_size(len(hashes))


def test_a_blob_claiming_more_hashes_than_a_text_can_have_is_refused_before_allocating():
    """A planted blob: its header says 400 M hashes; nothing that size may be allocated to find out."""
    planted = b"\x01" + (400_000_000).to_bytes(4, "big") + bytes(64)
    with pytest.raises(ValueError, match="more than the 1000000"):
        decode_hashes(planted, 1_000_000)
    honest = encode_hashes(np.arange(0, 20_000, 2, dtype=np.uint32))
    with pytest.raises(ValueError, match="more than"):
        decode_hashes(honest, 9_999)


@pytest.mark.parametrize(
    "junk", [b"", b"\x01", b"\x01" + b"\xff" * 40, b"\x01\x00\x00\x00\x09" + bytes(40), b"\x80pickle"]
)
def test_bytes_that_are_not_a_blob_are_refused(junk):
    with pytest.raises(ValueError, match="verification blob"):
        decode_hashes(junk, 10**6)


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


@settings(deadline=None)  # three encodes: a loaded machine, not the code, is what a deadline would catch
@given(hash_sets, hash_sets, hash_sets)
def test_verification_with_its_whole_text_difference_round_trips(hashes, gained, lost):
    blob = encode_verification(hashes, WholeText(gained, lost))
    decoded, whole = decode_verification(blob, 10**6)
    assert np.array_equal(decoded, hashes)
    if not len(gained) and not len(lost):
        assert blob == encode_hashes(hashes) and whole.same
    else:
        assert np.array_equal(whole.gained, gained) and np.array_equal(whole.lost, lost)


def test_a_verification_blob_cut_or_with_two_sections_is_refused():
    hashes = np.arange(20, dtype=np.uint32)
    blob = encode_verification(hashes, WholeText(np.arange(30, 40, dtype=np.uint32), np.arange(5, dtype=np.uint32)))
    for bad in (blob[:-1], encode_hashes(hashes) * 2, blob + b"\0"):
        with pytest.raises(ValueError):
            decode_verification(bad, 10**6)
