"""The record's verification hashes: the sorted distinct low 32 bits of its shingle hashes."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash.fingerprint import hashes_union, hashes_without, verification_hashes

hash_arrays = st.lists(st.integers(0, 2**64 - 1), max_size=300).map(lambda v: np.unique(np.array(v, dtype=np.uint64)))


@given(hash_arrays)
def test_matches_numpy_unique_of_the_low_32_bits(shingles: np.ndarray) -> None:
    got = verification_hashes(shingles)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, np.unique(shingles.astype(np.uint32)))


def test_colliding_low_bits_are_kept_once() -> None:
    # Distinct 64-bit hashes whose low 32 bits collide, in an order where the low bits are unsorted.
    shingles = np.array([5, 2**32 + 3, 2**33 + 5, 2**34 + 3, 2**35 + 1], dtype=np.uint64)
    np.testing.assert_array_equal(verification_hashes(shingles), np.array([1, 3, 5], dtype=np.uint32))


verification_arrays = st.lists(st.integers(0, 2**32 - 1), max_size=300).map(
    lambda v: np.unique(np.array(v, dtype=np.uint32))
)


@given(verification_arrays, verification_arrays, st.data())
def test_hashes_without_leaves_out_exactly_the_excluded(hashes, others, data) -> None:
    shared = data.draw(st.lists(st.sampled_from(hashes.tolist()), max_size=20)) if len(hashes) else []
    excluded = np.union1d(others, np.array(shared, dtype=np.uint32))
    np.testing.assert_array_equal(hashes_without(hashes, excluded), hashes[~np.isin(hashes, excluded)])


@given(verification_arrays, verification_arrays, st.data())
def test_hashes_union_is_the_sorted_distinct_union(a, b, data) -> None:
    shared = data.draw(st.lists(st.sampled_from(a.tolist()), max_size=20)) if len(a) else []
    b = np.union1d(b, np.array(shared, dtype=np.uint32))  # hashes in both
    got = hashes_union(a, b)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, np.union1d(a, b))
