"""Fingerprinting throughput against the tokenise-only floor and a naive per-bit SimHash, same run;
then the distance a one-word edit causes on corpus paragraphs, against Charikar's expectation.

    python benchmarks/fingerprint.py [--corpus PATH] [--repeat 5] [--naive-every 10] [--edits 1000]
    python benchmarks/fingerprint.py --against OTHER/scrapy_simhash/fingerprint.py [--rounds 40]

Every figure is measured in this run on the same machine, so the printed ratios are what to compare
(absolute MB/s move with the machine's load). MB are megabytes of UTF-8 text (title + body_text).
Short texts (listings, titles) are timed apart: the corpus cut into pieces of about 1 KB and 10 KB
at spaces, each size against the floor on the same pieces, timed alternately in rounds of 128 texts;
at 1 KB also with the verification hashes and with the default layout's sketch, and signed as the
pipeline signs them: the items of one turn of the event loop together (Signer.sign_all), N at a time;
at 4 KB and whole pages, alone, as the signer cuts 16 of them, and 16 in one batch.

``--against`` times this version against another fingerprint.py (a worktree of an earlier commit)
instead, in this process on the same texts: each round times a batch with one and then the other
(which goes first alternates; CPU time of the process), and the median of the rounds' ratios is
printed per text size. Last, what the pipeline computes of a page with the learner on: the
signature of its text without the furniture and how its whole text's hashes differ (whole_text.py;
the other version shingles the whole text again), and the same with this version shingling the
whole text again: the pages in one of benchmarks/multisite.py's templates (brand, navigation,
cookie notice, share bar, newsletter box, footer: the lines the learner removes); and, with the
learner's line hashes, the page tokenised once (``line_shingles``: the stripped text signed from its
kept lines' shingles, the removed lines' shingles for the difference) against the stripped text and
the removed lines tokenised again; and the learner's strip() of those pages (line hashes and shingles,
the furniture's mask, the stripped text and its shingling; the furniture learned from 8 pages a template).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import platform
import math
import random
import re
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from itertools import compress
from typing import Any
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multisite import TEMPLATES, rendered  # noqa: E402 (a sibling script)

from scrapy_simhash.boilerplate import Furniture, PageLines, learn, page_lines  # noqa: E402
from scrapy_simhash.calibration import layout_for  # noqa: E402
from scrapy_simhash.fingerprint import (  # noqa: E402
    FINGERPRINT_VERSION,
    Fingerprinter,
    hamming,
    segment_hashes,
    verification_hashes,
)
from scrapy_simhash.settings import DEFAULTS  # noqa: E402
from scrapy_simhash.signer import Signer  # noqa: E402
from scrapy_simhash.whole_text import whole_text  # noqa: E402

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus-scrapy-docs.jsonl"
WORD = re.compile(r"\w+")
CYRILLIC_LOOK_ALIKES = str.maketrans("aceopxyABCEKMOPTX", "асеорхуАВСЕКМОРТХ")


def tokenise_floor(text: str) -> None:
    """The least any word-shingle fingerprint must do: normalise, lower-case, find the words."""
    WORD.findall(unicodedata.normalize("NFKC", text).lower())


def naive_simhash(text: str, width: int = 4, bits: int = 64) -> int:
    """Textbook SimHash: a Python loop over every bit of every shingle's hash (the baseline)."""
    words = WORD.findall(unicodedata.normalize("NFKC", text).lower())
    grams = [" ".join(words[i : i + width]) for i in range(max(1, len(words) - width + 1))]
    votes = [0] * bits
    for gram, count in Counter(grams).items():
        value = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
        for bit in range(bits):
            votes[bit] += count if value >> bit & 1 else -count
    return sum(1 << bit for bit in range(bits) if votes[bit] > 0)


def throughput(func: Callable[[str], object], texts: list[str], megabytes: float, repeat: int) -> float:
    """Best-of-``repeat`` MB/s of ``func`` over ``texts`` (the best run is the least disturbed one)."""
    return megabytes / min(seconds(func, texts) for _ in range(repeat))


def seconds(func: Callable[[Any], object], texts: list[Any]) -> float:
    start = time.perf_counter()
    for text in texts:
        func(text)
    return time.perf_counter() - start


def cpu_seconds(func: Callable[[Any], object], texts: list[Any]) -> float:
    """The CPU time of this process that ``func`` takes over ``texts``: on a machine whose cores are
    shared, the wall time counts the waits for a core too."""
    start = time.process_time()
    for text in texts:
        func(text)
    return time.process_time() - start


