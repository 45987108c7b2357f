"""Memory of an index on a Redis Cluster, node by node: does the page data spread over the primaries?

    python benchmarks/cluster_memory.py [--records 1000000] [--corpus PATH]

Starts a Redis Cluster of this run's own on loopback (3 primaries, no replicas: replicas would
only mirror them; tests/redis_servers.py starts the processes), fills ``--records`` simulated
records through a ``redis+cluster://`` index, and prints each primary's ``used_memory`` above its
empty state, its keys (the index's own, under the prefix's hash tag, and page data), and the
max / min ratio of the nodes' memory.

By design the index part (record and group slots, band buckets, id handles: every key under
``P = bench:{index}``) lives in the one slot of the prefix's hash tag, so that a lookup-then-insert is
one atomic script; only the page data (``S:d:<write id>``: verification blob, id, URL, host...)
spreads over the nodes. How even the nodes end up so depends on how large page data is beside the
index's share, and random verification data would get that wrong: each record carries the real
verification blob of a page of the shared corpus (pages taken in turn), and a random sketch (so
records stay distinct, as in benchmarks/index.py). The fill sends what ``RedisIndex.check_and_add``
sends on a cluster, pipelined: the page data written first (HSET, on its node), then the script
call (FCALL, on the index's node).

Printed besides: the page data's bytes sent to each node (the spread of the data alone, from the
hash slot of each key), and the index's own share, estimated as the index node's used_memory less
its page data counted at the memory per byte sent that the other nodes show.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from index import CHUNK, SEED, fingerprint_of, host_of, random_rows, url_of  # noqa: E402  benchmarks/index.py
from pipeline import DEFAULT_CORPUS  # noqa: E402  benchmarks/pipeline.py
from redis_servers import RedisFactory  # noqa: E402  tests/redis_servers.py

from scrapy_simhash.calibration import layout_for  # noqa: E402
from scrapy_simhash.fingerprint import Fingerprinter  # noqa: E402
from scrapy_simhash.index import Record, open_index  # noqa: E402
from scrapy_simhash.index.codec import encode_hashes  # noqa: E402

PRIMARIES = 3
PREFIX = "bench:{index}"
BATCH = 1_000  # records per pipeline round (their HSETs, then their FCALLs)
SLOTS = 16384


def start_cluster(directory: Path) -> tuple[RedisFactory, list]:
    """``PRIMARIES`` cluster-enabled redis-servers joined into a cluster with no replicas."""
    factory = RedisFactory(directory)
    try:
        nodes = [factory.start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
                 for _ in range(PRIMARIES)]
        subprocess.run(["redis-cli", "--cluster", "create", *(n.address for n in nodes), "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while not all(n.client().cluster("info")["cluster_state"] == "ok" for n in nodes):
            if time.monotonic() > deadline:
                raise TimeoutError("the cluster did not become healthy")
            time.sleep(0.1)
    except BaseException:
        factory.close()
        raise
    return factory, nodes


def corpus_blobs(path: Path) -> list[bytes]:
    """The verification blob of every page of the corpus (title and body text), as the index stores it."""
    fingerprinter = Fingerprinter()
    blobs = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            page = json.loads(line)
            signature = fingerprinter.signature(f"{page.get('title', '')}\n{page.get('body_text', '')}")
            if len(signature.hashes):
                blobs.append(encode_hashes(signature.hashes))
    return blobs


async def fill(index, layout, blobs: list[bytes], records: int) -> np.ndarray:
    """Fill the index; return the page data's bytes (field values) sent to each hash slot."""
    payload = np.zeros(SLOTS, dtype=np.int64)
    data_commands = index.client.pipeline  # a cluster pipeline sends each command to its key's node
    for start in range(0, records, BATCH):
        stop = min(start + BATCH, records)
        batch = []
        for i, row in zip(range(start, stop), random_rows(SEED, start, stop, 8 + layout.size)):
            url = url_of("page", i)
            record = Record(id=url, url=url, fingerprint=fingerprint_of(row), host=host_of(url))
            record._sketch = (layout, row[8:].tobytes())  # a random sketch: distinct records
            record._blob = blobs[i % len(blobs)]  # a real page's verification data
            batch.append(record)
        async with data_commands(transaction=False) as pipe:
            for record in batch:
                fields = dict(zip([b"s", b"i", b"u", b"h", b"t", b"c"], index._page_data(record)))
                pipe.hset(index._data_key(record.write_id), mapping=fields)
                payload[key_slot(index._data_key(record.write_id))] += sum(map(len, fields.values()))
            await pipe.execute()
        async with data_commands(transaction=False) as pipe:
            for record in batch:
                # What RedisIndex.check_and_add sends after the data (no page data in the call itself).
                pipe.execute_command("FCALL", index._function, 1, *index._route, index.prefix, "check_add", 0,
                                     record.sketch(layout), 1, *index._record_args(record), *[""] * 6)
            replies = await pipe.execute()
        if any(index._lookup_reply(reply[0])[1] == 0 for reply in replies):
            raise RuntimeError("a random record found candidates: the fill is not what it should be")
        if stop % (CHUNK * 10) == 0 or stop == records:
            print(f"  {stop:,} records", flush=True)
    return payload


