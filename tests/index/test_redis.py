"""Redis-only behaviour, on throwaway servers and a real Redis Cluster: schema, scripts, slots, failover."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pipeline_harness import feed, open_pipeline, simhash_stats
from redis.cluster import RedisCluster
from redis_servers import LocalCluster, TLSFiles
from samples import LAYOUT, hashes, near, record, with_sketch
from texts import article

from scrapy_simhash.index import IndexOpenError, open_index
from scrapy_simhash.index.base import KEPT_HASHES, _KeptHashes
import scrapy_simhash.index.redis
from scrapy_simhash.index.redis import BUCKET_SPLIT_AT, RedisIndex
from scrapy_simhash.judge import place
from scrapy_simhash.minhash import Layout

pytestmark = pytest.mark.redis


def cluster_url(cluster: LocalCluster) -> str:
    scheme, _, rest = cluster.url.partition("://")
    return f"{scheme}+cluster://{rest}"


async def opened(url: str, prefix: str = "simhash:{s}", **options):
    options.setdefault("layout", LAYOUT)
    index = open_index(url, key_prefix=prefix, **options)
    await index.open()
    return index


async def test_an_index_of_another_schema_is_refused(throwaway_redis):
    """Schema 6 kept a record's page data in a hash of six fields: read as one string, every
    candidate's read would fail on the key's type."""
    admin = throwaway_redis.client()
    admin.hset("simhash:{s}:meta", mapping={"schema": "6", "fingerprint": "2", "layout": LAYOUT.to_json()})
    with pytest.raises(ValueError, match="key schema 6 of scrapy-simhash; this version reads schema 7"):
        await opened(throwaway_redis.url)
    admin.close()


class CallLog:
    """A real index that logs which of its calls judging made."""

    def __init__(self, index) -> None:
        self.index, self.calls = index, []

    def __getattr__(self, name):
        attribute = getattr(self.index, name)
        if name not in ("check_and_add", "details", "join"):
            return attribute

        async def logged(*args, **kwargs):
            self.calls.append(name)
            return await attribute(*args, **kwargs)

        return logged


async def test_a_copy_is_judged_in_two_function_calls_on_one_server(redis_server_url, redis_prefix):
    """The lookup brings its best candidates' data along: no call of its own to read them."""
    index = await opened(redis_server_url, redis_prefix + ":{j}")
    try:
        base = hashes(60)
        await place(index, record("base", base), threshold=0.82)
        logged = CallLog(index)
        placement = await place(logged, record("copy", near(base, 0.9, seed=61)), threshold=0.82)
    finally:
        await index.close()
    assert placement.match.details.id == "base"
    assert logged.calls == ["check_and_add", "join"]


async def test_a_lookup_that_expects_a_copy_sends_no_verification_data(throwaway_redis):
    index = await opened(throwaway_redis.url)
    base = hashes(62, count=3000)
    await index.check_and_add(record("base", base))
    for i in range(32):  # a crawl of copies comes to expect copies
        await index.check_and_add(record(f"c{i}", base))
    admin = throwaway_redis.client()
    received = admin.info("stats")["total_net_input_bytes"]
    copy = record("copy", base)
    lookup = await index.check_and_add(copy)
    received = admin.info("stats")["total_net_input_bytes"] - received
    admin.close()
    await index.close()
    assert lookup.candidates and received < len(copy.blob()) / 4


def sent_bytes(servers) -> int:
    total = 0
    for server in servers:
        with server.client() as admin:
            total += admin.info("stats")["total_net_output_bytes"]
    return total


async def judged_bytes(index, servers, page) -> int:
    """Bytes the servers sent while ``index`` looked up ``page`` and read its candidates' data."""
    sent = sent_bytes(servers)
    lookup = await index.check_and_add(page)
    assert lookup.candidates
    await index.details(lookup.candidates)
    return sent_bytes(servers) - sent


