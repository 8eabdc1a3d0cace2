"""rel=canonical: finding it in HTML and Link headers, resolving it, and deciding to trust it."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.html import (
    DEFAULT_LIMIT,
    REASONS,
    find_canonical,
    judge,
    parse_link_header,
    resolve,
)
from scrapy_dedup.url import URLCanonicalizer

# (html, expected canonical href as written, expected base href)
FIND = [
    # the forms pages use
    ('<link rel="canonical" href="https://example.com/a">', "https://example.com/a", None),
    ('<link rel="Canonical" href="/a">', "/a", None),
    ('<LINK REL="CANONICAL" HREF="/a">', "/a", None),
    ('<link rel="alternate canonical" href="/a">', "/a", None),
    ('<link rel=" canonical\tnext " href="/a">', "/a", None),
    ("<link rel=canonical href=/a>", "/a", None),
    ("<link rel='canonical' href='/a'>", "/a", None),
    ('<link href="/a" rel="canonical">', "/a", None),
    ('<link href="/a" rel="canonical" />', "/a", None),
    ("<link rel=canonical href=/a/>", "/a/", None),
    ('<link\n  rel="canonical"\n  href="/a"\n  type="text/html"\n>', "/a", None),
    ('<link data-x="y" hreflang=en rel="canonical" id=c href="/a" media=all>', "/a", None),
    ('<link rel = "canonical" href = "/a">', "/a", None),
    ('<link/rel="canonical"/href="/a">', "/a", None),
    ('<link rel="canonical" href="  /a \n">', "/a", None),
    # entities in the href
    ('<link rel="canonical" href="/a?b=1&amp;c=2">', "/a?b=1&c=2", None),
    ('<link rel="canonical" href="/a?b=1&#38;c=2&#x26;d=3">', "/a?b=1&c=2&d=3", None),
    ('<link rel="canonical" href="/caf&eacute;">', "/café", None),
    ('<link rel="canonical" href="/a?x=1&copy=2">', "/a?x=1&copy=2", None),  # as browsers
    ('<link rel="canonical" href="/a?x=1&amp">', "/a?x=1&", None),
    ('<link rel="canonical" href="/a?x=&#99999999999999999999;">', "/a?x=\ufffd", None),
    # which link counts
    ('<link rel="alternate" href="/x"><link rel="canonical" href="/a">', "/a", None),
    ('<link rel="canonical" href="/a"><link rel="canonical" href="/b">', "/a", None),
    ('<link rel="canonical" href=""><link rel="canonical" href="/b">', "/b", None),
    ('<link rel="canonical" href="  "><link rel="canonical" href="/b">', "/b", None),
    ('<link rel="canonical"><link rel="canonical" href="/b">', "/b", None),
    ('<link rel="canonical" rel="x" href="/a">', "/a", None),  # the first attribute wins
    ('<link rel="x" rel="canonical" href="/a">', None, None),
    ('<link rel="canonicalx" href="/a">', None, None),
    ('<link rel="non-canonical" href="/a">', None, None),
    ('<linkx rel="canonical" href="/a">', None, None),
    ('<meta rel="canonical" href="/a">', None, None),
    ('<a rel="canonical" href="/a">', None, None),
    ('<link rel="\u017f canonical" href="/a">', "/a", None),  # a long s token, then canonical
    ('<link rel="CANON\u0130CAL" href="/a">', None, None),  # only ASCII is case-folded
    # <base>
    ('<base href="/blog/"><link rel="canonical" href="p">', "p", "/blog/"),
    ('<link rel="canonical" href="p"><base href="/blog/">', "p", "/blog/"),
    ('<base target="_top"><base href="/1/"><base href="/2/">', None, "/1/"),
    ('<base href=""><base href="/2/">', None, None),
    ('<BASE HREF="https://cdn.example.com/x/">', None, "https://cdn.example.com/x/"),
    # only the head
    ('<html><head><title>t</title><link rel="canonical" href="/a"></head>', "/a", None),
    ('<head></head><link rel="canonical" href="/a">', None, None),
    ('<head></head ><link rel="canonical" href="/a">', None, None),
    ('<body><link rel="canonical" href="/a">', None, None),
    ('<BODY class="x"><link rel="canonical" href="/a">', None, None),
    ('<bodyx><link rel="canonical" href="/a">', "/a", None),
    ('<base href="/b/"><body><base href="/c/">', None, "/b/"),
    # comments, scripts and other text-only content
    ('<!-- <link rel="canonical" href="/x"> --><link rel="canonical" href="/a">', "/a", None),
    ('<!--<link rel="canonical" href="/x">--!><link rel="canonical" href="/a">', "/a", None),
    ('<!--><link rel="canonical" href="/a">', "/a", None),
    ('<!---><link rel="canonical" href="/a">', "/a", None),
    ('<!-- never closed <link rel="canonical" href="/x">', None, None),
    ('<!DOCTYPE html><link rel="canonical" href="/a">', "/a", None),
    ('<?xml version="1.0"?><link rel="canonical" href="/a">', "/a", None),
    ('<script>var s = \'<link rel="canonical" href="/x">\';</script>', None, None),
    ('<script>"</head>"; x = \'<link rel="canonical" href="/x">\'</script>', None, None),
    ('<SCRIPT>x</script ><link rel="canonical" href="/a">', "/a", None),
    ('<script>x</scriptx><link rel="canonical" href="/x"></script>', None, None),
    ('<script>x</\u017fcript><link rel="canonical" href="/x"></script>', None, None),
    ('<script type="text/template"><link rel="canonical" href="/x"></script>', None, None),
    ('<noscript><link rel="canonical" href="/x"></noscript>', None, None),
    ('<style>/* <link rel="canonical" href="/x"> */</style>', None, None),
    ('<title><link rel="canonical" href="/x"></title>', None, None),
    ('<template><link rel="canonical" href="/x"></template>', None, None),
    ('<template><base href="/x/"></template><base href="/a/">', None, "/a/"),
    ('<template><template></template><link rel="canonical" href="/x"></template>', None, None),
    ('<template></head><body></template><link rel="canonical" href="/a">', "/a", None),
    ('<script>never closed <link rel="canonical" href="/x">', None, None),
    ('<style></style><link rel="canonical" href="/a">', "/a", None),
    # broken HTML: what a browser would still read, and nothing that it would not
    ('<link rel="canonical" href="/a', None, None),
    ("<link rel='canonical' href='/a>", None, None),
    ('<link rel="canonical" href="/a"', None, None),
    ('<link rel="canonical href="/a">', None, None),
    ('<link rel="canonical" href="/a" <meta charset=utf-8>', "/a", None),
    ('<link rel="canonical" href="/a"><link rel="next" href="/b', "/a", None),
    ('<link rel="canonical" href=/a?b>c>', "/a?b", None),
    ("<link rel=canonical href=>", None, None),
    ("<link rel=canonical href>", None, None),
    ("<<<>>><</><link rel=canonical href=/a>", "/a", None),
    ('< link rel="canonical" href="/x">', None, None),
    ('<link rel="canonical"\x00 href="/a\x00">', "/a\x00", None),
    ("", None, None),
    ("<", None, None),
    ("<link", None, None),
    ("<!", None, None),
    ("</", None, None),
    ("plain text, no markup at all", None, None),
]


@pytest.mark.parametrize(("html", "canonical", "base"), FIND)
def test_find_canonical(html: str, canonical: str | None, base: str | None) -> None:
    assert find_canonical(html.encode("utf-8")) == (canonical, base)


def test_find_canonical_binary_garbage() -> None:
    garbage = bytes(range(256)) * 50
    assert find_canonical(garbage) == (None, None)
    body = b"\x00\xff\xfe<link rel=canonical href=/a>\x80\x81"
    assert find_canonical(body) == ("/a", None)
    # NUL is no whitespace: as in browsers, this is tag "link\\0" and rel token "canonical\\0".
    assert find_canonical(b"<link\x00 rel=canonical href=/a>") == (None, None)
    assert find_canonical(b"<link rel=canonical\x00 href=/a>") == (None, None)


@pytest.mark.parametrize(
    ("body", "encoding", "canonical"),
    [
        ('<link rel="canonical" href="/café">'.encode("cp1252"), "cp1252", "/café"),
        ('<link rel="canonical" href="/café">'.encode("cp1252"), None, "/caf\ufffd"),
        ('<link rel="canonical" href="/café">'.encode(), None, "/café"),
        ('<link rel="canonical" href="/café">'.encode(), "no-such-codec", "/café"),
        ('<link rel="canonical" href="/café">'.encode(), "hex", "/café"),  # bytes-to-bytes
        ('<link rel="canonical" href="/a">'.encode("utf-16"), None, "/a"),
        ('<link rel="canonical" href="/a">'.encode("utf-16-le"), "utf-16-le", "/a"),
        ('<link rel="canonical" href="/\u0436">'.encode("koi8-r"), "koi8-r", "/\u0436"),
    ],
)
def test_find_canonical_encoding(body: bytes, encoding: str | None, canonical: str) -> None:
    assert find_canonical(body, encoding=encoding)[0] == canonical


def test_find_canonical_large_body_is_cheap() -> None:
    head = b'<html><head><link rel="canonical" href="/a"><base href="/b/"></head><body>'
    body = head + b"<p>" + b"x" * (10 * 1024 * 1024)
    start = time.perf_counter()
    assert find_canonical(body) == ("/a", "/b/")
    # A head without </head> or <body>: scanning must still stop at the limit.
    assert find_canonical(b"<head>" + b"<meta name=x>" * 1_000_000) == (None, None)
    assert time.perf_counter() - start < 1.0


def test_find_canonical_stops_at_the_limit() -> None:
    late = (
        b"<html>" + b"some body text " * (1024 * 1024 // 15) + b'<link rel="canonical" href="/a">'
    )
    assert len(late) > 1024 * 1024
    assert find_canonical(late) == (None, None)
    assert find_canonical(late, limit=len(late)) == ("/a", None)
    tag = b'<link rel="canonical" href="/a">'
    assert find_canonical(tag, limit=len(tag)) == ("/a", None)
    assert find_canonical(tag, limit=len(tag) - 1) == (None, None)  # cut inside the tag
    assert find_canonical(tag, limit=0) == (None, None)
    assert find_canonical(tag, limit=-5) == (None, None)
    assert DEFAULT_LIMIT == 1024 * 1024


def test_find_canonical_pathological_markup_is_linear() -> None:
    start = time.perf_counter()
    for body in (
        b"<a " + b"b" * 200_000,
        b"<a " + b"b " * 100_000,
        b"<a " + b"b=" * 100_000,
        b'<a b="' + b"x" * 200_000,
        b"<!--" + b"-" * 200_000,
        b"<" * 200_000,
        b"<a" * 100_000,
        b"<script>" + b"</scrip" * 30_000,
        b"&" * 100_000,
        b'<link rel=canonical href="' + b"&amp;" * 40_000 + b'">',
    ):
        find_canonical(body)
    assert time.perf_counter() - start < 2.0


# (Link header values, expected target)
LINKS = [
    (['<https://example.com/a>; rel="canonical"'], "https://example.com/a"),
    (["<https://example.com/a>; rel=canonical"], "https://example.com/a"),
    (["<https://example.com/a>; REL=Canonical"], "https://example.com/a"),
    (['<https://example.com/a>;rel="canonical alternate"'], "https://example.com/a"),
    (['<https://example.com/a>; rel="alternate  CANONICAL"'], "https://example.com/a"),
    (['<https://example.com/a> ; rel = "canonical"'], "https://example.com/a"),
    (['<https://example.com/a>; type="text/html"; rel="canonical"'], "https://example.com/a"),
    (['</a>; rel="canonical"'], "/a"),
    (['< https://example.com/a >; rel="canonical"'], "https://example.com/a"),
    # several links in one value, and several values
    (
        [
            '<https://ex.com/de>; rel="alternate"; hreflang="de", '
            '<https://ex.com/a>; rel="canonical"'
        ],
        "https://ex.com/a",
    ),
    (
        ['<https://ex.com/a,b>; rel="alternate", <https://ex.com/c,d>; rel="canonical"'],
        "https://ex.com/c,d",
    ),
    (
        ['<https://ex.com/x>; title="a, b; rel=canonical", <https://ex.com/a>; rel=canonical'],
        "https://ex.com/a",
    ),
    (
        ['<https://ex.com/x>; title="\\"q\\", rel=canonical", <https://ex.com/a>; rel=canonical'],
        "https://ex.com/a",
    ),
    (['</1>; rel="preload", </2>; rel="canonical", </3>; rel="canonical"'], "/2"),
    (['</1>; rel="preload"', '</2>; rel="canonical"'], "/2"),
    ([b'</2>; rel="canonical"'], "/2"),
    (['</caf\u00e9>; rel="canonical"'.encode()], "/caf\u00e9"),
    ([b'</caf\xe9>; rel="canonical"'], "/caf\u00e9"),
    # not canonical
    (['<https://example.com/a>; rel="alternate"'], None),
    (['<https://example.com/a>; rel="canonicalx"'], None),
    (['<https://example.com/a>; rel="next"; rel="canonical"'], None),  # RFC 8288: first rel wins
    (['<https://example.com/a>; title="canonical"'], None),
    (['<https://example.com/a>; rel="canonical"; anchor="https://example.com/other"'], None),
    (['<>; rel="canonical"'], None),
    (['<  >; rel="canonical"'], None),
    (["https://example.com/a; rel=canonical"], None),
    ([], None),
    ([""], None),
    # garbage
    (['<https://example.com/a; rel="canonical"'], None),
    (['"<x>; rel=canonical'], None),
    ([";;;,,,<<>>"], None),
    (['garbage, </a>; rel="canonical"'], "/a"),
    (['</a>; rel="canonical'], "/a"),
    (["</a>; rel"], None),
    (["</a>; rel="], None),
]


@pytest.mark.parametrize(("values", "target"), LINKS)
def test_parse_link_header(values: list[str | bytes], target: str | None) -> None:
    assert parse_link_header(values) == target


# (href, page URL, base href, expected)
RESOLVE = [
    ("https://example.com/a", "https://example.com/x", None, "https://example.com/a"),
    ("/a", "https://example.com/x/y", None, "https://example.com/a"),
    ("a", "https://example.com/x/y", None, "https://example.com/x/a"),
    ("../a", "https://example.com/x/y/z", None, "https://example.com/x/a"),
    ("?p=2", "https://example.com/x?p=1", None, "https://example.com/x?p=2"),
    ("//cdn.example.com/a", "http://example.com/", None, "http://cdn.example.com/a"),
    ("  /a\n", "https://example.com/x", None, "https://example.com/a"),
    ("/a\n/b\t", "https://example.com/x", None, "https://example.com/a/b"),
    ("\x00 /a", "https://example.com/x", None, "https://example.com/a"),
    ("", "https://example.com/x#f", None, "https://example.com/x"),
    ("/café?q=é", "https://example.com/", None, "https://example.com/caf%C3%A9?q=%C3%A9"),
    ("https://bücher.de/a", "https://example.com/", None, "https://xn--bcher-kva.de/a"),
    ("\\\\evil.org\\a", "https://example.com/x", None, "https://evil.org/a"),
    ("/a\\b?c\\d", "https://example.com/x", None, "https://example.com/a/b?c%5Cd"),
    # with <base href>
    ("p", "https://example.com/x/y", "/blog/", "https://example.com/blog/p"),
    ("p", "https://example.com/x/y", "https://other.com/s/", "https://other.com/s/p"),
    ("p", "https://example.com/x/y", "../", "https://example.com/p"),
    ("/p", "https://example.com/x/y", "https://other.com/s/", "https://other.com/p"),
    (
        "https://example.com/p",
        "https://example.com/x",
        "https://other.com/s/",
        "https://example.com/p",
    ),
    ("p", "https://example.com/x/y", "", "https://example.com/x/p"),
    ("p", "https://example.com/x/y", "javascript:void(0)", "https://example.com/x/p"),
    ("p", "https://example.com/x/y", "data:text/html,x", "https://example.com/x/p"),
    ("p", "https://example.com/x/y", " /blog/ ", "https://example.com/blog/p"),
    # not for http(s): left for judge() to reject
    ("javascript:void(0)", "https://example.com/x", None, "javascript:void(0)"),
    ("mailto:a@example.com", "https://example.com/x", None, "mailto:a@example.com"),
]


@pytest.mark.parametrize(("href", "page", "base", "expected"), RESOLVE)
def test_resolve(href: str, page: str, base: str | None, expected: str) -> None:
    assert resolve(href, page, base) == expected


def test_resolve_query_uses_the_page_encoding() -> None:
    assert (
        resolve("?q=é", "https://example.com/", encoding="cp1252") == "https://example.com/?q=%E9"
    )
    assert (
        resolve("?q=é", "https://example.com/", encoding="nope") == "https://example.com/?q=%C3%A9"
    )


@pytest.mark.parametrize(
    "href", ["http://[::1", "http://example.com:99999/", "http://[zz]/", "\\\\[x", "http://a b/"]
)
def test_resolve_never_raises(href: str) -> None:
    assert isinstance(resolve(href, "https://example.com/x"), str)
    assert isinstance(resolve("/a", "https://example.com/x", href), str)
    assert isinstance(resolve("/a", href, href), str)


PAGE = "https://www.example.com/products/42"

# (page, target, keyword arguments, verdict, reason)
JUDGE = [
    # status
    (PAGE, "https://www.example.com/p/42", {"status": 404}, "ignore", "status"),
    (PAGE, "https://www.example.com/p/42", {"status": 301}, "ignore", "status"),
    (PAGE, "https://www.example.com/p/42", {"status": 500}, "ignore", "status"),
    (PAGE, "https://www.example.com/p/42", {"status": 199}, "ignore", "status"),
    (PAGE, "https://www.example.com/p/42", {"status": 203}, "apply", "applied"),
    (PAGE, "javascript:void(0)", {"status": 404}, "ignore", "status"),  # status first
    # scheme
    (PAGE, "javascript:void(0)", {}, "ignore", "scheme"),
    (PAGE, "data:text/html,hi", {}, "ignore", "scheme"),
    (PAGE, "mailto:a@example.com", {}, "ignore", "scheme"),
    (PAGE, "ftp://www.example.com/p/42", {}, "ignore", "scheme"),
    (PAGE, "", {}, "ignore", "scheme"),
    (PAGE, "/p/42", {}, "ignore", "scheme"),  # not resolved
    (PAGE, "HTTPS://www.example.com/p/42", {}, "apply", "applied"),
    # unparseable
    (PAGE, "https://", {}, "ignore", "unparseable"),
    (PAGE, "https:///p/42", {}, "ignore", "unparseable"),
    (PAGE, "https:p/42", {}, "ignore", "unparseable"),
    (PAGE, "https://www.example.com:99999/p", {}, "ignore", "unparseable"),
    (PAGE, "https://www.example.com:port/p", {}, "ignore", "unparseable"),
    (PAGE, "https://[::1/p", {}, "ignore", "unparseable"),
    (PAGE, "https://[zz]/p", {}, "ignore", "unparseable"),
    (PAGE, "https://exa mple.com/p", {}, "ignore", "unparseable"),
    (PAGE, "https://www.example.com:99999/p", {"check_site": False}, "ignore", "unparseable"),
    # other site
    (PAGE, "https://www.other.com/p/42", {}, "ignore", "other_site"),
    (PAGE, "https://example.org/products/42", {}, "ignore", "other_site"),
    (PAGE, "https://www.other.com/p/42", {"check_site": False}, "apply", "applied"),
    ("https://a.github.io/x", "https://b.github.io/x", {}, "ignore", "other_site"),
    ("https://a.github.io/x", "https://a.github.io/y", {}, "apply", "applied"),
    ("https://shop.example.co.uk/x", "https://example.co.uk/y", {}, "apply", "applied"),
    ("https://example.co.uk/x", "https://other.co.uk/x", {}, "ignore", "other_site"),
    (PAGE, "https://shop.example.com/p/42", {}, "apply", "applied"),
    (PAGE, "http://example.com/p/42", {}, "apply", "applied"),
    (PAGE, "https://WWW.EXAMPLE.COM./p/42", {}, "apply", "applied"),
    (PAGE, "https://www.example.com:8443/p/42", {}, "apply", "applied"),
    ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080/y", {}, "apply", "applied"),
    ("http://127.0.0.1:8080/x", "http://127.0.0.1/y", {}, "apply", "applied"),
    ("http://127.0.0.1/x", "http://127.0.0.2/y", {}, "ignore", "other_site"),
    ("http://[::1]/x", "http://[::1]/y", {}, "apply", "applied"),
    ("http://localhost/x", "http://localhost/y", {}, "apply", "applied"),
    ("http://a.localhost/x", "http://b.localhost/y", {}, "ignore", "other_site"),
    ("https://bücher.de/x", "https://xn--bcher-kva.de/y", {}, "apply", "applied"),
    ("not a url", "https://www.example.com/p/42", {}, "ignore", "other_site"),
    # offsite
    (
        PAGE,
        "https://shop.example.com/p",
        {"allowed_domains": ["www.example.com"]},
        "ignore",
        "offsite",
    ),
    (PAGE, "https://shop.example.com/p", {"allowed_domains": ["example.com"]}, "apply", "applied"),
    (
        PAGE,
        "https://a.shop.example.com/p",
        {"allowed_domains": ["shop.example.com"]},
        "apply",
        "applied",
    ),
    (
        PAGE,
        "https://badexample.com/p",
        {"allowed_domains": ["example.com"], "check_site": False},
        "ignore",
        "offsite",
    ),
    (
        PAGE,
        "https://shop.example.com/p",
        {"allowed_domains": ["x.org", "Example.COM"]},
        "apply",
        "applied",
    ),
    (PAGE, "https://shop.example.com/p", {"allowed_domains": []}, "apply", "applied"),
    (
        PAGE,
        "https://www.other.com/p",
        {"allowed_domains": ["example.com"]},
        "ignore",
        "other_site",
    ),
    # homepage
    (PAGE, "https://www.example.com/", {}, "ignore", "homepage"),
    (PAGE, "https://www.example.com", {}, "ignore", "homepage"),
    (PAGE, "https://example.com/#top", {}, "ignore", "homepage"),
    (PAGE, "https://example.com/index.html", {}, "ignore", "homepage"),
    (PAGE, "https://www.example.com/", {"check_homepage": False}, "apply", "applied"),
    (PAGE, "https://www.example.com/?id=42", {}, "apply", "applied"),
    ("https://www.example.com/?utm_source=x", "https://www.example.com/", {}, "same", "same"),
    ("https://www.example.com/?lang=en", "https://www.example.com/", {}, "apply", "applied"),
    ("https://www.example.com/index.php", "https://www.example.com/", {}, "apply", "applied"),
    ("https://example.com", "https://www.example.com/", {}, "same", "same"),
    # same
    (PAGE, PAGE, {}, "same", "same"),
    (PAGE, "http://example.com/products/42/", {}, "same", "same"),
    (PAGE + "?utm_source=x#top", PAGE, {}, "same", "same"),
    (PAGE, "https://www.example.com/Products/42", {}, "apply", "applied"),
    # apply
    (PAGE + "?color=red", PAGE, {}, "apply", "applied"),
    (
        "https://www.example.com/p?id=42&sort=asc",
        "https://www.example.com/p?id=42",
        {},
        "apply",
        "applied",
    ),
    ("https://m.example.com/p/42", "https://www.example.com/p/42", {}, "apply", "applied"),
]


@pytest.mark.parametrize(("page", "target", "kwargs", "verdict", "reason"), JUDGE)
def test_judge(page: str, target: str, kwargs: dict, verdict: str, reason: str) -> None:
    kwargs = {"status": 200, **kwargs}
    assert judge(page, target, **kwargs) == (verdict, reason)
    assert reason in REASONS


def test_judge_with_the_dupefilter_canonicalizer() -> None:
    page, target = "https://example.com/a/", "https://example.com/a"
    assert judge(page, target, status=200) == ("same", "same")
    strict = URLCanonicalizer(trailing_slash=False)
    assert judge(page, target, status=200, canonicalize=strict) == ("apply", "applied")


def test_every_reason_is_tested() -> None:
    assert {case[-1] for case in JUDGE} == set(REASONS)


def test_end_to_end() -> None:
    """What the middleware does with a page: find, resolve, judge."""
    body = (
        b"<!DOCTYPE html><html><head><meta charset=utf-8><title>Shoe</title>"
        b'<base href="/shop/"><!-- <link rel=canonical href="/old"> -->'
        b"<script>document.write('<link rel=canonical href=/js>')</script>"
        b'<link rel="stylesheet" href="/s.css">'
        b'<link\n rel="Canonical"\n href="shoe?id=1&amp;c=2" />'
        b"</head><body>" + b"<p>text</p>" * 1000
    )
    page = "https://www.example.com/shop/shoe?id=1&c=2&utm_source=x"
    href, base = find_canonical(body, encoding="utf-8")
    assert (href, base) == ("shoe?id=1&c=2", "/shop/")
    assert href is not None
    target = resolve(href, page, base)
    assert target == "https://www.example.com/shop/shoe?id=1&c=2"
    assert judge(page, target, status=200) == ("same", "same")
    header = parse_link_header([b'<https://www.example.com/shop/shoe?id=1>; rel="canonical"'])
    assert header is not None
    assert judge(page, resolve(header, page), status=200) == ("apply", "applied")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from([None, "utf-8", "cp1252", "utf-16", "bogus"]))
def test_find_canonical_never_raises(body: bytes, encoding: str | None) -> None:
    href, base = find_canonical(body, encoding=encoding, limit=1500)
    assert href is None or (isinstance(href, str) and href)
    assert base is None or (isinstance(base, str) and base)


_HTMLISH = st.lists(
    st.sampled_from(
        [
            *"<>/!-=\"' \n\tabc&;#x0\x00\u00e9",
            *("link", "rel", "canonical", "href", "base", "script", "head", "body"),
            *("template", "noscript", "<!--", "-->", "&amp;"),
        ]
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_HTMLISH, max_size=6).map("".join))
def test_find_canonical_never_raises_on_htmlish_text(html: str) -> None:
    find_canonical(html.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=200), st.binary(max_size=200)), max_size=4))
def test_parse_link_header_never_raises(values: list[str | bytes]) -> None:
    target = parse_link_header(values)
    assert target is None or isinstance(target, str)


_LINKISH = st.lists(
    st.sampled_from(
        ["<", ">", ";", ",", "=", '"', "\\", " ", "rel", "canonical", "anchor", "/a", "x"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINKISH, max_size=3))
def test_parse_link_header_never_raises_on_linkish_text(values: list[str]) -> None:
    parse_link_header(values)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60), st.integers(min_value=100, max_value=599))
def test_resolve_and_judge_never_raise(href: str, page: str, status: int) -> None:
    target = resolve(href, "https://example.com/a/b", page)
    assert judge("https://example.com/a/b", target, status=status)[1] in REASONS
    assert judge(page, href, status=status, allowed_domains=["example.com"])[1] in REASONS
