"""``rel=canonical``: find a page's declared canonical URL and decide whether to trust it.

Pure functions, no Scrapy import; the middleware sits on top. Finding follows
what browsers do with the ``<head>`` of a page, but only over a bounded prefix
of the body, so a 10 MB page costs no more than its first ``limit`` bytes:

>>> find_canonical(b'<head><base href="/blog/"><link REL="Canonical" href="post?id=1&amp;p=2">')
('post?id=1&p=2', '/blog/')
>>> resolve("post?id=1&p=2", "https://example.com/x?utm_source=a", "/blog/")
'https://example.com/blog/post?id=1&p=2'
>>> judge("https://example.com/x?utm_source=a", "https://example.com/blog/post?id=1", status=200)
('apply', 'applied')
>>> judge("https://example.com/missing", "https://example.com/", status=200)
('ignore', 'homepage')

Every function here accepts garbage and never raises.
"""

from __future__ import annotations

import codecs
import html
import re
from collections.abc import Callable, Iterable
from html.entities import html5 as _HTML5_ENTITIES
from urllib.parse import SplitResult, urljoin, urlsplit

from w3lib.url import safe_url_string

from scrapy_dedup.canonical import canonicalize_url, registrable_domain

__all__ = ["DEFAULT_LIMIT", "REASONS", "find_canonical", "judge", "parse_link_header", "resolve"]

#: How many bytes of a body :func:`find_canonical` looks at by default.
DEFAULT_LIMIT = 256 * 1024

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

# --- HTML ------------------------------------------------------------------------------------

_WS = "\t\n\f\r "  # HTML's ASCII whitespace (str.split/strip would also take U+00A0 and co.)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_WS_RUN_RE = re.compile(r"[\t\n\f\r ]+")
_TAG_NAME_RE = re.compile(r"</?([A-Za-z][^\t\n\f\r />]*)")
_SEP_RE = re.compile(r"[\t\n\f\r /]*")
# An attribute as the HTML tokenizer reads it. Groups 3 and 5 are closing quotes, empty when
# the quoted value runs to the end of the text (and the tag never ends).
_ATTR_RE = re.compile(
    r"""([^\t\n\f\r />][^\t\n\f\r />=]*)"""
    r"""(?:[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)("?)|'([^']*)('?)|([^\t\n\f\r >]*)))?"""
)
_COMMENT_END_RE = re.compile(r"--!?>")
_CHARREF_RE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]*;?)")
# Elements whose content is text, not markup: a <link> inside is no link. <noscript> is one
# when scripting is on, as in every browser. <plaintext> never ends.
_RAW_TEXT = frozenset(
    {"script", "style", "noscript", "title", "textarea", "xmp", "iframe", "noembed", "noframes"}
)
_END_OF_RAW_RE = {
    name: re.compile(rf"</{name}(?=[\t\n\f\r />]|\Z)", re.I | re.A) for name in _RAW_TEXT
}


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _charref(match: re.Match[str]) -> str:
    """One character reference inside an attribute value, decoded the way HTML does."""
    ref = match.group(1)
    if ref[0] == "#":
        hexa = ref[1] in "xX"
        digits = ref[2 if hexa else 1 :].rstrip(";").lstrip("0") or "0"
        if len(digits) > 8:  # out of range, and too long for int() to be cheap
            return "\ufffd"
        code = int(digits, 16 if hexa else 10)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return "\ufffd"
        if 0x80 <= code <= 0x9F:  # C1 controls are read as windows-1252 where it has a character
            return html.unescape(f"&#{code};") or chr(code)
        return chr(code)
    if ref.endswith(";") and ref in _HTML5_ENTITIES:
        return _HTML5_ENTITIES[ref]
    # Without ";" only the legacy names decode, and in an attribute not when "=" or an
    # alphanumeric follows (so "?a=1&copy=2" keeps its "&copy").
    name = ref.rstrip(";")
    following = match.string[match.end() : match.end() + 1]
    if name in _HTML5_ENTITIES and not ref.endswith(";") and following != "=":
        return _HTML5_ENTITIES[name]
    return match.group()


def _unescape_attr(value: str) -> str:
    return _CHARREF_RE.sub(_charref, value) if "&" in value else value


def _parse_attrs(text: str, pos: int) -> tuple[dict[str, str], int | None]:
    """The attributes of a tag whose name ends at ``pos``, and where the tag ends
    (``None`` when the text ends first, and browsers drop the tag)."""
    attrs: dict[str, str] = {}
    end = len(text)
    while True:
        pos = _SEP_RE.match(text, pos).end()  # type: ignore[union-attr]  # always matches
        if pos >= end:
            return attrs, None
        if text[pos] == ">":
            return attrs, pos + 1
        m = _ATTR_RE.match(text, pos)
        if m is None:  # pragma: no cover - the name class takes every other character
            return attrs, None
        pos = m.end()
        if m.group(2) is not None:
            if not m.group(3):
                return attrs, None
            value = m.group(2)
        elif m.group(4) is not None:
            if not m.group(5):
                return attrs, None
            value = m.group(4)
        else:
            value = m.group(6) or ""
        attrs.setdefault(_ascii_lower(m.group(1)), value)  # the first of duplicates wins


