"""Copies disguised with invisible characters or look-alike letters fingerprint as the original, and
normalisation still keeps the distinctions of ordinary Russian, Greek and Chinese text."""

from __future__ import annotations

import random
import re
import tracemalloc
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from texts import CHINESE_PARK, CHINESE_RECIPE, passages

from scrapy_simhash.fingerprint import MAX_GROWTH, Fingerprinter, _nfkc_lower, hamming, jaccard, simhash, tokens

# How far apart (bits of 64) the fingerprints of a pair at the default Jaccard threshold lie at most.
MAX_DISTANCE, THRESHOLD = 18, 0.82

# Default-ignorable code points as they turn up in copied text: inside words, where each one split
# the word into two tokens (or, for the Hangul filler, a word character, changed the token).
INVISIBLE = {
    "soft hyphen (&shy;)": "\u00ad",
    "zero width space": "\u200b",
    "zero width non-joiner": "\u200c",
    "zero width joiner": "\u200d",
    "left-to-right mark": "\u200e",
    "word joiner": "\u2060",
    "invisible separator": "\u2063",
    "byte order mark (zero width no-break space)": "\ufeff",
    "variation selector-16": "\ufe0f",
    "variation selector-17": "\U000e0100",
    "combining grapheme joiner": "\u034f",
    "Mongolian vowel separator": "\u180e",
    "tag space": "\U000e0020",
    "Hangul filler": "\u3164",
}

# Latin letters and the Cyrillic or Greek letters that look like them, lower and upper case. Left out:
# capitals whose lower case looks like another letter (Cyrillic Н -> н, Greek Ν -> ν, Υ -> υ), since
# lower-casing comes first and one letter per script folds into each Latin letter.
CYRILLIC = dict(zip("aceopxyijsABCEKMOPTXYS", "\u0430\u0441\u0435\u043e\u0440\u0445\u0443\u0456\u0458\u0455"
                    "\u0410\u0412\u0421\u0415\u041a\u041c\u041e\u0420\u0422\u0425\u0423\u0405", strict=True))
GREEK = dict(zip("aoipkvuxABEHIKMOPTXZ", "\u03b1\u03bf\u03b9\u03c1\u03ba\u03bd\u03c5\u03c7"
                 "\u0391\u0392\u0395\u0397\u0399\u039a\u039c\u039f\u03a1\u03a4\u03a7\u0396", strict=True))

RUSSIAN_WEATHER = (
    "Сегодня в Москве стоит тёплая и солнечная погода, лёгкий ветер дует с юга. Жители города гуляют "
    "в парках, сидят на скамейках у прудов и кормят уток. Синоптики обещают, что к выходным станет "
    "ещё теплее, а вечером в пятницу возможен короткий дождь с грозой. Многие семьи уже собираются "
    "на дачу, чтобы посадить картофель и посеять морковь, пока земля влажная после весенних дождей."
)
RUSSIAN_PROGRAMMING = (
    "Чтобы написать паука для сбора данных, создайте новый проект командой startproject и опишите "
    "в нём класс, который наследует базовый класс Spider. Метод parse получает ответ сервера, "
    "извлекает нужные поля с помощью селекторов CSS или XPath и возвращает словари с результатами. "
    "Ссылки на следующие страницы можно передать обратно планировщику, и он загрузит их по очереди."
)
GREEK_TEXT = (
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μία από τις αρχαιότερες πόλεις του κόσμου. Στον λόφο "
    "της Ακρόπολης βρίσκεται ο Παρθενώνας, ναός αφιερωμένος στη θεά Αθηνά, που χτίστηκε τον πέμπτο "
    "αιώνα πριν από την εποχή μας. Κάθε χρόνο εκατομμύρια επισκέπτες περπατούν στα στενά δρομάκια "
    "της Πλάκας και δοκιμάζουν την τοπική κουζίνα στις μικρές ταβέρνες."
)


def paragraphs(corpus: list[dict]) -> list[str]:
    """Ten corpus paragraphs of 40-150 words."""
    return [paragraph for _, paragraph in random.Random(15).sample(passages(corpus, 40, 150), 10)]


def hide_inside_words(text: str, char: str) -> str:
    """``char`` after the second letter of every word of four letters or more, as hyphenation does."""
    return re.sub(r"\b(\w\w)(\w\w+)", lambda m: m[1] + char + m[2], text)


def swap_letters(text: str, look_alikes: dict[str, str], rng: random.Random) -> str:
    """Every other word with each of its letters that has a look-alike replaced by it."""
    words = text.split(" ")
    for i in range(rng.randrange(2), len(words), 2):
        words[i] = "".join(look_alikes.get(char, char) for char in words[i])
    return " ".join(words)


