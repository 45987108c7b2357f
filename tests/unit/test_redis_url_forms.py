"""One rule for every Redis URL (index, merge-log stream, review-log stream), on real servers (issue 43):
percent-encoded and ACL credentials work the same everywhere and are masked everywhere."""

from __future__ import annotations

import logging
from urllib.parse import quote

import pytest

from crawls import crawl
from texts import article
from scrapy_simhash.index import open_index
from scrapy_simhash.mergelog import read_merge_log, open_merge_log
from scrapy_simhash.minhash import Layout
from scrapy_simhash.redis_url import mask_url
from merge_records import record

pytestmark = pytest.mark.redis

# Every character a URL gives a meaning to: each must be percent-encoded to be a password's.
PASSWORD = "Us3r@Pass/w0rd#ZZ?a=b&c%d:e"
PIECES = ("Us3r", "Pass", "w0rd", "ZZ", "%40", "%2F")


def _no_piece_of_the_password(*texts: str) -> None:
    for text in texts:
        for piece in PIECES:
            assert piece not in text, (piece, text)


@pytest.fixture
def acl_server(redis_factory):
    """A server whose default user is off and whose user ``alice`` has PASSWORD."""
    server = redis_factory.start()
    with server.client() as admin:
        admin.acl_setuser("alice", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], channels=["*"],
                          commands=["+@all"])
        admin.acl_setuser("default", enabled=False)
    return server


def url_forms(port: int) -> dict[str, str]:
    encoded = quote(PASSWORD, safe="")
    return {
        "acl in the user part": f"redis://alice:{encoded}@127.0.0.1:{port}/0",
        "acl as query parameters": f"redis://127.0.0.1:{port}/0?username=alice&password={encoded}",
    }


@pytest.mark.parametrize("form", ["acl in the user part", "acl as query parameters"])
async def test_every_url_form_opens_the_index_and_both_streams(acl_server, form, caplog) -> None:
    url = url_forms(acl_server.port)[form]
    with caplog.at_level(logging.DEBUG):
        index = open_index(url, layout=Layout(14, 6, 0.73), key_prefix="t:{x}")
        try:
            await index.open()
        finally:
            await index.close()
        separator = "&" if "?" in url else "?"
        for kind in ("merges", "review"):
            log = open_merge_log(f"{url}{separator}stream={kind}&maxlen=100", "unused")
            try:
                await log.check()
                await log.write([record()])
            finally:
                await log.close()
            assert len(list(read_merge_log(f"{url}{separator}stream={kind}"))) == 1
            _no_piece_of_the_password(log.where)
            assert "***" in log.where and "alice" in log.where or "username=alice" in log.where
    _no_piece_of_the_password(caplog.text, mask_url(url), index.location)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://h/0?password=Us3r%40Pass%2Fw0rd%23ZZ&stream=m", "redis://h/0?password=***&stream=m"),
        ("redis://h/0?password=Us3r@Pass/w0rd#ZZ", "redis://h/0?password=***"),  # not encoded: masked to the end
        ("redis://alice:Us3r%40Pass@h/0?stream=m", "redis://alice:***@h/0?stream=m"),
        ("redis://h/0?username=alice&password=a%26b&db=1", "redis://h/0?username=alice&password=***&db=1"),
    ],
)
def test_a_password_in_any_place_is_masked_whole(url, masked) -> None:
    assert mask_url(url) == masked


def test_a_stream_url_reaches_redis_with_its_credentials_as_written() -> None:
    """What an erasure connects to for a log is the log's URL less the stream's own options, the rest
    byte for byte (a decoded password put back unencoded was another password)."""
    from scrapy_simhash.offline.erase import connection_urls

    encoded = quote(PASSWORD, safe="")
    url = f"redis://127.0.0.1:1/0?password={encoded}&stream=s&maxlen=5&max_connections=2"
    assert connection_urls(["sqlite:///x.db", url, "/tmp/m.jsonl"]) == [f"redis://127.0.0.1:1/0?password={encoded}"]


def test_a_merge_stream_with_a_wrong_password_stops_the_crawl_at_open(redis_factory, tmp_path) -> None:
    server = redis_factory.start(password=PASSWORD)
    wrong = f"redis://127.0.0.1:{server.port}/0?password={quote(PASSWORD + 'x', safe='')}&stream=merges"
    items = [{"url": f"https://a.example/{n}", "body_text": article(n)} for n in range(3)]
    stats, log = crawl(tmp_path, items, SIMHASH_MERGE_LOG=wrong)
    [error] = [line for line in log.splitlines() if line.startswith("ERROR")]
    assert "merge" in error and "password=***" in error and "AuthenticationError" in error, error
    assert stats["finish_reason"] == "simhash_index_error" and "Traceback" not in log
    _no_piece_of_the_password(log)
