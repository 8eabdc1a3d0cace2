"""One store per crawler, shared by the dupefilter, the pipeline and the middleware.

The store is opened from ``DEDUP_STORE`` on first use and wrapped in
:class:`GuardedStore`, which applies ``DEDUP_STORE_ON_ERROR`` when it fails
mid-crawl.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.job import job_dir

from scrapy_dedup import defaults
from scrapy_dedup.stores import DedupStore, MemoryStore, StoreError, open_store

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_dedup.near import NearMethod

__all__ = ["CanonicalMap", "GuardedStore", "acquire_store", "canonical_map", "release_store"]

logger = logging.getLogger(__name__)

_RETRY_AFTER = 5.0  # seconds a failed store is bypassed before it is tried again


class GuardedStore(DedupStore):
    """A store whose failures do not lose data.

    A failed call is counted in ``dedup/store/errors``, logged, and answered
    by a process-local memory store instead, as plain Scrapy would answer:
    the crawl still ends (a site's links loop back), but loses the shared
    state (other workers, earlier runs). By ``on_error`` the crawl goes on
    ("continue": the store is tried again every few seconds) or is stopped
    cleanly ("stop").
    """

    def __init__(self, store: DedupStore, crawler: Crawler, uri: str, on_error: str) -> None:
        self.store = store
        self.crawler = crawler
        self.uri = uri
        self.on_error = on_error
        self.persists_kept = store.persists_kept
        #: Set by DedupFrontierMiddleware: it records pages once their outputs are out.
        self.tracks_pages = False
        self._down_until = 0.0
        self._failures = 0
        self._last_logged = 0.0
        self._closing: Any = None
        self._local = MemoryStore()
        if hasattr(store, "on_write_error"):
            # SQLite answers from memory: a failed write (disk full) loses no
            # answer, so it is counted and retried, not bypassed.
            store.on_write_error = self._write_failed

    def _guard(self, method: str, *args: Any) -> Any:
        if self._down_until and not self._recovered():
            self.crawler.stats.inc_value("dedup/store/bypassed")
            return getattr(self._local, method)(*args)
        try:
            return getattr(self.store, method)(*args)
        except StoreError as exc:
            self._failed(exc)
            return getattr(self._local, method)(*args)

    def _recovered(self) -> bool:
        """Whether a store that failed answers again (asked every few seconds)."""
        if self.on_error == "stop" or time.monotonic() < self._down_until:
            return False
        try:
            self.store.ping()
        except StoreError:
            self._down_until = time.monotonic() + _RETRY_AFTER
            return False
        self._down_until = 0.0
        logger.warning(
            "Dedup store %s answers again: deduplicating again (what was seen while it "
            "was down is not in it)",
            self.uri,
        )
        return True

    def _write_failed(self, exc: StoreError) -> None:
        self._failed(exc, bypass=False)

    def _failed(self, exc: StoreError, *, bypass: bool = True) -> None:
        self._failures += 1
        self.crawler.stats.inc_value("dedup/store/errors")
        now = time.monotonic()
        if bypass:
            self._down_until = now + _RETRY_AFTER
        if self.on_error == "stop":
            if self._closing is None:
                logger.error("%s; stopping the crawl (DEDUP_STORE_ON_ERROR='stop')", exc)
                engine = self.crawler.engine
                if engine is not None and engine.spider is not None:
                    self._closing = deferred_from_coro(
                        engine.close_spider_async(reason="dedup_store_error")
                    )
                    self._closing.addErrback(lambda failure: None)
            return
        if self._failures == 1 or now - self._last_logged >= 60:
            self._last_logged = now
            if not bypass:
                logger.error(
                    "%s; deduplicating on from memory, the records wait to be written "
                    "(%d store errors so far, see dedup/store/errors): if the crawl ends "
                    "first, the next run does not know them",
                    exc,
                    self._failures,
                )
                return
            logger.error(
                "%s; crawling on WITHOUT the shared dedup state (%d store errors so far, "
                "see dedup/store/errors): this process dedups on its own until the store "
                "answers again, so pages and texts seen elsewhere or earlier are fetched "
                "and kept again. Set DEDUP_STORE_ON_ERROR='stop' to stop the crawl instead.",
                exc,
                self._failures,
            )

    def add_url(self, key: int, info: int) -> int | None:
        return self._guard("add_url", key, info)

    def get_url(self, key: int) -> int | None:
        return self._guard("get_url", key)

    def keep_url(self, key: int, info: int) -> None:
        self._guard("keep_url", key, info)

    def url_count(self) -> int:
        return self.store.url_count()

    def get_content(self, digest: bytes) -> str | None:
        return self._guard("get_content", digest)

    def add_content(self, digest: bytes, url: str) -> str | None:
        return self._guard("add_content", digest, url)

    def match_near(self, method: NearMethod, fingerprint: Any) -> tuple[str, Any] | None:
        return self._guard("match_near", method, fingerprint)

    def add_near(self, method: NearMethod, fingerprint: Any, url: str) -> None:
        self._guard("add_near", method, fingerprint, url)

    def add_filed(self, key: int, data: bytes) -> bool:
        return bool(self._guard("add_filed", key, data))

    def filed(self, key: int) -> list[bytes]:
        return self._guard("filed", key)

    def add_pending(self, key: int, request: str) -> None:
        self._guard("add_pending", key, request)

    def done_pending(self, key: int) -> None:
        self._guard("done_pending", key)

    def pending_requests(self) -> list[str]:
        return self._guard("pending_requests")

    def clear_pending(self) -> None:
        try:
            self.store.clear_pending()
        except StoreError as exc:
            self._failed(exc, bypass=False)

    @contextlib.contextmanager
    def hold(self) -> Iterator[Any]:
        with self.store.hold() as token:
            yield token

    def release(self, token: Any) -> None:
        try:
            self.store.release(token)
        except StoreError as exc:
            self._failed(exc, bypass=False)

    def discard(self, token: Any) -> None:
        self.store.discard(token)

    def clear(self, urls_only: bool = False) -> None:
        self.store.clear(urls_only)
        self._local.clear(urls_only)

    def flush(self) -> None:
        try:
            self.store.flush()
        except StoreError as exc:
            self._failed(exc, bypass=False)

    def close(self) -> None:
        try:
            self.store.close()
        except StoreError as exc:
            self._failed(exc, bypass=False)


def open_crawler_store(crawler: Crawler) -> GuardedStore:
    """The store ``DEDUP_STORE`` names for this crawler's namespace."""
    settings = crawler.settings
    uri = settings.get("DEDUP_STORE") or defaults.DEFAULTS["DEDUP_STORE"]
    namespace = settings.get("DEDUP_NAMESPACE") or getattr(crawler.spider, "name", None)
    on_error = settings.get("DEDUP_STORE_ON_ERROR", defaults.DEFAULTS["DEDUP_STORE_ON_ERROR"])
    if on_error not in ("continue", "stop"):
        raise ValueError(f"DEDUP_STORE_ON_ERROR must be 'continue' or 'stop', not {on_error!r}")
    store = open_store(
        str(uri),
        str(namespace or "default"),
        jobdir=job_dir(settings),
        prefix=settings.get("DEDUP_REDIS_PREFIX", defaults.DEFAULTS["DEDUP_REDIS_PREFIX"]),
    )
    if settings.getbool("DEDUP_RESET"):
        logger.warning("DEDUP_RESET is set: forgetting namespace %r of %s", namespace, uri)
        store.clear()
    return GuardedStore(store, crawler, str(uri), on_error)


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
    def __init__(self, store: GuardedStore) -> None:
        self.store = store
        self.users = 0
        self.canonicals = CanonicalMap()
        self.closed = False
        self._flusher: Any = None

    def start_flushing(self) -> None:
        """Commit what a persistent store holds back every second, so a crawl
        that goes quiet still has its last records on disk."""
        if self._flusher is None and not self.closed:
            self._flusher = create_looping_call(self.store.flush)
            self._flusher.start(1.0, now=False)

    def close(self) -> None:
        if self._flusher is not None and self._flusher.running:
            self._flusher.stop()
        if not self.closed:
            self.closed = True
            self.store.close()


_SHARED: WeakKeyDictionary[Crawler, _Shared] = WeakKeyDictionary()


def acquire_store(crawler: Crawler) -> GuardedStore:
    """The crawler's store, opened on first use; pair with :func:`release_store`."""
    shared = _SHARED.get(crawler)
    if shared is None:
        try:
            store = open_crawler_store(crawler)
        except StoreError as exc:
            # One line naming the store, not a traceback from deep inside Scrapy.
            logger.error("Cannot open the dedup store: %s", exc)
            raise
        shared = _SHARED[crawler] = _Shared(store)
        # A component that is never closed (scrapy-redis's Scheduler does not
        # close its dupefilter) must not keep the store open past the crawl;
        # engine_stopped comes after every spider_closed handler has written.
        crawler.signals.connect(shared.close, signal=signals.engine_stopped)
        crawler.signals.connect(shared.start_flushing, signal=signals.spider_opened)
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
