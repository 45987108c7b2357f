"""The index contract, run against every backend: a SQLite file, a real Redis, a real Redis Cluster."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from samples import ODD_IDS, Clock, hashes, near, race, record, with_sketch

from scrapy_simhash.index import GroupGone, IndexNotFound
from scrapy_simhash.index.base import CANDIDATES_PER_GROUP, FIRST_READ, LISTED_PER_KEY, MAX_BANDED_MEMBERS
from scrapy_simhash.index.redis import BUCKET_SPLIT_AT
from scrapy_simhash.minhash import Layout
from scrapy_simhash.whole_text import WholeText


async def test_a_record_round_trips_with_odd_ids(make_index):
    index = await make_index()
    for i, record_id in enumerate(ODD_IDS):
        lookup = await index.check_and_add(record(record_id, hashes(i), host="example.com"))
        assert lookup.added and not lookup.candidates
        [stored] = await index.records(record_id)
        assert (stored.id, stored.canonical, stored.pending, stored.host) == (record_id, True, True, "example.com")
        assert np.array_equal(stored.hashes, hashes(i))
    assert await index.count() == len(ODD_IDS)


async def test_bands_key_the_first_bytes_of_a_longer_sketch(make_index):
    """A record sharing every byte past the bands but no band is no candidate; one sharing one band
    and enough bytes past the bands is."""
    layout = Layout(4, 6, 0.5, size=128)
    index = await make_index(layout=layout)
    stored = np.random.default_rng(3).integers(0, 256, layout.size, dtype=np.uint8)
    rid = (await index.check_and_add(with_sketch("stored", layout, stored.tobytes()))).added
    banded = layout.bands * layout.rows
    no_band = stored.copy()
    no_band[:banded] ^= 0xFF
    assert not (await index.check_and_add(with_sketch("no band", layout, no_band.tobytes()))).candidates
    one_band = stored.copy()
    one_band[: banded - layout.rows] ^= 0x0F  # its other bands are neither record's
    lookup = await index.check_and_add(with_sketch("one band", layout, one_band.tobytes()))
    assert [(c.rid, c.equal) for c in lookup.candidates] == [(rid, layout.size - banded + layout.rows)]


async def test_a_near_copy_finds_the_original_and_a_distinct_text_does_not(make_index):
    index = await make_index()
    original = hashes(1)
    first = await index.check_and_add(record("first", original))
    copy = await index.check_and_add(record("copy", near(original, 0.9, seed=2)))
    assert copy.added is None and [c.rid for c in copy.candidates] == [first.added]
    [details] = await index.details(copy.candidates)
    assert details.id == details.canonical_id == "first" and np.array_equal(details.hashes, original)
    distinct = await index.check_and_add(record("distinct", hashes(3)))
    assert distinct.added and not distinct.candidates


async def test_a_records_whole_text_difference_comes_back_with_its_data(make_index):
    """Read by this crawl (held) and by another (from the store), long and short texts alike."""
    index, other = await make_index(), await make_index()
    whole = WholeText(np.array([3, 70, 2**32 - 1], dtype=np.uint32), np.array([5], dtype=np.uint32))
    original, short = hashes(5), hashes(6, count=12)
    await index.check_and_add(record("first", original, host="a.example", whole=whole))
    await index.check_and_add_exact(record("short", short, host="a.example", whole=whole), b"\x07" * 16)
    for reader in (index, other):
        [details] = await reader.details((await reader.check_and_add(record("copy", original))).candidates)
        assert np.array_equal(details.whole.gained, whole.gained) and np.array_equal(details.whole.lost, whole.lost)
        holder = (await reader.check_and_add_exact(record("again", short), b"\x07" * 16)).holder
        [details] = await reader.details([holder])
        assert np.array_equal(details.hashes, short) and np.array_equal(details.whole.gained, whole.gained)


async def test_a_record_newer_than_since_is_the_only_candidate(make_index):
    """Exactly once: an insert after rejected candidates is conditional on nothing new having arrived."""
    index = await make_index()
    base = hashes(4)
    seq_before = (await index.check_and_add(record("old", near(base, 0.9, seed=5)))).seq
    first = await index.check_and_add(record("new", base))
    assert first.candidates  # the old record is a candidate of "new"...
    second = await index.check_and_add(record("new", base), since=first.seq)  # ...judged; nothing newer
    assert second.added
    late = await index.check_and_add(record("late", near(base, 0.95, seed=6)), since=first.seq)
    assert [c.rid for c in late.candidates] == [second.added]  # only what arrived after since
    assert seq_before <= first.seq


async def test_a_retried_call_finds_its_own_write(make_index):
    index = await make_index()
    mine = record("retried", hashes(7))
    first = await index.check_and_add(mine)
    assert (await index.check_and_add(mine)).added == first.added  # the same Record: an earlier attempt
    again = await index.check_and_add(record("retried", hashes(7)))  # a new Record of the page: a recrawl
    assert again.added is None and again.candidates[0].rid == first.added
    member = record("member", near(hashes(7), 0.9, seed=8))
    joined = await index.join(member, again.candidates[0], banded=True)
    assert await index.join(member, again.candidates[0], banded=True) == joined
    assert await index.count() == 2


async def test_records_sharing_an_id_are_all_kept_and_counted(make_index):
    """A listing page whose items all carry url = response.url: every item stays findable."""
    index = await make_index()
    lookups = [await index.check_and_add(record("listing", hashes(10 + i))) for i in range(4)]
    assert all(lookup.added for lookup in lookups)
    assert [lookup.same_id for lookup in lookups] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    for i in range(4):  # a later exact copy of each, under another id, finds its own record
        copy = await index.check_and_add(record(f"copy{i}", hashes(10 + i)))
        assert [c.rid for c in copy.candidates] == [lookups[i].added]
    assert len(await index.records("listing")) == 4


async def test_a_member_that_adds_reach_is_found_and_joins_the_group(make_index):
    """A page that drifts: C is near B (a member) but not near A (the canonical)."""
    index = await make_index()
    a = hashes(20)
    b = near(a, 0.85, seed=21)
    c = near(b, 0.85, seed=22)
    first = await index.check_and_add(record("a", a))
    found = await index.check_and_add(record("b", b))
    joined = await index.join(record("b", b), found.candidates[0], banded=True)
    assert (joined.group, joined.canonical, joined.size, joined.banded) == (first.added, first.added, 2, True)
    drift = await index.check_and_add(record("c", c))
    matched = next(x for x in drift.candidates if x.rid == joined.rid)
    assert matched.group == first.added and matched.canonical == first.added
    [details] = await index.details([matched])
    assert (details.id, details.canonical_id) == ("b", "a")


async def test_a_lookup_returns_a_groups_best_members_only_and_every_group(make_index):
    """A family of findable members is not returned whole: any member lets a page join its group.
    A lookup reaches the record each of its band keys lists for the group (the earliest member with
    that key) and returns the best of those."""
    index = await make_index()
    layout = index.layout
    base = hashes(40)
    family = [near(base, 0.86 + 0.02 * i, seed=41 + i) for i in range(6)]  # the last is closest to base
    first = await index.check_and_add(record("f0", family[0]))
    [f0] = (await index.check_and_add(record("probe", family[0]))).candidates
    for i, member in enumerate(family[1:], 1):
        await index.join(record(f"f{i}", member), f0, banded=True)  # as if each matched f0
    other = record("other", near(base, 0.9, seed=49))
    rejected = await index.check_and_add(other)  # the family's members, judged and rejected
    other = await index.check_and_add(other, since=rejected.seq)
    lookup = await index.check_and_add(record("copy", base))
    by_group = {}
    for candidate in lookup.candidates:
        by_group.setdefault(candidate.group, []).append(candidate)
    assert sorted(by_group) == [first.added, other.added]
    assert [c.equal for c in lookup.candidates] == sorted((c.equal for c in lookup.candidates), reverse=True)
    sketch = record("copy", base).sketch(layout)
    sketches = [record(f"f{i}", m).sketch(layout) for i, m in enumerate(family)]
    query_keys = layout.band_keys(sketch)
    reached = set()
    for band, key in enumerate(query_keys):
        holders = [i for i, s in enumerate(sketches) if layout.band_keys(s)[band] == key]
        reached.update(holders[:LISTED_PER_KEY])
    equals = sorted((layout.equal(sketches[i], sketch) for i in reached), reverse=True)
    assert len(equals) > CANDIDATES_PER_GROUP
    assert [c.equal for c in by_group[first.added]] == equals[:CANDIDATES_PER_GROUP]


async def test_data_read_with_a_lookup_is_what_details_reads(make_index):
    """A backend may bring the best candidates' data along with the lookup; it must be theirs."""
    index = await make_index()
    base = hashes(50)
    pages = [near(base, 0.84 + 0.02 * i, seed=51 + i) for i in range(FIRST_READ + 2)]
    for i, page in enumerate(pages):
        first = await index.check_and_add(record(f"p{i}", page, host=f"h{i}.example"))
        if first.added is None:
            await index.check_and_add(record(f"p{i}", page, host=f"h{i}.example"), since=first.seq)
    lookup = await index.check_and_add(record("copy", base))
    assert len(lookup.candidates) == len(pages)
    assert set(lookup.read) <= {c.key for c in lookup.candidates[:FIRST_READ]}
    for candidate in lookup.candidates:
        if candidate.key in lookup.read:
            [read] = await index.details([candidate])
            brought = lookup.read[candidate.key]
            assert (brought.id, brought.url, brought.host, brought.canonical_id, brought.canonical_url) == (
                read.id, read.url, read.host, read.canonical_id, read.canonical_url
            )
            assert np.array_equal(brought.hashes, read.hashes)


