"""One store per crawler, shared by the dupefilter, the pipeline and the middleware."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.utils.job import job_dir

from scrapy_dedup.stores import DedupStore, MemoryStore

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["CanonicalMap", "acquire_store", "canonical_map", "release_store"]


class CanonicalMap(OrderedDict[str, tuple[str, bool, int]]):
    """Fetched URL -> (declared canonical URL, whether another page was filed
    there first, the canonical URL's key) of recent responses, for the pipeline
    to file their items under (bounded: items follow their response closely)."""

    def __init__(self, size: int = 10_000) -> None:
        super().__init__()
        self.size = size

    def record(self, fetched: str, canonical: str, *, duplicate: bool, key: int) -> None:
        self[fetched] = (canonical, duplicate, key)
        self.move_to_end(fetched)
        if len(self) > self.size:
            self.popitem(last=False)


class _Shared:
    def __init__(self, store: DedupStore) -> None:
        self.store = store
        self.users = 0
        self.canonicals = CanonicalMap()

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


def canonical_map(crawler: Crawler) -> CanonicalMap:
    """The crawler's fetched -> canonical URL map (a store user must hold the store)."""
    shared = _SHARED.get(crawler)
    if shared is None:
        raise RuntimeError("canonical_map() called before acquire_store()")
    return shared.canonicals


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
