"""CanonicalDupeFilter: Scrapy's frontier keyed on conservative canonical URLs."""

from __future__ import annotations

import hashlib
import logging
import zlib
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.request import RequestFingerprinter, referer_str

from scrapy_dedup import defaults
from scrapy_dedup._crawler_store import acquire_store, release_store
from scrapy_dedup._stats import StatsBuffer
from scrapy_dedup.canonical import DROPPING, RULES, UNPARSED, URLCanonicalizer
from scrapy_dedup.stores import PREVIOUS_RUN, DedupStore

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = [
    "REL_CANONICAL",
    "CanonicalDupeFilter",
    "build_canonicalizer",
    "custom_fingerprinter",
    "hop_key",
    "keep_page",
    "request_key",
    "url_info",
    "url_key",
]

logger = logging.getLogger(__name__)

_MASK_BITS = 16  # low bits of a stored value: the rules that changed the first URL
_LOW_MASK = (1 << _MASK_BITS) - 1
#: Set in the info of a key that RelCanonicalMiddleware marked seen: a page declared it.
REL_CANONICAL = 1 << 15
_REASONS = (*RULES, "exact", "rel_canonical", "previous_run")
_REASON_STATS = {name: f"dedup/url/filtered/{name}" for name in _REASONS}


@lru_cache(maxsize=4096)
def _reasons(mask: int, first_mask: int) -> tuple[str, ...]:
    names = URLCanonicalizer.rule_names
    both = mask & first_mask
    found = names(mask ^ first_mask) or names(both & DROPPING) or names(both)
    return tuple(found) or ("exact",)


def url_key(method: str, canonical_url: str, body: bytes = b"", extra: bytes = b"") -> int:
    """The 64-bit key the dupefilter stores for a request."""
    data = f"{method} {canonical_url}".encode("utf-8", "surrogatepass")
    if body:
        data += b"\0" + body
    if extra:
        data += b"\0" + extra
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _canonical_url(request: Request, canonicalizer: URLCanonicalizer) -> tuple[str, int]:
    if request.meta.get("verbatim_url"):
        return request.url, 0
    return canonicalizer.canonicalize_traced(request.url)


def custom_fingerprinter(crawler: Crawler) -> Any:
    """The crawler's request fingerprinter when it is not Scrapy's default.

    A custom one (scrapy-zyte-api, scrapy-playwright...) tells requests to one
    URL apart by more than method and body, so it becomes part of the key."""
    fingerprinter = getattr(crawler, "request_fingerprinter", None)
    if fingerprinter is None or type(fingerprinter) is RequestFingerprinter:
        return None
    return fingerprinter


def request_key(
    request: Request, canonicalizer: URLCanonicalizer, fingerprinter: Any = None
) -> tuple[int, str, int]:
    """(64-bit key, canonical URL, rule mask) of ``request``, as the dupefilter keys it."""
    url, mask = _canonical_url(request, canonicalizer)
    extra = b""
    if fingerprinter is not None:
        try:
            canonical_request = request.replace(url=url)
        except ValueError:  # a key Scrapy would not accept as a URL
            canonical_request = request
        extra = fingerprinter.fingerprint(canonical_request)
    return url_key(request.method, url, request.body, extra), url, mask


def url_info(url: str, mask: int = 0) -> int:
    """What the store keeps with a key: the rules that changed ``url`` and a
    CRC-32 of it, for the merge statistics."""
    raw = zlib.crc32(url.encode("utf-8", "surrogatepass"))
    return (raw << _MASK_BITS) | (mask & _LOW_MASK)


def hop_key(
    request: Request, url: str, canonicalizer: URLCanonicalizer, fingerprinter: Any = None
) -> int | None:
    """The key of a GET of ``url`` (a redirect hop, a canonical URL) with the
    request's other options; ``None`` when Scrapy does not take ``url``."""
    try:
        other = request.replace(url=url, method="GET", body=b"")
    except ValueError:
        return None
    return request_key(other, canonicalizer, fingerprinter)[0]


def keep_page(
    store: DedupStore, request: Request, canonicalizer: URLCanonicalizer, fingerprinter: Any = None
) -> None:
    """Record a page for later runs to skip: its key, the redirect hops that
    led to it and the rel=canonical URL it declared."""
    key, _, mask = request_key(request, canonicalizer, fingerprinter)
    store.keep_url(key, url_info(request.url, mask))
    for url in request.meta.get("redirect_urls", ()):
        hop = hop_key(request, url, canonicalizer, fingerprinter)
        if hop is not None:
            store.keep_url(hop, url_info(url))
    canonical = request.meta.get("dedup_canonical_url")
    if canonical:
        target = hop_key(request, canonical, canonicalizer, fingerprinter)
        if target is not None:
            store.keep_url(target, url_info(canonical, REL_CANONICAL))


