"""One tokenisation of a page for the learner and the signer: the kept lines' shingles sign the stripped
text exactly as tokenising it again would (every fingerprint, verification hash, word count, sketch)."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from texts import article

from pipeline_harness import feed, finished_at_once, open_pipeline
from scrapy_simhash.fingerprint import Fingerprinter, segment_hashes, shingled_by_line
from scrapy_simhash.minhash import Layout
from scrapy_simhash.signer import SIGNED_ALONE, Signer

LAYOUT = Layout(bands=22, rows=6, min_estimate=0.74)

# Pieces of lines: sentence ends inside and at the end of a line, numbers and addresses that do not
# end one, a carriage return, empty lines, short segments, spaced and unsegmented scripts, a final
# sigma, a soft hyphen; ASCII or not, every one NFKC-normalised.
_PIECES = [
    "Heating 3.5 euros, e.g. in winter!", "See example.com?q=1 now.", "Menu", "Share this:", "", " ", "...",
    "Bright flat near the park. Viewings on weekday evenings\r", "© 2024 Example News · Privacy — Terms",
    "Über das Café. Straße, naïve résumé.", "ΟΔΟΣ ΣΟΦΟΚΛΕΟΥΣ. Σ", "北京的天气很好。我们去公园", "ภาษาไทยไม่มีช่องว่าง",
    "news\u00adpaper hyphen\u00adated", "a b", "one", "Why? Because!", "مرحبا بالعالم؟ نعم",
]


def _text(rng: random.Random, ascii_only: bool) -> str:
    lines = []
    for _ in range(rng.randrange(0, 30)):
        kind = rng.random()
        if kind < 0.3:
            lines.append(article(rng.randrange(1000), words=rng.randrange(1, 80), paragraph=200))
        else:
            pieces = [piece for piece in _PIECES if piece.isascii() or not ascii_only]
            lines.append(" ".join(rng.choice(pieces) for _ in range(rng.randrange(1, 4))))
    return "\n".join(lines)


def _texts() -> list[str]:
    rng = random.Random(44)
    texts = [_text(rng, ascii_only=n % 2 == 0) for n in range(60)]
    texts += ["", "\n", "word", "\n\nMenu\n\n", "\n".join(["北京的天气很好。我们去公园", article(1)] * 3)]
    assert all(map(shingled_by_line, texts))
    return texts


def _masks(lines: int, rng: np.random.Generator) -> list[np.ndarray]:
    every, none = np.ones(lines, dtype=bool), np.zeros(lines, dtype=bool)
    return [every, none] + [rng.random(lines) < share for share in (0.2, 0.5, 0.9)]


def _stripped(text: str, keep: np.ndarray) -> tuple[str, str]:
    lines = text.split("\n")
    return ("\n".join(line for line, kept in zip(lines, keep) if kept),
            "\n".join(line for line, kept in zip(lines, keep) if not kept))


@pytest.mark.parametrize("width", [1, 2, 4, 5])
def test_the_kept_lines_shingles_are_the_stripped_texts(width: int) -> None:
    fingerprinter = Fingerprinter(width=width)
    rng = np.random.default_rng(width)
    for text in _texts():
        assert shingled_by_line(text)
        lines = fingerprinter.line_shingles(text)
        for ours, theirs in zip(lines[:2], segment_hashes(text), strict=True):
            np.testing.assert_array_equal(ours, theirs)
        for keep in _masks(len(text.split("\n")), rng):
            stripped, removed = _stripped(text, keep)
            shingling, removed_hashes = lines.kept(keep)
            again = fingerprinter.shingling(stripped)
            assert shingling.words == again.words
            np.testing.assert_array_equal(shingling.hashes, again.hashes)
            np.testing.assert_array_equal(removed_hashes, fingerprinter.shingle_hashes(removed))


def _by_line_or_not() -> list[str]:
    """Texts NFKC leaves as they are or not: compatibility forms, a soft hyphen (removed before NFKC),
    a dotted capital I (two code points in lower case), a combining mark, chunks of a long text."""
    forms = ["Lift \u00bd", "\ufb01ne", "news\u00adpaper", "\u0130stanbul", "e\u0301t\u00e9", "Über", "\u03a3",
             "plain words", "word \u00bd\u00ad", "\u00ad"]
    texts = [f"{a}\n{b}. {c}" for a in forms for b in forms for c in ("x", "\u00bd")]
    long = article(1, words=20_000, paragraph=300)
    assert len(long) > 65_536
    return texts + [long, long + "\n\u00bd", long + "\ne\u0301", "", "\n"]


def test_the_tokenisation_says_whether_a_text_is_shingled_by_line() -> None:
    fingerprinter = Fingerprinter()
    for text in _by_line_or_not():
        assert fingerprinter.line_shingles(text).by_line == shingled_by_line(text), text[:40]


@pytest.mark.parametrize("weighting", ["frequency", "presence"])
def test_a_signature_from_the_kept_lines_is_that_of_the_stripped_text_alone_or_in_a_batch(weighting: str) -> None:
    fingerprinter = Fingerprinter(weighting=weighting)
    rng = np.random.default_rng(7)
    texts = _texts()
    for at, text in enumerate(texts):
        keep = rng.random(len(text.split("\n"))) < 0.7
        stripped, _ = _stripped(text, keep)
        ours = fingerprinter.signature(fingerprinter.line_shingles(text).kept(keep)[0])
        batch = [texts[at - 1], stripped, texts[(at + 1) % len(texts)]]
        for words, theirs in (fingerprinter.signatures([stripped])[0], fingerprinter.signatures(batch)[1]):
            assert ours.fingerprint == theirs.fingerprint
            np.testing.assert_array_equal(ours.hashes, theirs.hashes)
            assert LAYOUT.sketch(ours.hashes) == LAYOUT.sketch(theirs.hashes)
            assert words == fingerprinter.line_shingles(text).kept(keep)[0].words


@pytest.mark.parametrize("text", ["Menu\nword " * 10, article(3, words=1500, paragraph=50)])
def test_the_signer_signs_a_given_shingling_at_once_as_it_would_sign_the_text(text: str) -> None:
    """Short or page-length, a text the learner tokenised is signed in its item's step, from its shingles."""
    assert (len(text) < SIGNED_ALONE) != (len(text) > 5000)
    signer = Signer(Fingerprinter(), LAYOUT)
    keep = np.arange(len(text.split("\n"))) % 3 != 0
    stripped, _ = _stripped(text, keep)
    ours = finished_at_once(signer.sign(stripped, signer.fingerprinter.line_shingles(text).kept(keep)[0]))
    [theirs] = signer.sign_all([stripped])
    assert (ours.words, ours.signature.fingerprint, ours.sketch) == (
        theirs.words, theirs.signature.fingerprint, theirs.sketch)
    np.testing.assert_array_equal(ours.signature.hashes, theirs.signature.hashes)


