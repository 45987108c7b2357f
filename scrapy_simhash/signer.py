"""Signs the texts of the items in flight together.

Scrapy hands the items a callback yields to up to ``CONCURRENT_ITEMS`` pipeline calls at once, and
they reach the pipeline in the same turn of the event loop (a listing page's 50 items: one turn).
A short text's signature and sketch cost their numpy calls more than its characters, so the short
texts submitted in one turn are signed in batches (:meth:`Fingerprinter.signatures`,
:meth:`Layout.sketches`), and a page-length text alone, at once: its item does not wait for the
turn's batch, a wait that keeps its response in Scrapy's scraper and costs the crawl a resumption
of the item's whole coroutine chain. docs/decisions/signing-batches.md has the figures. A text the
learner tokenised comes with its shingling, and is signed from it at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from scrapy_simhash.fingerprint import Fingerprinter, Shingling, Signature
from scrapy_simhash.minhash import Layout

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = ["BATCH_CHARACTERS", "SIGNED_ALONE", "Signed", "Signer"]

T = TypeVar("T")

#: Characters signed in one batch at most. Each batch is a loop callback of its own whose items go on
#: to their lookups before the next batch is signed, so the index works on a turn's first items while
#: the crawl signs the rest (docs/decisions/signing-batches.md).
BATCH_CHARACTERS = 1 << 15
#: A text at least this long is signed alone and at once: a batch saves each text the same few numpy
#: calls, little beside such a text's own work, and its item would wait for the turn.
SIGNED_ALONE = 1 << 12


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
        self.stats = stats  # simhash/fingerprint_batch_max: the most texts one turn brought
        self._waiting: list[tuple[str, asyncio.Future[Signed]]] = []

    async def sign(self, text: str, shingling: Shingling | None = None) -> Signed:
        """``text``'s signature: at once for a page-length text, signed alone in any case; a shorter
        text's with the other short texts submitted in this turn of the loop. Given ``text``'s
        shingling (the learner tokenised it), at once from it: no tokenisation is left to share."""
        if shingling is not None:
            signature = self.fingerprinter.signature(shingling)
            [sketch] = self.layout.sketches([signature.hashes])
            return Signed(shingling.words, signature, sketch)
        if len(text) >= SIGNED_ALONE:
            [signed] = self._sign_batch([text])
            return signed
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Signed] = loop.create_future()
        self._waiting.append((text, future))
        if len(self._waiting) == 1:
            loop.call_soon(self._sign_waiting)
        return await future

    def sign_all(self, texts: list[str]) -> list[Signed]:
        """The signatures of ``texts``, in their order, signed in the batches one turn's texts would be."""
        signed: dict[int, Signed] = {}
        for batch in _batches(list(enumerate(texts)), key=lambda one: one[1]):
            signed.update(zip((at for at, _ in batch), self._sign_batch([text for _, text in batch])))
        return [signed[at] for at in range(len(texts))]

    def _sign_batch(self, texts: list[str]) -> list[Signed]:
        signed = self.fingerprinter.signatures(texts)
        sketches = self.layout.sketches([signature.hashes for _, signature in signed])
        return [Signed(words, signature, sketch) for (words, signature), sketch in zip(signed, sketches, strict=True)]

    def _sign_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        if self.stats is not None:
            self.stats.max_value("simhash/fingerprint_batch_max", len(waiting))
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
    """The entries whose texts (``key``) are shorter than :data:`SIGNED_ALONE`, in order, in runs of at
    most :data:`BATCH_CHARACTERS` characters; then each of the others alone, in order."""
    run: list[T] = []
    alone: list[T] = []
    size = 0
    for entry in entries:
        length = len(key(entry))
        if length >= SIGNED_ALONE:
            alone.append(entry)
            continue
        if run and size + length > BATCH_CHARACTERS:
            yield run
            run, size = [], 0
        run.append(entry)
        size += length
    if run:
        yield run
    for entry in alone:
        yield [entry]
