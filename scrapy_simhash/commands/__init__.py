"""Scrapy commands of scrapy-simhash (``scrapy simhash-eval``, ...), registered under the
``scrapy.commands`` entry point; ``python -m scrapy_simhash`` runs them by module name."""

from __future__ import annotations

import argparse


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
