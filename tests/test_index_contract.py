"""The index contract, run against every backend: a SQLite file in tmp_path and a real Redis."""

from __future__ import annotations

import multiprocessing
import random
import sqlite3

import numpy as np
import pytest
import redis

from scrapy_simhash.index import Record, open_index
from scrapy_simhash.layout import BlockLayout, SampledLayout

BACKENDS = ["sqlite", "redis"]
ODD_IDS = ["a:b:c", "with space", "line\nbreak", "ünïcødé·id", "{tag}", "", "x" * 300]


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def location(backend, tmp_path, request):
    """(url, key_prefix) of an empty index of this test's own."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/index.db", "unused"
    url = request.getfixturevalue("redis_server_url")
    return url, request.getfixturevalue("redis_prefix") + ":{spider}"


@pytest.fixture
async def make_index(location):
    url, prefix = location
    opened = []

    def make(**options):
        index = open_index(url, key_prefix=prefix, **options)
        opened.append(index)
        return index

    yield make
    for index in opened:
        await index.close()


@pytest.fixture
def snapshot(backend, location):
    """Everything the backend stores, as comparable plain data."""
    url, prefix = location

    def take():
        if backend == "sqlite":
            db = sqlite3.connect(url[len("sqlite:///") :])
            tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            dump = {t: sorted(map(repr, db.execute(f"SELECT * FROM {t}"))) for t in tables}
            db.close()
            return dump
        client = redis.Redis.from_url(url)
        dump = {}
        for key in client.scan_iter(match=prefix.replace("{spider}", "{default}") + "*"):
            kind = client.type(key).decode()
            dump[key] = {
                "string": lambda: client.get(key),
                "set": lambda: sorted(client.smembers(key)),
                "hash": lambda: sorted(client.hgetall(key).items()),
                "zset": lambda: client.zrange(key, 0, -1, withscores=True),
            }[kind]()
        client.close()
        return dump

    return take


def _record(rng: random.Random, record_id: str, fingerprint: int | None = None, **fields) -> Record:
    shingles = np.unique(np.array([rng.getrandbits(32) for _ in range(rng.randint(0, 40))], dtype=np.uint32))
    fp = rng.getrandbits(64) if fingerprint is None else fingerprint
    return Record(id=record_id, fingerprint=fp, url=f"https://example.com/{record_id}", shingles=shingles, **fields)


def _near(rng: random.Random, fp: int, distance: int) -> int:
    for pos in rng.sample(range(64), distance):
        fp ^= 1 << pos
    return fp


async def test_records_round_trip_with_odd_ids(make_index):
    index = make_index()
    rng = random.Random(1)
    records = [_record(rng, rid, first_seen=1000.0 + i) for i, rid in enumerate(ODD_IDS)]
    for record in records:
        await index.add(record)
    assert await index.count() == len(records)
    for record in records:
        got = await index.get(record.id)
        assert (got.id, got.fingerprint, got.url, got.first_seen, got.retention) == (
            record.id, record.fingerprint, record.url, record.first_seen, "default"
        )
        assert got.urls == (record.url,)
        assert got.shingles.dtype == np.uint32 and np.array_equal(got.shingles, record.shingles)
        [found] = await index.candidates(record.fingerprint, 0)
        assert found.record_id == record.id and np.array_equal(found.shingles, record.shingles)
    assert await index.get("missing") is None


@pytest.mark.parametrize(
    "layout",
    [
        BlockLayout(bands=4),
        BlockLayout(bands=2, multiprobe=True),
        SampledLayout(6, 16, seed=5),
        SampledLayout(6, 16, seed=5, multiprobe=True),
    ],
    ids=repr,
)
async def test_candidates_are_exactly_the_records_within_the_distance(make_index, layout):
    """Against brute force; for a sampled layout only what its buckets can find is asked for."""
    index = make_index(layout=layout)
    rng = random.Random(2)
    bases = [rng.getrandbits(64) for _ in range(40)]
    stored = {}
    for i, base in enumerate(bases):
        for j in range(4):  # a cluster of near neighbours per base
            fp = _near(rng, base, rng.randint(0, 6))
            stored[f"r{i}-{j}"] = fp
            await index.add(Record(id=f"r{i}-{j}", fingerprint=fp))
    max_distance = max(layout.guaranteed_distance, 6)
    for base in bases[:20]:
        query = _near(rng, base, rng.randint(0, 3))
        got = await index.candidates(query, max_distance)
        probed = set(layout.probe_keys(query))
        expected = sorted(
            ((fp ^ query).bit_count(), rid)
            for rid, fp in stored.items()
            if (fp ^ query).bit_count() <= max_distance and probed & set(layout.insert_keys(fp))
        )
        assert [(c.distance, c.record_id) for c in got] == expected
        assert all(c.fingerprint == stored[c.record_id] for c in got)
        # within the guarantee, the buckets miss nothing
        assert {rid for d, rid in expected if d <= layout.guaranteed_distance} == {
            rid for rid, fp in stored.items() if (fp ^ query).bit_count() <= layout.guaranteed_distance
        }


async def test_check_and_add_adds_only_when_nothing_is_near(make_index):
    index = make_index()
    rng = random.Random(3)
    first = _record(rng, "first")
    assert await index.check_and_add(first, 3) == []
    near = _record(rng, "near", _near(rng, first.fingerprint, 3))
    [candidate] = await index.check_and_add(near, 3)
    assert (candidate.record_id, candidate.fingerprint, candidate.distance) == ("first", first.fingerprint, 3)
    assert np.array_equal(candidate.shingles, first.shingles)
    assert await index.get("near") is None and await index.count() == 1
    assert await index.check_and_add(_record(rng, "far", _near(rng, first.fingerprint, 12)), 3) == []
    assert await index.count() == 2


async def test_a_retried_check_and_add_finds_its_own_write_added_not_a_duplicate(make_index):
    """A retry after a lost reply sends the same Record again: the record its first attempt stored is
    this item, not a candidate; a new Record of the same page (a recrawl) is still a duplicate."""
    index = make_index()
    rng = random.Random(15)
    page = _record(rng, "page")
    assert await index.check_and_add(page, 3) == []
    near = _record(rng, "near", _near(rng, page.fingerprint, 2))
    assert [c.record_id for c in await index.check_and_add(near, 3)] == ["page"]
    assert await index.check_and_add(page, 3) == []  # the retry
    assert await index.count() == 1
    recrawl = _record(rng, "page", page.fingerprint)
    [found] = await index.check_and_add(recrawl, 3)
    assert (found.record_id, found.distance) == ("page", 0)


async def test_a_retried_exact_check_and_add_finds_its_own_write_added(make_index):
    index = make_index()
    rng = random.Random(16)
    short = _record(rng, "short")
    assert await index.check_and_add_exact(short, "d1") is None
    assert await index.check_and_add_exact(short, "d1") is None  # the retry
    assert await index.check_and_add_exact(_record(rng, "short"), "d1") == "short"  # a recrawl
    assert await index.check_and_add_exact(_record(rng, "other"), "d1") == "short"
    assert await index.count() == 1


async def test_adding_an_existing_id_replaces_its_band_entries(make_index):
    index = make_index()
    rng = random.Random(4)
    old = _record(rng, "same:id", first_seen=50.0)
    new = _record(rng, "same:id", first_seen=80.0)
    new.url = "https://mirror.example.com/x"
    await index.add(old)
    await index.add(new)
    assert await index.candidates(old.fingerprint, 3) == []
    [found] = await index.candidates(new.fingerprint, 0)
    got = await index.get("same:id")
    assert found.record_id == "same:id" and got.fingerprint == new.fingerprint
    assert got.first_seen == 50.0 and set(got.urls) == {old.url, new.url}
    assert await index.count() == 1


async def test_identical_fingerprints_of_two_records_are_both_kept(make_index):
    """Verification may reject a distance-0 candidate; the pipeline then adds the page anyway."""
    index = make_index()
    rng = random.Random(5)
    a = _record(rng, "a")
    b = _record(rng, "b", a.fingerprint)
    await index.add(a)
    await index.add(b)
    assert {c.record_id for c in await index.candidates(a.fingerprint, 0)} == {"a", "b"}
    await index.remove("a")
    assert [c.record_id for c in await index.candidates(a.fingerprint, 0)] == ["b"]


async def test_merge_gains_urls_and_keeps_the_earliest_first_seen(make_index):
    index = make_index()
    record = _record(random.Random(6), "canon", first_seen=500.0)
    await index.add(record)
    await index.merge("canon", "https://other.example.com/a b", 400.0)
    await index.merge("canon", "https://third.example.com/ü", 900.0)
    await index.merge("canon", record.url, 900.0)
    await index.merge("erased-meanwhile", "https://x.example.com/", 1.0)
    got = await index.get("canon")
    assert got.first_seen == 400.0
    assert got.urls == (record.url, "https://other.example.com/a b", "https://third.example.com/ü")


@pytest.mark.parametrize("record_id", ODD_IDS[:5])
async def test_erasure_leaves_no_trace(make_index, snapshot, record_id):
    index = make_index(retention={"default": None, "short": 3600})
    rng = random.Random(7)
    neighbour = _record(rng, "neighbour")
    await index.add(neighbour)
    await index.check_and_add_exact(_record(rng, "short-text"), "digest-1")
    before = snapshot()
    victim = _record(rng, record_id, _near(rng, neighbour.fingerprint, 5), retention="short")
    await index.add(victim)
    await index.merge(record_id, "https://other.example.com/", 1.0)
    assert snapshot() != before
    assert await index.remove(record_id) is True
    assert snapshot() == before
    assert await index.remove(record_id) is False
    assert await index.get(record_id) is None


async def test_erasure_of_an_exact_record_frees_its_digest(make_index, snapshot):
    index = make_index()
    rng = random.Random(8)
    assert await index.count() == 0
    before = snapshot()
    assert await index.check_and_add_exact(_record(rng, "short"), "d1") is None
    assert await index.check_and_add_exact(_record(rng, "again"), "d1") == "short"
    assert (await index.get("short")).id == "short" and await index.get("again") is None
    assert await index.remove("short")
    assert snapshot() == before
    assert await index.check_and_add_exact(_record(rng, "again"), "d1") is None


async def test_expired_records_leave_the_bands(make_index, snapshot):
    clock = Clock()
    index = make_index(retention={"default": None, "short": 100.0}, clock=clock)
    rng = random.Random(9)
    keep = _record(rng, "keep")
    await index.add(keep)
    before = snapshot()
    brief = _record(rng, "brief", _near(rng, keep.fingerprint, 1), retention="short")
    await index.add(brief)
    clock.now += 60
    assert await index.expire() == 0
    await index.merge("brief", "https://later.example.com/", clock.now)  # a merge restarts the TTL
    clock.now += 60
    assert await index.expire() == 0
    clock.now += 41
    assert await index.expire() == 1
    assert snapshot() == before
    assert [c.record_id for c in await index.candidates(brief.fingerprint, 3)] == ["keep"]


@pytest.mark.parametrize("reconfigured, erased", [({"short": None}, 0), ({}, 1), ({"short": 1000.0}, 0)])
async def test_a_merge_applies_the_current_ttl_of_the_record_class(make_index, reconfigured, erased):
    """A class now kept for good stops expiring, a class no longer configured keeps its expiry."""
    clock = Clock()
    first = make_index(retention={"default": None, "short": 100.0}, clock=clock)
    await first.add(_record(random.Random(14), "r", retention="short"))
    await first.close()
    index = make_index(retention={"default": None, **reconfigured}, clock=clock)
    await index.merge("r", "https://again.example.com/", clock.now)
    clock.now += 101
    assert await index.expire() == erased


async def test_unknown_retention_class_is_refused(make_index):
    index = make_index(retention={"default": None})
    with pytest.raises(ValueError, match="unknown retention class 'weekly'"):
        await index.add(_record(random.Random(10), "r", retention="weekly"))
    assert await index.count() == 0


async def test_boilerplate_round_trip(make_index):
    index = make_index()
    assert await index.load_boilerplate("example.com") is None
    hashes = np.array(sorted(random.Random(11).getrandbits(64) for _ in range(50)), dtype=np.uint64)
    await index.save_boilerplate("example.com", 1, hashes)
    await index.save_boilerplate("example.com", 2, hashes[:10])
    version, loaded = await index.load_boilerplate("example.com")
    assert version == 2 and loaded.dtype == np.uint64 and np.array_equal(loaded, hashes[:10])
    assert await index.load_boilerplate("other.example.com") is None


async def test_an_index_refuses_another_layout(make_index):
    index = make_index(layout=BlockLayout(bands=4))
    await index.add(_record(random.Random(12), "r"))
    with pytest.raises(ValueError, match="built with BlockLayout"):
        await make_index(layout=BlockLayout(bands=5)).count()  # at open or at first use


def _race(url: str, prefix: str, fingerprints: list[int], start, results) -> None:
    """One crawler process: check-and-add each fingerprint the moment the other process does."""
    import asyncio

    async def main() -> list[bool]:
        index = open_index(url, key_prefix=prefix)
        won = []
        for i, fp in enumerate(fingerprints):
            start.wait()
            won.append(await index.check_and_add(Record(id=f"{i}-{fp}", fingerprint=fp), 3) == [])
        await index.close()
        return won

    results.put(asyncio.run(main()))


@pytest.mark.slow
async def test_concurrent_check_and_add_from_two_processes_has_one_winner(make_index, location):
    url, prefix = location
    make_index()  # creates the index (and its schema) before the race
    rng = random.Random(13)
    rounds = 30
    bases = [rng.getrandbits(64) for _ in range(rounds)]
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(target=_race, args=(url, prefix, [_near(rng, b, 1) for b in bases], start, results))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    assert all(a != b for a, b in zip(*outcomes)), outcomes
    assert await make_index().count() == rounds


async def test_sqlite_urls_name_relative_and_absolute_files_per_spider(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for url, expected in [
        ("sqlite:///data/{spider}.db", tmp_path / "data" / "news.db"),
        (f"sqlite:///{tmp_path}/abs/{{spider}}.db", tmp_path / "abs" / "news.db"),
    ]:
        index = open_index(url, spider="news")
        await index.add(Record(id="r", fingerprint=1))
        await index.close()
        assert expected.is_file()


async def test_an_sqlite_file_made_before_write_ids_gains_the_column(tmp_path):
    path = tmp_path / "old.db"
    index = open_index(f"sqlite:///{path}")
    await index.add(Record(id="old", fingerprint=1))
    await index.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE records DROP COLUMN write_id")
    db.close()
    index = open_index(f"sqlite:///{path}")
    retried = Record(id="new", fingerprint=0xFFFF_FFFF_0000_0000)
    assert await index.check_and_add(retried, 3) == [] and await index.check_and_add(retried, 3) == []
    assert [c.record_id for c in await index.candidates(1, 0)] == ["old"]
    await index.close()


def test_an_unknown_url_scheme_is_refused():
    with pytest.raises(ValueError, match="SIMHASH_INDEX_URL must start with sqlite://"):
        open_index("mongodb://localhost/index")