def _decode(body: bytes, encoding: str | None) -> str:
    if encoding is None and body[:3] == codecs.BOM_UTF8:
        encoding = "utf-8-sig"
    elif encoding is None and body[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        encoding = "utf-16"
    if encoding:
        try:
            return body.decode(encoding, errors="replace")
        except Exception:  # unknown codec, a bytes-to-bytes codec, a codec that fails anyway
            pass
    return body.decode("utf-8", errors="replace")


def _clean_href(value: str | None) -> str | None:
    if value is None:
        return None
    value = _unescape_attr(value).strip(_WS)
    return value or None


def find_canonical(
    body: bytes, *, encoding: str | None = None, limit: int = DEFAULT_LIMIT
) -> tuple[str | None, str | None]:
    """``(canonical_href, base_href)`` as declared in the ``<head>`` of an HTML ``body``.

    The canonical is the ``href`` of the first ``<link>`` whose ``rel`` token list
    holds ``canonical`` (any case) and whose ``href`` is not empty; the base is the
    ``href`` of the first ``<base>`` that has one. Both are returned as written, with
    character references decoded and surrounding whitespace stripped; resolve them
    with :func:`resolve`. Only the first ``limit`` bytes are read, and reading stops
    at ``</head>`` or ``<body``. Comments and the content of ``<script>``,
    ``<style>``, ``<noscript>``, ``<template>`` (and other text-only elements) are
    skipped. ``body`` is decoded with ``encoding`` (UTF-8 when it is missing or
    unknown, bad bytes replaced).

    >>> find_canonical(b"<link rel='alternate Canonical' href=' /a?b=1&amp;c=2 '/>")
    ('/a?b=1&c=2', None)
    >>> find_canonical(b"<!-- <link rel=canonical href=/old> --><link href=/new rel=canonical>")
    ('/new', None)
    >>> find_canonical(b"<head></head><body><link rel=canonical href=/late>")
    (None, None)
    >>> find_canonical(b"<link rel=canonical href='/unclosed>")
    (None, None)
    """
    text = _decode(bytes(body[: max(limit, 0)]), encoding)
    canonical: str | None = None
    base: str | None = None
    base_seen = False
    template_depth = 0  # a <template>'s content is parsed but is not part of the document
    n = len(text)
    pos = 0
    while pos < n and (canonical is None or not base_seen):
        lt = text.find("<", pos)
        if lt < 0:
            break
        if text.startswith("<!--", lt):
            start = lt + 4
            if text.startswith(">", start):  # "<!-->" ends at once
                pos = start + 1
            elif text.startswith("->", start):  # so does "<!--->"
                pos = start + 2
            else:
                m = _COMMENT_END_RE.search(text, start)
                if m is None:
                    break  # the comment runs to the end
                pos = m.end()
            continue
        m = _TAG_NAME_RE.match(text, lt)
        if m is None:
            nxt = text[lt + 1 : lt + 2]
            if nxt in ("!", "?", "/"):  # doctype, bogus comment, "</>", "</3"...: up to ">"
                gt = text.find(">", lt + 2)
                if gt < 0:
                    break
                pos = gt + 1
            else:  # a "<" that is just text
                pos = lt + 1
            continue
        is_end = text[lt + 1] == "/"
        name = _ascii_lower(m.group(1))
        if not template_depth and ((name == "body" and not is_end) or (name == "head" and is_end)):
            break
        attrs, tag_end = _parse_attrs(text, m.end())
        if tag_end is None:
            break  # the text ends inside the tag
        pos = tag_end
        if name == "template":
            template_depth = max(template_depth + (-1 if is_end else 1), 0)
            continue
        if is_end:
            continue
        if name in _RAW_TEXT:
            end_match = _END_OF_RAW_RE[name].search(text, pos)
            if end_match is None:
                break
            pos = end_match.start()
            continue
        if name == "plaintext":
            break
        if template_depth:
            continue
        if name == "link" and canonical is None:
            rel = _ascii_lower(attrs.get("rel", ""))
            if "canonical" in _WS_RUN_RE.split(rel):
                canonical = _clean_href(attrs.get("href"))
        elif name == "base" and not base_seen and "href" in attrs:
            base_seen = True
            base = _clean_href(attrs["href"])
    return canonical, base


# --- HTTP Link header ------------------------------------------------------------------------

_QUOTED = r'"(?:[^"\\]|\\.)*"?'
# Pieces of a header that a "," (or ";") inside cannot split: <targets> and "quoted strings".
_LINKS_RE = re.compile(rf'<[^>]*>?|{_QUOTED}|[^<",]+|,', re.S)
_PARAMS_RE = re.compile(rf'<[^>]*>?|{_QUOTED}|[^<";]+|;', re.S)
_TARGET_RE = re.compile(r"[\t\n\r ]*<([^>]*)>(.*)\Z", re.S)
_BACKSLASH_RE = re.compile(r"\\(.)", re.S)


def _split(text: str, pattern: re.Pattern[str], sep: str) -> list[str]:
    parts: list[list[str]] = [[]]
    for piece in pattern.findall(text):
        if piece == sep:
            parts.append([])
        else:
            parts[-1].append(piece)
    return ["".join(part) for part in parts]


def _param_value(raw: str) -> str:
    raw = raw.strip(" \t\r\n")
    if raw.startswith('"'):
        raw = raw[1:-1] if len(raw) > 1 and raw.endswith('"') else raw[1:]
        return _BACKSLASH_RE.sub(r"\1", raw)
    return raw


def parse_link_header(values: Iterable[str | bytes]) -> str | None:
    """The target of the first ``rel=canonical`` link in HTTP ``Link`` header values
    (RFC 8288), as written (possibly relative: resolve it against the page URL,
    never against a ``<base>``), or ``None``.

    Links with an ``anchor`` parameter are about another resource and are skipped.
    ``bytes`` values (as Scrapy's ``Headers.getlist`` returns) are decoded as UTF-8,
    else Latin-1.

    >>> parse_link_header(['<https://x.org/a,b>; rel="alternate"; hreflang=de, '
    ...                    '<https://x.org/a>; type="text/html"; REL="canonical"'])
    'https://x.org/a'
    >>> parse_link_header(["</p>; rel=preload", "garbage;;<", '<x>; rel="next"']) is None
    True
    """
    for raw_value in values:
        if isinstance(raw_value, bytes):
            try:
                value = raw_value.decode("utf-8")
            except UnicodeDecodeError:
                value = raw_value.decode("latin-1")
        elif isinstance(raw_value, str):
            value = raw_value
        else:
            continue
        for link in _split(value, _LINKS_RE, ","):
            m = _TARGET_RE.match(link)
            if m is None:
                continue
            rel: str | None = None
            anchored = False
            for param in _split(m.group(2), _PARAMS_RE, ";")[1:]:
                name, _, raw = param.partition("=")
                name = _ascii_lower(name.strip(" \t\r\n"))
                if name == "rel" and rel is None:  # RFC 8288: later rel parameters are ignored
                    rel = _param_value(raw)
                elif name == "anchor" and _param_value(raw):
                    anchored = True
            if rel is None or anchored:
                continue
            target = m.group(1).strip(" \t\r\n")
            if target and "canonical" in _WS_RUN_RE.split(_ascii_lower(rel)):
                return target
    return None


# --- Resolving and judging -------------------------------------------------------------------

_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_NEWLINE_RE = re.compile(r"[\t\n\r]")
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_WEB_SCHEMES = ("http", "https")
_HOMEPAGE_PATHS = frozenset(
    {"", "/", "/index.html", "/index.htm", "/index.php", "/default.asp", "/default.aspx"}
)


def _clean_url(url: str) -> str:
    """What the URL parser does first: trim C0 controls and spaces, drop tabs and newlines."""
    return _TAB_NEWLINE_RE.sub("", url.strip(_C0_AND_SPACE))


def _scheme(url: str) -> str | None:
    m = _SCHEME_RE.match(url)
    return _ascii_lower(m.group(1)) if m else None


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
    if not host or any(c in host for c in " \t\n\r\x00#/<>?@[\\]^|%"):
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii").lower()
        except (UnicodeError, ValueError):
            return None
    return parts, host


def _site(host: str) -> str:
    try:
        return registrable_domain(host) or host
    except Exception:  # the public suffix list choking on an odd host
        return host


def _is_homepage(parts: SplitResult, *, query_ok: bool = False) -> bool:
    return _ascii_lower(parts.path) in _HOMEPAGE_PATHS and (query_ok or not parts.query)


def _on_domains(host: str, domains: Iterable[str | None]) -> bool:
    for domain in domains:
        if not isinstance(domain, str):
            continue
        domain = _ascii_lower(domain.strip()).rstrip(".")
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
    pass the dupefilter's configured :class:`~scrapy_dedup.canonical.URLCanonicalizer`.

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
