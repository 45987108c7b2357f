"""The merge log as a JSON-lines file: one compact JSON object per line, UTF-8; a line is whole or absent.

An item's records are one ``os.write`` on an ``O_APPEND`` descriptor under an exclusive ``flock``,
with nothing buffered in Python: a short or failed write is cut back to where it started, and a torn
last line, whoever left it, is cut before the next line is written. A rewrite (erasure, expiry)
takes the same lock, writes a new file beside the log, fsyncs it and renames it over the log;
writers find the file at the path changed and reopen it.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from scrapy_simhash.mergelog.base import LogRewrite, LogStore, MergeLog, MergeLogError, Tally
from scrapy_simhash.mergelog.record import REMOVE, Edit

logger = logging.getLogger(__name__)

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_WRITE_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_REWRITE_FLAGS = os.O_RDWR | os.O_CLOEXEC
_TAIL_CHUNK = 64 * 1024


def encode_lines(records: Sequence[dict[str, Any]]) -> bytes:
    """The records as JSON lines; ValueError or TypeError for a record that is not JSON data."""
    return "".join([_encode(record) + "\n" for record in records]).encode()


def open_log(path: str, flags: int) -> int:
    """A descriptor of the log file at ``path``; ValueError if it is no regular file. A FIFO nobody
    reads would block a write, and the crawl with it, once its buffer is full; a rewrite renames a
    new file over the log, which would put a file in place of a FIFO or a device."""
    fd = os.open(path, flags, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file (erasure and retention rewrite a merge log in place)")
    return fd


def current_size(fd: int, path: str) -> int | None:
    """The size of ``fd``'s file if it is still the file at ``path`` (a rewrite renames a new file
    over it), else None: one ``fstat`` tells both."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return None
    held = os.fstat(fd)
    return held.st_size if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino) else None


