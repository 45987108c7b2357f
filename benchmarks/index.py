"""The index at scale: server time and rate of lookups, and bytes per record.

    python benchmarks/index.py [--sizes 100000,1000000,10000000] [--lookups 2000] [--near 200]
                               [--backends redis,sqlite] [--sqlite-max 1000000]
                               [--base-source DIR [--rounds 10]]

Fills each backend (a redis-server of this run's own on a free port, a SQLite file in a temporary
folder) through 100k, 1M and 10M records, and at each size:

* looks up ``--lookups`` new random records one at a time (``check_and_add``, which inserts them, as
  a crawl does with a page it has not seen) and ``--near`` near-duplicates of stored records (found:
  candidates, nothing inserted), and prints the client's lookups/s and latency, and on Redis the
  server's time per lookup, read two ways: INFO commandstats ``usec_per_call`` of FCALL (EVALSHA
  for a version before Redis Functions: the script's run) and the redis-server process's CPU time
  (INFO ``used_cpu_*``) over the lookups / N, which also counts reading and writing the sockets;
* prints bytes per record: Redis ``used_memory`` above the empty server's / records, and the SQLite
  file's size after a WAL checkpoint / records.

The records are simulated, since filling real pages is far too slow on a small machine: random
sketches (the default layout's 176 random bytes, set on the Record directly: no verification hashes, so each record
stores an empty verification blob; a real page adds its blob, ~2.9 bytes per shingle hash, in both
versions alike) and random 64-bit fingerprints, with a URL-like id of ~40 characters. A random
sketch shares no band with any other, so the buckets a new record reads are empty: this measures
the index's cost at its size, not candidate verification. A near-duplicate is a stored record's
sketch with 8 of its bytes changed (Jaccard estimate ~0.95; ~0.94 of 22 x 6's 132 bytes). The
fill goes the fastest honest way: the same FCALL calls, with the same arguments, as
``RedisIndex.check_and_add`` sends, many pipelined (in SQLite the index's own transaction per
record, on its thread, without asyncio hops).

Runtime: the Redis fill is bound by the server (~0.3 ms of script time a record for this version,
~0.2 ms for the baseline's ``add``): about 3,000 records a second on 2 cores, so
``--sizes 100000,1000000,10000000`` takes about an hour. SQLite stops at ``--sqlite-max`` records
(default 1M: its fill runs at a few thousand records per second).

``--base-source DIR`` compares this version with another (a checkout of another commit whose index
this one's can be read by: same key schema, layout and fingerprint version) on Redis, in the same
run: at each size, after the figures above, ``--rounds`` rounds in which this version and the one
in DIR each look up ``--lookups`` new records and ``--near`` near-duplicates on the index this run
filled, in turn, each client a process of its own with its own Functions library; printed are the
median and quartiles of the rounds' ratios (this / base) of the server's CPU time and the script's
time per lookup. Two versions filled and measured in separate runs, minutes apart, differ by more
than their code does on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import redis

SIZES = (100_000, 1_000_000, 10_000_000)
CHUNK = 10_000  # records are generated in chunks, each from its own seed: any record can be made again
SEED, QUERY_SEED, NEAR_SEED = 1, 2, 3
FILL_BATCH = 500  # script calls per pipeline; FILL_PIPELINES of them in flight
FILL_PIPELINES = 4
SCRIPT_CALLS = ("cmdstat_fcall", "cmdstat_evalsha")  # this version's function; a version before it, a script
NEAR_BYTES = 8  # sketch bytes a near-duplicate changes


def url_of(kind: str, i: int) -> str:
    """A URL-like id: a few hundred hosts, so ids look like a crawl's."""
    return f"https://site{i % 499}.example/{kind}/{i:08d}"


def host_of(url: str) -> str:
    return url.split("/")[2]