async def test_a_crawl_is_not_sent_verification_data_it_holds(throwaway_redis):
    """The blobs of a crawl's own records stay on the server; another crawl is sent them."""
    own, other = await opened(throwaway_redis.url), await opened(throwaway_redis.url)
    base = hashes(67, count=30_000)  # a blob far larger than the replies around it
    await own.check_and_add(record("base", base))
    own_bytes = await judged_bytes(own, [throwaway_redis], record("copy", base))
    other_bytes = await judged_bytes(other, [throwaway_redis], record("copy", base))
    await own.close()
    await other.close()
    assert own_bytes + len(record("base", base).blob()) / 2 < other_bytes


async def own_and_other_details(url: str, admin) -> tuple[list, list]:
    """The candidates' data a crawl gets while it judges a copy of its own two records (a canonical
    and a findable member), their page data on the server made unreadable meanwhile, and the data
    another crawl gets from the server."""
    own, other = await opened(url, "simhash:{own}"), await opened(url, "simhash:{own}")
    base = hashes(70)
    canonical, member = record("base", base), record("member", base)
    await own.check_and_add(canonical)
    await own.join(member, (await own.check_and_add(member)).candidates[0], True)
    stored = {key: admin.get(key) for key in (own._data_key(r.write_id) for r in (canonical, member))}
    for key in stored:
        admin.set(key, b"unreadable")
    mine = await own.check_and_add(record("copy", base))
    seen_by_own = [mine.read.get(c.key) for c in mine.candidates] + await own.details(mine.candidates)
    for key, value in stored.items():
        admin.set(key, value)
    theirs = await other.check_and_add(record("copy", base))
    seen_by_other = [theirs.read.get(c.key) for c in theirs.candidates] + await other.details(theirs.candidates)
    await own.close()
    await other.close()
    admin.close()
    return seen_by_own, seen_by_other


def same_details(a, b) -> bool:
    return a._replace(hashes=None) == b._replace(hashes=None) and np.array_equal(a.hashes, b.hashes)


def command_calls(server, command: str) -> int:
    with server.client() as admin:
        return admin.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0)


async def test_a_member_reads_each_record_listed_under_its_keys_once(throwaway_redis):
    """A findable member goes under its band keys that list no record of its group yet: the records
    listed under its keys are its group's same few members, each read once, not once a key."""
    index = await opened(throwaway_redis.url)
    base = hashes(71)
    await index.check_and_add(record("base", base))
    lookup = await index.check_and_add(record("member", base))
    before = command_calls(throwaway_redis, "getrange")
    joined = await index.join(record("member", base), lookup.candidates[0], True)
    reads = command_calls(throwaway_redis, "getrange") - before
    await index.close()
    assert joined.banded
    assert reads == 3  # the matched record, its group, and the canonical listed under all the member's keys


async def test_a_crawl_reads_no_page_data_of_its_own_candidates(throwaway_redis):
    """Its own records' id, URL, host and hashes are the crawl's: neither the lookup nor a later read
    reads them on the server, and they are what another crawl reads there."""
    seen_by_own, seen_by_other = await own_and_other_details(throwaway_redis.url, throwaway_redis.client())
    assert len(seen_by_other) == 4 and all(seen_by_other)  # two candidates, with the lookup and read again
    assert all(same_details(a, b) for a, b in zip(seen_by_own, seen_by_other, strict=True))


async def test_a_candidate_whose_hashes_the_crawl_let_go_is_read_with_them(throwaway_redis):
    index = await opened(throwaway_redis.url)
    base = hashes(68)
    await index.check_and_add(record("base", base))
    index._kept = _KeptHashes(KEPT_HASHES)  # as when more were held since than the budget allows
    placement = await place(index, record("copy", base), threshold=0.82)
    await index.close()
    assert placement.match.details.id == "base" and np.array_equal(placement.match.details.hashes, base)


