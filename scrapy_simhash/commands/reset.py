"""``scrapy simhash-reset --spider NAME``: empty one spider's index and logs, to start over."""

from __future__ import annotations

import argparse
import asyncio
import sys

from scrapy.exceptions import UsageError

from scrapy_simhash.commands import SimhashCommand
from scrapy_simhash.reset import reset, targets
from scrapy_simhash.settings import read


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "--spider NAME [--yes]"

    def short_desc(self) -> str:
        return "Empty one spider's index and merge and review logs (other spiders' data stays)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--spider", required=True, help="spider whose index and logs to empty")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("takes no arguments: name the spider with --spider")
        assert self.settings is not None
        try:
            config = read(self.settings, opts.spider)
            what = targets(config)
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from None
        if not opts.yes:
            print(f"This removes, for spider {opts.spider!r}:")
            for line in what:
                print(f"  {line}")
            if not sys.stdin.isatty():
                raise UsageError("not asked on a terminal: run it again with --yes", print_help=False)
            if input("Type yes to go on: ").strip().lower() != "yes":
                print("nothing removed")
                self.exitcode = 1
                return
        try:
            done = asyncio.run(reset(config))
        except Exception as exc:  # a Redis that does not answer, a file that cannot be removed
            message = f"the reset stopped ({type(exc).__name__}: {exc}); run it again"
            raise UsageError(message, print_help=False) from None
        for line in done.removed:
            print(line)