async def test_a_candidate_shares_a_whole_band_key_not_a_part_of_one(make_index):
    """Band keys that share their first bytes share a bucket list; only a whole key is a match."""
    layout = Layout(bands=4, rows=6, min_estimate=0.0)  # every record read would pass the estimate
    index = await make_index(layout=layout)

    def sketched(record_id: str, band0: bytes, fill: int):
        return with_sketch(record_id, layout, b"\xaa\xbb" + band0 + bytes([fill]) * 18)

    query_key = b"\x00\x00\x00\x01"
    others = [b"\x00\x00\x00\x00", b"\x00\x00\x01\x00", b"\x01\x00\x00\x00", b"\x00\x01\x00\x00"]
    stored = {}
    for i, band0 in enumerate([*others, query_key, *others, query_key]):
        r = sketched(f"r{i}", band0, fill=i + 1)
        lookup = await index.check_and_add(r)
        stored[r.id] = lookup.added or (await index.check_and_add(r, since=lookup.seq)).added
    lookup = await index.check_and_add(sketched("query", query_key, fill=0))
    assert sorted(c.rid for c in lookup.candidates) == [stored["r4"], stored["r9"]]


async def test_every_record_of_a_crowded_bucket_is_found_and_an_erased_one_is_not(make_index):
    """More band keys sharing their first bytes than a Redis bucket field holds, all of them the high
    four bits of their next byte and half of them the whole byte, so the field splits down to its last
    level: each whole key finds exactly its record, before and after half of the records sharing its
    bucket are erased."""
    layout = Layout(bands=4, rows=6, min_estimate=0.0)
    index = await make_index(layout=layout)
    rng = np.random.default_rng(11)
    count = BUCKET_SPLIT_AT + 150

    def sketched(record_id: str, band0: bytes):
        return with_sketch(record_id, layout, band0 + rng.integers(0, 256, 18, dtype=np.uint8).tobytes())

    keys: dict[bytes, None] = {}
    while len(keys) < count:
        rest = rng.integers(0, 256, 4, dtype=np.uint8)
        rest[0] = 0x05 if len(keys) < count // 2 else rest[0] & 0x0F
        keys[b"\x00\x00" + rest.tobytes()] = None
    rids = []
    for i, key in enumerate(keys):
        lookup = await index.check_and_add(sketched(f"r{i}", key))
        assert lookup.added, lookup.candidates
        rids.append(lookup.added)
    for i, key in enumerate(keys):
        assert [c.rid for c in (await index.check_and_add(sketched(f"q{i}", key))).candidates] == [rids[i]]
    for i in range(0, count, 2):
        assert len(await index.erase(f"r{i}")) == 1
    for i, key in enumerate(keys):
        found = [c.rid for c in (await index.check_and_add(sketched(f"again{i}", key))).candidates]
        assert found == ([] if i % 2 == 0 else [rids[i]])


