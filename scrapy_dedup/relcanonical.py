"""RelCanonicalMiddleware: record each page under the rel=canonical URL it declares."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse

from scrapy_dedup.html import find_canonical, judge, parse_link_header, resolve
from scrapy_dedup.keys import REL_CANONICAL, url_info
from scrapy_dedup.state import CrawlState

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["RelCanonicalMiddleware"]

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml+xml")


class RelCanonicalMiddleware:
    """Reads ``<link rel="canonical">`` (in the head, bounded) and ``Link: <…>;
    rel="canonical"`` headers of fetched pages; when the target is sensible,
    the page's items are filed under it by :class:`ContentDedupPipeline` and
    the target's key is marked seen, so the canonical URL is not fetched again.

    Put it after ``HttpCompressionMiddleware`` (590) on the way back, i.e. at a
    lower number (580), so it reads decompressed bodies.
    """

    def __init__(self, crawler: Crawler) -> None:
        state = CrawlState.of(crawler)
        config = state.config
        if not config.canonical_enabled:
            raise NotConfigured("DEDUP_CANONICAL_ENABLED is False")
        self.crawler = crawler
        self.stats = crawler.stats
        self.keys = state.keys
        self.canonicalizer = state.canonicalizer
        self.check_site = config.canonical_check_site
        self.check_homepage = config.canonical_check_homepage
        self.head_limit = config.canonical_head_limit
        self.debug = config.debug
        self.store = state.store
        self.canonicals = state.canonicals
        state.attach()
        crawler.signals.connect(state.detach, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        target = self._declared(response)
        verdict, reason = "none", "none"
        if target is not None:
            verdict, reason = judge(
                response.url,
                target,
                status=response.status,
                allowed_domains=getattr(self.crawler.spider, "allowed_domains", None),
                check_site=self.check_site,
                check_homepage=self.check_homepage,
                canonicalize=self.canonicalizer.canonicalize,
            )
        if verdict == "apply" and target is not None:
            self.stats.inc_value("dedup/canonical/applied")
            request.meta["dedup_canonical_url"] = target
            self._mark_seen(target)
        elif verdict == "same":
            self.stats.inc_value("dedup/canonical/same")
        elif verdict == "ignore":
            self.stats.inc_value(f"dedup/canonical/ignored/{reason}")
            if self.debug:
                logger.debug("Ignoring rel=canonical %s of %s (%s)", target, response.url, reason)
        if 200 <= response.status < 300:
            filed_under = target if verdict == "apply" and target else response.url
            key = self.keys.filing_key(filed_under)
            earlier = self._claim(key, response.url)
            # Every page is recorded, its own URL included: the pipeline compares a
            # later variant's items with whatever was filed under the URL first.
            self.canonicals.record(response.url, filed_under, duplicate=earlier, key=key)
            if self.debug and filed_under != response.url:
                logger.debug(
                    "Filing %s under its rel=canonical %s%s",
                    response.url,
                    filed_under,
                    " (already filed by another page)" if earlier else "",
                )
        return response

    def _mark_seen(self, target: str) -> None:
        """The canonical page is this page: a later link to it is not fetched."""
        try:
            request = Request(target)
        except (ValueError, TypeError):  # judge() accepted it, Scrapy may not
            return
        self.store.add_url(self.keys.of(request).key, url_info(target) | REL_CANONICAL)

    def _claim(self, key: int, fetched: str) -> bool:
        """Record that the page at ``fetched`` is filed under the URL of ``key``;
        ``True`` when another page was filed there first."""
        owner = url_info(fetched)
        first = self.store.claim(key, owner)
        return first is not None and first != owner

    def _declared(self, response: Response) -> str | None:
        """The canonical URL the response declares, resolved; ``None`` when it
        declares none, or when the Link header and the HTML disagree."""
        header = parse_link_header(response.headers.getlist(b"Link"))
        from_header = resolve(header, response.url) if header else None
        from_html = None
        content_type = response.headers.get(b"Content-Type") or b""
        if isinstance(response, TextResponse) and (
            content_type.split(b";")[0].strip().lower() in _HTML_TYPES
            or (not content_type and response.body[:1] == b"<")
        ):
            href, base = find_canonical(
                response.body, encoding=response.encoding, limit=self.head_limit
            )
            if href:
                from_html = resolve(href, response.url, base, encoding=response.encoding)
        if from_header and from_html and self._key(from_header) != self._key(from_html):
            self.stats.inc_value("dedup/canonical/ignored/conflict")
            return None
        return from_html or from_header

    def _key(self, url: str) -> str:
        return self.canonicalizer.canonicalize(url)
