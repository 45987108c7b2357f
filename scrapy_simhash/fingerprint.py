"""SimHash fingerprints of text: normalised tokens -> word shingles -> 64-bit hashes -> bit votes.

Pure computation (no I/O, no settings), vectorised with numpy; README "How it works" specifies it.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from importlib import resources

import numpy as np

__all__ = [
    "DEFAULT_IGNORABLE_RANGES",
    "FINGERPRINT_VERSION",
    "Fingerprinter",
    "LineShingles",
    "Shingling",
    "Signature",
    "UNSEGMENTED_RANGES",
    "hamming",
    "hashes_union",
    "hashes_without",
    "jaccard",
    "jaccard_hashes",
    "segment_hashes",
    "segments",
    "shingle_hash",
    "shingled_by_line",
    "shingles",
    "simhash",
    "token_count",
    "tokens",
    "verification_hashes",
]

#: Bumped whenever any text's fingerprint or shingle hashes change; an index records the version its
#: fingerprints were made with and refuses another. 2: invisible characters removed, look-alikes folded;
#: 3: shingles stay within a sentence or a line.
FINGERPRINT_VERSION = 3

WEIGHTINGS = ("frequency", "presence")

# Default_Ignorable_Code_Point of the Unicode Character Database (DerivedCoreProperties.txt, Unicode
# 15.0; Python's unicodedata does not have the property): characters that render as nothing, such as
# the soft hyphen of `&shy;` or the zero width space. Normalisation removes them, since inside a word
# they would split it. Inclusive code point ranges.
DEFAULT_IGNORABLE_RANGES: tuple[tuple[str, int, int], ...] = (
    ("SOFT HYPHEN", 0x00AD, 0x00AD),
    ("COMBINING GRAPHEME JOINER", 0x034F, 0x034F),
    ("ARABIC LETTER MARK", 0x061C, 0x061C),
    ("HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER", 0x115F, 0x1160),
    ("KHMER VOWEL INHERENT AQ, AA", 0x17B4, 0x17B5),
    ("MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR", 0x180B, 0x180F),
    ("ZERO WIDTH SPACE, NON-JOINER, JOINER, LEFT-TO-RIGHT MARK, RIGHT-TO-LEFT MARK", 0x200B, 0x200F),
    ("bidirectional embeddings and overrides", 0x202A, 0x202E),
    ("WORD JOINER, invisible operators, bidirectional isolates, deprecated format characters", 0x2060, 0x206F),
    ("HANGUL FILLER", 0x3164, 0x3164),
    ("VARIATION SELECTOR-1 to -16", 0xFE00, 0xFE0F),
    ("ZERO WIDTH NO-BREAK SPACE (byte order mark)", 0xFEFF, 0xFEFF),
    ("HALFWIDTH HANGUL FILLER", 0xFFA0, 0xFFA0),
    ("reserved", 0xFFF0, 0xFFF8),
    ("SHORTHAND FORMAT LETTER OVERLAP to UP STEP", 0x1BCA0, 0x1BCA3),
    ("MUSICAL SYMBOL BEGIN BEAM to END PHRASE", 0x1D173, 0x1D17A),
    ("tags, VARIATION SELECTOR-17 to -256, reserved", 0xE0000, 0xE0FFF),
)

# Scripts written without spaces between words. ``\w+`` would make a whole run of them one token (a
# one-character edit would change the only token), so each of their word characters is a token of
# its own and width-w shingles become character w-grams there. Hangul is absent on purpose: Korean
# separates words with spaces. Inclusive code point ranges.
UNSEGMENTED_RANGES: tuple[tuple[str, int, int], ...] = (
    ("Thai", 0x0E00, 0x0E7F),
    ("Lao", 0x0E80, 0x0EFF),
    ("Myanmar", 0x1000, 0x109F),
    ("Khmer", 0x1780, 0x17FF),
    ("Khmer Symbols", 0x19E0, 0x19FF),
    ("CJK Symbols and Punctuation (iteration marks, ideographic numbers)", 0x3000, 0x303F),
    ("Hiragana", 0x3040, 0x309F),
    ("Katakana", 0x30A0, 0x30FF),
    ("Bopomofo", 0x3100, 0x312F),
    ("Bopomofo Extended", 0x31A0, 0x31BF),
    ("Katakana Phonetic Extensions", 0x31F0, 0x31FF),
    ("CJK Unified Ideographs Extension A", 0x3400, 0x4DBF),
    ("CJK Unified Ideographs", 0x4E00, 0x9FFF),
    ("Yi Syllables", 0xA000, 0xA48F),
    ("Myanmar Extended-B", 0xA9E0, 0xA9FF),
    ("Myanmar Extended-A", 0xAA60, 0xAA7F),
    ("CJK Compatibility Ideographs", 0xF900, 0xFAFF),
    ("Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana Extension", 0x1AFF0, 0x1B16F),
    ("Supplementary and Tertiary Ideographic Planes (CJK Extensions B-I)", 0x20000, 0x3FFFF),
)

# Token hash: polynomial over the token's code points, sum(cp[j] * _BASE**j) mod 2**64 (XXH64's
# PRIME64_1; odd, so its inverse mod 2**64 exists: terms weighted by absolute position, summed per
# token, times _BASE**-start, are the token's polynomial).
_BASE = 0x9E3779B185EBCA87
# Multiplier that folds a shingle's token hashes in order (odd, so the fold is a bijection in each
# position), and the murmur3 fmix64 constants that spread a value over all 64 bits. 0-d arrays: a
# numpy scalar operand is converted on every call, which costs as much as the operation on a short text.
GOLDEN_64 = 0x9E3779B97F4A7C15  # 2**64 / the golden ratio, odd: also spreads minhash.py's donor attempts
_FOLD = np.array(GOLDEN_64, dtype=np.uint64)
_FMIX1 = np.array(0xFF51AFD7ED558CCD, dtype=np.uint64)
_FMIX2 = np.array(0xC4CEB9FE1A85EC53, dtype=np.uint64)
_SHIFT33 = np.array(33, dtype=np.uint64)

# Segment ends. Shingles stay within a segment, so a text whose sentences or blocks come in another
# order has the same shingles. A line break ends a segment (html-text ends every block with one), as
# do the paragraph separators and the ideographic full stop; a sentence end (NFKC makes the fullwidth
# forms ASCII) ends one when no word character of a spaced script follows: "3.5", "a.b" and "?q=" do
# not, "e.g. " does (both copies of a text cut alike). docs/how-it-works.md "Where shingles stop" has
# the figures.
_ALWAYS_ENDS = "\n\r\u2028\u2029\u3002"
_SENTENCE_ENDS = ".!?\u061f\u0964\u0965"

# Classes of code points, ordered: the word characters are those of class _WORD and above, and a
# character ends a segment where its class is above the next one's glue (1 for a word character of a
# spaced script, else 0) and below _WORD (:func:`_events`).
_NON_WORD, _SENTENCE_END, _LINE_END, _WORD, _SOLO, _IGNORED = range(6)


def _code_point_classes() -> np.ndarray:
    """Class of every code point: non-word, sentence end, line end, ``\\w`` word character, word
    character of its own, or default-ignorable.

    Built from ``re`` itself, so the word characters are exactly those of ``\\w`` in this Python.
    """
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    classes = np.zeros(0x110000, dtype=np.uint8)
    for run in re.finditer(r"\w+", every):
        classes[run.start() : run.end()] = _WORD
    for _, first, last in UNSEGMENTED_RANGES:
        block = classes[first : last + 1]
        block[block == _WORD] = _SOLO
    for _, first, last in DEFAULT_IGNORABLE_RANGES:
        classes[first : last + 1] = _IGNORED
    classes[[ord(char) for char in _SENTENCE_ENDS]] = _SENTENCE_END
    classes[[ord(char) for char in _ALWAYS_ENDS]] = _LINE_END
    return classes


def _confusable_fold() -> np.ndarray:
    """Every code point's look-alike letter (itself for most): the package's confusable_fold.json, made
    from Unicode's confusables.txt by tools/make_confusable_fold.py (which says how)."""
    table = json.loads(resources.files(__package__).joinpath("confusable_fold.json").read_text(encoding="utf-8"))
    fold = np.arange(0x110000, dtype=np.uint32)
    for source, target in table["fold"].items():
        fold[int(source, 16)] = int(target, 16)
    return fold