@pytest.mark.parametrize("bands, rows", [(5, 7), (50, 6)])
async def test_a_candidates_shared_sketch_bytes_are_counted_whatever_the_sketch_size(make_index, bands, rows):
    """The count ranks a group's candidates and filters them by the estimate, for every layout."""
    layout = Layout(bands=bands, rows=rows, min_estimate=0.0)
    index = await make_index(layout=layout)
    rng = np.random.default_rng(bands)
    query = rng.integers(0, 256, layout.size, dtype=np.uint8)
    expected = {}
    for i in range(4):
        sketch = query.copy()
        changed = rng.choice(np.arange(rows, layout.size), size=7 * i + 3, replace=False)
        sketch[changed] ^= 1 + i
        r = with_sketch(f"r{i}", layout, sketch.tobytes())
        lookup = await index.check_and_add(r)
        rid = lookup.added or (await index.check_and_add(r, since=lookup.seq)).added
        expected[rid] = layout.size - len(changed)
    lookup = await index.check_and_add(with_sketch("query", layout, query.tobytes()))
    assert {c.rid: c.equal for c in lookup.candidates} == expected


@pytest.mark.parametrize(
    "layout", [Layout(22, 6, 0.74), Layout(14, 6, 0.73, size=176)], ids=["bands-only", "longer-sketch"]
)
@pytest.mark.parametrize("first", [True, False])
async def test_a_record_sharing_min_equal_sketch_bytes_is_a_candidate_and_one_fewer_is_not(make_index, first, layout):
    """The estimate's bound is exact, wherever in the sketch the differing bytes lie (past the bands
    too, in a sketch longer than they are)."""
    index = await make_index(layout=layout)
    stored = np.random.default_rng(9).integers(0, 256, layout.size, dtype=np.uint8)
    rid = (await index.check_and_add(with_sketch("stored", layout, stored.tobytes()))).added
    for differing, found in ((layout.size - layout.min_equal, True), (layout.size - layout.min_equal + 1, False)):
        query = stored.copy()
        start = layout.rows if first else layout.size - differing
        at = np.arange(start, start + differing)
        query[at] ^= 0xFF  # the first band stays whole: the lookup reads the stored record
        lookup = await index.check_and_add(with_sketch(f"query{differing}", layout, query.tobytes()))
        assert [(c.rid, c.equal) for c in lookup.candidates] == ([(rid, layout.min_equal)] if found else [])


