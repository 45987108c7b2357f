"""Layouts: the pigeonhole and multi-probe guarantees, key/residual round trips, exact collision odds."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash.fingerprint import band_keys
from scrapy_simhash.layout import BlockLayout, Layout, SampledLayout, make_layout

fingerprints = st.integers(min_value=0, max_value=2**64 - 1)


def _found(layout: Layout, stored: int, query: int) -> bool:
    return bool(set(layout.probe_keys(query)) & set(layout.insert_keys(stored)))


def _flip(fp: int, positions) -> int:
    for pos in positions:
        fp ^= 1 << pos
    return fp


@given(fp=fingerprints, bands=st.integers(1, 12), multiprobe=st.booleans(), data=st.data())
def test_every_pair_within_the_guaranteed_distance_is_found(fp, bands, multiprobe, data):
    layout = BlockLayout(bands=bands, multiprobe=multiprobe)
    distance = data.draw(st.integers(0, layout.guaranteed_distance))
    flipped = data.draw(st.lists(st.integers(0, 63), min_size=distance, max_size=distance, unique=True))
    near = _flip(fp, flipped)
    assert _found(layout, fp, near) and _found(layout, near, fp)


@given(fp=fingerprints, bands=st.integers(1, 8), multiprobe=st.booleans())
def test_the_guarantee_is_tight(fp, bands, multiprobe):
    """Putting slack + 1 differing bits in every block escapes every probe."""
    layout = BlockLayout(bands=bands, multiprobe=multiprobe)
    per_block = 2 if multiprobe else 1
    flipped = [pos for t in range(bands) for pos in layout.key_positions(t)[:per_block]]
    assert len(flipped) == layout.guaranteed_distance + 1
    assert not _found(layout, fp, _flip(fp, flipped))


@given(fp=fingerprints, bands=st.integers(1, 10))
def test_block_keys_are_the_fingerprint_band_keys(fp, bands):
    assert BlockLayout(bands=bands).insert_keys(fp) == band_keys(fp, bands)


@given(fp=fingerprints, bands=st.integers(1, 10), tables=st.integers(1, 6), r=st.integers(1, 30))
def test_key_and_residual_rebuild_the_fingerprint(fp, bands, tables, r):
    for layout in (BlockLayout(bands=bands), SampledLayout(tables, r, seed=bands)):
        for t, (key, residual) in enumerate(layout.split(fp)):
            assert layout.join(t, key, residual) == fp
            assert residual < 2 ** len(layout.residual_positions(t))
            assert sorted(layout.key_positions(t) + layout.residual_positions(t)) == list(range(64))


def test_multiprobe_probes_every_key_one_bit_away():
    layout = BlockLayout(bands=4, multiprobe=True)
    fp = random.Random(1).getrandbits(64)
    probes = layout.probe_keys(fp)
    assert len(probes) == len(set(probes)) == 4 + 64
    inserted = dict(layout.insert_keys(fp))
    assert all((key ^ inserted[t]).bit_count() <= 1 for t, key in probes)


def _brute_force_probability(layout: Layout, distance: int) -> float:
    fp = random.Random(distance).getrandbits(layout.bits)
    placements = list(combinations(range(layout.bits), distance))
    return sum(_found(layout, fp, _flip(fp, p)) for p in placements) / len(placements)


@pytest.mark.parametrize(
    "layout",
    [
        BlockLayout(bits=12, bands=3),
        BlockLayout(bits=12, bands=2, multiprobe=True),
        SampledLayout(3, 4, seed=7, bits=12),
    ],
    ids=repr,
)
def test_collision_probability_is_exact(layout):
    for distance in range(layout.bits + 1):
        assert layout.collision_probability(distance) == pytest.approx(_brute_force_probability(layout, distance))


def test_multiprobe_sampled_estimate_matches_brute_force():
    """Multi-probe sampled odds have no exact form; the fixed-sample estimate must still be right."""
    layout = SampledLayout(4, 5, seed=11, bits=12, multiprobe=True)
    assert layout.guaranteed_distance >= 1
    for distance in range(layout.bits + 1):
        assert layout.collision_probability(distance) == pytest.approx(
            _brute_force_probability(layout, distance), abs=0.01
        )


def test_multiprobe_reaches_pairs_plain_sampled_tables_miss():
    plain = SampledLayout(12, 16, seed=0)
    probed = SampledLayout(12, 16, seed=0, multiprobe=True)
    assert plain.key_positions(3) == probed.key_positions(3)
    assert len(probed.probe_keys(1234567)) == 12 + 12 * 16
    for distance in (6, 12, 18):
        assert probed.collision_probability(distance) > plain.collision_probability(distance)


def test_sampled_layout_is_deterministic_and_probabilistic():
    a, b = SampledLayout(8, 16, seed=3), SampledLayout(8, 16, seed=3)
    assert [a.key_positions(t) for t in range(8)] == [b.key_positions(t) for t in range(8)]
    assert a.key_positions(0) != SampledLayout(8, 16, seed=4).key_positions(0)
    assert a.table_collision_probability(3) == pytest.approx((48 * 47 * 46) / (64 * 63 * 62))
    assert 0.0 < a.collision_probability(8) < 1.0
    assert a.collision_probability(a.guaranteed_distance) == 1.0


def test_make_layout_derives_bands_from_the_distance():
    assert make_layout(3).bands == 4
    assert make_layout(5, multiprobe=True).bands == 3
    assert make_layout(5, multiprobe=True).guaranteed_distance == 5
    assert make_layout(3, bands=6).guaranteed_distance == 5
    assert isinstance(make_layout(10, kind="sampled", tables=8, bits_per_table=16), SampledLayout)
    assert make_layout(10, kind="sampled", tables=8, bits_per_table=16, multiprobe=True).multiprobe


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_distance": 3, "bands": 3}, "guarantee only distance 2"),
        ({"max_distance": 7, "bands": 3, "multiprobe": True}, "guarantee only distance 5"),
        ({"max_distance": 3, "kind": "sampled"}, "needs tables and bits_per_table"),
        ({"max_distance": 3, "kind": "minhash"}, "layout kind"),
        ({"max_distance": 64}, "max_distance"),
    ],
)
def test_make_layout_refuses_what_it_cannot_promise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_layout(**kwargs)
