"""The boilerplate learner: what counts as furniture, the warm-up that holds a host's first pages, persistence."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import Counter

import numpy as np
import pytest

from pipeline_harness import feed, open_pipeline, simhash_stats, until
from scrapy_simhash.boilerplate import (
    BlobError,
    Furniture,
    decode,
    documents,
    encode,
    learn,
    page_lines,
    versions_of_one_text,
)
from scrapy_simhash.fingerprint import shingle_hash, verification_hashes
from scrapy_simhash.mergelog import read_merge_log


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{i}" for i in range(count))


def article(n: int, paragraphs: int = 4) -> list[str]:
    """An article's paragraphs: long lines (prose) of words of its own."""
    return [words(f"a{n}p{p}w", 30) for p in range(paragraphs)]


def site_page(n: int, body: list[str], *, brand: str = "Example News", share: bool = True, pages: int = 3) -> str:
    """A page as html-text gives it: the site's template, a byline, related links naming other pages."""
    lines = [brand, "Home", "News", "About us", "This site uses cookies to analyse traffic; accept or refuse them.",
             f"Title of story {n}", f"By Ann Author · {n + 3} May 2024 · {n % 9 + 2} min read"]
    lines += ["Share this story on social media"] if share else []
    lines += body
    lines += ["Related stories"] + [f"Title of story {m}" for m in range(pages) if m != n][:3]
    lines += [f"{brand} is an independent publication. Contact the newsroom, read our privacy policy."]
    return "\n\n".join(lines)


def stripped_lines(furniture: Furniture, text: str) -> list[str]:
    return [line for line in furniture.strip(page_lines(text)).split("\n") if line.strip()]


# --- what counts as furniture ----------------------------------------------------------------------


@pytest.mark.parametrize("share", [True, False], ids=["with a share bar", "byline next to the article"])
def test_a_three_page_host_loses_its_furniture_and_keeps_its_articles(share: bool) -> None:
    texts = [site_page(n, article(n), share=share) for n in range(3)]
    furniture = learn([page_lines(t) for t in texts])
    for n, text in enumerate(texts):
        assert stripped_lines(furniture, text) == article(n)
    later = site_page(7, article(7), share=share, pages=8)  # a page the sample did not have
    assert stripped_lines(furniture, later) == article(7)


def test_short_runs_between_furniture_go_and_lines_without_words_stay_in_place() -> None:
    """A run of short lines between two furniture lines goes (an editor's pick); a line without words
    (a section break) stays where it was; a list-like article, the page's largest run, stays whole
    with its title."""
    furniture = learn([page_lines(site_page(n, article(n))) for n in range(3)])
    body = article(5)[:2] + ["* * *"] + article(5)[2:]
    page = site_page(5, body, pages=6).replace("Home\n\nNews", "Home\n\nEditor's pick\n\nOur best\n\nNews")
    assert stripped_lines(furniture, page) == body
    listing = [f"Item {i} of the list" for i in range(12)]
    assert stripped_lines(furniture, site_page(6, listing, pages=7)) == ["Title of story 6", *listing]


def test_copies_of_one_document_in_the_sample_count_once() -> None:
    """One page under two URLs and another page: the first page's text is not furniture for being on two pages."""
    texts = [site_page(0, article(0)), site_page(0, article(0)), site_page(1, article(1))]
    furniture = learn([page_lines(t) for t in texts])
    assert furniture.documents == 2
    assert stripped_lines(furniture, texts[0]) == article(0)


def test_the_lines_taken_out_are_what_stripping_leaves_out() -> None:
    texts = [site_page(n, article(n)) for n in range(3)]
    furniture = learn([page_lines(t) for t in texts])
    keep = furniture.kept(page_lines(texts[0]))
    lines = texts[0].split("\n")
    stripped = "\n".join(line for line, kept in zip(lines, keep) if kept)
    removed = [line for line, kept in zip(lines, keep) if not kept]
    assert stripped == furniture.remove(page_lines(texts[0]))
    taken_out = Counter(lines) - Counter(stripped.split("\n"))
    assert sorted(removed) == sorted(taken_out.elements())
    assert "Related stories" in removed


def test_three_urls_of_one_page_teach_nothing() -> None:
    text = site_page(0, article(0))
    furniture = learn([page_lines(text)] * 3)
    assert furniture.documents == 1 and furniture.version == 0
    assert furniture.strip(page_lines(text)) == text