def _page(n: int, extra: str = "") -> str:
    return "\n".join(["Example News", "Home", "News", article(n, words=120, paragraph=40) + extra,
                      "Example News is an independent publication. Contact the newsroom."])


async def test_the_learner_hands_over_the_stripped_texts_shingling_and_the_removed_lines_shingles(tmp_path) -> None:
    pipeline = await open_pipeline({
        "SIMHASH_BOILERPLATE": True,
        "SIMHASH_INDEX_URL": f"sqlite:///{tmp_path}/index.db",
        "SIMHASH_MERGE_LOG": str(tmp_path / "merges.jsonl"),
        "SIMHASH_BOILERPLATE_SAMPLE_PAGES": 3,
    })
    try:
        await asyncio.gather(*(feed(pipeline, {"url": f"https://a.example/{n}", "body_text": _page(n)})
                               for n in range(3)))
        fingerprinter = pipeline.signer.fingerprinter
        stripped = await pipeline.learner.strip("a.example", _page(5))
        assert stripped.version and "Home" not in stripped.text
        assert stripped.shingling is not None and stripped.shingling.words == fingerprinter.shingling(
            stripped.text).words
        np.testing.assert_array_equal(stripped.shingling.hashes, fingerprinter.shingle_hashes(stripped.text))
        np.testing.assert_array_equal(stripped.removed, fingerprinter.shingle_hashes(
            "\n".join(["Example News", "Home", "News",
                       "Example News is an independent publication. Contact the newsroom."])))
        growing = await pipeline.learner.strip("a.example", _page(6, " Lift \u00bd"))
        assert not shingled_by_line(growing.text) and "Home" not in growing.text
        assert growing.shingling is None and growing.removed is None  # shingled whole, as without the learner
    finally:
        await pipeline.close_spider()