def random_rows(seed: int, start: int, stop: int, width: int) -> np.ndarray:
    """Rows ``start..stop`` of an endless table of random bytes (``width`` per row), made chunk by chunk."""
    out = []
    for chunk in range(start // CHUNK, (stop - 1) // CHUNK + 1):
        rows = np.random.default_rng([seed, chunk]).integers(0, 256, (CHUNK, width), dtype=np.uint8)
        lo, hi = max(start - chunk * CHUNK, 0), min(stop - chunk * CHUNK, CHUNK)
        out.append(rows[lo:hi])
    return np.concatenate(out) if out else np.empty((0, width), np.uint8)


def fingerprint_of(row: np.ndarray) -> int:
    return int.from_bytes(row[:8].tobytes(), "big")


class Driver(Protocol):
    """One version of the index, on one backend, as the harness drives it."""

    label: str

    async def open(self) -> None: ...

    async def fill(self, start: int, stop: int) -> int:
        """Add records ``start..stop``; return how many found candidates instead (0 for random ones)."""

    def new_queries(self, size: int, count: int, batch: int = 0) -> list:
        """``count`` new random records to look up at ``size`` (made before the clock starts), the
        ``batch``-th such set: each batch's records are others'."""

    def near_queries(self, size: int, targets: list[int]) -> list:
        """A near-duplicate of each stored record of ``targets``."""

    async def lookup(self, query: Any) -> bool:
        """One lookup (a new record is added); True when a near-duplicate's target is a candidate."""

    async def count(self) -> int: ...

    async def close(self) -> None: ...


# -- measuring -------------------------------------------------------------------------------------


def server_cpu(admin: redis.Redis) -> float:
    cpu = admin.info("cpu")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"]


def server_mark(admin: redis.Redis) -> float:
    """Start counting the server's work: its command statistics reset, its CPU time read."""
    admin.config_resetstat()
    return server_cpu(admin)


def server_work(admin: redis.Redis, mark: float, lookups: int) -> dict:
    """The server's time and commands per lookup since ``mark``."""
    out = {"cpu_us": (server_cpu(admin) - mark) / lookups * 1e6}
    stats = admin.info("commandstats")
    script = max((stats.get(name, {"calls": 0, "usec": 0}) for name in SCRIPT_CALLS), key=lambda s: s["calls"])
    out["script_us"] = script["usec"] / max(script["calls"], 1)
    out["script_calls_per_lookup"] = script["calls"] / lookups
    # Commands a script runs are counted too (inside its time): the work a lookup asks of the server.
    skip = (*SCRIPT_CALLS, "cmdstat_info", "cmdstat_config")
    inner = sum(s["calls"] for name, s in stats.items() if not name.startswith(skip))
    out["commands_per_lookup"] = inner / lookups
    return out


async def timed(calls: list[Callable[[], Awaitable[Any]]], admin: redis.Redis | None) -> tuple[dict, list]:
    """Run ``calls`` one at a time: client rate and latency, and the server's time when on Redis."""
    mark = server_mark(admin) if admin is not None else 0.0
    latencies, answers = [], []
    started = time.perf_counter()
    for call in calls:
        at = time.perf_counter()
        answers.append(await call())
        latencies.append(time.perf_counter() - at)
    wall = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    out = {"n": len(calls), "per_s": len(calls) / wall, "p50_ms": float(np.percentile(ms, 50)),
           "p99_ms": float(np.percentile(ms, 99))}
    if admin is not None:
        out |= server_work(admin, mark, len(calls))
    return out, answers


def sqlite_bytes(path: Path) -> int:
    """The database file's size once its WAL is copied in (the WAL is then empty)."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def near_targets(size: int, count: int, batch: int = 0) -> list[int]:
    """``count`` stored records of an index of ``size`` to look near-duplicates of up, the ``batch``-th set."""
    rng = np.random.default_rng([NEAR_SEED, size, *([batch] if batch else [])])
    return [int(t) for t in rng.integers(0, size, count)]


async def measure(
    driver: Driver, backend: str, location: str, sizes: list[int], lookups: int, near: int,
    report: Callable[[dict], None], base: Path | None = None, rounds: int = 0,
) -> None:
    """Fill ``driver`` through ``sizes``, measuring at each; ``report`` gets one dict per size. On
    Redis, with ``base``, also ``rounds`` rounds of this version against the one at ``base``."""
    admin = redis.Redis.from_url(location) if backend == "redis" else None
    await driver.open()
    empty = admin.info("memory")["used_memory"] if admin else 0
    filled = 0
    for size in sizes:
        started = time.perf_counter()
        found = await driver.fill(filled, size)
        fill_rate = (size - filled) / (time.perf_counter() - started)
        filled = size
        records = await driver.count()  # the fill's, and what earlier lookups added
        if admin:
            used = admin.info("memory")["used_memory"] - empty
        else:
            used = sqlite_bytes(Path(location))
        queries = driver.new_queries(size, lookups)
        new, _ = await timed([lambda q=q: driver.lookup(q) for q in queries], admin)
        queries = driver.near_queries(size, near_targets(size, near))
        dup, hits = await timed([lambda q=q: driver.lookup(q) for q in queries], admin)
        report({"label": driver.label, "backend": backend, "size": size, "records": records,
                "fill_per_s": fill_rate, "fill_candidates": found, "bytes_per_record": used / records,
                "new": new, "near": dup, "near_found": sum(hits) / max(near, 1)})
        if base is not None and admin is not None:
            against_base(admin, location, driver.index.session, size, lookups, near, rounds, base)
    await driver.close()
    if admin:
        admin.close()


def show(r: dict) -> None:
    """One size's figures, as they come."""
    new, near = r["new"], r["near"]
    line = (f"  {r['label']:7s} {r['backend']:6s} {r['size']:>11,d}  fill {r['fill_per_s']:7,.0f}/s  "
            f"{r['bytes_per_record']:6.0f} B/record  new: {new['per_s']:6,.0f}/s p50 {new['p50_ms']:6.3f} ms "
            f"p99 {new['p99_ms']:6.3f} ms")
    if "script_us" in new:
        line += f"  server {new['script_us']:7.1f} us (script) {new['cpu_us']:7.1f} us (cpu)"
        if "commands_per_lookup" in new:
            line += f" {new['commands_per_lookup']:5.0f} commands"
    line += f"  | near: {near['per_s']:6,.0f}/s found {r['near_found']:5.1%}"
    if "script_us" in near:
        line += f" server {near['script_us']:7.1f} us (script) {near['cpu_us']:7.1f} us (cpu)"
        if "commands_per_lookup" in near:
            line += f" {near['commands_per_lookup']:5.0f} commands"
    print(line, flush=True)


@contextmanager
def batched(index: Any) -> Iterator[None]:
    """One transaction for many of a SQLite index's steps: each step's own ``BEGIN IMMEDIATE`` ..
    ``COMMIT`` would write every page it touched to the WAL again, which bounds a fill at a few
    hundred records per second. The statements, and so the file, are the same."""
    db = index._db
    db.execute("BEGIN IMMEDIATE")
    index._transaction = lambda: nullcontext(db)  # shadows the method: the steps run in this transaction
    try:
        yield
    finally:
        del index._transaction
        db.execute("COMMIT")


# -- this version ----------------------------------------------------------------------------------


class NewDriver:
    """The current package: the calibrated default layout (14 bands x 6 rows of a 176-byte sketch at
    Jaccard 0.82, recall 0.99)."""

    label = "new"

    def __init__(self, backend: str, location: str, session: bytes | None = None) -> None:
        from scrapy_simhash.calibration import layout_for
        from scrapy_simhash.index import open_index

        self.layout = layout_for(0.82, 0.99, None)
        url = location if backend == "redis" else f"sqlite:///{location}"
        self.backend = backend
        self.index = open_index(url, layout=self.layout, key_prefix="bench:{index}", session=session)

    def _record(self, url: str, row: np.ndarray):
        from scrapy_simhash.index import Record

        record = Record(id=url, url=url, fingerprint=fingerprint_of(row), host=host_of(url))
        record.keep_sketch(self.layout, row[8:].tobytes())  # a random sketch in place of hashed text
        return record

    def _records(self, start: int, stop: int) -> list:
        rows = random_rows(SEED, start, stop, 8 + self.layout.size)
        return [self._record(url_of("page", i), row) for i, row in zip(range(start, stop), rows)]

    async def open(self) -> None:
        await self.index.open()

    async def fill(self, start: int, stop: int) -> int:
        found = 0
        for at in range(start, stop, CHUNK):
            records = self._records(at, min(at + CHUNK, stop))
            if self.backend == "sqlite":
                found += await self.index._run(self._fill_sqlite, records)
            else:
                batches = [records[i : i + FILL_BATCH] for i in range(0, len(records), FILL_BATCH)]
                for i in range(0, len(batches), FILL_PIPELINES):
                    replies = await asyncio.gather(*(self._fill_redis(b) for b in batches[i : i + FILL_PIPELINES]))
                    found += sum(self.index._lookup_reply(reply[0])[1] == 0 for batch in replies for reply in batch)
        return found

    def _fill_sqlite(self, records: list) -> int:
        """On the index's thread: ``check_and_add``'s own statements for each record, committed together."""
        with batched(self.index):
            return sum(self.index._check_and_add(r, r.sketch(self.layout), 0)[0].added is None for r in records)

    async def _fill_redis(self, records: list) -> list:
        """The FCALL calls ``RedisIndex.check_and_add`` makes for these records, pipelined."""
        index = self.index
        data = [await index._write_data(r) for r in records]
        async with index.client.pipeline(transaction=False) as pipe:
            for r, page in zip(records, data):
                pipe.fcall(index._function, len(index._route), *index._route, index.prefix, "check_add", 0,
                           r.sketch(self.layout), 1, *index._record_args(r), *page)
            return await pipe.execute()

    def new_queries(self, size: int, count: int, batch: int = 0) -> list:
        first = batch * count
        rows = random_rows(QUERY_SEED + size, first, first + count, 8 + self.layout.size)
        return [(self._record(url_of(f"new-{size}", n), row), None) for n, row in enumerate(rows, first)]

    def near_queries(self, size: int, targets: list[int]) -> list:
        queries = []
        for n, target in enumerate(targets):
            stored = random_rows(SEED, target, target + 1, 8 + self.layout.size)[0]
            rng = np.random.default_rng([NEAR_SEED, size, n])
            row = stored.copy()
            at = 8 + rng.choice(self.layout.size, NEAR_BYTES, replace=False)
            row[at] ^= rng.integers(1, 256, NEAR_BYTES, dtype=np.uint8)  # a different byte at each
            row[:8] = rng.integers(0, 256, 8, dtype=np.uint8)
            queries.append((self._record(url_of(f"near-{size}", n), row), fingerprint_of(stored)))
        return queries

    async def lookup(self, query: tuple) -> bool:
        record, target = query
        lookup = await self.index.check_and_add(record)
        return any(c.fingerprint == target for c in lookup.candidates)

    async def count(self) -> int:
        return await self.index.count()

    async def close(self) -> None:
        await self.index.close()


# -- against another version, on the same server ---------------------------------------------------


async def serve(url: str, session: str) -> None:
    """Look up what the parent asks on stdin, one JSON line at a time, with the scrapy_simhash this
    process imports (PYTHONPATH): the lookup side of :func:`against_base`. The session is the
    fill's, so that stored records are the client's own, as in the measurement above."""
    import scrapy_simhash

    logging.disable(logging.WARNING)  # the parent has said what opening the index says
    driver = NewDriver("redis", url, bytes.fromhex(session))
    await driver.open()
    print(json.dumps({"package": str(Path(scrapy_simhash.__file__).parent)}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        if ask["kind"] == "new":
            queries = driver.new_queries(ask["size"], ask["count"], ask["batch"])
        else:
            queries = driver.near_queries(ask["size"], near_targets(ask["size"], ask["count"], ask["batch"]))
        print(json.dumps({"ready": len(queries)}), flush=True)
        sys.stdin.readline()  # the parent has started counting the server's work
        hits = [await driver.lookup(q) for q in queries]
        print(json.dumps({"found": sum(hits)}), flush=True)
    await driver.close()


class Version:
    """A lookup client in a process of its own, importing scrapy_simhash from ``source`` (None: as
    this process does)."""

    def __init__(self, url: str, session: bytes, source: Path | None) -> None:
        env = None
        if source is not None:
            path = os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))
            env = os.environ | {"PYTHONPATH": path}
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", url, session.hex()], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.package = self._read()["package"]

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def _read(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the lookup process ended (status {self.process.wait()}): its message is above")
        return json.loads(line)

    def lookups(self, admin: redis.Redis, ask: dict) -> dict:
        """The server's work per lookup for the lookups ``ask`` names, made before it is counted."""
        self._send(json.dumps(ask))
        self._read()
        mark = server_mark(admin)
        self._send("go")
        found = self._read()["found"]
        return server_work(admin, mark, ask["count"]) | {"found": found / ask["count"]}

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def against_base(admin: redis.Redis, url: str, session: bytes, size: int, lookups: int, near: int, rounds: int,
                 base: Path) -> None:
    """This version's server time per lookup against the version at ``base``, both reading the index
    this run filled: ``rounds`` rounds, each with ``lookups`` new records and ``near`` near-duplicates
    looked up by each version in turn (this, base; then base, this), each in a process and a Functions
    library of its own. Printed: the median and quartiles of the rounds' ratios, since two versions
    measured minutes apart on a shared machine differ by more than their code does."""
    sides = {"this": Version(url, session, None), "base": Version(url, session, base)}
    load = os.getloadavg()[0]
    got: dict[tuple[str, str], list[dict]] = {(side, kind): [] for side in sides for kind in ("new", "near")}
    for turn in range(rounds):
        for n, side in enumerate(["this", "base"] if turn % 2 == 0 else ["base", "this"]):
            for kind, count, batch in (("new", lookups, 1 + 2 * turn + n), ("near", near, 1 + turn)):
                if count:
                    ask = {"kind": kind, "size": size, "count": count, "batch": batch}
                    got[(side, kind)].append(sides[side].lookups(admin, ask))
    for version in sides.values():
        version.close()
    print(f"  {size:>11,d}  this ({sides['this'].package}) / base ({sides['base'].package}), {rounds} rounds, "
          f"load {load:.1f} -> {os.getloadavg()[0]:.1f}:", flush=True)
    for kind in ("new", "near"):
        this, other = got[("this", kind)], got[("base", kind)]
        if not this:
            continue

        def median(rows: list[dict], figure: str) -> float:
            return statistics.median(row[figure] for row in rows)

        line = f"    {kind:4s}"
        for figure in ("cpu_us", "script_us"):
            ratios = [a[figure] / b[figure] for a, b in zip(this, other) if b[figure]]
            low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
            line += (f"  {figure.removesuffix('_us')} {statistics.median(ratios):5.3f}x [{low:.2f}-{high:.2f}] "
                     f"({median(this, figure):.1f} / {median(other, figure):.1f} us)")
        line += (f"  commands {median(this, 'commands_per_lookup'):.1f} / {median(other, 'commands_per_lookup'):.1f}"
                 f"  found {median(this, 'found'):.0%} / {median(other, 'found'):.0%}")
        print(line, flush=True)


# -- main ------------------------------------------------------------------------------------------


@contextmanager
def location(backend: str, name: str) -> Iterator[str]:
    if backend == "redis":
        from pipeline import throwaway_redis  # benchmarks/pipeline.py

        with throwaway_redis() as url:
            yield url
    else:
        with tempfile.TemporaryDirectory(prefix="simhash-index-") as folder:
            yield str(Path(folder) / f"{name}.db")


def ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}x" if b else "   n/a"


def summary(results: dict[str, list[dict]]) -> None:
    print("\nSummary (simulated records: random sketches / fingerprints, no verification hashes)")
    for backend, rs in results.items():
        print(f"\n{backend}: per size")
        rows = [("bytes per record", lambda r: r["bytes_per_record"], "{:9.0f}"),
                ("new-record lookups/s (client)", lambda r: r["new"]["per_s"], "{:9,.0f}"),
                ("near-duplicate lookups/s", lambda r: r["near"]["per_s"], "{:9,.0f}"),
                ("near-duplicates found", lambda r: 100 * r["near_found"], "{:8.1f}%")]
        if backend == "redis":
            rows[1:1] = [("server us/lookup, script", lambda r: r["new"]["script_us"], "{:9.1f}"),
                         ("server us/lookup, cpu", lambda r: r["new"]["cpu_us"], "{:9.1f}"),
                         ("near: server us, script", lambda r: r["near"]["script_us"], "{:9.1f}")]
        for name, get, fmt in rows:
            print(f"  {name}")
            for r in rs:
                print(f"    {r['size']:>11,d}  {fmt.format(get(r))}")
        if len(rs) > 1:
            big, small = rs[-1], rs[0]
            growth = ", ".join(f"{name} {ratio(get(big), get(small)).strip()}" for name, get, _ in rows[:-1])
            print(f"  {big['size']:,} / {small['size']:,}: {growth}")


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(SIZES))
    parser.add_argument("--lookups", type=int, default=2000, help="new random records looked up per size")
    parser.add_argument("--near", type=int, default=200, help="near-duplicates looked up per size")
    parser.add_argument("--backends", default="redis,sqlite")
    parser.add_argument("--sqlite-max", type=int, default=1_000_000, help="largest size filled in SQLite")
    parser.add_argument("--base-source", type=Path, metavar="DIR",
                        help="also look up with scrapy_simhash imported from DIR (a checkout of another commit) on "
                             "the same Redis index, in alternated rounds, and print the pair ratios")
    parser.add_argument("--rounds", type=int, default=10, help="rounds against --base-source")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "SESSION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        await serve(*args.serve)
        return
    print(f"Simulated records (random sketches / fingerprints, no verification hashes); {args.lookups} "
          f"new-record and {args.near} near-duplicate lookups per size, one at a time.", flush=True)
    results: dict[str, list[dict]] = {}
    started = time.perf_counter()
    for backend in args.backends.split(","):
        sizes = args.sizes if backend == "redis" else [s for s in args.sizes if s <= args.sqlite_max]
        if len(sizes) < len(args.sizes):
            print(f"  {backend}: sizes above {args.sqlite_max:,} skipped (--sqlite-max)", flush=True)
        rs = results.setdefault(backend, [])

        def report(r: dict, rs: list = rs) -> None:
            rs.append(r)
            show(r)

        with location(backend, "new") as where:
            await measure(NewDriver(backend, where), backend, where, sizes, args.lookups, args.near, report,
                          args.base_source, args.rounds)
    summary(results)
    print(f"\n(total {time.perf_counter() - started:,.0f} s)")


if __name__ == "__main__":
    asyncio.run(main())
