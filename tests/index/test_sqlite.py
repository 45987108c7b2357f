"""SQLite-only behaviour: a file an earlier version built."""

from __future__ import annotations

import sqlite3

import pytest
from samples import LAYOUT

from scrapy_simhash.index import open_index

# The tables of the schema before groups: one row per record, bands cut from the 64-bit fingerprint.
EARLIER = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE records (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, fingerprint INTEGER NOT NULL,
    first_seen REAL NOT NULL, retention TEXT NOT NULL, expires REAL, digest TEXT UNIQUE,
    shingles BLOB NOT NULL, write_id BLOB);
CREATE TABLE bands (tbl INTEGER NOT NULL, key INTEGER NOT NULL, rid INTEGER NOT NULL,
    fingerprint INTEGER NOT NULL, PRIMARY KEY (tbl, key, rid)) WITHOUT ROWID;
INSERT INTO records VALUES (1, 'a', 12345, 0, 'default', NULL, NULL, x'00', NULL);
"""


async def test_a_file_of_an_earlier_version_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "index.db"
    db = sqlite3.connect(path)
    db.executescript(EARLIER)
    db.close()
    before = path.read_bytes()
    index = open_index(f"sqlite:///{path}", layout=LAYOUT)
    with pytest.raises(ValueError, match="built by an earlier version of scrapy-simhash; this version reads schema 6"):
        await index.open()
    await index.close()
    assert path.read_bytes() == before