def _listed(layout: Layout, *members: np.ndarray) -> list[int]:
    """Which of a group's ``members`` (in the order they joined) the band keys list: a member is under
    the keys fewer than LISTED_PER_KEY earlier members are under, or else under its last key. Their
    indexes, one per entry."""
    under: dict[tuple[int, bytes], int] = {}
    entries = []
    for i, values in enumerate(members):
        keys = list(enumerate(layout.band_keys(record("x", values).sketch(layout))))
        own = [band_key for band_key in keys if under.get(band_key, 0) < LISTED_PER_KEY] or keys[-1:]
        for band_key in own:
            under[band_key] = under.get(band_key, 0) + 1
        entries += [i] * len(own)
    return entries


async def _family(index, family: list[np.ndarray]):
    """``family[0]`` added as m0, each later text joined as m1, m2... through the candidate its lookup
    finds first, as a findable member; the first lookup."""
    first = await index.check_and_add(record("m0", family[0]))
    for i, values in enumerate(family[1:], 1):
        lookup = await index.check_and_add(record(f"m{i}", values))
        assert (await index.join(record(f"m{i}", values), lookup.candidates[0], banded=True)).banded
    return first


async def test_a_group_lists_a_band_key_under_few_of_its_records(make_index, band_entries):
    """A member is findable through the band keys fewer than LISTED_PER_KEY of its group's records
    are under: however many near copies a family has, a lookup reads few of them per band."""
    index = await make_index()
    a = hashes(80)
    family = [a, a.copy(), a.copy(), near(a, 0.85, seed=81)]
    first = await _family(index, family)
    listed = _listed(index.layout, *family)
    assert listed.count(2) == 1 and 3 in listed  # an identical copy adds one key, a near copy its own keys
    assert band_entries() == len(listed)
    drift = await index.check_and_add(record("d", near(family[3], 0.9, seed=82)))
    assert {x.group for x in drift.candidates} == {first.added}


async def test_a_member_whose_keys_its_group_all_lists_is_still_found_by_a_copy_of_its_text(make_index):
    """Identical texts are never kept twice: a member goes under one key of its own at least."""
    index = await make_index()
    layout = index.layout
    a, b = hashes(86), hashes(87)
    # A value's sketch bin is value * size >> 32; band i covers bins [i * rows, (i + 1) * rows).
    band_of = lambda values: (values.astype(np.uint64) * layout.size >> 32) // layout.rows  # noqa: E731
    mixed = np.sort(np.concatenate((a[band_of(a) % 2 == 0], b[band_of(b) % 2 == 1])))  # a's even bands, b's odd
    first = await index.check_and_add(record("a", a))
    [anchor] = (await index.check_and_add(record("probe", a))).candidates
    for name, values in (("b", b), ("mixed", mixed)):
        assert (await index.join(record(name, values), anchor, banded=True)).banded
    copy = await index.check_and_add(record("copy", mixed.copy()))
    assert [(c.group, c.equal) for c in copy.candidates][:1] == [(first.added, layout.size)]


async def test_erasing_a_record_hands_its_band_keys_to_members_with_those_keys(make_index, band_entries):
    index = await make_index()
    a = hashes(84)
    family = [a, a.copy(), a.copy(), near(a, 0.85, seed=85)]
    await _family(index, family)
    [erased] = await index.erase("m0")
    assert erased.promoted == "m1"
    assert band_entries() == len(_listed(index.layout, *family[1:]))
    for _ in range(2):  # m1 and m2, whichever a copy of their text finds first
        copy = await index.check_and_add(record("copy", a))
        [best, *_] = copy.candidates
        [details] = await index.details([best])
        assert best.equal == index.layout.size and details.id in ("m1", "m2")
        await index.erase(details.id)
    assert band_entries() == index.layout.bands
    assert [x.equal for x in (await index.check_and_add(record("again", family[3]))).candidates] == [
        index.layout.size
    ]


