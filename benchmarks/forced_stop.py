"""A crawl stopped by force while its feed is unstored, then a crawl of near copies: pages lost?

    cd benchmarks
    python forced_stop.py [--backend sqlite|redis] [--pages 300] [--gap 2] [--redis-url redis://127.0.0.1:6379/5]

The first crawl (tests/integration/crawl_stream.py, a real Scrapy process) exports to an ``upload://``
feed, which stores when the crawl closes, as S3, GCS and FTP feeds do; after ``--pages / 2`` items a
pipeline holds the rest for ever, and 2.5 s later the crawl gets two SIGINTs (the second stops it at
once), so its feed is never stored. ``--gap`` seconds later (the stopped crawl's 1 s lease has
lapsed by 2) the second crawl, on the same index, scrapes a near copy of every page under another
URL into a local feed. A page is lost when its copy was dropped although its own item never reached
a stored feed. ``--redis-url``'s database is flushed.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))
from crawls import wait_for  # noqa: E402  tests/crawls.py
from texts import article, edited  # noqa: E402  tests/texts.py

DRIVER = TESTS / "integration" / "crawl_stream.py"


def crawl(out: Path, items: list[dict], settings: dict) -> subprocess.Popen:
    out.mkdir(parents=True)
    (out / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    return subprocess.Popen([sys.executable, str(DRIVER), str(out / "items.jsonl"), str(out), json.dumps(settings)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "redis"], default="sqlite")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between the stop and the next crawl")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5")
    args = parser.parse_args()
    texts = [article(5000 + i, words=150) for i in range(args.pages)]
    with tempfile.TemporaryDirectory(prefix="simhash-forced-stop-") as folder:
        base = Path(folder)
        if args.backend == "redis":
            import redis

            redis.Redis.from_url(args.redis_url).flushdb()
        common = {
            "SIMHASH_INDEX_URL": args.redis_url if args.backend == "redis" else f"sqlite:///{base}/index.db",
            "SIMHASH_BOILERPLATE": False, "SIMHASH_SESSION_LEASE": 1, "CONCURRENT_REQUESTS": 8,
        }
        first = base / "first"
        stopped = crawl(first, [{"url": f"https://a.example/{i}", "body_text": t} for i, t in enumerate(texts)], {
            **common, "STREAM_STALL_AFTER": args.pages // 2,
            "FEEDS": {f"upload://{first}/kept.jsonl": {"format": "jsonlines"}},
        })
        wait_for(stopped, lambda line: line == "held", "held items")
        time.sleep(2.5)  # past the pipeline's 1 s confirmation delay
        stopped.send_signal(signal.SIGINT)
        time.sleep(0.5)
        stopped.send_signal(signal.SIGINT)
        stopped.wait(timeout=60)
        time.sleep(args.gap)
        second = base / "second"
        copies = [{"url": f"https://b.example/{i}", "body_text": edited(t)} for i, t in enumerate(texts)]
        crawl(second, copies, common).communicate(timeout=600)
        kept = {json.loads(line)["body_text"] for line in (second / "kept.jsonl").read_text().splitlines()}
        delivered = (first / "kept.jsonl").exists()
    lost = sum(edited(t) not in kept for t in texts)
    print(f"{args.backend}: the stopped crawl's feed stored: {delivered}; pages lost: {lost} of {args.pages}")


if __name__ == "__main__":
    main()
