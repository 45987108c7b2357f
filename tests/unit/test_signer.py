"""The signer: the texts of items in flight are signed together, each as it would be alone."""

from __future__ import annotations

import asyncio

from pipeline_harness import finished_at_once
from texts import article

from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.minhash import Layout
from scrapy_simhash.signer import BATCH_CHARACTERS, SIGNED_ALONE, Signer

LAYOUT = Layout(bands=22, rows=6, min_estimate=0.74)


class CountingFingerprinter(Fingerprinter):
    """A fingerprinter that records how many texts each batch held."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def signatures(self, texts):
        self.batches.append(len(texts))
        return super().signatures(texts)


async def test_texts_submitted_in_one_turn_are_signed_in_one_batch() -> None:
    fingerprinter = CountingFingerprinter()
    signer = Signer(fingerprinter, LAYOUT)
    texts = [article(n, words=150) for n in range(40)]
    signed = await asyncio.gather(*map(signer.sign, texts))
    assert fingerprinter.batches == [40]
    for text, one in zip(texts, signed, strict=True):
        alone = Fingerprinter().signature(text)
        assert one.signature.fingerprint == alone.fingerprint and one.sketch == LAYOUT.sketch(alone.hashes)
        assert one.words == 150
    await signer.sign(texts[0])  # alone in its turn
    assert fingerprinter.batches == [40, 1]


async def test_a_batch_holds_a_bounded_number_of_characters() -> None:
    """Batching saves numpy calls on short texts; a batch's arrays stay bounded, and its items do not wait long."""
    fingerprinter = CountingFingerprinter()
    signer = Signer(fingerprinter, LAYOUT)
    text = "word " * (SIGNED_ALONE // 5 - 1)
    per_batch = BATCH_CHARACTERS // len(text)
    signed = await asyncio.gather(*(signer.sign(text) for _ in range(per_batch + 2)))
    assert fingerprinter.batches == [per_batch, 2]
    assert {one.words for one in signed} == {SIGNED_ALONE // 5 - 1}


async def test_a_text_too_long_to_gain_from_a_batch_is_signed_at_once() -> None:
    """A batch saves each text the same few numpy calls, nothing on a page-length one: such a text is
    signed alone, before its item lets the loop run, while the turn's short texts go together."""
    fingerprinter = CountingFingerprinter()
    signer = Signer(fingerprinter, LAYOUT)
    page = "word " * (SIGNED_ALONE // 5 + 1)
    assert 2 * len(page) < BATCH_CHARACTERS  # two would fit one batch
    texts = ["short one", page + "1", page + "2", "short two", "short three"]
    signed = await asyncio.gather(*map(signer.sign, texts))
    assert fingerprinter.batches == [1, 1, 3]
    assert [one.words for one in signed] == [2, SIGNED_ALONE // 5 + 2, SIGNED_ALONE // 5 + 2, 2, 2]


def test_a_page_length_text_is_signed_without_a_wait() -> None:
    """Its item goes on to its lookup in the same step: no turn of the loop, no resumption of the
    item's coroutines (run here without a loop, which a wait would need)."""
    signed = finished_at_once(Signer(Fingerprinter(), LAYOUT).sign("word " * (SIGNED_ALONE // 5 + 1)))
    assert signed.words == SIGNED_ALONE // 5 + 1


def test_sign_all_gives_each_text_its_own_signature_in_order() -> None:
    """The turn's batches put short texts before long ones; the signatures still follow the texts."""
    page = "word " * (SIGNED_ALONE // 5 + 1)
    texts = [page + "one", "short one", page + "two", "short two"]
    signed = Signer(Fingerprinter(), LAYOUT).sign_all(texts)
    for text, one in zip(texts, signed, strict=True):
        alone = Fingerprinter().signature(text)
        assert one.signature.fingerprint == alone.fingerprint and one.sketch == LAYOUT.sketch(alone.hashes)


async def test_a_cancelled_item_is_left_out_of_its_batch() -> None:
    fingerprinter = CountingFingerprinter()
    signer = Signer(fingerprinter, LAYOUT)
    waiting: list[asyncio.Future] = []

    async def cancel_the_second_then_sign() -> object:
        waiting[1].cancel()  # it has submitted its text: the items run in order in this turn
        return await signer.sign(article(2, words=50))

    waiting += [asyncio.ensure_future(signer.sign(article(n, words=50))) for n in range(2)]
    waiting.append(asyncio.ensure_future(cancel_the_second_then_sign()))
    await asyncio.wait(waiting)
    assert fingerprinter.batches == [2] and waiting[1].cancelled() and waiting[2].result().words == 50


class FailingFingerprinter(Fingerprinter):
    """Fault injection: a batch holding a text that starts with "BAD" raises (no real input does)."""

    def signatures(self, texts):
        if any(text.startswith("BAD") for text in texts):
            raise MemoryError("a batch failed")
        return super().signatures(texts)


async def test_a_failed_batch_fails_its_own_items_only() -> None:
    """Items of the same turn in other batches are signed: one failure costs no more than one batch."""
    signer = Signer(FailingFingerprinter(), LAYOUT)
    texts = ["short one", "short two", "BAD " + "word " * (BATCH_CHARACTERS // 5), "short three"]
    outcomes = await asyncio.gather(*map(signer.sign, texts), return_exceptions=True)
    assert [type(outcome).__name__ for outcome in outcomes] == ["Signed", "Signed", "MemoryError", "Signed"]


async def test_the_loop_runs_between_the_batches_of_one_turn() -> None:
    """A turn of texts is signed a batch per loop callback: I/O and other items' work run between
    batches instead of waiting for the whole turn (CONCURRENT_ITEMS texts: seconds)."""
    fingerprinter = CountingFingerprinter()
    signer = Signer(fingerprinter, LAYOUT)
    text = "word " * (SIGNED_ALONE // 5 - 1)
    per_batch = BATCH_CHARACTERS // len(text)
    seen_between: list[list[int]] = []

    def between() -> None:  # queued behind the signer's first callback
        seen_between.append(list(fingerprinter.batches))

    async def queue_between_then_sign(text: str) -> object:
        asyncio.get_running_loop().call_soon(between)  # the first item has queued the signer's callback
        return await signer.sign(text)

    waiting = [asyncio.ensure_future(signer.sign(text + str(n))) for n in range(per_batch)]
    waiting += [asyncio.ensure_future(queue_between_then_sign(text + str(per_batch)))]
    signed = await asyncio.gather(*waiting)
    assert fingerprinter.batches == [per_batch, 1]
    assert seen_between == [[per_batch]]  # after the first batch, before the second
    assert {one.words for one in signed} == {SIGNED_ALONE // 5}  # the number is a word


async def test_an_item_cancelled_while_its_turn_is_signed_is_left_out() -> None:
    """A later batch of the turn skips items cancelled while an earlier batch was signed."""
    fingerprinter = CountingFingerprinter()
    signer = Signer(fingerprinter, LAYOUT)
    text = "word " * (SIGNED_ALONE // 5 - 1)
    per_batch = BATCH_CHARACTERS // len(text)
    waiting: list[asyncio.Future] = []

    async def queue_cancel_then_sign(text: str) -> object:
        asyncio.get_running_loop().call_soon(waiting[-1].cancel)  # runs after the first batch
        return await signer.sign(text)

    waiting += [asyncio.ensure_future(signer.sign(text + str(n))) for n in range(per_batch + 1)]
    waiting.append(asyncio.ensure_future(queue_cancel_then_sign(text + "last")))
    await asyncio.wait(waiting)
    assert fingerprinter.batches == [per_batch, 1] and waiting[-1].cancelled()
    assert {w.result().words for w in waiting[:-1]} == {SIGNED_ALONE // 5}
