"""Progress of the long commands: a bar on a terminal, a line every few seconds otherwise."""

from __future__ import annotations

import io
import json
from argparse import Namespace

from scrapy.settings import Settings

from scrapy_simhash.commands.reevaluate import Command as ReevaluateCommand
from scrapy_simhash.offline import progress as progress_module
from scrapy_simhash.offline.evaluate import ground_truth
from scrapy_simhash.offline.progress import Progress, progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_a_terminal_a_line_every_interval_and_the_last_figures():
    clock, out = Clock(), io.StringIO()
    shown = Progress("documents", 100, out, interval=5.0, clock=clock)
    for step in range(1, 101):
        clock.now = step * 0.2  # 20 s in all
        shown.update()
    shown.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "documents: 25 of 100 (25%), 5 s"
    assert len(lines) == 5 and lines[-1] == "documents: 100 of 100 (100%), 20 s"


def test_a_short_task_says_nothing_and_an_unknown_total_counts():
    clock, out = Clock(), io.StringIO()
    with Progress("records", None, out, interval=5.0, clock=clock) as shown:
        shown.update(3)
    assert out.getvalue() == ""
    with Progress("records", None, out, interval=5.0, clock=clock) as shown:
        clock.now = 6.0
        shown.update(7)
    assert out.getvalue().splitlines()[0] == "records: 7, 6 s"


def test_on_a_terminal_a_bar():
    out = Terminal()
    assert list(progress(range(50), "documents", stream=out)) == list(range(50))
    assert "\rdocuments:" in out.getvalue() and "/50 [" in out.getvalue()  # a bar drawn, redrawn in place


def test_eval_brute_force_reports_progress(monkeypatch, capsys):
    import numpy as np

    monkeypatch.setattr(progress_module, "LINE_INTERVAL", 0.0)
    sets = [np.arange(i, i + 50, dtype=np.uint32) for i in range(4)]
    ground_truth(sets, 0.8)
    assert "brute-force Jaccard, documents: 4 of 4 (100%)" in capsys.readouterr().err


def test_reevaluate_reports_progress(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(progress_module, "LINE_INTERVAL", 0.0)
    log = tmp_path / "merges.jsonl"
    log.write_text("".join(json.dumps({"decision": "merged", "distance": 3, "jaccard": 0.9}) + "\n" for _ in range(3)))
    command = ReevaluateCommand()
    command.settings = Settings()
    command.run([str(log)], Namespace(threshold=0.95))
    captured = capsys.readouterr()
    assert "merge-log records: 3" in captured.err and "3 of 3 decisions flip" in captured.out


def test_short_tasks_one_after_another_are_not_silent():
    clock, out = Clock(), io.StringIO()
    for task in range(4):  # each 3 s, shorter than the interval
        with Progress(f"task {task}", 3, out, interval=5.0, clock=clock) as shown:
            for _ in range(3):
                clock.now += 1.0
                shown.update()
    assert out.getvalue().splitlines()[0] == "task 1: 2 of 3 (67%), 2 s"
