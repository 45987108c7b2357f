"""SQLite and Redis, given the same random crawls (ingest as the pipeline does, confirm, erase, expire,
crash and rerun), answer alike and hold the same records in the same groups after every step, with
at most one canonical a group."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import uuid

import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from samples import LAYOUT, Clock, hashes, near, record

from scrapy_simhash.index import open_index
from scrapy_simhash.index import redis as redis_index
from scrapy_simhash.index import sqlite
from scrapy_simhash.judge import place, place_exact

IDS = [f"p{n}" for n in range(5)]
URLS = [f"https://site/{n}" for n in range(3)]
BASES = [hashes(200 + n) for n in range(3)]
TEXTS = {(family, variant): base if variant == 0 else near(base, 0.9, seed=300 + 10 * family + variant)
         for family, base in enumerate(BASES) for variant in range(4)}
THRESHOLD = 0.8
TTL = 100.0


class BackendsAgree(RuleBasedStateMachine):
    redis_url = ""
    workdir = None
    runs = itertools.count()  # one SQLite file per example

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = Clock()
        self.run = next(self.runs)
        self.prefix = f"simhash-test:{uuid.uuid4().hex[:12]}"
        self.sessions = itertools.count()
        self.indexes: list = []
        self.pending: list[list[int]] = []

    def call(self, method: str, *args):
        """The same call on every backend: each one's answer, or the exception's type."""
        return [self.answer(getattr(index, method)(*args)) for index in self.indexes]

    def answer(self, call):
        try:
            return self.loop.run_until_complete(call)
        except Exception as exc:  # noqa: BLE001 - the backends must fail alike
            return type(exc)

    @initialize()
    def open_session(self) -> None:
        session = f"s{next(self.sessions):03d}".encode()
        self.indexes = [
            open_index(url, layout=LAYOUT, key_prefix=self.prefix + ":{t}", session=session, clock=self.clock,
                       retention={"default": None, "short": TTL})
            for url in (f"sqlite:///{self.workdir}/agree{self.run}.db", self.redis_url)
        ]
        for index in self.indexes:
            self.loop.run_until_complete(index.open())
        self.pending = [[] for _ in self.indexes]

    pages = dict(text=st.sampled_from(sorted(TEXTS)), id_=st.sampled_from(IDS), url=st.sampled_from(URLS),
                 short=st.booleans())

    @rule(**pages)
    def ingest(self, text, id_, url, short) -> None:
        self.placed(place, record(id_, TEXTS[text], url=url, retention="short" if short else "default"), THRESHOLD)

    @rule(**pages)
    def ingest_another(self, text, id_, url, short) -> None:
        """Pages come more often than anything else happens."""
        self.ingest(text, id_, url, short)

    @rule(**pages)
    def ingest_short_text(self, text, id_, url, short) -> None:
        digest = hashlib.blake2b(repr(text).encode(), digest_size=16).digest()
        self.placed(place_exact, record(id_, TEXTS[text], url=url, retention="short" if short else "default"), digest,
                    THRESHOLD)

    def placed(self, fn, new, *args) -> None:
        placements = [self.answer(fn(index, new, *args)) for index in self.indexes]
        outcomes = [p if isinstance(p, type) else (p.added, p.joined) for p in placements]
        assert outcomes[0] == outcomes[1]
        for pending, placement in zip(self.pending, placements):
            if not isinstance(placement, type) and placement.added:
                pending.append(placement.added)

    @rule()
    def confirm(self) -> None:
        for index, pending in zip(self.indexes, self.pending):
            self.loop.run_until_complete(index.confirm(pending))
            pending.clear()

    @rule()
    def scraped(self) -> None:
        """The pending records' items were scraped and wait for a feed: still pending."""
        for index, pending in zip(self.indexes, self.pending):
            self.loop.run_until_complete(index.scraped(pending))

    @rule(key=st.sampled_from(IDS + URLS))
    def erase(self, key) -> None:
        erased = self.call("erase", key)
        assert erased[0] == erased[1]

    @rule()
    def expire(self) -> None:
        self.clock.now += TTL + 1
        expired = self.call("expire")
        assert expired[0] == expired[1]

    @rule()
    def crash(self) -> None:
        """The crawl dies with its pending records unconfirmed; the next one opens a new session."""
        for index in self.indexes:
            self.loop.run_until_complete(index.close())
        self.clock.now += 60  # past the dead session's lease
        self.open_session()

    def stored(self) -> list[list]:
        """Every record each backend holds, by the ids and URLs the crawls used."""
        keys = IDS + URLS
        return [
            sorted({r.rid: (r.rid, r.group, r.canonical, r.id, r.url, r.pending, r.retention, len(r.hashes) > 0)
                    for key in keys
                    for r in self.loop.run_until_complete(index.records(key))}.values())
            for index in self.indexes
        ]

    @invariant()
    def same_records(self) -> None:
        if not self.indexes:
            return
        sqlite_records, redis_records = self.stored()
        assert sqlite_records == redis_records
        assert self.call("count") == [len(sqlite_records)] * 2

    @invariant()
    def one_canonical_per_group(self) -> None:
        if not self.indexes:
            return
        canonicals: dict[int, int] = {}
        for _rid, group, canonical, *_ in self.stored()[0]:
            canonicals[group] = canonicals.get(group, 0) + canonical
        assert all(count <= 1 for count in canonicals.values())

    def teardown(self) -> None:
        for index in self.indexes:
            self.loop.run_until_complete(index.close())
        self.loop.close()
        client = redis.Redis.from_url(self.redis_url)
        for key in client.scan_iter(match=f"{self.prefix}:*", count=1000):
            client.delete(key)
        client.close()


def test_sqlite_and_redis_agree_on_random_crawls(redis_server_url, tmp_path, monkeypatch):
    """Derandomized: the same 60 crawls every run. Groups reach a bound of 2 findable members within
    a few steps."""
    for backend in (sqlite, redis_index):
        monkeypatch.setattr(backend, "MAX_BANDED_MEMBERS", 2)
    BackendsAgree.redis_url, BackendsAgree.workdir = redis_server_url, tmp_path
    run_state_machine_as_test(
        BackendsAgree,
        settings=settings(max_examples=60, stateful_step_count=40, deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck)),
    )
