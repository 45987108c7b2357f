"""The protocol between the Redis index's client and its function (``redis.lua``), defined once.

Every constant both sides use is here: the client reads replies with it, and the library's code
gets it as Lua constants in front (:func:`lua_constants`), as it gets the layout. Key names are in
docs/how-it-works.md.
"""

from __future__ import annotations

import re
import struct

__all__ = [
    "BUSY", "CANDIDATE", "CANDIDATE_OFFSETS", "HELD", "JOINED", "LOOKUP_HEAD", "NEEDS_DATA", "OMITTED",
    "PAGE_FIELDS", "PAGE_HEAD", "WRITE_ID", "lua_constants", "lua_string",
]

#: In place of a lookup's added rid: the id is pending in another live session.
BUSY = -1
#: In place of a lookup's added rid: the page is new and its lookup came without its page data.
NEEDS_DATA = -2
#: A page row's blob length when the blob is left out (the caller holds the hashes, or has no use for them).
OMITTED = 0xFFFFFFFF
#: In place of a page row: the caller holds all of that page's data (a record it wrote).
HELD = b"-"
#: Bytes of a write id, the name of a record's page data.
WRITE_ID = 8
#: The fields of a record's page data hash: verification blob, id, URL, host, first seen, retention.
PAGE_FIELDS = ("s", "i", "u", "h", "t", "c")
BLOB, ID, URL, HOST, FIRST_SEEN = PAGE_FIELDS[:5]

#: Replies packed by the function (Lua ``struct.pack`` formats): a lookup's head (sequence number,
#: added rid, this session's and earlier records of the id, counts of stale write ids and
#: candidates); a page row's lengths of blob, id, URL, host and first seen; a join's rid, group,
#: canonical, size and whether the record is banded.
_LUA_FORMATS = {"LOOKUP_HEAD": ">ddddI4I4", "PAGE_HEAD": ">I4I4I4I4I4", "JOINED": ">ddddd"}
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


def lua_string(value: bytes | str) -> str:
    """``value`` as a Lua string literal: printable ASCII as it is, any other byte escaped."""
    data = value.encode() if isinstance(value, str) else value
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\{b}" for b in data) + '"'


def lua_constants() -> str:
    """The constants above as Lua locals, for the front of the library's code."""
    names = {"BUSY": BUSY, "NEEDS_DATA": NEEDS_DATA, "OMITTED": OMITTED, "HELD": lua_string(HELD),
             "NO_CANONICAL": lua_string(bytes(1 + WRITE_ID)),
             "EQUAL_FORMAT": lua_string(">I" + str(dict(CANDIDATE_FIELDS)["equal"])),
             **{f"F_{name}": lua_string(field) for name, field in zip(
                 ("BLOB", "ID", "URL", "HOST", "FIRST_SEEN", "RETENTION"), PAGE_FIELDS)},
             **{name: lua_string(lua) for name, lua in _LUA_FORMATS.items()}}
    return "".join(f"local {name} = {value}\n" for name, value in names.items())
