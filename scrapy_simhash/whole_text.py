"""How a stripped page's verification hashes differ from its whole text's, kept beside them.

Two pages of one host carry the same template, so removing it can only make them less alike. A pair
whose texts match once the furniture is removed, but whose whole texts do not, lost different text:
the learner took content for furniture. Same-host pairs are therefore judged on their whole texts
(:func:`whole_text_jaccard`, exact), so a wrong learner costs no page.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SAME_TEXT", "WholeText", "whole_hashes", "whole_text", "whole_text_jaccard"]


class WholeText(NamedTuple):
    """Sorted distinct uint32 verification hashes: those only the whole text has (the removed lines'
    shingles), and those only the stripped text has (shingles across a removed line)."""

    gained: np.ndarray
    lost: np.ndarray

    @property
    def same(self) -> bool:
        """Nothing was removed: the stripped text's hashes are the whole text's."""
        return not len(self.gained) and not len(self.lost)


_NONE = np.empty(0, np.uint32)
SAME_TEXT = WholeText(_NONE, _NONE)


def whole_text(whole: np.ndarray, stripped: np.ndarray) -> WholeText:
    """What turns ``stripped`` (a page's stored hashes) back into ``whole`` (its whole text's)."""
    difference = WholeText(np.setdiff1d(whole, stripped, assume_unique=True).astype(np.uint32),
                           np.setdiff1d(stripped, whole, assume_unique=True).astype(np.uint32))
    return SAME_TEXT if difference.same else difference


def whole_hashes(hashes: np.ndarray, difference: WholeText) -> np.ndarray:
    """The whole text's verification hashes from a page's stored ones and their difference."""
    if difference.same:
        return hashes
    return np.union1d(np.setdiff1d(hashes, difference.lost, assume_unique=True), difference.gained)


def whole_text_jaccard(a: np.ndarray, a_difference: WholeText, b: np.ndarray, b_difference: WholeText) -> float:
    """Jaccard similarity of two pages' whole texts; two empty texts give 1.0. Only for the few pairs
    judging reaches (a same-host candidate), so plain numpy set operations."""
    whole_a, whole_b = whole_hashes(a, a_difference), whole_hashes(b, b_difference)
    if not len(whole_a) and not len(whole_b):
        return 1.0
    shared = len(np.intersect1d(whole_a, whole_b, assume_unique=True))
    return shared / (len(whole_a) + len(whole_b) - shared)
