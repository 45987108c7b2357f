"""Erasing a page from a merge log (issue 15.5): every byte naming it goes, the other pages' audit stays.

Files are rewritten under the writers' lock and renamed over the log; streams are copied (ids kept)
to a key in the same slot and renamed over, so a deleted entry leaves no bytes in a listpack, a
DUMP or an AOF rewrite. A record naming the page on one side has that side redacted, not dropped.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from scrapy_simhash.mergelog import erase_pages, open_merge_log, read_merge_log, review_record
from scrapy_simhash.mergelog.stream import same_slot_key
from merge_records import RULE, WHEN

from scrapy_simhash.mergelog import merge_record

ERASED_URL = "https://people.example/jane-doe?ref=x"
ERASED_ID = "page-jane-doe"


def decision(canonical: str, matched: str, duplicate: str, decision: str = "merged", n: int = 0) -> dict:
    def url(page: str) -> str:
        return ERASED_URL if page == ERASED_ID else f"https://site.example/{page}"

    return merge_record(
        decision=decision, canonical_id=canonical, canonical_url=url(canonical), matched_id=matched,
        matched_url=url(matched), matched_fingerprint=0xABCDEF0123456789, duplicate_id=duplicate,
        duplicate_url=url(duplicate), duplicate_fingerprint=0x0123456789ABCDEF, distance=2, jaccard=0.91,
        retention="default", rule=RULE, at=WHEN + n,
    )


# The canonical "c", whose group the erased page joined; "e" matched the erased page; "x" is elsewhere.
RECORDS = [
    decision("c", "c", ERASED_ID),
    decision("c", ERASED_ID, "e"),
    decision("c", "c", "d", "rejected"),
    decision("x", "x", "y"),
    decision(ERASED_ID, ERASED_ID, "f"),
]


def expected_after_erasure() -> list[dict]:
    nulls = {"duplicate": {"duplicate_id": None, "duplicate_url": None, "duplicate_fingerprint": None},
             "matched": {"matched_id": None, "matched_url": None, "matched_fingerprint": None},
             "canonical": {"canonical_id": None, "canonical_url": None}}
    return [
        {**RECORDS[0], **nulls["duplicate"], "erased": ["duplicate"]},
        {**RECORDS[1], **nulls["matched"], "erased": ["matched"]},
        RECORDS[2],
        RECORDS[3],
        {**RECORDS[4], **nulls["canonical"], **nulls["matched"], "erased": ["canonical", "matched"]},
    ]


def named_in(data: bytes) -> list[bytes]:
    return [needle for needle in (ERASED_URL.encode(), ERASED_ID.encode()) if needle in data]


async def write_log(uri: str, records: list[dict], stream: str = "unused") -> None:
    log = open_merge_log(uri, stream)
    try:
        for one in records:
            await log.write([one])
    finally:
        await log.close()


# ---- JSON-lines files ---------------------------------------------------------------------------


@pytest.mark.parametrize("page", [ERASED_URL, ERASED_ID], ids=["by-url", "by-id"])
async def test_erasing_a_page_from_a_file_redacts_the_sides_naming_it(tmp_path, page) -> None:
    path = tmp_path / "merges.jsonl"
    await write_log(str(path), RECORDS)
    assert named_in(path.read_bytes())  # the check below can see them
    done = await erase_pages(str(path), [page])
    assert (done.redacted, done.rewritten) == (3, True)
    assert list(read_merge_log(str(path))) == expected_after_erasure()
    assert not named_in(b"".join(p.read_bytes() for p in tmp_path.iterdir()))  # no temporary file left either
    untouched = [line for line in path.read_bytes().splitlines() if b'"erased"' not in line]
    assert untouched == [json.dumps(r, separators=(",", ":")).encode() for r in RECORDS[2:4]]


async def test_an_erased_duplicate_takes_its_text_out_of_the_review_log(tmp_path) -> None:
    path = tmp_path / "review.jsonl"
    text = "Jane Doe's page, as compared"
    await write_log(str(path), [review_record(RECORDS[0], text), review_record(RECORDS[3], "kept text")])
    await erase_pages(str(path), [ERASED_URL])
    first, second = read_merge_log(str(path))
    assert "duplicate_text" not in first and first["erased"] == ["duplicate"]
    assert second["duplicate_text"] == "kept text"
    assert text.encode() not in path.read_bytes()


async def test_erasing_twice_or_a_page_named_nowhere_leaves_the_file_alone(tmp_path) -> None:
    path = tmp_path / "merges.jsonl"
    await write_log(str(path), RECORDS)
    await erase_pages(str(path), [ERASED_URL])
    inode, content = path.stat().st_ino, path.read_bytes()
    for pages in ([ERASED_URL], [ERASED_ID], ["https://nowhere.example/"]):
        done = await erase_pages(str(path), pages)
        assert (done.redacted, done.rewritten) == (0, False)
    assert (path.stat().st_ino, path.read_bytes()) == (inode, content)


async def test_an_unreadable_line_naming_the_page_goes_and_others_stay(tmp_path) -> None:
    path = tmp_path / "merges.jsonl"
    naming = json.dumps(RECORDS[0]).encode()[:-5] + b"\n"  # half a record glued by an old crash
    other = b"{not json, no page named}\n"
    path.write_bytes(json.dumps(RECORDS[3]).encode() + b"\n" + naming + other)
    done = await erase_pages(str(path), [ERASED_URL])
    assert (done.unreadable_removed, done.unjudged, done.rewritten) == (1, 1, True)
    assert path.read_bytes() == json.dumps(RECORDS[3]).encode() + b"\n" + other


async def test_a_writer_waiting_for_a_rewrite_writes_into_the_new_file(tmp_path) -> None:
    """A rewrite holds the lock and renames a new file over the log: the waiting writer reopens."""
    path = tmp_path / "merges.jsonl"
    log = open_merge_log(str(path), "unused")
    await log.write([RECORDS[3]])
    old = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(old, fcntl.LOCK_EX)  # what a rewrite does first
        write = asyncio.ensure_future(log.write([RECORDS[2]]))
        replacement = tmp_path / "rewritten"
        replacement.write_bytes(b"")
        await asyncio.to_thread(os.replace, replacement, path)  # the writer runs first, and waits
        fcntl.flock(old, fcntl.LOCK_UN)
        await write
        assert os.pread(old, 1 << 16, 0) == json.dumps(RECORDS[3], separators=(",", ":")).encode() + b"\n"
    finally:
        os.close(old)
        await log.close()
    assert list(read_merge_log(str(path))) == [RECORDS[2]]


async def test_a_rewrite_waits_for_the_writers_lock(tmp_path) -> None:
    """A line appended under the lock while an erasure waits for it is in the rewritten file, redacted."""
    path = tmp_path / "merges.jsonl"
    await write_log(str(path), RECORDS[:1])
    writer = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(writer, fcntl.LOCK_EX)
        erasure = asyncio.ensure_future(erase_pages(str(path), [ERASED_URL]))
        line = json.dumps(RECORDS[1]).encode() + b"\n"
        await asyncio.to_thread(os.write, writer, line)  # the erasure runs first, and waits
        fcntl.flock(writer, fcntl.LOCK_UN)
        assert (await erasure).redacted == 2
    finally:
        os.close(writer)
    assert list(read_merge_log(str(path))) == expected_after_erasure()[:2]


# ---- Redis streams ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["simhash:docs:merges", "simhash:{docs}:merges", "{simhash:docs:merges}", "a{}b", "a{b"]
)
def test_the_rewrite_key_is_in_the_streams_slot(key: str) -> None:
    temp = same_slot_key(key)
    assert temp != key and key_slot(temp.encode()) == key_slot(key.encode())


async def test_erasing_a_page_from_a_stream_redacts_and_keeps_entry_ids(redis_server_url, redis_prefix) -> None:
    stream = f"{redis_prefix}:merges"
    uri = f"{redis_server_url}?stream={stream}"
    await write_log(uri, RECORDS)
    with redis.Redis.from_url(redis_server_url) as client:
        ids = [entry_id for entry_id, _ in client.xrange(stream)]
        done = await erase_pages(uri, [ERASED_ID])
        assert [entry_id for entry_id, _ in client.xrange(stream)] == ids
        assert not client.exists(same_slot_key(stream))
        assert not named_in(client.dump(stream))
        assert client.xadd(stream, {"x": "1"}) > ids[-1]  # new ids follow the old ones
    assert (done.redacted, done.rewritten) == (3, True)
    assert list(read_merge_log(uri))[:5] == expected_after_erasure()


async def test_a_stream_keeps_its_consumer_groups(redis_server_url, redis_prefix) -> None:
    stream = f"{redis_prefix}:merges"
    uri = f"{redis_server_url}?stream={stream}"
    await write_log(uri, RECORDS)
    with redis.Redis.from_url(redis_server_url) as client:
        second = client.xrange(stream)[1][0]
        client.xgroup_create(stream, "audit", id=second)
        await erase_pages(uri, [ERASED_URL])
        [group] = client.xinfo_groups(stream)
    assert (group["name"], group["last-delivered-id"]) == (b"audit", second)


async def test_records_added_during_an_erasure_are_kept(redis_server_url, redis_prefix) -> None:
    """XADDs that land while the stream is copied are copied too: the final copy and RENAME are atomic."""
    stream = f"{redis_prefix}:merges"
    uri = f"{redis_server_url}?stream={stream}"
    await write_log(uri, RECORDS * 700)  # several read batches: time for the writer below to add more
    added: list[bytes] = []
    stop = asyncio.Event()

    async def writer() -> None:
        client = redis.asyncio.Redis.from_url(redis_server_url)
        try:
            while not stop.is_set():
                added.append(await client.xadd(stream, {"decision": "merged", "duplicate_id": f"n{len(added)}"}))
        finally:
            await client.aclose()

    running = asyncio.ensure_future(writer())
    try:
        done = await erase_pages(uri, [ERASED_URL])
    finally:
        stop.set()
        await running
    with redis.Redis.from_url(redis_server_url) as client:
        kept = {entry_id for entry_id, _ in client.xrange(stream)}
    assert added and set(added) <= kept and len(kept) == len(RECORDS) * 700 + len(added)
    assert done.redacted == 3 * 700


async def test_an_erased_page_is_in_no_byte_of_an_aof_rewrite(redis_factory) -> None:
    """Redis with appendonly yes: after the erasure and an AOF rewrite, no file of the server names the page."""
    server = redis_factory.start("--appendonly", "yes", "--rdbcompression", "no")
    uri = f"{server.url}?stream=simhash:docs:merges"
    await write_log(uri, RECORDS)
    await write_log(f"{server.url}?stream=simhash:docs:review", [review_record(RECORDS[0], "Jane's text")])
    with server.client() as client:
        rewrite_aof(client)
        assert named_in(server_bytes(server.directory))  # the check below can see them
        for stream in ("merges", "review"):
            await erase_pages(f"{server.url}?stream=simhash:docs:{stream}", [ERASED_URL, ERASED_ID])
        rewrite_aof(client)
        assert not named_in(client.dump("simhash:docs:merges") + client.dump("simhash:docs:review"))
    data = server_bytes(server.directory)
    assert not named_in(data) and b"Jane's text" not in data
    assert b"https://site.example/x" in data  # what was not erased is still there


def rewrite_aof(client: redis.Redis) -> None:
    """BGREWRITEAOF, and wait (bounded) until the server reports it finished."""
    client.bgrewriteaof()
    deadline = time.monotonic() + 30
    while (info := client.info("persistence"))["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]:
        assert time.monotonic() < deadline, "the AOF rewrite did not finish in 30 s"
        client.execute_command("PING")


def server_bytes(directory: Path) -> bytes:
    """Every byte the server would load: the AOF manifest, and the base and incremental files it lists
    (history files it lists are being deleted by a background thread)."""
    [manifest] = (directory / "appendonlydir").glob("*.manifest")
    text = manifest.read_text()
    files = [fields[1] for fields in map(str.split, text.splitlines()) if fields[fields.index("type") + 1] in "bi"]
    assert any(name.endswith(".base.rdb") for name in files)
    return text.encode() + b"".join((manifest.parent / name).read_bytes() for name in files)


@pytest.mark.parametrize("stream", ["simhash:docs:merges", "simhash:{docs}:merges"])
async def test_erasing_a_page_from_a_stream_on_a_cluster(cluster, stream) -> None:
    """The copy is made in the stream's own slot, so the script may rename it over the stream."""
    scheme, _, rest = cluster.url.partition("://")
    uri = f"{scheme}+cluster://{rest}?stream={stream}"
    await write_log(uri, RECORDS)
    done = await erase_pages(uri, [ERASED_URL])
    assert (done.redacted, done.rewritten) == (3, True)
    assert list(read_merge_log(uri)) == expected_after_erasure()
    with cluster.primary_of(stream).client() as node:
        assert not named_in(node.dump(stream))


