"""Property tests: the vectorised core equals a slow pure-Python reading of the README specification,
tokens equal ``re``'s ``\\w``, and hamming is a metric."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_simhash import fingerprint
from scrapy_simhash.fingerprint import (
    DEFAULT_IGNORABLE_RANGES,
    UNSEGMENTED_RANGES,
    Fingerprinter,
    hamming,
    jaccard_hashes,
    segments,
    shingle_hash,
    shingles,
    simhash,
    token_count,
    tokens,
)

# The constants as the README states them (not imported: this checks the documentation).
MASK = (1 << 64) - 1
BASE = 0x9E3779B185EBCA87
FOLD = 0x9E3779B97F4A7C15
FMIX = (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
SOLO = "".join(f"{re.escape(chr(first))}-{re.escape(chr(last))}" for _, first, last in UNSEGMENTED_RANGES)
# A word char of an unsegmented script alone, else a run of the other word chars.
REFERENCE_TOKEN = re.compile(rf"[^\W{SOLO}]+|\w")
# A segment ends at a line end, or at a sentence end that no word char of a spaced script follows.
REFERENCE_SEGMENT_END = re.compile(rf"[\n\r\u2028\u2029\u3002]|[.!?\u061f\u0964\u0965](?![^\W{SOLO}])")


# The package's table of look-alike letters, applied with str.translate.
LOOK_ALIKES = {
    int(source, 16): int(target, 16)
    for source, target in json.loads(
        Path(fingerprint.__file__).with_name("confusable_fold.json").read_text(encoding="utf-8")
    )["fold"].items()
}
IGNORABLE = dict.fromkeys(point for _, first, last in DEFAULT_IGNORABLE_RANGES for point in range(first, last + 1))


def reference_normalise(text: str) -> str:
    """As docs/how-it-works.md says: ignorables out, NFKC, lower case, kept to twice the characters
    left (NFKC lengthens "¼" to "1⁄4"), look-alikes folded."""
    kept = text.translate(IGNORABLE)
    return unicodedata.normalize("NFKC", kept).lower()[: 2 * len(kept)].translate(LOOK_ALIKES)


def reference_tokens(text: str) -> list[str]:
    return REFERENCE_TOKEN.findall(reference_normalise(text))


def reference_segments(text: str) -> list[list[str]]:
    """The tokens of each segment of the normalised text, segments without tokens left out."""
    found = (REFERENCE_TOKEN.findall(part) for part in REFERENCE_SEGMENT_END.split(reference_normalise(text)))
    return [toks for toks in found if toks]


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = x * FMIX[0] & MASK
    x ^= x >> 33
    x = x * FMIX[1] & MASK
    return x ^ x >> 33


def reference_token_hash(token: str) -> int:
    return fmix64(sum(ord(char) * pow(BASE, j, 1 << 64) for j, char in enumerate(token)) & MASK)


def reference_shingle_hash(token_hashes: list[int]) -> int:
    folded = 0
    for value in token_hashes:
        folded = (folded * FOLD + value) & MASK
    return fmix64(folded)


def reference_simhash(text: str, width: int = 4, weighting: str = "frequency") -> int:
    """Charikar's SimHash, one bit and one shingle at a time; shingles stay within a segment."""
    counts: Counter[int] = Counter()
    for segment in reference_segments(text):
        hashes = list(map(reference_token_hash, segment))
        span = min(width, len(hashes))
        counts.update(reference_shingle_hash(hashes[i : i + span]) for i in range(len(hashes) - span + 1))
    weights = {h: count if weighting == "frequency" else 1 for h, count in counts.items()}
    total = sum(weights.values())
    return sum(1 << bit for bit in range(64) if 2 * sum(w for h, w in weights.items() if h >> bit & 1) > total)


WORDS = ["scrapy", "Spider", "item", "ÉTÉ", "ﬁle", "x_1", "42", "東京", "は", "ภาษาไทย", "한국어", "مرحبا", "ー々"]
WORDS += ["\u0440\u0430\u0443", "ΑΘΗΝΑ", "ᄀ", "ᅡ"]  # Cyrillic and Greek look-alikes, conjoining Hangul jamo
SEPARATORS = [" ", "", ", ", "。", "\n", "-", "\u00ad", "\u200b", "\u200d", "\u1160", "\ufe0f", "\U000e0041"]
SEPARATORS += [". ", ".", "! ", "?", "\uff01", "\u2026 ", "\u0964 ", "\r\n", "\u2029"]  # sentence and line ends
texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=40).map(
        lambda pairs: "".join(word + separator for word, separator in pairs)
    ),
)