def _lower_case(*tables: np.ndarray) -> tuple[list[np.ndarray], str]:
    """Each of ``tables`` (indexed by code point) taken at every code point's lower case where
    ``str.lower()`` makes it one code point; and the code points it does not (U+0130 becomes two),
    or lower-cases in context (capital sigma, final or not by what follows)."""
    lower = np.arange(0x110000, dtype="<u4")
    special = ["\u03a3"]
    for start in range(0, 0x110000, 4096):
        block = lower[start : start + 4096].tobytes().decode("utf-32-le", "surrogatepass")
        lowered = block.lower()
        if len(lowered) == len(block):
            lower[start : start + 4096] = np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), dtype="<u4")
            continue
        for char in block:
            folded = char.lower()
            if len(folded) == 1:
                lower[ord(char)] = ord(folded)
            else:
                special.append(char)
    return [table.take(lower) for table in tables], "".join(special)


_CLASSES = _code_point_classes()
# Normalisation lower-cases through tables, composed with the classes and the look-alike fold: str.lower()
# of a text that is not ASCII cost a page more than NFKC (60 us of 16,800 characters). The tables take
# a code point as NFKC leaves it; a text that holds one of _LOWER_SPECIAL is lower-cased by str.lower()
# first (the tables change nothing more: lower case is its own lower case).
(_LOWER_CLASSES, _LOWER_FOLD), _LOWER_SPECIAL = _lower_case(_CLASSES, _confusable_fold())
# Powers of _BASE and of its inverse by position, grown (doubling) to the longest text seen.
_POWERS = (np.ones(0, dtype=np.uint64), np.ones(0, dtype=np.uint64))


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """At least ``n`` powers of _BASE and of its inverse, kept: a cumprod per call costs ~30%."""
    global _POWERS
    if len(_POWERS[0]) < n:
        size = max(1024, 1 << (n - 1).bit_length())
        tables = []
        for factor in (_BASE, pow(_BASE, -1, 1 << 64)):
            table = np.full(size, factor, dtype=np.uint64)
            table[0] = 1
            tables.append(np.cumprod(table, out=table))  # uint64 products wrap mod 2**64
        _POWERS = (tables[0], tables[1])
    return _POWERS


# ASCII text is read with one bytes.translate: every byte to its lower-case form if that is a word
# character (48 and above: above every class that is not one), else to its class (NFKC and the
# look-alike fold change no ASCII character, and it holds no default-ignorable one).
_ASCII_CODES = bytes(
    (ord(char.lower()) if _CLASSES[ord(char.lower())] == _WORD else int(_CLASSES[byte])) if char.isascii() else 0
    for byte, char in enumerate(map(chr, range(256)))
)


