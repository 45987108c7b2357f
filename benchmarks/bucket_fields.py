"""What a lookup pays for its band buckets as the index grows, in several bucket layouts on one server
in one run: by default key schema 5's (fields split 16 ways past 256 entries, read a level at a
time) against today's (split 4 ways past ``BUCKET_SPLIT_AT``, read from the level the last read
found).

    python benchmarks/bucket_fields.py [--sizes 100000,1000000,10000000,30000000,100000000] [LAYOUT ...]

A LAYOUT is READ:SPLIT_AT[:BITS], the first one the baseline: fields split past SPLIT_AT entries (0:
never) by BITS bits of the key a level (4, 16 ways, unless given); a split field's levels read one
``HGET`` a level from the top (``each``), all in one ``HMGET`` (``one``), or from the level where
the last band's read found its list (``hint``, as ``redis.lua`` does). ``merged`` keeps every band's
fields in one hash, named by band and first byte before the field's own name, so that a lookup reads
its 22 bands' fields (at the level last found) in one ``HMGET`` and writes them in one ``HSET``: what
fewer calls a lookup would save. ``keys`` makes every field a string key of its own (its hash's name,
then the field's): a lookup reads its 22 bands' lists (at the level last found) in one ``MGET`` and
appends its entries with ``APPEND``, never rebuilding a list as a Lua string. Default: ``each:256:4
hint:64:2``.

Filling an index to 10M records through the library takes most of an hour on 2 cores, per version;
this measures the part that grows with it alone. For each simulated index size it writes the band
hashes a lookup touches (22 bands x ``--hashes`` of their 256 hashes, 8 by default, which fit in a
cache; 256 is a whole index's bucket memory) x 256 fields, with the entries per field an index of
that size has (size / 65,536 on average), in each layout, then times (``INFO commandstats``) a
script that does, for each of the 22 bands, what ``redis.lua`` does for a new page: read the key's
bucket list (following split markers), search it for the key, and append the page's entry. A split
layout is made as ``redis.lua`` ``split`` leaves it: a field past the bound holds a one-byte marker
and its entries sit in fields named by the next bits of the key. Printed: server time per lookup
in each layout and the bytes per record of the bucket hashes (``MEMORY USAGE``), each as a ratio to
the first layout's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import throwaway_redis  # noqa: E402  (benchmarks/pipeline.py)

from scrapy_simhash.index.redis import BUCKET_SPLIT_AT  # noqa: E402

BANDS, REST, RID = 22, 4, 5
ENTRY = REST + RID
SIZES = (100_000, 1_000_000, 10_000_000, 30_000_000, 100_000_000)

# What both lookups share: the layout's constants, the bits a split parts a list by, and ``settle``,
# which finds band key ``rest``'s list in hash ``key`` (nil: a string key per field) from field
# ``name`` (read as ``value``, at ``level``; ``base`` bytes of the name come before the field's own):
# up while a level is empty, down past split markers, as redis.lua's bucket_field.
PRELUDE = """
local SPLIT, ENTRY, LEVELS, BITS = '\\0', %(entry)d, %(levels)d, %(bits)d
local function split_bits(rest, level)
    local v = string.byte(rest, 1)
    return string.char(math.floor(v / 2 ^ (8 - level * BITS)) %% 2 ^ BITS)
end
local function get(key, name)
    if key then return redis.call('HGET', key, name) or '' end
    return redis.call('GET', name) or ''
end
local function settle(key, base, name, level, value, rest)
    if value == '' then
        for up = level - 1, 1, -1 do
            local above = get(key, string.sub(name, 1, base + up))
            if above == SPLIT then break end
            name, level, value = string.sub(name, 1, base + up), up, above
            if above ~= '' then break end
        end
    end
    while value == SPLIT and level < LEVELS do
        name = name .. split_bits(rest, level)
        value, level = get(key, name), level + 1
    end
    return name, level, value
end
local function search(value, rest)
    local at = string.find(value, rest, 1, true)
    while at and (at - 1) %% ENTRY ~= 0 do at = string.find(value, rest, at + 1, true) end
    return at
end
local function append(value, rest)
    search(value, rest)
    return value .. rest .. 'rid05'
