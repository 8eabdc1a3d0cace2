"""Trust in rel=canonical declarations during a crawl: the Scrapy glue around
:class:`scrapy_dedup.learn.CanonicalTrust`.

A page declaring a canonical URL says "that page is this one". Taking every
declaration at its word saves fetching the declared page, and loses whatever
only that page links to when it is not quite this one: a print view without
the navigation, page 2 of a list declaring page 1. So by default
(``DEDUP_CANONICAL_TRUST = "verified"``) a declared page is skipped only once
its host's declarations proved right: ``DEDUP_CANONICAL_TRUST_MIN_SUPPORT``
declared pages, fetched, had the visible text (of their main region) of the
page that declared them and no link it lacks (a print view without the
navigation has the article's text, not its links: skipping the article
would lose what only it links to, so such a host is never trusted). One in
``1 / DEDUP_CANONICAL_TRUST_SAMPLE`` is still fetched, to check; the first
that has another text, or a link the declaring page lacks, ends the trust in
its host for the crawl, and the pages skipped on trust are fetched after all.

With ``DEDUP_LEARN``, the declarations and fetched pages go through the
store's evidence log (:mod:`scrapy_dedup.learning`), so workers and later
runs share what verified a host; without it, each process verifies on its
own from what it fetches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.http import TextResponse
from scrapy.utils.response import get_base_url

from scrapy_dedup._stats import StatsBuffer
from scrapy_dedup.learn import CanonicalTrust, body_digest, links_filter, page_digest, page_links

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_dedup.state import CrawlState

__all__ = ["TRUST_MODES", "CanonicalTrustCheck", "canonical_trust", "fetch_again"]

logger = logging.getLogger(__name__)

#: ``DEDUP_CANONICAL_TRUST``: skip a declared page once the host's
#: declarations are verified, always (every sensible declaration), or never.
TRUST_MODES = ("verified", "always", "never")


def canonical_trust(state: CrawlState) -> CanonicalTrustCheck:
    """The crawl's trust in rel=canonical declarations (made on first use)."""
    if state.trust is None:
        state.trust = CanonicalTrustCheck(state.crawler, state)
    trust: CanonicalTrustCheck = state.trust
    return trust


def fetch_again(crawler: Crawler, requests: list[Any], why: str, *, debug: bool) -> None:
    """Schedule ``requests`` past the dupefilter: pages skipped on a belief
    (a learned rule, a trusted declaration) that turned out wrong."""
    engine = crawler.engine
    for request in requests:
        if debug:
            logger.debug("Fetching %s: %s", request, why)
        if engine is not None:
            engine.crawl(request.replace(dont_filter=True))


