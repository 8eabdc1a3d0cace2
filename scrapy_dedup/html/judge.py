"""Resolve a declared canonical URL and decide whether to trust it. No Scrapy import.

>>> resolve("post?id=1&p=2", "https://example.com/x?utm_source=a", "/blog/")
'https://example.com/blog/post?id=1&p=2'
>>> judge("https://example.com/x?utm_source=a", "https://example.com/blog/post?id=1", status=200)
('apply', 'applied')
>>> judge("https://example.com/missing", "https://example.com/", status=200)
('ignore', 'homepage')

Every function here accepts garbage and never raises.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from urllib.parse import SplitResult, urljoin, urlsplit

from w3lib.url import safe_url_string

from scrapy_dedup.html.head import ascii_lower
from scrapy_dedup.url import C0_AND_SPACE, canonicalize_url, host_to_ascii, registrable_domain

__all__ = ["REASONS", "judge", "resolve"]

#: Every ``reason`` :func:`judge` returns, in the order the checks run. All but
#: ``"same"`` and ``"applied"`` come with the verdict ``"ignore"``.
REASONS: tuple[str, ...] = (
    "status",
    "scheme",
    "unparseable",
    "other_site",
    "offsite",
    "homepage",
    "same",
    "applied",
)

_TAB_NEWLINE_RE = re.compile(r"[\t\n\r]")
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_WEB_SCHEMES = ("http", "https")
_HOMEPAGE_PATHS = frozenset(
    {"", "/", "/index.html", "/index.htm", "/index.php", "/default.asp", "/default.aspx"}
)
_BAD_HOST_CHAR = re.compile(r"[ \t\n\r\x00#/<>?@\[\\\]^|%]")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LABEL = r"[a-z0-9](?:[a-z0-9]|-(?!-)){0,62}(?<!-)"
#: An absolute http(s) URL that joining and :func:`w3lib.url.safe_url_string`
#: leave exactly as it is: a lowercase host name (no ``--``, so no punycode to
#: re-encode; its last label starts with a letter) or a dotted-quad IPv4 address, an
#: optional port without leading zero, a path without dot segments and a
#: non-empty query, both of characters no step re-encodes, and no fragment.
#: Most pages declare such a URL as their canonical, and most of those their own.
_PLAIN_WEB_URL = re.compile(
    rf"https?://(?:(?:{_LABEL}\.)*(?=[a-z]){_LABEL}|{_OCTET}(?:\.{_OCTET}){{3}})"
    r"(?::[1-9][0-9]{0,3})?"
    r"/(?:[A-Za-z0-9\-_~!$&()*+,=:@/]|%(?!2E)[0-9A-F]{2}|\.(?![./?]|\Z))*"
    r"(?:\?(?:[A-Za-z0-9\-._~!$&()*+,=:@/?]|%[0-9A-F]{2})+)?"
)


def _clean_url(url: str) -> str:
    """What the URL parser does first: trim C0 controls and spaces, drop tabs and newlines."""
    return _TAB_NEWLINE_RE.sub("", url.strip(C0_AND_SPACE))


def _scheme(url: str) -> str | None:
    m = _SCHEME_RE.match(url)
    return ascii_lower(m.group(1)) if m else None


def _join(base: str, href: str) -> str:
    if _scheme(base) in _WEB_SCHEMES and _scheme(href) in (*_WEB_SCHEMES, None):
        # For http(s) URLs browsers read "\" as "/" before the query: "\\evil.org\x".
        cut = min((i for i in (href.find("?"), href.find("#")) if i >= 0), default=len(href))
        href = href[:cut].replace("\\", "/") + href[cut:]
    try:
        return urljoin(base, href)
    except ValueError:  # a broken IPv6 literal in either
        return href


def resolve(
    href: str, page_url: str, base_href: str | None = None, *, encoding: str = "utf-8"
) -> str:
    """The absolute, ASCII-safe URL that ``href`` on ``page_url`` points to, given the
    page's ``<base href>`` (itself relative to the page URL; ignored unless it
    resolves to an http(s) URL). ``encoding`` is the page's, which browsers use for
    non-ASCII characters in the query. Never raises: a URL that cannot be made safe
    comes back as joined, for :func:`judge` to reject.

    >>> resolve(" ../b?q=é ", "https://example.com/a/x", "https://cdn.example.com/s/t/")
    'https://cdn.example.com/s/b?q=%C3%A9'
    >>> resolve("//other.org/p", "http://example.com/")
    'http://other.org/p'
    """
    base = _clean_url(page_url)
    if href == page_url and base == href and _PLAIN_WEB_URL.fullmatch(href):
        return href  # the page's own URL, already safe (what the steps below give)
    if base_href:
        joined_base = _join(base, _clean_url(base_href))
        if _scheme(joined_base) in _WEB_SCHEMES:
            base = joined_base
    href = _clean_url(href)
    url = _join(base, href) if href else base.partition("#")[0]  # as browsers: no fragment
    for enc in (encoding, "utf-8"):
        try:
            return safe_url_string(url, encoding=enc)
        except Exception:  # unknown encoding, bad port, broken IPv6...
            continue
    return url


def _split_web_url(url: str) -> tuple[SplitResult, str] | None:
    """``url`` split, and its host lowercased and ASCII; ``None`` when it has no usable host."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError on a bad port
    except ValueError:
        return None
    host = (parts.hostname or "").rstrip(".")
    if not host or _BAD_HOST_CHAR.search(host):
        return None
    if "[" in parts.netloc:  # Python < 3.11.4 takes any [bracketed] host
        try:
            ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            return None
    if not host.isascii():  # as the dedup key has it (UTS #46, not w3lib's IDNA 2003)
        ascii_host = host_to_ascii(host)
        if ascii_host is None:
            return None
        host = ascii_host
    return parts, host


