"""Items judged while a reshard moves the index's slot to another primary, key batch by key batch.

    cd benchmarks
    python reshard.py [--pages 600] [--batch 5] [--pause 0.02] [--retries 60]

Starts a 3-primary cluster of its own (cluster_memory.py), feeds ``--pages`` pages through the
pipeline (tests/pipeline_harness.py: a real SimhashPipeline, 32 items at a time), then starts moving
the index's slot the way ``redis-cli --cluster reshard`` does (IMPORTING / MIGRATING, MIGRATE of
``--batch`` keys at a time, ``--pause`` seconds apart, SETSLOT NODE on every primary) while it feeds
a near copy of each page. Printed: the copies merged and kept, the items passed on unchecked, the
index's failed attempts, how long the migration took, and whether every record of both rounds is
still readable (``records()``) afterwards. ``--retries`` is ``SIMHASH_INDEX_RETRIES``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

from cluster_memory import start_cluster  # benchmarks/cluster_memory.py

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pipeline_harness import feed, open_pipeline, simhash_stats  # noqa: E402  tests/pipeline_harness.py
from texts import article, edited  # noqa: E402  tests/texts.py

from scrapy_simhash.index import open_index  # noqa: E402

PREFIX = "simhash:{reshard}"


def move_slot(nodes: list, batch: int, pause: float, report: list[str]) -> None:
    """The index's slot from its primary to the next one, as a reshard moves it."""
    clients = [node.client() for node in nodes]
    slot = clients[0].execute_command("CLUSTER", "KEYSLOT", f"{PREFIX}:meta")
    source = next(c for c in clients if c.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot))
    target, port = next((c, n.port) for c, n in zip(clients, nodes) if c is not source)
    target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.execute_command("CLUSTER", "MYID"))
    source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.execute_command("CLUSTER", "MYID"))
    started, moved = time.perf_counter(), 0
    while keys := source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
        source.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", *keys)
        moved += len(keys)
        time.sleep(pause)
    for client in clients:
        client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target.execute_command("CLUSTER", "MYID"))
    report.append(f"{moved:,} keys moved in {time.perf_counter() - started:.1f} s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.02)
    parser.add_argument("--retries", type=int, default=60)
    args = parser.parse_args()
    pages = [{"url": f"https://a.example/{i}", "body_text": article(3000 + i, words=150)} for i in range(args.pages)]
    copies = [{"url": f"https://b.example/{i}", "body_text": edited(page["body_text"])} for i, page in enumerate(pages)]
    with tempfile.TemporaryDirectory(prefix="simhash-reshard-") as folder:
        factory, nodes = start_cluster(Path(folder))
        try:
            url = f"redis+cluster://{nodes[0].address}"
            pipeline = await open_pipeline({
                "SIMHASH_INDEX_URL": url, "SIMHASH_KEY_PREFIX": PREFIX, "SIMHASH_MERGE_LOG": "",
                "SIMHASH_INDEX_RETRIES": args.retries, "SIMHASH_INDEX_RETRY_DELAY": 0.1,
            })
            for at in range(0, len(pages), 32):
                await asyncio.gather(*(feed(pipeline, page) for page in pages[at:at + 32]))
            report: list[str] = []
            mover = threading.Thread(target=move_slot, args=(nodes, args.batch, args.pause, report))
            mover.start()
            kept = 0
            for at in range(0, len(copies), 32):
                kept += sum(await asyncio.gather(*(feed(pipeline, copy) for copy in copies[at:at + 32])))
            moving = mover.is_alive()
            mover.join()
            stats = simhash_stats(pipeline)
            layout = pipeline.layout
            await pipeline.close_spider()
            index = open_index(url, key_prefix=PREFIX, layout=layout, create=False)
            await index.open()
            unreadable = 0
            for item in pages + copies:
                try:
                    unreadable += not await index.records(item["url"])
                except Exception:
                    unreadable += 1
            records = await index.count()
            await index.close()
        finally:
            factory.close()
    print(f"slot migration: {report[0]}; {'still moving' if moving else 'done'} when the last copy was judged")
    print(f"copies merged {stats['simhash/duplicates']:,} and kept {kept:,} of {len(copies):,}; "
          f"unchecked {stats['simhash/unchecked']:,}; failed index attempts {stats['simhash/index_errors']:,}")
    print(f"records: {records:,} counted; {unreadable:,} of {len(pages) + len(copies):,} pages unreadable or missing")


if __name__ == "__main__":
    asyncio.run(main())
