"""What every merge-log backend offers: a writer for the pipeline, reading, and rewriting (erasure, expiry).

A backend is picked from a URI by :func:`scrapy_simhash.mergelog.log_store`; nothing else knows which.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scrapy_simhash.mergelog.record import REMOVE, Edit, Expiry, Removed

__all__ = ["LogRewrite", "LogStore", "MergeLog", "MergeLogError", "Tally"]


class MergeLogError(Exception):
    """Records were not taken (none of them): the pipeline keeps the item rather than drop it unrecorded."""


class MergeLog(ABC):
    """Where the pipeline writes records; :func:`scrapy_simhash.mergelog.open_merge_log` opens one."""

    #: The log's address for messages and stats, credentials masked.
    where: str

    @abstractmethod
    async def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Write one item's records, in order: all of them, or none and :class:`MergeLogError`."""

    async def check(self) -> None:
        """:class:`MergeLogError` for a log that will refuse every record (wrong credentials): said at open."""

    @abstractmethod
    async def close(self) -> None: ...


@dataclass(frozen=True)
class LogRewrite:
    """What an erasure or an expiry did to one log."""

    where: str
    redacted: int = 0  # records with an erased side
    removed: int = 0  # records removed (expired)
    unreadable_removed: int = 0  # lines or entries that are not records, removed because they named an erased page
    unjudged: int = 0  # lines or entries kept because they could not be judged (not records; unknown class or time)
    rewritten: bool = False  # False: nothing to change, the log was left as it was


class Tally:
    """Applies an :class:`Edit` to a log's entries in order, and counts what it did."""

    def __init__(self, edit: Edit) -> None:
        self.edit = edit
        self.redacted = self.removed = self.unreadable_removed = self.unjudged = 0
        self.finished = False  # every later entry stays as it is

    def judge(self, record: dict[str, Any] | None, raw: bytes) -> dict[str, Any] | Removed | None:
        """What becomes of an entry (``record`` None: not a record; ``raw``: its bytes), as :class:`Edit` says."""
        if self.finished:
            return None
        if record is not None and self.edit.done(record):
            self.finished = True
            return None
        try:
            outcome = None if record is None else self.edit(record)
        except (ValueError, TypeError):  # a record in an odd shape: judged by its bytes, as unreadable ones
            record = None
        if record is not None and outcome is not REMOVE:
            left = raw if outcome is None else json.dumps(outcome).encode()
            if not self.edit.keeps_unreadable(left):  # still names a page outside its sides (another shape)
                record = None
        if record is None:
            if self.edit.keeps_unreadable(raw):
                self.unjudged += 1
                return None
            self.unreadable_removed += 1
            return REMOVE
        if outcome is REMOVE:
            self.removed += 1
        elif outcome is not None:
            self.redacted += 1
        return outcome

    @property
    def changes(self) -> int:
        return self.redacted + self.removed + self.unreadable_removed

    def report(self, where: str, rewritten: bool) -> LogRewrite:
        return LogRewrite(where, self.redacted, self.removed, self.unreadable_removed, self.unjudged, rewritten)


class LogStore(ABC):
    """One merge log at one address (a file, a stream)."""

    where: str

    @abstractmethod
    def writer(self) -> MergeLog: ...

    @abstractmethod
    def entries(self) -> Iterator[dict[str, Any] | None]:
        """Every record, oldest first; None for a line or entry that cannot be read as one."""

    @abstractmethod
    async def rewrite(self, edit: Edit) -> LogRewrite:
        """Apply ``edit`` to every record, leaving no byte of a removed or replaced one behind; when it
        changes nothing, leave the log as it is. Records written meanwhile are kept."""

    async def expire(self, classes: Mapping[str, float | None], now: float) -> LogRewrite:
        """Remove the records older than their retention class's TTL (None: kept for good) at ``now``.

        Logs are written in time order, so the scan stops at the first record younger than the
        shortest TTL; a record of an unknown class or time is kept and counted.
        """
        if all(ttl is None for ttl in classes.values()):
            return LogRewrite(self.where)
        return await self.rewrite(Expiry(classes, now))