def test_releases_of_one_page_are_one_document_and_articles_quoting_one_statement_are_not() -> None:
    """Three releases of a story share most of its paragraphs: a sample of them waits for another page,
    with which they are two documents (taken as three, every line of the story would be template).
    Articles that each quote one paragraph are distinct documents."""
    releases = [page_lines(site_page(0, [*article(0)[:3], words(f"release{v}w", 30)])) for v in range(3)]
    assert versions_of_one_text(releases)
    assert documents([*releases, page_lines(site_page(1, article(1)))]).tolist() == [0, 0, 0, 1]
    quote = words("quote", 30)
    quoting = [page_lines(site_page(n, [*article(n)[:2], quote, *article(n)[2:]])) for n in range(3)]
    assert not versions_of_one_text(quoting) and documents(quoting).tolist() == [0, 1, 2]


def test_a_template_of_long_lines_is_learned_from_pages_that_share_nothing_else() -> None:
    """A sidebar of teasers of 20 words on every page outweighs each short article: the prose says one
    text, the lines say three documents, and with no other page to wait for the lines decide."""
    teasers = "\n\n".join(words(f"teaser{t}w", 20) for t in range(30))
    texts = [f"{site_page(n, article(n, 1))}\n\n{teasers}" for n in range(3)]
    pages = [page_lines(text) for text in texts]
    assert versions_of_one_text(pages)
    furniture = learn(pages)
    assert furniture.documents == 3 and stripped_lines(furniture, texts[0]) == article(0, 1)


def test_a_sentence_two_articles_share_and_a_menu_word_in_an_article_are_content() -> None:
    quote = words("quote", 25)
    bodies = [article(0)[:2] + [quote] + article(0)[2:], article(1)[:1] + [quote] + article(1)[1:], article(2)]
    furniture = learn([page_lines(site_page(n, body)) for n, body in enumerate(bodies)])
    assert stripped_lines(furniture, site_page(0, bodies[0])) == bodies[0]
    listed = article(3)[:2] + ["News", "weather", "sport"] + article(3)[2:]
    assert stripped_lines(furniture, site_page(3, listed, pages=5)) == listed


def test_lines_every_article_has_inside_its_prose_are_content() -> None:
    """A manual's pages all say ``For example::`` and ``.. code-block:: python`` between paragraphs:
    the template stands before and after the content, so such lines are the articles' own."""
    idioms = ["For example::", ".. code-block:: python", "asyncio"]
    bodies = [[*article(n, 2), *idioms, *article(n + 10, 2)] for n in range(3)]
    furniture = learn([page_lines(site_page(n, body)) for n, body in enumerate(bodies)])
    assert not {line for line in furniture.examples if line in idioms}
    later = [*article(7, 2), *idioms, *article(17, 2)]
    assert stripped_lines(furniture, site_page(7, later, pages=8)) == later


def test_a_page_that_would_lose_every_word_keeps_its_whole_text() -> None:
    """A page is never all furniture: when the learner would take every word, it took content."""
    statement = [words(f"s{p}w", 30) for p in range(3)]
    furniture = learn([page_lines(site_page(n, statement + article(n))) for n in range(3)])
    copy_of_statement = site_page(0, statement)
    assert furniture.remove(page_lines(copy_of_statement)) is None
    assert furniture.strip(page_lines(copy_of_statement)) == copy_of_statement


def test_an_article_of_short_lines_is_kept() -> None:
    """No long line on the page: nothing tells the article from a list of links, so only template lines go."""
    furniture = learn([page_lines(site_page(n, article(n))) for n in range(3)])
    short = [words(f"item{i}w", 5) for i in range(12)]
    kept = stripped_lines(furniture, site_page(5, short, pages=6))
    assert kept[kept.index(short[0]) :][: len(short)] == short and "Related stories" not in kept


def test_a_host_with_one_page_has_no_furniture() -> None:
    furniture = learn([page_lines(site_page(0, article(0)))])
    assert furniture.version == 0 and furniture.pages == 1
    assert furniture.strip(page_lines(site_page(0, article(0)))) == site_page(0, article(0))


