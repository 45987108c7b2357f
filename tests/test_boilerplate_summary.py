"""The readable summary of a learned set: its top shingles spelled out, even those only on later pages."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pipeline_harness import feed, open_pipeline
from scrapy_simhash.extensions import TOP_SHINGLES, summary_path


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{i}" for i in range(count))


async def test_every_top_shingle_is_spelled_out(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the summary goes under the project's .scrapy/ directory
    pipeline = await open_pipeline(
        {
            "EXTENSIONS": {"scrapy_simhash.extensions.BoilerplateLearner": 500},
            "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
            "SIMHASH_MERGE_LOG": "",
            "SIMHASH_BOILERPLATE_MIN_PAGES": 4,
        }
    )
    # A 20-word header on every page (17 shingles on 4 pages) and a 60-word box on the last two only:
    # the top 50 needs 33 of the box's shingles, which the first pages do not have.
    pages = [f"{words('nav', 20)} {words('box', 60) if n >= 2 else ''} {words(f'p{n}w', 120)}" for n in range(4)]
    try:  # the host's first pages wait for its set: fed together, as a crawl has them in flight
        await asyncio.gather(*(feed(pipeline, {"url": f"https://a.example/p{n}", "body_text": text})
                               for n, text in enumerate(pages)))
    finally:
        await pipeline.close_spider()
    summary = json.loads(Path(summary_path(pipeline.learner.key_prefix, "a.example")).read_text(encoding="utf-8"))
    top = summary["top"]
    assert len(top) == TOP_SHINGLES
    assert [entry["pages"] for entry in top] == [4] * 17 + [2] * (TOP_SHINGLES - 17)
    assert all(entry["shingle"].startswith("nav") for entry in top[:17])
    assert all("box" in entry["shingle"] and len(entry["shingle"].split()) == 4 for entry in top[17:])
