"""Stability: fingerprints of fixed texts must not change by accident (tests/make_golden.py wrote them)."""

from __future__ import annotations

import json

import pytest
from make_golden import GOLDEN, golden_entry

from scrapy_simhash.fingerprint import FINGERPRINT_VERSION

GOLDEN_FILE = json.loads(GOLDEN.read_text(encoding="utf-8"))
PINNED = GOLDEN_FILE["texts"]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_fingerprints_match_the_golden_file(name: str) -> None:
    """A failure means the algorithm's output changed: every fingerprint already stored in an index
    would stop matching. If that is intended, regenerate with ``python tests/make_golden.py``."""
    assert golden_entry(PINNED[name]["text"]) == PINNED[name]


def test_golden_file_covers_empty_and_no_content_texts() -> None:
    """The empty text and a punctuation-only text have no shingles: fingerprint 0, never indexed."""
    for name in ("empty", "punctuation only"):
        assert set(PINNED[name]["fingerprints"].values()) == {f"{0:#018x}"}


def test_golden_file_is_of_this_fingerprint_version() -> None:
    assert GOLDEN_FILE["fingerprint_version"] == FINGERPRINT_VERSION


@pytest.mark.parametrize("name", [name for name in PINNED if name.startswith("english, ")])
def test_disguised_copies_fingerprint_as_the_original(name: str) -> None:
    """Invisible characters inside words and look-alike letters change nothing normalisation keeps."""
    assert PINNED[name]["text"] != PINNED["english"]["text"]
    assert {key: PINNED[name][key] for key in ("fingerprints", "shingle_hashes")} == {
        key: PINNED["english"][key] for key in ("fingerprints", "shingle_hashes")
    }