async def test_a_member_kept_without_reach_is_not_a_candidate(make_index):
    index = await make_index()
    a = hashes(30)
    first = await index.check_and_add(record("a", a))
    for i in range(3):
        copy = await index.check_and_add(record(f"copy{i}", a))
        assert [x.rid for x in copy.candidates] == [first.added]
        joined = await index.join(record(f"copy{i}", a), copy.candidates[0], banded=False)
        assert (joined.size, joined.banded) == (i + 2, False)
    assert len(await index.records("copy1")) == 1


async def test_a_member_kept_without_reach_keeps_no_verification_data(make_index):
    index = await make_index()
    a = hashes(31)
    await index.check_and_add(record("a", a))
    member = record("m", a)  # one Record for its lookup and its join, as the pipeline has
    lookup = await index.check_and_add(member)
    await index.join(member, lookup.candidates[0], banded=False)
    [stored] = await index.records("m")
    assert len(stored.hashes) == 0


async def test_a_new_page_after_many_copies_is_stored_with_its_data(make_index):
    index, other = await make_index(), await make_index()
    base = hashes(64)
    await index.check_and_add(record("base", base))
    for i in range(32):  # a crawl of copies comes to expect copies
        assert (await index.check_and_add(record(f"c{i}", base))).candidates
    new = hashes(65)
    assert (await index.check_and_add(record("new", new))).added
    [details] = await other.details((await other.check_and_add(record("copy", new))).candidates)
    assert details.id == "new" and np.array_equal(details.hashes, new)


async def test_joining_a_record_erased_meanwhile_says_so(make_index):
    index = await make_index()
    a = hashes(40)
    await index.check_and_add(record("a", a))
    lookup = await index.check_and_add(record("b", a))
    await index.erase("a")
    with pytest.raises(GroupGone):
        await index.join(record("b", a), lookup.candidates[0], banded=True)


async def test_erasing_a_canonical_promotes_its_earliest_findable_member(make_index):
    index = await make_index()
    a = hashes(50)
    await index.check_and_add(record("a", a))
    b, c = near(a, 0.85, seed=51), near(a, 0.86, seed=52)
    for name, values in (("dup", a), ("b", b), ("c", c)):
        lookup = await index.check_and_add(record(name, values))
        await index.join(record(name, values), lookup.candidates[0], banded=name != "dup")
    [erased] = await index.erase("a")
    assert (erased.id, erased.canonical, erased.promoted) == ("a", True, "b")
    later = await index.check_and_add(record("later", near(b, 0.95, seed=53)))
    [details] = await index.details(later.candidates[:1])
    assert details.canonical_id == "b"
    assert not await index.records("a")
    assert [r.canonical for r in await index.records("b")] == [True]


async def test_erasing_by_url_removes_every_record_of_that_page(make_index):
    index = await make_index()
    a = hashes(60)
    await index.check_and_add(record("a", a, url="https://site/a"))
    lookup = await index.check_and_add(record("m", a, url="https://site/m"))
    await index.join(record("m", a, url="https://site/m"), lookup.candidates[0], banded=False)
    erased = await index.erase("https://site/m")
    assert [(e.id, e.canonical) for e in erased] == [("m", False)]
    assert await index.count() == 1 and await index.erase("https://site/m") == []


async def test_a_key_finds_each_record_whose_id_or_url_it_is_once(make_index):
    """A page's URL is usually its id; a key that is one record's id and URL and another's URL
    finds both, once each."""
    index = await make_index()
    await index.check_and_add(record("https://site/p", hashes(61), url="https://site/p"))
    await index.check_and_add(record("p-by-another-id", hashes(62), url="https://site/p"))
    await index.check_and_add(record("https://site/q", hashes(63), url="https://site/q"))
    assert sorted(r.id for r in await index.records("https://site/p")) == ["https://site/p", "p-by-another-id"]
    assert sorted(e.id for e in await index.erase("https://site/p")) == ["https://site/p", "p-by-another-id"]
    assert [r.id for r in await index.records("https://site/q")] == ["https://site/q"]
    assert await index.count() == 1


