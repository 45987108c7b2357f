"""Real crawls, each in an OS process of its own, of a stream of items (tests/integration/crawl_stream.py)."""

from __future__ import annotations

import json
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


def wait_until(
    condition: Callable[[], bool], processes: list[subprocess.Popen], what: str, timeout: float = 300
) -> None:
    """Poll ``condition`` until it holds; fail, with the crawls' error output, if one of ``processes``
    exits first or ``timeout`` seconds pass (a crawl that hangs fails the test, not CI's clock)."""
    deadline = time.monotonic() + timeout
    while not condition():
        ended = [p for p in processes if p.poll() is not None]
        assert not ended, f"a crawl ended before {what}: " + " | ".join(
            (p.stderr.read() if p.stderr else b"").decode(errors="replace")[-2000:] for p in ended
        )
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.01)
