"""How a stripped page's verification hashes differ from its whole text's, kept beside them.

Two pages of one host carry the same template, so removing it can only make them less alike. A pair
whose texts match once the furniture is removed, but whose whole texts do not, lost different text:
the learner took content for furniture. Same-host pairs are therefore judged on their whole texts
(:func:`whole_text_jaccard`, exact), so a wrong learner costs no page.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scrapy_simhash.fingerprint import (
    Fingerprinter,
    hashes_union,
    hashes_without,
    jaccard_hashes,
    shingled_by_line,
    verification_hashes,
)

__all__ = ["SAME_TEXT", "WholeText", "whole_hashes", "whole_text", "whole_text_jaccard"]


class WholeText(NamedTuple):
    """Sorted distinct uint32 verification hashes: those only the whole text has (the removed lines'
    shingles), and those only the stripped text has (none where shingles stop at line ends)."""

    gained: np.ndarray
    lost: np.ndarray

    @property
    def same(self) -> bool:
        """Nothing was removed: the stripped text's hashes are the whole text's."""
        return not len(self.gained) and not len(self.lost)


_NONE = np.empty(0, np.uint32)
SAME_TEXT = WholeText(_NONE, _NONE)


def whole_text(
    fingerprinter: Fingerprinter, text: str, stripped: str, hashes: np.ndarray, removed: np.ndarray | None = None
) -> WholeText:
    """What turns ``hashes``, the verification hashes of ``stripped`` (some lines of ``text``, in
    order), into those of ``text``.

    Shingles stop at line ends, so the whole text's are the stripped text's and those of the lines
    taken out (their shingle hashes ``removed`` when the caller knows them, which it can of a text
    :func:`shingled_by_line` only: :meth:`LineShingles.kept`; else the lines are found by comparing the
    texts, and shingled): the stripped text has none the whole text has not. A text whose
    normalisation could reach across its lines is shingled whole.
    """
    if removed is None and shingled_by_line(text):
        lines = _removed_lines(text, stripped)
        removed = None if lines is None else fingerprinter.shingle_hashes(lines)
    if removed is not None:
        gained = verification_hashes(removed)
        if len(hashes):  # a few looked up in many: a fraction of np.setdiff1d's time
            gained = gained[hashes.take(hashes.searchsorted(gained), mode="clip") != gained]
        difference = WholeText(gained, _NONE)
    else:
        whole = verification_hashes(fingerprinter.shingle_hashes(text))
        difference = WholeText(np.setdiff1d(whole, hashes, assume_unique=True).astype(np.uint32),
                               np.setdiff1d(hashes, whole, assume_unique=True).astype(np.uint32))
    return SAME_TEXT if difference.same else difference


def _removed_lines(text: str, stripped: str) -> str | None:
    """The lines of ``text`` that ``stripped`` does not hold, joined in any order; None when
    ``stripped`` is not lines of ``text``. Where the stripped text is one run of the text's lines
    (furniture before and after it), that run is cut out; else lines are compared, a set of each
    text's (several times as long on a page)."""
    at = text.find(stripped)
    end = at + len(stripped)
    if at >= 0 and (at == 0 or text[at - 1] == "\n") and (end == len(text) or text[end] == "\n"):
        return text[:at] + text[end:]
    lines, kept = set(text.split("\n")), set(stripped.split("\n"))
    return "\n".join(lines - kept) if kept <= lines else None


def whole_hashes(hashes: np.ndarray, difference: WholeText) -> np.ndarray:
    """The whole text's verification hashes from a page's stored ones and their difference."""
    if difference.same:
        return hashes
    return hashes_union(hashes_without(hashes, difference.lost), difference.gained)


def whole_text_jaccard(a: np.ndarray, a_difference: WholeText, b: np.ndarray, b_difference: WholeText) -> float:
    """Jaccard similarity of two pages' whole texts; two empty texts give 1.0. Only for the few pairs
    judging reaches (a same-host candidate)."""
    return jaccard_hashes(whole_hashes(a, a_difference), whole_hashes(b, b_difference))
