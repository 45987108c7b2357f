"""Server time of the index's calls as a Redis Functions library against the same code as a script.

    cd benchmarks
    python function_calls.py [--records 100000] [--lookups 200] [--near 50] [--rounds 20] [--against REV]

``FCALL`` runs a library's function, whose code ran once, when the library was loaded; ``EVALSHA``
runs a script's whole chunk on every call: for ``redis.lua`` that is about 60 local functions and
tables made before the entry point starts its work. The script here is this version's library made
into an EVAL script (no shebang; the function it would register is called at the end of the chunk
with the call's arguments), so the two differ only in how they are called.

One index on a throwaway redis-server, filled with ``--records`` random records as index.py makes
them; then in each round each way looks up ``--lookups`` new random records (each adds its record,
as a crawl's new page does) and ``--near`` near-duplicates of stored records, and makes ``--near``
calls that do nothing (``empty``: a confirmation of no record), one call at a time,
the ways alternating. Server time per call is INFO commandstats for FCALL and EVALSHA; printed are
the medians of the rounds and the median of the rounds' ratios (a round's two ways ran back to back,
so their ratio is what the machine's drift disturbs least).

``--against REV``: the other way is the library built from git revision REV's ``redis.lua`` (with
this version's layout constants in front), called by ``FCALL`` as well: a change to the server side
measured against the code before it, on one index in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
from pathlib import Path

from index import SCRIPT_CALLS, NewDriver  # benchmarks/index.py
from pipeline import throwaway_redis  # benchmarks/pipeline.py

REDIS_LUA = Path(__file__).resolve().parents[1] / "scrapy_simhash" / "index" / "redis.lua"


def as_script(library: str) -> str:
    """``library`` as an EVAL script that runs its registered function on every call."""
    code = "local GIVEN = ARGV\n" + library.split("\n", 1)[1]  # ARGV is shadowed by the library's own
    head, registered, tail = code.rpartition("redis.register_function(NAME, ")
    if not registered or not tail.rstrip().endswith("end)"):
        raise ValueError("redis.lua no longer ends with the function it registers")
    return f"{head}return ({tail.rstrip()}(KEYS, GIVEN)\n"


def library_at(library: str, rev: str) -> tuple[str, str]:
    """``library`` with git revision ``rev``'s ``redis.lua`` in place of this version's, under a name
    of its own: that name and the code."""
    show = ["git", "show", f"{rev}:scrapy_simhash/index/redis.lua"]
    old = subprocess.run(show, cwd=REDIS_LUA.parent, capture_output=True, text=True, check=True).stdout
    current = REDIS_LUA.read_text(encoding="utf-8")
    if library.count(current) != 1:
        raise ValueError("the library does not hold redis.lua as this checkout has it")
    name = "function_calls_" + "".join(c if c.isalnum() else "_" for c in rev)
    body = library.split("\n", 2)[2]  # after the shebang and the line naming the function
    return name, f'#!lua name={name}\nlocal NAME = "{name}"\n' + body.replace(current, old)


def lookup_args(driver: NewDriver, record) -> tuple:
    """The arguments ``RedisIndex.check_and_add`` sends for ``record`` (a lookup of a new page)."""
    index = driver.index
    return (index.prefix, "check_add", 0, record.sketch(driver.layout), 1, *index._record_args(record),
            *index._page_data(record))


async def server_us(driver: NewDriver, call, arguments: list[tuple]) -> float:
    """Server microseconds per call, ``call`` made once with each of ``arguments`` on the index's route."""
    driver.admin.config_resetstat()
    for args in arguments:
        await call(1, *driver.index._route, *args)
    stats = driver.admin.info("commandstats")
    return next(s["usec_per_call"] for name, s in stats.items() if name in SCRIPT_CALLS)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in the index (default 100,000)")
    parser.add_argument("--lookups", type=int, default=200, help="new-record lookups per way and round")
    parser.add_argument("--near", type=int, default=50, help="near-duplicate lookups per way and round")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--against", metavar="REV", help="compare with the library of this git revision")
    args = parser.parse_args()

    import redis

    with throwaway_redis() as url:
        driver = NewDriver("redis", url)
        driver.admin = redis.Redis.from_url(url)
        await driver.open()
        await driver.fill(0, args.records)
        index = driver.index
        if args.against:
            other, code = library_at(index._library, args.against)
            await index.client.function_load(code, replace=True)
            ways = {
                "this version": lambda *a: index.client.fcall(index._function, *a),
                args.against: lambda *a: index.client.fcall(other, *a),
            }
        else:
            sha = await index.client.script_load(as_script(index._library))
            ways = {
                "FCALL (library)": lambda *a: index.client.fcall(index._function, *a),
                "EVALSHA (script)": lambda *a: index.client.evalsha(sha, *a),
            }
        rng = random.Random(1)
        times: dict[tuple[str, str], list[float]] = {}
        for n in range(args.rounds):
            for w, (way, call) in enumerate(ways.items()):
                new = driver.new_queries(1_000_000_000 + 2 * n + w, args.lookups)
                near = driver.near_queries(n, rng.sample(range(args.records), args.near))
                empty = [(index.prefix, "confirm", index.session)] * args.near  # confirms no record
                for kind, arguments in (("new", [lookup_args(driver, r) for r, _ in new]),
                                        ("near", [lookup_args(driver, r) for r, _ in near]), ("empty", empty)):
                    times.setdefault((way, kind), []).append(await server_us(driver, call, arguments))
        await driver.close()

    print(f"{args.records:,} random records; {args.rounds} rounds of {args.lookups} new-record and {args.near} "
          f"near-duplicate lookups a way, one at a time; server time per call, median of the rounds (range)")
    for kind in ("new", "near", "empty"):
        medians = {way: statistics.median(times[way, kind]) for way in ways}
        for way in ways:
            values = times[way, kind]
            print(f"  {kind:>4} {way:<17} {medians[way]:7.1f} us  ({min(values):.1f}-{max(values):.1f})")
        first, second = (times[way, kind] for way in ways)
        ratios = [a / b for a, b in zip(first, second, strict=True)]
        print(f"  {kind:>4} {' / '.join(ways)}, median of the rounds' ratios: {statistics.median(ratios):.2f}x "
              f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.2f}-{statistics.quantiles(ratios, n=4)[2]:.2f}), "
              f"{statistics.median(b - a for a, b in zip(first, second)):.1f} us less a call")


if __name__ == "__main__":
    asyncio.run(main())