def test_furniture_round_trips_through_its_blob_and_its_version_names_it() -> None:
    furniture = learn([page_lines(site_page(n, article(n))) for n in range(3)])
    blob = encode(furniture)
    again = decode(blob + bytes(5))  # the index may pad a blob to whole words
    assert again.version == furniture.version > 0
    assert np.array_equal(again.lines, furniture.lines) and again.slots == furniture.slots
    assert np.array_equal(again.verification, furniture.verification) and again.examples == furniture.examples
    assert "Related stories" in furniture.examples
    other = learn([page_lines(site_page(n, article(n), brand="Other News")) for n in range(3)])
    assert other.version != furniture.version
    for bad in (b"", b"not a blob", blob[:3] + bytes([9]) + blob[4:], blob[:-3], blob + b"x"):
        with pytest.raises(BlobError):
            decode(bad)


def test_verification_hashes_are_those_of_the_furniture_lines() -> None:
    furniture = learn([page_lines(site_page(n, article(n))) for n in range(3)])
    footer = "Example News is an independent publication. Contact the newsroom, read our privacy policy."
    assert np.uint32(shingle_hash("newsroom read our privacy") & 0xFFFFFFFF) in furniture.verification
    assert furniture.verification.dtype == np.uint32 and (np.diff(furniture.verification.astype(np.int64)) > 0).all()
    assert not np.isin(verification_hashes(np.array([shingle_hash(" ".join(article(0)[0].split()[:4]))],
                                                    dtype=np.uint64)), furniture.verification).any()
    assert footer in furniture.examples


# --- the learner in the pipeline -------------------------------------------------------------------


def item(host: str, n: int, body: list[str] | None = None, **page) -> dict:
    return {"url": f"https://{host}/story/{n}", "body_text": site_page(n, article(n) if body is None else body, **page)}


@pytest.fixture
def settings(tmp_path) -> dict:
    return {
        "SIMHASH_BOILERPLATE": True,
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        "SIMHASH_BOILERPLATE_SAMPLE_PAGES": 3,
    }


async def test_a_hosts_first_pages_wait_for_its_furniture_then_copies_elsewhere_are_found(settings) -> None:
    pipeline = await open_pipeline(settings)
    try:
        held = [asyncio.ensure_future(feed(pipeline, item("a.example", n))) for n in range(2)]
        await until(lambda: pipeline.learner.held == 2)
        assert not any(task.done() for task in held)
        assert await feed(pipeline, item("a.example", 2))
        assert all(await asyncio.gather(*held)) and pipeline.learner.held == 0
        assert await feed(pipeline, item("a.example", 3))  # no wait once the host has its furniture
        # Another site, another template, one of a.example's stories among its pages: dropped.
        other = [asyncio.ensure_future(feed(pipeline, item("b.example", n, brand="Other Daily", share=False)))
                 for n in (1, 5, 6)]
        assert await asyncio.gather(*other) == [False, True, True]
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/hosts_learned"] == 2 and stats["simhash/boilerplate/held_max"] == 3
    (merged,) = read_merge_log(settings["SIMHASH_MERGE_LOG"])
    assert merged["duplicate_url"] == "https://b.example/story/1" and merged["jaccard"] == 1.0
    assert merged["canonical_url"] == "https://a.example/story/1" and merged["rule"]["boilerplate_version"] > 0


async def test_pages_with_soft_hyphens_are_stripped_and_judged(settings) -> None:
    """News sites hyphenate with ``&shy;``: a page that is ASCII but for its soft hyphens is judged
    like any other, not passed on unchecked."""

    def hyphenated(host: str, n: int, **page) -> dict:
        hyphens = item(host, n, [line.replace("w1", "w\u00ad1") for line in article(n)], **page)
        return {**hyphens, "body_text": hyphens["body_text"].replace("\u00b7", "-")}  # the byline's dots

    pipeline = await open_pipeline(settings)
    try:
        assert all(await asyncio.gather(*(feed(pipeline, hyphenated("a.example", n)) for n in range(3))))
        others = [hyphenated("b.example", n, brand="Other Daily") for n in (1, 5, 6)]
        assert await asyncio.gather(*map(functools.partial(feed, pipeline), others)) == [False, True, True]
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/duplicates"] == 1 and stats["simhash/unchecked"] == 0


def release(version: int) -> list[str]:
    """Story 0 at a release: its first three paragraphs, and one of the release's own."""
    return [*article(0)[:3], words(f"release{version}w", 30)]


