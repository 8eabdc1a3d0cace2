"""Forget pages, so that the next run fetches them again: from code
(:func:`forget`) and from the command line (``scrapy dedup forget``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.settings import Settings

from scrapy_dedup.config import DedupConfig
from scrapy_dedup.keys import url_key
from scrapy_dedup.state import resolve_sqlite_path
from scrapy_dedup.stores import open_store

__all__ = ["forget"]


def forget(
    urls: Iterable[str] = (),
    prefix: str | None = None,
    *,
    namespace: str,
    settings: Settings | dict[str, Any] | None = None,
) -> list[str]:
    """Forget the kept pages of ``urls`` (any spelling: they are
    canonicalized with the project's ``DEDUP_URL_*`` rules) and those whose
    URL starts with ``prefix``, in the store ``settings`` name
    (``DEDUP_STORE``, ``DEDUP_REDIS_PREFIX``), for ``namespace`` (by default a
    spider's name). The next run fetches them again; their texts stay, so an
    unchanged page's item is dropped as a duplicate of itself. Returns what
    was forgotten. Run it between crawls: an SQLite namespace in use by a
    crawl is locked.
    """
    settings = settings if isinstance(settings, Settings) else Settings(settings or {})
    config = DedupConfig.from_settings(settings)
    canonicalizer = config.canonicalizer()

    def key_of(url: str) -> int:
        return url_key("GET", canonicalizer.canonicalize(url))

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
