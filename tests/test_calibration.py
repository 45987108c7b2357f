"""``SIMHASH_MAX_DISTANCE = "auto"``: the committed table, its lookup rules, and its promise on the real index."""

from __future__ import annotations

import json

import pytest

from scrapy_simhash.calibration import _table, calibrate, random_candidate_fraction
from scrapy_simhash.evaluate import Configuration, Document, ground_truth, rows, run_configuration
from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.index import Record, open_index
from scrapy_simhash.layout import BlockLayout, SampledLayout, make_layout
from scrapy_simhash.settings import DEFAULTS


def test_random_candidate_fraction_by_hand() -> None:
    # Two 2-bit blocks of a 4-bit print: a random print matches a block with odds 1/4.
    assert random_candidate_fraction(BlockLayout(bits=4, bands=2)) == pytest.approx(1 - (3 / 4) ** 2)
    # Within 1 bit: distance 0 (1/16) always collides, so does each of the 4 one-bit neighbours.
    assert random_candidate_fraction(BlockLayout(bits=4, bands=2), max_distance=1) == pytest.approx(5 / 16)
    # Multi-probe: a block also matches one bit away, odds 3/4 per block.
    assert random_candidate_fraction(BlockLayout(bits=4, bands=2, multiprobe=True)) == pytest.approx(1 - (1 / 4) ** 2)
    assert random_candidate_fraction(SampledLayout(tables=1, bits_per_table=2, bits=4)) == pytest.approx(1 / 4)


async def test_the_default_calibration_drives_a_real_index() -> None:
    calibration = calibrate(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"])
    assert 0 <= calibration.max_distance < 64
    index = open_index("sqlite://", layout=calibration.layout)
    try:
        fingerprint = 0x0123456789ABCDEF
        assert await index.check_and_add(Record(id="a", fingerprint=fingerprint), calibration.max_distance) == []
        [found] = await index.check_and_add(Record(id="b", fingerprint=fingerprint ^ 1), calibration.max_distance)
        assert (found.record_id, found.distance) == ("a", 1)
    finally:
        await index.close()


def test_lookup_takes_the_conservative_row() -> None:
    assert calibrate(0.825).jaccard_threshold == 0.82  # the largest measured threshold below
    assert calibrate(0.82, 0.96).target_recall == 0.97  # the smallest measured target above
    with pytest.raises(ValueError, match="set SIMHASH_MAX_DISTANCE explicitly"):
        calibrate(0.3)
    with pytest.raises(ValueError, match="SIMHASH_TARGET_RECALL"):
        calibrate(0.82, 0.999)


def test_every_row_builds_and_its_cost_matches_the_layout_maths() -> None:
    """A stale table (layout positions or odds changed since it was measured) fails here."""
    table = _table()
    assert table["fingerprint"] == {
        "fields": DEFAULTS["SIMHASH_FIELDS"],
        "shingle_width": DEFAULTS["SIMHASH_SHINGLE_WIDTH"],
        "weighting": DEFAULTS["SIMHASH_WEIGHTING"],
    }
    costs: dict[str, float] = {}
    for row in table["rows"]:
        spec = json.dumps(row["layout"], sort_keys=True)
        if spec not in costs:
            costs[spec] = random_candidate_fraction(make_layout(row["max_distance"], **row["layout"]))
        assert row["candidate_fraction"] == pytest.approx(costs[spec], abs=1e-6)
        assert row["within_budget"] == (row["candidate_fraction"] <= table["candidate_budget"])


@pytest.mark.slow
async def test_the_promised_recall_holds_on_the_real_index(corpus: list[dict]) -> None:
    """The table's recall (the smaller of measured-on-key-masks and expected-over-seeds) is what the
    real index delivers on the corpus it was measured on, with verification precision 1.0."""
    fields = DEFAULTS["SIMHASH_FIELDS"]
    documents = [Document(d["id"], d["url"], "\n".join(str(d.get(f) or "") for f in fields)) for d in corpus]
    signatures = [Fingerprinter().signature(d.text) for d in documents]
    calibration = calibrate(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"])
    configuration = Configuration("auto", calibration.max_distance, calibration.layout)
    run = await run_configuration(configuration, documents, signatures)
    truth = ground_truth([s.shingles for s in signatures], min(calibration.recall))
    for row in rows(run, truth, sorted(calibration.recall)):
        assert row.scores.recall >= calibration.recall[row.threshold] - 0.002, row
        assert row.scores.precision == 1.0
