"""A crawl killed mid-stream (SIGKILL) and run again loses no page: a record indexed for an item that
was never exported does not make the rerun's item a duplicate of itself."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from crawls import wait_for
from texts import article, edited

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("crawl_stream.py")
TEXTS = [article(1000 + i, words=120) for i in range(80)]
# Each text, then later a copy of some: the copies must be dropped only for a text that went out.
STREAM = [{"url": f"https://site/{i}", "body_text": t} for i, t in enumerate(TEXTS)]
STREAM += [{"url": f"https://mirror/{i}", "body_text": edited(TEXTS[i])} for i in range(0, 80, 4)]


def exported(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(out.glob("kept-*.jsonl")) for line in path.read_text().splitlines()]


def start(out: Path, settings: dict, stall_after: int = 0) -> subprocess.Popen:
    overrides = {
        "STREAM_STALL_AFTER": stall_after,
        # One feed file per item, closed at once: what was exported survives the kill.
        "FEEDS": {str(out / "kept-%(batch_time)s-%(batch_id)05d.jsonl"): {"format": "jsonlines"}},
        "FEED_EXPORT_BATCH_ITEM_COUNT": 1,
        "CONCURRENT_REQUESTS": 4,
        "SIMHASH_BOILERPLATE": False,
        # The killed crawl's lease lapses a second after its last renewal: the rerun's copies of the
        # pages it held wait that long, then take them over.
        "SIMHASH_SESSION_LEASE": 1,
        **settings,
    }
    stream = out / "stream.jsonl"
    stream.write_text("".join(json.dumps(item) + "\n" for item in STREAM))
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(stream), str(out), json.dumps(overrides)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


class Progress:
    """The first run's reports: ``held``, and ``stored N`` for the items its feed stored so far."""

    def __init__(self) -> None:
        self.held, self.stored = False, 0

    def reached(self, line: str) -> bool:
        if line == "held":
            self.held = True
        elif line.startswith("stored "):
            self.stored = int(line.removeprefix("stored "))
        return self.held and self.stored >= 30


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_killed_crawl_and_its_rerun_lose_no_page(backend, tmp_path, redis_factory):
    if backend == "sqlite":
        settings = {"SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db"}
    else:
        server = redis_factory.start("--appendonly", "yes", "--appendfsync", "always")
        settings = {"SIMHASH_INDEX_URL": server.url}
    # The first run exports 30 items, then holds the next ones after the SimHash pipeline indexed them
    # (a slow pipeline after it, a feed that had not written them yet): then it is killed.
    first = start(tmp_path, settings, stall_after=30)
    # 10 items indexed and held, and the 30 before them stored by the feed (which stores a batch
    # after the item went out: under load, a moment later).
    wait_for(first, Progress().reached, "30 items stored and 10 held")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert len(exported(tmp_path)) == 30
    rerun = start(tmp_path, settings)
    assert rerun.wait(timeout=300) == 0, rerun.stderr.read().decode()[-3000:]
    bodies = {item["body_text"] for item in exported(tmp_path)}
    lost = [i for i, text in enumerate(TEXTS) if text not in bodies and edited(text) not in bodies]
    assert lost == []
