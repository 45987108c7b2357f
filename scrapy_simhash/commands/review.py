"""``scrapy simhash-review [REVIEWLOG] -o review.html``: the sampled decisions as HTML pages to review
and label, offline; docs/review.md describes the page and the loop back into ``simhash-tune``."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings
from scrapy.spiderloader import get_spider_loader

from scrapy_simhash.boilerplate import BlobError, Furniture, decode
from scrapy_simhash.commands import LineBreaksHelpFormatter, SimhashCommand
from scrapy_simhash.configured import configured_index
from scrapy_simhash.guard import IndexUnavailable
from scrapy_simhash.index import IndexNotFound, IndexOpenError
from scrapy_simhash.mergelog import read_merge_log
from scrapy_simhash.offline.progress import progress
from scrapy_simhash.offline.review_page import PER_PAGE, remove_stale_pages, render_pages, review_pages
from scrapy_simhash.offline.review_pairs import (
    TextFinder,
    feed_pages,
    item_texts,
    logged_decisions,
    pairs_of,
    read_feed,
    review_records,
    review_texts,
)
from scrapy_simhash.redis_url import mask_url
from scrapy_simhash.settings import SimhashSettings, read

FEED_FORMATS = ("json", "jsonlines", "jl")


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "[options] [REVIEWLOG] [-o review.html]"

    def short_desc(self) -> str:
        return "Write the review log as HTML pages: texts side by side, a Jaccard histogram, labels for tuning"

    def long_desc(self) -> str:
        return (
            f"{self.short_desc()}.\n\n"
            "REVIEWLOG is the review log (SIMHASH_REVIEW_LOG: a JSON-lines file or a redis:// stream URI;\n"
            "default: the spider's). The duplicate's text is in each record; the text of the page it was\n"
            "compared with comes from another record of that page or from the crawl's items (--items: feed\n"
            "exports, JSON or JSON lines; default: the project's FEEDS files for the spider), read with this\n"
            "project's SIMHASH_FIELDS, their site furniture removed as the crawl learned it (read from the\n"
            "spider's index). The page needs no server and loads nothing: open it from disk, mark pairs,\n"
            "download the labels, then: scrapy simhash-tune simhash-labels.jsonl"
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.formatter_class = LineBreaksHelpFormatter
        parser.add_argument(
            "--spider", metavar="NAME",
            help="the crawl's spider: its review log, feeds and index (default: the project's only spider)",
        )
        parser.add_argument(
            "--items", metavar="FEED", nargs="+", action="extend", default=None,
            help="the crawl's feed exports (JSON or JSON lines) holding the pages compared with",
        )
        parser.add_argument(
            "--merge-log", metavar="MERGELOG",
            help="draw the histogram from every decision of this merge log (default: the review log's)",
        )
        parser.add_argument(
            "-o", "--output", metavar="HTML", default="review.html",
            help="default: review.html; further pages are review-2.html, review-3.html...; its folder is made",
        )
        parser.add_argument(
            "--per-page", metavar="N", type=int, default=PER_PAGE,
            help=f"pairs a page shows (default: {PER_PAGE}); 0 puts every pair on one page",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) > 1:
            raise UsageError("give one review log: a JSON-lines file or a redis:// stream URI")
        if opts.per_page < 0:
            raise UsageError("--per-page must be 0 (one page) or more")
        assert self.settings is not None
        spider = opts.spider or _only_spider(self.settings)
        try:
            config = read(self.settings, spider or "review")
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from None
        output = Path(opts.output)
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            message = f"cannot make the folder {exc.filename} for {output}: {exc.strerror}"
            raise UsageError(message, print_help=False) from None
        log = args[0] if args else (config.review_log if spider else None)
        if not log:
            raise UsageError("give the review log, or --spider NAME for the spider's SIMHASH_REVIEW_LOG")
        try:
            records, skipped = review_records(read_merge_log(log))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot read review log {log}: {exc}", print_help=False) from None
        finder = TextFinder()
        review_texts(finder, records, "review log")
        feeds = opts.items if opts.items is not None else project_feeds(self.settings, spider)
        learned = any(record["rule"].get("boilerplate_version") for record in records)
        for feed in feeds:
            try:
                pages, unreadable = feed_pages(progress(read_feed(feed), f"items of {feed}"), config)
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"cannot read items {feed}: {exc}", print_help=False) from None
            if unreadable:
                print(f"{feed}: {unreadable} items without readable fields, left out")
            furniture = None
            if learned:
                furniture, problem = load_furniture(config, {page.host for page in pages})
                if problem:
                    print(f"{feed}: texts shown with their site furniture: {problem}")
            source = f"items {Path(feed).name}"
            if learned and furniture is None:
                source += " (before furniture removal: it may show as differences)"
            item_texts(finder, pages, source, furniture)
        histogram_source = "the review log"
        decisions = logged_decisions(records)
        if opts.merge_log:
            histogram_source = f"merge log {Path(opts.merge_log).name}"
            try:
                decisions = logged_decisions(read_merge_log(opts.merge_log))
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"cannot read merge log {opts.merge_log}: {exc}", print_help=False) from None
        pairs = pairs_of(records, finder, items_given=bool(feeds))
        sources = [log, *feeds, *([opts.merge_log] if opts.merge_log else [])]
        files = review_pages(output, len(pairs), opts.per_page)
        pages = render_pages(pairs, decisions, histogram_source, sources, [f.name for f in files], opts.per_page)
        try:
            for file, page in zip(files, pages, strict=True):
                file.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {exc.filename}: {exc.strerror}", print_help=False) from None
        removed = remove_stale_pages(output, len(files))
        labellable = sum(pair.labellable for pair in pairs)
        print(
            f"{output}: {len(pairs)} decisions, {labellable} with both texts"
            + (f", on {len(files)} pages ({files[0].name} to {files[-1].name})" if len(files) > 1 else "")
            + (f", {skipped} records that are not review decisions left out" if skipped else "")
        )
        if removed:
            print(f"  removed {removed} pages an earlier review left after these")
        missing = sum(pair.matched.text is None and not pair.matched.erased for pair in pairs)
        if missing:
            where = (
                "it is in none of the items given (matched by id, else URL)"
                if feeds
                else "give the crawl's items with --items"
            )
            print(f"  {missing} pairs lack the text of the page compared with: {where}")
        whole = sum(pair.whole for pair in pairs)
        if whole:
            print(f"  {whole} pairs judged on their whole texts (two pages of one host: the furniture guard)")
        differ = sum(pair.as_logged is False for pair in pairs)
        if differ:
            print(f"  {differ} pairs' texts score another Jaccard than the logged one: not exactly the texts compared")


def _only_spider(settings: BaseSettings) -> str | None:
    """The project's spider when it has exactly one."""
    try:
        names = get_spider_loader(settings).list()
    except Exception:  # a project whose spiders cannot be imported: the user names the log
        return None
    return names[0] if len(names) == 1 else None