def test_word_characters_are_exactly_those_of_re_backslash_w() -> None:
    """CPython's ``\\w`` is ``isalnum() or '_'``; the lookup table must agree on every code point
    but the default-ignorables, which normalisation removes."""
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    expected = np.fromiter((char.isalnum() or char == "_" for char in every), dtype=bool, count=len(every))
    ignorable = np.zeros(len(every), dtype=bool)
    ignorable[list(IGNORABLE)] = True
    classes = fingerprint._CLASSES
    assert np.array_equal(classes == fingerprint._IGNORED, ignorable)
    assert np.array_equal(classes[~ignorable] >= fingerprint._WORD, expected[~ignorable])
    solo = np.zeros(len(every), dtype=bool)
    for _, first, last in UNSEGMENTED_RANGES:
        solo[first : last + 1] = True
    assert np.array_equal(classes == fingerprint._SOLO, expected & solo & ~ignorable)


def test_segment_ends_keep_their_class_in_lower_case() -> None:
    """Classes are read after lower-casing: a segment end must stay one, and nothing become one."""
    ends = fingerprint._CLASSES == fingerprint._LINE_END
    sentence_ends = fingerprint._CLASSES == fingerprint._SENTENCE_END
    assert np.array_equal(fingerprint._LOWER_CLASSES == fingerprint._LINE_END, ends)
    assert np.array_equal(fingerprint._LOWER_CLASSES == fingerprint._SENTENCE_END, sentence_ends)
    assert "".join(map(chr, np.flatnonzero(ends | sentence_ends))) == "\n\r!.?\u061f\u0964\u0965\u2028\u2029\u3002"


def test_normalisation_creates_and_removes_no_default_ignorable_code_point() -> None:
    """NFKC and lower() turn each default-ignorable into default-ignorables only and create none from
    any other character, so a text holds one exactly when its normalised form does (the fast path
    looks for them there), and removing them first leaves none."""
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    for char in every:
        normalised = unicodedata.normalize("NFKC", char).lower()
        assert normalised and all((ord(c) in IGNORABLE) == (ord(char) in IGNORABLE) for c in normalised)
    assert not any(map(IGNORABLE.__contains__, map(ord, fingerprint._text(fingerprint._tokenise(every).points))))


def test_look_alike_table_is_a_fold_of_letters_that_keeps_the_token_classes() -> None:
    """Folding twice changes nothing; only normalised left-to-right letters of scripts written with
    spaces are folded, so the tokens of a text are where they were before folding."""
    classes = fingerprint._CLASSES
    for source, target in LOOK_ALIKES.items():
        assert target not in LOOK_ALIKES
        for char in (chr(source), chr(target)):
            assert unicodedata.category(char).startswith("L") and unicodedata.bidirectional(char) == "L"
            assert reference_normalise(char) == chr(target)
            assert classes[ord(char)] == fingerprint._WORD


@settings(deadline=None)  # timing varies on a shared machine; correctness is the point
@given(texts)
@example("¼")  # NFKC makes it three characters: the cut at twice the text's length
@example("¼¼\xad")  # an ignorable past that cut, which the cut must not count
@example("ΟΔΟΣ ΟΔΟΣα ⅀ ⅀x")  # lower case in context: a final sigma, also one that NFKC makes
@example("İstanbul’s")  # lower case of two code points
def test_tokens_equal_the_regular_expression(text: str) -> None:
    assert tokens(text) == reference_tokens(text)
    assert token_count(text) == len(reference_tokens(text))
    assert segments(text) == reference_segments(text)


def test_tokens_of_corpus_pages_equal_the_regular_expression(corpus: list[dict]) -> None:
    for doc in corpus[::20]:
        assert tokens(doc["body_text"]) == reference_tokens(doc["body_text"])
        assert segments(doc["body_text"]) == reference_segments(doc["body_text"])


def test_lone_surrogates_are_not_word_characters() -> None:
    text = b"caf\xe9 ok".decode("utf-8", "surrogateescape")
    assert tokens(text) == reference_tokens(text) == ["caf", "ok"]
    assert simhash(text) == reference_simhash(text)


@settings(max_examples=60, deadline=None)
@given(texts, st.integers(1, 5), st.sampled_from(["frequency", "presence"]))
def test_fingerprint_equals_the_specification(text: str, width: int, weighting: str) -> None:
    assert simhash(text, width=width, weighting=weighting) == reference_simhash(text, width, weighting)


def test_corpus_fingerprints_equal_the_specification(corpus: list[dict]) -> None:
    for doc in corpus[::100]:
        text = doc["body_text"][:3000]
        assert simhash(text) == reference_simhash(text)


@settings(deadline=None)  # timing varies on a shared machine; correctness is the point
@given(texts, st.integers(1, 5))
def test_shingle_strings_hash_as_in_the_text(text: str, width: int) -> None:
    strings = shingles(text, width)
    assert Fingerprinter(width=width).shingle_hashes(text).tolist() == [shingle_hash(s) for s in strings]
    for string in strings[:3]:
        assert shingle_hash(string) == reference_shingle_hash(list(map(reference_token_hash, string.split(" "))))