def pieces(texts: list[str], size: int) -> list[str]:
    """``texts`` cut at spaces into consecutive pieces of at most ``size`` characters; a text's last
    piece is kept when it is at least half that long."""
    found = []
    for text in texts:
        start = 0
        while len(text) - start >= size // 2:
            end = text.rfind(" ", start, start + size) if len(text) - start > size else len(text)
            end = end if end > start else start + size
            found.append(text[start:end])
            start = end + 1
    return found


def against_floor(
    label: str, func: Callable[[str], object], texts: list[str], rounds: int, batch: int = 128, together: int = 0
) -> None:
    """MB/s of ``func`` and of the floor on the same ``texts``: in each round both time the same batch
    of texts one after the other, and the medians over the rounds are printed (a round that a burst of
    load hit is an outlier, not the result). With ``together``, ``func`` takes lists of that many texts."""
    floor_rates, rates, ratios, per_text = [], [], [], []
    for start in range(0, rounds * batch, batch):
        chunk = (texts[start % len(texts) :] + texts)[:batch]
        megabytes = sum(len(t.encode()) for t in chunk) / 1e6
        groups = [chunk[i : i + together] for i in range(0, batch, together)] if together else chunk
        floor, ours = seconds(tokenise_floor, chunk), seconds(func, groups)
        floor_rates.append(megabytes / floor)
        rates.append(megabytes / ours)
        ratios.append(floor / ours)
        per_text.append(1e6 * ours / len(chunk))
    size = sum(len(t.encode()) for t in texts) / len(texts)
    ratio_range = f"{np.percentile(ratios, 25):.2f}-{np.percentile(ratios, 75):.2f}"
    print(
        f"  {label:<34} {len(texts):>5} texts of {size:>6,.0f} B: floor {np.median(floor_rates):5.1f} MB/s, "
        f"ours {np.median(rates):5.1f} MB/s ({np.median(per_text):6.1f} us/text): "
        f"{np.median(ratios):.2f}x the floor (quartiles {ratio_range})"
    )


