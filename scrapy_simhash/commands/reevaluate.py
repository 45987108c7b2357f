"""``scrapy simhash-reevaluate MERGELOG --threshold X``: past decisions that flip under a new rule."""

from __future__ import annotations

import argparse

import redis

from scrapy.exceptions import UsageError

from scrapy_simhash.commands import SimhashCommand
from scrapy_simhash.mergelog import read_merge_log
from scrapy_simhash.offline.progress import progress
from scrapy_simhash.offline.reevaluate import format_flips, replay


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "[options] MERGELOG --threshold X"

    def short_desc(self) -> str:
        return "List merge-log decisions that a new Jaccard threshold would flip"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--threshold", type=float, required=True, help="the new Jaccard threshold")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one merge log: a JSON-lines file or a redis:// stream URI")
        if not 0.0 <= opts.threshold <= 1.0:
            raise UsageError(f"--threshold must be between 0 and 1, got {opts.threshold}", print_help=False)
        reader = read_merge_log(args[0])
        try:
            result = replay(progress(reader, "merge-log records"), opts.threshold)
        except (OSError, ValueError, redis.RedisError) as exc:
            raise UsageError(f"cannot read merge log {reader.store.where}: {exc}", print_help=False) from None
        print(format_flips(result, reader.skipped))
