"""Real crawls, each in an OS process of its own, of a stream of items (tests/integration/crawl_stream.py)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DRIVER = Path(__file__).with_name("integration") / "crawl_stream.py"


def crawl(out: Path, items: list[dict], **settings) -> tuple[dict, str]:
    """Crawl ``items`` into ``out`` (a SQLite index there unless ``settings`` name one, no furniture
    learner); (stats, log)."""
    stream = out / "items.jsonl"
    stream.write_text("".join(json.dumps(item) + "\n" for item in items))
    overrides = {"SIMHASH_INDEX_URL": f"sqlite:///{out}/index.db", "SIMHASH_BOILERPLATE": False, **settings}
    result = subprocess.run(
        [sys.executable, str(DRIVER), str(stream), str(out), json.dumps(overrides)],
        capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "stats.json").read_text()), (out / "crawl.log").read_text()


def wait_for(process: subprocess.Popen, done: Callable[[str], bool], what: str, timeout: float = 300) -> None:
    """Read the lines ``process`` reports on its standard output (a pipe) until ``done`` holds for
    one; fail, with its error output, if it exits first or ``timeout`` seconds pass. The wait is
    select's on the pipe: no clock decides anything but the bound."""
    deadline = time.monotonic() + timeout
    fd, pending = process.stdout.fileno(), b""
    while True:
        *lines, pending = pending.split(b"\n")
        if any(done(line.decode()) for line in lines):
            return
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {what} after {timeout} s"
        chunk = os.read(fd, 4096)
        assert chunk, f"a crawl ended before {what}: " + (
            process.stderr.read() if process.stderr else b""
        ).decode(errors="replace")[-2000:]
        pending += chunk