class CanonicalTrustCheck:
    """Whether a page's declared canonical URL may be skipped
    (:meth:`trusts`), and the check of every declared page fetched
    (:meth:`observe`). One per crawl: ``CrawlState.trust``."""

    def __init__(self, crawler: Crawler, state: CrawlState) -> None:
        config = state.config
        self.crawler = crawler
        self.mode = config.canonical_trust
        self.canonicalize = state.canonicalizer.canonicalize
        self.debug = config.debug
        self._stats = StatsBuffer(crawler.stats)
        self.trust = CanonicalTrust(
            min_support=config.canonical_trust_min_support,
            sample=config.canonical_trust_sample,
            inc=self._stats.inc,
        )
        #: Called with (target, digest, page, links filter) for each
        #: declaration checked: ``DEDUP_LEARN`` appends it to the store's
        #: evidence log.
        #: The last argument is the URL skipped on trust (None: it is fetched).
        self.on_declare: Callable[[str, int, str, int | None, str | None], None] | None = None
        # With DEDUP_LEARN, fetched pages reach observe() through the
        # evidence log (LearnedRules), in the log's order.
        self._observed_by_log = config.learn
        self._digests: dict[int, tuple[Any, tuple[int, int]]] = {}  # id(response) -> digest
        crawler.signals.connect(self._stats.start, signal=signals.spider_opened)
        crawler.signals.connect(self._stats.stop, signal=signals.spider_closed)
        if self.mode == "verified" and not self._observed_by_log:
            crawler.signals.connect(self.response_received, signal=signals.response_received)

    def digest(self, response: Response) -> tuple[int, int] | None:
        """``(digest, length)`` of a response's visible text, computed once."""
        cached = self._digests.pop(id(response), None)
        if cached is not None and cached[0] is response:
            return cached[1]
        if isinstance(response, TextResponse):
            try:
                found = page_digest(response.text)
            except (UnicodeError, ValueError):
                return None
        else:
            found = body_digest(response.body)
        if len(self._digests) > 64:  # responses the signal never saw (a middleware dropped them)
            self._digests.clear()
        self._digests[id(response)] = (response, found)
        return found

    def links(self, response: Response) -> set[str] | None:
        """The links of a page (None for a body that is not text)."""
        if not isinstance(response, TextResponse):
            return None
        try:
            return page_links(response.text, get_base_url(response))
        except (UnicodeError, ValueError):
            return None

    def links_within(self, url: str, response: Response) -> bool | None:
        """Whether the fetched page ``response`` (canonical ``url``) has no
        link the page that declared it lacks; None when nothing declared it
        here (or its links are not known)."""
        if not self.trust.expects(url):
            return None
        links = self.links(response)
        if links is None:
            return None
        links.discard(response.url)
        return self.trust.links_within(url, links)

    def forget(self, response: Response) -> None:
        """Drop the digest kept for ``response``."""
        self._digests.pop(id(response), None)

    def trusts(self, response: Response, target: str) -> bool:
        """Whether the page may skip the canonical URL ``target`` it declares
        (``DEDUP_CANONICAL_TRUST``); the declaration is remembered, to check
        against the target's text when it is fetched."""
        if self.mode == "always":
            trusted = True
        elif self.mode == "never":
            trusted = False
        else:
            trusted = self._declare(response, target)
        self._stats.inc("dedup/canonical/trusted" if trusted else "dedup/canonical/fetched")
        return trusted

    def _declare(self, response: Response, target: str) -> bool:
        found = self.digest(response)
        if found is None:
            return False
        # The declaring page is named as fetched (only messages show it).
        target_key, page = self.canonicalize(target), response.url
        links = self.links(response)
        # A link of the declared page to the declaring page, or to itself,
        # leads nowhere new.
        bits = None if links is None else links_filter({*links, response.url, target})
        # With a shared log (on_declare), the declaration counts when the log
        # gives it back, in its order, as on every other worker.
        shared = self.on_declare is not None
        trusted = self.trust.declare(target_key, found[0], page, target, bits, record=not shared)
        if self.on_declare is not None:
            self.on_declare(target_key, found[0], page, bits, target if trusted else None)
        else:
            self.fetch_due()  # a target fetched already had another text: trust ended
        return trusted

    def record(
        self, target: str, digest: int, page: str, links: int | None = None, fetch: str = ""
    ) -> None:
        """A declaration another worker (or an earlier run) made."""
        self.trust.record(target, digest, page, links, fetch)

    def observe(self, url: str, digest: int, links_within: bool | None) -> int:
        """A fetched page (canonical ``url``, text ``digest``, whether its
        links are the declaring page's: :meth:`links_within`) checks the
        declarations of it; when that ends its host's trust, the pages skipped
        on trust are fetched after all. How many."""
        targets = self.trust.observe(url, digest, links_within)
        if targets:
            self._stats.inc("dedup/canonical/refetched", len(targets))
            fetch_again(
                self.crawler,
                self._requests(targets),
                "its host's rel=canonical declarations are not trusted any more",
                debug=self.debug,
            )
        return len(targets)

    def fetch_due(self) -> int:
        """Fetch the targets skipped on a trust that has ended since, by an
        earlier run or on a declaration of a page fetched already
        (:meth:`CanonicalTrust.take_due`); how many."""
        targets = self.trust.take_due()
        if targets:
            self._stats.inc("dedup/canonical/refetched", len(targets))
            fetch_again(
                self.crawler,
                self._requests(targets),
                "it was skipped on its host's rel=canonical declarations, "
                "which are not trusted any more",
                debug=self.debug,
            )
        return len(targets)

    def _requests(self, targets: list[str]) -> list[Request]:
        """Requests for pages skipped on trust, to the spider's ``parse``. A
        URL this Scrapy refuses (skipped by a run whose w3lib took it) is
        said and counted, and the others are still fetched."""
        callback = getattr(self.crawler.spider, "parse", None)
        requests = []
        for target in targets:
            try:
                requests.append(Request(target, callback=callback))
            except ValueError as error:
                self._stats.inc("dedup/canonical/refetch_refused")
                logger.warning(
                    "Cannot fetch %s again, skipped on its host's rel=canonical declarations "
                    "(not trusted any more): this Scrapy refuses the URL (%s)",
                    target,
                    error,
                )
        return requests

    def response_received(self, response: Response, request: Request) -> None:
        """A fetched page that pages declared canonical: does it have their text?"""
        if not 200 <= response.status < 300 or request.method != "GET":
            self.forget(response)
            return
        url = self.canonicalize(response.url)
        if not self.trust.expects(url):  # the text is read only when it is awaited
            self.forget(response)
            return
        found = self.digest(response)
        self.forget(response)
        if found is not None:
            self.observe(url, found[0], self.links_within(url, response))
