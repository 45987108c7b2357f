"""What the pipeline reads of an item: a :class:`Page` of plain values, once per item, and an early
word when the items lack the fields SIMHASH_FIELDS names (a typo there compares nothing, or items
on a title alone, without it)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy_simhash.extract import BadFieldError, exact_digest, extract_text, field_value, host_of
from scrapy_simhash.index.retention import DEFAULT_RETENTION

if TYPE_CHECKING:
    from itemadapter import ItemAdapter
    from scrapy.crawler import Crawler

    from scrapy_simhash.settings import SimhashSettings

__all__ = ["Page", "PageReader"]

logger = logging.getLogger(__name__)

# Items looked at before saying that none of them has any SIMHASH_FIELDS field.
FIELD_CHECK_ITEMS = 20


@dataclass(frozen=True)
class Page:
    """What the pipeline judges of an item: plain values, taken from the item once."""

    id: str
    url: str
    host: str
    retention: str
    text: str


class PageReader:
    """Reads items into pages as the settings say, and checks the first items have the fields."""

    def __init__(self, crawler: Crawler, config: SimhashSettings) -> None:
        self.config = config
        self.crawler = crawler
        self._inc = crawler.stats.inc_value
        self.retention_classes = frozenset(config.retention or DEFAULT_RETENTION)
        self._fields_seen: Counter[str] = Counter()
        self._fields_given = crawler.settings.getpriority("SIMHASH_FIELDS") is not None
        self._items_checked = 0

    def close(self) -> None:
        if 0 < self._items_checked < FIELD_CHECK_ITEMS:  # a crawl shorter than the early check
            self._say_missing_fields()

    def check_fields(self, adapter: ItemAdapter) -> None:
        """Count items without any field SIMHASH_FIELDS names, and say once, early, which fields none
        of the first items has (:meth:`_say_missing_fields`)."""
        present = [name for name in self.config.fields if not _empty(adapter.get(name))]
        if not present:
            self._inc("simhash/items_without_fields")
        if self._items_checked >= FIELD_CHECK_ITEMS:
            return
        self._items_checked += 1
        self._fields_seen.update(present)
        self._fields_seen.update(f"item:{name}" for name in adapter.keys())
        if self._items_checked == FIELD_CHECK_ITEMS:
            self._say_missing_fields()

    def _say_missing_fields(self) -> None:
        """No first item has any of the fields: nothing is compared. A field of a list the user gave
        that none has (a typo): items are compared on the others, perhaps a title alone. (The default
        list's fields are each optional.)"""
        missing = [name for name in self.config.fields if not self._fields_seen[name]]
        if not missing or len(missing) < len(self.config.fields) and not self._fields_given:
            return
        have = ", ".join(sorted(name.removeprefix("item:") for name in self._fields_seen if name.startswith("item:")))
        consequence = "nothing is compared" if len(missing) == len(self.config.fields) else "compared without it"
        logger.warning(
            "None of the first %(count)d items has the field(s) %(fields)s that SIMHASH_FIELDS names: "
            "%(consequence)s. The items have: %(have)s",
            {"count": self._items_checked, "fields": missing, "consequence": consequence, "have": have},
            extra={"spider": self.crawler.spider},
        )

    def page(self, adapter: ItemAdapter) -> Page:
        config = self.config
        text, truncated = extract_text(adapter, config.fields, config.html_fields, config.max_chars)
        if truncated:
            self._inc("simhash/truncated")
        url = field_value(adapter, config.url_field)
        retention = field_value(adapter, config.retention_field) or "default"
        if retention not in self.retention_classes:
            known = sorted(self.retention_classes)
            raise BadFieldError(f"unknown retention class {retention!r} (SIMHASH_RETENTION: {known})")
        host = field_value(adapter, config.host_field) if config.host_field else host_of(url)
        return Page(
            id=self.page_id(adapter, text),
            url=url,
            host=host,
            retention=retention,
            text=text,
        )

    def page_id(self, adapter: ItemAdapter, text: str | None = None) -> str:
        """What a page's records are kept under: its SIMHASH_ID_FIELD, else its URL, else a digest of
        its text (``text``, or extracted again)."""
        config = self.config
        found = field_value(adapter, config.id_field or config.url_field)
        if found:
            return found
        if text is None:
            text = extract_text(adapter, config.fields, config.html_fields, config.max_chars).text
        return f"digest:{exact_digest(text).hex()}"


def _empty(value: Any) -> bool:
    """No value in a field: absent, None, or an empty string or list (any other value counts: its
    reading says what is wrong with it)."""
    return value is None or isinstance(value, (str, bytes, list, tuple)) and len(value) == 0
