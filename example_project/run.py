"""Build the offline sites, crawl them through the SimHash pipeline, print what it found.

    python example_project/run.py [--fresh] [-s SIMHASH_INDEX_URL=redis://127.0.0.1:6379/0 ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--fresh", action="store_true",
                        help="forget earlier runs: empty the spider's index and logs first (SIMHASH_RESET), wherever"
                        " they are")
    parser.add_argument("--corpus", type=Path, help="corpus for build_site.py (default: the shipped data/)")
    args = parser.parse_args(argv)

    os.chdir(HERE)  # scrapy.cfg: the project settings
    sys.path.insert(0, str(HERE))
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings

    import build_site

    build_site.main([str(args.corpus)] if args.corpus else [])  # a fraction of a second: always fresh
    settings = get_project_settings()
    for pair in args.settings:
        name, _, value = pair.partition("=")
        settings.set(name, value, priority="cmdline")
    if args.fresh:
        settings.set("SIMHASH_RESET", True, priority="cmdline")

    process = CrawlerProcess(settings)
    crawler = process.create_crawler("docs")
    process.crawl(crawler)
    process.start()

    stats = crawler.stats.get_stats()
    if stats.get("finish_reason") != "finished":  # a setting refused, an index error in "fail" mode
        sys.exit(f"the crawl stopped: {stats.get('finish_reason')} (the log above says why)")
    seen = stats.get("simhash/items_seen", 0)
    print(f"\n{stats.get('simhash/dropped', 0)} near-duplicates dropped and {stats.get('simhash/seen', 0)} pages"
          f" seen before of {seen} pages crawled, {stats.get('item_scraped_count', 0)} items kept")
    for name in sorted(k for k in stats if k.startswith("simhash/")):
        print(f"  {name}: {stats[name]}")
    print(f"merge log: {settings.get('SIMHASH_MERGE_LOG', '').format(spider='docs')}")


if __name__ == "__main__":
    main()