def load_other(path: Path) -> Any:
    """The fingerprint module at ``path``, imported beside this one (its data files are this package's)."""
    spec = importlib.util.spec_from_file_location("scrapy_simhash._fingerprint_other", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def against_other(label: str, ours: Callable[[Any], object], theirs: Callable[[Any], object], texts: list[Any],
                  rounds: int, batch: int = 128, together: int = 0) -> None:
    """Throughput of ``ours`` over that of ``theirs`` on the same batches: the median of the rounds'
    ratios (each round times both, in alternating order)."""
    ratios = []
    for number, start in enumerate(range(0, rounds * batch, batch)):
        chunk = (texts[start % len(texts) :] + texts)[:batch]
        groups = [chunk[i : i + together] for i in range(0, batch, together)] if together else chunk
        if number % 2:
            mine, other = cpu_seconds(ours, groups), cpu_seconds(theirs, groups)
        else:
            other, mine = cpu_seconds(theirs, groups), cpu_seconds(ours, groups)
        ratios.append(other / mine)
    size = sum(len((t if isinstance(t, str) else t[0]).encode()) for t in texts) / len(texts)
    print(f"  {label:<42} {len(texts):>5} texts of {size:>6,.0f} B: {np.median(ratios):.3f}x "
          f"(quartiles {np.percentile(ratios, 25):.3f}-{np.percentile(ratios, 75):.3f})")


def compare_versions(other_path: Path, texts: list[str], rounds: int, count: int) -> None:
    """This version's throughput over the other's, by text size and way of signing."""
    other = load_other(other_path)
    print(f"this version ({FINGERPRINT_VERSION}) against {other_path} ({other.FINGERPRINT_VERSION}): throughput "
          f"ratio, median of {rounds} rounds (> 1: this one is faster)")
    rng = random.Random(2)
    ours, theirs = Fingerprinter(), other.Fingerprinter()
    short = rng.sample(pieces(texts, 1_000), count)
    medium = rng.sample(pieces(texts, 4_000), count)
    pages = rng.sample(texts, len(texts))
    # The corpus is rst, hard-wrapped: a line every 11 words. As html-text gives a page, a paragraph is a line.
    web = ["\n\n".join(filter(None, map(rendered, re.split(r"\n\s*\n", text)))) for text in pages]
    web_short = rng.sample(pieces(web, 1_000), count)
    words = [" ".join(text.split()[:5]) for text in short]  # a title, a listing's one line
    for label, sample in (("5 words", words), ("~1,000 characters", short), ("~4,000 characters", medium),
                          ("whole pages", pages),
                          ("~1,000 characters, a line a paragraph", web_short),
                          ("whole pages, a line a paragraph", web)):
        against_other(f"{label}, signature()", ours.signature, theirs.signature, sample, rounds)
    against_other("~1,000 characters, one non-ASCII, signature()", ours.signature, theirs.signature,
                  ["\u2019" + t for t in short], rounds)
    for together in (16, 64):
        against_other(f"~1,000 characters, {together} in one batch", ours.signatures, theirs.signatures, short,
                      rounds, together=together)
    against_other("whole pages, 16 in one batch", ours.signatures, theirs.signatures, pages, rounds, together=16)
    against_other("~1,000 characters, a line a paragraph, 16 in one batch", ours.signatures, theirs.signatures,
                  web_short, rounds, together=16)
    against_other("whole pages, one non-ASCII, 16 in one batch", ours.signatures, theirs.signatures,
                  ["\u2019" + t for t in pages], rounds, together=16)
    furnished = [with_furniture(text, TEMPLATES[at % len(TEMPLATES)]) for at, text in enumerate(web)]

    def stripped_and_whole(shingle_whole: bool) -> Callable[[tuple[str, str]], object]:
        def sign(page: tuple[str, str]) -> object:
            whole, stripped = page
            hashes = ours.signature(stripped).hashes
            if shingle_whole:
                return whole_text_again(verification_hashes(ours.shingle_hashes(whole)), hashes)
            return whole_text(ours, whole, stripped, hashes)
        return sign

    def stripped_and_whole_other(page: tuple[str, str]) -> object:
        whole, stripped = page
        hashes = theirs.signature(stripped).hashes
        return whole_text_again(other.verification_hashes(theirs.shingle_hashes(whole)), hashes)

    against_other("pages with furniture, stripped signature + whole text", stripped_and_whole(False),
                  stripped_and_whole_other, furnished, rounds)
    against_other("  the same, against this version shingling it whole", stripped_and_whole(False),
                  stripped_and_whole(True), furnished, rounds)

    def tokenised_once(page: tuple[str, str]) -> object:
        whole, stripped = page
        shingling, removed = ours.line_shingles(whole).kept(furniture_mask(whole, stripped))
        return whole_text(ours, whole, stripped, ours.signature(shingling).hashes, removed)

    def tokenised_again(page: tuple[str, str]) -> object:
        whole, stripped = page
        segment_hashes(whole)
        removed = "\n".join(compress(whole.split("\n"), ~furniture_mask(whole, stripped)))
        return whole_text(ours, whole, stripped, ours.signature(stripped).hashes, ours.shingle_hashes(removed))

    against_other("  with line hashes, tokenised once vs again", tokenised_once, tokenised_again, furnished, rounds)

    # The learner's strip() of a page of a known host (its furniture learned from the template's first
    # pages): line hashes and shingles, the furniture's mask, the stripped text and its shingling.
    learned = {at: learn([page_lines(whole) for whole, _ in furnished[at :: len(TEMPLATES)][:8]])
               for at in range(len(TEMPLATES))}
    hosts = [(whole, learned[at % len(TEMPLATES)]) for at, (whole, _) in enumerate(furnished)]

    def stripped_by(line_shingles: Callable[[str], Any], by_line: Callable[[Any, str], bool]) -> Callable[..., object]:
        def strip(page: tuple[str, Furniture]) -> object:
            whole, furniture = page
            lines = line_shingles(whole)
            keep = furniture.kept(PageLines(whole.split("\n"), lines.hashes, lines.counts))
            text = "\n".join(compress(whole.split("\n"), keep))
            return text, lines.kept(np.array(keep)) if by_line(lines, whole) else None
        return strip

    against_other("pages with furniture, the learner's strip",
                  stripped_by(ours.line_shingles, lambda lines, _: lines.by_line),
                  stripped_by(theirs.line_shingles, lambda _, whole: other.shingled_by_line(whole)), hosts, rounds)


def with_furniture(text: str, template: Any) -> tuple[str, str]:
    """A page's whole text in ``template``'s furniture, one block a line, and the text without it."""
    head = [template.brand, *template.nav, template.cookie]
    tail = [template.share, template.newsletter, *template.footer]
    return "\n".join([*head, text, *tail]), text


def furniture_mask(whole: str, stripped: str) -> np.ndarray:
    """Which lines of ``whole`` (:func:`with_furniture`'s) are ``stripped``'s: one run of lines."""
    keep = np.zeros(whole.count("\n") + 1, dtype=bool)
    first = whole[: whole.index(stripped)].count("\n")
    keep[first : first + stripped.count("\n") + 1] = True
    return keep


def whole_text_again(whole: np.ndarray, stripped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The whole-text difference from the whole text's verification hashes, shingled again."""
    return np.setdiff1d(whole, stripped, assume_unique=True), np.setdiff1d(stripped, whole, assume_unique=True)


def digest(fingerprint: Callable[[str], int], texts: list[str]) -> str:
    return hashlib.sha256(b"".join(fingerprint(text).to_bytes(8, "little") for text in texts)).hexdigest()[:16]


def disguise(text: str) -> str:
    """``text`` with a soft hyphen inside every word of 4+ letters and look-alike Cyrillic letters in
    every other word: changes that fingerprint version 2 removes."""
    hyphenated = re.sub(r"\b(\w\w)(\w\w+)", "\\1\u00ad\\2", text).split(" ")
    return " ".join(word.translate(CYRILLIC_LOOK_ALIKES) if i % 2 else word for i, word in enumerate(hyphenated))


def edit_distances(texts: set[str], count: int) -> tuple[np.ndarray, np.ndarray]:
    """Observed distance and expected distance (64 * angle / pi between the weighted shingle vectors)
    when one word of each of ``count`` texts is replaced by a new word."""
    rng = random.Random(1)
    fingerprinter = Fingerprinter()
    observed, expected = [], []
    for text in rng.sample(sorted(texts), min(count, len(texts))):
        words = text.split(" ")
        words[rng.randrange(len(words))] = f"qzx{rng.randrange(10**6)}"
        edited = " ".join(words)
        (a, ca), (b, cb) = (np.unique(fingerprinter.shingle_hashes(t), return_counts=True) for t in (text, edited))
        _, ia, ib = np.intersect1d(a, b, assume_unique=True, return_indices=True)
        cosine = float(ca[ia] @ cb[ib]) / math.sqrt(float(ca @ ca) * float(cb @ cb))
        expected.append(64 * math.acos(min(1.0, cosine)) / math.pi)
        observed.append(hamming(fingerprinter.fingerprint(text), fingerprinter.fingerprint(edited)))
    return np.array(observed), np.array(expected)


def print_edit_distances(label: str, texts: set[str], count: int) -> None:
    observed, expected = edit_distances(texts, count)
    percentiles = (10, 25, 50, 75, 90)
    print(f"one-word edit, {len(observed)} distinct {label}; distance percentiles {percentiles}:")
    print(f"  observed:             {np.percentile(observed, percentiles).round(1).tolist()}")
    print(f"  expected 64*angle/pi: {np.percentile(expected, percentiles).round(1).tolist()}")
    residual = observed - expected
    p = expected / 64
    standardised = residual[p > 0] / np.sqrt(64 * p[p > 0] * (1 - p[p > 0]))  # Binomial(64, p) spread
    print(f"  observed - expected: median {np.median(residual):+.2f}, mean {np.mean(residual):+.2f}")
    print(f"  standardised residual: mean {standardised.mean():+.2f}, std {standardised.std():.2f} (binomial: 0, 1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=5, help="best of N timed passes (default 5)")
    parser.add_argument("--pieces", type=int, default=3000, help="pieces of each short size timed (default 3000)")
    parser.add_argument("--naive-every", type=int, default=10, help="naive baseline on every Nth text (default 10)")
    parser.add_argument("--edits", type=int, default=1000, help="paragraphs for the one-word-edit figures")
    parser.add_argument("--against", type=Path, help="another fingerprint.py to time this version against")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of --against (default 40)")
    args = parser.parse_args()

    with args.corpus.open(encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    texts = [f"{doc['title']}\n{doc['body_text']}" for doc in docs]
    if args.against:
        compare_versions(args.against, texts, args.rounds, args.pieces)
        return
    naive_sample = texts[:: args.naive_every]
    size = sum(len(t.encode()) for t in texts) / 1e6
    sample_size = sum(len(t.encode()) for t in naive_sample) / 1e6
    fingerprint = Fingerprinter().fingerprint

    floor = throughput(tokenise_floor, texts, size, args.repeat)
    ours = throughput(fingerprint, texts, size, args.repeat)
    naive = throughput(naive_simhash, naive_sample, sample_size, 1)
    ours_on_sample = throughput(fingerprint, naive_sample, sample_size, args.repeat)

    print(f"corpus: {len(texts)} texts, {size:.1f} MB; naive on {len(naive_sample)} texts, {sample_size:.1f} MB")
    print(f"tokenise-only floor (NFKC + lower + re.findall): {floor:7.1f} MB/s")
    print(f"Fingerprinter.fingerprint:                       {ours:7.1f} MB/s")
    print(f"naive per-bit Python SimHash:                    {naive:7.1f} MB/s")
    print(f"ours / floor: {ours / floor:.2f}x (target >= 0.5x)")
    print(f"ours / naive: {ours_on_sample / naive:.1f}x on the same texts (target >= 10x)")
    plain = digest(fingerprint, texts)
    print(f"fingerprint version {FINGERPRINT_VERSION}: digest of all {len(texts)} fingerprints: {plain}")
    disguised = digest(fingerprint, [disguise(text) for text in texts])
    same = "equal: no page changed" if disguised == plain else "different"
    print(f"  the pages with soft hyphens and Cyrillic look-alikes: {disguised} ({same})")
    print(f"  Python {platform.python_version()}, numpy {np.__version__}, Unicode {unicodedata.unidata_version}")

    rounds = 8 * args.repeat
    print(f"by text size, against the floor on the same texts, median of {rounds} rounds (Fingerprinter.fingerprint):")
    rng = random.Random(2)
    for size in (1_000, 10_000):
        cut = pieces(texts, size)
        sample = rng.sample(cut, min(args.pieces, len(cut)))
        against_floor(f"pieces of ~{size:,} characters", fingerprint, sample, rounds)
    against_floor("whole pages", fingerprint, rng.sample(texts, len(texts)), rounds)
    short = rng.sample(pieces(texts, 1_000), args.pieces)
    # A curly quote in front takes every piece off the ASCII-only path (most corpus pages are ASCII).
    against_floor("~1,000 characters, one non-ASCII", fingerprint, ["\u2019" + t for t in short], rounds)
    against_floor("~1,000 characters, signature()", Fingerprinter().signature, short, rounds)
    layout = layout_for(DEFAULTS["SIMHASH_JACCARD_THRESHOLD"], DEFAULTS["SIMHASH_TARGET_RECALL"])
    signature = Fingerprinter().signature

    def signature_and_sketch(text: str) -> None:
        """What the pipeline computes of an item's text: its signature and the default layout's sketch."""
        layout.sketch(signature(text).hashes)

    against_floor("~1,000 characters, and the sketch", signature_and_sketch, short, rounds)
    signer = Signer(Fingerprinter(), layout)
    for together in (1, 4, 16, 64):
        label = f"~1,000 characters, {together} signed together"
        against_floor(label, signer.sign_all, short, rounds, together=together)
    fingerprinter = Fingerprinter()

    def one_batch(batch: list[str]) -> None:
        """Signature and sketch of ``batch`` in one batch, the signer's cuts aside."""
        layout.sketches([one.hashes for _, one in fingerprinter.signatures(batch)])

    medium = rng.sample(pieces(texts, 4_000), args.pieces)
    against_floor("~4,000 characters, and the sketch", signature_and_sketch, medium, rounds)
    against_floor("~4,000 characters, 16 signed together", signer.sign_all, medium, rounds, together=16)
    pages = rng.sample(texts, len(texts))
    against_floor("whole pages, signature and sketch", signature_and_sketch, pages, rounds)
    against_floor("whole pages, 16 signed together", signer.sign_all, pages, rounds, together=16)
    against_floor("whole pages, 16 in one batch", one_batch, pages, rounds, together=16)
    # A curly quote, a dash or a no-break space puts most web pages off the ASCII path.
    against_floor("whole pages, one non-ASCII, 16 together", signer.sign_all, ["\u2019" + t for t in pages], rounds,
                  together=16)

    bodies = {doc["body_text"] for doc in docs}
    paragraphs = {p for body in bodies for p in re.split(r"\n\s*\n", body) if 40 <= len(p.split()) <= 400}
    print_edit_distances("paragraphs of 40-400 words", paragraphs, args.edits)
    print_edit_distances("whole pages (body_text)", bodies, args.edits)


if __name__ == "__main__":
    main()
