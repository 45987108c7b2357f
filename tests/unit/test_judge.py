"""Judging a record: which candidates' data is read, and which match wins."""

from __future__ import annotations

from samples import LAYOUT, hashes, near, record

from scrapy_simhash.index import open_index
from scrapy_simhash.judge import FIRST_READ, place


class ReadCounting:
    """A real index that counts the candidates it found and those whose data was read."""

    def __init__(self, index) -> None:
        self.index, self.found, self.read = index, 0, 0

    def __getattr__(self, name):
        return getattr(self.index, name)

    async def check_and_add(self, record, since=0):
        lookup = await self.index.check_and_add(record, since)
        self.found += len(lookup.candidates)
        self.read += len(lookup.read)
        return lookup

    async def details(self, candidates):
        self.read += len(candidates)
        return await self.index.details(candidates)


async def judge_copy(tmp_path, seed: int, neighbours: int, neighbour_jaccard: float, copy_jaccard: float):
    """A page, ``neighbours`` pages near it (each a group of its own), then a copy of the page judged
    at 0.82: (its placement, the counting index it was judged with)."""
    index = open_index(f"sqlite:///{tmp_path}/index.db", layout=LAYOUT)
    await index.open()
    try:
        base = hashes(seed)
        await place(index, record("base", base), threshold=0.99)
        for n in range(neighbours):
            await place(index, record(f"neighbour-{n}", near(base, neighbour_jaccard, seed=n)), threshold=0.99)
        counting = ReadCounting(index)
        placement = await place(counting, record("copy", near(base, copy_jaccard, seed=99)), threshold=0.82)
    finally:
        await index.close()
    return placement, counting


async def test_a_close_copy_is_confirmed_without_reading_every_candidate(tmp_path):
    placement, counting = await judge_copy(tmp_path, 1, 2 * FIRST_READ, 0.86, 0.98)
    assert placement.match.details.id == "base"
    assert counting.found > FIRST_READ and counting.read <= FIRST_READ


async def test_the_best_match_wins_when_the_first_candidates_hold_no_close_copy(tmp_path):
    placement, _ = await judge_copy(tmp_path, 2, 2 * FIRST_READ, 0.88, 0.9)
    assert placement.match.details.id == "base" and placement.match.jaccard < 0.95


async def test_candidates_that_cannot_beat_the_match_are_not_read(tmp_path):
    placement, counting = await judge_copy(tmp_path, 3, 3 * FIRST_READ, 0.79, 0.92)
    assert placement.match.details.id == "base" and placement.match.jaccard < 0.95
    assert counting.found > FIRST_READ and counting.read == FIRST_READ
