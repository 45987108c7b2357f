"""The review page's parts (texts found, word diff, histogram, escaping) and ``simhash-review`` end to end.

In a real browser: tests/test_review_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from scrapy.settings import Settings

from review_fixtures import (
    A,
    B,
    C,
    HOSTILE_TEXT,
    HOSTILE_URLS,
    LONG,
    THRESHOLD,
    corpus_review,
    hostile_page,
    review_record,
    write_jsonl,
)
from scrapy_simhash.boilerplate import learn, page_lines
from scrapy_simhash.mergelog import furniture_runs, raw_text
from scrapy_simhash.mergelog import review_record as log_review_record
from scrapy_simhash.mergelog.record import redact
from scrapy_simhash.offline.review_page import MAX_DIFF_WORDS, histogram_svg, render, safe_link, text_html, word_diff
from scrapy_simhash.offline.review_pairs import (
    Found,
    TextFinder,
    feed_pages,
    item_texts,
    pairs_of,
    read_feed,
    review_records,
    review_texts,
)
from scrapy_simhash.settings import read


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of each script element."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def parse(html: str) -> Elements:
    elements = Elements()
    elements.feed(html)
    return elements


class Sides(HTMLParser):
    """The two texts a browser's script reads out of a pair's HTML: all but ``<ins>``, all but ``<del>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.a = self.b = ""
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)

    def handle_endtag(self, tag):
        self.open.pop()

    def handle_data(self, data):
        if "ins" not in self.open:
            self.a += data
        if "del" not in self.open:
            self.b += data


def sides(html: str) -> tuple[str, str]:
    parser = Sides()
    parser.feed(html.replace("&#13;", "\r"))  # Python's parser makes a CR reference LF; a browser's keeps CR
    return parser.a, parser.b


def test_word_diff_holds_both_texts_once_marking_the_words_each_side_alone_has() -> None:
    diff = word_diff("the quick brown fox\nsat", "the quick red fox\nsat down")
    assert diff.html == "the quick <del>brown</del><ins>red</ins> fox\nsat<ins class=\"ws\"> </ins><ins>down</ins>"
    assert sides(diff.html) == ("the quick brown fox\nsat", "the quick red fox\nsat down")
    assert (diff.removed, diff.added) == (1, 2)


def test_word_diff_escapes_and_marks_long_texts_only_so_far_keeping_them_whole() -> None:
    diff = word_diff("a <b> & c x\n", "a <i> & c y", max_words=3)
    assert diff.html == (
        'a <del>&lt;b&gt;</del><ins>&lt;i&gt;</ins> &amp;<del class="rest"> c x\n</del><ins class="rest"> c y</ins>'
    )
    assert sides(diff.html) == ("a <b> & c x\n", "a <i> & c y")
    assert diff.cut and not word_diff("a b", "a c", max_words=2).cut


def test_the_page_holds_each_text_whole_so_the_labels_read_it_there() -> None:
    a = "  Title\r\n\n\n\n\nfirst <p> & 'q' line\n\n\u2028 end \n"
    b = a.replace("first", "second").replace("line\n\n", "line ") + "more"
    diff = word_diff(a, b)
    assert sides(diff.html) == (a, b)
    assert '\n\n<span class="gap">\n\n\n</span>' in diff.html  # blank lines past the first hidden, not dropped
    assert '<del class="ws">\n\n' in diff.html  # a break only one side has, unhighlighted
    assert "&#13;" in text_html("a\rb")


def test_any_two_texts_come_back_whole_from_their_diff() -> None:
    rng = random.Random(7)
    pieces = ["word", "other", "<b>", "&amp;", " ", "  ", "\n", "\n\n\n", "\t", "\r\n", "\u2028", "é"]
    for _ in range(300):
        a = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
        b = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
        for max_words in (3, MAX_DIFF_WORDS):
            assert sides(word_diff(a, b, max_words).html) == (a, b)


