"""``scrapy simhash-boilerplate HOST``: the furniture a host has in the index, with examples of its lines."""

from __future__ import annotations

import argparse
import asyncio
from urllib.parse import urlsplit

from scrapy.exceptions import UsageError

from scrapy_simhash.boilerplate import BlobError, decode
from scrapy_simhash.commands import SimhashCommand
from scrapy_simhash.configured import configured_index
from scrapy_simhash.index import IndexNotFound
from scrapy_simhash.redis_url import mask_url
from scrapy_simhash.settings import SimhashSettings, read


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "[options] HOST"

    def short_desc(self) -> str:
        return "Print a host's learned furniture: version, what it was learned from, examples of its lines"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--spider", help="spider whose index to read (each spider has its own)")
        parser.add_argument("-n", "--top", type=int, default=20, help="how many furniture lines to print")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one host, as the pipeline keys it (e.g. news.example.org)")
        host = args[0]
        assert self.settings is not None
        try:
            config = read(self.settings, opts.spider or "default")
            stored = asyncio.run(self._load(config, host))
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from None
        except IndexNotFound as exc:
            hint = "" if opts.spider else "; name the crawl's spider with --spider NAME (each spider has its own index)"
            raise UsageError(f"{exc}{hint}", print_help=False) from None
        where = mask_url(config.index_url)
        if urlsplit(config.index_url).scheme != "sqlite":
            where += f" (keys {config.key_prefix})"
        if stored is None:
            hint = "" if opts.spider else " (name the crawl's spider with --spider NAME)"
            print(f"{host}: no furniture in {where}{hint}")
            return
        try:
            furniture = decode(stored)
        except BlobError as exc:
            print(f"{host}: furniture in {where}, unreadable: {exc}")
            return
        print(f"{host}: version {furniture.version} in {where}")
        print(f"learned from {furniture.pages} pages ({furniture.documents} documents): {len(furniture.lines)} lines,"
              f" {len(furniture.slots)} byline-like slots, {len(furniture.verification)} verification hashes")
        print("lines most pages have:")
        for line in furniture.examples[: opts.top]:
            print(f"  {line}")

    @staticmethod
    async def _load(config: SimhashSettings, host: str) -> bytes | None:
        index = configured_index(config, create=False)
        try:
            await index.open()
            return await index.load_boilerplate(host)
        finally:
            await index.close()
