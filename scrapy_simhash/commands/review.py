"""``scrapy simhash-review REVIEWLOG -o review.html``: the sampled decisions as one HTML page to review
and label, offline; docs/review.md describes the page and the loop back into ``simhash-tune``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_simhash.commands import LineBreaksHelpFormatter
from scrapy_simhash.mergelog import read_merge_log
from scrapy_simhash.review import (
    PER_PAGE,
    TextFinder,
    item_texts,
    logged_decisions,
    pairs_of,
    read_feed,
    remove_stale_pages,
    render_pages,
    review_pages,
    review_records,
    review_texts,
)
from scrapy_simhash.settings import read


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "[options] REVIEWLOG [-o review.html]"

    def short_desc(self) -> str:
        return "Write the review log as one HTML page: texts side by side, a Jaccard histogram, labels for tuning"

    def long_desc(self) -> str:
        return (
            f"{self.short_desc()}.\n\n"
            "REVIEWLOG is the review log (SIMHASH_REVIEW_LOG: a JSON-lines file or a redis:// stream URI).\n"
            "The duplicate's text is in each record; the text of the page it was compared with comes from\n"
            "another record of that page or from the crawl's items (--items: a feed export, JSON or JSON\n"
            "lines, read with this project's SIMHASH_FIELDS). The page needs no server and loads nothing:\n"
            "open it from disk, mark pairs, download the labels, then: scrapy simhash-tune simhash-labels.jsonl"
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.formatter_class = LineBreaksHelpFormatter
        parser.add_argument(
            "--items", metavar="FEED", nargs="+", action="extend", default=[],
            help="the crawl's feed exports (JSON or JSON lines) holding the pages compared with",
        )
        parser.add_argument(
            "--merge-log", metavar="MERGELOG",
            help="draw the histogram from every decision of this merge log (default: the review log's)",
        )
        parser.add_argument(
            "-o", "--output", metavar="HTML", default="review.html",
            help="default: review.html; further pages are review-2.html, review-3.html...",
        )
        parser.add_argument(
            "--per-page", metavar="N", type=int, default=PER_PAGE,
            help=f"pairs a page shows (default: {PER_PAGE}); 0 puts every pair on one page",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one review log: a JSON-lines file or a redis:// stream URI")
        if opts.per_page < 0:
            raise UsageError("--per-page must be 0 (one page) or more")
        assert self.settings is not None
        try:
            config = read(self.settings, "review")
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from None
        log = args[0]
        try:
            records, skipped = review_records(read_merge_log(log))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot read review log {log}: {exc}", print_help=False) from None
        finder = TextFinder()
        review_texts(finder, records, "review log")
        for feed in opts.items:
            source = f"items {Path(feed).name}"
            if any(record.get("rule", {}).get("boilerplate_version") for record in records):
                source += " (before boilerplate removal: site furniture may show as differences)"
            try:
                unreadable = item_texts(finder, read_feed(feed), config, source)
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"cannot read items {feed}: {exc}", print_help=False) from None
            if unreadable:
                print(f"{feed}: {unreadable} items without readable fields, left out")
        histogram_source = "the review log"
        decisions = logged_decisions(records)
        if opts.merge_log:
            histogram_source = f"merge log {Path(opts.merge_log).name}"
            try:
                decisions = logged_decisions(read_merge_log(opts.merge_log))
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"cannot read merge log {opts.merge_log}: {exc}", print_help=False) from None
        pairs = pairs_of(records, finder, items_given=bool(opts.items))
        sources = [log, *opts.items, *([opts.merge_log] if opts.merge_log else [])]
        files = review_pages(Path(opts.output), len(pairs), opts.per_page)
        pages = render_pages(pairs, decisions, histogram_source, sources, [f.name for f in files], opts.per_page)
        for file, page in zip(files, pages, strict=True):
            file.write_text(page, encoding="utf-8")
        removed = remove_stale_pages(Path(opts.output), len(files))
        labellable = sum(pair.labellable for pair in pairs)
        print(
            f"{opts.output}: {len(pairs)} decisions, {labellable} with both texts"
            + (f", on {len(files)} pages ({files[0].name} to {files[-1].name})" if len(files) > 1 else "")
            + (f", {skipped} records that are not review decisions left out" if skipped else "")
        )
        if removed:
            print(f"  removed {removed} pages an earlier review left after these")
        missing = sum(pair.matched.text is None and not pair.matched.erased for pair in pairs)
        if missing:
            where = (
                "it is in none of the items given (matched by id, else URL)"
                if opts.items
                else "give the crawl's items with --items"
            )
            print(f"  {missing} pairs lack the text of the page compared with: {where}")
