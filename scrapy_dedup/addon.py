"""DedupAddon: every stage of scrapy-dedup in one line of ``ADDONS``."""

from __future__ import annotations

from typing import Any

from scrapy_dedup.dupefilter import CanonicalDupeFilter
from scrapy_dedup.durable import DurableFileFeedStorage
from scrapy_dedup.frontier import DedupFrontierMiddleware
from scrapy_dedup.learning import LearnedRulesMiddleware
from scrapy_dedup.pipeline import ContentDedupPipeline
from scrapy_dedup.relcanonical import RelCanonicalMiddleware

__all__ = ["DedupAddon"]


class DedupAddon:
    """``ADDONS = {"scrapy_dedup.DedupAddon": 0}`` turns on the canonical-URL
    dupefilter, the rel=canonical middleware (575), the learned-rules
    middleware (60; it only acts with ``DEDUP_LEARN``), the content pipeline
    (350) and the frontier spider middleware (10; it only acts with an SQLite
    store), each unless the project already lists it. A ``DUPEFILTER_CLASS``
    the project set explicitly wins. Local feed files (``-o``) are written
    by :class:`~scrapy_dedup.durable.DurableFileFeedStorage`, unless the
    project names its own ``FEED_STORAGES`` for them.
    """

    def update_settings(self, settings: Any) -> None:
        settings.set("DUPEFILTER_CLASS", CanonicalDupeFilter, priority="addon")
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", RelCanonicalMiddleware, 575
        )
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", LearnedRulesMiddleware, 60
        )
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", ContentDedupPipeline, 350)
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", DedupFrontierMiddleware, 10
        )
        # Local feed files (-o) written at the frontier's checkpoints only,
        # unless the project has storages of its own.
        storages = dict(settings.getdict("FEED_STORAGES"))
        for scheme in ("", "file"):
            storages.setdefault(scheme, DurableFileFeedStorage)
        settings.set("FEED_STORAGES", storages, priority="addon")