@pytest.mark.parametrize("first", [[article(0)] * 4, [release(v) for v in range(4)]], ids=["copies", "releases"])
async def test_a_host_whose_first_pages_are_one_page_learns_from_distinct_documents(settings, first) -> None:
    """A host's first four pages are one story (copies, or releases sharing most paragraphs): its warm-up
    holds them until another story makes two distinct documents, and no line of the story is
    furniture. A sample of those first pages alone would take the story's lines for template, or
    learn nothing for good."""
    pipeline = await open_pipeline(settings)
    learner = pipeline.learner
    texts = [site_page(0, body) for body in first] + [site_page(n, article(n)) for n in (1, 2)]
    try:
        stripping = [asyncio.ensure_future(learner.strip("a.example", text)) for text in texts]
        stripped = await asyncio.wait_for(asyncio.gather(*stripping), timeout=30)
        blob = await learner.store.load_boilerplate("a.example")
    finally:
        await pipeline.close_spider()
    assert blob is not None, "nothing stored: learned from one document"
    stored = decode(blob)
    assert (stored.pages, stored.documents) == (5, 2)
    story = {line for body in first for line in body}
    assert not np.isin(page_lines("\n".join(story)).hashes, stored.lines).any()
    assert [[line for line in page.text.split("\n") if line.strip()] for page in stripped[:4]] == first
    assert {page.version for page in stripped} == {stored.version}
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/held_max"] == 5 and stats["simhash/boilerplate/sample_pages_max"] == 5


async def test_a_lone_page_waits_no_longer_than_the_warmup_timeout(settings) -> None:
    pipeline = await open_pipeline({**settings, "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT": 0.2})
    try:
        assert await asyncio.wait_for(feed(pipeline, item("lonely.example", 0)), timeout=30)
        assert pipeline.learner.held == 0
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/hosts_without"] == 1 and stats["simhash/boilerplate/held_seconds_max"] >= 0.2


async def test_past_max_held_the_oldest_warmup_ends(settings) -> None:
    pipeline = await open_pipeline({**settings, "SIMHASH_BOILERPLATE_SAMPLE_PAGES": 10,
                                    "SIMHASH_BOILERPLATE_MAX_HELD": 3})
    try:
        first = [asyncio.ensure_future(feed(pipeline, item("big.example", n))) for n in range(3)]
        await until(lambda: pipeline.learner.held == 3)
        other = asyncio.ensure_future(feed(pipeline, item("small.example", 5)))
        assert all(await asyncio.wait_for(asyncio.gather(*first), timeout=30))
        assert pipeline.learner.held == 1 and not other.done()
        pipeline.learner.flush("test over")
        assert await other
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/boilerplate/held_max"] == 4


async def test_learned_furniture_is_stored_and_the_next_crawl_uses_it_at_once(settings) -> None:
    first = await open_pipeline(settings)
    try:
        await asyncio.gather(*(feed(first, item("a.example", n)) for n in range(3)))
        learned = await first.learner.furniture("a.example")
    finally:
        await first.close_spider()
    second = await open_pipeline(settings)
    try:
        copy = {**item("a.example", 0), "url": "https://a.example/story/0/copy"}  # another URL: not seen before
        assert not await asyncio.wait_for(feed(second, copy), timeout=30)  # no warm-up: a copy
        assert np.array_equal(await second.learner.furniture("a.example"), learned) and len(learned)
    finally:
        await second.close_spider()
    stats = simhash_stats(second)
    assert stats["simhash/boilerplate/hosts_loaded"] == 1 and "simhash/boilerplate/hosts_learned" not in stats
    versions = {r["rule"]["boilerplate_version"] for r in read_merge_log(settings["SIMHASH_MERGE_LOG"])}
    assert len(versions) == 1 and versions != {0}


@pytest.mark.parametrize("paragraphs", [6, 12])
async def test_a_warmup_that_ended_short_is_learned_again_once_and_earlier_pages_keep_their_version(
    settings, paragraphs
) -> None:
    """The first page goes unstripped (version 0); three later pages make the furniture (a new version),
    which every later page gets; the first page's copy still finds it, however short the article
    (what the host now calls furniture is left out of the early page's record too), is judged on the
    whole texts (one host), and its merge record names the version it was stripped with."""
    pipeline = await open_pipeline(settings)
    try:
        early = asyncio.ensure_future(feed(pipeline, item("a.example", 0, body=article(0, paragraphs=paragraphs))))
        await until(lambda: pipeline.learner.held == 1)
        pipeline.learner.flush("test: the host went quiet")
        assert await early
        for n in (1, 2, 3):
            assert await feed(pipeline, item("a.example", n))
        await until(lambda: simhash_stats(pipeline)["simhash/boilerplate/hosts_relearned"] == 1)  # learned, saved
        copy = {"url": "https://a.example/amp/story/0", "body_text": site_page(0, article(0, paragraphs=paragraphs))}
        assert not await feed(pipeline, copy)
        assert await feed(pipeline, item("a.example", 4))
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/hosts_without"] == 1 and stats["simhash/boilerplate/hosts_relearned"] == 1
    (merged,) = read_merge_log(settings["SIMHASH_MERGE_LOG"])
    assert merged["canonical_url"] == "https://a.example/story/0" and merged["rule"]["boilerplate_version"] > 0
    assert merged["jaccard"] == 1.0  # the whole texts: the same