async def test_page_data_is_one_string_with_a_blob_only_where_kept(throwaway_redis):
    """A hash of six fields cost ~350 bytes a page more; a member that is not findable keeps no
    verification data."""
    index = await opened(throwaway_redis.url)
    canonical, member = record("base", hashes(72)), record("member", hashes(72))
    await index.check_and_add(canonical)
    await index.join(member, (await index.check_and_add(member)).candidates[0], banded=False)
    await index.close()
    with throwaway_redis.client() as admin:
        stored = {r.id: admin.get(index._data_key(r.write_id)) for r in (canonical, member)}
    assert stored == {"base": RedisIndex._page_fields(canonical) + canonical.blob(),
                      "member": RedisIndex._page_fields(member)}


async def test_a_canonical_whose_fields_pass_the_first_read_is_read_whole(throwaway_redis):
    """A canonical's page is read without its blob, a first PAGE_READ bytes, then the rest of its fields."""
    own, other = await opened(throwaway_redis.url), await opened(throwaway_redis.url)
    url = "https://a.example/" + "long/" * 200
    base = hashes(73)
    canonical, member = record("base", base, url=url), record("member", base)
    await own.check_and_add(canonical)
    await own.join(member, (await own.check_and_add(member)).candidates[0], True)
    lookup = await other.check_and_add(record("copy", base))
    details = [lookup.read.get(c.key) for c in lookup.candidates] + await other.details(lookup.candidates)
    await own.close()
    await other.close()
    assert len(lookup.candidates) == 2 and {d.canonical_url for d in details} == {url}


async def test_a_flushed_function_library_is_loaded_again(throwaway_redis):
    index = await opened(throwaway_redis.url)
    assert (await index.check_and_add(record("a", hashes(1)))).added
    admin = throwaway_redis.client()
    admin.function_flush()
    copy = await index.check_and_add(record("b", hashes(1)))
    assert copy.candidates and copy.candidates[0].equal == LAYOUT.size
    listed = [dict(zip(library[::2], library[1::2])) for library in admin.function_list()]
    assert [library[b"library_name"] for library in listed] == [index._function.encode()]
    admin.close()
    await index.close()


async def test_a_server_without_redis_functions_is_refused_with_what_it_needs(redis_factory):
    server = redis_factory.start("--rename-command", "FCALL", "fcall_elsewhere")  # as a Redis 6 answers
    index = open_index(server.url, key_prefix="simhash:{s}", layout=LAYOUT)
    with pytest.raises(IndexOpenError, match=r"needs Redis 7\.0 or later \(Redis Functions\)"):
        await index.open()
    await index.close()


@pytest.mark.parametrize("refusal", ["wrong password", "no such database", "no FUNCTION LOAD"])
async def test_a_server_that_refuses_the_crawl_is_refused_at_open(redis_factory, refusal):
    """Misconfiguration no retry cures: one clear error at open, not every item retried as an outage."""
    server = redis_factory.start(password="right-one")
    url = server.url
    if refusal == "wrong password":
        url = url.replace("right-one", "wrong-one")
    elif refusal == "no such database":
        url = url.rsplit("/", 1)[0] + "/99"
    else:
        with server.client() as admin:
            admin.execute_command("ACL", "SETUSER", "crawler", "on", ">pw", "~*", "+@all", "-function")
        url = url.replace(":right-one@", "crawler:pw@")
    index = open_index(url, key_prefix="simhash:{s}", layout=LAYOUT)
    with pytest.raises(IndexOpenError) as refused:
        await index.open()
    await index.close()
    assert "127.0.0.1" in str(refused.value) and "right-one" not in str(refused.value)


def function_calls(admin) -> int:
    return admin.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0)