async def test_erasing_everything_leaves_an_empty_index(make_index, dump):
    index = await make_index()
    empty = dump()
    a = hashes(70)
    await index.check_and_add(record("a", a))
    for name, values, banded in (("b", near(a, 0.85, seed=71), True), ("c", a, False)):
        member = record(name, values)  # one Record per item, as the pipeline has
        lookup = await index.check_and_add(member)
        await index.join(member, lookup.candidates[0], banded=banded)
    await index.check_and_add_exact(record("short", np.arange(3, dtype=np.uint32)), b"d" * 16)
    unjudged = record("unjudged", a)  # looked up, then never indexed (its item failed)
    await index.check_and_add(unjudged)
    await index.release(unjudged)
    for name in ("b", "a", "c", "short"):
        assert await index.erase(name)
    assert dump() == empty


async def test_groups_expire_after_their_last_write(make_index):
    clock = Clock()
    index = await make_index(retention={"default": None, "short": 100.0}, clock=clock)
    a = hashes(80)
    await index.check_and_add(record("a", a, retention="short"))
    await index.check_and_add(record("kept", hashes(81)))
    clock.now += 60
    lookup = await index.check_and_add(record("b", a))
    await index.join(record("b", a), lookup.candidates[0], banded=False)  # a join renews the group
    clock.now += 60
    assert await index.expire() == 0
    clock.now += 41
    assert await index.expire() == 2
    assert await index.count() == 1 and not await index.records("a")


async def test_a_rerun_page_kept_for_good_keeps_the_group_it_takes_over(make_index):
    """The crashed crawl's page was short-lived; the rerun's, kept for good, takes its group over:
    the group no longer expires (Redis kept the old expiry and erased the rerun's page with it)."""
    clock = Clock()
    retention = {"default": None, "short": 100.0}
    crashed = await make_index(session=b"crsh", retention=retention, clock=clock)
    a = hashes(82)
    await crashed.check_and_add(record("a", a, retention="short"))
    copy = record("copy", near(a, 0.9, seed=83))
    await crashed.join(copy, (await crashed.check_and_add(copy)).candidates[0], banded=True)
    await crashed.close()
    rerun = await make_index(session=b"rrun", retention=retention, clock=clock)
    assert (await rerun.check_and_add(record("a", a))).added
    clock.now += 101
    assert await rerun.expire() == 0
    assert await rerun.count() == 2


async def test_an_unknown_retention_class_is_refused(make_index):
    index = await make_index()
    with pytest.raises(ValueError, match="unknown retention class"):
        await index.check_and_add(record("a", hashes(90), retention="nosuch"))


async def test_a_crashed_crawls_pending_record_is_not_a_duplicate_of_its_own_page(make_index):
    """Indexed, never scraped (the crawl was killed): the rerun keeps the page, and a confirmed
    record stays a duplicate of its page (a recrawl)."""
    crashed = await make_index(session=b"crsh")
    a, b = hashes(100), hashes(101)
    pending = await crashed.check_and_add(record("a", a))
    confirmed = await crashed.check_and_add(record("b", b))
    await crashed.confirm([confirmed.added])
    await crashed.close()  # its lease is gone (a killed crawl's lapses)
    rerun = await make_index(session=b"rrun")
    again = await rerun.check_and_add(record("a", a))
    assert again.added and again.added != pending.added
    assert [r.rid for r in await rerun.records("a")] == [again.added]  # the stale record is replaced
    recrawl = await rerun.check_and_add(record("b", b))
    assert [c.rid for c in recrawl.candidates] == [confirmed.added]
    other = await rerun.check_and_add(record("a-copy", a))  # another page: the rerun's record counts
    assert [c.rid for c in other.candidates] == [again.added]


async def test_a_rerun_page_takes_its_crashed_records_place_in_the_group_it_started(make_index):
    """A copy joined the group of a page the killed crawl never exported: the rerun's page becomes
    that group's canonical, not a duplicate of the copy (which would lose both)."""
    crashed = await make_index(session=b"crsh")
    a = hashes(103)
    pending = await crashed.check_and_add(record("a", a))
    copy = record("copy", near(a, 0.85, seed=104))
    found = await crashed.check_and_add(copy)
    joined = await crashed.join(copy, found.candidates[0], banded=True)
    await crashed.close()
    rerun = await make_index(session=b"rrun")
    again = await rerun.check_and_add(record("a", a))
    assert again.added and not again.candidates
    [stored] = await rerun.records("a")
    assert stored.canonical and stored.pending
    [member] = await rerun.records("copy")
    assert member.rid == joined.rid and member.group == pending.added


