"""``scrapy simhash-tune LABELLED.jsonl``: the Jaccard threshold that separates labelled pairs best."""

from __future__ import annotations

import argparse

from scrapy.exceptions import UsageError

from scrapy_simhash.calibration import calibrated_layout
from scrapy_simhash.commands import LineBreaksHelpFormatter, SimhashCommand, number_list
from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.offline.evaluate import read_documents
from scrapy_simhash.offline.tune import (
    GRID,
    LOGGED_TOLERANCE,
    format_separations,
    read_labelled,
    recommend,
    score_pairs,
    separations,
)
from scrapy_simhash.settings import read

SHOWN_THRESHOLDS = (0.6, 0.7, 0.8, 0.82, 0.85, 0.9, 0.95)


class Command(SimhashCommand):
    def syntax(self) -> str:
        return "[options] LABELLED.jsonl [LABELLED.jsonl ...]"

    def short_desc(self) -> str:
        return "Find the Jaccard threshold that best separates labelled duplicate/distinct pairs"

    def long_desc(self) -> str:
        return (
            f"{self.short_desc()}.\n\n"
            "LABELLED.jsonl holds one JSON object per line (several files are read as one); a side is\n"
            "a text, or the id of a document of --corpus:\n"
            '  {"a": {"text": "..."}, "b": {"text": "..."}, "label": "duplicate"}\n'
            '  {"a": "doc-1", "b": "doc-7", "label": "distinct"}\n'
            "The review page (scrapy simhash-review) downloads the pairs a reviewer marked in this form,\n"
            "with the Jaccard the crawl logged for each (\"jaccard\"): tune says whether it scores the same."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.formatter_class = LineBreaksHelpFormatter
        parser.add_argument(
            "--corpus", help="JSON-lines documents that pairs given by id refer to, read as simhash-eval reads them"
        )
        parser.add_argument(
            "--thresholds", type=number_list(float), default=list(SHOWN_THRESHOLDS), help="thresholds to print"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("give a labelled-pairs file (JSON lines), or several")
        assert self.settings is not None
        config = read(self.settings, "tune")
        try:
            texts = {d.id: d.text for d in read_documents(opts.corpus, config.fields)} if opts.corpus else None
            pairs = [pair for path in args for pair in read_labelled(path, texts)]
        except OSError as exc:
            raise UsageError(f"cannot read {exc.filename}: {exc.strerror}", print_help=False) from None
        if not pairs:
            raise UsageError(f"no usable labelled pair in {', '.join(args)}", print_help=False)
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
        logged = [p for p in scored if p.logged is not None]
        if logged:
            same = sum(p.as_logged for p in logged)
            others = "" if same == len(logged) else ": the others' texts are not those compared"
            print(f"  {same} of {len(logged)} pairs score here the Jaccard the crawl logged for them "
                  f"(within {LOGGED_TOLERANCE}){others}")
        print(format_separations(separations(scored, opts.thresholds)))
        best = recommend(separations(scored, GRID), config.jaccard_threshold)
        print(
            f"\nBest separation (Jaccard {GRID[0]}..{GRID[-1]}): precision {best.scores.precision:.3f}, "
            f"recall {best.scores.recall:.3f}, F1 {best.scores.f1:.3f}. Settings to paste:\n"
        )
        print(f"SIMHASH_JACCARD_THRESHOLD = {best.threshold:.2f}")
        try:
            layout = calibrated_layout(best.threshold, config.target_recall)["layout"]
        except ValueError as exc:
            print(f"# no calibrated layout for it: {exc}")
        else:
            print(f"# the calibrated index layout for it: {layout['bands']} bands x {layout['rows']} rows")