class Tokenised(NamedTuple):
    """A text as :func:`_tokenise` reads it, framed by two line breaks before and after it: the inner
    ones (each a segment end) are part of its :attr:`points`, the outer ones neighbours to read.

    The events are the token starts and the segment ends, in text order."""

    framed: np.ndarray  # normalised code points (on the ASCII path, a non-word character's class)
    framed_word: np.ndarray  # which of them are word characters
    ascii: bool  # the ASCII path: callers read line breaks from the text itself
    at: np.ndarray  # index in points of each event
    token: np.ndarray  # which events are token starts (the others end a segment)
    by_line: bool  # the text is :func:`shingled_by_line`, found on the way (NFKC left it as it was)

    @property
    def points(self) -> np.ndarray:
        """The code points of the text, a line break before and after it."""
        return self.framed[1:-1]

    @property
    def word(self) -> np.ndarray:
        """Which of :attr:`points` are word characters."""
        return self.framed_word[1:-1]

    @property
    def starts(self) -> np.ndarray:
        """Index in :attr:`points` of each token's first code point."""
        return self.at[self.token]


_WORD_CLASS = np.array(_WORD, dtype=np.uint8)  # 0-d: a scalar operand is converted on every call


def _tokenise(text: str) -> Tokenised:
    """The code points of ``text`` as fingerprints read it, framed (:class:`Tokenised`), which of them
    are word characters, and where its tokens start and its segments end (:func:`_events`).

    Normalisation: default-ignorable code points removed, NFKC, lower case, look-alike letters
    folded. A token is a run of word characters, or a word character of an unsegmented script
    (class :data:`_SOLO`) alone.
    """
    if text.isascii():
        codes = np.frombuffer(f"\n\n{text}\n\n".encode("ascii").translate(_ASCII_CODES), dtype=np.uint8)
        word = np.greater_equal(codes, _WORD_CLASS)
        return Tokenised(codes, word, True, *_events(codes, word, word, False), True)
    return _tokenise_points(*_normalised(text))


def _events(classes: np.ndarray, word: np.ndarray, glue: np.ndarray, solo: bool) -> tuple[np.ndarray, np.ndarray]:
    """Where the tokens start and the segments end in a framed text (``classes``, of which ``word``
    are word characters and ``glue`` those of spaced scripts), in one ordered index of the text
    within the outer line breaks, and which of those are token starts.

    A code point ends a segment where its class is above the glue of the next one and it is not a
    word character: a line end always, a sentence end unless a word character of a spaced script
    follows. A token starts at a word character after a non-word one, or at one of its own (``solo``).
    A word character's class is above any glue, so the events are the code points whose class is
    above the next one's glue, less the word characters that continue a token.
    """
    events = np.greater(classes[1:-1], glue[2:].view(np.uint8))
    continues = np.logical_and(glue[1:-1] if solo else word[1:-1], glue[:-2] if solo else word[:-2])
    np.greater(events, continues, out=events)
    at = events.nonzero()[0]
    return at, word[1:-1].take(at)


#: The normalised text keeps at most this many times the characters of the text. NFKC lengthens a
#: few characters many times (U+FDFA: 18 characters), which a page can repeat a million times (843
#: MB and 5.6 s to sign 1M of them); real text grows a few percent at most.
MAX_GROWTH = 2
_NFKC_CHUNK = 1 << 16


def _nfkc_lower(text: str, chunk: int = _NFKC_CHUNK, lower: bool = True) -> str:
    """NFKC and lower case (NFKC alone without ``lower``) of ``text``, its first ``MAX_GROWTH *
    len(text)`` characters. A long text is normalised in chunks, until that many are made, each cut
    before its last space or line break, where neither NFKC nor lower() joins what is before and
    after (they compose with nothing and end a final sigma's context); a run of ``chunk`` characters
    without one is cut where it ends."""
    limit = MAX_GROWTH * len(text)
    parts, made, start = [], 0, 0
    while start < len(text) and made < limit:
        end = len(text)
        if end - start > chunk:
            end = max(text.rfind(" ", start + 1, start + chunk), text.rfind("\n", start + 1, start + chunk))
            end = end if end > start else start + chunk
        part = unicodedata.normalize("NFKC", text[start:end])
        parts.append(part.lower() if lower else part)
        made, start = made + len(parts[-1]), end
    return "".join(parts)[:limit]


def _normalised(text: str) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """The code points of ``text`` without default-ignorables, NFKC (:func:`_nfkc_lower`), to be
    lower-cased by :data:`_LOWER_FOLD`, two line breaks before and after them; the classes of their lower
    case, the highest class, and whether ``text`` is :func:`shingled_by_line` (NFKC returns a text
    that is normalised as it is, which only a text cut in chunks must be checked for). NFKC and lower()
    turn default-ignorables into default-ignorables only, and nothing else into one, so the normalised
    text holds one exactly when ``text`` does: only then, or when the growth limit cut it (the cut may
    have left one out), is ``text`` searched for them."""
    normalised = _nfkc_lower(text, lower=False)
    by_line = normalised == text if len(text) <= _NFKC_CHUNK else unicodedata.is_normalized("NFKC", text)
    if any(char in normalised for char in _LOWER_SPECIAL):
        limit = MAX_GROWTH * len(text)
        if len(text) <= _NFKC_CHUNK and len(normalised) < limit:  # one chunk, not cut: lower case it as is
            normalised = normalised.lower()[:limit]
        else:
            normalised = _nfkc_lower(text)
    points = np.frombuffer(f"\n\n{normalised}\n\n".encode("utf-32-le", "surrogatepass"), dtype="<u4")
    classes = _LOWER_CLASSES.take(points)
    top = int(classes.max())
    if top == _IGNORED or len(normalised) == MAX_GROWTH * len(text):
        raw = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        kept = _CLASSES.take(raw) != _IGNORED
        if not kept.all():
            return (*_normalised(_text(raw[kept]))[:3], by_line)
    return points, classes, top, by_line