def assert_copies_found(originals: list[str], copies: list[str]) -> None:
    """Every copy fingerprints within the distance of its original with Jaccard >= the threshold;
    these disguises change nothing that normalisation keeps, so the two are in fact identical."""
    assert [copy != original for original, copy in zip(originals, copies, strict=True)] == [True] * len(copies)
    found = [
        hamming(simhash(original), simhash(copy)) <= MAX_DISTANCE and jaccard(original, copy) >= THRESHOLD
        for original, copy in zip(originals, copies, strict=True)
    ]
    assert sum(found) == len(copies), f"{sum(found)} of {len(copies)} copies found"
    assert [tokens(copy) for copy in copies] == [tokens(original) for original in originals]


@pytest.mark.parametrize("char", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_invisible_characters_inside_words_hide_no_copy(corpus: list[dict], char: str) -> None:
    originals = paragraphs(corpus)
    assert_copies_found(originals, [hide_inside_words(text, char) for text in originals])


def test_invisible_characters_of_every_kind_at_once_hide_no_copy(corpus: list[dict]) -> None:
    originals = paragraphs(corpus)
    copies = []
    for i, text in enumerate(originals):
        for j, char in enumerate(INVISIBLE.values()):
            if (i + j) % 3 == 0:
                text = hide_inside_words(text, char)
        copies.append("\ufeff" + text)
    assert_copies_found(originals, copies)


@pytest.mark.parametrize("look_alikes", [CYRILLIC, GREEK], ids=["Cyrillic", "Greek"])
def test_look_alike_letters_hide_no_copy(corpus: list[dict], look_alikes: dict[str, str]) -> None:
    rng = random.Random(9)
    originals = paragraphs(corpus)
    assert_copies_found(originals, [swap_letters(text, look_alikes, rng) for text in originals])


def test_look_alikes_fold_into_the_latin_letter_whatever_the_case() -> None:
    for look_alikes in (CYRILLIC, GREEK):
        for word in ("Scrapy", "SCRAPY", "scrapy", "PayPal", "example"):
            disguised = "".join(look_alikes.get(char, char) for char in word)
            assert tokens(disguised) == [word.lower()]
    assert tokens("\u0405\u0441r\u0430\u0440\u0443") == ["scrapy"]


@pytest.mark.parametrize(
    "text", [RUSSIAN_WEATHER, RUSSIAN_PROGRAMMING, GREEK_TEXT, CHINESE_PARK, CHINESE_RECIPE], ids=lambda t: t[:8]
)
def test_ordinary_text_keeps_its_words_apart(text: str) -> None:
    """Folding never merges two different words of a text: the tokens are the ``\\w+`` runs (one per
    character in Chinese), and there are as many distinct tokens as distinct words."""
    words = re.findall(r"\w", text) if text in (CHINESE_PARK, CHINESE_RECIPE) else re.findall(r"\w+", text)
    words = [unicodedata.normalize("NFKC", word).lower() for word in words]
    assert len(tokens(text)) == len(words)
    assert len(set(tokens(text))) == len(set(words))


def test_a_russian_copy_matches_and_different_russian_texts_stay_apart() -> None:
    copy = hide_inside_words(RUSSIAN_WEATHER.upper(), "\u00ad")
    assert simhash(copy) == simhash(RUSSIAN_WEATHER)
    assert jaccard(copy, RUSSIAN_WEATHER) == 1.0
    for width in (1, 4):
        assert jaccard(RUSSIAN_WEATHER, RUSSIAN_PROGRAMMING, width=width) < 0.1
    assert hamming(simhash(RUSSIAN_WEATHER), simhash(RUSSIAN_PROGRAMMING)) > MAX_DISTANCE
    assert Fingerprinter().shingling(RUSSIAN_WEATHER).words == len(RUSSIAN_WEATHER.split())


# Characters whose NFKC or lower case depends on their neighbours or lengthens them: combining marks
# (reordered, composed), Hangul jamo (composed into syllables), the Greek capital sigma (final form
# at a word's end), ligatures and U+FDFA (18 characters), the dotted capital I (2 in lower case).
TRICKY = "aeΣσ\u0301\u0323\u0308\u1100\u1161\u11a8가ﬃ\ufdfaİ한A"


@given(
    words=st.lists(st.text(alphabet=TRICKY, min_size=0, max_size=6), max_size=40),
    breaks=st.lists(st.sampled_from([" ", "\n"]), min_size=40, max_size=40),
)
@settings(max_examples=300, deadline=None)
def test_a_long_text_normalised_in_chunks_reads_as_normalised_whole(words: list[str], breaks: list[str]) -> None:
    """Cut before spaces and line breaks, the chunks normalise as the whole text does, up to its cap."""
    text = "".join(word + sep for word, sep in zip(words, breaks))
    whole = unicodedata.normalize("NFKC", text).lower()
    assert _nfkc_lower(text, chunk=8) == whole[: MAX_GROWTH * len(text)]


def test_a_text_that_normalisation_lengthens_many_times_signs_in_bounded_memory() -> None:
    """A million U+FDFA (each 18 characters under NFKC) took 843 MB and 5.6 s to sign."""
    fingerprinter = Fingerprinter()
    tracemalloc.start()
    try:
        signature = fingerprinter.signature(fingerprinter.shingling("\ufdfa" * 1_000_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(signature.hashes) > 0 and peak < 150_000_000