async def test_a_rerun_page_takes_one_of_several_crashed_groups_it_started(make_index):
    """The killed crawl indexed one id twice (its page changed meanwhile), and a copy joined each:
    the rerun's page takes one group over; the other keeps a canonical of its own members (Redis
    named the rerun's page canonical of both, and it was a member of one)."""
    crashed = await make_index(session=b"crsh")
    texts = hashes(105), hashes(106)
    for n, text in enumerate(texts):
        await crashed.check_and_add(record("a", text))
        copy = record(f"copy{n}", near(text, 0.85, seed=107 + n))
        found = await crashed.check_and_add(copy)
        await crashed.join(copy, found.candidates[0], banded=True)
    await crashed.close()
    rerun = await make_index(session=b"rrun")
    assert (await rerun.check_and_add(record("a", texts[0]))).added
    [page] = await rerun.records("a")
    copies = [stored for n in range(2) for stored in await rerun.records(f"copy{n}")]
    assert page.canonical and sum(copy.group == page.group for copy in copies) == 1
    [other] = [copy for copy in copies if copy.group != page.group]
    assert other.canonical


async def test_a_group_taken_over_by_a_rerun_still_bounds_its_findable_members(make_index):
    """The crashed canonical's findable member stays a findable member when the rerun's page takes
    the group over: it counts towards MAX_BANDED_MEMBERS (SQLite counted it out, one too many)."""
    crashed = await make_index(session=b"crsh")
    a = hashes(108)
    await crashed.check_and_add(record("a", a))
    first = record("m0", near(a, 0.9, seed=109))
    await crashed.join(first, (await crashed.check_and_add(first)).candidates[0], banded=True)
    await crashed.close()
    rerun = await make_index(session=b"rrun")
    assert (await rerun.check_and_add(record("a", a))).added
    findable = []
    for n in range(1, MAX_BANDED_MEMBERS + 1):
        member = record(f"m{n}", near(a, 0.9, seed=110 + n))
        findable.append((await rerun.join(member, (await rerun.check_and_add(member)).candidates[0], True)).banded)
    assert sum(findable) == MAX_BANDED_MEMBERS - 1


async def test_an_erasure_names_the_promoted_member_even_when_it_goes_too(make_index):
    """Erasing a URL that canonical and member share: the first erasure promotes the member, the
    second erases it; the report still names it (Redis said '' once its page data was gone)."""
    index = await make_index()
    a = hashes(112)
    await index.check_and_add(record("a", a, url="https://site/shared"))
    member = record("b", near(a, 0.9, seed=113), url="https://site/shared")
    await index.join(member, (await index.check_and_add(member)).candidates[0], banded=True)
    erased = await index.erase("https://site/shared")
    assert [(e.id, e.canonical, e.promoted) for e in erased] == [("a", True, "b"), ("b", True, None)]


async def test_no_page_joins_a_group_whose_canonical_a_crashed_crawl_never_exported(make_index):
    """The group's copies were dropped for a page that never reached the feed: a later copy starts a
    group of its own and is kept, and the rerun's page then joins that copy."""
    crashed = await make_index(session=b"crsh")
    a = hashes(105)
    await crashed.check_and_add(record("a", a))
    member = record("member", near(a, 0.9, seed=106))
    found = await crashed.check_and_add(member)
    await crashed.join(member, found.candidates[0], banded=True)
    await crashed.close()
    later = await make_index(session=b"late")
    copy = await later.check_and_add(record("copy", near(a, 0.9, seed=107)))
    assert copy.added and not copy.candidates
    rerun = await later.check_and_add(record("a", a))
    assert [c.rid for c in rerun.candidates] == [copy.added]


async def test_a_crashed_crawls_record_replaced_by_the_rerun_leaves_no_trace(make_index, dump):
    """The rerun's insert erases the stale record in the very buckets it then writes."""
    rerun = await make_index(session=b"rrun")
    empty = dump()
    crashed = await make_index(session=b"crsh")
    await crashed.check_and_add(record("a", hashes(102)))
    await crashed.close()
    assert (await rerun.check_and_add(record("a", hashes(102)))).added
    assert await rerun.erase("a")
    assert dump() == empty


async def test_a_page_pending_in_another_live_crawl_makes_the_lookup_wait_until_confirmed(make_index):
    """Two crawls with one page in flight: the second neither takes the first's record for a crashed
    crawl's nor indexes the page again; once the first's item is scraped, it is the page's record."""
    first, second = await make_index(session=b"one1"), await make_index(session=b"two2")
    a = hashes(120)
    added = await first.check_and_add(record("page", a))
    assert (await second.check_and_add(record("page", a))).busy
    assert (await second.check_and_add_exact(record("page", a), b"d" * 16)).busy
    assert (await second.check_and_add(record("another-page", a))).candidates  # other ids: as always
    await first.confirm([added.added])
    again = await second.check_and_add(record("page", a))
    assert not again.busy and [c.rid for c in again.candidates] == [added.added]


