"""Merge-log writing: records/s and bytes per record, Scrapy's exporter (the baseline) against our writer.

Realistic records: ids and URLs from the shared corpus, random 64-bit fingerprints, one to three
records per item (rejected candidates, then the merge), the rule with its layout as JSON. Both
writers write the same new-schema records, item by item, interleaved, best of ``--rounds``:

* baseline: ``JsonLinesItemExporter`` on a binary file, flushed after each item (the earlier writer);
* ours: ``FileMergeLog.write`` (compact JSON, one ``os.write`` under ``flock``, torn-tail check).

Bytes per record: the earlier schema (canonical and duplicate only, the layout as a ``repr``) as the
exporter wrote it, against the new schema as ours writes it; with ``--redis-url``, also a stream's
``MEMORY USAGE`` per entry for both schemas (the earlier encoding: every value a string).

    python benchmarks/mergelog.py [--corpus /work/shared/corpus-scrapy-docs.jsonl] [--items 20000]
        [--redis-url redis://127.0.0.1:6379/9]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis
from scrapy.exporters import JsonLinesItemExporter

from scrapy_simhash.mergelog import FIELDS, Rule, merge_record, open_merge_log
from scrapy_simhash.mergelog.jsonlines import encode_lines
from scrapy_simhash.mergelog.stream import stream_fields

LAYOUT = {"kind": "minhash", "bands": 16, "rows": 4, "value_bits": 8}
RULE = Rule(jaccard_threshold=0.82, layout=LAYOUT, shingle_width=4, weighting="frequency",
            fingerprint_version=2, boilerplate_version=3)
EARLIER_RULE = {"max_distance": 7, "jaccard_threshold": 0.82, "weighting": "frequency", "shingle_width": 4,
                "boilerplate_version": 3, "layout": "BlockLayout(bits=64, bands=8, multiprobe=False)"}
EARLIER_FIELDS = ("timestamp", "decision", "canonical_id", "canonical_url", "duplicate_id", "duplicate_url",
                  "canonical_fingerprint", "duplicate_fingerprint", "distance", "jaccard", "rule")


def items(urls: list[str], count: int, rng: random.Random) -> list[list[dict[str, Any]]]:
    """``count`` items' records: 0-2 rejected candidates, then the merge; ids are URLs (the default)."""
    out = []
    for _ in range(count):
        duplicate = rng.choice(urls)
        records = []
        for decision in ["rejected"] * rng.randint(0, 2) + ["merged"]:
            canonical, matched = rng.choice(urls), rng.choice(urls)
            records.append(merge_record(
                decision=decision, canonical_id=canonical, canonical_url=canonical, matched_id=matched,
                matched_url=matched, matched_fingerprint=rng.getrandbits(64), duplicate_id=duplicate,
                duplicate_url=duplicate, duplicate_fingerprint=rng.getrandbits(64), distance=rng.randint(0, 20),
                jaccard=rng.random(), retention="default", rule=RULE,
            ))
        out.append(records)
    return out


def earlier(record: dict[str, Any]) -> dict[str, Any]:
    """The same decision in the earlier schema."""
    return {
        "timestamp": record["timestamp"], "decision": record["decision"],
        "canonical_id": record["canonical_id"], "canonical_url": record["canonical_url"],
        "duplicate_id": record["duplicate_id"], "duplicate_url": record["duplicate_url"],
        "canonical_fingerprint": record["matched_fingerprint"],
        "duplicate_fingerprint": record["duplicate_fingerprint"],
        "distance": record["distance"], "jaccard": record["jaccard"], "rule": dict(EARLIER_RULE),
    }


def encoding_us(records: list[dict], rounds: int) -> tuple[float, float]:
    """Microseconds per record to encode only: the exporter into memory, and our encoder."""
    buffer = io.BytesIO()
    exporter = JsonLinesItemExporter(buffer, ensure_ascii=False, fields_to_export=FIELDS, export_empty_fields=True)
    exporter.start_exporting()
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for n, encode in enumerate((exporter.export_item, lambda record: encode_lines([record]))):
            buffer.seek(0)
            buffer.truncate()
            started = time.perf_counter()
            for record in records:
                encode(record)
            best[n] = min(best[n], (time.perf_counter() - started) / len(records) * 1e6)
    return best[0], best[1]


