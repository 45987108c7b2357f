"""Every ``SIMHASH_*`` setting with its default, read once into plain validated values.

The pipeline and the commands read settings through :func:`read`, so a default lives here and
nowhere else, and ``{spider}`` is filled in here and nowhere else (README "Settings" lists them).
"""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.utils.project import data_path

from scrapy_simhash.fingerprint import WEIGHTINGS

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["DEFAULTS", "SettingsError", "SimhashSettings", "read", "unknown_settings"]

DEFAULTS: dict[str, Any] = {
    "SIMHASH_ENABLED": True,
    # Content
    "SIMHASH_FIELDS": ["title", "description", "body_text"],
    "SIMHASH_HTML_FIELDS": None,  # None: a value is HTML when it starts with markup
    "SIMHASH_MAX_CHARS": 1_000_000,
    "SIMHASH_ID_FIELD": None,  # None: the URL field
    "SIMHASH_URL_FIELD": "url",
    "SIMHASH_HOST_FIELD": None,  # None: the host of the URL field
    "SIMHASH_RETENTION_FIELD": None,  # None: every record is in the "default" retention class
    "SIMHASH_MIN_WORDS": 50,
    # Fingerprint and decision rule
    "SIMHASH_SHINGLE_WIDTH": 4,
    "SIMHASH_WEIGHTING": "frequency",
    "SIMHASH_JACCARD_THRESHOLD": 0.82,
    "SIMHASH_TARGET_RECALL": 0.99,  # what the calibrated layout must reach at the threshold
    "SIMHASH_LAYOUT": None,  # None: calibrated; or {"bands": B, "rows": R, "min_estimate": E}
    "SIMHASH_ACTION": "drop",
    "SIMHASH_ANNOTATION_FIELD": "duplicate_of",
    "SIMHASH_DROP_LOG_LEVEL": "INFO",
    "SIMHASH_DROP_DEBUG": False,  # True: Scrapy's "Dropped:" line with the whole item, not the short line
    "SIMHASH_MAX_GROUP_WARN": 1000,
    "SIMHASH_SEEN_ACTION": "drop",  # a page the index holds under its id with the same content
    # Index
    "SIMHASH_INDEX_URL": None,  # None: sqlite:///.scrapy/simhash/{spider}.sqlite3 in the project data dir
    "SIMHASH_KEY_PREFIX": "simhash:{spider}",
    "SIMHASH_RETENTION": None,  # None: {"default": None}, keep for good; else class -> TTL seconds
    "SIMHASH_ON_INDEX_ERROR": "pass",
    "SIMHASH_INDEX_RETRIES": 2,
    "SIMHASH_INDEX_RETRY_DELAY": 0.1,
    "SIMHASH_EXPIRE_INTERVAL": 3600.0,
    "SIMHASH_SESSION_LEASE": 30.0,
    "SIMHASH_ALLOW_EVICTION": False,  # run on a Redis that evicts keys when full (refused otherwise)
    "SIMHASH_RESET": False,  # empty this spider's index and logs when it opens (or -a simhash_reset=1)
    # Audit
    "SIMHASH_MERGE_LOG": None,  # None: .scrapy/simhash/{spider}-merges.jsonl; "": off
    "SIMHASH_REVIEW_LOG": None,  # None: .scrapy/simhash/{spider}-review.jsonl; "": off
    "SIMHASH_REVIEW_MARGIN": 0.03,
    "SIMHASH_REVIEW_RATE": 0.1,
    # Boilerplate learner (docs/boilerplate.md); the add-on turns it on
    "SIMHASH_BOILERPLATE": False,
    "SIMHASH_BOILERPLATE_SAMPLE_PAGES": 3,
    "SIMHASH_BOILERPLATE_MAX_HELD": 500,
    "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT": 10.0,
}

ACTIONS = ("drop", "annotate")
SEEN_ACTIONS = ("drop", "pass")
ON_INDEX_ERROR = ("pass", "fail")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Backoff between index retries doubles from SIMHASH_INDEX_RETRY_DELAY and never exceeds this.
MAX_RETRY_DELAY = 2.0
# What turns a log off besides "" (``-s SIMHASH_MERGE_LOG=False`` is the string "False").
OFF = frozenset({"", "false", "off", "no", "0"})
# A crawl's lease on its pending pages: a day at most (longer, a killed crawl's pages stay in limbo).
MAX_SESSION_LEASE = 86_400.0


class SettingsError(ValueError):
    """A setting's value cannot be used; the message is one line naming the setting and the value."""


def data_file(name: str) -> str:
    """Absolute path of ``name`` under the project's ``.scrapy/simhash/`` (like HTTPCACHE_DIR).

    Not created here: whoever writes the file creates its directory, so reading settings has no side effect.
    """
    return os.path.abspath(os.path.join(data_path("simhash"), name))


