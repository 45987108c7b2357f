"""Text from items and stores made safe for a log line: control characters escaped as Python writes them.

An id, URL or host is whatever a site or a spider put there; a newline in one would start a forged
line in Scrapy's log, and an escape sequence would repaint a terminal.
"""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str) -> str:
    """``text`` with every character that is not printable (``\\n``, ``\\x1b``, ``\\u2028``...) written
    as in a Python string literal; printable text is returned as it is."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
