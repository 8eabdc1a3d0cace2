"""Batched stats increments for per-request code paths."""

from __future__ import annotations

from typing import Any

from scrapy.utils.asyncio import create_looping_call

__all__ = ["StatsBuffer"]


class StatsBuffer:
    """Counts increments in a dict and adds them to Scrapy's stats collector
    every ``every`` increments, every ``interval`` seconds while started, and
    on :meth:`flush`.

    Scrapy 2.19's ``StatsCollector.inc_value`` costs about 1.6 µs: on the
    per-request path of the dupefilter that was a fifth of its time. Monitoring
    (LogStats, Spidermon, Prometheus exporters) reads stats mid-crawl, so a
    stat lags by at most ``interval`` seconds of crawl time, or ``every``
    increments when the reactor is not running.
    """

    def __init__(self, stats: Any, every: int = 256, interval: float = 1.0) -> None:
        self._stats = stats
        self._every = every
        self._interval = interval
        self._pending: dict[str, int] = {}
        self._count = 0
        self._timer: Any = None

    def inc(self, key: str, count: int = 1) -> None:
        pending = self._pending
        pending[key] = pending.get(key, 0) + count
        self._count += 1
        if self._count >= self._every:
            self.flush()

    def flush(self) -> None:
        if not self._count:
            return
        pending, self._pending, self._count = self._pending, {}, 0
        for key, count in pending.items():
            self._stats.inc_value(key, count)

    def start(self) -> None:
        """Flush every ``interval`` seconds from now on (in a running crawl)."""
        if self._timer is None:
            self._timer = create_looping_call(self.flush)
            self._timer.start(self._interval, now=False)

    def stop(self) -> None:
        """Stop the timer and flush what is pending."""
        timer, self._timer = self._timer, None
        if timer is not None and timer.running:
            timer.stop()
        self.flush()