def build_canonicalizer(settings: Any) -> URLCanonicalizer:
    """A :class:`URLCanonicalizer` configured from ``DEDUP_URL_*`` settings.

    Dict and list settings may also be given as JSON or comma-separated
    strings (``-s 'DEDUP_URL_RULES={"www": false}'``), as Scrapy allows.
    Raises ``ValueError`` naming the setting when one is malformed.
    """
    values: dict[str, Any] = {}
    for name in ("DEDUP_URL_RULES", "DEDUP_URL_HOST_RULES"):
        try:
            values[name] = settings.getdict(name, defaults.DEFAULTS[name])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be a dict: {exc}") from exc
    for name in ("DEDUP_URL_STRIP_PARAMS", "DEDUP_URL_KEEP_PARAMS"):
        values[name] = settings.getlist(name, defaults.DEFAULTS[name])
    try:
        return URLCanonicalizer(
            strip_params=values["DEDUP_URL_STRIP_PARAMS"],
            keep_params=values["DEDUP_URL_KEEP_PARAMS"],
            host_rules=values["DEDUP_URL_HOST_RULES"],
            **{str(k): bool(v) for k, v in values["DEDUP_URL_RULES"].items()},
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid DEDUP_URL_* setting: {exc}") from exc


class CanonicalDupeFilter(BaseDupeFilter):
    """A drop-in ``DUPEFILTER_CLASS`` keyed on method, canonical URL and body.

    The canonical URL is only the key: requests still fetch their own URL.
    A request that is the redirect target of a request with the same key goes
    through (``/pricing`` answering 301 to ``/pricing/``), requests sent with
    ``dont_filter=True`` are still recorded, and with ``JOBDIR`` the seen keys
    survive pause and resume.
    """

    def __init__(self, crawler: Crawler, store: DedupStore | None = None) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.canonicalizer = build_canonicalizer(settings)
        self.debug = settings.getbool("DUPEFILTER_DEBUG") or settings.getbool("DEDUP_DEBUG")
        self._owns_store = store is None
        self.store = acquire_store(crawler) if store is None else store
        self._fingerprinter = custom_fingerprinter(crawler)
        self._logged_first = False
        # Only with debug on: which URL first claimed each key, for the log.
        self._first_urls: dict[int, str] = {}
        self._last: tuple[Request, int, int, int] | None = None
        # Keys a redirect was let through for: once each, so that follow-up
        # requests carrying a copied redirect_urls meta are still filtered.
        self._redirected: set[int] = set()
        self._stats = StatsBuffer(crawler.stats)
        crawler.signals.connect(self._request_scheduled, signal=signals.request_scheduled)
        # scrapy-redis's Scheduler never calls close(): flush before the stats dump.
        crawler.signals.connect(self._stats.flush, signal=signals.spider_closed)
        # With DedupFrontierMiddleware (the add-on enables it), pages are
        # recorded once their outputs are out, and new requests wait in the
        # store's frontier; without it, a page is recorded at its first item.
        self._frontier = getattr(self.store, "tracks_pages", False)
        if self.store.persists_kept and not self._frontier:
            crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)
            crawler.signals.connect(self._item_dropped, signal=signals.item_dropped)
            crawler.signals.connect(self._response_received, signal=signals.response_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @classmethod
    def from_spider(cls, spider: Spider) -> Self:
        """scrapy-redis's ``Scheduler`` builds its dupefilter this way."""
        return cls.from_crawler(spider.crawler)

    # Keys ---------------------------------------------------------------

    def canonical_url(self, request: Request) -> tuple[str, int]:
        """The canonical URL of ``request`` and the mask of rules that changed it."""
        return _canonical_url(request, self.canonicalizer)

    def request_key(self, request: Request) -> tuple[int, str, int]:
        """(64-bit key, canonical URL, rule mask) of ``request``."""
        return request_key(request, self.canonicalizer, self._fingerprinter)

    def _record(self, request: Request) -> tuple[int, int, int | None]:
        key, _, mask = self.request_key(request)
        if mask & UNPARSED:
            self._stats.inc("dedup/url/unparsed")
        first = self.store.add_url(key, url_info(request.url, mask))
        if first is None:
            self._stats.inc("dedup/url/seen")
            if self._frontier:
                self._add_pending(key, request)
            if self.debug:
                self._first_urls[key] = request.url
        return key, mask, first

    # Scrapy's dupefilter API ----------------------------------------------

    def request_seen(self, request: Request) -> bool:
        key, mask, first = self._record(request)
        if first is None:
            return False
        if key not in self._redirected and self._is_redirect_to_same_key(request):
            self._redirected.add(key)
            self._stats.inc("dedup/url/redirect_allowed")
            if self.debug:
                logger.debug(
                    "Letting redirect through: %(request)s (same key as %(source)s)",
                    {"request": request, "source": request.meta["redirect_urls"][-1]},
                )
            return False
        self._last = (request, key, mask, first)
        return True

    def _is_redirect_to_same_key(self, request: Request) -> bool:
        sources = request.meta.get("redirect_urls")
        if not sources or request.url in sources:  # a loop back to a URL already tried
            return False
        source_url = self.canonicalizer.canonicalize(sources[-1])
        return source_url == self.canonical_url(request)[0]

    def log(self, request: Request, spider: Spider | None = None) -> None:
        """Called by the scheduler for each request that ``request_seen`` filtered."""
        if self._last is not None and self._last[0] is request:
            _, key, mask, first = self._last
        else:  # called without a matching request_seen(): work it out again
            key, _, mask = self.request_key(request)
            first = self.store.get_url(key) or 0
        self._last = None
        reasons = self._merge_reasons(request, mask, first)
        stats = self._stats
        stats.inc("dupefilter/filtered")
        stats.inc("dedup/url/filtered")
        for reason in reasons:
            stats.inc(_REASON_STATS[reason])
        if self.debug:
            logger.debug(
                "Filtered duplicate request: %(request)s collapsed onto %(onto)s "
                "(merged by: %(reasons)s; referer: %(referer)s)",
                {
                    "request": request,
                    "onto": self._first_urls.get(key, self.canonical_url(request)[0]),
                    "reasons": ", ".join(reasons),
                    "referer": referer_str(request),
                },
            )
        elif not self._logged_first:
            self._logged_first = True
            logger.debug(
                "Filtered duplicate request: %(request)s (canonical URL %(onto)s; merged by: "
                "%(reasons)s) - no more duplicates will be shown (set DUPEFILTER_DEBUG or "
                "DEDUP_DEBUG to show all duplicates and what they collapsed onto)",
                {
                    "request": request,
                    "onto": self.canonical_url(request)[0],
                    "reasons": ", ".join(reasons),
                },
            )

    def _merge_reasons(self, request: Request, mask: int, first: int) -> tuple[str, ...]:
        """The rules that made ``request`` share a key with the first request.

        A rule that changed one URL and not the other is a reason. When both
        went through the same rules (``#a`` after ``#b``), what differed was
        most likely dropped: the dropping rules they share are the reasons,
        else the shared rewriting ones. The very same URL again is ``exact``:
        Scrapy's own filter would have dropped it too.
        """
        if first & PREVIOUS_RUN:
            return ("previous_run",)
        if first & REL_CANONICAL:
            return ("rel_canonical",)
        if first >> _MASK_BITS == zlib.crc32(request.url.encode("utf-8", "surrogatepass")):
            return ("exact",)
        return _reasons(mask & _LOW_MASK, first & _LOW_MASK)

    def _request_scheduled(self, request: Request) -> None:
        # The scheduler never asks about dont_filter requests; record them so a
        # later link to a start URL or a retried page is not fetched again.
        if request.dont_filter:
            self._record(request)

    # What a later run skips (SQLite) -------------------------------------

    def _add_pending(self, key: int, request: Request) -> None:
        from scrapy_dedup.frontier import request_to_json

        text, simplified = request_to_json(request, self.crawler.spider)
        if text is None:
            self._stats.inc("dedup/frontier/unsaved")
            return
        if simplified:
            self._stats.inc("dedup/frontier/simplified")
        self.store.add_pending(key, text)

    def _item_scraped(self, item: Any, response: Any) -> None:
        self._keep(response)

    def _item_dropped(self, item: Any, response: Any, exception: BaseException) -> None:
        # A duplicate's text is kept under another URL: its page is done too.
        if getattr(exception, "dedup_duplicate", False):
            self._keep(response)

    def _response_received(self, response: Any, request: Request) -> None:
        if request.meta.get("dedup_persist") is True:
            self._keep(response, request)

    def _keep(self, response: Any, request: Request | None = None) -> None:
        request = request if request is not None else getattr(response, "request", None)
        if request is not None and request.meta.get("dedup_persist") is not False:
            keep_page(self.store, request, self.canonicalizer, self._fingerprinter)

    def open(self) -> None:
        pass

    def close(self, reason: str) -> None:
        self._stats.flush()
        if self._owns_store:
            release_store(self.crawler)
            self._owns_store = False

    def clear(self) -> None:
        """Forget every seen URL key (scrapy-redis calls this to flush); kept
        texts and the rest of the namespace stay (``DEDUP_RESET`` forgets all)."""
        self.store.clear(urls_only=True)
        self._first_urls.clear()
        self._redirected.clear()
