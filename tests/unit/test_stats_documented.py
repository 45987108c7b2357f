"""Every ``simhash/*`` stat the code counts is in the README's Stats section, under a name a user reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Names that misled: rejected candidates read as wrong merges, internal words in a user's dump.
RENAMED = {"false_positives": "candidates_rejected", "signed_together_max": "fingerprint_batch_max",
           "findable_members": "duplicates_indexed"}


def counted() -> set[str]:
    names = set()
    for path in (ROOT / "scrapy_simhash").rglob("*.py"):
        names |= set(re.findall(r"[\"']simhash/([a-z_]+)[\"']", path.read_text(encoding="utf-8")))
    names.discard("boilerplate")
    return names


def stats_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("## Stats", 1)[1].split("\n## ", 1)[0]


def test_every_stat_is_documented() -> None:
    section = stats_section()
    names = counted() | {"merge_log_errors", "review_log_errors"}  # f"simhash/{kind}_log_errors"
    missing = sorted(name for name in names if f"`{name}`" not in section)
    assert not missing, f"stats missing from README's Stats section: {missing}"


def test_no_stat_keeps_a_misleading_name() -> None:
    assert not counted() & set(RENAMED)
    assert set(RENAMED.values()) <= counted()
    assert not any(f"`{name}`" in stats_section() for name in RENAMED)
