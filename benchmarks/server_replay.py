"""redis-server's instructions for a pipeline stream's function calls, two versions of redis.lua compared.

    python benchmarks/server_replay.py record CALLS [pipeline.py's options, e.g. --items 20000 --sample 0]
    python benchmarks/server_replay.py replay CALLS BASE.lua NEW.lua [--calls 2000] [--repeat 2]

``record`` runs ``pipeline.py`` with every function call the index makes written to CALLS (the entry
point and its arguments). ``replay`` sends the first ``--calls`` of them, pipelined, to a fresh
redis-server run under callgrind, once with a library made of each Lua file (the layout and
``wire.py`` of this checkout), the versions taking turns; it prints each run's instructions and the
ratio NEW / BASE. Instructions do not move with the machine's load, as CPU time on a shared 2-core
machine does; they miss cache misses, so a change they favour is confirmed end to end. Needs
valgrind.
"""

from __future__ import annotations

import argparse
import pickle
import re
import runpy
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import redis

import scrapy_simhash.index.redis as redis_index
from scrapy_simhash.calibration import layout_for

sys.path.insert(0, str(Path(__file__).parent))
from pipeline import wait_until_answering  # noqa: E402  (benchmarks/pipeline.py)


def record(calls_file: Path, pipeline_args: list[str]) -> None:
    calls = []
    call = redis_index.RedisIndex._call

    async def recorded(self, entry, *args):
        calls.append((self.prefix, entry, [a if isinstance(a, (bytes, str)) else repr(a) for a in args]))
        return await call(self, entry, *args)

    redis_index.RedisIndex._call = recorded
    script = Path(__file__).with_name("pipeline.py")
    sys.argv = [str(script), *pipeline_args]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        calls_file.write_bytes(pickle.dumps(calls))
        print(f"{len(calls)} function calls written to {calls_file}")


def instructions(lua: Path, calls: list) -> int:
    """Callgrind's instruction count of a redis-server that loads ``lua``'s library and serves ``calls``."""
    redis_index._LUA = lua.read_text(encoding="utf-8")
    name, code = redis_index._library(layout_for(0.82, 0.99), cluster=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "redis-server", "--port", str(port),
             "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=port)
        wait_until_answering(client, attempts=600, pause=0.1)  # valgrind starts slowly
        client.function_load(code)
        pipe, errors = client.pipeline(transaction=False), 0
        for i, (prefix, entry, args) in enumerate(calls, 1):
            pipe.execute_command("FCALL", name, 1, prefix + ":meta", prefix, entry, *args)
            if i % 50 == 0 or i == len(calls):
                errors += sum(isinstance(x, Exception) for x in pipe.execute(raise_on_error=False))
        client.shutdown(nosave=True)
        server.wait()
        if errors:
            raise SystemExit(f"{lua}: {errors} calls failed")
        return int(re.search(r"^summary: (\d+)", out.read_text(), re.M)[1])


def _entries(calls: list) -> list[str]:
    """The entry points ``calls`` run, a batch's one by one."""
    out = []
    for _, entry, args in calls:
        if entry != "batch":
            out.append(entry)
            continue
        at = 0
        while at < len(args):
            out.append(str(args[at]))
            at += 2 + int(args[at + 1])
    return out


def replay(calls_file: Path, base: Path, new: Path, count: int, repeat: int) -> None:
    calls = pickle.loads(calls_file.read_bytes())[:count]
    lookups = sum(entry == "check_add" for entry in _entries(calls))
    ratios = []
    for round_ in range(repeat):
        order = [base, new] if round_ % 2 == 0 else [new, base]
        counts = {lua: instructions(lua, calls) for lua in order}
        ratios.append(counts[new] / counts[base])
        print(f"round {round_ + 1}: base {counts[base] / lookups:,.0f}, new {counts[new] / lookups:,.0f} instructions"
              f" a lookup ({lookups} lookups); ratio {ratios[-1]:.3f}", flush=True)
    print(f"new ({new}) / base ({base}): median {statistics.median(ratios):.3f}"
          f" ({', '.join(f'{r:.3f}' for r in ratios)})")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "record":
        record(Path(sys.argv[2]), sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["replay"])
    parser.add_argument("calls", type=Path)
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--calls", dest="count", type=int, default=2000, help="replay the first N calls (default 2000)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds, the versions taking turns (default 2)")
    args = parser.parse_args()
    replay(args.calls, args.base, args.new, args.count, args.repeat)


if __name__ == "__main__":
    main()
