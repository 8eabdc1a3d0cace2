"""DedupFrontierMiddleware: what makes a store that outlives the run safe
against ``kill -9``, and later runs find what failed.

With ``DEDUP_STORE = "sqlite:///..."`` or ``"redis://..."``, a later run skips
pages that gave items. A page must therefore be recorded only once everything
it led to is safe: every request it yielded is scheduled (and so in the
store's frontier of unfinished requests) and every item it yielded is out of
the pipelines. This spider middleware counts a response's outputs until each
one has been scheduled, filtered or dropped, then records the page and takes
it off the frontier. A page that failed (an error answer nobody handled, a
callback that raised, a download error) stays in the frontier. A run first
feeds the frontier earlier runs left back in (each request for at most
``DEDUP_FRONTIER_RETRIES`` runs), so nothing an earlier run had found is
lost. With ``JOBDIR``, the frontier is fed back only after a crash: after a
pause, Scrapy's own queue holds those requests. With Redis, each worker holds
a lease and owns the rows it wrote: the rows of a worker whose lease ran out
(killed, or stopped) are adopted by a live worker and crawled in this run.

Requests are kept as JSON (``Request.to_dict``): callbacks by name, meta and
``cb_kwargs`` values that JSON can hold; a request is kept without the values
that JSON cannot hold (``dedup/frontier/simplified``), and not at all when
its callback is not a spider method (``dedup/frontier/unsaved``). Nothing is
unpickled or imported from the file.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.durable import FeedCheckpoints
from scrapy_dedup.serialize import request_from_json, request_to_json
from scrapy_dedup.state import CrawlState

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from scrapy_dedup.stores import Adoption

__all__ = ["DedupFrontierMiddleware"]

logger = logging.getLogger(__name__)

#: Meta keys this middleware sets on restored requests; a page that copies its
#: meta into the requests it yields (``meta=response.meta``) does not pass them on.
_OWN_META = ("dedup_restored", "dedup_attempts", "dedup_failed", "dedup_adopted")

#: Restored requests yielded between two reactor turns.
_RESTORE_BATCH = 200


async def _next_turn() -> None:
    """Let the reactor run (downloads, responses) before going on."""
    from twisted.internet import reactor  # the one Scrapy installed

    await maybe_deferred_to_future(deferLater(reactor, 0, lambda: None))


@dataclass
class _Page:
    key: int
    response: Any  # held, so its id() is not reused while the page is tracked
    outstanding: int = 0  # outputs not yet scheduled, filtered or out of the pipelines
    kept: int = 0  # items scraped, or dropped as duplicates of a kept text
    finished: bool = False
    yielded: int = 0  # outputs in all
    failed: bool = False  # an error answer that gave nothing: a later run tries again
    exported: int = -1  # the feeds' checkpoint period its last item was scraped in


class DedupFrontierMiddleware:
    """Spider middleware (order 10, outermost: it sees what the engine gets)
    that records a page for later runs only once its outputs are safe, and
    feeds the unfinished and failed requests of earlier runs to the next one.
    Only active with a store that outlives the run (SQLite, Redis, JOBDIR)."""

    #: Read by :class:`~scrapy_dedup.state.CrawlState`: with this middleware
    #: enabled, the dupefilter leaves recording pages to it.
    dedup_records_pages = True

    def __init__(self, crawler: Crawler) -> None:
        if not dedup_enabled(crawler.settings):
            raise NotConfigured("DEDUP_ENABLED is False")
        self.crawler = crawler
        state = CrawlState.of(crawler)
        if not state.store.persistent:
            # The normal case with a memory or Redis store: nothing to say.
            raise NotConfigured
        self.store = state.store
        self.keys = state.keys
        self.state = state
        state.attach()
        state.summary.uses("frontier (for later runs, kill -9 safe)")
        self.stats = crawler.stats
        self.max_retries = state.config.frontier_retries
        self.feeds = FeedCheckpoints.of(crawler)
        self._pages: dict[int, _Page] = {}  # id(response) -> its page
        self._requests: dict[int, tuple[Request, _Page]] = {}  # id(request) -> its page
        #: Restored requests this run downloaded: key -> earlier runs' tries.
        self._downloaded: dict[int, int] = {}
        self._taken_back: set[int] = set()  # of those: processed, the try not counted
        connect = crawler.signals.connect
        connect(self._request_out, signal=signals.request_scheduled)
        connect(self._request_out, signal=signals.request_dropped)
        connect(self._reached_downloader, signal=signals.request_reached_downloader)
        connect(self._left_downloader, signal=signals.request_left_downloader)
        connect(self._item_scraped, signal=signals.item_scraped)
        connect(self._item_dropped, signal=signals.item_dropped)
        connect(self._item_error, signal=signals.item_error)
        connect(self._spider_closed, signal=signals.spider_closed)
        self._tending: Any = None  # renews the lease and adopts (Redis)
        if self.store.lease_interval:
            connect(self._start_tending, signal=signals.spider_opened)
            connect(self._idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        # Streamed, with a reactor turn every few hundred requests: the first
        # request goes out at once, however large the frontier is.
        for n, request in enumerate(self._restored(), 1):
            # Through the filter: a request the crawl meets again is fetched once.
            yield request
            if not n % _RESTORE_BATCH:
                await _next_turn()
        async for item_or_request in start:
            yield item_or_request

    def _restored(self) -> Iterator[Request]:
        """The requests earlier runs left unfinished (interrupted, or failed:
        a download error, an error answer, a callback that raised); each is
        given up once ``DEDUP_FRONTIER_RETRIES`` later runs downloaded it in
        vain. After a pause (``JOBDIR``), only the failed ones: Scrapy's own
        queue holds the others."""
        restored = 0
        given_up: list[str] = []
        gone: list[int] = []  # rows given up, or moved to another key
        moved: set[int] = set()  # keys rows were moved to
        unreadable = 0
        only_failed = not self.store.resume_all
        self.store.keep_lease()  # the rows restored are this worker's
        for key, text in self.store.pending_requests():
            request = request_from_json(text, self.crawler.spider)
            if request is None:  # its callback is gone from the spider
                unreadable += 1
                continue
            if only_failed and not request.meta.get("dedup_failed"):
                continue
            if int(request.meta.get("dedup_attempts", 0)) >= self.max_retries:
                given_up.append(request.url)
                gone.append(key)
                continue
            meta = {**request.meta, "dedup_restored": True}
            meta.pop("dedup_failed", None)
            meta.pop("dedup_adopted", None)  # adopted in an earlier run: restored now
            request = request.replace(dont_filter=False, meta=meta)
            new_key = self.keys.compute(request).key
            if new_key != key:
                # Keyed otherwise now (DEDUP_URL_* rules or the fingerprinter
                # changed): the row moves to the key this run settles it under,
                # or it would be restored again by every later run.
                self.store.add_pending(new_key, text)
                moved.add(new_key)
                gone.append(key)
            restored += 1
            self.stats.inc_value("dedup/frontier/restored")
            yield request
        # Rows are deleted last, and only where no row moved to: one row's new
        # key may be another's old key. A run killed before this point leaves
        # them, and the next one restores them again (the filter drops repeats).
        for key in gone:
            if key not in moved:
                self.store.done_pending(key)
        if restored:
            logger.info(
                "Resumed %d requests that earlier runs of this namespace left unfinished "
                "or failed",
                restored,
            )
        if unreadable:
            self.stats.inc_value("dedup/frontier/unreadable", unreadable)
            logger.warning(
                "%d requests left by earlier runs name a callback this spider no longer "
                "has: they stay in the frontier until it has it again (or -s DEDUP_RESET=1)",
                unreadable,
            )
        if given_up:
            self.stats.inc_value("dedup/frontier/given_up", len(given_up))
            logger.warning(
                "Giving up %d requests that %d later runs downloaded in vain "
                "(DEDUP_FRONTIER_RETRIES): %s",
                len(given_up),
                self.max_retries,
                ", ".join(given_up[:10]) + (" ..." if len(given_up) > 10 else ""),
            )

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        page = self._pages.get(id(response))
        if page is None:
            assert response.request is not None
            key = self.keys.of(response.request).key
            page = self._pages[id(response)] = _Page(key, response=response)
        adopted = response.request is not None and response.request.meta.get("dedup_adopted")
        try:
            async for output in result:
                page.outstanding += 1
                page.yielded += 1
                if isinstance(output, Request):
                    self._requests[id(output)] = (output, page)
                    if "dedup_restored" in output.meta or adopted:  # meta=response.meta
                        for name in _OWN_META:
                            output.meta.pop(name, None)
                    if adopted and not output.dont_filter:
                        self._readmit_link(output)
                yield output
        except Exception:
            # A failed callback: the page stays in the frontier, fetched again next run.
            self._pages.pop(id(response), None)
            self._failed(response)
            raise
        page.finished = True
        # An error answer the spider did not handle (HttpErrorMiddleware turned
        # it into nothing): not done, a later run fetches it again.
        page.failed = not page.yielded and not 200 <= response.status < 300
        if not page.failed and page.outstanding > 0:
            self._take_back_try(page)  # its items may wait (a rel=canonical hold)
        self._maybe_settle(page)

    def _request_out(self, request: Request) -> None:
        entry = self._requests.pop(id(request), None)
        if entry is not None:
            entry[1].outstanding -= 1
            self._maybe_settle(entry[1])

    def _reached_downloader(self, request: Request) -> None:
        key = self.keys.of(request).key
        if self._tending is not None:
            self.store.own_row(key)  # adopted from this worker if it dies now
        unsent = self.state.unsent
        if key in unsent:
            unsent[key] -= 1
            if not unsent[key]:
                del unsent[key]

    def _left_downloader(self, request: Request) -> None:
        # A download that completed (an answer or a download error) is one
        # try; a request in flight when a run is killed is none. Retries
        # within the run (RetryMiddleware, redirects) are the same try.
        if not request.meta.get("dedup_restored") or request.meta.get("redirect_urls"):
            return
        key = self.keys.of(request).key
        if key in self._downloaded:
            return
        tries = self._downloaded[key] = int(request.meta.get("dedup_attempts", 0))
        # One more later run downloaded it (the row says so from now on, until
        # the page is processed: a run killed while it is counts the try).
        request.meta["dedup_attempts"] = tries + 1
        self._rewrite(key, request)

    def _failed(self, response: Response) -> None:
        """A page failed: its row stays, marked, for later runs (even after a pause)."""
        self.stats.inc_value("dedup/frontier/failed")
        request = response.request
        if request is not None:
            self._rewrite(self.keys.of(request).key, request, dedup_failed=True)

    def _rewrite(self, key: int, request: Request, **meta: Any) -> None:
        if meta:
            request = request.replace(meta={**request.meta, **meta})
        text, _ = request_to_json(request, self.crawler.spider)
        if text is not None:
            self.store.add_pending(key, text)

    def _item_scraped(self, item: Any, response: Response | None) -> None:
        self._note_exported(response)
        self._item_out(response, kept=True)

    def _note_exported(self, response: Response | None) -> None:
        page = self._pages.get(id(response)) if response is not None else None
        if page is not None:
            page.exported = self.feeds.period

    def _item_dropped(self, item: Any, response: Response | None, exception: Any) -> None:
        # A duplicate's text is kept under another URL: that counts as kept.
        self._item_out(response, kept=getattr(exception, "dedup_duplicate", False))

    def _item_error(self, item: Any, response: Response | None) -> None:
        self._item_out(response, kept=False)

    def _item_out(self, response: Response | None, *, kept: bool) -> None:
        # Items are matched by their response: a pipeline may return another object.
        page = self._pages.get(id(response)) if response is not None else None
        if page is not None:
            page.outstanding -= 1
            page.kept += kept
            self._maybe_settle(page)

    def _maybe_settle(self, page: _Page) -> None:
        # No need to wait: what the page led to is recorded in this same
        # reactor turn (Scrapy sends request_scheduled just before the filter
        # writes the request's pending row; the pipeline releases an item's
        # texts at item_scraped), and the store commits a turn's records
        # together (CrawlState._flush_soon).
        if page.finished and page.outstanding <= 0:
            self._settle(page)

    def _settle(self, page: _Page) -> None:
        response = page.response
        if self._pages.pop(id(response), None) is not page:
            return
        request = response.request
        if page.failed:
            self._failed(response)
            return
        persist = request.meta.get("dedup_persist")
        keep = persist is not False and (page.kept > 0 or persist is True)
        if page.kept:
            # Its items must be on disk in the feeds first (scrapy_dedup.durable):
            # until then a kill -9 leaves it in the frontier.
            recorded = self.feeds.after_feeds(
                lambda: self._record(request, page.key, keep), exported=page.exported
            )
            if not recorded:
                self._take_back_try(page)
        else:
            self._record(request, page.key, keep)

    def _take_back_try(self, page: _Page) -> None:
        """The page's callback ran without an error, and its record waits (for
        its items in the pipelines, for the feeds: a gzip or S3 feed waits for
        the end of the run, a batch until it is full): a kill -9 meanwhile
        must not use up one of its DEDUP_FRONTIER_RETRIES."""
        tries = self._downloaded.get(page.key)
        if tries is not None and page.key not in self._taken_back:
            self._taken_back.add(page.key)
            self._rewrite(page.key, page.response.request, dedup_attempts=tries)

    def _record(self, request: Request, key: int, keep: bool) -> None:
        """The page is done: kept for later runs (``keep``), off the frontier."""
        if keep:
            for url_key, info, url in self.keys.page(request):
                self.store.keep_url(url_key, info, url)
        self.store.done_pending(key)
        for hop in self.keys.hops(request):
            self.store.done_pending(hop)

    # -- leases (Redis): the frontier of a worker that died -----------------

    def _start_tending(self) -> None:
        self._tending = create_looping_call(self._tend)
        self._tending.start(self.store.lease_interval, now=True)

    def _tend(self) -> int:
        """Renew this worker's lease, and crawl the requests of the workers
        whose lease ran out: how many were scheduled."""
        try:
            self.store.keep_lease()
            if self.crawler.engine is None or self.crawler.engine.spider is None:
                return 0
            return sum(self._crawl_adopted(adoption) for adoption in self.store.adopt())
        except Exception:  # the looping call must go on
            logger.exception("Could not adopt the requests of a stopped worker")
            return 0

    def _crawl_adopted(self, adoption: Adoption) -> int:
        """Schedule the rows of a worker that died, through the filter (their
        keys were seen by that worker in this run: the store lets each
        through once). Failed rows stay for a later run, as they would have."""
        assert self.crawler.engine is not None
        requests = []
        unreadable = 0
        for _key, text in adoption.rows:
            request = request_from_json(text, self.crawler.spider)
            if request is None:
                unreadable += 1
                continue
            if request.meta.get("dedup_failed"):
                continue
            meta = dict(request.meta)
            meta.pop("dedup_restored", None)  # counted once per run, by the worker that died
            meta["dedup_adopted"] = True
            request = request.replace(dont_filter=False, meta=meta)
            self.store.readmit(self.keys.compute(request).key)
            requests.append(request)
        if adoption.rows:
            logger.info(
                "Adopted %d unfinished requests of worker %s, whose lease expired (it was "
                "killed or stopped): crawling them in this run",
                len(requests),
                adoption.worker,
            )
        elif self.state.learned is not None:  # (without DEDUP_LEARN, nothing is owed)
            logger.info(
                "Took over worker %s, whose lease expired (it was killed or stopped) with no "
                "unfinished requests: the pages it skipped on rel=canonical trust are fetched "
                "here should that trust end",
                adoption.worker,
            )
        self.stats.inc_value("dedup/frontier/adopted", len(requests))
        self.stats.inc_value("dedup/frontier/adopted_workers")
        if unreadable:
            self.stats.inc_value("dedup/frontier/unreadable", unreadable)
        for request in requests:
            self.crawler.engine.crawl(request)
        learned = self.state.learned
        # What it skipped on a host's rel=canonical trust is owed by this worker now.
        # So is what the workers it had taken over skipped: it may have died
        # before it said so in the evidence log.
        owed = 0
        if learned is not None:
            for worker in (adoption.worker, *adoption.took):
                owed += learned.adopted(worker)
        return len(requests) + owed

    def _readmit_link(self, request: Request) -> None:
        """A link of an adopted page: the worker that died may have seen it
        (its key is taken in this run) and died before its frontier row was
        written. Unless it is done for good (kept) or waits in a frontier row,
        it is let through once: a page fetched twice, rather than one lost."""
        self.store.readmit_link(self.keys.compute(request).key)

    def _idle(self) -> None:
        # A worker gone while its lease still holds may leave requests for
        # this one: wait for its lease to run out (DEDUP_REDIS_LEASE).
        if self._tend() or self.store.awaiting_adoption():
            raise DontCloseSpider

    def _spider_closed(self, reason: str) -> None:
        # What is still in the frontier stays for the next run: requests not
        # processed yet (an interrupted run), failed pages, and pages whose
        # outputs never all came out (a request dropped by a middleware).
        if reason == "finished" and self.state.unsent:
            # Every request was processed, and these never reached the
            # downloader: a downloader middleware refused them (robots.txt,
            # offsite). Trying them again would only be refused again.
            self.stats.inc_value("dedup/frontier/refused", len(self.state.unsent))
            for key in self.state.unsent:
                self.store.done_pending(key)
        if self._tending is not None and self._tending.running:
            self._tending.stop()
        self.state.unsent.clear()
        self._pages.clear()
        self._requests.clear()
        self._downloaded.clear()
        self._taken_back.clear()
        self.store.end_run()
        self.state.detach()
