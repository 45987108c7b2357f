"""JSON-lines merge logs on a real filesystem: a line is whole or absent, on a full disk too.

Issue 15.4: on a full 2 MB filesystem the log ended in a cut-off line, readers refused the whole
file, later crawls appended after it, and buffered records of failed writes were flushed later.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from scrapy_simhash.mergelog import MergeLogError, erase_pages, open_merge_log, read_merge_log, review_record
from merge_records import record


@pytest.fixture
def small_disk(tmp_path: Path):
    """A directory on a 2 MB tmpfs of this test's own, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 2 MB tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def fill(directory: Path, leave: int) -> Path:
    """A file that takes all but about ``leave`` bytes of the filesystem's free space."""
    stats = os.statvfs(directory)
    filler = directory / "filler"
    filler.write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - leave))
    return filler


def whole_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), data[-80:]
    return [json.loads(line) for line in data.splitlines()]


async def test_a_full_disk_leaves_whole_lines_and_nothing_to_flush_later(small_disk: Path) -> None:
    path = small_disk / "review.jsonl"
    filler = fill(small_disk, leave=64 * 1024)
    log = open_merge_log(str(path), "unused")
    taken, refused = [], []
    try:
        for n in range(200):  # an item's three records, ~9 KB: the disk fills in the middle of one
            records = [review_record(record(duplicate=f"d{n}-{k}"), "word " * 600) for k in range(3)]
            try:
                await log.write(records)
            except MergeLogError as exc:
                assert isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.ENOSPC
                refused += records
                if len(refused) >= 6:  # a short write, then a write refused at once
                    break
            else:
                taken += records
        assert taken and refused
        assert whole_lines(path) == taken
        filler.unlink()  # space comes back: nothing of the refused writes may appear
        later = [record(duplicate="later")]
        await log.write(later)
    finally:
        await log.close()
    assert whole_lines(path) == taken + later
    assert read_merge_log(str(path)).skipped == 0


async def test_a_torn_tail_is_cut_when_a_log_is_opened(tmp_path, caplog) -> None:
    path = tmp_path / "merges.jsonl"
    whole = [record(duplicate="b"), record(duplicate="c")]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in whole) + b'{"timestamp": "2026-12-')
    log = open_merge_log(str(path), "unused")
    await log.write([record(duplicate="d")])
    await log.close()
    assert whole_lines(path) == [*whole, record(duplicate="d")]
    assert "cut a torn last line (23 bytes)" in caplog.text and str(path) in caplog.text


async def test_a_tail_torn_while_the_log_is_open_is_cut_before_the_next_line(tmp_path) -> None:
    """Another writer (a killed crawl, another process) leaves half a line: the next line is not glued to it."""
    path = tmp_path / "merges.jsonl"
    log = open_merge_log(str(path), "unused")
    try:
        await log.write([record(duplicate="b")])
        with open(path, "ab") as other:
            other.write(json.dumps(record(duplicate="torn")).encode()[:40])
        await log.write([record(duplicate="c")])
    finally:
        await log.close()
    assert whole_lines(path) == [record(duplicate="b"), record(duplicate="c")]


async def test_a_write_that_cannot_check_the_path_leaves_the_log_unlocked(tmp_path) -> None:
    """The path stops resolving (a directory on it turned into a symlink loop): the write fails, and a
    rewrite in another process can still take the file's lock."""
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "merges.jsonl"
    log = open_merge_log(str(path), "unused")
    try:
        await log.write([record(duplicate="b")])
        (tmp_path / "logs").rename(tmp_path / "moved")
        (tmp_path / "logs").symlink_to("logs")  # os.stat of the path: ELOOP, not "not found"
        with pytest.raises(MergeLogError):
            await log.write([record(duplicate="c")])
        other = os.open(tmp_path / "moved" / "merges.jsonl", os.O_RDONLY)
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while the failed write holds it
        finally:
            os.close(other)
    finally:
        await log.close()


def test_readers_skip_and_count_torn_and_invalid_lines(tmp_path, caplog) -> None:
    path = tmp_path / "merges.jsonl"
    good = [record(duplicate="b"), record(duplicate="c")]
    path.write_bytes(
        json.dumps(good[0]).encode() + b"\n{not json\n[1, 2]\n\n" + b"\xff\xfe\n"
        + json.dumps(good[1]).encode() + b"\n" + json.dumps(record(duplicate="torn")).encode()
    )
    reader = read_merge_log(str(path))
    with caplog.at_level(logging.WARNING):
        assert list(reader) == good
    assert reader.skipped == 4  # invalid JSON, not an object, not UTF-8, the torn last line (a blank line is none)
    assert f"4 torn or invalid merge-log lines skipped in {path}" in caplog.text


async def test_a_log_that_cannot_be_cut_back_says_so_once(small_disk: Path, monkeypatch, caplog) -> None:
    """A log on a full disk that cannot be truncated either (an append-only attribute, a failing
    device) fails every write and every cut back: one error line says why. The disk is really full;
    the refused truncation is staged, as no filesystem at hand refuses one cheaply."""
    log = open_merge_log(str(small_disk / "merges.jsonl"), "unused")
    fill(small_disk, leave=0)

    def refuse(fd: int, length: int) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "ftruncate", refuse)
    try:
        for _ in range(3):
            with pytest.raises(MergeLogError):
                await log.write([record()])
    finally:
        await log.close()
    assert sum("could not cut a failed write back" in r.getMessage() for r in caplog.records) == 1


def test_a_merge_log_that_is_no_regular_file_is_refused(tmp_path) -> None:
    """A FIFO nobody reads would take 64 kB of records, then block the crawl in a write for good;
    a device cannot be cut back or rewritten. The writer refuses both at open."""
    fifo = tmp_path / "merges.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="merges.fifo is not a regular file"):
        open_merge_log(str(fifo), "")


async def test_an_erasure_leaves_a_log_path_that_is_no_regular_file_alone(tmp_path) -> None:
    """An erasure renames a new file over the log: over a FIFO or ``/dev/null`` that would put a
    file of records in its place."""
    fifo = tmp_path / "merges.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        await erase_pages(str(fifo), ["https://example.com/a"])
    assert fifo.is_fifo() and [p.name for p in tmp_path.iterdir()] == ["merges.fifo"]
