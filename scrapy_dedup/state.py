"""CrawlState: what the components of one crawl share.

The dupefilter, the middlewares and the pipeline each get the crawl's state
with :meth:`CrawlState.of`; the first call reads the settings
(:class:`~scrapy_dedup.config.DedupConfig`), later ones get the same object.
It holds the configuration, the one canonicalizer and request keys
(:class:`~scrapy_dedup.keys.RequestKeys`), the store (opened on first use,
guarded by ``DEDUP_STORE_ON_ERROR``), the fetched -> canonical map that the
rel=canonical middleware fills and the pipeline reads, and whether pages are
recorded by :class:`~scrapy_dedup.frontier.DedupFrontierMiddleware`.

The store is closed once: at ``engine_stopped`` (after every ``spider_closed``
handler wrote) in a crawl; outside a running engine (a script, a test) when
the last component that :meth:`attach`-ed to the state :meth:`detach`-es.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, unquote
from weakref import WeakKeyDictionary

from scrapy import Request, signals
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.job import job_dir
from scrapy.utils.misc import load_object
from scrapy.utils.project import data_path
from scrapy.utils.request import RequestFingerprinter

from scrapy_dedup.config import DedupConfig, read_bool
from scrapy_dedup.keys import RequestKeys
from scrapy_dedup.stores import GuardedStore, StoreError, open_store, redact
from scrapy_dedup.summary import CrawlSummary

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_dedup.text.near import NearMethod
    from scrapy_dedup.url import URLCanonicalizer

__all__ = ["CanonicalMap", "CrawlState", "resolve_sqlite_path"]

logger = logging.getLogger(__name__)


class CanonicalMap(OrderedDict[str, tuple[str, bool, int, str | None]]):
    """Fetched URL -> (declared canonical URL, whether another page was filed
    there first, the canonical URL's filing key, the URL the page declared
    when it is its own up to canonicalization) of recent responses, for the
    pipeline to file their items under (bounded: items follow their response
    closely)."""

    def __init__(self, size: int = 10_000) -> None:
        super().__init__()
        self.size = size

    def record(
        self, fetched: str, canonical: str, *, duplicate: bool, key: int, own: str | None = None
    ) -> None:
        self[fetched] = (canonical, duplicate, key, own)
        self.move_to_end(fetched)
        if len(self) > self.size:
            self.popitem(last=False)


def _custom_fingerprinter(crawler: Crawler) -> Any:
    """The crawler's request fingerprinter when it is not Scrapy's default."""
    fingerprinter = getattr(crawler, "request_fingerprinter", None)
    if fingerprinter is None or type(fingerprinter) is RequestFingerprinter:
        return None
    return fingerprinter


def resolve_sqlite_path(uri: str) -> str:
    """A relative ``sqlite:///`` path resolves as Scrapy's other state does
    (``data_path``: under the project's ``.scrapy`` directory, whatever the
    current directory); absolute paths and other stores are left alone."""
    text = uri.strip()
    if not text.lower().startswith("sqlite:///") or text[len("sqlite:///") :].startswith("/"):
        return uri
    relative = text[len("sqlite:///") :]
    if not relative or relative.startswith("file:") or unquote(relative) == ":memory:":
        return uri  # SqliteStore.from_uri explains what is wrong with it
    base = os.path.abspath(data_path(".", createdir=False))
    return f"sqlite:///{quote(base, safe='/')}/{relative}"


def refuse(exc: BaseException, what: str) -> None:
    """Log why the crawl cannot start in one ERROR line, and keep the
    exception (raised on by the caller, so a script still gets it) from being
    printed again: ``scrapy crawl`` then exits with status 1 after that one
    line, not after asyncio's "Task exception was never retrieved" and two
    tracebacks."""
    logger.error("%s: %s", what, exc)
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: the caller sees the exception
        return
    if task is not None:

        def retrieve(done: asyncio.Task[Any]) -> None:
            other = None if done.cancelled() else done.exception()
            if other is not None and other is not exc:  # not ours: shown as asyncio would
                logger.error("The crawl failed", exc_info=other)

        task.add_done_callback(retrieve)


def _records_pages(settings: Any) -> bool:
    """Whether an enabled spider middleware records pages once their outputs
    are out (``DedupFrontierMiddleware``, or a subclass)."""
    for path in build_component_list(settings.getwithbase("SPIDER_MIDDLEWARES")):
        try:
            component = load_object(path) if isinstance(path, str) else path
        except (ImportError, NameError, ValueError):
            continue  # Scrapy reports it when it builds the middlewares
        if getattr(component, "dedup_records_pages", False):
            return True
    return False


class CrawlState:
    """The shared state of one crawl; get it with :meth:`of`."""

    _states: ClassVar[WeakKeyDictionary[Crawler, CrawlState]] = WeakKeyDictionary()

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        try:
            self.config = DedupConfig.from_settings(crawler.settings)
        except ValueError as exc:
            refuse(exc, "Cannot start scrapy-dedup")
            raise
        self.keys = RequestKeys(
            self.config.canonicalizer(), _custom_fingerprinter(crawler), Request
        )
        self.canonicals = CanonicalMap()
        #: Keys of requests let into the frontier that have not reached the
        #: downloader yet (the frontier middleware forgets those a downloader
        #: middleware refused, at the end of a finished run).
        self.unsent: dict[int, int] = {}
        self._store: GuardedStore | None = None
        #: The crawl's learned URL rules (``DEDUP_LEARN``), set by
        #: :func:`scrapy_dedup.learning.learned_rules` on first use.
        self.learned: Any = None
        #: The crawl's trust in rel=canonical declarations, set by
        #: :func:`scrapy_dedup.trust.canonical_trust` on first use.
        self.trust: Any = None
        self._flusher: Any = None
        self._flush_scheduled = False
        self.closed = False
        self._crawling = False
        self._users = 0
        self.namespace: str | None = None  # once the store is open
        #: The start line, progress and summary in the log; components say
        #: they are on with ``summary.uses(name)``.
        self.summary = CrawlSummary(crawler, self._store_line, self)
        crawler.signals.connect(self._engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.close, signal=signals.engine_stopped)

    @classmethod
    def of(cls, crawler: Crawler) -> CrawlState:
        """The crawl's state, created on first use."""
        state = cls._states.get(crawler)
        if state is None or state.closed:
            state = cls._states[crawler] = cls(crawler)
        return state

    @property
    def canonicalizer(self) -> URLCanonicalizer:
        return self.keys.canonicalizer

    @property
    def store(self) -> GuardedStore:
        """The store ``DEDUP_STORE`` names, opened on first use."""
        if self._store is None:
            self._store = self._open_store()
            self.crawler.signals.connect(self._start_flushing, signal=signals.spider_opened)
        return self._store

    def use_near(self, method: NearMethod) -> None:
        """Check, before the crawl starts, that the store can look up near
        duplicates with ``method`` (see :meth:`DedupStore.use_near`)."""
        try:
            self.store.use_near(method)
        except StoreError as exc:
            refuse(exc, "Cannot use the dedup store")
            self.close()  # the crawl does not start: leave the run now
            raise

    @property
    def records_pages(self) -> bool:
        """Whether the frontier middleware keeps a frontier and records pages
        for later runs (a store that outlives the run, and the middleware
        enabled); otherwise nothing is recorded for later runs."""
        return self.store.persistent and _records_pages(self.crawler.settings)

    def _open_store(self) -> GuardedStore:
        config = self.config
        namespace = config.namespace or getattr(self.crawler.spider, "name", None) or "default"
        self.namespace = str(namespace)
        frontier = _records_pages(self.crawler.settings)
        try:
            # As deltafetch's -a deltafetch_reset=1: a spider argument, -a dedup_reset=1.
            spider = self.crawler.spider
            by_argument = read_bool("-a dedup_reset", getattr(spider, "dedup_reset", 0))
            store = open_store(
                resolve_sqlite_path(config.store),
                str(namespace),
                jobdir=job_dir(self.crawler.settings),
                prefix=config.redis_prefix,
                classes=config.store_classes,
                recrawl_after=config.recrawl_after,
                timeout=config.store_timeout,
                # Where a Redis store notes that its namespace exists (a lost server).
                state_dir=os.path.abspath(data_path(".", createdir=False)),
                lease=config.redis_lease,
            )
        except (StoreError, ValueError) as exc:
            # One line naming the store, not a traceback from deep inside Scrapy.
            refuse(exc, "Cannot open the dedup store")
            raise
        if config.reset or by_argument:
            logger.warning(
                "%s is set: forgetting namespace %r of %s",
                "DEDUP_RESET" if config.reset else "-a dedup_reset",
                namespace,
                redact(config.store),
            )
            store.clear()
        elif store.describe():
            logger.info(
                "Dedup store %s; to start over, run once with -s DEDUP_RESET=1",
                store.describe(),
            )
        if store.persistent and not frontier:
            # Recording a page as done for later runs is only safe once its
            # links are scheduled and its items are out, which only the
            # frontier middleware sees: without it, nothing is recorded.
            add = (
                'add SPIDER_MIDDLEWARES = {"scrapy_dedup.DedupFrontierMiddleware": 10} '
                '(or use ADDONS = {"scrapy_dedup.DedupAddon": 0})'
            )
            if store.persists_kept:
                logger.warning(
                    "DEDUP_STORE=%s keeps pages for later runs only with "
                    "DedupFrontierMiddleware: %s. This run deduplicates as usual and "
                    "records texts, but a later run fetches every page again.",
                    redact(config.store),
                    add,
                )
            else:
                logger.warning(
                    "JOBDIR without DedupFrontierMiddleware: pause and resume work as "
                    "with Scrapy's own filter, but after a kill -9 the requests Scrapy's "
                    "queue had not written are lost: %s.",
                    add,
                )
        guarded = GuardedStore(
            store,
            redact(config.store),
            config.store_on_error,
            count=self.crawler.stats.inc_value,
            stop=self._stop_crawl,
        )
        store.flush_due = self._flush_soon
        return guarded

    def _store_line(self) -> str:
        store = self.config.store
        if store.strip().lower() == "memory":
            return "memory (this crawl only)"
        return f"{redact(store)}, namespace {self.namespace!r}"

    def _engine_started(self) -> None:
        self._crawling = True

    def _stop_crawl(self) -> None:
        engine = self.crawler.engine if self._crawling else None
        if engine is not None and engine.spider is not None:
            closing = deferred_from_coro(engine.close_spider_async(reason="dedup_store_error"))
            closing.addErrback(lambda failure: None)

    def _flush_soon(self) -> None:
        """A batch of writes is due: in a crawl, commit it on the next reactor
        turn, so that everything recorded in this turn (a page and the requests
        and texts it led to) commits together; outside one, at once."""
        if not self._crawling:
            self.flush()
        elif not self._flush_scheduled and not self.closed:
            self._flush_scheduled = True
            call_later(0, self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self.closed and self._store is not None:
            self._store.flush()

    def _start_flushing(self) -> None:
        """Commit what a persistent store holds back every second, so a crawl
        that goes quiet still has its last records on disk."""
        if self._flusher is None and not self.closed and self._store is not None:
            self._flusher = create_looping_call(self._store.flush)
            self._flusher.start(1.0, now=False)

    def flush(self) -> None:
        if self._store is not None and not self.closed:
            self._store.flush()

    def close(self) -> None:
        """Close the store (once)."""
        if self.closed:
            return
        self.closed = True
        if self._flusher is not None and self._flusher.running:
            self._flusher.stop()
        if self._store is not None:
            self._store.close()

    def attach(self) -> None:
        """A component starts using the state (pair with :meth:`detach`)."""
        self._users += 1

    def detach(self) -> None:
        """A component is done with the state: in a crawl, its records are
        flushed (the store closes at ``engine_stopped``); outside one, the
        last component to leave closes the store."""
        self._users -= 1
        if self._crawling or self._users > 0:
            self.flush()
        else:
            self.close()