def keys(client: redis.Redis, pattern: str) -> int:
    return sum(1 for _ in client.scan_iter(match=pattern, count=10_000))


def slot_owners(client: redis.Redis) -> np.ndarray:
    """The port of the primary serving each hash slot."""
    owners = np.zeros(SLOTS, dtype=np.int64)
    for start, end, primary, *_ in client.execute_command("CLUSTER SLOTS"):
        owners[start : end + 1] = int(primary[1])
    return owners


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    blobs = corpus_blobs(args.corpus)
    print(f"{len(blobs)} corpus pages: verification blobs of {np.mean([len(b) for b in blobs]):,.0f} bytes on "
          f"average (median {np.median([len(b) for b in blobs]):,.0f}), one per record in turn; random sketches")
    layout = layout_for(0.82, 0.99, None)
    with tempfile.TemporaryDirectory(prefix="simhash-cluster-") as folder:
        factory, nodes = start_cluster(Path(folder))
        try:
            clients = [node.client() for node in nodes]
            empty = [c.info("memory")["used_memory"] for c in clients]
            index = open_index(f"redis+cluster://{nodes[0].address}", layout=layout, key_prefix=PREFIX)
            await index.open()
            started = time.perf_counter()
            payload = await fill(index, layout, blobs, args.records)
            elapsed = time.perf_counter() - started
            records = await index.count()
            await index.close()
            print(f"{records:,} records through {PREFIX!r} in {elapsed:,.0f} s ({records / elapsed:,.0f}/s)\n")
            owners = slot_owners(clients[0])
            tag = f"{PREFIX.partition('{')[2].partition('}')[0]}"
            index_port = int(owners[key_slot(tag.encode())])
            tagged_pattern = PREFIX.replace("{", "[{]").replace("}", "[}]") + ":*"
            data_pattern = PREFIX.replace("{", "").replace("}", "") + ":d:*"
            rows = []
            for node, client, base in zip(nodes, clients, empty):
                memory = client.info("memory")["used_memory"] - base
                data = int(payload[owners == node.port].sum())
                rows.append((node, memory, data, keys(client, tagged_pattern), keys(client, data_pattern)))
                client.close()
            # Memory per payload byte on the nodes that hold page data only, to tell the index node's two parts apart.
            others = [(m, d) for node, m, d, *_ in rows if node.port != index_port]
            per_byte = sum(m for m, _ in others) / sum(d for _, d in others)
            print(f"  {'node':16s} {'used_memory':>14s} {'B/record':>9s} {'index keys':>11s} {'data keys':>10s}"
                  f" {'page data sent':>15s}")
            for node, memory, data, tagged, data_keys in rows:
                mark = "  <- the index's slot" if node.port == index_port else ""
                print(f"  {node.address:16s} {memory:>14,d} {memory / records:>9.0f} {tagged:>11,d} {data_keys:>10,d}"
                      f" {data:>15,d}{mark}")
            used = [memory for _, memory, *_ in rows]
            data = [d for _, _, d, *_ in rows]
            index_part = next(m - d * per_byte for node, m, d, *_ in rows if node.port == index_port)
            print(f"\n  total {sum(used):,} bytes, {sum(used) / records:,.0f} per record "
                  f"(page data sent: {sum(data) / records:,.0f} per record)")
            print(f"  used_memory max / min over the primaries: {max(used) / min(used):.2f}")
            print(f"  page data sent, max / min over the primaries: {max(data) / min(data):.2f}")
            print(f"  the index's own keys (one slot, one node): ~{index_part:,.0f} bytes, "
                  f"~{index_part / records:,.0f} per record (that node's used_memory less its page data at "
                  f"the other nodes' {per_byte:.2f} bytes of memory per byte sent)")
        finally:
            factory.close()


if __name__ == "__main__":
    asyncio.run(main())
