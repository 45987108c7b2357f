"""``scrapy simhash-tune LABELLED.jsonl``: the distance and Jaccard threshold that separate labelled pairs best."""

from __future__ import annotations

import argparse

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_simhash.calibration import calibrate
from scrapy_simhash.commands import number_list
from scrapy_simhash.evaluate import read_documents
from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.settings import read
from scrapy_simhash.tune import (
    DISTANCES,
    THRESHOLDS,
    format_rows,
    grid,
    read_labelled,
    recommend,
    score_pairs,
    settings_lines,
)

SHOWN_DISTANCES = (3, 5, 7, 9, 11, 13, 15, 17, 19)
SHOWN_THRESHOLDS = (0.6, 0.7, 0.8, 0.82, 0.85, 0.9, 0.95)


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "[options] LABELLED.jsonl"

    def short_desc(self) -> str:
        return "Find the max distance and Jaccard threshold that best separate labelled duplicate/distinct pairs"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--corpus", help="JSON-lines documents that pairs given by id refer to")
        parser.add_argument(
            "--distances", type=number_list(int), default=list(SHOWN_DISTANCES), help="distances to print"
        )
        parser.add_argument(
            "--thresholds", type=number_list(float), default=list(SHOWN_THRESHOLDS), help="thresholds to print"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one labelled-pairs file (JSON lines)")
        assert self.settings is not None
        config = read(self.settings, "tune")
        try:
            texts = {d.id: d.text for d in read_documents(opts.corpus, config.fields)} if opts.corpus else None
            pairs = read_labelled(args[0], texts)
        except OSError as exc:
            raise UsageError(f"cannot read {exc.filename}: {exc.strerror}", print_help=False) from None
        if not pairs:
            raise UsageError(f"no usable labelled pair in {args[0]}", print_help=False)
        scored = score_pairs(pairs, Fingerprinter(width=config.shingle_width, weighting=config.weighting))
        duplicates = [p for p in scored if p.duplicate]
        distinct = [p for p in scored if not p.duplicate]
        print(f"{len(duplicates)} duplicate and {len(distinct)} distinct pairs")
        for name, group in (("duplicate", duplicates), ("distinct", distinct)):
            if group:
                print(
                    f"  {name}: distance {min(p.distance for p in group)}..{max(p.distance for p in group)}, "
                    f"Jaccard {min(p.jaccard for p in group):.3f}..{max(p.jaccard for p in group):.3f}"
                )
        print(format_rows(grid(scored, opts.distances, opts.thresholds)))
        best = recommend(grid(scored, DISTANCES, THRESHOLDS), config.jaccard_threshold)
        print(
            f"\nBest separation (distance 0..{DISTANCES[-1]}, Jaccard {THRESHOLDS[0]}..{THRESHOLDS[-1]}): "
            f"precision {best.scores.precision:.3f}, recall {best.scores.recall:.3f}, F1 {best.scores.f1:.3f}. "
            "Settings to paste:\n"
        )
        try:
            auto_distance = calibrate(best.threshold, config.target_recall).max_distance
        except ValueError:  # a threshold outside the calibrated range: an integer distance it is
            auto_distance = None
        print(settings_lines(best, auto_distance))
