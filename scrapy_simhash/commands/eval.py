"""``scrapy simhash-eval CORPUS.jsonl``: recall and precision of the configured index against brute force."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import time
from collections import Counter

from scrapy.exceptions import UsageError

from scrapy_simhash.commands import LineBreaksHelpFormatter, SimhashCommand, number_list
from scrapy_simhash.configured import configured_layout
from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.minhash import Layout
from scrapy_simhash.offline.evaluate import (
    THRESHOLDS,
    Configuration,
    format_item_runs,
    format_pair_rows,
    ground_truth,
    pair_rows,
    plot,
    read_documents,
    run_items,
    run_pairs,
)
from scrapy_simhash.offline.progress import progress
from scrapy_simhash.settings import DEFAULTS, read

logger = logging.getLogger(__name__)


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "[options] CORPUS.jsonl"

    def short_desc(self) -> str:
        return "Measure the index's recall and precision on a corpus against brute-force Jaccard"

    def long_desc(self) -> str:
        return (
            f"{self.short_desc()}.\n\n"
            "CORPUS.jsonl holds one JSON object per line, for example:\n"
            '  {"id": "doc-1", "url": "https://example.org/a", "title": "A page", "body_text": "..."}\n'
            "A document's text is the fields SIMHASH_FIELDS names, joined in order\n"
            f"(default: {', '.join(DEFAULTS['SIMHASH_FIELDS'])}; -s SIMHASH_FIELDS=title,body reads\n"
            'others). "id" names a document, else "url", else its line number.'
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.formatter_class = LineBreaksHelpFormatter
        parser.add_argument(
            "--layouts",
            type=str,
            default=None,
            help="comma-separated layouts to compare as BANDSxROWS[/SIZE]>=ESTIMATE (e.g. 14x6/176>=0.73), "
            "'configured' for the one the settings give (the default)",
        )
        parser.add_argument(
            "--thresholds",
            type=number_list(float),
            help=f"Jaccard thresholds (default: {', '.join(map(str, THRESHOLDS))} and SIMHASH_JACCARD_THRESHOLD)",
        )
        parser.add_argument(
            "--redis-url", help="measure the Redis backend there, under a key prefix of its own (default: SQLite)"
        )
        parser.add_argument("--limit", type=int, help="use only the first N documents")
        parser.add_argument(
            "--orders", type=int, default=3, help="shuffled orders to replay the pipeline's decisions in (default 3)"
        )
        parser.add_argument("--plot", metavar="PNG", help="draw each layout's candidate curve and the measured recall")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one corpus file (JSON lines)")
        if opts.plot and importlib.util.find_spec("matplotlib") is None:
            raise UsageError("--plot needs matplotlib: pip install 'scrapy-simhash[plot]'", print_help=False)
        assert self.settings is not None
        try:
            config = read(self.settings, "eval")
            configurations = [
                self._configuration(label.strip(), config) for label in (opts.layouts or "configured").split(",")
            ]
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from None

        thresholds = sorted(set(opts.thresholds or (*THRESHOLDS, config.jaccard_threshold)))
        if not all(0.0 < t <= 1.0 for t in thresholds):
            raise UsageError(f"Jaccard thresholds must lie in (0, 1], got {thresholds}", print_help=False)
        try:
            keys: Counter[str] = Counter()
            documents = read_documents(args[0], config.fields, keys)[: opts.limit]
        except OSError as exc:
            raise UsageError(f"cannot read {args[0]}: {exc}", print_help=False) from None
        without_text = sum(not document.text.strip() for document in documents)
        if without_text == len(documents):
            raise UsageError(self._no_text(args[0], config.fields, len(documents), keys), print_help=False)
        if without_text:
            print(
                f"{without_text} of {len(documents)} documents have no text in the fields SIMHASH_FIELDS names "
                f"({', '.join(config.fields)}): they are in no pair"
            )
        if self.settings.getpriority("SIMHASH_FIELDS") is not None:  # named by the user, not the default list
            self._say_absent_fields(config.fields, keys)
        fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
        started = time.perf_counter()
        signatures = [
            fingerprinter.signature(document.text) for document in progress(documents, "fingerprinting, documents")
        ]
        truth = ground_truth([s.hashes for s in signatures], thresholds[0])
        print(
            f"{len(documents)} documents, fields {config.fields}, shingle width {config.shingle_width}, "
            f"{config.weighting} weighting: {len(truth)} pairs with Jaccard >= {thresholds[0]} "
            f"(brute force, {time.perf_counter() - started:.1f}s)"
        )
        table, items, runs = [], [], []
        for configuration in configurations:
            run = asyncio.run(run_pairs(configuration, signatures, opts.redis_url))
            runs.append(run)
            table += pair_rows(run, truth, thresholds)
            for seed in (None, *range(opts.orders)):
                items.append(
                    asyncio.run(
                        run_items(configuration, signatures, truth, config.jaccard_threshold, seed, opts.redis_url)
                    )
                )
        print(format_pair_rows(table))
        print(
            "pairs: every document indexed; recall/precision: candidates the index returned, confirmed by Jaccard on "
            "the data it stored, against brute force; cand.prec: share of returned candidates that are true pairs; "
            "ms/doc: lookup and insert"
        )
        print(
            "\nThe pipeline's decisions (groups: a duplicate joins the group of the record it matches): documents "
            f"with an earlier one at Jaccard >= {config.jaccard_threshold} in that order (should), flagged as "
            "duplicates, merges into a record that is not a true pair (false merges)"
        )
        print(format_item_runs(items), flush=True)
        if opts.plot:
            plot(runs, truth, opts.plot)
            print(f"plot written to {opts.plot}")

    @staticmethod
    def _configuration(label: str, config) -> Configuration:
        """``configured`` or ``BANDSxROWS[/SIZE]>=ESTIMATE``."""
        if label == "configured":
            layout = configured_layout(config)
        else:
            try:
                shape, _, estimate = label.partition(">=")
                shape, _, size = shape.partition("/")
                bands, _, rows = shape.partition("x")
                layout = Layout(int(bands), int(rows), float(estimate), int(size or 0))
            except ValueError as exc:
                raise ValueError(
                    f"layout {label!r}: {exc} (expected BANDSxROWS[/SIZE]>=ESTIMATE, e.g. 14x6/176>=0.73)"
                ) from None
        return Configuration(layout.label, layout)

    @staticmethod
    def _say_absent_fields(fields: list[str], keys: Counter[str]) -> None:
        """A field the user named that no document has is a misspelt or a wrong name: the rest is
        measured alone, and its figures look plausible."""
        absent = [name for name in fields if not keys[name]]
        if absent:
            print(
                f"No document has {', '.join(absent)}, which SIMHASH_FIELDS names: the text measured is that of "
                f"{', '.join(name for name in fields if keys[name])} alone. The documents' fields (lines with "
                f"each): {_held(keys)}"
            )

    @staticmethod
    def _no_text(path: str, fields: list[str], documents: int, keys: Counter[str]) -> str:
        if not documents:
            return f"{path} has no document (no line is a JSON object)"
        return (
            f"{path}: none of its {documents} documents has text in the fields SIMHASH_FIELDS names "
            f"({', '.join(fields)}), so there is nothing to measure. Its lines have the fields (lines with each): "
            f"{_held(keys)}. Name the text fields with -s SIMHASH_FIELDS=name1,name2"
        )


def _held(keys: Counter[str]) -> str:
    """The fields a corpus holds, most common first, each with the number of lines having it."""
    return ", ".join(f"{name} ({count})" for name, count in keys.most_common())