def test_furniture_runs_give_back_the_raw_text() -> None:
    raw = "Home\nNews\n\nTitle\nBody text\nShare\nFooter\nHome"
    kept = "\nTitle\nBody text\nHome"
    runs = furniture_runs(raw, kept)
    assert runs == [[0, "Home\nNews"], [5, "Share\nFooter"]]
    assert raw_text(kept, runs) == raw
    assert furniture_runs("a\nb", "") == [[0, "a\nb"]] and raw_text("", [[0, "a\nb"]]) == "a\nb"
    assert furniture_runs("a", "a") == []
    with pytest.raises(ValueError):
        furniture_runs("a\nb", "c")


def test_a_review_record_carries_the_furniture_left_out_and_loses_it_with_the_duplicate() -> None:
    record = review_record(A, B, LONG, "kept")
    plain = {k: v for k, v in record.items() if k != "duplicate_text"}
    assert "duplicate_furniture" not in log_review_record(plain, "kept", "kept")
    logged = log_review_record(plain, "kept", "nav\nkept\nfooter")
    assert logged["duplicate_text"] == "kept" and logged["duplicate_furniture"] == [[0, "nav"], [2, "footer"]]
    erased = redact(logged, {B["id"]})
    assert "duplicate_text" not in erased and "duplicate_furniture" not in erased
    [pair] = pairs_of([logged], TextFinder())
    assert pair.duplicate.furniture == ((0, "nav"), (2, "footer"))
    [odd] = pairs_of([{**logged, "duplicate_furniture": [[2, "x"], [0, "y"]]}], TextFinder())
    assert odd.duplicate.text == "kept" and odd.duplicate.furniture == ()  # not runs in order: no raw view


def test_a_pair_judged_on_whole_texts_is_shown_whole_and_labelled_with_their_jaccard() -> None:
    logged = log_review_record({k: v for k, v in review_record(A, B, LONG, "x").items() if k != "duplicate_text"},
                               LONG, "nav\n" + LONG, whole=True)
    assert logged["whole_texts"] is True
    finder = TextFinder()
    finder.add(A["id"], A["url"], Found(LONG, "items", ((0, "menu"),)))
    [pair] = pairs_of([logged], finder)
    assert pair.whole and pair.matched.text == "menu\n" + LONG and pair.duplicate.text == "nav\n" + LONG
    html = render([pair], [], "the review log", ["review.jsonl"])
    assert "the whole texts: two pages of one host" in html
    data = json.loads(parse(html).scripts[0])
    assert data["1"]["jaccard"] == logged["jaccard"] and data["1"]["a"]["furniture"] == []


def test_feed_texts_lose_their_hosts_furniture_as_the_crawl_learned_it() -> None:
    template = ["Site brand", "Home · News · About", "Related: other pages of this site"]
    pages = [
        "\n".join([*template[:2], f"Article {n} " + " ".join(f"w{n}x{i}" for i in range(30)), template[2]])
        for n in range(3)
    ]
    furniture = learn([page_lines(page) for page in pages])
    config = read(Settings({"SIMHASH_HOST_FIELD": "site"}), "review")
    fed, unreadable = feed_pages([{"url": f"https://a.example/{n}", "site": "a", "body_text": page}
                                  for n, page in enumerate(pages)] + ["not an item"], config)
    assert unreadable == 1 and [page.host for page in fed] == ["a"] * 3
    finder = TextFinder()
    item_texts(finder, fed, "items", {"a": furniture})
    found = finder.find(None, "https://a.example/0")
    assert found.text == furniture.strip(page_lines(pages[0])) and "Site brand" not in found.text
    assert found.source == "items" and raw_text(found.text, found.furniture) == pages[0]
    other = TextFinder()
    item_texts(other, fed, "items", {})  # no furniture learned for the host: the text as fed
    assert other.find(None, "https://a.example/0").text == pages[0]