end
"""

# One band's lookup and insert, as redis.lua's bucket_field, band_rids and enband do it. KEYS: the
# 22 hash keys; ARGV: for each band its field byte and its 4 remaining key bytes. ``%(read)s``: how
# the levels of a split field are read (the module's docstring).
LOOKUP = PRELUDE + """
local level_hint = 1
for b = 1, #KEYS do
    local key, name, rest = KEYS[b], ARGV[2 * b - 1], ARGV[2 * b]
    local value, level
    if '%(read)s' == 'each' then
        name, level, value = settle(key, 0, name, 1, redis.call('HGET', key, name) or '', rest)
    elseif '%(read)s' == 'hint' then
        while level_hint > 1 and #name < level_hint do name = name .. split_bits(rest, #name) end
        name, level, value = settle(key, 0, name, #name, redis.call('HGET', key, name) or '', rest)
        level_hint = level
    else
        local names = {name}
        for l = 1, LEVELS - 1 do names[l + 1] = names[l] .. split_bits(rest, l) end
        local values = redis.call('HMGET', key, unpack(names))
        level = 1
        while values[level] == SPLIT and level < LEVELS do level = level + 1 end
        name, value = names[level], values[level] or ''
    end
    redis.call('HSET', key, name, append(value, rest))
end
return 1
"""

# The ``merged`` layout's lookup: KEYS and ARGV as LOOKUP's, each key naming its fields' prefix in
# the one hash MERGED, and last the level the previous call's last band found (which redis.lua keeps
# in the library's memory), which the call returns for the next.
MERGED = "b:all"
MERGED_LOOKUP = PRELUDE + """
local HASH, hint, names, writes = '""" + MERGED + """', tonumber(ARGV[#ARGV]), {}, {}
for b = 1, #KEYS do
    local name, rest = KEYS[b] .. ARGV[2 * b - 1], ARGV[2 * b]
    for level = 1, hint - 1 do name = name .. split_bits(rest, level) end
    names[b] = name
end
local values = redis.call('HMGET', HASH, unpack(names))
for b = 1, #KEYS do
    local rest, level, value = ARGV[2 * b], 0, nil
    names[b], level, value = settle(HASH, #KEYS[b], names[b], #names[b] - #KEYS[b], values[b] or '', rest)
    hint = level
    writes[#writes + 1] = names[b]
    writes[#writes + 1] = append(value, rest)
end
redis.call('HSET', HASH, unpack(writes))
return hint
"""

# The ``keys`` layout's lookup: KEYS and ARGV as MERGED_LOOKUP's, each key the prefix of its fields' keys.
KEYS_LOOKUP = PRELUDE + """
local hint, names = tonumber(ARGV[#ARGV]), {}
for b = 1, #KEYS do
    local name, rest = KEYS[b] .. ARGV[2 * b - 1], ARGV[2 * b]
    for level = 1, hint - 1 do name = name .. split_bits(rest, level) end
    names[b] = name
end
local values = redis.call('MGET', unpack(names))
for b = 1, #KEYS do
    local rest = ARGV[2 * b]
    local name, level, value = settle(nil, #KEYS[b], names[b], #names[b] - #KEYS[b], values[b] or '', rest)
    hint = level
    search(value, rest)
    redis.call('APPEND', name, rest .. 'rid05')
end
return hint
"""


def entries(rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.integers(0, 256, (count, ENTRY), dtype=np.uint8)


def levels(bits: int) -> int:
    """Levels of a field split ``bits`` bits of the key's third byte at a time."""
    return 1 + 8 // bits


def fields_of(name: bytes, rows: np.ndarray, level: int, split_at: int, bits: int) -> dict[bytes, bytes]:
    """The hash fields holding ``rows`` (the entries of one field), split past ``split_at`` (0: never)."""
    if not split_at or len(rows) <= split_at or level == levels(bits):
        return {name: rows.tobytes()}
    parts = (rows[:, 0] >> (8 - level * bits)) & ((1 << bits) - 1)
    out = {name: b"\0"}
    for n in np.unique(parts):
        out.update(fields_of(name + bytes([n]), rows[parts == n], level + 1, split_at, bits))
    return out


def fill(client: redis.Redis, size: int, split_at: int, bits: int, hashes: int, seed: int, read: str) -> int:
    """Write ``hashes`` hashes per band as an index of ``size`` records has them (``merged``: their
    fields in the one hash MERGED, each name after its hash's; ``keys``: each field a key named by its
    hash's name and its own); their bytes."""
    rng = np.random.default_rng(seed)
    per_field = size / 65536
    used = 0
    client.flushdb()
    before = client.info("memory")["used_memory"]
    for band in range(BANDS):
        for first in range(hashes):
            key = f"b:{band}:{first}"
            mapping: dict[bytes, bytes] = {}
            prefix = key.encode() + b":" if read in ("merged", "keys") else b""
            for field, count in enumerate(rng.poisson(per_field, 256)):
                mapping.update(fields_of(prefix + bytes([field]), entries(rng, count), 1, split_at, bits))
            for chunk in range(0, len(mapping), 1000):
                part = dict(list(mapping.items())[chunk : chunk + 1000])
                if read == "keys":
                    client.mset(part)
                else:
                    client.hset(MERGED if read == "merged" else key, mapping=part)
            if read not in ("merged", "keys"):
                used += client.memory_usage(key, samples=0) or 0
    if read == "merged":
        return client.memory_usage(MERGED, samples=0)
    return client.info("memory")["used_memory"] - before if read == "keys" else used


def server_time(client: redis.Redis, sha: str, calls: int, hashes: int, seed: int, suffix: str = "") -> float:
    """EVALSHA microseconds per call: each call one lookup over the 22 bands, random keys (each
    name followed by ``suffix``)."""
    rng = np.random.default_rng(seed)
    hint = 1  # the level the last band's read found (read by the merged layout only)
    client.config_resetstat()
    for _ in range(calls):
        keys = [f"b:{band}:{rng.integers(hashes)}" + suffix for band in range(BANDS)]
        args = []
        for _ in range(BANDS):
            key = rng.integers(0, 256, 1 + REST, dtype=np.uint8).tobytes()
            args += [key[:1], key[1:]]
        hint = client.evalsha(sha, BANDS, *keys, *args, hint)
    return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def layout(text: str) -> tuple[str, int, int]:
    read, split_at, bits = (text.split(":") + ["4"])[:3]
    if read not in ("each", "one", "hint", "merged", "keys") or bits not in ("1", "2", "4"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: READ:SPLIT_AT[:BITS], READ each, one, hint, merged or keys, BITS 1, 2 or 4"
        )
    return read, int(split_at), int(bits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(SIZES))
    parser.add_argument("--calls", type=int, default=2000, help="lookups timed per layout and size")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the layouts per size")
    parser.add_argument("--hashes", type=int, default=8, choices=range(1, 257), metavar="1..256",
                        help="hashes written per band, of 256 (all: an index's whole bucket memory)")
    parser.add_argument("layouts", nargs="*", type=layout, default=[("each", 256, 4), ("hint", BUCKET_SPLIT_AT, 2)],
                        help="READ:SPLIT_AT[:BITS], the first the baseline (the docstring says more)")
    args = parser.parse_args()
    print("Band bucket lookups (22 bands): server time per lookup and bucket bytes per record, against the first")
    print(f"layout; {args.rounds} rounds alternating, {args.calls} lookups each.")
    with throwaway_redis() as url:
        # Each layout on a database of its own, so all stay filled while they alternate.
        clients = [redis.Redis.from_url(url.rsplit("/", 1)[0] + f"/{1 + i}") for i in range(len(args.layouts))]
        for size in args.sizes:
            print(f"  {size:,} records ({size / 65536:.1f} entries a field):")
            used = [fill(c, size, split_at, bits, args.hashes, seed=size, read=read)
                    for c, (read, split_at, bits) in zip(clients, args.layouts)]
            scripts = {"merged": MERGED_LOOKUP, "keys": KEYS_LOOKUP}
            shas = [c.script_load(scripts.get(read, LOOKUP)
                                  % {"entry": ENTRY, "levels": levels(bits), "bits": bits, "read": read})
                    for c, (read, _, bits) in zip(clients, args.layouts)]
            times: list[list[float]] = [[] for _ in clients]
            for r in range(args.rounds):
                for i, client in enumerate(clients):
                    suffix = ":" if args.layouts[i][0] in ("merged", "keys") else ""
                    times[i].append(server_time(client, shas[i], args.calls, args.hashes, seed=r, suffix=suffix))
            medians = [float(np.median(t)) for t in times]
            per_record = [u * (256 / args.hashes) / size for u in used]
            for (read, split_at, bits), t, b in zip(args.layouts, medians, per_record):
                print(f"    {read:>4}:{split_at}:{bits:<3} {t:6.1f} us ({t / medians[0]:4.2f}x)"
                      f"   bucket bytes/record {b:6.1f} ({b / per_record[0]:4.2f}x)")
        for client in clients:
            client.close()


if __name__ == "__main__":
    main()
