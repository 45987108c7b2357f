"""Spidermon monitors over the pipeline's ``simhash/*`` stats: unchecked items, runaway groups, errors.

Optional (``pip install 'scrapy-simhash[spidermon]'``); docs/monitoring.md has the settings to enable them.
"""

from __future__ import annotations

from typing import Any

try:
    from spidermon import MonitorSuite, monitors
    from spidermon.contrib.scrapy.monitors.base import BaseScrapyMonitor
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        f"scrapy_simhash.monitors needs Spidermon: pip install 'scrapy-simhash[spidermon]' ({exc})"
    ) from exc

from scrapy_simhash.settings import DEFAULTS

__all__ = [
    "IndexErrorsMonitor",
    "LargestGroupMonitor",
    "MergeLogErrorsMonitor",
    "SimhashMonitorSuite",
    "StoppedCrawlMonitor",
    "UncheckedItemsMonitor",
]

#: The finish reasons with which the pipeline closes a crawl it cannot serve (pipelines.py).
STOP_REASONS = ("simhash_index_error", "simhash_settings_error")

# The monitors' limits, Spidermon-style settings (docs/monitoring.md); the group limit is the
# pipeline's own SIMHASH_MAX_GROUP_WARN.
MONITOR_DEFAULTS: dict[str, Any] = {
    "SPIDERMON_SIMHASH_MAX_UNCHECKED_SHARE": 0.01,
    "SPIDERMON_SIMHASH_MAX_INDEX_ERRORS": 0,
    "SPIDERMON_SIMHASH_MAX_MERGE_LOG_ERRORS": 0,
}


class _SimhashMonitor(BaseScrapyMonitor):
    def stat(self, name: str) -> int:
        """A ``simhash/`` stat of the crawl, 0 when it was never counted."""
        return int(self.stats.get(f"simhash/{name}", 0))

    def limit(self, name: str, kind: type) -> Any:
        default = DEFAULTS[name] if name in DEFAULTS else MONITOR_DEFAULTS[name]
        if kind is float:
            return self.crawler.settings.getfloat(name, default)
        return self.crawler.settings.getint(name, default)


@monitors.name("SimHash unchecked items")
class UncheckedItemsMonitor(_SimhashMonitor):
    """Items the pipeline passed on without judging them: a share of duplicates may have gone through."""

    @monitors.name("Unchecked share within SPIDERMON_SIMHASH_MAX_UNCHECKED_SHARE")
    def test_unchecked_share(self) -> None:
        seen, unchecked = self.stat("items_seen"), self.stat("unchecked")
        limit = self.limit("SPIDERMON_SIMHASH_MAX_UNCHECKED_SHARE", float)
        share = unchecked / seen if seen else 0.0
        self.assertLessEqual(
            share,
            limit,
            msg=f"{unchecked:,} of {seen:,} items ({share:.1%}) were passed on unchecked, above "
            f"SPIDERMON_SIMHASH_MAX_UNCHECKED_SHARE = {limit:g}: the log's 'Passing an item on unchecked' "
            "warnings say why (index unreachable, unreadable fields, merge log refused)",
        )


@monitors.name("SimHash largest group")
class LargestGroupMonitor(_SimhashMonitor):
    """One canonical that collects a great many duplicates is usually an empty or broken content field."""

    @monitors.name("Largest group within SIMHASH_MAX_GROUP_WARN")
    def test_largest_group(self) -> None:
        largest = self.stat("largest_group")
        limit = self.limit("SIMHASH_MAX_GROUP_WARN", int)
        self.assertLessEqual(
            largest,
            limit,
            msg=f"a group holds {largest:,} pages, more than SIMHASH_MAX_GROUP_WARN = {limit:,}: "
            "check SIMHASH_FIELDS (an empty or failed extraction makes unrelated pages alike); for a page "
            "republished or edited many times, raise the limit",
        )


@monitors.name("SimHash index errors")
class IndexErrorsMonitor(_SimhashMonitor):
    """Failed index calls; every attempt counts, retried ones included."""

    @monitors.name("Index errors within SPIDERMON_SIMHASH_MAX_INDEX_ERRORS")
    def test_index_errors(self) -> None:
        errors = self.stat("index_errors")
        limit = self.limit("SPIDERMON_SIMHASH_MAX_INDEX_ERRORS", int)
        self.assertLessEqual(
            errors,
            limit,
            msg=f"{errors:,} index calls failed, more than SPIDERMON_SIMHASH_MAX_INDEX_ERRORS = {limit:,} "
            f"({self.stat('unchecked'):,} items passed on unchecked): is SIMHASH_INDEX_URL reachable?",
        )


@monitors.name("SimHash merge-log errors")
class MergeLogErrorsMonitor(_SimhashMonitor):
    """Merge-log records that could not be written: an audit trail with holes."""

    @monitors.name("Merge-log errors within SPIDERMON_SIMHASH_MAX_MERGE_LOG_ERRORS")
    def test_merge_log_errors(self) -> None:
        errors = self.stat("merge_log_errors")
        limit = self.limit("SPIDERMON_SIMHASH_MAX_MERGE_LOG_ERRORS", int)
        self.assertLessEqual(
            errors,
            limit,
            msg=f"{errors:,} merge-log records could not be written, more than "
            f"SPIDERMON_SIMHASH_MAX_MERGE_LOG_ERRORS = {limit:,}: is SIMHASH_MERGE_LOG writable? "
            "(a duplicate whose merge was not logged was kept, not dropped)",
        )


@monitors.name("SimHash stopped the crawl")
class StoppedCrawlMonitor(_SimhashMonitor):
    """The pipeline closed the spider: a setting it cannot use, or a permanent fault of the index or a log."""

    @monitors.name("The crawl was not stopped by the SimHash pipeline")
    def test_not_stopped(self) -> None:
        reason = self.stats.get("finish_reason")
        self.assertNotIn(
            reason,
            STOP_REASONS,
            msg=f"the SimHash pipeline closed the spider ({reason}): its ERROR line names the setting, index or "
            "log, and what to do (a corrupt index: restore it or scrapy simhash-reset; a newer schema: upgrade)",
        )


class SimhashMonitorSuite(MonitorSuite):
    """Every scrapy-simhash monitor; subclass it to add Spidermon actions (Slack, e-mail, ...)."""

    monitors = [
        UncheckedItemsMonitor, LargestGroupMonitor, IndexErrorsMonitor, MergeLogErrorsMonitor, StoppedCrawlMonitor,
    ]
