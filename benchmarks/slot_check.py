"""What a cluster index pays per function call to refuse calls while its slot moves (a reshard).

    python benchmarks/slot_check.py [--records 20000] [--calls 500] [--rounds 10]

On a Redis Cluster every call of the index's function first asks whether its slot is migrating to
or importing from another node (redis.lua ``slot_moving``: CLUSTER KEYSLOT, CLUSTER NODES, a search
of this node's line). Starts a 3-primary cluster of its own (cluster_memory.py), fills ``--records``
random records through a ``redis+cluster://`` index, then on the index's node alternates, round by
round: ``--calls`` calls of a function running that check alone, the same number of a function doing
nothing, and ``--calls`` lookups of new random records through the index (each one function call,
sent one at a time). Server time per call is INFO commandstats for FCALL. Printed: the medians of the
rounds, the check's cost (check less nothing) and its share of a lookup's server time per round.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
from pathlib import Path

import numpy as np
from cluster_memory import start_cluster  # benchmarks/cluster_memory.py
from redis.crc import key_slot

from scrapy_simhash.calibration import layout_for
from scrapy_simhash.index import Record, open_index

PREFIX = "bench:{index}"
REDIS_LUA = Path(__file__).resolve().parents[1] / "scrapy_simhash" / "index" / "redis.lua"


def check_library() -> str:
    """The check as redis.lua has it, in a library of its own beside a function that does nothing."""
    check = re.search(r"local function slot_moving\(\).*?\nend\n", REDIS_LUA.read_text(), re.S).group(0)
    return (
        "#!lua name=slotcheck\nlocal P\n" + check
        + "redis.register_function('slot_check', function(_, args) P = args[1]; return slot_moving() and 1 or 0 end)\n"
        + "redis.register_function('nothing', function(_, args) P = args[1]; return 0 end)\n"
    )


def random_record(rng: np.random.Generator, number: int) -> Record:
    hashes = np.unique(rng.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32))
    return Record(id=f"r{number}", url=f"https://example.com/{number}", fingerprint=int(rng.integers(0, 2**63)),
                  hashes=hashes)


def fcall_us(client) -> float:
    stats = client.info("commandstats").get("cmdstat_fcall", {"usec_per_call": 0.0})
    return float(stats["usec_per_call"])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    layout = layout_for(0.82, 0.99, None)
    with tempfile.TemporaryDirectory(prefix="simhash-slot-check-") as folder:
        factory, nodes = start_cluster(Path(folder))
        try:
            index = open_index(f"redis+cluster://{nodes[0].address}", layout=layout, key_prefix=PREFIX)
            await index.open()
            for start in range(0, args.records, 64):
                await asyncio.gather(*(index.check_and_add(random_record(rng, n))
                                       for n in range(start, min(start + 64, args.records))))
            slot = key_slot(f"{PREFIX}:meta".encode())
            (node,) = [n for n in nodes if n.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)]
            client = node.client()
            client.function_load(check_library(), replace=True)
            rows = []
            number = args.records
            for _ in range(args.rounds):
                row = []
                for function in ("slot_check", "nothing"):
                    client.config_resetstat()
                    for _ in range(args.calls):
                        client.fcall(function, 1, f"{PREFIX}:meta", PREFIX)
                    row.append(fcall_us(client))
                client.config_resetstat()
                for _ in range(args.calls):
                    await index.check_and_add(random_record(rng, number))
                    number += 1
                row.append(fcall_us(client))
                rows.append(row)
            await index.close()
        finally:
            factory.close()
    check, nothing, lookup = (statistics.median(column) for column in zip(*rows))
    share = statistics.median((c - n) / lookup_us for c, n, lookup_us in rows)
    print(f"{args.records:,} records, 3 primaries; server time per FCALL, median of {args.rounds} rounds "
          f"of {args.calls} calls each:")
    print(f"  slot check alone      {check:7.2f} us")
    print(f"  a function doing nothing {nothing:4.2f} us")
    print(f"  the check's own cost  {check - nothing:7.2f} us")
    print(f"  a lookup (check included) {lookup:5.1f} us: the check is {share:.3f}x of it (median of rounds)")


if __name__ == "__main__":
    asyncio.run(main())
