"""Stability of every output of fingerprint version 3 on texts cut into many segments: all shingle hashes
in order, verification hashes, fingerprints and sketches, one text at a time, in batches and through the
signer. A speed change must leave each digest as it is; only a FINGERPRINT_VERSION bump may change them."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
from texts import CHINESE_PARK, article

from scrapy_simhash.fingerprint import Fingerprinter
from scrapy_simhash.minhash import Layout
from scrapy_simhash.signer import Signer


def _listing(seed: int) -> str:
    """Words in sentences and lines of every length, ends of every kind, glued ends ("3.5", "a.b")."""
    rng = random.Random(seed)
    words = article(seed, words=300).split()
    ends = [". ", "! ", "? ", ".\n", "\n", "\r\n", "\n\n", "... ", ".", " 3.5 ", " e.g. ", "?q=", " ", " ", " "]
    parts, at = [], 0
    while at < len(words):
        length = rng.choice((1, 2, 3, 4, 5, 9, 20))
        parts.append(" ".join(words[at : at + length]) + rng.choice(ends))
        at += length
    return "".join(parts)


TEXTS = [
    *(_listing(seed) for seed in range(6)),
    ".\nLeading ends. Then words\n",
    "Hi.\nOk!\nA b c d e.\nOne two three four five six\nx",
    "Ünïcödé line. Straße ½ x²\u2029next\u2028line\u3002end",
    "\u00a0".join(_listing(7).split(" ")),  # off the ASCII path
    CHINESE_PARK,
    "ภาษาไทย เขียนติดกัน. กินข้าวแล้วหรือยัง\nSecond line 3.5 here.",
    "Sc\u00adrapy is fa\u200bst. Very\u200d fast.\nReally.",
    "one segment without any end at all and more than four words",
    "two words",
    "Pets welcome. Viewings on weekday evenings only.\n" * 5 + "Lift, parking space. Bright flat near the park.",
    "",
    "... !!! ???\n\n",
]

# sha256 digests (16 hex digits) of fingerprint version 3's outputs on TEXTS, pinned once.
PINNED = {
    "batched signatures, frequency": "799414eba15f115e",
    "batched signatures, presence": "0df919e01393b0fc",
    "shingle hashes, width 1": "61c109b4c3513602",
    "shingle hashes, width 2": "31858cdd66bef4b1",
    "shingle hashes, width 4": "261e4dba7ddc8021",
    "shingle hashes, width 5": "9c7e75aea82b262a",
    "sign_all": "9cebf4928c0239ff",
    "signatures, frequency": "799414eba15f115e",
    "signatures, presence": "0df919e01393b0fc",
}


def _digest(values: list) -> str:
    digest = hashlib.sha256()
    for value in values:
        digest.update(np.asarray(value, dtype=np.uint64).tobytes() + b"|")
    return digest.hexdigest()[:16]


def _signature_values(signed: list) -> list:
    return [[words, signature.fingerprint, *signature.hashes.tolist()] for words, signature in signed]


def _outputs(name: str) -> str:
    if name.startswith("shingle hashes"):
        fingerprinter = Fingerprinter(width=int(name.rsplit(" ", 1)[1]))
        return _digest([fingerprinter.shingle_hashes(text) for text in TEXTS])
    if name == "sign_all":
        signer = Signer(Fingerprinter(), Layout(bands=16, rows=6, min_estimate=0.72))
        signed = signer.sign_all(TEXTS)
        return _digest([[*values, *one.sketch] for values, one in zip(
            _signature_values([(one.words, one.signature) for one in signed]), signed, strict=True)])
    fingerprinter = Fingerprinter(weighting=name.rsplit(" ", 1)[1])
    if name.startswith("batched"):
        return _digest(_signature_values(fingerprinter.signatures(TEXTS)))
    return _digest(_signature_values([(fingerprinter.shingling(text).words, fingerprinter.signature(text))
                                      for text in TEXTS]))


@pytest.mark.parametrize("name", sorted(PINNED))
def test_outputs_match_their_pinned_digests(name: str) -> None:
    """A failure means fingerprint version 3's output changed: stored fingerprints and hashes would
    stop matching."""
    assert _outputs(name) == PINNED[name]