def test_matched_text_comes_from_another_review_record_before_the_items(tmp_path) -> None:
    first = review_record(A, B, LONG, LONG + " tail")  # B's text as the pipeline compared it
    second = review_record(B, C, LONG + " tail", LONG + " other")
    third = review_record(A, C, LONG, LONG + " other")
    odd = [{**first, "jaccard": 1e308}, {**first, "duplicate_id": {"a": 1}}, {**first, "matched_url": ["u"]}]
    records, skipped = review_records([first, second, third, {"decision": "maybe"}, *odd])
    assert skipped == 1 + len(odd)
    erased = {**third, "matched_id": None, "matched_url": None, "erased": ["matched"]}
    assert review_records([erased]) == ([erased], 0)
    finder = TextFinder()
    review_texts(finder, records, "review log")
    feed = write_jsonl(tmp_path / "items.jsonl", [{"url": B["url"], "body_text": "B from the feed"},
                                                  {"url": A["url"], "title": "T", "body_text": "<p>A body</p>"}])
    config = read(Settings(), "review")
    pages, unreadable = feed_pages(read_feed(feed), config)
    assert unreadable == 0
    item_texts(finder, pages, "items")
    pairs = pairs_of(records, finder)
    assert pairs[0].matched.text == "T\n\nA body" and pairs[0].matched.source == "items"  # HTML made text
    assert pairs[1].matched.text == LONG + " tail" and pairs[1].matched.source == "review log"
    assert all(pair.labellable for pair in pairs)


def test_items_are_matched_by_url_when_ids_are_not_urls(tmp_path) -> None:
    record = review_record({"id": "sku-1", "url": "https://a.example/p"}, B, "x", LONG)
    feed = tmp_path / "items.json"  # a JSON (array) feed export
    feed.write_text(json.dumps([{"url": "https://a.example/p", "body_text": "found by URL"}]))
    finder = TextFinder()
    item_texts(finder, feed_pages(read_feed(feed), read(Settings({"SIMHASH_ID_FIELD": "sku"}), "review"))[0], "items")
    [pair] = pairs_of([record], finder)
    assert pair.matched.text == "found by URL"


def test_missing_and_erased_texts_are_said_so() -> None:
    missing = review_record(A, B, LONG, LONG)
    erased = review_record(A, B, LONG, LONG, matched_id=None, matched_url=None, erased=["matched"])
    no_text = review_record(A, B, LONG, LONG, duplicate_text=None)
    pairs = pairs_of([missing, erased, no_text], TextFinder())
    assert pairs[0].matched.text is None and "--items" in pairs[0].matched.source
    assert pairs[1].matched.erased and pairs[1].matched.source.startswith("erased")
    assert pairs[2].duplicate.text is None and "no duplicate_text" in pairs[2].duplicate.source
    html = render(pairs, [], "the review log", ["review.jsonl"])
    assert html.count("Not labellable: both texts are needed.") == 3
    assert "give the crawl&#x27;s items with --items" in html and "erased: the page was removed" in html


def test_histogram_counts_each_decision_once_and_marks_the_threshold() -> None:
    decisions = [(0.79, "rejected"), (0.815, "rejected"), (0.82, "merged"), (0.825, "merged"), (1.0, "merged")]
    svg = histogram_svg(decisions, [THRESHOLD])
    titles = re.findall(r"<title>Jaccard ([\d.]+) to ([\d.]+): (\d+) merged, (\d+) rejected</title>", svg)
    bins = {(float(low), float(high)): (int(m), int(r)) for low, high, m, r in titles}
    assert bins == {(0.79, 0.8): (0, 1), (0.81, 0.82): (0, 1), (0.82, 0.83): (2, 0), (1.0, 1.0): (1, 0)}
    [line] = re.findall(r'<line class="threshold" x1="([\d.]+)"', svg)
    [edge] = re.findall(r'<rect class="merged" x="([\d.]+)"[^>]*><title>Jaccard 0.82 to', svg)
    assert float(line) == pytest.approx(float(edge) - 0.5, abs=0.01)  # at the left edge of the 0.82 bar


