"""CanonicalDupeFilter: Scrapy's frontier keyed on conservative canonical URLs."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, cast

from scrapy import signals
from scrapy.dupefilters import BaseDupeFilter, RFPDupeFilter
from scrapy.utils.request import RequestFingerprinter, referer_str
from w3lib.url import canonicalize_url

from scrapy_dedup._stats import StatsBuffer
from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.keys import PREVIOUS_RUN, RequestKey, merge_reasons, url_info
from scrapy_dedup.learn import Held, Skip
from scrapy_dedup.learning import describe, learned_rules
from scrapy_dedup.scheduler import tells_unfiltered
from scrapy_dedup.serialize import request_to_json
from scrapy_dedup.state import CrawlState
from scrapy_dedup.stores.compact import CompactMap
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
#: Where a fetch Scrapy's own filter would have made was saved (docs/stats.md).
SAVED_BY = ("url_rules", "previous_run", "rel_canonical", "learned", "dont_filter")
_SAVED_STATS = {name: f"dedup/url/saved/{name}" for name in SAVED_BY}
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


# URLs that w3lib's canonicalize_url (Scrapy's fingerprint) leaves as they are:
# lowercase host, a path of plain segments, a query of sorted name=value pairs
# (sorted in _scrapy_canonical). Most links are; the others are canonicalized.
_W3LIB_CANONICAL = re.compile(
    r"https?://[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::[0-9]{1,5})?"
    r"/(?:[A-Za-z0-9_~-][A-Za-z0-9._~-]*(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)*/?)?"
    r"(?:\?[A-Za-z0-9._~=&+-]+)?"
)


def _scrapy_canonical(url: str) -> str:
    """``w3lib.url.canonicalize_url(url)`` (without the fragment), computed only
    when ``url`` is not already in that form: a quarter of the cost of
    Scrapy's fingerprint, most of which is that function."""
    url = url.partition("#")[0]
    if _W3LIB_CANONICAL.fullmatch(url):
        query = url.partition("?")[2]
        if not query:
            return url
        pairs = [part.partition("=") for part in query.split("&")]
        if all(name and equals and "=" not in value for name, equals, value in pairs):
            plain = [(name, value) for name, _, value in pairs]
            ordered = sorted(plain)
            if plain == ordered:
                return url
            # (Safe characters only: canonicalize_url just sorts the pairs.)
            base = url.partition("?")[0]
            return base + "?" + "&".join(f"{name}={value}" for name, value in ordered)
    try:
        return canonicalize_url(url)
    except (ValueError, UnicodeError):
        return url


def _saved_by(reasons: tuple[str, ...]) -> str:
    """What saved a fetch that Scrapy's own filter would have made."""
    for source in ("previous_run", "rel_canonical"):
        if source in reasons:
            return source
    # The same URL as a request sent with dont_filter (start URLs): Scrapy
    # never records those, so it fetches the URL again when a page links to it.
    return "dont_filter" if reasons == ("exact",) else "url_rules"


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
        self._last: tuple[Request, int, int, int, str, bool] | None = None
        # 64-bit hashes of Scrapy's own fingerprints of the requests it was
        # asked about (what RFPDupeFilter's set holds, in about 20 bytes a
        # request): a request filtered here is a fetch saved only if not among them.
        self._plain = CompactMap()
        fingerprinter = crawler.request_fingerprinter
        # Scrapy's default fingerprint is (method, canonicalize_url(url), body):
        # that key, hashed, without its cost. A custom one is asked.
        self._custom_fingerprint = (
            None if type(fingerprinter) is RequestFingerprinter else fingerprinter.fingerprint
        )
        # Keys a redirect was let through for: once each, so that follow-up
        # requests carrying a copied redirect_urls meta are still filtered.
        self._redirected: set[int] = set()
        self._stats = StatsBuffer(crawler.stats)
        self._inc_value = crawler.stats.inc_value  # looked up once, not per request
        if not tells_unfiltered(crawler.settings):
            # DedupScheduler calls record_unfiltered itself, without a receiver
            # on a signal sent for every request.
            crawler.signals.connect(self.record_unfiltered, signal=signals.request_scheduled)
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
        self._learned: tuple[Request, Skip | Held, bool] | None = None

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

    def _plain_seen(self, request: Request) -> bool:
        """Whether Scrapy's own filter (RFPDupeFilter, with the crawler's
        request fingerprinter) would have filtered ``request``; it records it."""
        if self._custom_fingerprint is None:
            key = (request.method, _scrapy_canonical(request.url), request.body)
            fingerprint = hash(key) & 0xFFFF_FFFF_FFFF_FFFF
        else:
            fingerprint = int.from_bytes(self._custom_fingerprint(request)[:8], "little")
        return self._plain.setdefault(fingerprint, 1) is not None

    def request_seen(self, request: Request) -> bool:
        plain_seen = self._plain_seen(request)
        if self._seen(request, plain_seen):
            return True
        if plain_seen:
            # Fetched, where Scrapy's own filter would not have: the summary
            # takes it off the fetches saved.
            self._stats.inc("dedup/url/scrapy_filters")
        return False

    def _seen(self, request: Request, plain_seen: bool) -> bool:
        request_key, first = self._record(request)
        if first is None:
            return self.learned is not None and self._learned_copy(
                request, request_key, plain_seen
            )
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
        self._last = (request, key, request_key.mask, first, request_key.url, plain_seen)
        return True

    def _learned_copy(self, request: Request, request_key: RequestKey, plain_seen: bool) -> bool:
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
        self._learned = (request, skip, plain_seen)
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
            _, skip, plain_seen = self._learned
            self._learned = self._last = None
            self._inc_value("dupefilter/filtered")
            self._stats.inc("dedup/url/filtered")
            self._stats.inc("dedup/url/filtered/learned")
            if not plain_seen:
                self._saved("learned")
            if self.report is not None:
                self.report.url_filtered(("learned",), request.url, skip.copy_of, skip.copy_of)
            if self.debug:
                logger.debug(
                    "Filtered duplicate request: %(request)s %(why)s (referer: %(referer)s)",
                    {
                        "request": request,
                        "why": describe(skip)
                        if isinstance(skip, Held)
                        else f"is {describe(skip)}",
                        "referer": referer_str(request),
                    },
                )
            return
        if self._last is not None and self._last[0] is request:
            _, key, mask, first, canonical, plain_seen = self._last
        else:  # called without a matching request_seen(): work it out again
            key, canonical, mask = self.keys.compute(request)
            first = self.store.get_url(key) or 0
            plain_seen = self._plain_seen(request)
        self._last = None
        reasons = merge_reasons(request.url, mask, first)
        # Exact at once, as with Scrapy's filter (its own tests read it right after log()).
        self._inc_value("dupefilter/filtered")
        self._stats.inc("dedup/url/filtered")
        for reason in reasons:
            self._stats.inc(_REASON_STATS[reason])
        if not plain_seen:
            self._saved(_saved_by(reasons))
        if self.report is not None:
            seen_as = request.url if reasons == ("exact",) else self._first_urls.get(key)
            self.report.url_filtered(reasons, request.url, canonical, seen_as)
        self._log_filtered(request, key, reasons)

    def _saved(self, source: str) -> None:
        """A filtered request that Scrapy's own filter would have let through."""
        self._stats.inc("dedup/url/saved")
        self._stats.inc(_SAVED_STATS[source])

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

    def record_unfiltered(self, request: Request) -> None:
        """Record ``request`` if it is sent with ``dont_filter``: the
        scheduler never asks about those, and a later link to a start URL or a
        retried page should not be fetched again."""
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
        self._plain.clear()
