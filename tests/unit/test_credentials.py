"""Credentials never reach a log line, an exception message or a stat from the merge-log modules (issue 15.8)."""

from __future__ import annotations

import logging
import subprocess
import sys
import traceback

import pytest
import redis

from scrapy_simhash.mergelog import MergeLogError, erase_pages, expire_log, log_store, open_merge_log, read_merge_log
from scrapy_simhash.index import open_index
from scrapy_simhash.minhash import Layout
from scrapy_simhash import redis_url
from scrapy_simhash.redis_url import async_client, mask_url, sync_client
from merge_records import record

SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://user:secret@host:6379/0", "redis://user:***@host:6379/0"),
        ("redis://:secret@host/0?stream=k", "redis://:***@host/0?stream=k"),
        ("rediss+cluster://u:p%40ss@h:7000", "rediss+cluster://u:***@h:7000"),
        ("redis://u:p@ss@host/1", "redis://u:***@host/1"),  # an unescaped @ in the password
        ("redis://:TOP#SECRET@host/0", "redis://:***@host/0"),  # an unescaped #, / or ? in the password
        ("redis://u:TOP/SECRET@host/0", "redis://u:***@host/0"),
        ("redis://:TOP?SECRET@host/0?db=1", "redis://:***@host/0?db=1"),
        ("unix://:secret@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
        ("redis://host/0?password=secret&db=1", "redis://host/0?password=***&db=1"),
        ("redis://host/0?db=1&Password=secret#x", "redis://host/0?db=1&Password=***"),
        ("redis://user@host/0", "redis://user@host/0"),
        ("redis://host:6379", "redis://host:6379"),
        ("sqlite:////var/x.sqlite3", "sqlite:////var/x.sqlite3"),
        ("/var/log/merges.jsonl", "/var/log/merges.jsonl"),
        ("redis://[::1:6379/0?password=x", "redis://[::1:6379/0?password=***"),  # not a valid URL: masked all the same
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


@pytest.fixture
def locked_redis(redis_factory):
    return redis_factory.start(password=SECRET)


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text, text


def _formatted(caught: pytest.ExceptionInfo) -> str:
    return "".join(traceback.format_exception(caught.value))


async def test_a_wrong_password_is_masked_in_errors_and_logs(locked_redis, caplog) -> None:
    wrong = locked_redis.url.replace(SECRET, SECRET + "-wrong")
    uris = [f"{wrong}?stream=merges", f"redis://127.0.0.1:{locked_redis.port}/0?stream=merges&password={SECRET}x"]
    with caplog.at_level(logging.DEBUG):
        for uri in uris:
            log = open_merge_log(uri, "unused")
            assert "***" in log.where
            with pytest.raises(MergeLogError) as refused:
                await log.write([record()])
            await log.close()
            with pytest.raises(redis.AuthenticationError) as unread:
                list(read_merge_log(uri))
            with pytest.raises(redis.AuthenticationError) as unerased:
                await erase_pages(uri, ["https://a.example/1"])
            with pytest.raises(redis.AuthenticationError) as unexpired:
                await expire_log(uri, {"default": 60, "other": None}, 0.0)
            _no_secret(log.where, str(refused.value), *map(_formatted, (refused, unread, unerased, unexpired)))
    _no_secret(caplog.text)


def test_a_stream_reader_names_its_log_masked(locked_redis, caplog) -> None:
    uri = f"{locked_redis.url}?stream=merges"
    with locked_redis.client() as client:
        client.xadd("merges", {"distance": "not a number"})
        client.xadd("merges", {"erased": "5"})
    reader = read_merge_log(uri)
    assert list(reader) == [] and reader.skipped == 2
    assert "***" in caplog.text
    _no_secret(caplog.text, reader.store.where, repr(log_store(uri)))


@pytest.mark.slow
def test_reevaluate_does_not_print_the_password(locked_redis) -> None:
    uri = locked_redis.url.replace(SECRET, SECRET + "-wrong") + "?stream=merges"
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "reevaluate", uri, "--threshold", "0.8"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0 and "cannot read merge log redis://:***@127.0.0.1" in done.stderr
    _no_secret(done.stdout, done.stderr)


@pytest.mark.parametrize(
    "url",
    [f"reddis://:{SECRET}@127.0.0.1:6379/0", f"redis://:TOP#{SECRET}@127.0.0.1:6379/0",
     f"redis://:TOP/{SECRET}@127.0.0.1:6379/0", f"redis+cluster://:TOP?{SECRET}@127.0.0.1:6379"],
)
def test_an_index_url_that_cannot_be_used_is_refused_without_its_password(url) -> None:
    """A mistyped scheme, a password with an unescaped delimiter: the error, which the crawl logs,
    says what is wrong, and holds neither the password nor a piece of it."""
    with pytest.raises(ValueError) as refused:
        open_index(url, layout=Layout(22, 6, 0.74), key_prefix="x:{y}")
    _no_secret(_formatted(refused))
    assert "TOP" not in _formatted(refused) and "***" in str(refused.value)


@pytest.mark.parametrize(
    "client, url, options",
    [
        (async_client, "redis://127.0.0.1:6379/0", lambda c: c.connection_pool.connection_kwargs),
        (sync_client, "redis://127.0.0.1:6379/0", lambda c: c.connection_pool.connection_kwargs),
        (async_client, "redis+cluster://127.0.0.1:6379", lambda c: c.nodes_manager.connection_kwargs),
    ],
)
def test_a_client_waits_for_a_reply_as_long_as_the_url_says_or_the_default(client, url, options, monkeypatch):
    """Every redis-py release the package admits waits SOCKET_TIMEOUT for a reply, not forever (< 8)."""
    monkeypatch.setattr(redis_url, "SOCKET_TIMEOUT", 7.5)  # not redis-py 8's own default
    assert options(client(url))["socket_timeout"] == 7.5
    separator = "&" if "?" in url else "?"
    assert options(client(f"{url}{separator}socket_timeout=0.25"))["socket_timeout"] == 0.25
