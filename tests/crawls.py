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


def crawl_at_once(tmp_path: Path, streams: list[list[dict]], **settings) -> list[Path]:
    """One crawler process a stream, all ingesting at the same moment (``STREAM_BARRIER``); the
    folders they wrote to (``kept.jsonl``, ``merges.jsonl``, ``stats.json``), once every one is done."""
    overrides = json.dumps({**settings, "STREAM_BARRIER": True})
    processes, outs = [], []
    for crawler, items in enumerate(streams):
        out = tmp_path / f"crawler{crawler}"
        out.mkdir()
        (out / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
        command = [sys.executable, str(DRIVER), str(out / "items.jsonl"), str(out), overrides]
        processes.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE))
        outs.append(out)
    try:
        for process in processes:
            wait_for(process, lambda line: line == "ready", "every crawler ready")
        for process in processes:  # go
            process.stdin.write(b"go\n")
            process.stdin.close()
        for process in processes:
            assert process.wait(timeout=300) == 0, process.stderr.read().decode()[-3000:]
    finally:
        for process in processes:
            process.kill()
            process.wait()
    return outs
