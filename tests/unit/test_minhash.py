"""MinHash band layouts: sketches, band keys and the model calibration relies on."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from samples import hashes, near

from scrapy_simhash.minhash import Layout

LAYOUT = Layout(bands=16, rows=6, min_estimate=0.74)
# More sketch bytes than bands * rows: the estimate reads them all, the bands the first 48.
LONG = Layout(bands=8, rows=6, min_estimate=0.74, size=128)


def test_a_sketch_depends_only_on_the_hash_set():
    values = hashes(1)
    assert LAYOUT.sketch(values) == LAYOUT.sketch(values.copy()) and len(LAYOUT.sketch(values)) == 96
    assert LAYOUT.sketch(values) != LAYOUT.sketch(hashes(2))


def test_short_sets_get_a_full_sketch_from_their_own_values():
    few = np.array([5, 2**31, 2**32 - 1], dtype=np.uint32)
    sketch = np.frombuffer(LAYOUT.sketch(few), np.uint8)
    assert set(sketch.tolist()) <= {5 & 0xFF, (2**31) & 0xFF, (2**32 - 1) & 0xFF}


def test_sketches_stay_what_indexes_were_built_with():
    """A sketch computed another way would move every record's band keys: an index built before
    would no longer find its records. Sets from one hash to thousands: most bins of the short ones
    are empty and borrow their values."""
    digest = hashlib.sha256()
    for layout in (LAYOUT, Layout(22, 6, 0.74), Layout(255, 3, 0.5)):
        for count in (1, 2, 3, 10, 60, 130, 400, 3000):
            for seed in range(5):
                digest.update(layout.sketch(hashes(seed, count)))
    assert digest.hexdigest()[:16] == "3803eaef33184662"


def test_sets_sketched_together_are_sketched_as_each_alone():
    """Empty sets, sets of one hash (bins borrowed over several rounds) and full ones, in one batch."""
    sets = [hashes(seed, count) for seed, count in enumerate((1, 0, 3, 1200, 60, 1, 2, 130))]
    for layout in (LAYOUT, Layout(255, 3, 0.5)):
        assert layout.sketches(sets) == [layout.sketch(values) for values in sets]
    assert LAYOUT.sketch(hashes(0, 0)) == bytes(LAYOUT.size) and LAYOUT.sketches([]) == []


def test_band_keys_cut_the_sketch_in_rows():
    sketch = LAYOUT.sketch(hashes(3))
    keys = LAYOUT.band_keys(sketch)
    assert len(keys) == 16 and b"".join(keys) == sketch and {len(k) for k in keys} == {6}


def test_a_sketch_longer_than_its_bands_keys_them_by_its_first_bytes():
    sketch = LONG.sketch(hashes(3))
    keys = LONG.band_keys(sketch)
    assert len(sketch) == 128 and len(keys) == 8 and b"".join(keys) == sketch[:48]
    assert LONG.sketches([hashes(3), hashes(4)]) == [sketch, LONG.sketch(hashes(4))]


@pytest.mark.parametrize("jaccard", [0.5, 0.7, 0.8, 0.9])
def test_equal_sketch_bytes_estimate_the_jaccard(jaccard):
    base = hashes(4, count=3000)
    estimates = []
    for seed in range(40):
        other = near(base, jaccard, seed)
        estimates.append(LAYOUT.estimate(LAYOUT.equal(LAYOUT.sketch(base), LAYOUT.sketch(other))))
    assert abs(np.mean(estimates) - jaccard) < 0.03


@pytest.mark.parametrize("layout", [LAYOUT, LONG], ids=["bands-only", "longer-sketch"])
@pytest.mark.parametrize("jaccard", [0.7, 0.8, 0.85])
def test_the_candidate_model_matches_simulated_pairs(layout, jaccard):
    """What calibration chooses from: P(some band equal and enough equal bytes) at a Jaccard."""
    base = hashes(5, count=3000)
    found = 0
    trials = 300
    for seed in range(trials):
        a, b = layout.sketch(base), layout.sketch(near(base, jaccard, seed))
        band = any(x == y for x, y in zip(layout.band_keys(a), layout.band_keys(b)))
        found += band and layout.equal(a, b) >= layout.min_equal
    assert abs(found / trials - layout.candidate_probability(jaccard)) < 0.08


def test_the_minimum_equal_bytes_is_the_estimate_bound_rounded_up():
    assert LAYOUT.estimate(LAYOUT.min_equal) >= LAYOUT.min_estimate > LAYOUT.estimate(LAYOUT.min_equal - 1)


def test_a_layout_is_data_and_back():
    assert Layout.from_dict(LAYOUT.as_dict()) == LAYOUT and Layout.from_dict(LONG.as_dict()) == LONG
    assert Layout.from_dict({"bands": 16, "rows": 6, "min_estimate": 0.74}) == LAYOUT == Layout(16, 6, 0.74, 96)
    assert LAYOUT.as_dict()["size"] == 96 and LONG != Layout(8, 6, 0.74)


@pytest.mark.parametrize(
    "bands, rows, estimate, size",
    [(0, 6, 0.7, 0), (16, 2, 0.7, 0), (2, 6, 0.7, 0), (16, 6, 1.5, 0), (16, 6, 0.7, 95), (16, 6, 0.7, 1025)],
)
def test_impossible_layouts_are_refused(bands, rows, estimate, size):
    with pytest.raises(ValueError):
        Layout(bands, rows, estimate, size)
