"""Item fields -> the plain text that is fingerprinted, for every item type ``itemadapter`` knows.

HTML is converted to text with ``html-text`` first: markup is never fingerprinted, or every page of
a site would look alike through its tags.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import html_text
import lxml.etree
import lxml.html
from itemadapter import ItemAdapter

from scrapy_simhash.fingerprint import segments

__all__ = ["BadFieldError", "Content", "exact_digest", "extract_text", "field_value", "host_of", "looks_like_html"]

# An opening/self-closing tag, a comment or a doctype AT THE START of the value: what a selector's
# ``.get()`` returns for an element. Prose that mentions "a < b", "<http://...>" or a tag in a code
# sample (``<li>``, rst's ``:ref:`faq <faq>```) starts with text and stays text.
_TAG = re.compile(r"\s*(?:<[a-zA-Z][\w:-]*(?:\s[^<>]*)?/?>|<!--|<!doctype\b)", re.IGNORECASE)


# Ids, URLs and hosts end up whole in index keys and merge-log records; real URLs stay far below
# this (servers commonly refuse request lines over 8 KB), a hostile field need not.
MAX_SCALAR_CHARS = 32_768


class BadFieldError(ValueError):
    """A content field holds a value that is not text (a dict, an object...)."""


class Content(NamedTuple):
    text: str
    truncated: bool


def looks_like_html(value: str) -> bool:
    return _TAG.match(value) is not None


def _number_text(name: str, value: int | float) -> str:
    try:
        return str(value)
    except ValueError:  # an int with more digits than sys.get_int_max_str_digits() allows
        raise BadFieldError(f"field {name!r} holds an integer too long to write as text") from None


def _strings(name: str, value: Any) -> Iterable[str]:
    if value is None:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, (bytes, bytearray)):
        yield bytes(value).decode("utf-8", errors="replace")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield _number_text(name, value)
    elif isinstance(value, (list, tuple)):
        for element in value:
            yield from _strings(name, element)
    else:
        raise BadFieldError(f"field {name!r} holds {type(value).__name__}, not text")


# libxml2 stops descending 255 elements deep unless told a tree may be huge (then 2,048): below that
# depth a page read as empty text, and was judged on what else it had (a title alone).
_PARSER = lxml.html.HTMLParser(recover=True, encoding="utf-8", huge_tree=True)
# HTML at least this long that yields not one word was not read: the item is not judged on the rest.
HTML_WITHOUT_TEXT = 1000
# What libxml2 reports when it stops reading (past 2,048 levels): the rest of the page is dropped.
_PARSER_LIMIT = lxml.etree.ErrorTypes.ERR_RESOURCE_LIMIT


def _html_text(name: str, value: str) -> str:
    """The text of HTML ``value``, parsed as html-text does but at any depth; a lone surrogate (a
    broken decode, half an emoji pair), which the parser cannot encode, is read as U+FFFD."""
    body = value.strip().replace("\x00", "")
    try:
        encoded = body.encode("utf-8")
    except UnicodeEncodeError:
        encoded = body.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8")
    root = lxml.etree.fromstring(encoded or b"<html/>", parser=_PARSER)
    if any(error.type == _PARSER_LIMIT for error in _PARSER.error_log):
        raise BadFieldError(f"field {name!r} holds {len(value):,} characters of HTML nested past the parser's depth:"
                            " what it read is not the page")
    text = html_text.extract_text(root) if root is not None else ""
    if not text.strip() and len(value) >= HTML_WITHOUT_TEXT:
        raise BadFieldError(f"field {name!r} holds {len(value):,} characters of HTML that yield no text")
    return text


def extract_text(
    item: Any, fields: Iterable[str], html_fields: Iterable[str] | None = None, max_chars: int | None = None
) -> Content:
    """The text of ``fields`` of ``item``, in order, one paragraph each; missing fields are skipped.

    ``html_fields=None`` treats every value that contains markup as HTML; a list names exactly the
    fields that hold HTML. Lists of strings are joined; bytes are read as UTF-8. Only the first
    ``max_chars`` characters are kept, and a raw value is cut there before its HTML is parsed, so a
    huge field costs no more than the limit allows.
    """
    adapter = item if isinstance(item, ItemAdapter) else ItemAdapter(item)
    html = None if html_fields is None else frozenset(html_fields)
    budget = max_chars
    parts: list[str] = []
    truncated = False
    for name in fields:
        for value in _strings(name, adapter.get(name)):
            if budget is not None and len(value) > budget:
                value, truncated = value[:budget], True
            is_html = looks_like_html(value) if html is None else name in html
            text = (_html_text(name, value) if is_html else value).strip()
            if text:
                parts.append(text)
                budget = None if budget is None else max(budget - len(text) - 2, 0)
    joined = "\n\n".join(parts)
    if max_chars is not None and len(joined) > max_chars:
        joined, truncated = joined[:max_chars], True
    return Content(joined, truncated)


def field_value(adapter: ItemAdapter, name: str | None) -> str:
    """A scalar field (id, URL, host, retention class) as a string; "" when absent.

    Longer than ``MAX_SCALAR_CHARS``: refused (``BadFieldError``), since the value would be stored
    whole in index keys and merge-log records.
    """
    if name is None:
        return ""
    value = adapter.get(name)
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else ""
    if isinstance(value, (str, bytes, bytearray)) and len(value) > MAX_SCALAR_CHARS:
        raise BadFieldError(f"field {name!r} holds {len(value)} characters, more than {MAX_SCALAR_CHARS}")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, int):
        return _number_text(name, value)
    if isinstance(value, str):
        # Ids and URLs are stored and logged as UTF-8: lone surrogates become U+FFFD.
        return value.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    raise BadFieldError(f"field {name!r} holds {type(value).__name__}, not a string")


def host_of(url: str) -> str:
    """The lower-cased host of ``url`` ("" for file: and other host-less URLs)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def exact_digest(text: str) -> bytes:
    """Digest of the text's distinct normalised segments (sentences and lines, each its tokens in
    order), sorted: the key of the exact index for short texts, which a repost with its sentences or
    lines in another order shares. A text of one segment: the digest of its token sequence."""
    distinct = sorted({" ".join(tokens) for tokens in segments(text)})
    return hashlib.blake2b("\n".join(distinct).encode("utf-8"), digest_size=16).digest()