def _site(host: str) -> str:
    try:
        return registrable_domain(host) or host
    except Exception:  # the public suffix list choking on an odd host
        return host


def _is_homepage(parts: SplitResult, *, query_ok: bool = False) -> bool:
    return ascii_lower(parts.path) in _HOMEPAGE_PATHS and (query_ok or not parts.query)


def _on_domains(host: str, domains: Iterable[str | None]) -> bool:
    for domain in domains:
        if not isinstance(domain, str):
            continue
        domain = ascii_lower(domain.strip()).rstrip(".")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


def judge(
    page_url: str,
    target: str,
    *,
    status: int,
    allowed_domains: list[str] | None = None,
    check_site: bool = True,
    check_homepage: bool = True,
    canonicalize: Callable[[str], str] = canonicalize_url,
) -> tuple[str, str]:
    """Whether the page at ``page_url`` (fetched with HTTP ``status``) should be taken
    for the absolute canonical URL ``target``: ``(verdict, reason)``.

    ``verdict`` is ``"apply"`` (reason ``"applied"``), ``"same"`` (``target`` has the
    page's own dedup key; reason ``"same"``) or ``"ignore"`` with the first reason
    in :data:`REASONS` that applies: a non-2xx ``status``; a non-http(s) ``scheme``;
    an ``unparseable`` target; a target on an ``other_site`` (another registrable
    domain, or another host for IPs and hosts without one; when ``check_site``);
    a target ``offsite`` for the spider's ``allowed_domains`` (empty means all
    allowed, as in Scrapy); a target that is the site's ``homepage`` (``/`` or an
    ``index.*`` without query) while the page is not, as soft-404 pages declare
    (when ``check_homepage``). ``canonicalize`` gives the dedup key for ``"same"``;
    pass the dupefilter's configured :class:`~scrapy_dedup.url.URLCanonicalizer`.

    >>> judge("https://www.example.com/a", "https://shop.example.com/a", status=200)
    ('apply', 'applied')
    >>> judge("https://a.github.io/x", "https://b.github.io/x", status=200)
    ('ignore', 'other_site')
    >>> judge("https://example.com/a?utm_source=x", "http://example.com/a", status=200)
    ('same', 'same')
    """
    if not isinstance(status, int) or not 200 <= status < 300:
        return "ignore", "status"
    target = _clean_url(target) if isinstance(target, str) else ""
    if _scheme(target) not in _WEB_SCHEMES:
        return "ignore", "scheme"
    split_target = _split_web_url(target)
    if split_target is None:
        return "ignore", "unparseable"
    target_parts, target_host = split_target
    page_url = _clean_url(page_url) if isinstance(page_url, str) else ""
    if page_url == target:
        # The page declares its own URL: same site, not a homepage unless the
        # page is one, the same key; only the spider's domains can refuse it.
        if allowed_domains and not _on_domains(target_host, allowed_domains):
            return "ignore", "offsite"
        return "same", "same"
    split_page = _split_web_url(page_url)
    if check_site and (split_page is None or _site(split_page[1]) != _site(target_host)):
        return "ignore", "other_site"
    if allowed_domains and not _on_domains(target_host, allowed_domains):
        return "ignore", "offsite"
    # A homepage with a query ("/?lang=en", "/?utm_source=x") may well point to "/".
    page_is_homepage = split_page is not None and _is_homepage(split_page[0], query_ok=True)
    if check_homepage and _is_homepage(target_parts) and not page_is_homepage:
        return "ignore", "homepage"
    if canonicalize(target) == canonicalize(page_url):
        return "same", "same"
    return "apply", "applied"