class BrokenStore:
    """A store whose every call fails, as an unreachable index does once its retries are spent."""

    async def load_boilerplate(self, host: str) -> bytes | None:
        raise ConnectionError("index down")

    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        raise ConnectionError("index down")


async def test_a_store_that_fails_costs_the_furniture_its_persistence_not_the_items(settings, caplog) -> None:
    pipeline = await open_pipeline(settings)
    await pipeline.learner.open(BrokenStore())
    try:
        with caplog.at_level(logging.WARNING, logger="scrapy_simhash.boilerplate"):
            kept = await asyncio.gather(*(feed(pipeline, item(host, n)) for host, first in (("a.example", 0),
                                          ("b.example", 3)) for n in range(first, first + 3)))
    finally:
        await pipeline.close_spider()
    assert all(kept) and simhash_stats(pipeline)["simhash/boilerplate/hosts_learned"] == 2
    messages = [record.getMessage() for record in caplog.records]
    # Once each, not once a host: an index that is down is down for every host.
    assert sum("Could not load the furniture of 'a.example'" in m for m in messages) == 1
    assert sum("Could not save the furniture of 'a.example'" in m for m in messages) == 1
    assert not any("b.example" in m for m in messages)


async def test_an_unreadable_stored_set_is_learned_again(settings, caplog) -> None:
    pipeline = await open_pipeline(settings)
    try:
        await pipeline.learner.store.save_boilerplate("a.example", 7, b"SBP\x09 from a future version")
        with caplog.at_level(logging.WARNING, logger="scrapy_simhash.boilerplate"):
            await asyncio.gather(*(feed(pipeline, item("a.example", n)) for n in range(3)))
    finally:
        await pipeline.close_spider()
    assert simhash_stats(pipeline)["simhash/boilerplate/hosts_learned"] == 1
    assert any("format 9" in record.getMessage() for record in caplog.records)


def test_the_settings_are_checked() -> None:
    from scrapy.settings import Settings

    from scrapy_simhash.settings import read

    with pytest.raises(ValueError, match="SIMHASH_BOILERPLATE_SAMPLE_PAGES"):
        read(Settings({"SIMHASH_BOILERPLATE_SAMPLE_PAGES": 1}), "s")
    config = read(Settings({"SIMHASH_BOILERPLATE": "True"}), "s")
    assert config.boilerplate and config.boilerplate_sample_pages == 3
    assert json.dumps(config.boilerplate_warmup_timeout) == "10.0"


# --- the guard: content taken for furniture never merges distinct pages ---------------------------


STATEMENT = [words(f"statement{p}w", 30) for p in range(6)]  # quoted whole by every early story
UPDATE = [words("update", 60)]  # a paragraph the later stories share


async def test_distinct_pages_alike_only_once_content_taken_for_furniture_is_removed_are_kept(settings) -> None:
    """Every story of the sample quotes the same statement (a quarter of its prose: the stories are
    distinct documents, not versions of one text), so the learner takes it for furniture. Two
    later stories, one quoting all of it and one a third, share one paragraph besides: without
    furniture they are the same text, whole they are far apart (Jaccard ~0.6). Both are kept, and the
    rejection is logged with the whole texts' Jaccard."""
    pipeline = await open_pipeline(settings)
    try:
        sample = [asyncio.ensure_future(feed(pipeline, item("a.example", n, STATEMENT + article(n, 8))))
                  for n in range(3)]
        assert all(await asyncio.gather(*sample))
        assert await feed(pipeline, item("a.example", 10, STATEMENT + UPDATE))
        assert await feed(pipeline, item("a.example", 11, STATEMENT[:2] + UPDATE))
        assert not await feed(pipeline, item("a.example", 12, STATEMENT + UPDATE))  # a true copy still goes
    finally:
        await pipeline.close_spider()
    stats = simhash_stats(pipeline)
    # Story 11 against story 10, and the copy of story 10 against story 11.
    assert stats["simhash/boilerplate/guarded"] == 2 and stats["simhash/duplicates"] == 1