async def test_lookups_made_in_one_turn_go_together_and_see_each_other(throwaway_redis):
    """Sixteen items in flight make their lookups in one turn of the loop: one function call carries
    them, where each pair's second page finds its first, added by the call just before it."""
    index = await opened(throwaway_redis.url)
    admin = throwaway_redis.client()
    before = function_calls(admin)
    bases = [hashes(100 + i) for i in range(8)]
    records = [record(f"{kind}{i}", values if kind == "a" else near(values, 0.9, seed=i))
               for i, values in enumerate(bases) for kind in ("a", "b")]
    lookups = await asyncio.gather(*(index.check_and_add(r) for r in records))
    assert function_calls(admin) - before == 1
    for first, second in zip(lookups[::2], lookups[1::2]):
        assert first.added and not first.candidates
        assert not second.added and [c.rid for c in second.candidates] == [first.added]
    admin.close()
    await index.close()


class Queue(list):
    """A call queue that says when ``calls`` calls have joined it."""

    def __init__(self, calls: int = 1) -> None:
        super().__init__()
        self.calls = calls
        self.joined = asyncio.Event()

    def append(self, call) -> None:
        super().append(call)
        if len(self) >= self.calls:
            self.joined.set()


async def test_reads_of_candidates_made_while_a_call_is_out_go_with_the_lookups(throwaway_redis, monkeypatch):
    monkeypatch.setattr(scrapy_simhash.index.redis, "BATCHES_IN_FLIGHT", 1)
    index, writer = await opened(throwaway_redis.url), await opened(throwaway_redis.url)
    bases = [hashes(120 + i) for i in range(4)]
    for i, values in enumerate(bases):
        await writer.check_and_add(record(f"a{i}", values))  # another live crawl's: read from the server
    found = [(await index.check_and_add(record(f"b{i}", values))).candidates for i, values in enumerate(bases)]
    out, release = asyncio.Event(), asyncio.Event()
    send = index._call

    async def held(*args):  # the first call stays out until the reads have joined the queue
        if not out.is_set():
            out.set()
            await release.wait()
        return await send(*args)

    monkeypatch.setattr(index, "_call", held)
    admin = throwaway_redis.client()
    before = function_calls(admin)
    first = asyncio.ensure_future(index.check_and_add(record("new", hashes(130))))
    await out.wait()
    index._waiting = queue = Queue(calls=len(found))
    reads = asyncio.gather(*(index.details(candidates) for candidates in found))
    queued = asyncio.ensure_future(queue.joined.wait())
    await asyncio.wait([queued, reads], return_when=asyncio.FIRST_COMPLETED)  # reads sent apart finish first
    queued.cancel()
    release.set()
    await first
    read = await reads
    calls = function_calls(admin) - before
    admin.close()
    await index.close()
    await writer.close()
    assert calls == 2 and [details.id for [details] in read] == ["a0", "a1", "a2", "a3"]


async def test_a_lookup_cancelled_before_its_call_went_writes_nothing(throwaway_redis, monkeypatch):
    monkeypatch.setattr(scrapy_simhash.index.redis, "BATCHES_IN_FLIGHT", 1)
    index = await opened(throwaway_redis.url)
    out, release = asyncio.Event(), asyncio.Event()
    send = index._call

    async def held(*args):  # the first call stays out until the other has joined the queue
        out.set()
        await release.wait()
        return await send(*args)

    monkeypatch.setattr(index, "_call", held)
    first = asyncio.ensure_future(index.check_and_add(record("first", hashes(1))))
    await out.wait()
    index._waiting = queue = Queue()
    cancelled = asyncio.ensure_future(index.check_and_add(record("cancelled", hashes(2))))
    await queue.joined.wait()
    cancelled.cancel()
    release.set()
    assert (await first).added
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await index.records("cancelled") == []
    assert (await index.check_and_add(record("again", hashes(2)))).added
    await index.close()