def exporter_run(path: Path, batches: list[list[dict]], fields: tuple[str, ...]) -> float:
    """Seconds to write every item through the exporter, flushed per item (the earlier writer)."""
    with open(path, "wb") as file:
        exporter = JsonLinesItemExporter(file, ensure_ascii=False, fields_to_export=fields, export_empty_fields=True)
        exporter.start_exporting()
        started = time.perf_counter()
        for records in batches:
            for record in records:
                exporter.export_item(record)
            file.flush()
        elapsed = time.perf_counter() - started
        exporter.finish_exporting()
    return elapsed


async def writer_run(path: Path, batches: list[list[dict]]) -> float:
    path.unlink(missing_ok=True)
    log = open_merge_log(str(path), "unused")
    started = time.perf_counter()
    for records in batches:
        await log.write(records)
    elapsed = time.perf_counter() - started
    await log.close()
    return elapsed


def stream_bytes(url: str, records: list[dict], encode) -> float:
    """MEMORY USAGE of a stream holding ``records`` (encoded by ``encode``), per entry."""
    key = f"simhash-bench:{uuid.uuid4().hex[:12]}"
    with redis.Redis.from_url(url) as client:
        try:
            with client.pipeline(transaction=False) as pipe:
                for record in records:
                    pipe.xadd(key, encode(record))
                pipe.execute()
            return client.memory_usage(key, samples=0) / client.xlen(key)
        finally:
            client.delete(key)


def earlier_stream_fields(record: dict[str, Any]) -> dict[str, str]:
    return {k: json.dumps(v, sort_keys=True) if isinstance(v, dict) else str(v) for k, v in record.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/shared/corpus-scrapy-docs.jsonl")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis-url", help="also measure stream bytes per entry on this Redis")
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as lines:
        urls = [json.loads(line)["url"] for line in lines]
    batches = items(urls, args.items, random.Random(1))
    records = [record for batch in batches for record in batch]
    print(f"{len(records):,} records in {len(batches):,} items ({len(records) / len(batches):.2f} per item)")

    base_us, ours_us = encoding_us(records, args.rounds)
    print(f"encode only           exporter {base_us:>10.1f} us/record     ours {ours_us:>10.1f} us/record"
          f"   ratio {base_us / ours_us:.2f}x faster")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as directory:
        base, ours = Path(directory) / "exporter.jsonl", Path(directory) / "ours.jsonl"
        base_s, ours_s = [], []
        for _ in range(args.rounds):  # interleaved, so that both see the same machine
            base_s.append(exporter_run(base, batches, FIELDS))
            ours_s.append(asyncio.run(writer_run(ours, batches)))
        base_rate, ours_rate = len(records) / min(base_s), len(records) / min(ours_s)
        print(f"write, same records   exporter {base_rate:>10,.0f} records/s   ours {ours_rate:>10,.0f} records/s"
              f"   ratio {ours_rate / base_rate:.2f}x faster")
        print(f"   per item           exporter {min(base_s) / len(batches) * 1e6:>10.1f} us        "
              f"   ours {min(ours_s) / len(batches) * 1e6:>10.1f} us")
        exporter_run(base, [[earlier(r) for r in batch] for batch in batches], EARLIER_FIELDS)
        old_bytes, new_bytes = base.stat().st_size / len(records), ours.stat().st_size / len(records)
        print(f"file bytes/record     earlier schema (exporter) {old_bytes:.0f}   new schema (ours) {new_bytes:.0f}"
              f"   ratio {new_bytes / old_bytes:.2f}")
    if args.redis_url:
        old_entry = stream_bytes(args.redis_url, [earlier(r) for r in records], earlier_stream_fields)
        new_entry = stream_bytes(args.redis_url, records, stream_fields)
        print(f"stream bytes/entry    earlier schema {old_entry:.0f}   new schema {new_entry:.0f}"
              f"   ratio {new_entry / old_entry:.2f}   (MEMORY USAGE / XLEN)")


if __name__ == "__main__":
    main()
