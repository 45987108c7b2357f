"""Judging a record: which candidates' data is read, and which match wins."""

from __future__ import annotations

from samples import LAYOUT, hashes, near, record

from scrapy_simhash.index import open_index
from scrapy_simhash.judge import FIRST_READ, place


class ReadCounting:
    """A real index that counts the candidates whose data was read."""

    def __init__(self, index) -> None:
        self.index, self.read, self.found = index, 0, 0

    def __getattr__(self, name):
        return getattr(self.index, name)

    async def check_and_add(self, record, since=0):
        lookup = await self.index.check_and_add(record, since)
        self.found += len(lookup.candidates)
        return lookup

    async def details(self, candidates):
        self.read += len(candidates)
        return await self.index.details(candidates)


async def test_a_close_copy_is_confirmed_without_reading_every_candidate(tmp_path):
    index = open_index(f"sqlite:///{tmp_path}/index.db", layout=LAYOUT)
    await index.open()
    try:
        base = hashes(1)
        await place(index, record("base", base), threshold=0.99)
        for n in range(2 * FIRST_READ):  # pages close to it, each a group of its own at this threshold
            await place(index, record(f"neighbour-{n}", near(base, 0.86, seed=n)), threshold=0.99)
        counting = ReadCounting(index)
        placement = await place(counting, record("copy", near(base, 0.98, seed=99)), threshold=0.82)
    finally:
        await index.close()
    assert placement.match.details.id == "base"
    assert counting.read <= FIRST_READ


async def test_the_best_match_wins_when_the_first_candidates_hold_no_close_copy(tmp_path):
    index = open_index(f"sqlite:///{tmp_path}/index.db", layout=LAYOUT)
    await index.open()
    try:
        base = hashes(2)
        await place(index, record("base", base), threshold=0.99)
        for n in range(2 * FIRST_READ):
            await place(index, record(f"neighbour-{n}", near(base, 0.88, seed=n)), threshold=0.99)
        placement = await place(index, record("copy", near(base, 0.9, seed=98)), threshold=0.82)
    finally:
        await index.close()
    assert placement.match.details.id == "base" and placement.match.jaccard < 0.95


async def test_candidates_that_cannot_beat_the_match_are_not_read(tmp_path):
    index = open_index(f"sqlite:///{tmp_path}/index.db", layout=LAYOUT)
    await index.open()
    try:
        base = hashes(3)
        await place(index, record("base", base), threshold=0.99)
        for n in range(3 * FIRST_READ):  # far enough below the copy's match to be left unread
            await place(index, record(f"distant-{n}", near(base, 0.79, seed=n)), threshold=0.99)
        counting = ReadCounting(index)
        placement = await place(counting, record("copy", near(base, 0.92, seed=97)), threshold=0.82)
    finally:
        await index.close()
    assert placement.match.details.id == "base" and placement.match.jaccard < 0.95
    assert counting.found > FIRST_READ and counting.read == FIRST_READ
