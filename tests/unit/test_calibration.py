"""The calibrated layouts: every table row builds and keeps its promise on pairs built to order."""

from __future__ import annotations

import pytest

from scrapy_simhash.calibration import _table, calibrated_layout, layout_for
from scrapy_simhash.minhash import Layout
from scrapy_simhash.settings import DEFAULTS


def test_every_row_builds_and_its_model_reaches_its_target():
    for row in _table()["rows"]:
        layout = Layout.from_dict(row["layout"])
        assert layout.candidate_probability(row["jaccard_threshold"]) >= row["target_recall"]


def test_the_default_threshold_and_target_have_a_layout_measured_on_the_corpus():
    row = calibrated_layout(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"], DEFAULTS["SIMHASH_TARGET_RECALL"])
    assert row["recall"]["0.82"] >= 0.99 and row["candidate_precision"] >= 0.8


def test_a_threshold_between_rows_takes_the_row_below_and_a_target_the_row_above():
    row = calibrated_layout(0.83, 0.93)
    assert (row["jaccard_threshold"], row["target_recall"]) == (0.82, 0.95)


def test_an_explicit_layout_wins_and_a_bad_one_says_what_is_expected():
    assert layout_for(0.82, 0.99, {"bands": 8, "rows": 4, "min_estimate": 0.7}) == Layout(8, 4, 0.7)
    with pytest.raises(ValueError, match="SIMHASH_LAYOUT .* expected"):
        layout_for(0.82, 0.99, {"bands": 8})


@pytest.mark.parametrize(
    "threshold, target, message", [(0.3, 0.9, "calibrated for thresholds"), (0.82, 0.9999, "calibrated up to")]
)
def test_out_of_the_table_is_refused_with_the_way_out(threshold, target, message):
    with pytest.raises(ValueError, match=message):
        calibrated_layout(threshold, target)