def project_feeds(settings: BaseSettings, spider: str | None) -> list[str]:
    """The local JSON and JSON-lines files the project's FEEDS export ``spider``'s items to, that exist."""
    if spider is None:
        return []
    found = []
    for uri, options in settings.getdict("FEEDS").items():
        if str((options or {}).get("format", "")).lower() not in FEED_FORMATS:
            continue
        try:
            filled = str(uri) % {"name": spider}
        except (KeyError, ValueError, TypeError):  # %(time)s and the like: not one file
            continue
        parts = urlsplit(filled)
        path = Path(url2pathname(parts.path)) if parts.scheme == "file" else Path(filled)
        if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a Windows drive letter is no scheme
            if path.is_file():
                found.append(str(path))
    return found


def load_furniture(config: SimhashSettings, hosts: Collection[str]) -> tuple[dict[str, Furniture] | None, str]:
    """Each host's furniture as the crawl's index holds it (hosts it has none for are left out), or
    None and why it cannot be read."""

    async def load() -> dict[str, Furniture]:
        index = configured_index(config, create=False)
        try:
            await index.open()
            found = {}
            for host in hosts:
                stored = await index.load_boilerplate(host)
                if stored is not None:
                    found[host] = decode(stored)
            return found
        finally:
            await index.close()

    try:
        return asyncio.run(load()), ""
    except IndexNotFound:
        return None, f"no index at {mask_url(config.index_url)} (give --spider NAME, the crawl's spider)"
    except (BlobError, IndexOpenError, IndexUnavailable, OSError, ValueError) as exc:
        return None, f"the furniture in {mask_url(config.index_url)} cannot be read ({exc})"
