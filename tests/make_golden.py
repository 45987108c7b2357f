"""Write tests/golden_fingerprints.json: fingerprints of a few fixed texts, pinned once.

    python tests/make_golden.py

Run it only when the fingerprint algorithm changes ON PURPOSE (every stored fingerprint in every
deployed index changes with it), after bumping FINGERPRINT_VERSION (it refuses otherwise);
tests/test_fingerprint_golden.py fails on any accidental change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from scrapy_simhash.fingerprint import FINGERPRINT_VERSION, Fingerprinter, simhash

GOLDEN = Path(__file__).with_name("golden_fingerprints.json")

# Parameter sets: each text is fingerprinted with each of them.
VARIANTS: dict[str, dict[str, object]] = {
    "default": {},
    "presence": {"weighting": "presence"},
    "width=1": {"width": 1},
    "bits=16": {"bits": 16},
}

ENGLISH = (
    "Scrapy is a fast high-level web crawling and web scraping framework, used to crawl websites "
    "and extract structured data from their pages. It can be used for a wide range of purposes, "
    "from data mining to monitoring and automated testing. Scrapy is a fast crawler, really fast."
)
# Zero width space, non-joiner, joiner, word joiner, byte order mark, in turn.
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
CYRILLIC_LOOK_ALIKES = str.maketrans("aceopxySTM", "\u0430\u0441\u0435\u043e\u0440\u0445\u0443\u0405\u0422\u041c")


def disguised(text: str, insert: str) -> str:
    """``text`` with the characters of ``insert`` in turn after the second letter of each longer word."""
    count = iter(range(len(text)))
    return re.sub(r"\b(\w\w)(\w\w+)", lambda m: m[1] + insert[next(count) % len(insert)] + m[2], text)


TEXTS: dict[str, str] = {
    "english": ENGLISH,
    # Each disguise below is removed or folded by normalisation: the fingerprints equal "english".
    "english, soft hyphens": disguised(ENGLISH, "\u00ad"),
    "english, zero-width characters": disguised(ENGLISH, ZERO_WIDTH),
    "english, Cyrillic look-alikes": ENGLISH.translate(CYRILLIC_LOOK_ALIKES),
    "russian": "Сегодня в Москве тёплая погода. Жители гуляют в парках и кормят уток у прудов.",
    "greek": "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μία από τις αρχαιότερες πόλεις.",
    "chinese": "今天北京的天气很好，我们一起去公园散步吧。公园里有很多人在跑步，也有人在湖边钓鱼。",
    "japanese": "Scrapyはウェブサイトをクロールして構造化データを抽出するための高速なフレームワークです。",
    "thai": "ภาษาไทยเขียนติดกันโดยไม่เว้นวรรคระหว่างคำ กินข้าวแล้วหรือยัง",
    "korean": "한국어는 단어 사이를 띄어 씁니다. 스크래피는 빠른 크롤러입니다.",
    "arabic (RTL)": "مرحبا بالعالم. هذا نص قصير باللغة العربية لاختبار البصمة الرقمية للنصوص.",
    "hebrew (RTL)": "שלום עולם. זהו טקסט קצר בעברית כדי לבדוק את טביעת האצבע.",
    "normalisation": "Ｆｕｌｌｗｉｄｔｈ ﬁle CAFÉ cafe\u0301 Straße ½ x² naïve",
    "emoji and symbols": "Release 2.13 🎉 — fixes #1234; see https://example.org/a_b?c=d&e=f ✓",
    "short": "Hi there",
    "one token": "scrapy",
    "punctuation only": "... !!! --- ???",
    "empty": "",
}


def golden_entry(text: str) -> dict[str, object]:
    """The pinned values for one text: fingerprints per variant and its shingle hashes, as hex."""
    return {
        "text": text,
        "fingerprints": {name: f"{simhash(text, **params):#018x}" for name, params in VARIANTS.items()},
        "shingle_hashes": [f"{int(h):#018x}" for h in Fingerprinter().shingle_hashes(text)[:6]],
    }


def main() -> None:
    texts = {name: golden_entry(text) for name, text in TEXTS.items()}
    if GOLDEN.exists():
        pinned = json.loads(GOLDEN.read_text(encoding="utf-8"))
        changed = [name for name, entry in pinned["texts"].items() if golden_entry(entry["text"]) != entry]
        if changed and pinned.get("fingerprint_version", 1) == FINGERPRINT_VERSION:
            raise SystemExit(f"fingerprints of {changed} changed: bump FINGERPRINT_VERSION first")
    golden = {
        "generated_by": "tests/make_golden.py",
        "fingerprint_version": FINGERPRINT_VERSION,
        "variants": VARIANTS,
        "texts": texts,
    }
    GOLDEN.write_text(json.dumps(golden, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(TEXTS)} texts x {len(VARIANTS)} variants to {GOLDEN}")


if __name__ == "__main__":
    main()
