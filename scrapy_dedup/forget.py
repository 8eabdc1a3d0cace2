"""Forget pages, so that the next run fetches them again: from code
(:func:`forget`) and from the command line (``scrapy dedup forget``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy import Spider
from scrapy.settings import Settings

from scrapy_dedup.explain import Project, close_store

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
    urls = list(urls)
    project = Project.load(settings, spidercls)

    def key_of(url: str) -> int:  # as a crawl keyed it (Scrapy's Request rewrites it first)
        return project.keys.of_url_traced(url)[0]

    store = project.open_store(namespace)
    named = {f"key {key_of(url):016x}": url for url in urls}
    try:
        forgotten = store.forget([key_of(url) for url in urls], prefix, key_of)
    finally:
        close_store(store)
    return [named.get(label, label) for label in forgotten]
