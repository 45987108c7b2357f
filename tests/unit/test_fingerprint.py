"""SimHash behaviour: distances that must hold, the shingle contract, weighting, boilerplate, bits."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from texts import CHINESE_PARK, CHINESE_RECIPE, passages

from scrapy_simhash.fingerprint import (
    Fingerprinter,
    hamming,
    jaccard,
    jaccard_hashes,
    segment_hashes,
    segments,
    shingle_hash,
    shingles,
    simhash,
    tokens,
)

SENTENCE = "the spider follows every link on the page and yields one item per product it finds there"


def weighted_angle(a: str, b: str) -> float:
    """Angle between the frequency-weighted shingle vectors of two texts."""
    fingerprinter = Fingerprinter()
    vectors = []
    for text in (a, b):
        hashes, counts = np.unique(fingerprinter.shingle_hashes(text), return_counts=True)
        vectors.append(dict(zip(hashes.tolist(), counts.tolist(), strict=True)))
    dot = sum(count * vectors[1].get(h, 0) for h, count in vectors[0].items())
    norms = math.sqrt(sum(c * c for c in vectors[0].values()) * sum(c * c for c in vectors[1].values()))
    return math.acos(min(1.0, dot / norms))


def test_identical_text_has_distance_zero() -> None:
    assert hamming(simhash(SENTENCE * 3), simhash(SENTENCE * 3)) == 0


def test_one_phrase_changed_in_a_repeated_sentence_stays_within_three_bits() -> None:
    copies = [SENTENCE] * 20
    copies[7] = SENTENCE.replace("one item", "two records")
    original, edited = " ".join([SENTENCE] * 20), " ".join(copies)
    assert original != edited
    assert hamming(simhash(original), simhash(edited)) <= 3


def test_unrelated_passages_are_far_apart(corpus: list[dict]) -> None:
    """~150-word passages from different pages: SimHash distance ~ Binomial(64, 1/2), so > 12 always."""
    found = passages(corpus, 150, 400)
    rng = random.Random(3)
    pairs = 0
    while pairs < 40:
        (page_a, a), (page_b, b) = rng.sample(found, 2)
        a, b = " ".join(a.split()[:150]), " ".join(b.split()[:150])
        if page_a == page_b or jaccard(a, b) > 0.05:
            continue
        pairs += 1
        assert hamming(simhash(a), simhash(b)) > 12, (a, b)


def test_one_word_edit_distance_follows_the_angle(corpus: list[dict]) -> None:
    """Charikar: each bit differs with probability angle/pi between the weighted shingle vectors, so
    the distance after an edit is ~ Binomial(64, angle/pi). Single texts vary by several bits, so
    the assertions are on the residuals over many passages: centred on 0 with binomial spread."""
    rng = random.Random(7)
    residuals, standardised = [], []
    for _, passage in rng.sample(passages(corpus, 40, 400), 300):
        words = passage.split(" ")
        words[rng.randrange(len(words))] = f"qzx{rng.randrange(10**6)}"
        edited = " ".join(words)
        p = weighted_angle(passage, edited) / math.pi
        observed = hamming(simhash(passage), simhash(edited))
        residuals.append(observed - 64 * p)
        standardised.append((observed - 64 * p) / math.sqrt(64 * p * (1 - p)))
    assert abs(np.median(residuals)) <= 1.0
    assert abs(np.mean(standardised)) <= 0.2
    assert 0.8 <= np.std(standardised) <= 1.2
    assert np.mean(np.abs(standardised) <= 2) >= 0.9


def test_presence_and_frequency_weighting_differ_where_repetition_differs() -> None:
    """``a`` and ``b`` have exactly the same shingle SET (every cyclic 4-gram of both sentences plus
    the shingles across the one s->t boundary), but ``a`` repeats sentence s and ``b`` sentence t.
    Presence weighting sees only the set, so it must give equal fingerprints; frequency weighting is
    dominated by the repeated sentence, so the two fingerprints are as far apart as unrelated texts."""
    s = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
    t = "one two three four five six seven eight nine ten eleven twelve"
    a, b = " ".join([s] * 20 + [t] * 2), " ".join([s] * 2 + [t] * 20)
    fingerprinter = Fingerprinter()
    assert np.array_equal(np.unique(fingerprinter.shingle_hashes(a)), np.unique(fingerprinter.shingle_hashes(b)))
    assert simhash(a, weighting="presence") == simhash(b, weighting="presence")
    assert hamming(simhash(a, weighting="frequency"), simhash(b, weighting="frequency")) > 12


def test_shared_navigation_is_close_until_its_shingles_are_excluded(corpus: list[dict]) -> None:
    """Two unrelated ~50-word bodies inside ~1,200 words of shared site navigation and footer."""
    titles = list(dict.fromkeys(doc["title"] for doc in corpus))
    header = "Home | Docs | Blog | " + " | ".join(titles)
    footer = "\n".join(paragraph for _, paragraph in passages(corpus, 300, 400)[:3])
    (_, body_a), (_, body_b) = passages(corpus, 40, 60)[:2]
    assert jaccard(body_a, body_b) < 0.05
    page_a, page_b = f"{header}\n{body_a}\n{footer}", f"{header}\n{body_b}\n{footer}"
    assert hamming(simhash(page_a), simhash(page_b)) <= 12
    boilerplate = set(shingles(header)) | set(shingles(footer))
    assert hamming(simhash(page_a, boilerplate=boilerplate), simhash(page_b, boilerplate=boilerplate)) > 12


def test_boilerplate_only_text_has_no_content_left() -> None:
    assert simhash(SENTENCE, boilerplate=set(shingles(SENTENCE))) == 0
    assert Fingerprinter().signature("").hashes.size == 0


def test_cjk_one_character_edit_stays_close_and_unrelated_cjk_is_far() -> None:
    """Per-character tokens: one edited character changes 4 of ~120 character 4-grams. With ``\\w+``
    the clause around it would be one of ~11 tokens, and most of the 8 shingles would change."""
    edited = CHINESE_PARK.replace("桃花", "梨花")
    assert jaccard(CHINESE_PARK, edited) > 0.9
    assert hamming(simhash(CHINESE_PARK), simhash(edited)) <= 12
    assert hamming(simhash(CHINESE_PARK), simhash(CHINESE_RECIPE)) > 12


def test_shingles_normalise_lowercase_and_overlap() -> None:
    expected = ["scrapy file", "file café", "café café", "café x"]
    assert shingles("Ｓｃｒａｐｙ ﬁle CAFÉ cafe\u0301 x", width=2) == expected
    assert shingles("a b c d e f", width=4) == ["a b c d", "b c d e", "c d e f"]
    assert shingles("a, b; c", width=1) == ["a", "b", "c"]


def test_shingles_of_short_and_empty_text() -> None:
    assert shingles("only three words") == ["only three words"]
    assert shingles("exactly four words here") == ["exactly four words here"]
    assert shingles("") == []
    assert shingles(" ... !!! ") == []


def test_unsegmented_scripts_give_one_token_per_character() -> None:
    assert tokens("Scrapyは速い") == ["scrapy", "は", "速", "い"]
    assert tokens("北京。天气") == ["北", "京", "天", "气"]
    assert tokens("ภาษาไทย") == list("ภาษาไทย")
    assert tokens("한국어 문장") == ["한국어", "문장"]  # Korean separates words with spaces
    assert shingles("東京都庁", width=2) == ["東 京", "京 都", "都 庁"]


def test_shingle_hash_matches_the_text_path() -> None:
    """A boilerplate shingle string must hash exactly as the same shingle inside a text."""
    for text in (SENTENCE, CHINESE_RECIPE, "Mixed 日本語 text, café"):
        for width in (1, 3, 4):
            expected = [shingle_hash(s) for s in shingles(text, width)]
            assert Fingerprinter(width=width).shingle_hashes(text).tolist() == expected
    assert shingle_hash("東 京 都 庁") == shingle_hash("東京都庁")


def test_token_hashes_do_not_depend_on_position_in_long_texts() -> None:
    """Token hashes come from prefix sums over the whole text: deep into a 300k-character text the
    same shingle must still hash as it does alone."""
    filler = " ".join(f"word{i}" for i in range(40_000))
    text = f"{SENTENCE} {filler} {SENTENCE}"
    hashes = Fingerprinter().shingle_hashes(text).tolist()
    assert len(text) > 300_000
    assert hashes[-1] == hashes[len(shingles(SENTENCE)) - 1] == shingle_hash(shingles(SENTENCE)[-1])


def test_segment_hashes_hash_each_line_by_its_words() -> None:
    text = "Related stories\n\n  related, STORIES!\nstories related\n\u00a0\nWord 42"
    hashes, counts = segment_hashes(text)
    assert len(hashes) == len(counts) == text.count("\n") + 1
    assert counts.tolist() == [2, 0, 2, 2, 0, 2]
    assert hashes[0] == hashes[2] != 0  # case, spacing and punctuation do not count
    assert hashes[3] != hashes[0]  # word order does
    assert hashes[1] == hashes[4] == 0  # a line without words
    assert segment_hashes("Word 42")[0][0] == hashes[5]  # a line hashes alike wherever it stands
    assert len(set(segment_hashes("\n".join(f"line {i}" for i in range(1000)))[0].tolist())) == 1000


def test_invisible_characters_in_ascii_lines_hash_as_if_absent() -> None:
    """A soft hyphen or zero width space in otherwise ASCII text is removed before tokenising, as for
    fingerprints; the lines are still cut at the text's own line breaks."""
    plain = "Breaking news from the newsroom\nA second line of the story"
    marked = "Break\u00ading news from the news\u200broom\nA second line of the story"
    np.testing.assert_array_equal(segment_hashes(marked)[0], segment_hashes(plain)[0])


