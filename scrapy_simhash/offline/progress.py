"""Progress of the long commands (``simhash-eval``, ``simhash-reevaluate``, ``simhash-review``).

A bar on a terminal (tqdm); elsewhere (a CI log, a file) one line every few seconds, so that a
command that runs for minutes is never silent and a log is not flooded with bar redraws.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO, TypeVar

__all__ = ["LINE_INTERVAL", "Progress", "progress"]

T = TypeVar("T")

#: Seconds between two progress lines when the output is not a terminal.
LINE_INTERVAL = 5.0


class _Silence:
    """When the last progress line was said, by any task of the process, on the clock it was read
    on: a command of many short tasks (each shorter than the interval) is not silent either."""

    clock: Callable[[], float] | None = None
    since = 0.0

    @classmethod
    def start(cls, clock: Callable[[], float]) -> None:
        if cls.clock is not clock:
            cls.clock, cls.since = clock, clock()


class Progress:
    """Counts the steps of one task (``what``, out of ``total`` when known) and shows them on ``stream``
    (standard error: the commands' results go to standard output)."""

    def __init__(
        self,
        what: str,
        total: int | None = None,
        stream: TextIO | None = None,
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.done = what, total, 0
        self.stream = sys.stderr if stream is None else stream
        self.interval, self.clock = LINE_INTERVAL if interval is None else interval, clock
        self.started = clock()
        self._said = False
        _Silence.start(clock)
        self._bar = None
        if _is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, file=self.stream, unit="", leave=False, dynamic_ncols=True)

    def update(self, steps: int = 1) -> None:
        self.done += steps
        if self._bar is not None:
            self._bar.update(steps)
            return
        now = self.clock()
        if now - _Silence.since >= self.interval:
            self._line(now)

    def close(self) -> None:
        """End the bar, or say the last figures when lines were said (a short task says nothing)."""
        if self._bar is not None:
            self._bar.close()
        elif self._said:
            self._line(self.clock())

    def _line(self, now: float) -> None:
        of = f" of {self.total:,} ({self.done / self.total:.0%})" if self.total else ""
        self.stream.write(f"{self.what}: {self.done:,}{of}, {now - self.started:.0f} s\n")
        self.stream.flush()
        self._said, _Silence.since = True, now

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(items: Iterable[T], what: str, total: int | None = None, stream: TextIO | None = None) -> Iterator[T]:
    """``items``, one by one, with their progress shown (see :class:`Progress`)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(what, total, stream) as shown:
        for item in items:
            yield item
            shown.update()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False