async def test_a_call_that_fails_in_a_batch_leaves_the_others_their_replies(throwaway_redis):
    index = await opened(throwaway_redis.url)
    ok = record("ok", hashes(3))
    args = [0, ok.sketch(LAYOUT), 1, *index._record_args(ok), *await index._write_data(ok)]
    replies = await index._call("batch", "join", 1, "not a rid", "check_add", len(args), *args)
    assert isinstance(replies[0], Exception)
    assert index._lookup_reply(replies[1][0])[1] > 0  # added
    assert [stored.id for stored in await index.records("ok")] == ["ok"]
    await index.close()


async def test_every_key_is_under_the_prefix_or_its_page_data(throwaway_redis):
    index = await opened(throwaway_redis.url, "simhash:{news}", retention={"default": None, "short": 60})
    for i in range(5):
        await index.check_and_add(record(f"r{i}", hashes(i), retention="short"))
    await index.save_boilerplate("example.com", 1, b"set")
    admin = throwaway_redis.client()
    keys = [key for key in admin.scan_iter(count=1000)]
    assert keys and all(k.startswith(b"simhash:{news}:") or k.startswith(b"simhash:news:d:") for k in keys)
    admin.close()
    await index.close()


async def test_a_block_of_record_slots_takes_the_memory_of_its_bytes(throwaway_redis):
    """Slots written one after another would grow a block string step by step, and Redis keeps up to
    as much again as room to grow: a block of records is written whole when its first record is."""
    layout = Layout(bands=4, rows=6, min_estimate=0.0, size=176)
    index = await opened(throwaway_redis.url, layout=layout)
    rng = np.random.default_rng(8)
    for i in range(2 * 256):
        assert (await index.check_and_add(with_sketch(f"r{i}", layout, rng.bytes(layout.size)))).added
    admin = throwaway_redis.client()
    block = b"simhash:{s}:m:1"  # rids 256-511: every slot written, in order
    assert admin.strlen(block) == 256 * (42 + layout.size)
    copy = b"simhash:{s}:m:9"  # the same bytes under a name as long, written at once
    admin.set(copy, admin.get(block))
    assert admin.memory_usage(block, samples=0) == admin.memory_usage(copy, samples=0)
    admin.close()
    await index.close()