class _Reader:
    """Reads settings by name, each failure a :class:`SettingsError` naming the setting and value."""

    def __init__(self, settings: BaseSettings) -> None:
        self.settings = settings

    def raw(self, name: str) -> Any:
        return self.settings.get(name, DEFAULTS[name])

    def fail(self, name: str, value: Any, expected: str) -> SettingsError:
        return SettingsError(f"{name} = {value!r}: {expected}")

    def flag(self, name: str) -> bool:
        try:
            return self.settings.getbool(name, DEFAULTS[name])
        except ValueError:
            raise self.fail(name, self.raw(name), "must be True or False") from None

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if str(value).lower() not in choices and str(value).upper() not in choices:
            raise self.fail(name, value, "must be one of " + ", ".join(repr(c) for c in choices))
        return str(value).lower() if str(value).lower() in choices else str(value).upper()

    def number(self, name: str, kind: type, low: float, high: float = float("inf")) -> Any:
        value = self.raw(name)
        integral = not isinstance(value, float) or value.is_integer()  # int(2.7) would be 2
        try:
            number = kind(value)
            if isinstance(value, bool) or kind is int and not integral:
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            raise self.fail(name, value, f"must be {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(number):
            raise self.fail(name, value, "must be a finite number")
        if not low <= number <= high:
            bound = f"between {low} and {high}" if high != float("inf") else f"at least {low}"
            raise self.fail(name, value, f"must be {bound}")
        return number

    def text(self, name: str, optional: bool = False) -> str | None:
        value = self.raw(name)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(name, value, "must be a non-empty string" + (" or None" if optional else ""))
        return value

    def names(self, name: str, allow_empty: bool = False) -> list[str]:
        """A list of field names; a string is a JSON list (``'["title", "body"]'``) or comma-separated."""
        value = self.raw(name)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except json.JSONDecodeError:
                    raise self.fail(name, text, "is not a JSON list of field names") from None
            else:
                value = [part.strip() for part in text.split(",")] if text else []
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(name, value, "must be a list of field names")
        if not value and not allow_empty:
            raise self.fail(name, value, "must name at least one field")
        return list(value)

    def mapping(self, name: str) -> dict[str, Any] | None:
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise self.fail(name, value, "is not a JSON object") from None
        if not isinstance(value, dict):
            raise self.fail(name, value, "must be a dict")
        return dict(value)


@dataclass(frozen=True)
class SimhashSettings:
    """The ``SIMHASH_*`` settings of one crawl, parsed and checked, ``{spider}`` filled in."""

    enabled: bool
    fields: list[str]
    html_fields: list[str] | None
    max_chars: int
    id_field: str | None
    url_field: str
    host_field: str | None
    retention_field: str | None
    min_words: int
    shingle_width: int
    weighting: str
    jaccard_threshold: float
    target_recall: float
    layout: dict[str, Any] | None
    action: str
    annotation_field: str
    drop_log_level: str
    drop_debug: bool
    max_group_warn: int
    seen_action: str
    index_url: str
    key_prefix: str  # the Redis keys' prefix, its braces a Redis Cluster hash tag: "simhash:{docs}"
    retention: dict[str, float | None] | None
    on_index_error: str
    index_retries: int
    index_retry_delay: float
    expire_interval: float
    session_lease: float
    allow_eviction: bool
    reset: bool
    merge_log: str | None
    review_log: str | None
    review_margin: float
    review_rate: float
    boilerplate: bool
    boilerplate_sample_pages: int
    boilerplate_max_held: int
    boilerplate_warmup_timeout: float


def _retention(reader: _Reader) -> dict[str, float | None] | None:
    classes = reader.mapping("SIMHASH_RETENTION")
    if classes is None:
        return None
    for name, ttl in classes.items():
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < math.inf):
            raise reader.fail("SIMHASH_RETENTION", classes, f"class {name!r}: a TTL is seconds > 0 or None")
    if "default" not in classes:  # every item would be refused as of an unknown class
        raise reader.fail("SIMHASH_RETENTION", classes, "needs a 'default' class, the class of an item without one")
    return classes


