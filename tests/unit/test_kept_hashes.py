"""The verification hashes a crawl holds by write id stay within their budget, the least recently used going first."""

from __future__ import annotations

import numpy as np

from scrapy_simhash.index.base import Verification, _KeptHashes
from scrapy_simhash.whole_text import WholeText


def values(count: int) -> Verification:
    return Verification(np.arange(count, dtype=np.uint32))


def test_the_least_recently_used_hashes_go_first_past_the_budget():
    kept = _KeptHashes(budget=300)
    kept.put(b"a", values(100))
    kept.put(b"b", values(100))
    kept.put(b"c", values(100))
    assert kept.get(b"a") is not None  # used: b is now the least recent
    kept.put(b"d", values(100))
    assert kept.get(b"b") is None
    assert all(kept.get(key) is not None for key in (b"a", b"c", b"d"))


def test_hashes_larger_than_the_budget_are_not_held():
    kept = _KeptHashes(budget=300)
    kept.put(b"a", values(100))
    kept.put(b"huge", values(301))
    assert kept.get(b"huge") is None and kept.get(b"a") is not None


def test_the_whole_text_difference_counts_against_the_budget():
    kept = _KeptHashes(budget=300)
    kept.put(b"a", values(100))
    whole = WholeText(np.arange(150, dtype=np.uint32), np.arange(10, dtype=np.uint32))
    kept.put(b"b", Verification(np.arange(100, dtype=np.uint32), whole))
    assert kept.get(b"a") is None and kept.get(b"b").whole is whole