def test_segment_hashes_of_unsegmented_scripts_and_empty_text() -> None:
    hashes, counts = segment_hashes(f"{CHINESE_PARK}\n{CHINESE_RECIPE}\n{CHINESE_PARK}")
    assert hashes[0] == hashes[2] != hashes[1] and counts[0] == len(tokens(CHINESE_PARK))
    assert segment_hashes("")[0].tolist() == [0] and segment_hashes("\n\n")[1].tolist() == [0, 0, 0]


def test_jaccard() -> None:
    assert jaccard("", "") == 1.0
    assert jaccard(SENTENCE, SENTENCE) == 1.0
    assert jaccard("alpha beta gamma delta", "one two three four") == 0.0
    assert jaccard("", SENTENCE) == 0.0
    # width 2: {a b, b c, c d, d e} vs {a b, b c, c d, d f}: 3 shared of 5 distinct.
    assert jaccard("a b c d e", "a b c d f", width=2) == pytest.approx(3 / 5)
    empty = np.array([], dtype=np.uint64)
    assert jaccard_hashes(empty, empty) == 1.0


@pytest.mark.parametrize("bits", [1, 8, 16, 32, 63])
def test_fewer_bits_are_the_low_bits_of_the_64_bit_fingerprint(bits: int) -> None:
    full = simhash(SENTENCE)
    assert simhash(SENTENCE, bits=bits) == full & ((1 << bits) - 1)
    assert Fingerprinter(bits=bits).fingerprint(CHINESE_PARK) < 1 << bits


