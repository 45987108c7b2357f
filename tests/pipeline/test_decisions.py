"""SimhashPipeline item by item on a real index: drops, annotations, groups and what the merge log says."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import scrapy
from scrapy import signals
from pipeline_harness import feed, open_pipeline, simhash_stats
from scrapy.exceptions import DropItem
from texts import article, edited

from scrapy_simhash.mergelog import read_merge_log


@pytest.fixture(params=["sqlite", "redis"])
def settings(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/index.db"
    else:
        url = request.getfixturevalue("redis_server_url")

    def make(**extra):
        return {
            "SIMHASH_INDEX_URL": url,
            "SIMHASH_KEY_PREFIX": request.getfixturevalue("redis_prefix") + ":{spider}"
            if request.param == "redis"
            else "simhash:{spider}",
            "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
            **extra,
        }

    return make


async def test_a_near_duplicate_is_dropped_naming_its_canonical(settings, tmp_path):
    pipeline = await open_pipeline(settings())
    text = article(1)
    try:
        assert await feed(pipeline, {"url": "https://a.example/p", "body_text": text})
        # The record matched is the canonical: named once.
        named = r"^near-duplicate https://b\.example/copy of https://a\.example/p \(distance \d+, Jaccard 0\.\d{3}\)$"
        with pytest.raises(DropItem, match=named):
            await pipeline.process_item({"url": "https://b.example/copy", "body_text": edited(text)})
    finally:
        await pipeline.close_spider()
    [merged] = read_merge_log(str(tmp_path / "merges.jsonl"))
    assert merged["decision"] == "merged" and merged["jaccard"] >= 0.82
    assert (merged["canonical_url"], merged["duplicate_url"]) == ("https://a.example/p", "https://b.example/copy")
    assert merged["rule"]["jaccard_threshold"] == 0.82 and merged["rule"]["layout"]["bands"] > 0
    stats = simhash_stats(pipeline)
    assert stats["simhash/dropped"] == stats["simhash/duplicates"] == 1 and stats["simhash/unique"] == 1


async def test_a_page_that_drifts_joins_its_group_through_a_member(settings, tmp_path):
    """Release after release: each near the one before, the last no longer near the first."""
    pipeline = await open_pipeline(settings())
    releases = [article(2)]
    for i in range(6):
        releases.append(edited(releases[-1], edits=8, seed=i))
    try:
        assert await feed(pipeline, {"url": "https://docs/0", "body_text": releases[0]})
        dropped = []
        for i, text in enumerate(releases[1:], 1):
            with pytest.raises(DropItem) as drop:
                await pipeline.process_item({"url": f"https://docs/{i}", "body_text": text})
            dropped.append(str(drop.value))
    finally:
        await pipeline.close_spider()
    records = list(read_merge_log(str(tmp_path / "merges.jsonl")))
    merged = [r for r in records if r["decision"] == "merged"]
    assert {r["canonical_id"] for r in merged} == {"https://docs/0"}
    assert any(r["matched_id"] != r["canonical_id"] for r in merged)
    for message, record in zip(dropped, merged, strict=True):  # the record matched is named when not the canonical
        via = f"matched {record['matched_id']}, " if record["matched_id"] != record["canonical_id"] else ""
        assert message.startswith(f"near-duplicate {record['duplicate_id']} of https://docs/0 ({via}distance ")


async def test_annotate_mode_marks_the_duplicate_and_counts_it(settings):
    pipeline = await open_pipeline(settings(SIMHASH_ACTION="annotate"))
    text = article(3)
    try:
        first = {"url": "https://a.example/p", "body_text": text}
        second = {"url": "https://b.example/copy", "body_text": edited(text)}
        assert await feed(pipeline, first) and await feed(pipeline, second)
    finally:
        await pipeline.close_spider()
    assert "duplicate_of" not in first and second["duplicate_of"] == "https://a.example/p"
    assert second["jaccard"] >= 0.82 and len(second["fingerprint"]) == 16
    assert simhash_stats(pipeline)["simhash/annotated"] == 1


class Undeclared(scrapy.Item):
    url = scrapy.Field()
    body_text = scrapy.Field()


@dataclasses.dataclass(frozen=True)
class Frozen:
    """Declares the annotation fields, but they cannot be set."""

    url: str
    body_text: str
    duplicate_of: str = ""
    simhash_distance: int = 0
    jaccard: float = 0.0
    fingerprint: str = ""


@pytest.mark.parametrize("item_class", [Undeclared, Frozen])
async def test_annotated_counts_only_duplicates_that_were_marked(settings, caplog, item_class):
    """Duplicates that cannot be marked pass on unmarked, counted, said once."""
    pipeline = await open_pipeline(settings(SIMHASH_ACTION="annotate"))
    text = article(4)
    try:
        await feed(pipeline, item_class(url="https://a/p", body_text=text))
        for i in range(3):
            assert await feed(pipeline, item_class(url=f"https://b/{i}", body_text=edited(text, seed=i)))
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/duplicates"] == 3 and stats["simhash/annotation_errors"] == 3
    assert stats["simhash/annotated"] == 0 and stats["simhash/internal_errors"] == 0
    assert sum(f"Cannot annotate {item_class.__name__} items" in r.message for r in caplog.records) == 1


async def test_items_in_flight_together_keep_one_canonical_per_text(settings):
    """Scrapy lets many items into the pipeline at once: copies in flight together are one group, also
    when each first meets a near miss that verification rejects (the insert after it is conditional)."""
    pipeline = await open_pipeline(settings())
    texts = [article(100 + i) for i in range(12)]
    try:
        for i, text in enumerate(texts):  # a cousin each: a candidate of every copy, below the threshold
            assert await feed(pipeline, {"url": f"https://cousin/{i}", "body_text": edited(text, edits=11, seed=99)})
        items = [{"url": f"https://site/{i}/{copy}", "body_text": edited(t, seed=copy)} for copy in range(5)
                 for i, t in enumerate(texts)]
        kept = await asyncio.gather(*(feed(pipeline, item) for item in items))
    finally:
        await pipeline.close_spider()
    per_text = [sum(k for k, item in zip(kept, items) if item["url"].split("/")[3] == str(i)) for i in range(12)]
    assert per_text == [1] * 12
    assert simhash_stats(pipeline)["simhash/candidates_rejected"] >= 12


async def test_items_sharing_an_id_are_all_kept_findable_and_counted(settings, caplog):
    """A listing page whose items all carry url = response.url, then exact copies on another page."""
    pipeline = await open_pipeline(settings())
    texts = [article(200 + i) for i in range(5)]
    try:
        first = [await feed(pipeline, {"url": "https://site/listing", "body_text": t}) for t in texts]
        copies = [await feed(pipeline, {"url": "https://site/listing-2", "body_text": t}) for t in texts]
    finally:
        await pipeline.close_spider()
    assert first == [True] * 5 and copies == [False] * 5
    assert simhash_stats(pipeline)["simhash/id_collisions"] == 4
    assert sum("share an id" in r.message for r in caplog.records) == 1


async def test_a_recrawl_finds_the_pages_it_kept(settings):
    texts = [article(300 + i) for i in range(3)]
    first = await open_pipeline(settings())
    try:
        assert [await feed(first, {"url": f"https://s/{i}", "body_text": t}) for i, t in enumerate(texts)] == [True] * 3
    finally:
        await first.close_spider()
    again = await open_pipeline(settings())
    try:
        assert [
            await feed(again, {"url": f"https://s/{i}", "body_text": t}) for i, t in enumerate(texts)
        ] == [False] * 3
    finally:
        await again.close_spider()


async def test_an_item_indexed_but_never_scraped_is_not_its_own_duplicate_on_the_rerun(settings):
    """A crawl killed between the index and the feed export: the rerun keeps the page, not drops it."""
    text = article(400)
    crashed = await open_pipeline(settings())
    try:
        assert await feed(crashed, {"url": "https://s/p", "body_text": text}, scraped=False)
    finally:
        await crashed.close_spider()
    rerun = await open_pipeline(settings())
    try:
        assert await feed(rerun, {"url": "https://s/p", "body_text": text})
        assert not await feed(rerun, {"url": "https://s/copy", "body_text": text})
    finally:
        await rerun.close_spider()


async def test_a_copy_of_a_page_a_killed_crawl_never_exported_is_kept(settings):
    """The killed crawl dropped a copy for a page it never exported; the next copy is kept, so the text
    reaches the feed, and the page itself, fetched again, is then its duplicate."""
    text = article(401)
    crashed = await open_pipeline(settings())
    try:
        assert await feed(crashed, {"url": "https://s/p", "body_text": text}, scraped=False)
        assert not await feed(crashed, {"url": "https://s/first-copy", "body_text": text})
    finally:
        await crashed.close_spider()
    rerun = await open_pipeline(settings())
    try:
        assert await feed(rerun, {"url": "https://s/second-copy", "body_text": text})
        assert not await feed(rerun, {"url": "https://s/p", "body_text": text})
    finally:
        await rerun.close_spider()


async def test_a_match_erased_before_the_join_is_looked_up_again_not_passed_unchecked(settings):
    pipeline = await open_pipeline(settings())
    text = article(9)
    index = pipeline.index.index
    look_up = index.check_and_add

    async def look_up_then_erase(record, since=0):  # the erasure (or expiry) lands between lookup and join
        lookup = await look_up(record, since)
        if lookup.candidates:
            await index.erase("https://a.example/first")
        return lookup

    try:
        assert await feed(pipeline, {"url": "https://a.example/first", "body_text": text})
        index.check_and_add = look_up_then_erase
        assert await feed(pipeline, {"url": "https://a.example/second", "body_text": text})
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/unique"] == 2 and stats["simhash/unchecked"] == 0 and stats["simhash/index_errors"] == 0


async def test_more_items_in_flight_than_the_client_has_connections_all_get_judged(settings):
    """Scrapy lets CONCURRENT_ITEMS (100) items of each response into the pipeline at once; redis-py's
    asyncio pools refuse a connection past 100 instead of waiting for one."""
    pipeline = await open_pipeline(settings())
    items = [{"url": f"https://a.example/{n}", "body_text": article(n % 150)} for n in range(300)]
    try:
        await asyncio.gather(*(feed(pipeline, item) for item in items))
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/index_errors"] == 0 and stats["simhash/unchecked"] == 0
    assert stats["simhash/unique"] == 150


async def test_one_page_in_flight_in_two_live_crawls_is_kept_once(settings):
    """The second crawl waits for the first's item instead of taking its pending record for a
    crashed crawl's: it is dropped once the first's item is scraped, as a page seen before."""
    first, second = await open_pipeline(settings()), await open_pipeline(settings())
    page = {"url": "https://a.example/page", "body_text": article(11)}
    try:
        assert await feed(first, page, scraped=False)  # indexed; the item is still on its way out
        waiting = asyncio.ensure_future(feed(second, dict(page)))
        first.crawler.signals.send_catch_log(signals.item_scraped, item=page, response=None, spider=None)
        assert not await waiting
    finally:
        await first.close_spider()
        await second.close_spider()
    assert simhash_stats(second)["simhash/seen"] == 1 and simhash_stats(second)["simhash/unchecked"] == 0


async def test_an_item_whose_url_a_later_pipeline_changed_is_confirmed(settings):
    """A later pipeline cleans the URL (the page id by default) of the very item this one judged: the
    item is still found, by the object itself, and its record confirmed."""
    short = {**settings(), "SIMHASH_SESSION_LEASE": 1}
    first, second = await open_pipeline(short), await open_pipeline(short)
    page = {"url": "https://a.example/page?utm_source=feed", "body_text": article(14)}
    original = dict(page)
    try:
        assert await feed(first, page, scraped=False)
        page["url"] = "https://a.example/page"
        first.crawler.signals.send_catch_log(signals.item_scraped, item=page, response=None, spider=None)
    finally:
        await first.close_spider()
    try:
        assert not await feed(second, original)  # confirmed in the first crawl: the page crawled again
    finally:
        await second.close_spider()


async def test_one_item_object_yielded_twice_confirms_both_records(settings):
    """A spider that fills one dict, yields it, refills and yields it again: two pages, one object."""
    short = {**settings(), "SIMHASH_SESSION_LEASE": 1}
    first, second = await open_pipeline(short), await open_pipeline(short)
    item = {}
    pages = [{"url": f"https://a.example/{n}", "body_text": article(n)} for n in (15, 16)]
    try:
        for page in pages:
            item.update(page)
            assert await feed(first, item, scraped=False)
        for _ in pages:
            first.crawler.signals.send_catch_log(signals.item_scraped, item=item, response=None, spider=None)
    finally:
        await first.close_spider()
    try:
        assert [await feed(second, dict(page)) for page in pages] == [False, False]
    finally:
        await second.close_spider()


async def test_an_item_a_later_pipeline_replaced_is_confirmed_and_one_it_dropped_is_not(settings):
    """Scrapy's signals carry the last pipeline's output (item_scraped) or the spider's item
    (item_dropped), not necessarily the object this pipeline judged: they are matched by page id."""
    short = {**settings(), "SIMHASH_SESSION_LEASE": 1}  # a copy of a page left pending waits 2 s, not 60
    first, second = await open_pipeline(short), await open_pipeline(short)
    kept, dropped = ({"url": f"https://a.example/{n}", "body_text": article(n)} for n in (12, 13))
    try:
        assert await feed(first, kept, scraped=False) and await feed(first, dropped, scraped=False)
        first.crawler.signals.send_catch_log(signals.item_scraped, item=dict(kept), response=None, spider=None)
        first.crawler.signals.send_catch_log(
            signals.item_dropped, item=dict(dropped), response=None, spider=None, exception=DropItem("later")
        )
        assert not await feed(second, dict(kept))  # confirmed: a duplicate
    finally:
        await first.close_spider()
    try:
        assert await feed(second, dict(dropped))  # still pending when its crawl ended: kept again
    finally:
        await second.close_spider()
    assert simhash_stats(second)["simhash/unchecked"] == 0