def shingled_by_line(text: str) -> bool:
    """Whether the shingles of any lines of ``text`` joined are exactly those of each line alone.

    A line break ends a segment and joins nothing in normalisation, unless the growth limit cuts
    the normalised text, which an ASCII or NFKC-normalised text never reaches: lower case at most
    doubles a text."""
    return text.isascii() or unicodedata.is_normalized("NFKC", text)


def _tokenise_points(points: np.ndarray, classes: np.ndarray, top: int, by_line: bool) -> Tokenised:
    """:func:`_tokenise` of normalised code points, as :func:`_normalised` gives them."""
    word = np.greater_equal(classes, _WORD_CLASS)
    solo = top == _SOLO
    glue = classes == _WORD if solo else word
    return Tokenised(_LOWER_FOLD.take(points), word, False, *_events(classes, word, glue, solo), by_line)


def _text(points: np.ndarray) -> str:
    return points.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")


# The ufuncs of fmix64, called with their output as an argument: 10% less time than in-place operators
# or np attributes on a short text, where a call costs more than its elements.
_RIGHT_SHIFT, _XOR, _MULTIPLY = np.right_shift, np.bitwise_xor, np.multiply


def fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's finaliser, in place on ``x`` (a uint64 array the caller owns), which it returns."""
    shifted = _RIGHT_SHIFT(x, _SHIFT33)
    _XOR(x, shifted, x)
    _MULTIPLY(x, _FMIX1, x)
    _RIGHT_SHIFT(x, _SHIFT33, shifted)
    _XOR(x, shifted, x)
    _MULTIPLY(x, _FMIX2, x)
    _RIGHT_SHIFT(x, _SHIFT33, shifted)
    _XOR(x, shifted, x)
    return x


#: Framed texts of this many code points and more sum their tokens by accumulation: 2.7 us against
#: 2.0 summed event by event at 1,000 code points, 4.6 against 5.6 at 4,000, 10.3 against 16.8 at 12,500
#: (decisions/shingle-stream.md).
_ACCUMULATED_FROM = 2048


def _event_hashes(tokenised: Tokenised) -> np.ndarray:
    """fmix64 of the polynomial hash of the code points from each event to the next: each token's
    hash at its start, 0 at a segment end (no word character follows one before the next event).

    The terms ``cp * B**position`` of the word characters (0 for the others) summed from each event
    to the next, times ``B**-start``. A short text sums them event by event (``add.reduceat``); a
    longer one accumulates them from the start of the framed text and takes the differences of the
    sums before each event (the first framed code point is a line break: 0; the last event, the line
    break after the text, sums nothing): a sum per event costs ~10 ns an event, the accumulation
    ~0.7 ns a code point and three numpy calls more (:data:`_ACCUMULATED_FROM`).
    """
    framed, at = tokenised.framed, tokenised.at
    n = len(framed)
    powers, inverses = _powers(n)
    # The points masked before they are widened: a fifth of the time of masking the terms.
    terms = np.multiply(np.multiply(framed, tokenised.framed_word.view(np.uint8)), powers[:n])
    if n < _ACCUMULATED_FROM:
        hashes = np.add.reduceat(terms[1:], at)
    else:
        np.add.accumulate(terms, out=terms)
        before = terms.take(at)
        hashes = np.zeros(len(at), dtype=np.uint64)
        np.subtract(before[1:], before[:-1], out=hashes[:-1])
    hashes *= inverses[1:].take(at)  # a point's index in points is one less than in framed
    return fmix64(hashes)


def _shingle_hashes(token_hashes: np.ndarray, width: int) -> np.ndarray:
    """One 64-bit hash per shingle of tokens that are one segment: fmix64 of the ordered fold of its
    tokens' hashes, ``sum(t[i + j] * _FOLD**(span - 1 - j))``, in one ``np.correlate`` (uint64
    products and sums wrap mod 2**64): on a short text, time goes by numpy call more than by element."""
    n = len(token_hashes)
    if n == 0:
        return token_hashes
    return fmix64(np.correlate(token_hashes, _fold_weights(min(width, n))))


def _end_places(width: int) -> int:
    """How many zeros stand for a segment end in the stream of :func:`_shingles`."""
    return max(width - 1, 1)


# The places an event takes in that stream, by whether it is a token start, by width.
_PLACES: dict[int, np.ndarray] = {}


def _stream(tokenised: Tokenised, width: int) -> tuple[np.ndarray, np.ndarray]:
    """How many places of :func:`_shingles`' stream each event takes, and which places are tokens."""
    places = _PLACES.get(width)
    if places is None:
        places = _PLACES[width] = np.array([_end_places(width), 1], dtype=np.intp)
    repeats = places.take(tokenised.token.view(np.uint8))
    return repeats, tokenised.token.repeat(repeats)  # the text starts and ends with an end: zeros around it


