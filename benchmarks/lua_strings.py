"""What a string costs a Redis script per byte: why a lookup's bucket lists cost more as they grow.

    python benchmarks/lua_strings.py [--sizes 16,256,1350,4400] [--calls 2000] [--rounds 3]

Every value a script reads (``GET``, ``HGET``) or builds (``..``, ``string.sub``) becomes a Lua string,
and Redis' Lua makes each one byte by byte. A lookup reads each of its band buckets' lists and a
new page rewrites them (22 at the 22 x 6 layout these figures were taken with); at 10M records a
list is about 1,350 bytes (docs/benchmarks.md "Index at scale"), a candidate's verification blob
about 4,400. On a throwaway redis-server, each script does
22 times: ``STRLEN`` of a value of the size (the command alone), ``GET`` of it (the command and a
string of that size), ``string.sub`` of an argument of that size (a string alone, no command), and
nothing (the loop alone). Printed: server time per call (``INFO commandstats``); what a string read
adds to its command (GET - STRLEN) and what a string built costs (sub - loop), per string; then,
from the smallest size to the largest, what each costs per byte. The scripts alternate within each
round and the medians are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import throwaway_redis  # noqa: E402  (benchmarks/pipeline.py)

STRINGS = 22  # band buckets a lookup reads at 22 x 6
SCRIPTS = {
    "loop": f"for i = 1, {STRINGS} do local s = i end return 1",
    "strlen": f"for i = 1, {STRINGS} do redis.call('STRLEN', KEYS[1]) end return 1",
    "get": f"for i = 1, {STRINGS} do redis.call('GET', KEYS[1]) end return 1",
    "sub": f"for i = 1, {STRINGS} do local s = string.sub(ARGV[1], 1 + i % 2) end return 1",
}


def server_us(client: redis.Redis, sha: str, value: bytes, calls: int) -> float:
    """EVALSHA microseconds per call, Redis' own accounting."""
    client.config_resetstat()
    for _ in range(calls):
        client.evalsha(sha, 1, "value", value)
    return float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[16, 256, 1350, 4400])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{STRINGS} strings a call; server time per call, medians of {args.rounds} rounds of {args.calls} calls")
    with throwaway_redis() as url:
        client = redis.Redis.from_url(url)
        shas = {name: client.script_load(source) for name, source in SCRIPTS.items()}
        per_string: dict[int, tuple[float, float]] = {}
        for size in args.sizes:
            value = os.urandom(size)
            client.set("value", value)
            times: dict[str, list[float]] = {name: [] for name in SCRIPTS}
            for _ in range(args.rounds):
                for name, sha in shas.items():
                    # The argument is the value itself, so every script carries the same bytes in.
                    times[name].append(server_us(client, sha, value, args.calls))
            loop, strlen, get, sub = (float(np.median(times[name])) for name in SCRIPTS)
            per_string[size] = ((get - strlen) / STRINGS, (sub - loop) / STRINGS)
            print(
                f"  {size:>6,} B: loop {loop:6.1f} us, STRLEN {strlen:6.1f} us, GET {get:6.1f} us,"
                f" string.sub {sub:6.1f} us; a string read {per_string[size][0]:5.2f} us,"
                f" built {per_string[size][1]:5.2f} us"
            )
        client.close()
    low, high = min(per_string), max(per_string)
    if high > low:
        read, built = ((per_string[high][i] - per_string[low][i]) * 1000 / (high - low) for i in (0, 1))
        print(f"per byte, {low:,} to {high:,} B: a string read {read:.2f} ns, a string built {built:.2f} ns")


if __name__ == "__main__":
    main()
