"""Signs the texts of the items in flight together.

Scrapy hands the items a callback yields to up to ``CONCURRENT_ITEMS`` pipeline calls at once, and
they reach the pipeline in the same turn of the event loop (a listing page's 50 items: one turn).
A short text's signature and sketch cost their numpy calls more than its characters, so the texts
submitted in one turn are signed in batches (:meth:`Fingerprinter.signatures`,
:meth:`Layout.sketches`): docs/benchmarks.md "Fingerprinting" has the figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from scrapy_simhash.fingerprint import Fingerprinter, Signature
from scrapy_simhash.layout import Layout

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = ["BATCH_CHARACTERS", "Signed", "Signer"]

T = TypeVar("T")

#: Characters signed in one batch at most: a batch's arrays take tens of bytes a character, and a
#: turn can bring CONCURRENT_ITEMS texts of SIMHASH_MAX_CHARS each. A longer text is signed alone.
BATCH_CHARACTERS = 1 << 18


@dataclass(frozen=True)
class Signed:
    """A text's token count, signature and sketch."""

    words: int
    signature: Signature
    sketch: bytes


class Signer:
    """Signs texts under one fingerprinter and layout, batching those submitted in one loop turn."""

    def __init__(self, fingerprinter: Fingerprinter, layout: Layout, stats: StatsCollector | None = None) -> None:
        self.fingerprinter = fingerprinter
        self.layout = layout
        self.stats = stats  # simhash/signed_together_max: the most texts one turn brought
        self._waiting: list[tuple[str, asyncio.Future[Signed]]] = []

    async def sign(self, text: str) -> Signed:
        """``text``'s signature, signed with the other texts submitted in this turn of the loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Signed] = loop.create_future()
        self._waiting.append((text, future))
        if len(self._waiting) == 1:
            loop.call_soon(self._sign_waiting)
        return await future

    def sign_all(self, texts: list[str]) -> list[Signed]:
        """The signatures of ``texts``, in batches of at most :data:`BATCH_CHARACTERS` characters."""
        return [one for batch in _batches(texts) for one in self._sign_batch(batch)]

    def _sign_batch(self, texts: list[str]) -> list[Signed]:
        signed = self.fingerprinter.signatures(texts)
        sketches = self.layout.sketches([signature.hashes for _, signature in signed])
        return [Signed(words, signature, sketch) for (words, signature), sketch in zip(signed, sketches, strict=True)]

    def _sign_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        if self.stats is not None:
            self.stats.max_value("simhash/signed_together_max", len(waiting))
        self._sign_batches(list(_batches(waiting, key=lambda one: one[0])), 0)

    def _sign_batches(self, batches: list[list[tuple[str, asyncio.Future[Signed]]]], at: int) -> None:
        """Sign a turn's batch ``at``, and let the loop run before the next: a turn of long texts
        signed in one callback would hold it for seconds."""
        batch = [(text, future) for text, future in batches[at] if not future.done()]  # not cancelled
        try:
            signed = self._sign_batch([text for text, _ in batch]) if batch else []
        except Exception as exc:  # a bug of ours: the batch's items are passed on unchecked, loudly
            for _, future in batch:
                future.set_exception(exc)
        else:
            for (_, future), one in zip(batch, signed, strict=True):
                future.set_result(one)
        if at + 1 < len(batches):  # after this batch's items, which go on to their lookups first
            asyncio.get_running_loop().call_soon(self._sign_batches, batches, at + 1)


def _batches(entries: list[T], key: Callable[[T], str] = lambda text: text) -> Iterator[list[T]]:
    """``entries`` in order, cut into runs whose texts (``key``) hold at most :data:`BATCH_CHARACTERS`
    characters together; a longer text makes a run of its own."""
    start = 0
    while start < len(entries):
        end, size = start + 1, len(key(entries[start]))
        while end < len(entries) and size + len(key(entries[end])) <= BATCH_CHARACTERS:
            size += len(key(entries[end]))
            end += 1
        yield entries[start:end]
        start = end
