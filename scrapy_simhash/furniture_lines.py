"""The lines a page lost to its host's furniture, kept beside its verification hashes.

Two pages of one host carry the same template, so removing it can only make them less alike. A pair
whose texts match once the furniture is removed, but whose whole texts do not, lost different lines:
the learner took their content for furniture. Verification then judges same-host pairs on the whole
text too (:func:`whole_text_jaccard`), so a wrong learner costs a missed duplicate, never a page.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["NO_LINES", "FurnitureLines", "furniture_lines", "whole_text_jaccard"]

MAX_WORDS = np.iinfo(np.uint16).max
#: Shingles a removed line that only one page has changes besides its own: those that run into it
#: from the line before (the default shingle width, 4, less one). Measured on benchmarks/singlehost.py:
#: without them, release notes at a whole-text Jaccard of 0.80 were estimated above 0.82.
SEAM = 3


class FurnitureLines(NamedTuple):
    """Sorted distinct 32-bit hashes of a page's removed lines, and the words of each."""

    lines: np.ndarray  # uint32
    words: np.ndarray  # uint16, as many as lines


NO_LINES = FurnitureLines(np.empty(0, np.uint32), np.empty(0, np.uint16))


def furniture_lines(hashes: np.ndarray, counts: np.ndarray) -> FurnitureLines:
    """The removed lines of a page from their 64-bit line hashes and word counts (lines without words
    are left out; a line removed twice counts once, as a repeated shingle does)."""
    worded = counts > 0
    if not worded.any():
        return NO_LINES
    low = hashes[worded].astype(np.uint32)
    lines, first = np.unique(low, return_index=True)
    words = np.minimum(counts[worded][first], MAX_WORDS).astype(np.uint16)
    return FurnitureLines(lines, words)


def whole_text_jaccard(a: np.ndarray, a_lines: FurnitureLines, b: np.ndarray, b_lines: FurnitureLines) -> float:
    """Jaccard similarity of two whole texts from what is kept of them: the shingle hashes of what
    remained after furniture removal, and the removed lines, each weighing its words (about the
    shingles it had), a line only one text has its :data:`SEAM` too. Two empty texts give 1.0."""
    shared = len(np.intersect1d(a, b, assume_unique=True))  # only for the rare pair that passed the threshold
    _, in_a, in_b = np.intersect1d(a_lines.lines, b_lines.lines, assume_unique=True, return_indices=True)
    shared_words = int(np.minimum(a_lines.words[in_a], b_lines.words[in_b]).sum(dtype=np.int64))
    own_lines = len(a_lines.lines) + len(b_lines.lines) - 2 * len(in_a)
    union = (len(a) + len(b) - shared + int(a_lines.words.sum(dtype=np.int64))
             + int(b_lines.words.sum(dtype=np.int64)) - shared_words + SEAM * own_lines)
    return (shared + shared_words) / union if union else 1.0
