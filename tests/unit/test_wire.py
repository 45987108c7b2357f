"""The Redis protocol is defined once: redis.lua gets every wire constant from index/wire.py."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from scrapy_simhash.index import wire

LUA = files("scrapy_simhash.index").joinpath("redis.lua").read_text(encoding="utf-8")


def test_the_library_assigns_none_of_the_constants_it_is_given():
    given = re.findall(r"^local (\w+) = ", wire.lua_constants(), re.M)
    assert {"BUSY", "HELD", "PAGE_HEAD", "PAGE_HEAD_SIZE", "PAGE_READ", "LOOKUP_HEAD"} <= set(given)
    assigned = set(re.findall(r"^\s*local ([\w, ]+?) = ", LUA, re.M))
    assert not {name.strip() for names in assigned for name in names.split(",")} & set(given)


def test_the_library_packs_no_reply_and_reads_no_page_head_by_a_literal_format():
    assert not re.search(r"pack\('>(d|I4I4|I2')", LUA)  # the replies' formats; slots' own stay in redis.lua
    assert "unpack(PAGE_HEAD, " in LUA


def test_the_python_structs_read_what_the_lua_formats_pack():
    assert wire.LOOKUP_HEAD.format == ">ddddII" and wire.PAGE_HEAD.size == 24 and wire.JOINED.size == 40
    assert wire.CANDIDATE == 42 and wire.CANDIDATE_OFFSETS[-1] == wire.CANDIDATE


def test_page_data_reads_back_whole_or_without_its_blob():
    fields = wire.page_fields("id-1", "https://a.example/ü", "a.example", "default", 1733472000.123456)
    assert wire.read_page(fields + b"blob") == wire.Page(
        b"id-1", "https://a.example/ü".encode(), b"a.example", b"default", 1733472000.123456, b"blob")
    assert wire.read_page(fields).blob == b""


def test_bytes_that_are_not_page_data_are_refused():
    fields = wire.page_fields("id-1", "https://a.example/", "a.example", "default", 0.0)
    for row in (b"", b"x" * (wire.PAGE_HEAD.size - 1), fields[:-1], wire.PAGE_HEAD.pack(2**32 - 1, 0, 0, 0, 0.0)):
        with pytest.raises(ValueError, match="not page data"):
            wire.read_page(row)
