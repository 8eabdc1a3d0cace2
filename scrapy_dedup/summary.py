"""What the log tells a user about dedup: one INFO line at start, a progress
line with Scrapy's periodic stats (``LOGSTATS_INTERVAL``), and one summary
at the end. Read from the crawl's stats only."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.asyncio import call_later, create_looping_call

from scrapy_dedup import __version__
from scrapy_dedup.report import (
    _SAVED_BY,
    ITEM_KINDS,
    MIN_RESPONSES_FOR_BYTES,
    ReportCollector,
    _size,
    build_report,
    savings,
    write_report,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["CrawlSummary", "summary_line"]

logger = logging.getLogger(__name__)


def _count(n: float) -> str:
    return f"{n:,.0f}"


def summary_line(stats: dict[str, Any]) -> str | None:
    """The summary of a finished crawl's stats, or ``None`` when dedup did nothing."""

    def get(name: str) -> int:
        return int(stats.get(name, 0) or 0)

    parts = []
    if get("dedup/url/filtered") or get("dedup/url/seen"):
        parts.append(_fetches_saved(stats))
    dropped = [(get(f"dedup/items/{kind}"), kind) for kind in ITEM_KINDS]
    if any(n for n, _ in dropped) or get("dedup/items/unique"):
        parts.append(_items_dropped(dropped, get("dedup/items/unique")))
    if get("dedup/canonical/applied"):
        filed = get("dedup/canonical/applied")
        parts.append(f"{_count(filed)} page{'s' if filed != 1 else ''} filed under rel=canonical")
    if "dedup/learn/rules" in stats:
        rules = get("dedup/learn/rules")
        parts.append(f"{_count(rules)} learned URL rule{'s' if rules != 1 else ''}")
    if get("dedup/store/errors"):
        errors = get("dedup/store/errors")
        parts.append(f"{_count(errors)} store error{'s' if errors != 1 else ''}")
    return "; ".join(parts) if parts else None


def _fetches_saved(stats: dict[str, Any]) -> str:
    """The fetches plain Scrapy would have made, by source, and their bytes."""
    saved = savings(stats)
    labels = dict(_SAVED_BY)
    details = [f"{_count(n)} by {labels[key]}" for key, n in saved["by"].items() if n > 0]
    if saved["extra"]:
        details.append(f"less {_count(saved['extra'])} fetched that Scrapy's filter drops")
    fetches = saved["fetches"]
    plural = "es" if fetches != 1 else ""
    line = f"{_count(fetches)} fetch{plural} saved beyond Scrapy's own filter"
    if details:
        line += f" ({', '.join(details)})"
    if saved["bytes"]:
        line += f", about {_size(saved['bytes'])} not downloaded"
    elif saved["fetches"] and saved["bytes"] is None:
        line += (
            f", bytes not estimated (fewer than {MIN_RESPONSES_FOR_BYTES} responses to average)"
        )
    return line


def _items_dropped(dropped: list[tuple[int, str]], kept: int) -> str:
    """Every item dropped (as Scrapy's item_dropped_count, when dedup alone drops), by kind."""
    kinds = ", ".join(f"{_count(n)} {kind}" for n, kind in dropped if n)
    total = sum(n for n, _ in dropped)
    return (
        f"{_count(total)} duplicate item{'s' if total != 1 else ''}"
        + (f" ({kinds})" if kinds else "")
        + f", {_count(kept)} kept"
    )


class CrawlSummary:
    """Logs the start line, the progress lines and the summary of one crawl
    (made by :class:`~scrapy_dedup.state.CrawlState`; components say they are
    on with :meth:`uses`)."""

    def __init__(self, crawler: Crawler, describe_store: Any, state: Any = None) -> None:
        self.crawler = crawler
        self.components: list[str] = []
        self._describe_store = describe_store
        self._state = state
        #: What ``DEDUP_REPORT`` needs beyond the stats (``None`` without it);
        #: components add to it as they filter requests and drop items.
        self.report: ReportCollector | None = None
        self._report_path = getattr(getattr(state, "config", None), "report", None)
        if self._report_path:
            self.report = ReportCollector()
        self._interval = crawler.settings.getfloat("LOGSTATS_INTERVAL")
        self._progress: Any = None
        self._last = (0, 0)
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)
        crawler.signals.connect(self._stopped, signal=signals.engine_stopped)

    def uses(self, component: str) -> None:
        if component not in self.components:
            self.components.append(component)

    def _opened(self) -> None:
        if not self.components:
            return
        # On the next turn: after every spider_opened handler (learned rules
        # read from the store at spider_opened).
        call_later(0, self._log_start)
        if self._interval > 0:
            self._progress = create_looping_call(self._log_progress)
            self._progress.start(self._interval, now=False)

    def _log_start(self) -> None:
        stats = self.crawler.stats
        learned = stats.get_value("dedup/learn/evidence/replayed")
        logger.info(
            "scrapy-dedup on: %s; store: %s%s",
            ", ".join(self.components),
            self._describe_store(),
            f"; learned rules from {learned:,} pages of earlier runs and other workers"
            if learned
            else "",
        )

    def _log_progress(self) -> None:
        stats = self.crawler.stats
        filtered = int(stats.get_value("dedup/url/filtered", 0))
        dropped = sum(int(stats.get_value(f"dedup/items/{kind}", 0)) for kind in ITEM_KINDS)
        minutes = self._interval / 60
        last_filtered, last_dropped = self._last
        self._last = (filtered, dropped)
        logger.info(
            "scrapy-dedup: filtered %s URL%s (at %s/min), dropped %s duplicate item%s (at %s/min)",
            _count(filtered),
            "" if filtered == 1 else "s",
            _count((filtered - last_filtered) / minutes),
            _count(dropped),
            "" if dropped == 1 else "s",
            _count((dropped - last_dropped) / minutes),
        )

    def _closed(self) -> None:
        if self._progress is not None and self._progress.running:
            self._progress.stop()

    def _stopped(self) -> None:
        # After every spider_closed handler (the components' last stats are in).
        if not self.components:
            return
        stats = self.crawler.stats.get_stats()
        line = summary_line(stats)
        if line:
            logger.info("scrapy-dedup summary: %s", line)
        if self.report is not None and self._report_path:
            self._write_report(stats)

    def _write_report(self, stats: dict[str, Any]) -> None:
        assert self.report is not None and self._report_path
        spider = getattr(self.crawler.spider, "name", None) or "crawl"
        now = datetime.now(timezone.utc)
        path = self._report_path
        learned = getattr(self._state, "learned", None)
        try:
            if "%" in path:  # as FEEDS URIs: %(name)s, %(time)s (checked at start)
                path = path % {"name": spider, "time": now.strftime("%Y-%m-%dT%H-%M-%S")}
            report = build_report(
                self.report,
                stats,
                spider=spider,
                version=__version__,
                components=self.components,
                store=self._describe_store(),
                rules=learned.learner.export() if learned is not None else None,
                finished=now.isoformat(timespec="seconds"),
            )
            json_path, html_path = write_report(path, report)
        except (OSError, TypeError, ValueError, KeyError) as exc:
            # The crawl is over and its data is safe: say so, and carry on.
            logger.error("Cannot write the dedup report to %s: %s", path, exc)
            return
        logger.info("scrapy-dedup report: %s and %s", html_path, json_path)
