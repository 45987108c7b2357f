"""``scrapy simhash-boilerplate HOST``: the boilerplate set a host has in the index, and its top shingles."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_simhash.extensions import summary_path
from scrapy_simhash.index import open_index
from scrapy_simhash.pipelines import decision_parameters
from scrapy_simhash.settings import SimhashSettings, read


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "[options] HOST"

    def short_desc(self) -> str:
        return "Print a host's learned boilerplate set: version, size and its most widespread shingles"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--spider", default="default", help="spider whose index to read (SIMHASH_KEY_PREFIX)")
        parser.add_argument("-n", "--top", type=int, default=20, help="how many shingles to print")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one host, as the pipeline keys it (e.g. news.example.org)")
        host = args[0]
        assert self.settings is not None
        config = read(self.settings, opts.spider)
        stored = asyncio.run(self._load(config, opts.spider, host))
        prefix = config.key_prefix.replace("{spider}", opts.spider)
        where = config.index_url.replace("{spider}", opts.spider)
        if stored is None:
            print(f"{host}: no boilerplate set in {where} (prefix {prefix})")
            return
        version, hashes = stored
        print(f"{host}: version {version}, {len(hashes)} shingles in {where}")
        summary = Path(summary_path(prefix, host))
        if not summary.exists():
            print(f"(no readable summary at {summary}: the set was learned by another machine)")
            return
        learned = json.loads(summary.read_text(encoding="utf-8"))
        if learned["version"] != version:
            print(f"(summary {summary} is of version {learned['version']})")
        print(f"learned from {learned['pages']} pages; most widespread shingles:")
        for entry in learned["top"][: opts.top]:
            print(f"  {entry['pages']:5d} pages  {entry['shingle']}")

    @staticmethod
    async def _load(config: SimhashSettings, spider: str, host: str) -> tuple[int, np.ndarray] | None:
        _, layout = decision_parameters(config)
        index = open_index(config.index_url, layout=layout, spider=spider, key_prefix=config.key_prefix)
        try:
            return await index.load_boilerplate(host)
        finally:
            await index.close()
