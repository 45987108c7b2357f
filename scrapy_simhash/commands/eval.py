"""``scrapy simhash-eval CORPUS.jsonl``: recall and precision of the configured index against brute force."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import time

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_simhash.commands import number_list
from scrapy_simhash.evaluate import (
    THRESHOLDS,
    Configuration,
    format_pipeline_runs,
    format_rows,
    ground_truth,
    plot,
    read_documents,
    rows,
    run_configuration,
    run_pipeline_decisions,
)
from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.pipelines import decision_parameters
from scrapy_simhash.settings import read

logger = logging.getLogger(__name__)


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "[options] CORPUS.jsonl"

    def short_desc(self) -> str:
        return "Measure the index's recall and precision on a corpus against brute-force Jaccard"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--distances",
            type=str,
            default=None,
            help="comma-separated SIMHASH_MAX_DISTANCE values to compare, 'auto' included "
            "(default: the configured value, 3 and 7)",
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
        parser.add_argument("--plot", metavar="PNG", help="draw recall and candidates per lookup against the distance")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one corpus file (JSON lines)")
        if opts.plot and importlib.util.find_spec("matplotlib") is None:
            raise UsageError("--plot needs matplotlib: pip install 'scrapy-simhash[plot]'", print_help=False)
        assert self.settings is not None
        config = read(self.settings, "eval")
        configured = str(self.settings.get("SIMHASH_MAX_DISTANCE", "auto"))
        labels = (opts.distances or f"{configured},3,7").split(",")
        configurations = []
        for label in dict.fromkeys(label.strip() for label in labels if label.strip()):
            settings = self.settings.copy()
            settings.set("SIMHASH_MAX_DISTANCE", label, priority="cmdline")
            try:
                max_distance, layout = decision_parameters(read(settings, "eval"))
            except ValueError as exc:
                raise UsageError(f"distance {label!r}: {exc}", print_help=False) from None
            configurations.append(Configuration(label, max_distance, layout))

        thresholds = sorted(set(opts.thresholds or (*THRESHOLDS, config.jaccard_threshold)))
        if not all(0.0 < t <= 1.0 for t in thresholds):
            raise UsageError(f"Jaccard thresholds must lie in (0, 1], got {thresholds}", print_help=False)
        try:
            documents = read_documents(args[0], config.fields)[: opts.limit]
        except OSError as exc:
            raise UsageError(f"cannot read {args[0]}: {exc}", print_help=False) from None
        fingerprinter = Fingerprinter(width=config.shingle_width, weighting=config.weighting)
        started = time.perf_counter()
        signatures = [fingerprinter.signature(document.text) for document in documents]
        truth = ground_truth([s.shingles for s in signatures], thresholds[0])
        print(
            f"{len(documents)} documents, fields {config.fields}, shingle width {config.shingle_width}, "
            f"{config.weighting} weighting: {len(truth)} pairs with Jaccard >= {thresholds[0]} "
            f"(brute force, {time.perf_counter() - started:.1f}s)"
        )
        table, decisions = [], []
        for configuration in configurations:
            run = asyncio.run(run_configuration(configuration, documents, signatures, opts.redis_url))
            table += rows(run, truth, thresholds)
            decisions.append(
                asyncio.run(
                    run_pipeline_decisions(configuration, signatures, truth, config.jaccard_threshold, opts.redis_url)
                )
            )
        print(format_rows(table))
        print(
            "recall/precision: index candidates within the distance, confirmed by Jaccard on the stored hashes, "
            "against brute force; cand.prec: share of returned candidates that are true pairs; "
            "random@1M: records a lookup reads in an index of 1M random fingerprints (exact, from the layout); "
            "ms/doc: lookup and insert",
        )
        print(
            "\nThe pipeline's decisions (only canonicals indexed): documents that have an earlier one with "
            f"Jaccard >= {config.jaccard_threshold} (should), flagged as duplicates, and the canonicals kept"
        )
        print(format_pipeline_runs(decisions), flush=True)
        if opts.plot:
            plot(table, opts.plot)
            print(f"plot written to {opts.plot}")
