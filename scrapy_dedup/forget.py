"""Forget pages, so that the next run fetches them again: from code
(:func:`forget`) and from the command line (``scrapy dedup forget``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import RequestFingerprinter

from scrapy_dedup.config import DedupConfig
from scrapy_dedup.keys import RequestKeys
from scrapy_dedup.state import resolve_sqlite_path
from scrapy_dedup.stores import open_store

__all__ = ["forget"]


def forget(
    urls: Iterable[str] = (),
    prefix: str | None = None,
    *,
    namespace: str,
    settings: Settings | dict[str, Any] | None = None,
    spidercls: type[Spider] | None = None,
) -> list[str]:
    """Forget the kept pages of ``urls`` (any spelling: they are
    canonicalized with the project's ``DEDUP_URL_*`` rules) and those whose
    URL starts with ``prefix``, in the store ``settings`` name
    (``DEDUP_STORE``, ``DEDUP_REDIS_PREFIX``), for ``namespace`` (by default a
    spider's name). The next run fetches them again; their texts stay, so an
    unchanged page's item is dropped as a duplicate of itself. Returns what
    was forgotten. Run it between crawls: an SQLite namespace in use by a
    crawl is locked.

    Settings are read as a crawl of ``spidercls`` reads them (its
    ``custom_settings`` and the ``ADDONS`` applied), so URL rules and a
    request fingerprinter set there key pages as the crawl did.
    """
    settings = settings if isinstance(settings, Settings) else Settings(settings or {})
    crawler = Crawler(spidercls or Spider, settings)
    crawler.addons.load_settings(crawler.settings)
    settings = crawler.settings
    config = DedupConfig.from_settings(settings)
    key_of = RequestKeys(config.canonicalizer(), _fingerprinter(crawler), Request).of_url

    store = open_store(
        resolve_sqlite_path(config.store),
        namespace,
        prefix=config.redis_prefix,
        classes=config.store_classes,
        timeout=config.store_timeout,
        join=False,  # a Redis store: look, without taking part in a run
    )
    named = {f"key {key_of(url):016x}": url for url in urls}
    try:
        forgotten = store.forget([key_of(url) for url in urls], prefix, key_of)
    finally:
        store.close()
    return [named.get(label, label) for label in forgotten]


def _fingerprinter(crawler: Crawler) -> Any:
    """The crawl's ``REQUEST_FINGERPRINTER_CLASS`` when it is not Scrapy's
    default (it decides the keys of a crawl, so it decides these too)."""
    name = crawler.settings["REQUEST_FINGERPRINTER_CLASS"]
    cls = load_object(name) if isinstance(name, str) else name
    if cls is RequestFingerprinter:
        return None
    try:
        return build_from_crawler(cls, crawler)
    except Exception as exc:
        raise ValueError(
            f"cannot build REQUEST_FINGERPRINTER_CLASS {name!r} outside a crawl "
            f"({type(exc).__name__}: {exc}): it decides which pages are the same, so "
            "they cannot be found without it"
        ) from None