def _shingles(
    tokenised: Tokenised, width: int, event_hashes: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The shingle hashes of ``tokenised``, segment after segment, and which windows of their stream
    are shingles (by the place where each window starts): :func:`_stream_shingles` of its stream.
    ``event_hashes``: :func:`_event_hashes` of ``tokenised`` when the caller has them."""
    if event_hashes is None:
        event_hashes = _event_hashes(tokenised)
    return _stream_shingles(event_hashes, *_stream(tokenised, width), width)


def _stream_shingles(
    event_hashes: np.ndarray, repeats: np.ndarray, is_token: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """The shingle hashes of a stream (:func:`_stream`) and which of its windows are shingles.

    The stream holds the token hashes in order, and ``width - 1`` zeros (at least one) for every
    segment end, which add nothing to a fold: one correlation of the stream gives each window of a
    segment's tokens, and a segment shorter than ``width`` its one shingle in the window that ends at
    its last token, zeros before it. A window is taken where it ends at a token and starts at one (no
    end can be inside it: its zeros would take ``width - 1`` places), or where the place after it is a
    zero: the token ends a segment (docs/decisions/shingle-stream.md). Summed from an end to the next
    event, the code points add to 0 (none is a word character), so an end's hash is 0.
    """
    windows = np.correlate(event_hashes.repeat(repeats), _fold_weights(width))[:-1]
    # The window that ends at place k + width - 1 is taken where that place is a token and place k is
    # one or place k + width is not.
    taken = np.greater_equal(is_token[:-width], is_token[width:])
    taken &= is_token[width - 1 : -1]
    return fmix64(windows[taken]), taken


def _tokenise_joined(texts: Sequence[str]) -> tuple[Tokenised, np.ndarray]:
    """All ``texts`` tokenised as one, text after text, and the index of the code point where each
    text ends (a line break, which ends a segment: no token or shingle crosses it).

    ASCII texts are joined as text. Others are normalised one by one and joined as code points: NFKC
    returns a text that is already normalised as it is, and joined, every text would pay for the one
    that is not.
    """
    if all(map(str.isascii, texts)):
        lengths = np.fromiter(map(len, texts), dtype=np.intp, count=len(texts))
        return _tokenise("\n".join(texts)), (lengths + 1).cumsum()
    normalised = [_normalised(text) for text in texts]
    lengths = np.fromiter((len(points) for points, _, _, _ in normalised), dtype=np.intp, count=len(texts))
    tokenised = _tokenise_points(np.concatenate([points for points, _, _, _ in normalised]),
                                 np.concatenate([classes for _, classes, _, _ in normalised]),
                                 max(top for _, _, top, _ in normalised), all(by_line for *_, by_line in normalised))
    return tokenised, lengths.cumsum() - 1  # each text framed: the first line break of the next


@functools.lru_cache(maxsize=64)
def _fold_weights(span: int) -> np.ndarray:
    """``_FOLD**(span - 1), ..., _FOLD, 1``: the weight of each token of a shingle of ``span`` tokens."""
    weights = np.full(span, _FOLD, dtype=np.uint64)
    weights[0] = 1
    weights = np.cumprod(weights)[::-1].copy()
    weights.flags.writeable = False  # shared by every call
    return weights


def segment_hashes(text: str) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit hash and the token count of every line of ``text`` (split on "\\n"), in order.

    A text's lines are its segments: html-text ends every block (paragraph, list item, heading) with
    a line break. The hash is that of the line's :func:`tokens` in order, so two lines that differ
    only in case, spacing or punctuation hash alike; a line without tokens has hash 0 and count 0.
    """
    tokenised = _tokenise(text)
    hashes, counts, _ = _lines(tokenised, text, _event_hashes(tokenised))
    return hashes, counts


def _lines(tokenised: Tokenised, text: str, event_hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`segment_hashes` of ``text`` tokenised (its :func:`_event_hashes` given), and the line of
    each event: the line breaks before it (a line break counts itself)."""
    # The ASCII path keeps a non-word character's class, so its line breaks are read from the text itself;
    # the first event is the line break that frames the text.
    points = np.frombuffer(f"\n{text}\n".encode("ascii"), np.uint8) if tokenised.ascii else tokenised.points
    breaks = points.take(tokenised.at) == 10
    breaks[0] = False
    event_lines = np.cumsum(breaks)
    line_of = event_lines[tokenised.token]
    counts = np.bincount(line_of, minlength=text.count("\n") + 1)  # normalisation keeps every "\n" and makes none
    ends = counts.cumsum()
    starts = ends - counts
    # Each token's hash mixed with its place in the line, summed per line (mod 2**64): order counts.
    place = np.arange(len(line_of)) - starts.repeat(counts)
    mixed = event_hashes[tokenised.token]
    mixed ^= place.view(np.uint64) * _FOLD
    sums = np.zeros(len(mixed) + 1, dtype=np.uint64)
    np.cumsum(fmix64(mixed), out=sums[1:])
    return fmix64(sums.take(ends) - sums.take(starts)), counts, event_lines


def tokens(text: str) -> list[str]:
    """Tokens of normalised ``text`` (:data:`DEFAULT_IGNORABLE_RANGES` removed, NFKC, lower case,
    look-alike letters folded): ``\\w+`` runs, except that every word character of an unsegmented
    script (:data:`UNSEGMENTED_RANGES`) is a token of its own."""
    return _token_strings(_tokenise(text))


def _token_strings(tokenised: Tokenised) -> list[str]:
    points, starts, word = tokenised.points, tokenised.starts, tokenised.word
    n = len(points)
    breaks = np.flatnonzero(~word)
    # A token ends at the next token's start or at the first non-word character after its start.
    ends = np.minimum(np.append(starts[1:], n), np.append(breaks, n)[np.searchsorted(breaks, starts)])
    normalised = _text(points)
    return [normalised[start:end] for start, end in zip(starts.tolist(), ends.tolist(), strict=True)]


def token_count(text: str) -> int:
    """``len(tokens(text))`` without building the token strings (a word count for length rules)."""
    return len(_tokenise(text).starts)


def segments(text: str) -> list[list[str]]:
    """The :func:`tokens` of ``text`` by segment, segments without tokens left out: a line ends one,
    and so does a sentence end (``.``, ``!``, ``?``, ``。`` and others) that no word character of a
    spaced script follows."""
    tokenised = _tokenise(text)
    toks = iter(_token_strings(tokenised))
    found: list[list[str]] = [[]]
    for token in tokenised.token.tolist():  # the last event ends a segment: the line break after the text
        if token:
            found[-1].append(next(toks))
        elif found[-1]:
            found.append([])
    return found[:-1]


def shingles(text: str, width: int = 4) -> list[str]:
    """Overlapping ``width``-grams of the tokens of each of the text's :func:`segments`, space-joined.

    A segment shorter than ``width`` tokens is one shingle of all its tokens; empty text gives ``[]``.
    """
    _check_width(width)
    found = []
    for toks in segments(text):
        if len(toks) <= width:
            found.append(" ".join(toks))
        else:
            found.extend(" ".join(toks[i : i + width]) for i in range(len(toks) - width + 1))
    return found


def shingle_hash(shingle: str) -> int:
    """The 64-bit hash fingerprinting gives ``shingle``, a string as :func:`shingles` returns it.

    The shingle is re-tokenised, so the hash is the fold over all its tokens: exactly the value the
    text path computes for the same run of tokens.
    """
    tokenised = _tokenise(shingle)
    token_hashes = _event_hashes(tokenised)[tokenised.token]
    if len(token_hashes) == 0:
        raise ValueError(f"a shingle needs at least one token, got {shingle!r}")
    return int(_shingle_hashes(token_hashes, width=len(token_hashes))[0])


def _check_width(width: int) -> None:
    if width < 1:
        raise ValueError(f"shingle width must be >= 1, got {width}")


# lanes[k, i] = hash i >> k & _LANE_BITS: bits k, k + 8, ..., k + 56 of the hash, one per byte.
_LANE_SHIFTS = np.arange(8, dtype=np.uint64)[:, None]
_ONE_A_BYTE = 0x0101010101010101
_LANE_BITS = np.array(_ONE_A_BYTE, dtype=np.uint64)
# Bit value of the vote of byte j of lane k (bit 8j + k), in the order of counts.reshape(8, 8).ravel().
_LANE_BIT_VALUES = np.array([1 << (8 * j + k) for k in range(8) for j in range(8)], dtype=np.uint64)


def _vote(hashes: np.ndarray) -> int:
    """The 64-bit majority vote of ``hashes``: bit i set where more than half of them have bit i set.

    Eight shifted copies of the hashes, masked to one bit per byte, add up 8 bits of every hash per
    byte without a carry while at most 255 are added (longer inputs in blocks of 255): lane k's
    byte j counts bit 8j + k. Up to 255, a lane's eight counts are compared in one int addition (four
    numpy calls less than comparing the bytes): a count c <= n is above n // 2 exactly where
    c + 127 - n // 2, at most 255, sets bit 7 of its byte.
    """
    n = len(hashes)
    if n == 0:
        return 0
    lanes = hashes >> _LANE_SHIFTS
    lanes &= _LANE_BITS
    if n <= 255:
        bias = (127 - n // 2) * _ONE_A_BYTE
        vote = 0
        for lane, counts in enumerate(np.add.reduce(lanes, axis=1).tolist()):
            vote |= ((counts + bias) >> 7 & _ONE_A_BYTE) << lane
        return vote
    blocks = np.add.reduceat(lanes, np.arange(0, n, 255), axis=1).astype("<u8", copy=False)
    counts = blocks.view(np.uint8).reshape(8, -1, 8).sum(axis=1).ravel()
    return int((counts > n // 2) @ _LANE_BIT_VALUES)


def _votes(hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """:func:`_vote` of each of several runs of ``hashes`` (``counts`` hashes each, in order), in one
    pass: the lanes summed per run, or per block of at most 255 hashes within a run and the blocks'
    byte counts then summed per run."""
    votes = np.zeros(len(counts), dtype=np.uint64)
    runs = counts.nonzero()[0]
    if not len(runs):
        return votes
    counts = counts[runs]
    starts = counts.cumsum() - counts
    lanes = hashes >> _LANE_SHIFTS
    lanes &= _LANE_BITS
    if counts.max() <= 255:
        tallies = np.add.reduceat(lanes, starts, axis=1).astype("<u8", copy=False).view(np.uint8).reshape(8, -1, 8)
    else:
        blocks = (counts + 254) // 255
        first_blocks = blocks.cumsum() - blocks
        block_starts = np.arange(blocks.sum()) * 255 + np.repeat(starts - first_blocks * 255, blocks)
        sums = np.add.reduceat(lanes, block_starts, axis=1).astype("<u8", copy=False).view(np.uint8).reshape(8, -1, 8)
        tallies = np.add.reduceat(sums, first_blocks, axis=1, dtype=np.intp)  # [lane, run, byte]
    majority = tallies > (counts >> 1)[:, None]
    votes[runs] = majority.transpose(1, 0, 2).reshape(len(runs), 64) @ _LANE_BIT_VALUES
    return votes


def _distinct_runs(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of each run of ``values`` (``counts`` each, in order), run after
    run, and how many each run keeps. Sorts ``values`` in place, run by run: one sort of the whole
    batch keyed by run number took ~7x as long (a 64-bit sort of a long array against short 32-bit ones)."""
    ends = counts.cumsum()
    starts = ends - counts
    for start, end in zip(starts.tolist(), ends.tolist()):
        values[start:end].sort()
    first = first_of_runs(values)
    first[starts[counts > 0]] = True
    before = np.zeros(len(values) + 1, dtype=np.intp)
    np.cumsum(first, out=before[1:])
    return values[first], before[ends] - before[starts]


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, sorted: a sort and a neighbour comparison.

    ``np.unique`` took several times as long (numpy 2 hashes, then sorts its result).
    """
    return _distinct_of_sorted(np.sort(values))


def _distinct_of_sorted(ordered: np.ndarray) -> np.ndarray:
    """The first of each run of equal values of sorted ``ordered``."""
    return ordered[first_of_runs(ordered)]


def first_of_runs(values: np.ndarray) -> np.ndarray:
    """Where each run of equal neighbours of ``values`` starts (a bool mask the caller owns)."""
    first = np.empty(len(values), dtype=bool)
    first[:1] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return first


# Words used throughout: "shingles" are the strings (:func:`shingles`); "shingle hashes" their 64-bit
# hashes in text order, repeats included, which vote on the fingerprint; "verification hashes" the
# sorted distinct low 32 bits of the shingle hashes, which a record keeps for Jaccard verification.


@dataclass(frozen=True)
class Shingling:
    """A text tokenised once: its token count and its shingle hashes."""

    words: int
    hashes: np.ndarray


class LineShingles(NamedTuple):
    """A text tokenised once for both the boilerplate learner and signing: each line's hash and token
    count (:func:`segment_hashes`), and the text's shingle hashes with the line each is on."""

    hashes: np.ndarray
    counts: np.ndarray
    shingles: np.ndarray
    lines: np.ndarray
    by_line: bool  # the text is :func:`shingled_by_line`: :meth:`kept` is exact

    def kept(self, keep: np.ndarray) -> tuple[Shingling, np.ndarray]:
        """The shingling of the lines where ``keep`` (a bool a line) joined, and the shingle hashes of
        the others. Exact where :attr:`by_line` only: then the lines' shingles are those of each line
        alone."""
        on_kept = keep[self.lines]
        return Shingling(int(self.counts[keep].sum()), self.shingles[on_kept]), self.shingles[~on_kept]


@dataclass(frozen=True)
class Signature:
    """What a record keeps of a text: its fingerprint and its verification hashes."""

    fingerprint: int
    hashes: np.ndarray


def _without(hashes: np.ndarray, exclude: np.ndarray | None) -> np.ndarray:
    """The shingle hashes whose verification hashes (low 32 bits) are not in ``exclude``."""
    if exclude is not None and len(exclude) and len(hashes):
        return hashes[~np.isin(hashes.astype(np.uint32), exclude)]
    return hashes


class Fingerprinter:
    """Fingerprints texts with fixed parameters; the object the pipeline builds once from settings.

    ``bits`` may be 1..64: a fingerprint of fewer bits is the low bits of the 64-bit one, since
    bit i is voted by bit i of the shingle hashes alone.
    """

    def __init__(self, *, bits: int = 64, width: int = 4, weighting: str = "frequency") -> None:
        if not 1 <= bits <= 64:
            raise ValueError(f"bits must be between 1 and 64, got {bits}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        _check_width(width)
        self.bits = bits
        self.width = width
        self.weighting = weighting
        self._mask = (1 << bits) - 1

    def shingling(self, text: str) -> Shingling:
        """Tokenise ``text`` once: its token count (:func:`token_count`) and its shingle hashes."""
        tokenised = _tokenise(text)
        return Shingling(int(np.count_nonzero(tokenised.token)), _shingles(tokenised, self.width)[0])

    def line_shingles(self, text: str) -> LineShingles:
        """``text``'s :class:`LineShingles`, from one tokenisation."""
        tokenised = _tokenise(text)
        event_hashes = _event_hashes(tokenised)
        hashes, counts, event_lines = _lines(tokenised, text, event_hashes)
        repeats, is_token = _stream(tokenised, self.width)
        shingles, taken = _stream_shingles(event_hashes, repeats, is_token, self.width)
        # A shingle is on the line of the token its window ends at: the window at place k, at place k + width - 1.
        lines = event_lines.repeat(repeats)[self.width - 1 : -1][taken]
        return LineShingles(hashes, counts, shingles, lines, tokenised.by_line)

    def shingle_hashes(self, text: str) -> np.ndarray:
        """The 64-bit hash of every shingle of ``text``, segment after segment, repeats included."""
        return _shingles(_tokenise(text), self.width)[0]

    def signature(self, text: str | Shingling, exclude: np.ndarray | None = None) -> Signature:
        """The fingerprint and verification hashes of ``text`` (or of its :meth:`shingling`), leaving out
        the shingles whose verification hashes are in ``exclude`` (sorted, such as a host's furniture)."""
        hashes = _without(text.hashes if isinstance(text, Shingling) else self.shingle_hashes(text), exclude)
        return Signature(self._weighted_vote(hashes), verification_hashes(hashes))

    def signatures(self, texts: Sequence[str]) -> list[tuple[int, Signature]]:
        """Each text's token count and signature (as :meth:`shingling` and :meth:`signature` give them),
        computed for all ``texts`` at once: a short text costs its ~40 numpy calls more than its
        characters, and a batch makes them once. ASCII texts are taken apart from the others, which
        would take them off the ASCII path."""
        if len(texts) == 1:  # one text alone takes fewer numpy calls than a batch of one
            shingling = self.shingling(texts[0])
            return [(shingling.words, self.signature(shingling))]
        is_ascii = [text.isascii() for text in texts]
        if 0 < sum(is_ascii) < len(texts):
            groups = [[i for i, flag in enumerate(is_ascii) if flag == wanted] for wanted in (True, False)]
            signed = {i: one for group in groups for i, one in zip(group, self.signatures([texts[i] for i in group]))}
            return [signed[i] for i in range(len(texts))]
        tokenised, bounds = _tokenise_joined(texts)
        hashes, taken = _shingles(tokenised, self.width)
        # Before each text's end: its tokens and ends, their places in the stream, the windows there.
        tokens, events = tokenised.starts.searchsorted(bounds), tokenised.at.searchsorted(bounds)
        places = tokens + _end_places(self.width) * (events - tokens)
        words = np.diff(tokens, prepend=0)
        counts = np.diff(taken.nonzero()[0].searchsorted(places - (self.width - 1)), prepend=0)
        if self.weighting == "presence":
            fingerprints = _votes(*_distinct_runs(hashes.copy(), counts))
        else:
            fingerprints = _votes(hashes, counts)
        kept, kept_counts = _distinct_runs(hashes.astype(np.uint32), counts)  # verification hashes
        kept.flags.writeable = False  # each text's are a slice of it
        ends = kept_counts.cumsum().tolist()
        mask = self._mask
        return [
            (words, Signature(fingerprint & mask, kept[start:end]))
            for words, fingerprint, start, end in zip(words.tolist(), fingerprints.tolist(), [0, *ends], ends)
        ]

    def fingerprint(self, text: str, exclude: np.ndarray | None = None) -> int:
        """The fingerprint alone (see :meth:`signature`), without the verification hashes."""
        return self._weighted_vote(_without(self.shingle_hashes(text), exclude))

    def _weighted_vote(self, hashes: np.ndarray) -> int:
        """Frequency weighting: every occurrence of a shingle votes; presence: each distinct one once."""
        return self.vote(hashes if self.weighting == "frequency" else _sorted_distinct(hashes))

    def vote(self, hashes: np.ndarray) -> int:
        """Charikar's bit vote, one vote per element of ``hashes`` (repeats vote again): bit i is set
        where more than half of the elements have bit i set (see :func:`_vote`)."""
        return _vote(hashes) & self._mask


def simhash(
    text: str,
    *,
    bits: int = 64,
    width: int = 4,
    boilerplate: Iterable[str] = frozenset(),
    weighting: str = "frequency",
) -> int:
    """Charikar SimHash of ``text``'s word shingles, leaving out the ``boilerplate`` shingles (strings
    as :func:`shingles` gives them); 0 when no content is left (never index 0)."""
    fingerprinter = Fingerprinter(bits=bits, width=width, weighting=weighting)
    exclude = verification_hashes(np.fromiter(map(shingle_hash, boilerplate), dtype=np.uint64)) if boilerplate else None
    return fingerprinter.fingerprint(text, exclude)


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints (non-negative ints)."""
    if a < 0 or b < 0:
        raise ValueError(f"fingerprints are non-negative, got {a} and {b}")
    return (a ^ b).bit_count()


def verification_hashes(shingle_hashes: np.ndarray) -> np.ndarray:
    """The sorted distinct 32-bit hashes a record keeps for Jaccard: the low bits of its shingle hashes
    (distinct or not: repeats are dropped here)."""
    low = shingle_hashes.astype(np.uint32)
    low.sort()
    return _distinct_of_sorted(low)


def jaccard_hashes(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted, distinct hash arrays; two empty sets give 1.0.

    The intersection is counted in one merge: a stable sort (timsort) of the two concatenated sorted
    runs merges them in linear time, and each common hash becomes a pair of equal neighbours.
    ``np.intersect1d`` took ~4x as long (a full sort and an extra copy).
    """
    if len(a) == 0 and len(b) == 0:
        return 1.0
    merged = _merged(a, b)
    inter = int(np.count_nonzero(merged[1:] == merged[:-1]))
    return inter / (len(a) + len(b) - inter)


def hashes_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct union of two sorted distinct hash arrays, merged as in :func:`jaccard_hashes`:
    a twentieth of ``np.union1d``'s time for a page's hashes (which sorts afresh)."""
    return _distinct_of_sorted(_merged(a, b))


def _merged(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a`` and ``b`` (each sorted) in one sorted array: a stable sort (timsort) of the two runs merges them."""
    merged = np.concatenate((a, b))
    merged.sort(kind="stable")
    return merged


def hashes_without(hashes: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Sorted distinct ``hashes`` less those in ``excluded`` (sorted distinct, and few: furniture).
    Each excluded hash is looked up in ``hashes``: 3x faster than ``np.isin`` for a page's hashes."""
    if not len(excluded) or not len(hashes):
        return hashes
    at = np.searchsorted(hashes, excluded)
    at = at[hashes.take(at, mode="clip") == excluded]
    if not len(at):
        return hashes
    keep = np.ones(len(hashes), dtype=bool)
    keep[at] = False
    return hashes[keep]


def jaccard(a_text: str, b_text: str, width: int = 4) -> float:
    """Shingle-set Jaccard similarity of two texts (on their verification hashes); two empty texts give 1.0."""
    fingerprinter = Fingerprinter(width=width)
    return jaccard_hashes(*(verification_hashes(fingerprinter.shingle_hashes(t)) for t in (a_text, b_text)))