def read(settings: BaseSettings, spider: str) -> SimhashSettings:
    """Parse every ``SIMHASH_*`` setting for spider ``spider``; a bad value raises :class:`SettingsError`."""
    reader = _Reader(settings)

    def fill(value: str) -> str:
        return value.replace("{spider}", spider)

    def log_uri(name: str, suffix: str) -> str | None:
        value = reader.raw(name)
        if value is None:
            return data_file(f"{spider}-{suffix}.jsonl")
        if str(value).strip().lower() in OFF:  # False reads "false"
            return None
        return fill(str(value))

    # "{spider}" becomes the name everywhere; in the key prefix its braces remain, as a Redis Cluster
    # hash tag that keeps every key of the index in one slot ("simhash:{docs}").
    prefix = reader.text("SIMHASH_KEY_PREFIX").replace("{spider}", "{" + spider + "}")
    index_url = reader.raw("SIMHASH_INDEX_URL") or f"sqlite:///{data_file('{spider}.sqlite3')}"
    html_fields = reader.raw("SIMHASH_HTML_FIELDS")
    return SimhashSettings(
        enabled=reader.flag("SIMHASH_ENABLED"),
        fields=reader.names("SIMHASH_FIELDS"),
        html_fields=None if html_fields is None else reader.names("SIMHASH_HTML_FIELDS", allow_empty=True),
        max_chars=reader.number("SIMHASH_MAX_CHARS", int, 1),
        id_field=reader.text("SIMHASH_ID_FIELD", optional=True),
        url_field=reader.text("SIMHASH_URL_FIELD"),
        host_field=reader.text("SIMHASH_HOST_FIELD", optional=True),
        retention_field=reader.text("SIMHASH_RETENTION_FIELD", optional=True),
        min_words=reader.number("SIMHASH_MIN_WORDS", int, 0),
        shingle_width=reader.number("SIMHASH_SHINGLE_WIDTH", int, 1, 64),
        weighting=reader.choice("SIMHASH_WEIGHTING", WEIGHTINGS),
        jaccard_threshold=reader.number("SIMHASH_JACCARD_THRESHOLD", float, 0.0, 1.0),
        target_recall=reader.number("SIMHASH_TARGET_RECALL", float, 0.0, 1.0),
        layout=reader.mapping("SIMHASH_LAYOUT"),
        action=reader.choice("SIMHASH_ACTION", ACTIONS),
        annotation_field=reader.text("SIMHASH_ANNOTATION_FIELD"),
        drop_log_level=reader.choice("SIMHASH_DROP_LOG_LEVEL", LOG_LEVELS),
        drop_debug=reader.flag("SIMHASH_DROP_DEBUG"),
        max_group_warn=reader.number("SIMHASH_MAX_GROUP_WARN", int, 1),
        seen_action=reader.choice("SIMHASH_SEEN_ACTION", SEEN_ACTIONS),
        index_url=fill(str(index_url)),
        key_prefix=prefix,
        retention=_retention(reader),
        on_index_error=reader.choice("SIMHASH_ON_INDEX_ERROR", ON_INDEX_ERROR),
        index_retries=reader.number("SIMHASH_INDEX_RETRIES", int, 0),
        index_retry_delay=reader.number("SIMHASH_INDEX_RETRY_DELAY", float, 0.0, MAX_RETRY_DELAY),
        expire_interval=reader.number("SIMHASH_EXPIRE_INTERVAL", float, 0.0),
        session_lease=reader.number("SIMHASH_SESSION_LEASE", float, 0.5, MAX_SESSION_LEASE),
        allow_eviction=reader.flag("SIMHASH_ALLOW_EVICTION"),
        reset=reader.flag("SIMHASH_RESET"),
        merge_log=log_uri("SIMHASH_MERGE_LOG", "merges"),
        review_log=log_uri("SIMHASH_REVIEW_LOG", "review"),
        review_margin=reader.number("SIMHASH_REVIEW_MARGIN", float, 0.0, 1.0),
        review_rate=reader.number("SIMHASH_REVIEW_RATE", float, 0.0, 1.0),
        boilerplate=reader.flag("SIMHASH_BOILERPLATE"),
        boilerplate_sample_pages=reader.number("SIMHASH_BOILERPLATE_SAMPLE_PAGES", int, 2, 64),
        boilerplate_max_held=reader.number("SIMHASH_BOILERPLATE_MAX_HELD", int, 0),
        boilerplate_warmup_timeout=reader.number("SIMHASH_BOILERPLATE_WARMUP_TIMEOUT", float, 0.0),
    )


def unknown_settings(settings: BaseSettings) -> dict[str, str | None]:
    """``SIMHASH_*`` names set that are no setting (a typo, or a setting of an earlier version), each
    with the setting it is closest to, if any: their values would be ignored without a word."""
    names = sorted(name for name in settings if name.startswith("SIMHASH_") and name not in DEFAULTS)
    return {name: next(iter(difflib.get_close_matches(name, DEFAULTS, n=1)), None) for name in names}


def stream_key(config: SimhashSettings, kind: str) -> str:
    """The default Redis Stream of the merge or review log: beside the index's keys, in its slot."""
    return f"{config.key_prefix}:{kind}"
