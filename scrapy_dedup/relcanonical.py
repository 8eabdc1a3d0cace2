"""RelCanonicalMiddleware: record each page under the rel=canonical URL it declares."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import TYPE_CHECKING

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom

from scrapy_dedup._stats import StatsBuffer
from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.html import judge, parse_link_header, read_head, resolve
from scrapy_dedup.keys import REL_CANONICAL, url_info, url_key
from scrapy_dedup.learning import learned_rules
from scrapy_dedup.state import CrawlState
from scrapy_dedup.trust import canonical_trust

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = ["RelCanonicalMiddleware"]

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml+xml")
#: How many bytes of ``Link`` header values that mention ``canonical`` are parsed
#: per response (a canonical link takes about a hundred; hostile servers send
#: megabytes, and parsing costs about 1 µs a byte).
LINK_HEADER_BUDGET = 16 * 1024
_BOM_OR_SPACE = b"\xef\xbb\xbf\t\n\x0c\r "
# A rel parameter naming canonical among its (at most 64 bytes of) link types:
# a bounded search, linear in the value however hostile.
_DECLARES_CANONICAL = re.compile(rb'rel\s*=\s*"?[^";,<>]{0,64}?\bcanonical\b', re.IGNORECASE)


class RelCanonicalMiddleware:
    """Reads ``<link rel="canonical">`` (in the head, bounded) and ``Link: <…>;
    rel="canonical"`` headers of fetched pages; when the target is sensible,
    the page's items are filed under it by :class:`ContentDedupPipeline`. Once
    the host's declarations proved right (:mod:`scrapy_dedup.trust`,
    ``DEDUP_CANONICAL_TRUST``), the target's key is also marked seen, so the
    canonical URL is not fetched; until then it is fetched when linked.

    Put it after ``HttpCompressionMiddleware`` (590) and ``MetaRefreshMiddleware``
    (580) on the way back, i.e. at a lower number (575), so it reads decompressed
    bodies and never a refresh page.
    """

    def __init__(self, crawler: Crawler) -> None:
        if not dedup_enabled(crawler.settings):
            raise NotConfigured("DEDUP_ENABLED is False")
        state = CrawlState.of(crawler)
        config = state.config
        if not config.canonical_enabled:
            raise NotConfigured("DEDUP_CANONICAL_ENABLED is False")
        self.crawler = crawler
        self.stats = crawler.stats
        # Per-page counters are batched (Scrapy's inc_value costs ~2 us a call).
        self._stats = StatsBuffer(crawler.stats)
        crawler.signals.connect(self._stats.start, signal=signals.spider_opened)
        crawler.signals.connect(self._stats.stop, signal=signals.spider_closed)
        self.keys = state.keys
        self.canonicalizer = state.canonicalizer
        self.check_site = config.canonical_check_site
        self.check_homepage = config.canonical_check_homepage
        self.head_limit = config.canonical_head_limit
        # Scrapy's URLLENGTH_LIMIT protects links; the same bound protects
        # canonical hrefs (0 switches it off, as it does for links).
        self.max_url_length = crawler.settings.getint("URLLENGTH_LIMIT")
        self.debug = config.debug
        self.store = state.store
        self.canonicals = state.canonicals
        self.trust = canonical_trust(state)
        learned_rules(state)  # with DEDUP_LEARN, it shares the trust's declarations
        self.report = state.summary.report  # DEDUP_REPORT: declarations with examples
        state.attach()
        state.summary.uses("rel=canonical")
        crawler.signals.connect(state.detach, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        url = response.url
        target = self._declared(response)
        verdict, reason = "none", "none"
        if target is not None:
            verdict, reason = judge(
                url,
                target,
                status=response.status,
                allowed_domains=getattr(self.crawler.spider, "allowed_domains", None),
                check_site=self.check_site,
                check_homepage=self.check_homepage,
                canonicalize=self.canonicalizer.canonicalize,
            )
        if self.report is not None and target is not None and verdict in ("apply", "ignore"):
            self.report.canonical_seen(verdict, reason, url, target)
        # A request made with meta=response.meta brings its parent's key:
        # only this page's own trusted declaration may stand in its meta.
        request.meta.pop("dedup_canonical_url", None)
        if verdict == "apply" and target is not None:
            self._stats.inc("dedup/canonical/applied")
            # Only once the host's declarations proved right is the declared
            # page taken as fetched (now, and for later runs: the frontier
            # records it with the page): else it is fetched when linked.
            if self.trust.trusts(response, target):
                request.meta["dedup_canonical_url"] = target
                self._mark_seen(target)
        elif verdict == "same":
            self._stats.inc("dedup/canonical/same")
        elif verdict == "ignore":
            self._stats.inc(f"dedup/canonical/ignored/{reason}")
            if self.debug:
                logger.debug("Ignoring rel=canonical %s of %s (%s)", target, url, reason)
        if 200 <= response.status < 300:
            if verdict == "apply" and target:
                filed_under = target
                key = self.keys.filing_key(target)
            else:
                filed_under = url
                key = self._own_filing_key(request, url)
            earlier = self._claim(key, url)
            # Every page is recorded, its own URL included: the pipeline compares a
            # later variant's items with whatever was filed under the URL first.
            # A declaration of the page's own URL (up to canonicalization) is
            # the clean URL its items get (DEDUP_ITEM_URL).
            own = target if verdict == "same" else None
            self.canonicals.record(url, filed_under, duplicate=earlier, key=key, own=own)
            if self.debug and filed_under != url:
                logger.debug(
                    "Filing %s under its rel=canonical %s%s",
                    url,
                    filed_under,
                    " (already filed by another page)" if earlier else "",
                )
        return response

    def _own_filing_key(self, request: Request, url: str) -> int:
        """The filing key of the page's own URL: from its request's key when the
        dupefilter kept it (the same canonical URL; it does when the frontier
        records pages), else computed. Keeping every request's key for this
        alone would cost ~200 B per queued request to save ~4 us per page."""
        if request.url == url and not request.meta.get("verbatim_url"):
            known = self.keys.cached(request)
            if known is not None:
                return url_key("FILED", known.url)
        return self.keys.filing_key(url)

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
        declares none, when the Link header and the HTML disagree, or when it
        is longer than Scrapy's ``URLLENGTH_LIMIT`` (counted as ``too_long``)."""
        from_html = None
        header, too_long = self._header_target(response)
        from_header = resolve(header, response.url) if header else None
        content_type = response.headers.get(b"Content-Type") or b""
        if isinstance(response, TextResponse) and self._is_html(response, content_type):
            encoding = _declared_encoding(response, self.head_limit, content_type)
            head = read_head(response.body, encoding=encoding, limit=self.head_limit)
            if head.canonical and not self._fits(head.canonical):
                too_long = True
            elif head.canonical:
                if head.after_head:
                    self._stats.inc("dedup/canonical/after_head")
                from_html = resolve(head.canonical, response.url, head.base, encoding=encoding)
        if from_header and not self._fits(from_header):
            from_header, too_long = None, True
        if from_html and not self._fits(from_html):
            from_html, too_long = None, True
        if too_long:
            self._stats.inc("dedup/canonical/ignored/too_long")
        if from_header and from_html and self._key(from_header) != self._key(from_html):
            self._stats.inc("dedup/canonical/ignored/conflict")
            return None
        return from_html or from_header

    def _header_target(self, response: Response) -> tuple[str | None, bool]:
        """The target of a ``Link: <…>; rel=canonical`` header, and whether a
        value was too long. Only values that mention it are parsed, at most
        :data:`LINK_HEADER_BUDGET` bytes of them: a longer one that merely
        mentions the word is skipped, one that declares a canonical leaves the
        header without a target (it may have held the first one)."""
        values = []
        budget = LINK_HEADER_BUDGET
        skipped = False
        for value in response.headers.getlist(b"Link"):
            if b"canonical" not in value.lower():
                continue
            if len(value) > budget:
                if _DECLARES_CANONICAL.search(value):
                    # It may hold the page's first canonical: which one the
                    # page meant is unknown, so none is taken.
                    return None, True
                skipped = True  # it only mentions the word (a URL, a title)
                continue
            budget -= len(value)
            values.append(value)
        return (parse_link_header(values) if values else None), skipped

    def _fits(self, url: str) -> bool:
        return not self.max_url_length or len(url) <= self.max_url_length

    @staticmethod
    def _is_html(response: TextResponse, content_type: bytes | None = None) -> bool:
        if content_type is None:
            content_type = response.headers.get(b"Content-Type") or b""
        if content_type:
            return content_type.split(b";")[0].strip().lower() in _HTML_TYPES
        # No Content-Type: markup, after a byte-order mark or whitespace.
        start = response.body[:1024]
        if start[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16
            start = start[2:].replace(b"\x00", b"")
        return start.lstrip(_BOM_OR_SPACE)[:1] == b"<"

    def _key(self, url: str) -> str:
        return self.canonicalizer.canonicalize(url)


def _declared_encoding(
    response: TextResponse, limit: int, content_type: bytes | None = None
) -> str:
    """The response's encoding as ``TextResponse.encoding`` finds it, without
    its last resort (decoding the whole body to guess, 450 ms for a 200 MB
    page): then UTF-8 if the searched head is valid UTF-8, else windows-1252."""
    explicit = getattr(response, "_encoding", None)  # TextResponse(encoding=...)
    if isinstance(explicit, str) and explicit:
        return explicit
    body = response.body
    if content_type is None:
        content_type = response.headers.get(b"Content-Type") or b""
    declared = (
        read_bom(body[:4])[0]
        or (
            _content_type_encoding(content_type)
            if len(content_type) <= 256  # a hostile megabyte is not kept in the cache
            else http_content_type_encoding(content_type.decode("latin-1"))
        )
        or html_body_declared_encoding(body[:4096])
    )
    if declared:
        return declared
    try:
        body[:limit].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < min(len(body), limit) - 3:  # not just a character cut at the limit
            return "cp1252"
    return "utf-8"


@lru_cache(maxsize=256)
def _content_type_encoding(content_type: bytes) -> str | None:
    """The encoding a ``Content-Type`` value names (a crawl meets a few values)."""
    return http_content_type_encoding(content_type.decode("latin-1"))
