"""Two revisions' Redis indexes at one size, filled side by side and looked up in alternation.

    python benchmarks/index_pair.py REV_A REV_B [--size 10000000] [--rounds 6] [--lookups 500] [--near 100]

``index.py`` measures one version a run, and a 10M-record fill takes most of an hour: two versions run
one after the other would be read at different hours, and this machine's speed drifts by more than
most changes are worth. Here each revision (a git worktree under ``/tmp``, made when missing) fills a
redis-server of its own on a free port through that revision's ``benchmarks/index.py`` harness, both
at once, then the parent asks each for a round of lookups in turn (the order reversed every other
round) while nothing else runs: ``--lookups`` new random records and ``--near`` near-duplicates of
stored ones, one at a time, in the process and session that filled the index. Printed per round and
as medians: the server's time per lookup (``INFO commandstats``), the client's lookups a second and
commands per lookup, and the ratio B / A of each round. Both servers stay in memory until the end:
about 9 GB each at 10M records.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def child(tree: str, url: str, size: int) -> None:
    """Fill ``url`` to ``size`` records with ``tree``'s harness, then answer rounds read from stdin."""
    sys.path[:0] = [tree, f"{tree}/benchmarks"]
    import asyncio

    import numpy as np
    import redis

    import index as harness  # the revision's benchmarks/index.py

    async def serve() -> None:
        driver = harness.NewDriver("redis", url)
        admin = redis.Redis.from_url(url)
        await driver.open()
        started = time.perf_counter()
        await driver.fill(0, size)
        print(json.dumps({"filled": size, "seconds": time.perf_counter() - started,
                          "bytes_per_record": admin.info("memory")["used_memory"] / size}), flush=True)
        for line in sys.stdin:
            round_, lookups, near = map(int, line.split())
            queries = driver.new_queries(size + 1000 * round_, lookups)  # records no round has added
            new, _ = await harness.timed([lambda q=q: driver.lookup(q) for q in queries], admin)
            targets = [int(t) for t in np.random.default_rng([harness.NEAR_SEED, size, round_]).integers(0, size, near)]
            queries = driver.near_queries(size + 1000 * round_, targets)
            dup, hits = await harness.timed([lambda q=q: driver.lookup(q) for q in queries], admin)
            print(json.dumps({"new": new, "near": dup, "found": sum(hits) / max(near, 1)}), flush=True)
        await driver.close()

    asyncio.run(serve())


def worktree(rev: str) -> str:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True,
                            capture_output=True, text=True).stdout.strip()
    path = Path(f"/tmp/simhash-pair-{commit}")
    if not (path / "scrapy_simhash").is_dir():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revs", nargs=2, metavar="REV", help="git revisions A and B (B / A is printed)")
    parser.add_argument("--size", type=int, default=10_000_000, help="records in each index (default 10M)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--lookups", type=int, default=500, help="new-record lookups per round and revision")
    parser.add_argument("--near", type=int, default=100, help="near-duplicate lookups per round and revision")
    args = parser.parse_args()
    # Here, not at the top: pipeline.py imports the package, which a child must take from its tree.
    from pipeline import throwaway_redis  # benchmarks/pipeline.py

    trees = [worktree(rev) for rev in args.revs]
    children = []
    with ExitStack() as servers:
        try:
            for tree in trees:
                url = servers.enter_context(throwaway_redis())
                children.append(subprocess.Popen(
                    [sys.executable, __file__, "--child", tree, url, str(args.size)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            print(f"filling {args.size:,} records in each index, both at once", flush=True)
            for rev, process in zip(args.revs, children):
                filled = json.loads(process.stdout.readline())
                print(f"  {rev}: {filled['seconds']:,.0f} s, {filled['bytes_per_record']:.0f} bytes per record",
                      flush=True)
            results: list[list[dict]] = [[], []]
            for round_ in range(args.rounds):
                order = (0, 1) if round_ % 2 == 0 else (1, 0)
                for i in order:
                    children[i].stdin.write(f"{round_} {args.lookups} {args.near}\n")
                    children[i].stdin.flush()
                    results[i].append(json.loads(children[i].stdout.readline()))
                line = "  ".join(
                    f"{rev}: new {r[-1]['new']['script_us']:6.1f} us near {r[-1]['near']['script_us']:6.1f} us"
                    for rev, r in zip(args.revs, results))
                print(f"round {round_ + 1}: {line}", flush=True)
            for kind in ("new", "near"):
                a, b = ([r[kind]["script_us"] for r in rs] for rs in results)
                ratios = [y / x for x, y in zip(a, b)]
                commands = [statistics.median(r[kind]["commands_per_lookup"] for r in rs) for rs in results]
                rates = [statistics.median(r[kind]["per_s"] for r in rs) for rs in results]
                print(f"{kind:>4}: {args.revs[0]} {statistics.median(a):6.1f} us, {args.revs[1]} "
                      f"{statistics.median(b):6.1f} us; {args.revs[1]} / {args.revs[0]} round by round "
                      f"{' '.join(f'{x:.2f}' for x in ratios)}, median {statistics.median(ratios):.2f}x; "
                      f"lookups/s (client, one at a time) {rates[0]:,.0f} / {rates[1]:,.0f}; "
                      f"commands {commands[0]:.0f} / {commands[1]:.0f}; near-duplicates found "
                      f"{statistics.mean(r['found'] for r in results[0]):.0%} / "
                      f"{statistics.mean(r['found'] for r in results[1]):.0%}")
        finally:
            for process in children:
                process.kill()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # one revision's side: TREE URL SIZE
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