@settings(max_examples=60, deadline=None)
@given(texts, st.integers(1, 5), st.sampled_from(["frequency", "presence"]))
def test_one_shingling_gives_the_word_count_and_the_signature(text: str, width: int, weighting: str) -> None:
    """The pipeline tokenises an item once: the word count SIMHASH_MIN_WORDS reads and the signature
    both come from :meth:`Fingerprinter.shingling`, and equal what the text itself gives."""
    fingerprinter = Fingerprinter(width=width, weighting=weighting)
    shingling = fingerprinter.shingling(text)
    assert shingling.words == token_count(text) == len(reference_tokens(text))
    np.testing.assert_array_equal(shingling.hashes, fingerprinter.shingle_hashes(text))
    from_text, from_shingling = fingerprinter.signature(text), fingerprinter.signature(shingling)
    assert from_shingling.fingerprint == from_text.fingerprint == reference_simhash(text, width, weighting)
    assert fingerprinter.fingerprint(text) == from_text.fingerprint
    # Verification hashes: the sorted distinct low 32 bits of the shingle hashes.
    expected = sorted({value & 0xFFFFFFFF for value in shingling.hashes.tolist()})
    assert from_text.hashes.dtype == np.uint32 and from_text.hashes.tolist() == expected
    np.testing.assert_array_equal(from_shingling.hashes, from_text.hashes)
    # Excluded shingles neither vote nor are kept, whether the text or its shingling is given.
    exclude = from_text.hashes[::2]
    kept = [value for value in shingling.hashes.tolist() if value & 0xFFFFFFFF not in set(exclude.tolist())]
    without = [fingerprinter.signature(source, exclude) for source in (shingling, text)]
    for signature in without:
        assert signature.fingerprint == fingerprinter.vote(
            np.array(kept if weighting == "frequency" else sorted(set(kept)), dtype=np.uint64)
        )
        assert signature.hashes.tolist() == sorted({value & 0xFFFFFFFF for value in kept})
    assert fingerprinter.fingerprint(text, exclude) == without[0].fingerprint


# Texts a batch must keep apart: line breaks at either end, a combining mark or a capital sigma at
# an edge (NFKC and lower case look at their neighbours), invisible characters, over 255 shingles,
# sentence ends at an edge and short segments.
EDGES = ["", "\n", "word\n", "\nword", "\u0301accent", "ΟΔΟΣ", "Σ\nσ", "soft\u00adhyphen", "東京タワー",
         " ".join(["the same words"] * 100), "ends here.", ".starts here", "one. two three! four? five six seven",
         "。東京。", "3.5 a.b?q"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(texts, st.sampled_from(EDGES)), min_size=1, max_size=12), st.integers(1, 5),
       st.sampled_from(["frequency", "presence"]))
def test_texts_signed_together_are_signed_as_each_alone(batch: list[str], width: int, weighting: str) -> None:
    """:meth:`Fingerprinter.signatures` equals :meth:`Fingerprinter.shingling` and
    :meth:`Fingerprinter.signature` of each text, whatever its neighbours in the batch."""
    fingerprinter = Fingerprinter(width=width, weighting=weighting)
    for text, (words, signature) in zip(batch, fingerprinter.signatures(batch), strict=True):
        alone = fingerprinter.signature(text)
        assert words == fingerprinter.shingling(text).words
        assert signature.fingerprint == alone.fingerprint
        assert signature.hashes.dtype == np.uint32 and signature.hashes.tolist() == alone.hashes.tolist()


all_ones = st.integers(0, 1100).map(lambda n: [2**64 - 1] * n)


@settings(deadline=None)
@given(st.one_of(st.lists(st.integers(0, 2**64 - 1), max_size=600), all_ones))
def test_vote_counts_every_bit_of_any_number_of_hashes(values: list[int]) -> None:
    """Per-byte counters hold at most 255 votes: 255, 256 and longer inputs (counted in blocks) and
    all-ones hashes (every counter full) must vote as a plain count does."""
    hashes = np.array(values, dtype=np.uint64)
    expected = sum(1 << bit for bit in range(64) if 2 * sum(value >> bit & 1 for value in values) > len(values))
    assert Fingerprinter().vote(hashes) == expected


# Small ranges make the two sets overlap often; the full range covers hashes with the high bit set.
hash_sets = st.one_of(st.sets(st.integers(0, 40), max_size=30), st.sets(st.integers(0, 2**32 - 1), max_size=30))


@given(hash_sets, hash_sets)
def test_jaccard_hashes_equals_set_jaccard(a: set[int], b: set[int]) -> None:
    reference = len(a & b) / len(a | b) if a or b else 1.0
    arrays = [np.array(sorted(values), dtype=np.uint32) for values in (a, b)]
    assert jaccard_hashes(*arrays) == reference
    assert jaccard_hashes(arrays[1], arrays[0]) == reference


fingerprints = st.integers(0, (1 << 64) - 1)


@given(fingerprints, fingerprints, fingerprints)
def test_hamming_is_a_metric_and_counts_differing_bits(a: int, b: int, c: int) -> None:
    assert hamming(a, b) == sum((a >> bit & 1) != (b >> bit & 1) for bit in range(64))
    assert hamming(a, b) == hamming(b, a)
    assert (hamming(a, b) == 0) == (a == b)
    assert hamming(a, c) <= hamming(a, b) + hamming(b, c)