async def test_a_page_scraped_in_another_live_crawl_is_matched_while_its_feed_waits(make_index):
    """The first crawl's item went through its pipelines and waits for its feed to be stored: the
    second crawl no longer waits for it, it matches it."""
    first, second = await make_index(session=b"one1"), await make_index(session=b"two2")
    a, short = hashes(122), np.arange(4, dtype=np.uint32)
    added = await first.check_and_add(record("page", a))
    exact = await first.check_and_add_exact(record("short", short), b"e" * 16)
    await first.scraped([added.added, exact.added])
    again = await second.check_and_add(record("page", a))
    assert not again.busy and [c.rid for c in again.candidates] == [added.added]
    assert (await second.check_and_add_exact(record("short", short), b"e" * 16)).holder.rid == exact.added
    assert all(r.pending for r in await second.records("page"))  # delivered only once confirmed


async def test_a_scraped_page_whose_crawl_ended_before_its_feed_was_stored_is_replaced(make_index):
    """Scraped, but the crawl was killed before its feed was stored: the rerun keeps the page."""
    crashed = await make_index(session=b"crsh")
    a = hashes(123)
    scraped = await crashed.check_and_add(record("a", a))
    await crashed.scraped([scraped.added])
    await crashed.close()  # its lease is gone (a killed crawl's lapses)
    rerun = await make_index(session=b"rrun")
    again = await rerun.check_and_add(record("a", a))
    assert again.added and [r.rid for r in await rerun.records("a")] == [again.added]


async def test_a_pending_record_of_this_session_is_a_candidate(make_index):
    index = await make_index()
    a = hashes(110)
    first = await index.check_and_add(record("same", a))
    second = await index.check_and_add(record("same", a))
    assert [c.rid for c in second.candidates] == [first.added]


async def test_short_texts_match_exactly(make_index):
    index = await make_index()
    short = np.arange(5, dtype=np.uint32)
    first = await index.check_and_add_exact(record("s1", short), b"\x01" * 16)
    again = await index.check_and_add_exact(record("s2", short), b"\x01" * 16)
    assert first.added and again.holder.rid == first.added
    joined = await index.join(record("s2", short), again.holder, banded=False)
    assert joined.group == first.added
    other = await index.check_and_add_exact(record("s3", short), b"\x02" * 16)
    assert other.added


async def test_boilerplate_sets_round_trip(make_index):
    index = await make_index()
    assert await index.load_boilerplate("example.com") is None
    assert await index.save_boilerplate("example.com", 7, b"\x00set") == b"\x00set"
    assert await index.load_boilerplate("example.com") == b"\x00set"
    assert await index.save_boilerplate("example.com", 8, b"another") == b"\x00set"  # the first one stays
    assert await index.load_boilerplate("example.com") == b"\x00set"


async def test_an_index_refuses_another_layout(make_index):
    await make_index()
    with pytest.raises(ValueError, match="layout"):
        await make_index(layout=Layout(bands=20, rows=6, min_estimate=0.72))


async def test_a_read_only_open_creates_nothing(make_index):
    with pytest.raises(IndexNotFound):
        await make_index(create=False, fresh=True)


async def test_a_crawl_verifies_its_own_records_with_the_hashes_it_computed(make_index):
    own, other = await make_index(), await make_index()
    page = record("page", hashes(130))
    await own.check_and_add(page)
    [seen_by_other] = await other.details((await other.check_and_add(record("o", hashes(130)))).candidates)
    [seen_by_own] = await own.details((await own.check_and_add(record("c", hashes(130)))).candidates)
    assert seen_by_own.hashes is page.hashes  # held, not decoded from the stored blob
    assert seen_by_other.hashes is not page.hashes and np.array_equal(seen_by_other.hashes, page.hashes)


async def test_planted_verification_data_beyond_the_bound_is_unreadable(make_index):
    index = await make_index(max_hashes=500)
    big = hashes(120, count=2000)
    await index.check_and_add(record("big", big))
    lookup = await index.check_and_add(record("copy", big))
    [details] = await index.details(lookup.candidates)
    assert details.id == "big" and details.hashes is None


@pytest.mark.slow
async def test_concurrent_processes_make_one_canonical_per_text(location, make_index):
    await make_index()  # created once, before the race
    url, prefix = location
    values = [hashes(200 + i) for i in range(40)]
    context = multiprocessing.get_context("spawn")
    start, finished, results = context.Event(), context.Barrier(3), context.Queue()
    workers = [context.Process(target=race, args=(url, prefix, values, start, finished, results)) for _ in range(3)]
    for worker in workers:
        worker.start()
    start.set()
    added = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join()
    assert sorted(i for one in added for i in one) == list(range(40))
