"""The boilerplate learner: what counts as furniture, the warm-up that holds a host's first pages, persistence."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pipeline_harness import feed, open_pipeline, simhash_stats
from scrapy_simhash.extensions import learn_boilerplate

LEARNER = {"EXTENSIONS": {"scrapy_simhash.extensions.BoilerplateLearner": 500}}


def page(*ranges: range) -> np.ndarray:
    return np.unique(np.concatenate([np.arange(r.start, r.stop, dtype=np.uint64) for r in ranges]))


def test_template_and_widespread_shingles_are_furniture() -> None:
    template = range(0, 100)
    related = range(1000, 1010)  # a "related posts" box on 4 of the 20 pages
    pages = [page(template, range(10_000 * (i + 1), 10_000 * (i + 1) + 50)) for i in range(20)]
    pages[:4] = [np.union1d(p, page(related)) for p in pages[:4]]
    furniture, counts = learn_boilerplate(pages, min_share=0.05)
    assert set(furniture.tolist()) == set(template) | set(related)
    assert counts.tolist() == [20] * 100 + [4] * 10


def test_copies_of_one_document_in_the_sample_do_not_make_its_text_furniture() -> None:
    template = range(0, 100)
    document = range(5000, 5200)
    pages = [page(template, document) for _ in range(5)]  # five releases of one page
    pages += [page(template, range(10_000 * (i + 1), 10_000 * (i + 1) + 200)) for i in range(15)]
    furniture, _ = learn_boilerplate(pages, min_share=0.05)
    assert set(furniture.tolist()) == set(template)


def host_page(host: str, n: int, template_words: int = 400) -> dict:
    furniture = " ".join(f"{host.split('.')[0]}nav{i}" for i in range(template_words))
    content = " ".join(f"topic{n}word{i}" for i in range(120))
    return {"url": f"https://{host}/p{n}", "body_text": f"{furniture} {content}"}


@pytest.fixture
def settings(tmp_path) -> dict:
    return {
        **LEARNER,
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
        "SIMHASH_MERGE_LOG": "",
        "SIMHASH_BOILERPLATE_MIN_PAGES": 4,
    }


async def test_a_hosts_first_pages_wait_for_its_set_then_all_use_it(settings) -> None:
    pipeline = await open_pipeline(settings)
    try:
        held = [asyncio.ensure_future(feed(pipeline, host_page("a.example", n))) for n in range(3)]
        await asyncio.sleep(0.05)
        assert not any(task.done() for task in held) and pipeline.learner.held == 3
        assert await feed(pipeline, host_page("a.example", 3))
        assert all(await asyncio.gather(*held))  # distinct pages on one template: all kept
        assert await feed(pipeline, host_page("a.example", 4))  # after warm-up: no wait
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/hosts_learned"] == 1 and stats["simhash/unique"] == 5
    assert stats["simhash/boilerplate/shingles/a.example"] >= 390


async def test_a_host_with_too_few_pages_gets_no_set_when_its_warmup_times_out(settings) -> None:
    pipeline = await open_pipeline({**settings, "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT": 0.2})
    try:
        assert await asyncio.wait_for(feed(pipeline, host_page("lonely.example", 0)), timeout=30)
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/boilerplate/hosts_without"] == 1


async def test_the_buffer_bound_ends_the_largest_warmup(settings) -> None:
    pipeline = await open_pipeline({**settings, "SIMHASH_BOILERPLATE_MIN_PAGES": 10, "SIMHASH_BOILERPLATE_MAX_HELD": 3})
    try:
        first = [asyncio.ensure_future(feed(pipeline, host_page("big.example", n))) for n in range(3)]
        await asyncio.sleep(0.05)
        other = asyncio.ensure_future(feed(pipeline, host_page("small.example", 0)))
        assert all(await asyncio.wait_for(asyncio.gather(*first), timeout=30))
        assert pipeline.learner.held == 1 and not other.done()
        pipeline.learner.flush("test over")
        await other
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/boilerplate/held_max"] == 4


async def test_a_learned_set_is_persisted_and_loaded_by_the_next_crawl(settings) -> None:
    first = await open_pipeline(settings)
    await asyncio.gather(*(feed(first, host_page("a.example", n)) for n in range(4)))
    version = first.learner._known("a.example").version
    await first.close_spider()
    second = await open_pipeline(settings)
    try:
        # No warm-up this time: a single page is judged at once, with the stored set.
        assert not await asyncio.wait_for(feed(second, host_page("a.example", 0)), timeout=30)
        assert second.learner._known("a.example").version == version
    finally:
        await second.close_spider()
    stats = simhash_stats(second)
    assert stats["simhash/boilerplate/hosts_loaded"] == 1 and "simhash/boilerplate/hosts_learned" not in stats


async def test_sets_dropped_from_memory_are_loaded_again(settings, monkeypatch) -> None:
    monkeypatch.setattr("scrapy_simhash.extensions.CACHED_SETS", 1)
    pipeline = await open_pipeline(settings)
    try:
        for host in ("a.example", "b.example"):
            await asyncio.gather(*(feed(pipeline, host_page(host, n)) for n in range(4)))
        learned = pipeline.stats.get_value("simhash/boilerplate/version/a.example")
        assert pipeline.learner._known("a.example") is None  # dropped for b.example's set
        assert not await asyncio.wait_for(feed(pipeline, host_page("a.example", 0)), timeout=30)
        assert pipeline.learner._known("a.example").version == learned
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/hosts_learned"] == 2 and stats["simhash/boilerplate/hosts_loaded"] == 1