async def test_pages_to_erase_are_a_collection_of_non_empty_strings(tmp_path) -> None:
    with pytest.raises(TypeError, match="collection"):
        await erase_pages(str(tmp_path / "merges.jsonl"), ERASED_URL)  # would be a set of characters
    for pages in ([], [""]):
        with pytest.raises(ValueError):
            await erase_pages(str(tmp_path / "merges.jsonl"), pages)


async def test_a_record_in_an_odd_shape_naming_the_page_goes(tmp_path) -> None:
    """A record redaction cannot judge (an "erased" that is not a list) is judged by its bytes."""
    path = tmp_path / "merges.jsonl"
    odd = [{**RECORDS[0], "erased": 5}, {**RECORDS[3], "erased": 5}]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in odd))
    done = await erase_pages(str(path), [ERASED_URL])
    assert (done.unreadable_removed, done.unjudged) == (1, 0)  # the other names no page: kept as it is
    assert list(read_merge_log(str(path))) == odd[1:]


async def test_a_record_naming_the_page_outside_its_sides_goes(tmp_path) -> None:
    """Another shape of record, or a field of its own beside the sides: no byte naming the page stays."""
    path = tmp_path / "merges.jsonl"
    shaped = {"v": 3, "pages": {"canonical": {"id": ERASED_URL}}}
    noted = {**RECORDS[0], "note": f"see {ERASED_URL}"}  # its sides are redacted; the note would stay
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in (shaped, noted, RECORDS[3])))
    done = await erase_pages(str(path), [ERASED_URL])
    assert done.unreadable_removed == 2
    assert list(read_merge_log(str(path))) == [RECORDS[3]]
    assert ERASED_URL.encode() not in path.read_bytes()
