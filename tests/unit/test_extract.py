"""Item fields -> fingerprinted text, for every item type itemadapter supports."""

from __future__ import annotations

from dataclasses import dataclass

import attr
import pytest
import scrapy
from itemadapter import ItemAdapter

from scrapy_simhash.extract import BadFieldError, exact_digest, extract_text, field_value, host_of

FIELDS = ["title", "description", "body_text"]
HTML = (
    "<html><body><nav><a href='/'>Home</a></nav><p>First <b>bold</b> paragraph.</p>"
    "<script>var x;</script></body></html>"
)


class PageItem(scrapy.Item):
    url = scrapy.Field()
    title = scrapy.Field()
    description = scrapy.Field()
    body_text = scrapy.Field()


@dataclass
class PageDataclass:
    url: str
    title: str
    body_text: str
    description: str | None = None


@attr.s(auto_attribs=True)
class PageAttrs:
    url: str
    title: str
    body_text: str
    description: str | None = None


@pytest.mark.parametrize(
    "item",
    [
        {"url": "u", "title": "Title", "body_text": "Body text here"},
        PageItem(url="u", title="Title", body_text="Body text here"),
        PageDataclass(url="u", title="Title", body_text="Body text here"),
        PageAttrs(url="u", title="Title", body_text="Body text here"),
    ],
    ids=["dict", "Item", "dataclass", "attrs"],
)
def test_every_item_type_gives_the_same_text(item) -> None:
    assert extract_text(item, FIELDS).text == "Title\n\nBody text here"


def test_fields_are_joined_in_the_configured_order() -> None:
    item = {"title": "A", "description": "B", "body_text": "C"}
    assert extract_text(item, ["body_text", "title"]).text == "C\n\nA"


def test_html_is_converted_to_text_never_fingerprinted_as_markup() -> None:
    text = extract_text({"body_text": HTML}, FIELDS).text
    assert "<" not in text and "var x" not in text
    assert "First bold paragraph." in text and "Home" in text


def test_prose_that_mentions_brackets_is_not_parsed_as_html() -> None:
    prose = "Use a < b and see <http://example.com/x> for details"
    assert extract_text({"body_text": prose}, FIELDS).text == prose


def test_text_that_quotes_tags_stays_text() -> None:
    """Documentation and code samples mention tags mid-text; only a value that is markup is parsed."""
    prose = "See :ref:`the FAQ <faq>` and wrap each entry in an <li> element, then close it with </li>."
    assert extract_text({"body_text": prose}, FIELDS).text == prose
    element = "\n  <div><p>An <b>element</b> from a selector</p></div>"
    assert extract_text({"body_text": element}, FIELDS).text == "An element from a selector"


def test_explicit_html_fields_override_detection() -> None:
    item = {"title": "<b>kept literally</b>", "body_text": "x &amp; y"}
    text = extract_text(item, FIELDS, html_fields=["body_text"]).text
    assert text == "<b>kept literally</b>\n\nx & y"


def test_lists_bytes_and_numbers_are_text() -> None:
    item = {"title": ["One", "Two"], "description": "é".encode(), "body_text": 42}
    assert extract_text(item, FIELDS).text == "One\n\nTwo\n\né\n\n42"


def test_a_field_holding_an_object_is_reported() -> None:
    with pytest.raises(BadFieldError, match="body_text"):
        extract_text({"body_text": {"nested": "dict"}}, FIELDS)


def test_max_chars_cuts_before_parsing_and_says_so() -> None:
    content = extract_text({"body_text": "<p>" + "word " * 10_000 + "</p>"}, FIELDS, max_chars=100)
    assert content.truncated and len(content.text) <= 100
    assert not extract_text({"body_text": "short"}, FIELDS, max_chars=100).truncated


def test_field_value_reads_scalars_and_rejects_objects() -> None:
    assert field_value(ItemAdapter({"url": ["https://a.example/x", "other"]}), "url") == "https://a.example/x"
    assert field_value(ItemAdapter({}), "url") == ""
    lone_surrogate = field_value(ItemAdapter({"id": "\ud800x"}), "id")
    assert lone_surrogate.endswith("x") and lone_surrogate.encode("utf-8")
    with pytest.raises(BadFieldError):
        field_value(ItemAdapter({"url": object()}), "url")


def test_host_of() -> None:
    assert host_of("https://News.Example.org:8080/a") == "news.example.org"
    assert host_of("file:///tmp/site/page.html") == ""


def test_exact_digest_ignores_case_spacing_and_punctuation_only() -> None:
    assert exact_digest("Hello,   World!") == exact_digest("hello world")
    assert exact_digest("hello world") != exact_digest("hello there world")


def nested(depth: int, text: str) -> str:
    return "<html><body>" + "<div>" * depth + text + "</div>" * depth + "</body></html>"


def test_html_nested_past_the_parsers_default_depth_is_read() -> None:
    """libxml2 gives up 255 elements deep by default; such pages read as empty text."""
    assert extract_text({"body_text": nested(400, "deep article text")}, FIELDS).text == "deep article text"


def test_html_that_yields_no_text_is_reported_not_judged_on_the_other_fields() -> None:
    item = {"title": "Home", "body_text": nested(20, "<img src='a.png'> " * 100)}
    with pytest.raises(BadFieldError, match="body_text.*yield no text"):
        extract_text(item, ["title", "body_text"])
    small = {"title": "Home", "body_text": "<div><img src='a.png'></div>"}  # an empty field, as it says
    assert extract_text(small, ["title", "body_text"]).text == "Home"


def test_html_the_parser_stops_reading_past_its_depth_is_reported_not_judged_on_what_was_read() -> None:
    """Past libxml2's 2,048 levels the rest of a page is dropped: what is left (a header line) is not
    the page. Text to HTML ratios cannot tell it (real pages reach 0.0017: an app shell's scripts),
    the parser's own resource-limit error does."""
    deep = "<p>Home page header</p>" + nested(3000, "the article, past the parser's depth")
    with pytest.raises(BadFieldError, match="body_text.*past the parser's depth"):
        extract_text({"title": "Home", "body_text": deep}, ["title", "body_text"])


def test_exact_digest_of_a_short_text_is_that_of_its_sentences_and_lines_in_any_order() -> None:
    listing = "Two-bed flat by the park. Pets welcome! Viewings on weekday evenings.\nBalcony\nParking"
    reordered = "Viewings on weekday evenings. Two-bed flat by the park.\nParking\nPets welcome!\nBalcony"
    assert exact_digest(listing) == exact_digest(reordered)
    assert exact_digest(listing) != exact_digest(listing.replace("Pets welcome!", "No pets."))
    assert exact_digest("Flat by the park. Pets welcome.") != exact_digest("Flat by the. Park pets welcome.")