async def test_two_crawls_on_one_index_strip_a_host_with_one_furniture(redis_server_url, redis_prefix, tmp_path):
    """Two crawls learn one host at once from different first pages, whose sample makes different
    furniture (the second's pages share a paragraph): the first set stored is the one both use."""
    def crawl(name: str) -> dict:
        return {"SIMHASH_BOILERPLATE": True, "SIMHASH_INDEX_URL": redis_server_url, "SIMHASH_KEY_PREFIX": redis_prefix,
                "SIMHASH_MERGE_LOG": str(tmp_path / f"{name}.jsonl"), "SIMHASH_BOILERPLATE_SAMPLE_PAGES": 3}

    first, second = await open_pipeline(crawl("first")), await open_pipeline(crawl("second"))
    try:
        held = [asyncio.ensure_future(feed(first, item("a.example", n))) for n in range(2)]
        held += [asyncio.ensure_future(feed(second, item("a.example", n, STATEMENT[:1] + article(n)))) for n in (3, 4)]
        await until(lambda: first.learner.held == second.learner.held == 2)  # both are learning the host
        last = item("a.example", 5, STATEMENT[:1] + article(5))
        await asyncio.gather(feed(first, item("a.example", 2)), feed(second, last), *held)
        assert await feed(second, item("a.example", 6, STATEMENT[:1] + article(6)))
        assert not await feed(first, item("a.example", 6, STATEMENT[:1] + article(6)))  # stripped alike: found
        versions = {pipeline.learner._hosts["a.example"].version for pipeline in (first, second)}
    finally:
        await first.close_spider()
        await second.close_spider()
    assert len(versions) == 1 and 0 not in versions
    adopted = [simhash_stats(pipeline)["simhash/boilerplate/hosts_adopted"] for pipeline in (first, second)]
    assert sorted(adopted) == [0, 1]


class RacedStore:
    """The crawl's real store, with another crawl finishing its warm-up of the host at a chosen moment.

    The first load waits for ``go``; as it returns (nothing stored yet), ``returned`` is set. Before
    any later load, the other crawl stores ``theirs``, as it does once its own sample is complete.
    """

    def __init__(self, store, theirs: Furniture) -> None:
        self.store, self.theirs = store, theirs
        self.go, self.returned = asyncio.Event(), asyncio.Event()
        self.loads = 0

    async def load_boilerplate(self, host: str) -> bytes | None:
        self.loads += 1
        if self.loads == 1:
            await self.go.wait()
            stored = await self.store.load_boilerplate(host)
            self.returned.set()
            return stored
        await self.store.save_boilerplate(host, self.theirs.version, encode(self.theirs))
        return await self.store.load_boilerplate(host)

    async def save_boilerplate(self, host: str, version: int, blob: bytes) -> bytes:
        return await self.store.save_boilerplate(host, version, blob)


async def test_a_page_between_a_load_and_the_warmup_it_starts_counts_the_host_once(settings) -> None:
    """A page that comes between the host's first load (nothing stored) and the warm-up that load
    starts loads the host again; the other crawl has stored its set meanwhile. That load is not
    used (the warm-up runs, and adopts the other crawl's set): the host counts once, as adopted."""
    theirs = learn([page_lines(site_page(n, STATEMENT[:1] + article(n))) for n in (3, 4, 5)])
    pipeline = await open_pipeline(settings)
    learner = pipeline.learner
    store = learner.store = RacedStore(learner.store, theirs)

    async def page_after_the_first_load_returned(n: int):
        await store.returned.wait()
        await asyncio.sleep(0)  # after the load's end is published, before its caller's turn
        return await learner.strip("a.example", site_page(n, article(n)))

    try:
        first = asyncio.ensure_future(learner.strip("a.example", site_page(0, article(0))))
        second = asyncio.ensure_future(page_after_the_first_load_returned(1))
        await until(lambda: store.loads == 1)
        store.go.set()
        await until(lambda: learner.held == 2)
        stripped = await asyncio.gather(first, second, learner.strip("a.example", site_page(2, article(2))))
    finally:
        await pipeline.close_spider()
    assert store.loads == 2  # the page came in that gap
    assert {page.version for page in stripped} == {theirs.version}
    stats = simhash_stats(pipeline)
    assert stats["simhash/boilerplate/hosts_adopted"] == 1 and stats["simhash/boilerplate/hosts_loaded"] == 0
