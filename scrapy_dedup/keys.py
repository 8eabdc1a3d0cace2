"""The keys the components store: what a request, a redirect hop, a page and a
canonical URL are keyed on, and the info word kept with a URL key.

No Scrapy import (requests are used through their attributes), so stores can
read the info word too.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from enum import IntFlag
from functools import lru_cache, partial
from typing import Any, NamedTuple
from weakref import WeakKeyDictionary

from scrapy_dedup.url import DROPPING, RULES, URLCanonicalizer, rule_names

__all__ = [
    "PREVIOUS_RUN",
    "REL_CANONICAL",
    "RULE_MASK",
    "Info",
    "RequestKey",
    "RequestKeys",
    "merge_reasons",
    "url_info",
    "url_key",
]

#: Low bits of an info word that hold canonicalization rules (one bit per rule).
RULE_BITS = 15


class Info(IntFlag):
    """The 64-bit word a store keeps with a URL key (the first one recorded).

    ======  =======================================================================
    bits    meaning
    ======  =======================================================================
    0-14    the canonicalization rules that changed the first URL (:data:`RULES`)
    15      ``REL_CANONICAL``: a page declared this URL its canonical (not fetched)
    16-47   ``URL_CRC``: CRC-32 of the first URL as requested
    62      ``PREVIOUS_RUN``: recorded by an earlier run (set by stores on load,
            never written)
    ======  =======================================================================
    """

    RULES = (1 << RULE_BITS) - 1
    REL_CANONICAL = 1 << 15
    URL_CRC = 0xFFFF_FFFF << 16
    PREVIOUS_RUN = 1 << 62


if len(RULES) > RULE_BITS:  # pragma: no cover - a guard for whoever adds a rule
    raise ImportError(f"{len(RULES)} URL rules do not fit the {RULE_BITS} rule bits of Info")

# Plain ints for the hot paths (IntFlag arithmetic builds enum objects).
RULE_MASK = int(Info.RULES)
REL_CANONICAL = int(Info.REL_CANONICAL)
PREVIOUS_RUN = int(Info.PREVIOUS_RUN)
_CRC_SHIFT = 16


def url_key(method: str, canonical_url: str, body: bytes = b"") -> int:
    """The 64-bit key of a request: method, canonical URL and body.

    >>> url_key("GET", "https://example.com/") == url_key("GET", "https://example.com/")
    True
    """
    data = f"{method} {canonical_url}".encode("utf-8", "surrogatepass")
    if body:
        data += b"\0" + body
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def fingerprint_key(fingerprint: bytes) -> int:
    """The 64-bit key of a request whose fingerprint a custom
    ``REQUEST_FINGERPRINTER_CLASS`` computed (on the request with its
    canonical URL): the fingerprinter decides which requests are the same."""
    return int.from_bytes(
        hashlib.blake2b(b"FINGERPRINT\0" + bytes(fingerprint), digest_size=8).digest(), "little"
    )


def url_crc(url: str) -> int:
    return zlib.crc32(url.encode("utf-8", "surrogatepass"))


def url_info(url: str, mask: int = 0) -> int:
    """The info word of ``url`` first seen with rule ``mask`` (other flags
    are or-ed in by the caller)."""
    return (url_crc(url) << _CRC_SHIFT) | (mask & RULE_MASK)


@lru_cache(maxsize=4096)
def _rule_reasons(mask: int, first_mask: int) -> tuple[str, ...]:
    both = mask & first_mask
    found = rule_names(mask ^ first_mask) or rule_names(both & DROPPING) or rule_names(both)
    return tuple(found) or ("exact",)


def merge_reasons(url: str, mask: int, first: int) -> tuple[str, ...]:
    """Why a request for ``url`` (canonicalized with rule ``mask``) shares a
    key with the first request, whose info word is ``first``.

    An earlier run or a rel=canonical declaration recorded the key: that is
    the reason. The very same URL again is ``exact`` (Scrapy's own filter
    would have dropped it too). Otherwise a rule that changed one URL and not
    the other is a reason; when both went through the same rules (``#a``
    after ``#b``), what differed was most likely dropped: the dropping rules
    they share, else the shared rewriting ones.
    """
    if first & PREVIOUS_RUN:
        return ("previous_run",)
    if first & REL_CANONICAL:
        return ("rel_canonical",)
    if (first >> _CRC_SHIFT) & 0xFFFF_FFFF == url_crc(url):
        return ("exact",)
    return _rule_reasons(mask & RULE_MASK, first & RULE_MASK)


class RequestKey(NamedTuple):
    key: int
    url: str  # the canonical URL
    mask: int  # the rules that changed the request's URL


_request_key = partial(tuple.__new__, RequestKey)  # RequestKey(...) without its Python __new__


class RequestKeys:
    """Keys of requests under one canonicalizer and request fingerprinter,
    each request's computed once (cached like Scrapy's fingerprinter)."""

    def __init__(
        self,
        canonicalizer: URLCanonicalizer,
        fingerprinter: Any = None,
        request_class: Callable[[str], Any] | None = None,
    ) -> None:
        self.canonicalizer = canonicalizer
        #: A custom request fingerprinter (scrapy-zyte-api, scrapy-playwright...)
        #: decides which requests are the same, as it does for Scrapy's own
        #: filter: its fingerprint of the request with the canonical URL is the
        #: key, so it can tell requests to one URL apart by their options and
        #: merge URLs it deems equal. ``None`` for Scrapy's default.
        self.fingerprinter = fingerprinter
        #: Makes a GET request of a URL (Scrapy's ``Request``) for :meth:`of_url`
        #: to hand to the fingerprinter.
        self.request_class = request_class
        self._cache: WeakKeyDictionary[Any, RequestKey] = WeakKeyDictionary()

    def of(self, request: Any) -> RequestKey:
        """(64-bit key, canonical URL, rule mask) of ``request``, as the dupefilter keys it."""
        found = self._cache.get(request)
        if found is None:
            found = self._cache[request] = self.compute(request)
        return found

    def cached(self, request: Any) -> RequestKey | None:
        """The key of ``request`` if it was computed and kept, else ``None``."""
        return self._cache.get(request)

    def of_url(self, url: str) -> int:
        """The key of a plain GET of ``url`` (a page to forget, an item's page)."""
        if self.fingerprinter is not None and self.request_class is not None:
            try:
                return self.compute(self.request_class(url)).key
            except ValueError:  # not a URL Scrapy fetches: keyed as below
                pass
        return url_key("GET", self.canonicalizer.canonicalize(url))

    def of_url_traced(self, url: str) -> tuple[int, str, int, str]:
        """(key, canonical URL, rule mask, the URL as Scrapy requests it) of a
        plain GET of ``url`` as typed by a user: Scrapy's ``Request`` rewrites
        it first (IDNA host, percent-encoding), as it did in the crawl."""
        requested = url
        if self.request_class is not None:
            try:
                request = self.request_class(url)
            except ValueError:  # not a URL Scrapy fetches: keyed as it is
                request = None
            if request is not None:
                requested = request.url
                if self.fingerprinter is not None:
                    found = self.compute(request)
                    return found.key, found.url, found.mask, requested
        canonical, mask = self.canonicalizer.canonicalize_traced(requested)
        return url_key("GET", canonical), canonical, mask, requested

    def remember(self, request: Any, key: RequestKey) -> None:
        """Cache the key of a request that will be fetched (the frontier and
        page records ask for it again); the dupefilter computes each request's
        key once and caches only those it lets through."""
        self._cache[request] = key

    def compute(self, request: Any) -> RequestKey:
        """The key of ``request``, computed (not cached); a request with
        ``verbatim_url`` in meta is keyed on its URL as it is."""
        if request.meta.get("verbatim_url"):
            url, mask = request.url, 0
        else:
            url, mask = self.canonicalizer.canonicalize_traced(request.url)
        if self.fingerprinter is None:
            return _request_key((url_key(request.method, url, request.body), url, mask))
        try:
            canonical_request = request.replace(url=url)
        except ValueError:  # a key Scrapy would not accept as a URL
            canonical_request = request
        fingerprint = self.fingerprinter.fingerprint(canonical_request)
        return _request_key((fingerprint_key(fingerprint), url, mask))

    def hop(self, request: Any, url: str) -> int | None:
        """The key of a GET of ``url`` (a redirect hop, a canonical URL) with
        the request's other options; ``None`` when Scrapy does not take ``url``."""
        try:
            other = request.replace(url=url, method="GET", body=b"")
        except ValueError:
            return None
        return self.compute(other).key

    def page(self, request: Any) -> list[tuple[int, int, str]]:
        """``(key, info, URL)`` of everything a fetched page stands for: its
        own request, the redirect hops that led to it and the rel=canonical
        URL it declared when that page was taken as fetched (``dedup_canonical_url``
        in meta: its host's declarations are trusted, ``DEDUP_CANONICAL_TRUST``).
        A declared page never fetched nor trusted is not the page's to record."""
        key, _, mask = self.of(request)
        found = [(key, url_info(request.url, mask), request.url)]
        for url in request.meta.get("redirect_urls", ()):
            hop = self.hop(request, url)
            if hop is not None:
                found.append((hop, url_info(url), url))
        canonical = request.meta.get("dedup_canonical_url")
        if canonical:
            target = self.hop(request, canonical)
            if target is not None:
                found.append((target, url_info(canonical) | REL_CANONICAL, canonical))
        return found

    def hops(self, request: Any) -> list[int]:
        """The keys of the redirect hops that led to ``request``."""
        hops = (self.hop(request, url) for url in request.meta.get("redirect_urls", ()))
        return [hop for hop in hops if hop is not None]

    def filing_key(self, url: str) -> int:
        """The key pages are filed under at canonical URL ``url`` (rel=canonical)."""
        return url_key("FILED", self.canonicalizer.canonicalize(url))
