"""DedupAddon: every stage of scrapy-dedup in one line of ``ADDONS``."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.utils.misc import load_object

from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.state import refuse
from scrapy_dedup.stores import redact

__all__ = ["DedupAddon"]

logger = logging.getLogger(__name__)

# By import path, so that Scrapy's "Enabled ..." and "Overridden settings" lines
# name each component rather than print a <class ...> object.
_DUPEFILTER = "scrapy_dedup.CanonicalDupeFilter"
_COMPONENTS = (
    ("DOWNLOADER_MIDDLEWARES", "scrapy_dedup.RelCanonicalMiddleware", 575),
    ("DOWNLOADER_MIDDLEWARES", "scrapy_dedup.LearnedRulesMiddleware", 60),
    ("ITEM_PIPELINES", "scrapy_dedup.ContentDedupPipeline", 350),
    ("SPIDER_MIDDLEWARES", "scrapy_dedup.DedupFrontierMiddleware", 10),
)
_FEED_STORAGE = "scrapy_dedup.durable.DurableFileFeedStorage"
_SCHEDULER = "scrapy_dedup.scheduler.DedupScheduler"
# Settings that may hold a password: shown redacted in Scrapy's log.
_SECRET_SETTINGS = ("DEDUP_STORE", "REDIS_URL")


class _Redacted(str):
    """A setting's text whose ``repr`` hides the password it holds, for
    Scrapy's "Overridden settings" log line (it prints each value's repr)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(redact(str(self)))


class DedupAddon:
    """``ADDONS = {"scrapy_dedup.DedupAddon": 0}`` turns on the canonical-URL
    dupefilter, the rel=canonical middleware (575), the learned-rules
    middleware (60; it only acts with ``DEDUP_LEARN``), the content pipeline
    (350) and the frontier spider middleware (10; it only acts with an SQLite
    store), each unless the project already lists it, and Scrapy's own
    ``SCHEDULER`` becomes :class:`~scrapy_dedup.scheduler.DedupScheduler` (the
    same, telling the dupefilter of ``dont_filter`` requests without a signal
    receiver; any other scheduler is left as it is). A ``DUPEFILTER_CLASS``
    the project set explicitly wins (said at INFO). Local feed files (``-o``)
    are written by :class:`~scrapy_dedup.durable.DurableFileFeedStorage`,
    unless the project names its own ``FEED_STORAGES`` for them. With
    ``DEDUP_ENABLED = False`` it adds nothing.
    """

    def __repr__(self) -> str:  # Scrapy's "Enabled addons" line
        return "scrapy_dedup.DedupAddon"

    def update_settings(self, settings: Any) -> None:
        for name in _SECRET_SETTINGS:
            value = settings.get(name)
            if isinstance(value, str) and redact(value) != value:
                settings.set(name, _Redacted(value), priority=settings.getpriority(name))
        try:
            enabled = dedup_enabled(settings)
        except ValueError as exc:
            refuse(exc, "Cannot start scrapy-dedup")
            raise
        if not enabled:
            logger.info("DEDUP_ENABLED is False: scrapy-dedup adds nothing to this crawl")
            return
        settings.set("DUPEFILTER_CLASS", _DUPEFILTER, priority="addon")
        own = settings.get("DUPEFILTER_CLASS")
        if not _is_ours(own):
            logger.info(
                "DUPEFILTER_CLASS=%s is set by the project: scrapy-dedup leaves out its URL "
                "stage (canonical URLs, the store's kept pages); remove the setting to use it",
                own if isinstance(own, str) else getattr(own, "__qualname__", own),
            )
        for setting, path, order in _COMPONENTS:
            _setdefault_component(settings, setting, path, order)
        if _is_scrapys_scheduler(settings.get("SCHEDULER")):
            # The same scheduler, which also tells the dupefilter of its
            # dont_filter requests (no signal receiver for every request).
            settings.set("SCHEDULER", _SCHEDULER, priority=settings.getpriority("SCHEDULER") or 0)
        # Local feed files (-o) written at the frontier's checkpoints only,
        # unless the project has storages of its own.
        storages = dict(settings.getdict("FEED_STORAGES"))
        for scheme in ("", "file"):
            storages.setdefault(scheme, _FEED_STORAGE)
        settings.set("FEED_STORAGES", storages, priority="addon")


def _setdefault_component(settings: Any, name: str, path: str, order: int) -> None:
    """Add ``path`` to component dict ``name`` unless the project lists its
    class already, under any path (as Scrapy's
    ``setdefault_in_component_priority_dict``, which takes a class)."""
    cls = load_object(path)
    components = settings.getdict(name)
    for listed in tuple(components):
        try:
            if load_object(listed) is cls:
                return
        except (ImportError, NameError, ValueError):
            continue  # Scrapy reports it when it builds the components
    components[path] = order
    settings.set(name, components, settings.getpriority(name) or 0)


def _is_scrapys_scheduler(scheduler: Any) -> bool:
    """Whether ``scheduler`` is Scrapy's own ``Scheduler`` class (not a subclass)."""
    from scrapy.core.scheduler import Scheduler

    try:
        return (load_object(scheduler) if isinstance(scheduler, str) else scheduler) is Scheduler
    except (ImportError, NameError, ValueError):
        return False


def _is_ours(dupefilter: Any) -> bool:
    """Whether ``dupefilter`` is CanonicalDupeFilter (or a subclass)."""
    from scrapy_dedup.dupefilter import CanonicalDupeFilter

    try:
        cls = load_object(dupefilter) if isinstance(dupefilter, str) else dupefilter
    except (ImportError, NameError, ValueError):
        return False  # Scrapy reports it when it builds the scheduler
    return isinstance(cls, type) and issubclass(cls, CanonicalDupeFilter)
