"""Every ``SIMHASH_*`` setting with its default, read once into plain validated values.

The pipeline, the boilerplate learner and the commands all read settings through :func:`read`,
so a default lives here and nowhere else (README "Settings" documents each one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.utils.project import data_path

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

DEFAULTS: dict[str, Any] = {
    "SIMHASH_ENABLED": True,
    # Content
    "SIMHASH_FIELDS": ["title", "description", "body_text"],
    "SIMHASH_HTML_FIELDS": None,  # None: a value is HTML when it contains markup
    "SIMHASH_MAX_CHARS": 1_000_000,
    "SIMHASH_ID_FIELD": None,  # None: the URL field
    "SIMHASH_URL_FIELD": "url",
    "SIMHASH_HOST_FIELD": None,  # None: the host of the URL field
    "SIMHASH_RETENTION_FIELD": None,  # None: every record is in the "default" retention class
    "SIMHASH_MIN_WORDS": 50,
    # Fingerprint and decision rule
    "SIMHASH_SHINGLE_WIDTH": 4,
    "SIMHASH_WEIGHTING": "frequency",
    "SIMHASH_MAX_DISTANCE": "auto",
    "SIMHASH_LAYOUT": "blocks",  # with an integer SIMHASH_MAX_DISTANCE: "blocks" or "sampled"
    "SIMHASH_BANDS": None,  # None: the fewest pigeonhole blocks that guarantee SIMHASH_MAX_DISTANCE
    "SIMHASH_MULTIPROBE": False,
    "SIMHASH_LAYOUT_TABLES": None,  # "sampled" layouts only
    "SIMHASH_LAYOUT_BITS": None,  # "sampled" layouts only
    "SIMHASH_JACCARD_THRESHOLD": 0.82,
    "SIMHASH_TARGET_RECALL": 0.95,  # what "auto" calibrates SIMHASH_MAX_DISTANCE for
    "SIMHASH_ACTION": "drop",
    "SIMHASH_ANNOTATION_FIELD": "duplicate_of",
    "SIMHASH_MAX_GROUP_WARN": 1000,
    # Index
    "SIMHASH_INDEX_URL": None,  # None: sqlite:///.scrapy/simhash/{spider}.sqlite3 in the project data dir
    "SIMHASH_KEY_PREFIX": "simhash:{spider}",
    "SIMHASH_RETENTION": None,  # None: {"default": None}, keep records for good; else class -> TTL seconds
    "SIMHASH_ON_INDEX_ERROR": "pass",
    "SIMHASH_INDEX_RETRIES": 2,
    "SIMHASH_INDEX_RETRY_DELAY": 0.1,
    "SIMHASH_EXPIRE_INTERVAL": 3600.0,
    # Audit
    "SIMHASH_MERGE_LOG": None,  # None: .scrapy/simhash/{spider}-merges.jsonl; "": off
    "SIMHASH_REVIEW_LOG": None,  # None: .scrapy/simhash/{spider}-review.jsonl; "": off
    "SIMHASH_REVIEW_MARGIN": 0.03,
    "SIMHASH_REVIEW_RATE": 0.1,
    # Boilerplate learner
    "SIMHASH_BOILERPLATE_MIN_SHARE": 0.05,
    "SIMHASH_BOILERPLATE_MIN_PAGES": 30,
    "SIMHASH_BOILERPLATE_MAX_HELD": 500,
    "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT": 10.0,
}

ACTIONS = ("drop", "annotate")
ON_INDEX_ERROR = ("pass", "fail")
# Backoff between index retries doubles from SIMHASH_INDEX_RETRY_DELAY and never exceeds this.
MAX_RETRY_DELAY = 2.0


def data_file(name: str) -> str:
    """Absolute path of ``name`` under the project's ``.scrapy/simhash/`` (like HTTPCACHE_DIR).

    Not created here: whoever writes the file creates its directory, so reading settings has no side effect.
    """
    return os.path.abspath(os.path.join(data_path("simhash"), name))


def _setting(settings: BaseSettings, name: str) -> Any:
    return settings.get(name, DEFAULTS[name])


def _choice(settings: BaseSettings, name: str, choices: tuple[str, ...]) -> str:
    value = str(_setting(settings, name)).lower()
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _number(settings: BaseSettings, name: str, kind: type, low: float, high: float = float("inf")) -> Any:
    raw = _setting(settings, name)
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _optional_str(settings: BaseSettings, name: str) -> str | None:
    value = _setting(settings, name)
    return None if value is None else str(value)


def _optional_int(settings: BaseSettings, name: str, low: int, high: int) -> int | None:
    return None if _setting(settings, name) is None else _number(settings, name, int, low, high)


def _field_list(settings: BaseSettings, name: str) -> list[str]:
    return settings.getlist(name, DEFAULTS[name])


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
    max_distance: int | None  # None: calibrated ("auto")
    layout: str
    bands: int | None
    multiprobe: bool
    layout_tables: int | None
    layout_bits: int | None
    jaccard_threshold: float
    target_recall: float
    action: str
    annotation_field: str
    max_group_warn: int
    index_url: str
    key_prefix: str  # "{spider}" left in: the index turns it into a Redis Cluster hash tag
    retention: dict[str, float | None] | None
    on_index_error: str
    index_retries: int
    index_retry_delay: float
    expire_interval: float
    merge_log: str | None
    review_log: str | None
    review_margin: float
    review_rate: float
    boilerplate_min_share: float
    boilerplate_min_pages: int
    boilerplate_max_held: int
    boilerplate_warmup_timeout: float


def read(settings: BaseSettings, spider_name: str) -> SimhashSettings:
    """Parse every ``SIMHASH_*`` setting; a bad value raises ``ValueError`` naming the setting."""

    def log_uri(name: str, suffix: str) -> str | None:
        value = _setting(settings, name)
        if value is None:
            return data_file(f"{spider_name}-{suffix}.jsonl")
        return str(value).replace("{spider}", spider_name) or None

    max_distance = _setting(settings, "SIMHASH_MAX_DISTANCE")
    html_fields = _setting(settings, "SIMHASH_HTML_FIELDS")
    # One SQLite file per spider; open_index() fills in "{spider}", as it does in SIMHASH_KEY_PREFIX.
    index_url = _setting(settings, "SIMHASH_INDEX_URL") or f"sqlite:///{data_file('{spider}.sqlite3')}"
    return SimhashSettings(
        enabled=settings.getbool("SIMHASH_ENABLED", DEFAULTS["SIMHASH_ENABLED"]),
        fields=_field_list(settings, "SIMHASH_FIELDS"),
        html_fields=None if html_fields is None else _field_list(settings, "SIMHASH_HTML_FIELDS"),
        max_chars=_number(settings, "SIMHASH_MAX_CHARS", int, 1),
        id_field=_optional_str(settings, "SIMHASH_ID_FIELD"),
        url_field=str(_setting(settings, "SIMHASH_URL_FIELD")),
        host_field=_optional_str(settings, "SIMHASH_HOST_FIELD"),
        retention_field=_optional_str(settings, "SIMHASH_RETENTION_FIELD"),
        min_words=_number(settings, "SIMHASH_MIN_WORDS", int, 0),
        shingle_width=_number(settings, "SIMHASH_SHINGLE_WIDTH", int, 1),
        weighting=_choice(settings, "SIMHASH_WEIGHTING", ("frequency", "presence")),
        max_distance=None
        if str(max_distance).lower() == "auto"
        else _number(settings, "SIMHASH_MAX_DISTANCE", int, 0, 63),
        layout=_choice(settings, "SIMHASH_LAYOUT", ("blocks", "sampled")),
        bands=_optional_int(settings, "SIMHASH_BANDS", 1, 64),
        multiprobe=settings.getbool("SIMHASH_MULTIPROBE", DEFAULTS["SIMHASH_MULTIPROBE"]),
        layout_tables=_optional_int(settings, "SIMHASH_LAYOUT_TABLES", 1, 1024),
        layout_bits=_optional_int(settings, "SIMHASH_LAYOUT_BITS", 1, 64),
        jaccard_threshold=_number(settings, "SIMHASH_JACCARD_THRESHOLD", float, 0.0, 1.0),
        target_recall=_number(settings, "SIMHASH_TARGET_RECALL", float, 0.0, 1.0),
        action=_choice(settings, "SIMHASH_ACTION", ACTIONS),
        annotation_field=str(_setting(settings, "SIMHASH_ANNOTATION_FIELD")),
        max_group_warn=_number(settings, "SIMHASH_MAX_GROUP_WARN", int, 1),
        index_url=str(index_url),
        key_prefix=str(_setting(settings, "SIMHASH_KEY_PREFIX")),
        retention=settings.getdict("SIMHASH_RETENTION") or None,
        on_index_error=_choice(settings, "SIMHASH_ON_INDEX_ERROR", ON_INDEX_ERROR),
        index_retries=_number(settings, "SIMHASH_INDEX_RETRIES", int, 0),
        index_retry_delay=_number(settings, "SIMHASH_INDEX_RETRY_DELAY", float, 0.0),
        expire_interval=_number(settings, "SIMHASH_EXPIRE_INTERVAL", float, 0.0),
        merge_log=log_uri("SIMHASH_MERGE_LOG", "merges"),
        review_log=log_uri("SIMHASH_REVIEW_LOG", "review"),
        review_margin=_number(settings, "SIMHASH_REVIEW_MARGIN", float, 0.0, 1.0),
        review_rate=_number(settings, "SIMHASH_REVIEW_RATE", float, 0.0, 1.0),
        boilerplate_min_share=_number(settings, "SIMHASH_BOILERPLATE_MIN_SHARE", float, 0.0, 1.0),
        boilerplate_min_pages=_number(settings, "SIMHASH_BOILERPLATE_MIN_PAGES", int, 2),
        boilerplate_max_held=_number(settings, "SIMHASH_BOILERPLATE_MAX_HELD", int, 0),
        boilerplate_warmup_timeout=_number(settings, "SIMHASH_BOILERPLATE_WARMUP_TIMEOUT", float, 0.0),
    )
