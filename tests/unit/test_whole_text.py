"""A page's whole-text difference, found from the lines stripping removed, equals the whole text's own."""

from __future__ import annotations

import numpy as np
import pytest
from texts import article

from scrapy_simhash.fingerprint import Fingerprinter, verification_hashes
from scrapy_simhash.whole_text import SAME_TEXT, whole_hashes, whole_text

FINGERPRINTER = Fingerprinter()

PAGE = "\n".join([
    "Home | News | Sport | Contact",
    "Menu",
    "Heating 3.5 euros, e.g. in winter! See example.com?q=1 now.",
    "Pets welcome.",
    article(1, words=80, paragraph=40),
    "Menu",
    "Share this:",
    "Bright flat near the park. Viewings on weekday evenings\r",
    "Lift",
    "© 2024 Example News · Privacy — Terms",
    "",
    "Über das Café. Straße, naïve résumé.",
])


def _hashes(text: str) -> np.ndarray:
    return verification_hashes(FINGERPRINTER.shingle_hashes(text))


def _removing(text: str, removed: set[int]) -> str:
    return "\n".join(line for at, line in enumerate(text.split("\n")) if at not in removed)


@pytest.mark.parametrize("text", [PAGE, PAGE.replace("Pets", "Pets\u2026"), PAGE.replace("Lift", "Lift \u00bd")])
@pytest.mark.parametrize("removed", [{0}, {0, 1, 5, 6}, {1}, {3, 7, 8}, {0, 9, 10, 11}, {2, 4}])
def test_the_difference_turns_the_stripped_hashes_into_the_whole_texts(text: str, removed: set[int]) -> None:
    """The lines taken out (one of them, "Menu", also kept once) hold short segments, sentence ends
    at line ends and a line ending in a carriage return; the text is ASCII, not, or not NFKC-normalised
    ("…" and "½" grow: shingled whole)."""
    stripped = _removing(text, removed)
    hashes = _hashes(stripped)
    difference = whole_text(FINGERPRINTER, text, stripped, hashes)
    assert np.array_equal(whole_hashes(hashes, difference), _hashes(text))
    assert np.array_equal(difference.gained, np.setdiff1d(_hashes(text), hashes))
    assert not len(difference.lost)  # shingles stop at line ends: none crosses a removed line


@pytest.mark.parametrize("removed", [{0}, {0, 1, 5, 6}, {3, 7, 8}, {0, 9, 10, 11}])
def test_the_lines_taken_out_given_in_any_order_make_the_same_difference(removed: set[int]) -> None:
    """The learner knows the shingles of the lines it took out ("Menu" twice, once kept): they are not looked for."""
    stripped = _removing(PAGE, removed)
    hashes = _hashes(stripped)
    lines = PAGE.split("\n")
    given = "\n".join(lines[at] for at in sorted(removed, reverse=True))
    found = whole_text(FINGERPRINTER, PAGE, stripped, hashes)
    told = whole_text(FINGERPRINTER, PAGE, stripped, hashes, FINGERPRINTER.shingle_hashes(given))
    assert all(np.array_equal(a, b) for a, b in zip(told, found, strict=True)) and len(found.gained)


def test_removed_lines_that_the_stripped_text_also_holds_add_nothing() -> None:
    text = "Menu\nA first paragraph of the article.\nMenu\nA second paragraph here."
    stripped = "A first paragraph of the article.\nMenu\nA second paragraph here."
    assert whole_text(FINGERPRINTER, text, stripped, _hashes(stripped)) is SAME_TEXT


def test_a_stripped_text_without_words_gains_every_hash_of_the_whole_text() -> None:
    text = "Menu\n...\nA first paragraph of the article."
    difference = whole_text(FINGERPRINTER, text, "...", _hashes("..."))
    assert np.array_equal(difference.gained, _hashes(text)) and not len(difference.lost)


def test_a_stripped_text_that_is_not_lines_of_the_text_is_compared_with_the_whole_text() -> None:
    text = "Menu\nA first paragraph of the article."
    stripped = "A first paragraph of the article, edited."
    hashes = _hashes(stripped)
    difference = whole_text(FINGERPRINTER, text, stripped, hashes)
    assert np.array_equal(whole_hashes(hashes, difference), _hashes(text))
    assert len(difference.lost)