async def test_a_lookup_reads_short_bucket_lists_however_many_keys_share_a_field(throwaway_redis):
    """A band's hash field gathers every key with the same two first bytes, so in a large index it
    would hold ever more entries for each lookup to copy and search: past the bound it is split."""
    layout = Layout(bands=4, rows=6, min_estimate=0.0)
    index = await opened(throwaway_redis.url, layout=layout)
    rng = np.random.default_rng(5)
    for i in range(BUCKET_SPLIT_AT + 150):
        r = with_sketch(f"r{i}", layout, b"\x00\x00" + rng.integers(0, 256, 22, dtype=np.uint8).tobytes())
        assert (await index.check_and_add(r)).added
    admin = throwaway_redis.client()
    fields = admin.hgetall(b"simhash:{s}:b:\x00\x00")
    entry = layout.rows - 2 + 5
    assert sum(len(v) // entry for v in fields.values()) == BUCKET_SPLIT_AT + 150
    assert max(len(v) for v in fields.values()) <= BUCKET_SPLIT_AT * entry
    admin.close()
    await index.close()


async def test_a_lookup_finds_a_list_in_a_field_not_split_after_one_that_is(throwaway_redis):
    """Once a lookup has met a split field, its next band's read starts a level down (a hint the
    library keeps); a field that has not split must still be found, by reading up from there."""
    layout = Layout(bands=4, rows=6, min_estimate=0.0)
    index = await opened(throwaway_redis.url, layout=layout)
    rng = np.random.default_rng(7)

    def sketched(record_id: str, band0: bytes, band1: bytes):
        return with_sketch(record_id, layout, band0 + band1 + rng.integers(0, 256, 12, dtype=np.uint8).tobytes())

    def random_band(first: bytes = b"") -> bytes:
        return first + rng.integers(0, 256, layout.rows - len(first), dtype=np.uint8).tobytes()

    for i in range(BUCKET_SPLIT_AT + 20):  # band 0's field \x00\x00 splits
        assert (await index.check_and_add(sketched(f"r{i}", random_band(b"\x00\x00"), random_band()))).added
    target_band1 = random_band(b"\x01\x01")
    target = (await index.check_and_add(sketched("target", random_band(b"\x02\x02"), target_band1))).added
    assert target
    # Band 0 of the query reads the split field, band 1 the target's field, which has not split.
    found = await index.check_and_add(sketched("query", random_band(b"\x00\x00"), target_band1))
    assert target in [c.rid for c in found.candidates]
    await index.close()


async def test_a_field_split_deeper_than_the_rest_is_read_at_its_level(throwaway_redis):
    """A short text's family fills a few fields past the bound while the index's others stay short: a
    lookup reads each of its bands' fields once, the split one where its list is, the others at the
    level most fields are read at."""
    layout = Layout(bands=4, rows=6, min_estimate=0.0)
    index = await opened(throwaway_redis.url, layout=layout)
    rng = np.random.default_rng(8)

    def sketched(record_id: str, band0: bytes):
        return with_sketch(record_id, layout, band0 + rng.integers(0, 256, 18, dtype=np.uint8).tobytes())

    for i in range(BUCKET_SPLIT_AT + 20):  # band 0's field \x00\x00 splits
        band0 = b"\x00\x00" + rng.integers(0, 256, layout.rows - 2, dtype=np.uint8).tobytes()
        assert (await index.check_and_add(sketched(f"r{i}", band0))).added
    reads = []
    for i in range(2):
        before = command_calls(throwaway_redis, "hget")
        band0 = b"\x00\x00" + rng.integers(0, 256, layout.rows - 2, dtype=np.uint8).tobytes()
        assert (await index.check_and_add(sketched(f"query{i}", band0))).added
        reads.append(command_calls(throwaway_redis, "hget") - before)
    await index.close()
    assert reads[1] == layout.bands + 2  # a field a band, and the handles of its id and URL


def test_a_cluster_index_needs_a_hash_tag(cluster):
    with pytest.raises(ValueError, match="hash tag"):
        open_index(cluster_url(cluster), layout=LAYOUT, key_prefix="simhash:no-tag")


@pytest.mark.slow
async def test_the_atomic_part_lives_in_one_slot_and_page_data_spreads(cluster):
    """Buckets, slots and handles share the prefix's slot; page data, written once per record,
    spreads over the primaries."""
    index = await opened(cluster_url(cluster), "simhash:{spread}")
    for i in range(60):
        await index.check_and_add(record(f"p{i}", hashes(i)))
    await index.close()
    client = RedisCluster.from_url(cluster.url)
    atomic = {client.keyslot(k) for k in client.scan_iter(match="simhash:[{]spread[}]*", target_nodes="primaries")}
    data = [client.keyslot(k) for k in client.scan_iter(match="simhash:spread:d:*", target_nodes="primaries")]
    owners = {client.nodes_manager.get_node_from_slot(slot).name for slot in data}
    client.close()
    assert len(atomic) == 1 and len(data) == 60 and len(owners) == 3


async def test_a_lookup_that_expects_a_copy_writes_no_page_data_on_a_cluster(cluster):
    index = await opened(cluster_url(cluster), "simhash:{copies}")
    base = hashes(66)
    await index.check_and_add(record("base", base))
    copies = [record(f"c{i}", base) for i in range(32)]  # a crawl of copies comes to expect copies
    for copy in copies:
        assert (await index.check_and_add(copy)).candidates
    await index.close()
    client = RedisCluster.from_url(cluster.url)
    written = client.exists(b"simhash:copies:d:" + copies[-1].write_id)
    client.close()
    assert not written


async def test_a_member_whose_lookup_sent_no_data_is_joined_in_one_round_trip_on_a_cluster(cluster):
    """Nothing to take back: its lookup wrote no verification data (a crawl of copies expects a copy)."""
    index = await opened(cluster_url(cluster), "simhash:{members}")
    base = hashes(71)
    await index.check_and_add(record("base", base))
    for i in range(32):
        await index.check_and_add(record(f"c{i}", base))
    member = record("member", base)
    matched = (await index.check_and_add(member)).candidates[0]
    joined = await index.join(member, matched, banded=False)
    await index.close()
    client = RedisCluster.from_url(cluster.url)
    stored = client.get(b"simhash:members:d:" + member.write_id)
    client.close()
    assert joined.group == matched.group and not joined.banded
    assert not member.blob_encoded and stored == RedisIndex._page_fields(member)  # written once, without a blob


async def test_a_crawl_is_not_sent_verification_data_it_holds_on_a_cluster(cluster):
    url = cluster_url(cluster)
    own, other = await opened(url, "simhash:{held}"), await opened(url, "simhash:{held}")
    base = hashes(69, count=30_000)  # a blob far larger than the replies around it
    await own.check_and_add(record("base", base))
    own_bytes = await judged_bytes(own, cluster.primaries(), record("copy", base))
    other_bytes = await judged_bytes(other, cluster.primaries(), record("copy", base))
    await own.close()
    await other.close()
    assert own_bytes + len(record("base", base).blob()) / 2 < other_bytes


async def test_a_crawl_reads_no_page_data_of_its_own_candidates_on_a_cluster(cluster):
    seen_by_own, seen_by_other = await own_and_other_details(cluster_url(cluster), RedisCluster.from_url(cluster.url))
    assert len(seen_by_other) == 4 and all(seen_by_other[2:])  # a cluster's lookup brings no data along
    assert all(same_details(a, b) for a, b in zip(seen_by_own[2:], seen_by_other[2:], strict=True))


@pytest.mark.slow
async def test_a_primary_failover_during_ingestion_loses_nothing(cluster, tmp_path):
    """Stop the primary that holds the spider's slot mid-stream; its replica takes over; every item
    comes out, none unchecked, and every record indexed before the failover is still found after it."""
    items = [{"url": f"https://site.example/{i}", "body_text": article(500 + i)} for i in range(40)]
    copies = [{"url": item["url"] + "/copy", "body_text": item["body_text"]} for item in items]
    pipeline = await open_pipeline(
        {
            "SIMHASH_INDEX_URL": cluster_url(cluster),
            "SIMHASH_KEY_PREFIX": "simhash:{spider}",
            "SIMHASH_INDEX_RETRIES": 10,
            "SIMHASH_INDEX_RETRY_DELAY": 0.1,
            "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        }
    )
    primary = cluster.primary_of("simhash:{harness}")
    (replica,) = cluster.replicas_of(primary)
    try:
        assert [await feed(pipeline, item) for item in items[:20]] == [True] * 20
        await asyncio.to_thread(primary.stop)  # graceful: the replica has every acknowledged write
        assert [await feed(pipeline, item) for item in items[20:]] == [True] * 20
        await asyncio.to_thread(cluster.wait_primary, replica)
        assert [await feed(pipeline, copy) for copy in copies] == [False] * 40
        stats = simhash_stats(pipeline)
        assert stats["simhash/unchecked"] == 0 and stats["simhash/unique"] == stats["simhash/duplicates"] == 40
    finally:
        await pipeline.close_spider()


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A cluster whose every connection is TLS, clients and replicas authenticated by a password."""
    directory = tmp_path_factory.mktemp("tls-cluster")
    cluster = LocalCluster(directory, tls=TLSFiles.create(directory), password="s3cret/:@")
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.mark.slow
async def test_an_index_on_a_tls_cluster_with_a_password(tls_cluster):
    cert = tls_cluster.nodes[0].tls.cert
    url = f"{cluster_url(tls_cluster)}?ssl_ca_certs={cert}"
    assert url.startswith("rediss+cluster://:s3cret%2F%3A%40@127.0.0.1:")
    index = await opened(url)
    assert "s3cret" not in index.location
    first = await index.check_and_add(record("tls", hashes(9)))
    found = await index.check_and_add(record("near", near(hashes(9), 0.95, seed=1)))
    assert first.added and [c.rid for c in found.candidates] == [first.added]
    assert [e.id for e in await index.erase("tls")] == ["tls"] and await index.count() == 0
    await index.close()
    plain = open_index(cluster_url(tls_cluster).replace("rediss+", "redis+"), layout=LAYOUT, key_prefix="simhash:{s}")
    with pytest.raises(Exception):  # plain TCP to a TLS-only port: no data is exchanged
        await asyncio.wait_for(plain.open(), 10)
    await plain.close()


def slot_keys(node, slot: int) -> dict[bytes, bytes]:
    """Every key of ``slot`` on ``node``, with its DUMP (raw bytes: redis-py's GETKEYSINSLOT reply
    parser decodes binary key names; ASKING: an importing node serves the slot to no one else)."""
    with node.client() as client:
        dumps = {}
        for key in client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100_000):
            client.execute_command("ASKING")
            dumps[key] = client.dump(key)
        return dumps


@pytest.mark.slow
@pytest.mark.parametrize("meta_moved", [False, True], ids=["call-on-source", "call-asked-to-target"])
async def test_a_call_while_the_slot_moves_writes_nothing_and_is_retried_after(cluster, meta_moved):
    """A reshard moves the index's slot one MIGRATE at a time. A function call in between would find
    some of its keys gone (on the source) or not yet there (on the target, after an ASK): it is refused
    whole, as a transient error, and works once the slot has moved."""
    prefix = "simhash:{moving}"
    index = await opened(cluster_url(cluster), prefix)
    try:
        for i in range(30):
            await index.check_and_add(record(f"p{i}", hashes(i)))
        source = cluster.primary_of(f"{prefix}:meta")
        target = next(node for node in cluster.primaries() if node is not source)
        with source.client() as s, target.client() as t:
            slot = s.execute_command("CLUSTER", "KEYSLOT", f"{prefix}:meta")
            source_id, target_id = s.execute_command("CLUSTER", "MYID"), t.execute_command("CLUSTER", "MYID")
            t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            keys = sorted(slot_keys(source, slot))
            meta = f"{prefix}:meta".encode()
            first = [key for key in keys[::2] if key != meta] + ([meta] if meta_moved else [])
            s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *first)
            before = slot_keys(source, slot), slot_keys(target, slot)
            for attempt in (record("new", hashes(99)), record("p0-copy", near(hashes(0), 0.9, seed=1))):
                with pytest.raises(index.transient_errors):
                    await index.check_and_add(attempt)
            assert (slot_keys(source, slot), slot_keys(target, slot)) == before
            rest = [key for key in keys if key not in first]
            s.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *rest)
            for node in cluster.primaries():
                with node.client() as client:
                    client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        cluster.wait_healthy()
        assert (await index.check_and_add(record("new", hashes(99)))).added
        assert all([await index.records(f"p{i}") for i in range(30)])
    finally:
        await index.close()


@pytest.mark.parametrize("persistence", [(), ("--appendonly", "yes"), ("--save", "900 1")], ids=["none", "aof", "rdb"])
async def test_a_server_that_keeps_nothing_on_disk_is_said_at_open(redis_factory, caplog, persistence):
    """A restart of such a server empties the index, and the next crawl keeps every page again."""
    server = redis_factory.start(*persistence)
    index = await opened(server.url, "simhash:{p}")
    await index.close()
    said = [r for r in caplog.records if "keeps nothing on disk" in r.getMessage()]
    assert len(said) == (0 if persistence else 1)
    assert not said or said[0].levelname == "WARNING" and "a restart empties the index" in said[0].getMessage()
