"""Every contract test runs on each backend: a SQLite file, a real Redis and a real Redis Cluster."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from redis_servers import keyspace

from scrapy_simhash.index import open_index
from samples import LAYOUT

BACKENDS = ["sqlite", "redis", "cluster"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def location(backend, tmp_path, request):
    """(url, key prefix) of an empty index of this test's own."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/index.db", "unused"
    if backend == "redis":
        return request.getfixturevalue("redis_server_url"), request.getfixturevalue("redis_prefix") + ":{t}"
    scheme, _, rest = request.getfixturevalue("cluster").url.partition("://")
    return f"{scheme}+cluster://{rest}", "simhash:{t}"


def sqlite_file(url: str) -> closing[sqlite3.Connection]:
    """A connection to the SQLite index at ``url``, closed when the ``with`` block ends."""
    return closing(sqlite3.connect(url[len("sqlite:///") :]))


@pytest.fixture
async def make_index(location, tmp_path):
    url, prefix = location
    opened = []

    async def make(fresh: bool = False, **options):
        options.setdefault("layout", LAYOUT)
        where = f"sqlite:///{tmp_path}/fresh.db" if fresh and url.startswith("sqlite") else url
        index = open_index(where, key_prefix=prefix + ("-fresh" if fresh else ""), **options)
        opened.append(index)
        await index.open()
        return index

    yield make
    for index in opened:
        await index.close()


@pytest.fixture
def dump(backend, location):
    """Everything the backend stores under this index, as comparable plain data."""
    url, prefix = location

    def take():
        if backend == "sqlite":
            with sqlite_file(url) as db:
                tables = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                return {t: sorted(map(repr, db.execute(f"SELECT * FROM {t}"))) for t in tables
                        if t != "sqlite_sequence"}
        # The rid sequence stays, like SQLite's sqlite_sequence: rids are never reused.
        return {key: value for key, value in keyspace(url, prefix).items() if key != f"{prefix}:n".encode()}

    return take


@pytest.fixture
def band_entries(backend, location):
    """How many band bucket entries the index stores: one per (record, band key) it lists."""
    url, prefix = location

    def count():
        if backend == "sqlite":
            with sqlite_file(url) as db:
                [(entries,)] = db.execute("SELECT COUNT(*) FROM bands")
            return entries
        entry = LAYOUT.rows - 2 + 5  # a band key's bytes past the two that name hash and field, a 5-byte rid
        buckets = [value for key, value in keyspace(url, prefix).items() if key.startswith(f"{prefix}:b:".encode())]
        return sum(len(part) // entry for fields in buckets for part in fields.values() if part != b"\0")

    return count
