"""Does the size of Redis' keyspace slow a lookup? One index on two servers, one padded with keys.

    cd benchmarks
    python keyspace_size.py [--records 1000000] [--pad 9000000] [--rounds 8] [--lookups 400]

On one server an index of N records keeps N page-data keys (``S:d:<write id>``) beside ~80k keys of
its own, so its keyspace is mostly page data: if the main dictionary's size (cache and TLB misses on
each of a lookup's ~54 key lookups) were what makes a lookup at 10M records slower than at 100k,
page data gathered into few hashes would help. Fills ``--records`` random records (index.py's
NewDriver) into a redis-server, copies its RDB file to a second one, adds ``--pad`` small string keys
there (DEBUG POPULATE), then alternates rounds of ``--lookups`` new-page lookups on each. Server time
per FCALL (INFO commandstats); printed per round and the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from index import NewDriver  # benchmarks/index.py


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(directory: Path, port: int) -> tuple[subprocess.Popen, redis.Redis]:
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(directory), "--enable-debug-command", "local"], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_timeout=600)
    for _ in range(600):
        try:
            client.ping()
            return server, client
        except (redis.ConnectionError, redis.BusyLoadingError):
            time.sleep(0.1)
    raise TimeoutError("redis-server did not start")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--pad", type=int, default=9_000_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--lookups", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as padded_dir:
        servers = []
        try:
            plain_port, padded_port = free_port(), free_port()
            server, plain = start(Path(plain_dir), plain_port)
            servers.append(server)
            filler = NewDriver("redis", f"redis://127.0.0.1:{plain_port}/0")
            await filler.open()
            started = time.perf_counter()
            await filler.fill(0, args.records)
            await filler.close()
            print(f"{args.records:,} records filled in {time.perf_counter() - started:.0f} s")
            plain.save()
            shutil.copy(Path(plain_dir) / "dump.rdb", Path(padded_dir) / "dump.rdb")
            server, padded = start(Path(padded_dir), padded_port)
            servers.append(server)
            padded.execute_command("DEBUG", "POPULATE", args.pad, "pad", 10)
            print(f"keys: {plain.dbsize():,} and, padded, {padded.dbsize():,}")
            drivers = [(NewDriver("redis", f"redis://127.0.0.1:{port}/0"), client)
                       for port, client in ((plain_port, plain), (padded_port, padded))]
            for driver, _ in drivers:
                await driver.open()
            rows = []
            for number in range(args.rounds):
                row = []
                for driver, client in drivers:
                    queries = driver.new_queries(10_000_000 + number, args.lookups)
                    client.config_resetstat()
                    for query in queries:
                        await driver.lookup(query)
                    row.append(float(client.info("commandstats")["cmdstat_fcall"]["usec_per_call"]))
                rows.append(row)
                print(f"  round {number}: {row[0]:.1f} us, padded {row[1]:.1f} us ({row[1] / row[0]:.3f}x)")
            for driver, _ in drivers:
                await driver.close()
        finally:
            for server in servers:
                server.kill()
    plain_us, padded_us = (statistics.median(column) for column in zip(*rows))
    print(f"median: {plain_us:.1f} us, padded {padded_us:.1f} us; "
          f"median of the rounds' ratios {statistics.median(p / q for q, p in rows):.3f}x")


if __name__ == "__main__":
    asyncio.run(main())
