"""``scrapy simhash-erase ID|URL``: a page out of the index and every merge and review log."""

from __future__ import annotations

import argparse
import asyncio
import sys

from scrapy.exceptions import UsageError

from scrapy_simhash.commands import SimhashCommand
from scrapy_simhash.index import IndexNotFound
from scrapy_simhash.offline.erase import ErasureIncomplete, erase
from scrapy_simhash.printable import printable
from scrapy_simhash.redis_url import mask_url
from scrapy_simhash.settings import read


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "[options] ID|URL"

    def short_desc(self) -> str:
        return "Erase a page (by id or URL) from the index and from every merge and review log"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--spider", default="default", help="spider whose index and logs to erase from")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one id or URL")
        assert self.settings is not None
        try:
            config = read(self.settings, opts.spider)
            result = asyncio.run(erase(config, args[0]))
        except (ValueError, IndexNotFound) as exc:
            raise UsageError(str(exc), print_help=False) from None
        except ErasureIncomplete as exc:
            again = " ".join(repr(page) for page in exc.pages)
            raise UsageError(
                f"the index no longer holds it, but a log could not be rewritten ({exc}); once that is "
                f"fixed, erase each of these again: {again}", print_help=False,
            ) from None
        except Exception as exc:  # the index unreachable or refusing: it still holds the page
            message = f"the erasure stopped ({type(exc).__name__}: {exc}); run it again"
            raise UsageError(message, print_help=False) from None
        if not result.records and not any(rewrite.rewritten for rewrite in result.logs.values()):
            print(f"{printable(args[0])}: no record in index {mask_url(config.index_url)} and no log names it (spider "
                  f"{opts.spider!r}): nothing erased. Is it the id or URL as the crawl stored it, and the crawl's "
                  "--spider?", file=sys.stderr)
            self.exitcode = 1
            return
        print(f"index {mask_url(config.index_url)}: {len(result.records)} records erased")
        for record in result.records:
            note = f", {printable(record.promoted)} is its group's canonical now" if record.promoted else ""
            print(f"  {printable(record.id)} ({'canonical' if record.canonical else 'member'}{note})")
        for kind, rewrite in result.logs.items():
            print(f"{kind} log {rewrite.where}: {rewrite.redacted} records redacted, {rewrite.removed} removed")
        for step in result.persistence:
            print(f"still to do: {step}")
