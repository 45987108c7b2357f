"""Write scrapy_simhash/confusable_fold.json: the look-alike letters fingerprinting folds together.

    pip download --no-deps confusable_homoglyphs==3.3.1 && unzip confusable_homoglyphs-3.3.1-*.whl
    python tools/make_confusable_fold.py confusable_homoglyphs/

Its input is Unicode data as the confusable_homoglyphs package ships it: confusables.json is
confusables.txt of UTS #39 (each character with its prototype, each prototype with its characters),
categories.json is Scripts.txt. Fingerprints compare texts after NFKC and lower-casing, so the table
works on that form: two lower-case letters of different scripts are folded together when they, or
their capitals, are listed as confusable (Cyrillic "а" with "a"; "в" with "b", because "В" looks like
"B"). Only letters are folded, only left-to-right ones (a right-to-left letter inside a left-to-right
word reorders it on screen, so it disguises nothing), and only those of scripts written with spaces:
Japanese mixes kana and kanji that look alike ("ロ" and "口", "カ" and "力"). A class never holds two
letters of one script, so no alphabet loses a distinction ("I" looks like "l", but "i" and "l" stay
apart). Pairs with an ASCII letter are joined first; each class folds to its ASCII letter, else its
smallest code point. Rerun it only on purpose: the table is part of the fingerprint
(FINGERPRINT_VERSION).
"""

from __future__ import annotations

import bisect
import json
import sys
import unicodedata
from pathlib import Path

from scrapy_simhash.fingerprint import UNSEGMENTED_RANGES

OUTPUT = Path(__file__).resolve().parents[1] / "scrapy_simhash" / "confusable_fold.json"
SOURCE = (
    "confusables.txt of Unicode Technical Standard #39 and Scripts.txt of the Unicode Character Database "
    "(https://www.unicode.org/Public/), as shipped in confusables.json and categories.json by the PyPI "
    "package confusable_homoglyphs 3.3.1"
)
BIDI_MARKS = str.maketrans("", "", "\u200e\u200f")  # around right-to-left characters in the file's comments

UNICODE_LICENSE = """\
UNICODE LICENSE V3

COPYRIGHT AND PERMISSION NOTICE

Copyright (c) 1991-2024 Unicode, Inc.

NOTICE TO USER: Carefully read the following legal agreement. BY DOWNLOADING, INSTALLING, COPYING OR
OTHERWISE USING DATA FILES, AND/OR SOFTWARE, YOU UNEQUIVOCALLY ACCEPT, AND AGREE TO BE BOUND BY, ALL OF
THE TERMS AND CONDITIONS OF THIS AGREEMENT. IF YOU DO NOT AGREE, DO NOT DOWNLOAD, INSTALL, COPY,
DISTRIBUTE OR USE THE DATA FILES OR SOFTWARE.

Permission is hereby granted, free of charge, to any person obtaining a copy of data files and any
associated documentation (the "Data Files") or software and any associated documentation (the
"Software") to deal in the Data Files or Software without restriction, including without limitation the
rights to use, copy, modify, merge, publish, distribute, and/or sell copies of the Data Files or
Software, and to permit persons to whom the Data Files or Software are furnished to do so, provided that
either (a) this copyright and permission notice appear with all copies of the Data Files or Software,
or (b) this copyright and permission notice appear in associated Documentation.

THE DATA FILES AND SOFTWARE ARE PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT OF THIRD PARTY RIGHTS.

IN NO EVENT SHALL THE COPYRIGHT HOLDER OR HOLDERS INCLUDED IN THIS NOTICE BE LIABLE FOR ANY CLAIM, OR
ANY SPECIAL INDIRECT OR CONSEQUENTIAL DAMAGES, OR ANY DAMAGES WHATSOEVER RESULTING FROM LOSS OF USE, DATA
OR PROFITS, WHETHER IN AN ACTION OF CONTRACT, NEGLIGENCE OR OTHER TORTIOUS ACTION, ARISING OUT OF OR IN
CONNECTION WITH THE USE OR PERFORMANCE OF THE DATA FILES OR SOFTWARE.

Except as contained in this notice, the name of a copyright holder shall not be used in advertising or
otherwise to promote the sale, use or other dealings in these Data Files or Software without prior
written authorization of the copyright holder.
"""


