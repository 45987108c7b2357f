"""The protocol between the Redis index's client and its function (``redis.lua``), defined once.

Every constant both sides use is here: the client reads replies with it, and the library's code
gets it as Lua constants in front (:func:`lua_constants`), as it gets the layout. Key names are in
docs/how-it-works.md.
"""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

__all__ = [
    "BUSY", "CANDIDATE", "CANDIDATE_OFFSETS", "HELD", "JOINED", "LOOKUP_HEAD", "NEEDS_DATA", "PAGE_HEAD",
    "PAGE_READ", "Page", "WRITE_ID", "fields_end", "lua_constants", "lua_string", "page_fields", "read_page",
]

#: In place of a lookup's added rid: the id is pending in another live session.
BUSY = -1
#: In place of a lookup's added rid: the page is new and its lookup came without its page data.
NEEDS_DATA = -2
#: In place of a page row: the caller holds all of that page's data (a record it wrote).
HELD = b"-"
#: Bytes of a write id, the name of a record's page data.
WRITE_ID = 8
#: Bytes of a record's page data read first when its blob is not wanted: the head and the fields of
#: nearly every page (a longer one takes a second read).
PAGE_READ = 256

#: Replies packed by the function (Lua ``struct.pack`` formats): a lookup's head (sequence number,
#: added rid, this session's and earlier records of the id, counts of stale write ids and
#: candidates); a join's rid, group, canonical, size and whether the record is banded. And the head
#: of a record's page data, one string (:func:`page_fields`): the lengths of its id, URL, host and
#: retention class, and its first-seen time.
_LUA_FORMATS = {"LOOKUP_HEAD": ">ddddI4I4", "PAGE_HEAD": ">I4I4I4I4d", "JOINED": ">ddddd"}
#: A candidate in a lookup's reply, field by field: rid, group and canonical rid (5 bytes each),
#: fingerprint, sketch bytes shared, write id, whether the group has a canonical record, its write id.
CANDIDATE_FIELDS = (("rid", 5), ("group", 5), ("canonical", 5), ("fingerprint", 8), ("equal", 2),
                    ("key", WRITE_ID), ("has_canonical", 1), ("canonical_key", WRITE_ID))
#: Where each of a candidate's fields starts, in that order, then its length.
CANDIDATE_OFFSETS = tuple(sum(width for _, width in CANDIDATE_FIELDS[:n]) for n in range(len(CANDIDATE_FIELDS) + 1))
#: Bytes of a candidate.
CANDIDATE = CANDIDATE_OFFSETS[-1]


def _python_struct(lua: str) -> struct.Struct:
    return struct.Struct(re.sub(r"I([24])", lambda m: {"2": "H", "4": "I"}[m[1]], lua))


LOOKUP_HEAD = _python_struct(_LUA_FORMATS["LOOKUP_HEAD"])
PAGE_HEAD = _python_struct(_LUA_FORMATS["PAGE_HEAD"])
JOINED = _python_struct(_LUA_FORMATS["JOINED"])


class Page(NamedTuple):
    """A record's page data as stored; ``blob`` is whatever follows the fields: its verification
    blob, empty for a record that keeps none, part of it or nothing in a row read without it."""

    id: bytes
    url: bytes
    host: bytes
    retention: bytes
    first_seen: float
    blob: bytes


def page_fields(id_: str, url: str, host: str, retention: str, first_seen: float) -> bytes:
    """A record's page data up to its blob, which follows it in the one Redis string the page data is:
    a hash of six fields cost ~350 bytes a page more (docs/decisions/page-data-string.md), and with
    the blob last a read that does not want it takes a prefix."""
    fields = [value.encode() for value in (id_, url, host, retention)]
    return PAGE_HEAD.pack(*map(len, fields), first_seen) + b"".join(fields)


def fields_end(row: bytes) -> int:
    """Where the fields of page data end, by its head; 0 for a row too short to have one."""
    if len(row) < PAGE_HEAD.size:
        return 0
    *lengths, _ = PAGE_HEAD.unpack_from(row)
    return PAGE_HEAD.size + sum(lengths)


def read_page(row: bytes) -> Page:
    """The page data a row holds (the stored string, or a prefix reaching past its fields); ValueError
    for bytes that are not one (planted or cut short)."""
    if len(row) < PAGE_HEAD.size:
        raise ValueError("not page data: shorter than its head")
    if fields_end(row) > len(row):
        raise ValueError("not page data: its fields run past its end")
    *lengths, first_seen = PAGE_HEAD.unpack_from(row)
    at, fields = PAGE_HEAD.size, []
    for length in lengths:
        fields.append(row[at : at + length])
        at += length
    return Page(*fields, first_seen, row[at:])


def lua_string(value: bytes | str) -> str:
    """``value`` as a Lua string literal: printable ASCII as it is, any other byte escaped."""
    data = value.encode() if isinstance(value, str) else value
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\{b}" for b in data) + '"'


def lua_constants() -> str:
    """The constants above as Lua locals, for the front of the library's code."""
    names = {"BUSY": BUSY, "NEEDS_DATA": NEEDS_DATA, "HELD": lua_string(HELD), "PAGE_READ": PAGE_READ,
             "PAGE_HEAD_SIZE": PAGE_HEAD.size,
             "NO_CANONICAL": lua_string(bytes(1 + WRITE_ID)),
             "EQUAL_FORMAT": lua_string(">I" + str(dict(CANDIDATE_FIELDS)["equal"])),
             **{name: lua_string(lua) for name, lua in _LUA_FORMATS.items()}}
    return "".join(f"local {name} = {value}\n" for name, value in names.items())