def lock_current(path: str, fd: int, flags: int) -> int:
    """``fd`` exclusively locked (waiting for the lock) if it is still the file at ``path``; else the
    file now at ``path``, opened with ``flags`` and locked. ``fd`` is closed when it is not returned."""
    try:
        while True:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if current_size(fd, path) is not None:
                return fd
            os.close(fd)
            fd = -1
            fd = open_log(path, flags)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def cut_torn_tail(fd: int, where: str, size: int | None = None) -> int:
    """Cut a last line that has no newline (a write cut short); the size of the file after that.
    ``size``: the file's, when the caller has just read it under the lock."""
    if size is None:
        size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    os.ftruncate(fd, end)
    logger.warning(
        "Merge log %(where)s: cut a torn last line (%(bytes)d bytes), left by a write cut short",
        {"where": where, "bytes": size - end},
    )
    return end


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class FileMergeLog(MergeLog):
    """Appends an item's records to a JSON-lines file in one write; a recrawl extends the same file.

    A write takes every record of the item or raises :class:`MergeLogError` with the file as it was.
    The file is reopened when a rewrite (erasure, expiry) has replaced it.
    """

    def __init__(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.where = path
        self._fd = open_log(path, _WRITE_FLAGS)
        self._turn = asyncio.Lock()  # one write at a time: a process's writes share one flock
        self._cut_failed = False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a rewrite holds it: the first write cuts a torn tail instead
        try:
            cut_torn_tail(self._fd, self.where)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    async def _lock(self) -> tuple[int, int | None]:
        """The descriptor of the file now at the path, exclusively locked, and its size if known."""
        if self._fd < 0:  # a reopen failed before
            self._fd = open_log(self.path, _WRITE_FLAGS)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            try:
                size = current_size(self._fd, self.path)
            except BaseException:  # the path cannot be checked: no other process may wait on this write
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                raise
            if size is not None:
                return self._fd, size
        # A rewrite holds the lock or has replaced the file: wait and reopen off the event loop. The
        # thread cannot be cancelled: if this write is, the descriptor it returns is closed (unlocked).
        fd, self._fd = self._fd, -1
        waiting = asyncio.ensure_future(asyncio.to_thread(lock_current, self.path, fd, _WRITE_FLAGS))
        try:
            self._fd = await asyncio.shield(waiting)
        except asyncio.CancelledError:
            waiting.add_done_callback(_close_result)
            raise
        return self._fd, None

    async def write(self, records: Sequence[dict[str, Any]]) -> None:
        try:
            data = encode_lines(records)
        except (TypeError, ValueError) as exc:
            raise MergeLogError(f"merge-log records are not JSON data: {exc}") from None
        async with self._turn:
            try:
                fd, size = await self._lock()
            except OSError as exc:
                raise MergeLogError(f"could not open merge log {self.where}: {exc}") from exc
            try:
                self._append(fd, size, data)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _append(self, fd: int, size: int | None, data: bytes) -> None:
        try:
            start = cut_torn_tail(fd, self.where, size)
        except OSError as exc:
            raise MergeLogError(f"could not cut a torn last line of merge log {self.where}: {exc}") from exc
        try:
            _write_all(fd, data)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError as cut:  # the next write, open or reader deals with the torn line
                if not self._cut_failed:  # a file that cannot be truncated fails this on every write
                    self._cut_failed = True
                    logger.error("Merge log %(where)s: could not cut a failed write back: %(error)s (said once)",
                                 {"where": self.where, "error": cut})
            raise MergeLogError(f"could not append to merge log {self.where}: {exc}") from exc

    async def close(self) -> None:
        async with self._turn:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _close_result(done: asyncio.Future[int]) -> None:
    if not done.cancelled() and done.exception() is None:
        os.close(done.result())


def read_lines(path: str) -> Iterator[dict[str, Any] | None]:
    """The records of a JSON-lines file; None for a torn last line, invalid JSON or a non-object."""
    with open(path, "rb") as lines:
        for line in lines:
            if not line.endswith(b"\n"):
                yield None
            elif line.strip():
                yield _parse(line)


def rewrite_file(path: str, edit: Edit, where: str) -> LogRewrite:
    """Apply ``edit`` to a JSON-lines log under the writers' lock; see :meth:`FileStore.rewrite`."""
    try:
        fd = lock_current(path, open_log(path, _REWRITE_FLAGS), _REWRITE_FLAGS)
    except FileNotFoundError:
        return LogRewrite(where)
    try:
        cut_torn_tail(fd, where)
        with os.fdopen(os.dup(fd), "rb") as lines:
            probe = Tally(edit)
            _probe(lines, probe)
            if not probe.changes:
                return probe.report(where, rewritten=False)
            lines.seek(0)
            tally = Tally(edit)
            _write_beside(path, fd, lambda out: _edit_lines(lines, out, tally))
        return tally.report(where, rewritten=True)
    finally:
        os.close(fd)  # releases the lock: writers waiting for it find the new file


def _probe(lines: BinaryIO, probe: Tally) -> None:
    """Judge lines up to the first change, or until the rest stays as it is."""
    for line in lines:
        if line.strip() and probe.judge(_parse(line), line) is not None or probe.finished:
            return


def _edit_lines(lines: BinaryIO, out: BinaryIO, tally: Tally) -> None:
    for line in lines:
        outcome = tally.judge(_parse(line), line) if line.strip() else None
        if outcome is None:
            out.write(line)
        elif outcome is not REMOVE:
            out.write(encode_lines([outcome]))
        if tally.finished:
            shutil.copyfileobj(lines, out)  # the rest stays as it is
            return


def _write_beside(path: str, fd: int, fill: Callable[[BinaryIO], None]) -> None:
    """A new file written by ``fill``, fsynced, with ``fd``'s mode, renamed over ``path`` (and the rename fsynced)."""
    directory, name = os.path.split(os.path.abspath(path))
    temp_fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".rewrite", dir=directory)
    try:
        with os.fdopen(temp_fd, "wb") as out:
            fill(out)
            out.flush()
            os.fchmod(out.fileno(), stat.S_IMODE(os.fstat(fd).st_mode))
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class FileStore(LogStore):
    def __init__(self, path: str) -> None:
        self.path = path
        self.where = path

    def writer(self) -> FileMergeLog:
        return FileMergeLog(self.path)

    def entries(self) -> Iterator[dict[str, Any] | None]:
        return read_lines(self.path)

    async def rewrite(self, edit: Edit) -> LogRewrite:
        """Under the writers' lock: a new file beside the log, fsynced, renamed over it (in a thread)."""
        return await asyncio.to_thread(rewrite_file, self.path, edit, self.where)
