"""JSON-lines input files (corpora, labelled pairs, feed exports): one object per line, read lazily,
gzipped or not.

A line that is not a JSON object is logged with its number and skipped, and the count is said at
the end: bad input is never fatal and never silently lost. A file that is not UTF-8 text is refused
(``OSError``, which the commands report as a file they cannot read).
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["json_objects"]

logger = logging.getLogger(__name__)


def json_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every line of ``path`` that holds a JSON object; a file that is
    one JSON array (a Scrapy ``json`` feed) gives its objects, numbered from 1."""
    try:
        yield from _objects(path)
    except UnicodeDecodeError as exc:
        raise OSError(f"not UTF-8 text ({exc.reason})") from None


def _text(path: str | Path) -> IO[str]:
    with Path(path).open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if gzipped else Path(path).open(encoding="utf-8")


def _objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    skipped = 0
    with _text(path) as lines:
        if lines.read(4096).lstrip().startswith("["):
            lines.seek(0)
            for number, value in enumerate(json.load(lines), 1):
                if isinstance(value, dict):
                    yield number, value
                else:
                    skipped += 1
        else:
            lines.seek(0)
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    value = None
                if isinstance(value, dict):
                    yield number, value
                    continue
                skipped += 1
                logger.warning("%(path)s:%(line)d: not a JSON object, skipped", {"path": path, "line": number})
    if skipped:
        logger.warning("%(skipped)d entries of %(path)s were skipped", {"skipped": skipped, "path": path})
