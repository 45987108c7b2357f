"""The layout, index and logs every command opens are the ones the crawl's settings describe."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from scrapy_simhash.configured import ConfiguredLog, configured_index, configured_layout, configured_logs
from scrapy_simhash.minhash import Layout
from scrapy_simhash.settings import read


@pytest.fixture
def config(tmp_path):
    settings = Settings({
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/{{spider}}.sqlite3",
        "SIMHASH_LAYOUT": {"bands": 8, "rows": 4, "min_estimate": 0.7},
        "SIMHASH_RETENTION": {"default": 3600, "news": 60},
        "SIMHASH_MAX_CHARS": 5000,
        "SIMHASH_SESSION_LEASE": 7,
    })
    return read(settings, "docs")


def test_the_layout_is_the_one_the_settings_name(config):
    assert configured_layout(config) == Layout(8, 4, 0.7)


def test_the_index_carries_every_setting_that_shapes_what_it_reads(config, tmp_path):
    index = configured_index(config, create=False)
    assert index.layout == Layout(8, 4, 0.7)
    assert index.retention.classes == {"default": 3600, "news": 60}
    assert (index.max_hashes, index.lease, index.create) == (5000, 7, False)
    assert str(tmp_path / "docs.sqlite3") in index.location


def test_the_logs_are_those_the_settings_turn_on_with_their_default_streams():
    off = read(Settings({"SIMHASH_MERGE_LOG": "", "SIMHASH_REVIEW_LOG": ""}), "docs")
    assert configured_logs(off) == []
    both = read(Settings({"SIMHASH_MERGE_LOG": "m.jsonl", "SIMHASH_REVIEW_LOG": "redis://h/0"}), "docs")
    prefix = both.key_prefix
    assert configured_logs(both) == [
        ConfiguredLog("merge", "merges", "m.jsonl", f"{prefix}:merges"),
        ConfiguredLog("review", "review", "redis://h/0", f"{prefix}:review"),
    ]
