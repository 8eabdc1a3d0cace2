"""Batched stats increments for per-request code paths."""

from __future__ import annotations

from typing import Any

__all__ = ["StatsBuffer"]


class StatsBuffer:
    """Counts increments in a dict and adds them to Scrapy's stats collector
    every ``every`` increments and on :meth:`flush`.

    Scrapy 2.19's ``StatsCollector.inc_value`` costs about 2 µs (a deprecation
    shim runs on every attribute access): on the per-request path of the
    dupefilter that was a fifth of its time. Totals are exact once flushed;
    mid-crawl they lag by fewer than ``every`` increments.
    """

    def __init__(self, stats: Any, every: int = 256) -> None:
        self._stats = stats
        self._every = every
        self._pending: dict[str, int] = {}
        self._count = 0

    def inc(self, key: str, count: int = 1) -> None:
        pending = self._pending
        pending[key] = pending.get(key, 0) + count
        self._count += 1
        if self._count >= self._every:
            self.flush()

    def flush(self) -> None:
        pending, self._pending, self._count = self._pending, {}, 0
        for key, count in pending.items():
            self._stats.inc_value(key, count)
