"""Scrapy commands of scrapy-simhash (``scrapy simhash-eval``, ...), registered under the
``scrapy.commands`` entry point; ``python -m scrapy_simhash eval`` runs ``scrapy simhash-eval``."""

from __future__ import annotations

import argparse

from scrapy.commands import ScrapyCommand, ScrapyHelpFormatter


class SimhashCommand(ScrapyCommand):
    """What every simhash command shares: it runs no crawl, and it prints its own results, so only
    Scrapy's warnings are logged."""

    requires_crawler_process = False
    default_settings = {"LOG_LEVEL": "WARNING"}


class LineBreaksHelpFormatter(ScrapyHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Scrapy's help layout with the description's line breaks kept, so that example lines stay whole.

    A command sets it in ``add_options`` (``parser.formatter_class = LineBreaksHelpFormatter``).
    """


def number_list(kind: type) -> type:
    """An argparse ``type`` for comma-separated numbers of ``kind``."""

    def parse(value: str) -> list:
        try:
            return [kind(part) for part in value.split(",") if part.strip()]
        except ValueError:
            message = f"expected comma-separated {kind.__name__} values, got {value!r}"
            raise argparse.ArgumentTypeError(message) from None

    parse.__name__ = f"{kind.__name__} list"
    return parse
