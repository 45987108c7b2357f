"""Merge-log records for tests: one rule, one time, and a record of the documented schema."""

from __future__ import annotations

from scrapy_simhash.mergelog import Rule, merge_record

LAYOUT = {"kind": "minhash", "bands": 16, "rows": 4, "value_bits": 8}
RULE = Rule(jaccard_threshold=0.82, layout=LAYOUT, shingle_width=4, weighting="frequency",
            fingerprint_version=2, boilerplate_version=3)
BIG = 0xFEDCBA9876543210  # above 2**53: a JSON number would lose its low bits
WHEN = 1_796_314_511.410237  # 2026-12-03T16:15:11.410237+00:00


def record(decision: str = "merged", duplicate: str = "b", *, matched: str = "m", at: float | None = WHEN) -> dict:
    return merge_record(
        decision=decision, canonical_id="a", canonical_url="https://a.example/1",
        matched_id=matched, matched_url=f"https://a.example/{matched}", matched_fingerprint=BIG,
        duplicate_id=duplicate, duplicate_url=f"https://b.example/{duplicate}", duplicate_fingerprint=0x1F,
        distance=3, jaccard=0.9, retention="default", rule=RULE, at=at,
    )
