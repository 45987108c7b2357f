"""A page counts once its feed batch is stored, at once (issue 43): a crawl killed just after a batch
was stored does not have its rerun export that batch's pages again."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from crawls import wait_for
from texts import article

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("crawl_stream.py")
STREAM = [{"url": f"https://site/{i}", "body_text": article(4330 + i, words=120)} for i in range(40)]
BATCH = 5


def start(out: Path, run: str, stall_after: int = 0) -> subprocess.Popen:
    feeds = out / run
    feeds.mkdir()
    overrides = {
        "STREAM_STALL_AFTER": stall_after,
        "FEEDS": {str(feeds / "kept-%(batch_id)05d.jsonl"): {"format": "jsonlines"}},
        "FEED_EXPORT_BATCH_ITEM_COUNT": BATCH,
        "CONCURRENT_REQUESTS": 1,
        "SIMHASH_BOILERPLATE": False,
        "SIMHASH_SESSION_LEASE": 1,
        "SIMHASH_INDEX_URL": f"sqlite:///{out}/index.db",
    }
    stream = out / "stream.jsonl"
    stream.write_text("".join(json.dumps(item) + "\n" for item in STREAM))
    return subprocess.Popen([sys.executable, str(DRIVER), str(stream), str(feeds), json.dumps(overrides)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def urls(folder: Path) -> list[str]:
    return [json.loads(line)["url"] for path in sorted(folder.glob("kept-*.jsonl"))
            for line in path.read_text().splitlines()]


def test_a_crawl_killed_after_its_batches_were_stored_has_them_exported_once(tmp_path):
    """Ten items through two stored batches, ten more held after the SimHash pipeline: killed there.
    The index calls of the held items run after the stored batches' confirmations (one SQLite
    thread, in order), so the rerun finds those pages confirmed and exports only the rest."""
    first = start(tmp_path, "killed", stall_after=2 * BATCH)
    seen = {"held": False, "stored": 0, "confirmed": 0}

    def reached(line: str) -> bool:
        seen["held"] = seen["held"] or line == "held"
        for count in ("stored", "confirmed"):  # confirmed: on the index's thread, which a kill can beat
            if line.startswith(f"{count} "):
                seen[count] = int(line.removeprefix(f"{count} "))
        return seen["held"] and seen["stored"] >= 2 * BATCH and seen["confirmed"] >= 2 * BATCH

    wait_for(first, reached, "two batches stored and confirmed, and ten items held")
    first.send_signal(signal.SIGKILL)
    first.wait()
    rerun = start(tmp_path, "rerun")
    assert rerun.wait(timeout=300) == 0, rerun.stderr.read().decode()[-3000:]
    counts = Counter(urls(tmp_path / "killed") + urls(tmp_path / "rerun"))
    assert len(urls(tmp_path / "killed")) == 2 * BATCH
    assert sorted(counts) == sorted(item["url"] for item in STREAM)  # nothing lost
    assert [url for url, count in counts.items() if count > 1] == []
