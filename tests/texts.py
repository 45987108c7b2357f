"""Deterministic texts for tests that need no corpus: articles of random words and their edits."""

from __future__ import annotations

import random
import re

_WORDS = [
    f"{consonant}{vowel}{end}"
    for consonant in "bcdfghjklmnprstvwz"
    for vowel in ("a", "e", "i", "o", "u", "ai", "ou")
    for end in ("", "n", "r", "s", "t", "l")
]


def article(seed: int, words: int = 400, paragraph: int = 60) -> str:
    """``words`` random words in paragraphs of ``paragraph`` words, one per line."""
    rng = random.Random(seed)
    tokens = [rng.choice(_WORDS) for _ in range(words)]
    return "\n".join(" ".join(tokens[i : i + paragraph]) for i in range(0, words, paragraph))


def edited(text: str, edits: int = 1, seed: int = 0) -> str:
    """``text`` with ``edits`` words replaced by a word no article uses."""
    rng = random.Random(seed)
    words = text.split(" ")
    for _ in range(edits):
        words[rng.randrange(len(words))] = f"typofix{rng.randrange(1000)}"
    return " ".join(words)


# Two short Chinese passages on unrelated subjects (a park walk; a cooking recipe).
CHINESE_PARK = (
    "今天北京的天气很好，阳光明媚，微风不燥。我们一起去公园散步，看见很多老人在湖边下棋，"
    "孩子们在草地上放风筝，年轻人沿着小路跑步。公园东边的花园里开满了桃花和杏花，游客们纷纷拍照留念。"
    "中午我们在长椅上吃了自己带的三明治，下午又去博物馆参观了一个关于古代书法的展览。"
)
CHINESE_RECIPE = (
    "做红烧肉要先把五花肉切成方块，冷水下锅焯水，撇去浮沫后捞出沥干。锅中放少许油，加入冰糖小火炒出糖色，"
    "再把肉块倒进去翻炒上色。然后加入生抽、老抽、料酒、葱段、姜片和八角，倒入开水没过肉块，"
    "大火烧开后转小火慢炖一个小时，最后大火收汁即可出锅装盘。"
)


def passages(corpus: list[dict], min_words: int, max_words: int) -> list[tuple[str, str]]:
    """Distinct paragraphs of the corpus with a word count in range, as (page, paragraph)."""
    seen: set[str] = set()
    found = []
    for doc in corpus:
        for paragraph in re.split(r"\n\s*\n", doc["body_text"]):
            if min_words <= len(paragraph.split()) <= max_words and paragraph not in seen:
                seen.add(paragraph)
                found.append((doc["page"], paragraph))
    return found