@pytest.mark.parametrize(
    "call",
    [
        lambda: Fingerprinter(bits=0),
        lambda: Fingerprinter(bits=65),
        lambda: Fingerprinter(width=0),
        lambda: Fingerprinter(weighting="tf-idf"),
        lambda: simhash("text", width=-1),
        lambda: shingles("text", width=0),
        lambda: jaccard("a", "b", width=0),
        lambda: shingle_hash(" ... "),
        lambda: hamming(-1, 0),
    ],
)
def test_invalid_arguments_raise_value_error(call) -> None:
    with pytest.raises(ValueError):
        call()


# --- segments: shingles stay within a sentence or a line --------------------------------------------

LISTING = [
    "Bright two-bedroom flat on the second floor of a quiet building near the park.",
    "The kitchen was renewed in 2023 and comes with a dishwasher and a gas hob.",
    "Both bedrooms face the garden, and the larger one has a fitted wardrobe.",
    "Heating costs about 3.5 euros per square metre, e.g. 210 euros a month in winter.",
    "Pets welcome!",
    "Is the flat still free?",
]


def test_a_text_with_its_sentences_or_lines_reordered_has_the_same_shingles() -> None:
    fingerprinter = Fingerprinter()
    original = " ".join(LISTING)
    reorders = (LISTING[::-1], LISTING[3:] + LISTING[:3], LISTING[1:] + LISTING[:1])
    for reordered in (" ".join(reorders[0]), "\n".join(reorders[1]), " ".join(reorders[2])):
        assert jaccard(original, reordered) == 1.0
        assert fingerprinter.fingerprint(original) == fingerprinter.fingerprint(reordered)
    assert jaccard(original, " ".join(LISTING[1:])) < 1.0


def test_segments_end_at_lines_and_sentence_ends_but_not_inside_numbers_or_words() -> None:
    assert segments("Heating 3.5 euros, e.g. in winter! See example.com?q=1 now. Yes") == [
        ["heating", "3", "5", "euros", "e", "g"], ["in", "winter"], ["see", "example", "com", "q", "1", "now"], ["yes"]
    ]
    assert segments("first line\nsecond line\r\nthird\u2029fourth") == [
        ["first", "line"], ["second", "line"], ["third"], ["fourth"]
    ]
    # Ideographic and fullwidth sentence ends; a full stop between ideographs ends a sentence too.
    assert segments("很好的公寓。宠物欢迎！周末看房？价格3.5万.有阳台") == [
        list("很好的公寓"), list("宠物欢迎"), list("周末看房"), ["价", "格", "3", "5", "万"], list("有阳台")
    ]
    assert segments("...!? \n\n") == []


def test_a_segment_shorter_than_the_width_is_one_shingle_and_no_shingle_crosses_an_end() -> None:
    assert shingles("Pets welcome. Viewings on weekday evenings only.", width=4) == [
        "pets welcome", "viewings on weekday evenings", "on weekday evenings only"
    ]
    assert shingles("Balcony\nLift\nParking space", width=2) == ["balcony", "lift", "parking space"]


def test_a_text_without_sentence_or_line_ends_is_shingled_across_all_its_tokens() -> None:
    text = "bright flat near the park, heating included; pets welcome (ask first) - viewings on weekdays"
    toks = tokens(text)
    assert shingles(text) == [" ".join(toks[i : i + 4]) for i in range(len(toks) - 3)]