def test_safe_link_links_only_web_and_file_urls() -> None:
    assert safe_link("https://a.example/?q=1&r=2") == (
        '<a href="https://a.example/?q=1&amp;r=2" target="_blank" rel="noopener noreferrer">'
        "https://a.example/?q=1&amp;r=2</a>"
    )
    for url in ("javascript:alert(1)", " javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)",
                "data:text/html,<script>alert(1)</script>", "https://a.example/\n", "vbscript:x"):
        assert "<a " not in safe_link(url) and "<script>" not in safe_link(url)


def test_hostile_texts_and_urls_stay_text() -> None:
    html = hostile_page()
    elements = parse(html)
    scripts = [attrs for tag, attrs in elements.tags if tag == "script"]
    assert scripts == [{"type": "application/json", "id": "simhash-pairs"}, {}]  # ours, nothing injected
    assert not [tag for tag, _ in elements.tags if tag in ("img", "u", "i", "iframe", "object")]
    assert all(not name.startswith("on") for _, attrs in elements.tags for name in attrs)
    hrefs = [attrs["href"] for tag, attrs in elements.tags if tag == "a"]
    assert hrefs == [A["url"], A["url"], HOSTILE_URLS[1], A["url"], A["url"]]  # the only https duplicate
    data = json.loads(elements.scripts[0])  # the page holds a text once; one it cannot hold travels here
    assert "text" not in data["1"]["a"] and data["1"]["b"]["text"] == HOSTILE_TEXT + " 0\x00"
    assert data["1"]["b"]["url"] == HOSTILE_URLS[0]
    assert "</script" not in elements.scripts[0].lower() and "<!--" not in elements.scripts[0]


def test_the_page_loads_nothing_and_runs_only_its_own_script() -> None:
    html = hostile_page()
    elements = parse(html)
    [policy] = [attrs["content"] for _, attrs in elements.tags if attrs.get("http-equiv") == "Content-Security-Policy"]
    assert policy.startswith("default-src 'none'; ")
    style = re.search(r"<style>(.*?)</style>", html, re.DOTALL).group(1)
    for source in (style, elements.scripts[1]):
        digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert not [attrs for tag, attrs in elements.tags if tag == "link" or "src" in attrs]


def test_review_command_end_to_end(corpus: list[dict], tmp_path) -> None:
    made = corpus_review(corpus, tmp_path)
    output = tmp_path / "out" / "review.html"
    output.parent.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-review", str(made["review_log"]), "--items", str(made["items"]),
         "--merge-log", str(made["merge_log"]), "-o", str(output)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    count = len(made["records"])
    assert f"{output}: {count} decisions, {count} with both texts" in done.stdout
    html = output.read_text(encoding="utf-8")
    assert html.count('<section class="pair"') == count
    logged = sum(1 for _ in made["merge_log"].open())
    assert f"Jaccard of {logged} logged decisions (merge log merges.jsonl)" in html
    assert len(json.loads(parse(html).scripts[0])) == count


