"""Crawls killed three times and run again: how many URLs end up in more than one feed?

    cd benchmarks
    python killed_feeds.py [--backend sqlite|redis] [--batch-items N] [--pages 400] [--kill-at 100]
                           [--jitter 0.5] [--seed 43] [--redis-url redis://127.0.0.1:6379/5]

Each run (tests/integration/crawl_stream.py, a real Scrapy process) crawls the same ``--pages``
distinct pages into a local feed file of its own, as a rerun of a crawl without a job directory
does. The first three runs get SIGKILL once their feed holds ``--kill-at`` lines and a random
``--jitter`` seconds more have passed (0: the moment the lines appear, which is when a batch was
just stored: the worst moment), the fourth runs to its end. Each run starts after the killed one's
lease (1 s here) has lapsed. ``--batch-items N`` sets ``FEED_EXPORT_BATCH_ITEM_COUNT`` (the feed
URI then names its batch); 0 is Scrapy's default, one batch stored when the crawl closes. Prints the
URLs exported more than once across all feeds, the extra copies, and the pages no feed holds
(lost). ``--redis-url``'s database is flushed.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))
from texts import article  # noqa: E402  tests/texts.py

DRIVER = TESTS / "integration" / "crawl_stream.py"
LEASE = 1.0


def lines_in(folder: Path) -> list[str]:
    return [line for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()
            if line.endswith("}")]  # a killed run's last line may be cut


def run(out: Path, stream: Path, settings: dict, kill_at: int | None, jitter: float) -> None:
    feeds = out / "feeds"
    feeds.mkdir(parents=True)
    batched = settings.get("FEED_EXPORT_BATCH_ITEM_COUNT")
    name = "kept-%(batch_id)05d.jsonl" if batched else "kept.jsonl"
    settings = {**settings, "FEEDS": {str(feeds / name): {"format": "jsonlines"}}}
    process = subprocess.Popen([sys.executable, str(DRIVER), str(stream), str(out), json.dumps(settings)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if kill_at is None:
        process.wait(timeout=600)
        return
    while len(lines_in(feeds)) < kill_at and process.poll() is None:
        time.sleep(0.02)
    time.sleep(random.uniform(0, jitter))
    process.send_signal(signal.SIGKILL)
    process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "redis"], default="sqlite")
    parser.add_argument("--batch-items", type=int, default=0)
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--kill-at", type=int, default=100, help="feed lines of a run when it is killed")
    parser.add_argument("--jitter", type=float, default=0.5, help="most seconds a kill waits past its lines")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5")
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="simhash-killed-feeds-") as folder:
        base = Path(folder)
        if args.backend == "redis":
            import redis

            redis.Redis.from_url(args.redis_url).flushdb()
        stream = base / "stream.jsonl"
        stream.write_text("".join(json.dumps({"url": f"https://a.example/{i}", "body_text": article(7000 + i, 150)})
                                  + "\n" for i in range(args.pages)))
        settings = {
            "SIMHASH_INDEX_URL": args.redis_url if args.backend == "redis" else f"sqlite:///{base}/index.db",
            "SIMHASH_BOILERPLATE": False, "SIMHASH_SESSION_LEASE": LEASE,
            "CONCURRENT_REQUESTS": 4, "DOWNLOAD_DELAY": 0.005,
            **({"FEED_EXPORT_BATCH_ITEM_COUNT": args.batch_items} if args.batch_items else {}),
        }
        for n in range(4):
            run(base / f"run{n}", stream, settings, args.kill_at if n < 3 else None, args.jitter)
            time.sleep(LEASE + 0.5)
        feeds = [{json.loads(line)["url"] for line in lines_in(base / f"run{n}" / "feeds")} for n in range(4)]
    counts = Counter(url for urls in feeds for url in urls)
    twice = sum(count > 1 for count in counts.values())
    extra = sum(count - 1 for count in counts.values())
    lost = args.pages - len(counts)
    print(f"{args.backend}, FEED_EXPORT_BATCH_ITEM_COUNT={args.batch_items}: per run {[len(f) for f in feeds]} "
          f"URLs; exported more than once: {twice} URLs ({extra} extra copies); lost: {lost} of {args.pages}")


if __name__ == "__main__":
    main()
