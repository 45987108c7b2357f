"""Stability: fingerprints of fixed texts must not change by accident (tests/make_golden.py wrote them)."""

from __future__ import annotations

import json

import pytest
from make_golden import GOLDEN, golden_entry

PINNED = json.loads(GOLDEN.read_text(encoding="utf-8"))["texts"]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_fingerprints_match_the_golden_file(name: str) -> None:
    """A failure means the algorithm's output changed: every fingerprint already stored in an index
    would stop matching. If that is intended, regenerate with ``python tests/make_golden.py``."""
    assert golden_entry(PINNED[name]["text"]) == PINNED[name]


def test_golden_file_covers_empty_and_no_content_texts() -> None:
    """The empty text and a punctuation-only text have no shingles: fingerprint 0, never indexed."""
    for name in ("empty", "punctuation only"):
        assert set(PINNED[name]["fingerprints"].values()) == {f"{0:#018x}"}