def test_review_command_says_what_is_missing(tmp_path) -> None:
    log = write_jsonl(tmp_path / "review.jsonl", [review_record(A, B, LONG, LONG)])
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", str(log), "-o", str(tmp_path / "r.html")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "1 decisions, 0 with both texts" in done.stdout
    assert "1 pairs lack the text of the page compared with: give the crawl's items with --items" in done.stdout
    unrelated = write_jsonl(tmp_path / "items.jsonl", [{"url": "https://elsewhere.example/", "body_text": LONG}])
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", str(log), "--items", str(unrelated), "-o", "r.html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "1 pairs lack the text of the page compared with: it is in none of the items given" in done.stdout
    assert "do SIMHASH_ID_FIELD and SIMHASH_URL_FIELD name the crawl" in (tmp_path / "r.html").read_text()
    missing = subprocess.run(
        [sys.executable, "-m", "scrapy", "simhash-review", str(tmp_path / "nosuch.jsonl")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert missing.returncode == 2 and "cannot read review log" in missing.stderr


def page_links(html: str) -> list[str]:
    """The pages a page links to, each once (the links are above and below the pairs)."""
    links = [attrs["href"] for tag, attrs in parse(html).tags if tag == "a" and attrs.get("class") == "page"]
    return list(dict.fromkeys(links))


def test_a_long_review_log_is_written_as_pages_linked_in_order(tmp_path) -> None:
    """A page a browser opens: at most --per-page pairs each, numbered across pages, each page with
    its own labels file; pages an earlier, longer review left are removed."""
    pages = [{"id": f"https://a.example/{n}", "url": f"https://a.example/{n}"} for n in range(6)]
    texts = [f"{LONG} page{n}" for n in range(6)]
    records = [review_record(pages[n], pages[n + 1], texts[n], texts[n + 1]) for n in range(5)]
    log = write_jsonl(tmp_path / "review.jsonl", records)
    (tmp_path / "r-4.html").write_text("<!DOCTYPE html>\n<html><head><title>scrapy-simhash review</title>")
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", str(log), "--per-page", "2", "-o", "r.html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "r.html: 5 decisions, 4 with both texts, on 3 pages (r.html to r-3.html)" in done.stdout
    assert not (tmp_path / "r-4.html").exists()
    html = [(tmp_path / name).read_text(encoding="utf-8") for name in ("r.html", "r-2.html", "r-3.html")]
    assert [re.findall(r'<section class="pair" id="pair-(\d+)"', page) for page in html] == [
        ["1", "2"], ["3", "4"], ["5"]
    ]
    assert [page_links(page) for page in html] == [["r-2.html"], ["r.html", "r-3.html"], ["r-2.html"]]
    filenames = [attrs["data-filename"] for page in html for tag, attrs in parse(page).tags if "data-filename" in attrs]
    assert filenames == ["simhash-labels.jsonl", "simhash-labels-2.jsonl", "simhash-labels-3.jsonl"]
    assert all("5 sampled decisions" in page for page in html)


def test_per_page_zero_writes_every_pair_on_one_page(tmp_path) -> None:
    records = [review_record(A, B, LONG, LONG)] * 3
    log = write_jsonl(tmp_path / "review.jsonl", records)
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", str(log), "--per-page", "0", "-o", "r.html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.count('<section class="pair"') == 3 and not page_links(html)


def test_review_command_makes_the_output_folder_or_says_in_one_line_why_not(tmp_path) -> None:
    log = write_jsonl(tmp_path / "review.jsonl", [review_record(A, B, LONG, LONG)])
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", str(log), "-o", "new/folder/r.html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new" / "folder" / "r.html").is_file()
    (tmp_path / "blocker").write_text("a file, not a folder")
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", str(log), "-o", "blocker/r.html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "blocker" in line] == [
        "scrapy simhash-review: error: cannot make the folder blocker for blocker/r.html: File exists"
    ]


PROJECT_SETTINGS = """
SPIDER_MODULES = ["shop.spiders"]
SIMHASH_REVIEW_LOG = "output/{spider}-review.jsonl"
FEEDS = {"output/%(name)s-items.jsonl": {"format": "jsonlines"}, "s3://bucket/%(name)s.jsonl": {"format": "json"},
         "output/%(name)s-%(time)s.json": {"format": "json"}, "output/%(name)s.csv": {"format": "csv"}}
"""


def test_review_command_finds_the_spiders_review_log_and_feed_in_the_project(tmp_path) -> None:
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = shop.settings\n")
    (tmp_path / "shop" / "spiders").mkdir(parents=True)
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "settings.py").write_text(PROJECT_SETTINGS)
    (tmp_path / "shop" / "spiders" / "__init__.py").write_text(
        "import scrapy\n\n\nclass Shop(scrapy.Spider):\n    name = 'shop'\n"
    )
    (tmp_path / "output").mkdir()
    write_jsonl(tmp_path / "output" / "shop-review.jsonl", [review_record(A, B, LONG, LONG + " more")])
    write_jsonl(tmp_path / "output" / "shop-items.jsonl", [{"url": A["url"], "body_text": LONG}])
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "review", "-o", "r.html"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "r.html: 1 decisions, 1 with both texts\n"
    assert "output/shop-items.jsonl" in (tmp_path / "r.html").read_text(encoding="utf-8")
