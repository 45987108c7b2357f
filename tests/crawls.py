"""Real crawls, each in an OS process of its own, of a stream of items (tests/integration/crawl_stream.py)."""

from __future__ import annotations

import json
import subprocess
import sys
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
