"""One store per crawler, shared by the dupefilter, the pipeline and the middleware."""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.utils.job import job_dir

from scrapy_dedup.stores import DedupStore, MemoryStore

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["acquire_store", "release_store"]


class _Shared:
    def __init__(self, store: DedupStore) -> None:
        self.store = store
        self.users = 0

    def close(self) -> None:
        self.store.close()


_SHARED: WeakKeyDictionary[Crawler, _Shared] = WeakKeyDictionary()


def acquire_store(crawler: Crawler) -> DedupStore:
    """The crawler's store, opened on first use; pair with :func:`release_store`."""
    shared = _SHARED.get(crawler)
    if shared is None:
        shared = _SHARED[crawler] = _Shared(MemoryStore(job_dir(crawler.settings)))
        # A component that is never closed (scrapy-redis's Scheduler does not
        # close its dupefilter) must not keep the store open past the crawl.
        crawler.signals.connect(shared.close, signal=signals.spider_closed)
    shared.users += 1
    return shared.store


def release_store(crawler: Crawler) -> None:
    """Flush the store; the last user closes it."""
    shared = _SHARED.get(crawler)
    if shared is None:
        return
    shared.users -= 1
    if shared.users <= 0:
        shared.close()
        del _SHARED[crawler]
    else:
        shared.store.flush()
