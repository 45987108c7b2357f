"""The Redis protocol is defined once: redis.lua gets every wire constant from index/wire.py."""

from __future__ import annotations

import re
from importlib.resources import files

from scrapy_simhash.index import wire

LUA = files("scrapy_simhash.index").joinpath("redis.lua").read_text(encoding="utf-8")


def test_the_library_assigns_none_of_the_constants_it_is_given():
    given = re.findall(r"^local (\w+) = ", wire.lua_constants(), re.M)
    assert {"BUSY", "HELD", "OMITTED", "F_BLOB", "LOOKUP_HEAD"} <= set(given)
    assigned = set(re.findall(r"^\s*local ([\w, ]+?) = ", LUA, re.M))
    assert not {name.strip() for names in assigned for name in names.split(",")} & set(given)


def test_the_library_names_no_page_data_field_and_packs_no_reply_by_a_literal_format():
    assert not re.search(r"'HM?(SET|GET)', (key|DATA \.\. \w+), '", LUA)
    assert not re.search(r"pack\('>(d|I4I4|I2')", LUA)  # the replies' formats; slots' own stay in redis.lua


def test_the_python_structs_read_what_the_lua_formats_pack():
    assert wire.LOOKUP_HEAD.format == ">ddddII" and wire.PAGE_HEAD.size == 20 and wire.JOINED.size == 40
    assert wire.CANDIDATE == 42 and wire.CANDIDATE_OFFSETS[-1] == wire.CANDIDATE
