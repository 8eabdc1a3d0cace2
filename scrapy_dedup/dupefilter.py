"""CanonicalDupeFilter: Scrapy's frontier keyed on conservative canonical URLs."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from scrapy import signals
from scrapy.dupefilters import BaseDupeFilter, RFPDupeFilter
from scrapy.utils.request import referer_str

from scrapy_dedup._stats import StatsBuffer
from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.keys import PREVIOUS_RUN, RequestKey, merge_reasons, url_info
from scrapy_dedup.learn import Skip
from scrapy_dedup.learning import learned_rules
from scrapy_dedup.serialize import request_to_json
from scrapy_dedup.state import CrawlState
from scrapy_dedup.url import RULES, UNPARSED

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["CanonicalDupeFilter"]

logger = logging.getLogger(__name__)

_REASONS = (*RULES, "exact", "rel_canonical", "previous_run")
# With DEDUP_REPORT (and not DEDUP_DEBUG): the first URLs of this many keys
# are kept, so the report's examples name the URL each request was seen as.
_REPORT_FIRST_URLS = 100_000
_REASON_STATS = {name: f"dedup/url/filtered/{name}" for name in _REASONS}
_WHY = {
    "exact": "the same URL",
    "previous_run": "fetched by an earlier run",
    "rel_canonical": "a fetched page declared it its canonical URL",
}


def _why(reasons: tuple[str, ...]) -> str:
    """Why a request is a duplicate, as the log says it."""
    if len(reasons) == 1 and reasons[0] in _WHY:
        return _WHY[reasons[0]]
    # The rule names of DEDUP_URL_RULES, so the reader knows what to switch off.
    return f"the same URL once these differences are ignored: {', '.join(reasons)}"


class CanonicalDupeFilter(BaseDupeFilter):
    """A drop-in ``DUPEFILTER_CLASS`` keyed on method, canonical URL and body.

    The canonical URL is only the key: requests still fetch their own URL.
    A request that is the redirect target of a request with the same key goes
    through (``/pricing`` answering 301 to ``/pricing/``), requests sent with
    ``dont_filter=True`` are still recorded, and with ``JOBDIR`` the seen keys
    survive pause and resume.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.state = state = CrawlState.of(crawler)
        self.keys = state.keys
        self.canonicalizer = state.canonicalizer
        self.debug = crawler.settings.getbool("DUPEFILTER_DEBUG") or state.config.debug
        self.store = state.store
        state.attach()
        state.summary.uses("URL dupefilter")
        self._logged_first = False
        self.report = state.summary.report  # DEDUP_REPORT: examples per rule
        # Only with debug on (or a report): which URL first claimed each key, for the log.
        self._first_urls: dict[int, str] = {}
        self._last: tuple[Request, int, int, int, str] | None = None
        # Keys a redirect was let through for: once each, so that follow-up
        # requests carrying a copied redirect_urls meta are still filtered.
        self._redirected: set[int] = set()
        self._stats = StatsBuffer(crawler.stats)
        self._inc_value = crawler.stats.inc_value  # looked up once, not per request
        crawler.signals.connect(self._request_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self._stats.start, signal=signals.spider_opened)
        # scrapy-redis's Scheduler never calls close(): flush before the stats dump.
        crawler.signals.connect(self._stats.stop, signal=signals.spider_closed)
        # With DedupFrontierMiddleware (the add-on enables it), new requests
        # wait in the store's frontier until their page is done, and pages are
        # recorded for later runs once their outputs are out. Without it
        # nothing is recorded for later runs (see CrawlState.store).
        self._frontier = state.records_pages
        self._remember = self._frontier
        # Start requests fetched again although an earlier run kept them.
        self._started: set[int] = set()
        # DEDUP_LEARN: URL rules learned from the pages fetched (scrapy_dedup.learning).
        self.learned = learned_rules(state)
        self._learned: tuple[Request, Skip] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not dedup_enabled(crawler.settings):
            # DEDUP_ENABLED = False: Scrapy's own filter, as if none were set.
            return cast("Self", RFPDupeFilter.from_crawler(crawler))
        return cls(crawler)

    @classmethod
    def from_spider(cls, spider: Spider) -> Self:
        """scrapy-redis's ``Scheduler`` builds its dupefilter this way."""
        return cls.from_crawler(spider.crawler)

    # Keys ---------------------------------------------------------------

    def canonical_url(self, request: Request) -> tuple[str, int]:
        """The canonical URL of ``request`` and the mask of rules that changed it."""
        key = self.keys.of(request)
        return key.url, key.mask

    def request_key(self, request: Request) -> tuple[int, str, int]:
        """(64-bit key, canonical URL, rule mask) of ``request``."""
        return self.keys.of(request)

    def _record(self, request: Request) -> tuple[RequestKey, int | None]:
        request_key = self.keys.compute(request)
        key, _, mask = request_key
        if mask & UNPARSED:
            self._stats.inc("dedup/url/unparsed")
        first = self.store.add_url(key, url_info(request.url, mask))
        if first is None:
            if self._remember:
                self.keys.remember(request, request_key)
            self._stats.inc("dedup/url/seen")
            if self._frontier:
                self._add_pending(key, request)
            if self.debug or (
                self.report is not None and len(self._first_urls) < _REPORT_FIRST_URLS
            ):
                self._first_urls[key] = request.url
        return request_key, first

    # Scrapy's dupefilter API ----------------------------------------------

    def request_seen(self, request: Request) -> bool:
        request_key, first = self._record(request)
        if first is None:
            return self.learned is not None and self._learned_copy(request, request_key)
        key = request_key.key
        if first & PREVIOUS_RUN and key not in self._started and self._resumed(request):
            # Once per run, an earlier run does not make these skipped (a
            # later link to one still is): start requests, how a later run
            # finds new links, and requests an interrupted run left unfinished
            # (with JOBDIR, the earlier run saw them without fetching them).
            self._started.add(key)
            if request.meta.get("is_start_request"):
                self._stats.inc("dedup/url/start_refetched")
            if self._frontier:
                self.keys.remember(request, request_key)
                self._add_pending(key, request)
            return False
        if key not in self._redirected and self._is_redirect_to_same_key(request, request_key.url):
            self._redirected.add(key)
            self._stats.inc("dedup/url/redirect_allowed")
            if self.debug:
                logger.debug(
                    "Letting redirect through: %(request)s (same key as %(source)s)",
                    {"request": request, "source": request.meta["redirect_urls"][-1]},
                )
            return False
        self._last = (request, key, request_key.mask, first, request_key.url)
        return True

    def _learned_copy(self, request: Request, request_key: RequestKey) -> bool:
        """Whether a learned rule makes this new request a copy of a fetched
        page: then it is kept (fetched again if the rule fails) and filtered."""
        assert self.learned is not None
        # (Requests an earlier run left in the frontier are checked too: the
        # rules and the pages they copy come back from the store's evidence.)
        if request.meta.get("is_start_request"):
            return False
        skip = self.learned.skip(request, request_key.url)
        if skip is None:
            return False
        if self._frontier:
            # Its row stays in the store's frontier: a later run gets it back
            # and checks it again.
            self.state.unsent.pop(request_key.key, None)
        self._learned = (request, skip)
        return True

    @staticmethod
    def _resumed(request: Request) -> bool:
        meta = request.meta
        return bool(meta.get("is_start_request") or meta.get("dedup_restored"))

    def _is_redirect_to_same_key(self, request: Request, canonical_url: str) -> bool:
        sources = request.meta.get("redirect_urls")
        if not sources or request.url in sources:  # a loop back to a URL already tried
            return False
        return self.canonicalizer.canonicalize(sources[-1]) == canonical_url

    def log(self, request: Request, spider: Spider | None = None) -> None:
        """Called by the scheduler for each request that ``request_seen`` filtered."""
        if self._learned is not None and self._learned[0] is request:
            skip = self._learned[1]
            self._learned = self._last = None
            self._inc_value("dupefilter/filtered")
            self._stats.inc("dedup/url/filtered")
            self._stats.inc("dedup/url/filtered/learned")
            if self.report is not None:
                self.report.url_filtered(("learned",), request.url, skip.copy_of, skip.copy_of)
            if self.debug:
                logger.debug(
                    "Filtered duplicate request: %(request)s is a copy of %(copy)s by learned "
                    "URL rule %(rules)s (referer: %(referer)s)",
                    {
                        "request": request,
                        "copy": skip.copy_of,
                        "rules": " and ".join(rule.name for rule in skip.rules),
                        "referer": referer_str(request),
                    },
                )
            return
        if self._last is not None and self._last[0] is request:
            _, key, mask, first, canonical = self._last
        else:  # called without a matching request_seen(): work it out again
            key, canonical, mask = self.keys.compute(request)
            first = self.store.get_url(key) or 0
        self._last = None
        reasons = merge_reasons(request.url, mask, first)
        # Exact at once, as with Scrapy's filter (its own tests read it right after log()).
        self._inc_value("dupefilter/filtered")
        self._stats.inc("dedup/url/filtered")
        for reason in reasons:
            self._stats.inc(_REASON_STATS[reason])
        if self.report is not None:
            seen_as = request.url if reasons == ("exact",) else self._first_urls.get(key)
            self.report.url_filtered(reasons, request.url, canonical, seen_as)
        self._log_filtered(request, key, reasons)

    def _log_filtered(self, request: Request, key: int, reasons: tuple[str, ...]) -> None:
        if self.debug:
            first = self._first_urls.get(key)
            logger.debug(
                "Filtered duplicate request: %(request)s - already seen as %(onto)s "
                "(%(why)s; referer: %(referer)s)",
                {
                    "request": request,
                    # Recorded by another worker or run: only its key is known.
                    "onto": first or f"canonical URL {self.keys.compute(request).url}",
                    "why": _why(reasons),
                    "referer": referer_str(request),
                },
            )
        elif not self._logged_first:
            self._logged_first = True
            logger.debug(
                "Filtered duplicate request: %(request)s (%(why)s) - no more duplicates will "
                "be shown (set DUPEFILTER_DEBUG or DEDUP_DEBUG to show all duplicates and the "
                "URL each was seen as)",
                {"request": request, "why": _why(reasons)},
            )

    def _request_scheduled(self, request: Request) -> None:
        # The scheduler never asks about dont_filter requests; record them so a
        # later link to a start URL or a retried page is not fetched again.
        if request.dont_filter:
            self._record(request)

    # The frontier (DedupFrontierMiddleware) ------------------------------

    def _add_pending(self, key: int, request: Request) -> None:
        text, simplified = request_to_json(request, self.crawler.spider)
        if text is None:
            self._stats.inc("dedup/frontier/unsaved")
            return
        if simplified:
            self._stats.inc("dedup/frontier/simplified")
        self.store.add_pending(key, text)
        unsent = self.state.unsent
        unsent[key] = unsent.get(key, 0) + 1

    def open(self) -> None:
        pass

    def close(self, reason: str) -> None:
        self._stats.stop()
        self.state.detach()

    def clear(self) -> None:
        """Forget every seen URL key (scrapy-redis calls this to flush); kept
        texts and the rest of the namespace stay (``DEDUP_RESET`` forgets all)."""
        self.store.clear(urls_only=True)
        self._first_urls.clear()
        self._redirected.clear()