def normalised(char: str) -> str:
    return unicodedata.normalize("NFKC", char).lower()


def token_class(char: str) -> int:
    """0 non-word, 1 word character, 2 word character of an unsegmented script (each a token)."""
    if not (char.isalnum() or char == "_"):
        return 0
    return 2 if any(first <= ord(char) <= last for _, first, last in UNSEGMENTED_RANGES) else 1


def foldable(char: str) -> bool:
    """A left-to-right letter of a script written with spaces that normalisation leaves as it is (so
    it can occur in normalised text)."""
    return (
        len(char) == 1
        and unicodedata.category(char).startswith("L")
        and unicodedata.bidirectional(char) == "L"
        and token_class(char) == 1
        and normalised(char) == char
    )


def pairs(confusables: dict[str, list[dict[str, str]]]) -> list[tuple[bool, int, str, str]]:
    """Confusable letters in normalised form, in the order they are joined: pairs with an ASCII letter
    first, then those that were lower-case already, then those found through their capitals."""
    found = set()
    for key, entries in confusables.items():
        key = key.translate(BIDI_MARKS)
        for entry in entries:
            other = entry["c"].translate(BIDI_MARKS)
            if len(key) != 1 or len(other) != 1:
                continue
            a, b = normalised(key), normalised(other)
            if a == b or not (foldable(a) and foldable(b)):
                continue
            a, b = sorted((a, b))
            found.add((not a.isascii(), (a, b) != tuple(sorted((key, other))), a, b))
    return sorted(found)


def script_of(categories: dict) -> callable:
    """The Scripts.txt script of a character, from the package's categories.json."""
    ranges = categories["code_points_ranges"]
    starts = [first for first, _, _, _ in ranges]
    names = categories["iso_15924_aliases"]

    def script(char: str) -> str:
        i = bisect.bisect_right(starts, ord(char)) - 1
        first, last, alias, _ = ranges[i]
        return names[alias] if first <= ord(char) <= last else "UNKNOWN"

    return script


def fold_classes(edges, script) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Join the pairs in order, refusing any that would put two letters of one script in a class;
    return each folded letter's representative and the refused pairs."""
    parent: dict[str, str] = {}
    members: dict[str, set[str]] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    refused = []
    for *_, a, b in edges:
        ra, rb = root(a), root(b)
        if ra == rb:
            continue
        union = members.get(ra, {ra}) | members.get(rb, {rb})
        if len({script(c) for c in union}) < len(union):
            refused.append((a, b))
            continue
        parent[rb] = ra
        members[ra] = union
        members.pop(rb, None)
    fold = {}
    for group in members.values():
        ascii_letters = [c for c in group if c.isascii()]
        target = ascii_letters[0] if ascii_letters else min(group)
        fold.update((c, target) for c in group if c != target)
    return fold, refused


def main() -> None:
    package = Path(sys.argv[1])
    confusables = json.loads((package / "confusables.json").read_text(encoding="utf-8"))
    categories = json.loads((package / "categories.json").read_text(encoding="utf-8"))
    fold, refused = fold_classes(pairs(confusables), script_of(categories))
    table = {
        "about": "Look-alike letters that scrapy_simhash folds together after NFKC and lower-casing "
        "(code point -> code point, hexadecimal). Derived from Unicode data: see source and license.",
        "source": SOURCE,
        "modified": "Restricted to single left-to-right letters in normalised form of scripts written with "
        "spaces, case variants joined, grouped into classes of at most one letter per script; "
        "tools/make_confusable_fold.py generated this file.",
        "unicode_version_of_generator": unicodedata.unidata_version,
        "license": UNICODE_LICENSE,
        "fold": {f"{ord(a):04X}": f"{ord(b):04X}" for a, b in sorted(fold.items())},
    }
    OUTPUT.write_text(json.dumps(table, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    print(f"wrote {len(fold)} folds to {OUTPUT}")
    print(f"refused {len(refused)} pairs that would join two letters of one script:")
    for a, b in refused:
        print(f"  U+{ord(a):04X} {unicodedata.name(a, '?')} / U+{ord(b):04X} {unicodedata.name(b, '?')}")


if __name__ == "__main__":
    main()
