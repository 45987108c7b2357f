"""Where a new page's lookup spends its server time: the call, the checks before the bands, the band
reads, the insert.

    cd benchmarks
    python lookup_parts.py [--records 100000] [--lookups 200] [--rounds 12]

Four libraries on one index, each ``redis.lua`` with ``check_add`` cut short at another point: at
once (``call``: the function called with a lookup's arguments), after reading the sequence number and
the id's records (``checks``), after the band buckets are read and their records compared
(``bands``), and the whole lookup, which inserts the page (``insert``). Each part's cost is the
difference between neighbours. The index is a throwaway redis-server filled with ``--records``
random records as index.py makes them; in each round every cut looks up ``--lookups`` new random
records one call at a time, the cuts in turn (reversed every other round); server time per call is
INFO commandstats for FCALL, and the medians of the rounds are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import random
import statistics

import redis

from function_calls import lookup_args, server_us  # benchmarks/function_calls.py
from index import NewDriver  # benchmarks/index.py
from pipeline import throwaway_redis  # benchmarks/pipeline.py

RETURN = "if true then return {0, 0, 0, 0, {}, {}} end\n"
CUTS = {
    "call": "    local since, sketch = tonumber(ARGV[a]), ARGV[a + 1]\n",
    "checks": "    for b = 1, BANDS do\n        for _, rid in ipairs(band_rids(sketch, b)) do\n",
    "bands": "    if #found == 0 then\n",
}


def cut(library: str, name: str, before: str) -> tuple[str, str]:
    """``library`` renamed ``name`` and returning from ``check_add`` just before the line ``before``."""
    if library.count(before) != 1:
        raise ValueError(f"redis.lua has changed: {before.strip()!r} is not one line of check_add")
    body = library.split("\n", 1)[1].replace(before, "    " + RETURN + before)
    body = body.replace("redis.register_function(NAME, ", f"redis.register_function('{name}', ")
    return name, f"#!lua name={name}\n{body}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in the index (default 100,000)")
    parser.add_argument("--lookups", type=int, default=200, help="new-record lookups per cut and round")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()

    with throwaway_redis() as url:
        admin = redis.Redis.from_url(url)
        driver = NewDriver("redis", url)
        driver.admin = admin
        await driver.open()
        await driver.fill(0, args.records)
        index = driver.index
        digest = hashlib.sha1(index._library.encode()).hexdigest()[:8]
        functions = {}
        for part, before in CUTS.items():
            name, code = cut(index._library, f"lookup_parts_{part}_{digest}", before)
            admin.function_load(code, replace=True)
            functions[part] = name
        functions["insert"] = index._function
        times: dict[str, list[float]] = {part: [] for part in functions}
        base = random.Random().randrange(10**9, 10**10)  # ids no earlier run has stored
        for n in range(args.rounds):
            order = list(functions) if n % 2 == 0 else list(reversed(functions))
            for w, part in enumerate(order):
                queries = driver.new_queries(base + len(functions) * n + w, args.lookups)
                call = functools.partial(index.client.fcall, functions[part])
                times[part].append(await server_us(driver, call, [lookup_args(driver, r) for r, _ in queries]))
        for name in functions.values():
            if name != index._function:
                admin.function_delete(name)
        await driver.close()

    print(f"{args.records:,} random records; {args.rounds} rounds of {args.lookups} new-record lookups a cut, one at "
          f"a time; server time per call, median of the rounds (quartiles)")
    previous = 0.0
    for part, values in times.items():
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        print(f"  up to {part:<7} {median:7.1f} us ({quartiles[0]:.1f}-{quartiles[2]:.1f}): "
              f"{part:<7} {median - previous:+7.1f} us")
        previous = median


if __name__ == "__main__":
    asyncio.run(main())
