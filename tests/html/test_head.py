"""read_head: where the head ends for browsers, inline SVG, the 1 MiB limit, hostile bodies.

The expected values of the tree-building cases (what ends the head, what an
``<svg>`` or ``<math>`` does to a ``<link>``) are what html5lib 1.1 (with scripting
on, as in browsers) and lexbor (selectolax) build, except where html5lib predates
the current HTML standard (``</p>`` in an ``<svg>``, ``<template>`` in the head),
where lexbor is followed, and after ``</head>`` or ``<body``, where reading stops.
"""

from __future__ import annotations

import codecs

import pytest

import scrapy_dedup.html
from scrapy_dedup.html import DEFAULT_LIMIT, Head, find_canonical, read_head
from scrapy_dedup.html.head import AFTER_HEAD_TAGS, MAX_STEPS

MIB = 1024 * 1024


def test_read_head_api() -> None:
    head = read_head(b'<base href="/b/"><link rel="canonical" href="/a">')
    assert isinstance(head, Head)
    assert head == Head(canonical="/a", base="/b/", after_head=False)
    assert (head.canonical, head.base, head.after_head) == ("/a", "/b/", False)
    assert read_head(b"") == Head(None, None, False)
    assert {"read_head", "Head", "find_canonical"} <= set(scrapy_dedup.html.__all__)
    assert DEFAULT_LIMIT == MIB


@pytest.mark.parametrize(
    "html",
    [
        '<link rel="canonical" href="/a">',
        '<iframe src="/t"></iframe><link rel="canonical" href="/a">',
        "<svg><link rel=canonical href=/x></svg><base href=/b/>",
        "<p>no head at all",
    ],
)
def test_find_canonical_is_read_head_without_the_flag(html: str) -> None:
    head = read_head(html.encode())
    assert find_canonical(html.encode()) == (head.canonical, head.base)


# (html, canonical, after_head): what ends the head for browsers and Google, and what does not
AFTER_HEAD = [
    # the real cases: a hidden iframe, a hidden input, a PHP warning printed before <html>
    (
        '<html><head><iframe src="https://www.googletagmanager.com/ns.html" height="0" '
        'style="display:none"></iframe><link rel="canonical" href="/a"></head><body>',
        "/a",
        True,
    ),
    (
        '<head><input type="hidden" name="token" value="1"><link rel="canonical" href="/a">',
        "/a",
        True,
    ),
    (
        "<br />\n<b>Warning</b>:  Undefined variable $x in <b>/var/www/index.php</b> on line "
        "<b>3</b><br />\n<!DOCTYPE html><html><head><title>t</title>"
        '<link rel="canonical" href="/a"></head><body>',
        "/a",
        True,
    ),
    ('Notice: session started\n<html><head><link rel="canonical" href="/a">', "/a", True),
    ('<head>&nbsp;<link rel="canonical" href="/a">', "/a", True),
    ('<head><div id="fb-root"></div><link rel="canonical" href="/a">', "/a", True),
    ('<head><img src="/pixel.gif"><link rel="canonical" href="/a">', "/a", True),
    ('<head><svg width="0"></svg><link rel="canonical" href="/a">', "/a", True),
    ('<head><textarea></textarea><link rel="canonical" href="/a">', "/a", True),
    ('<head></body><link rel="canonical" href="/a">', "/a", True),
    ('<head></br><link rel="canonical" href="/a">', "/a", True),
    ('<head>\x00<link rel="canonical" href="/a">', "/a", True),
    ('<head>< <link rel="canonical" href="/a">', "/a", True),  # a "<" that starts no tag is text
    ('<bodyx><link rel="canonical" href="/a">', "/a", True),
    # the head goes on through its own elements, whitespace, comments, stray end tags
    (
        '\n\n  <!DOCTYPE html>\n<!-- x --><html lang="en"><head><meta charset="utf-8">'
        "<title>t</title><style>p{}</style><script>x()</script><noscript><img src=x></noscript>"
        '<base href="/b/"><basefont><bgsound><noframes></noframes><template><div>x</div>'
        '</template><head><html></p></div></span><link rel="canonical" href="/a">',
        "/a",
        False,
    ),
    ('<?xml version="1.0"?><link rel="canonical" href="/a">', "/a", False),
    # the first canonical counts, with where it is
    (
        '<link rel="canonical" href="/a"><iframe></iframe><link rel="canonical" href="/b">',
        "/a",
        False,
    ),
    ('<iframe></iframe><link rel="canonical"><link rel="canonical" href="/b">', "/b", True),
    ("<iframe></iframe><p>no canonical", None, False),
    # what the head ends at is not what reading stops at
    ('<div></head><link rel="canonical" href="/a">', None, False),
    ('<div><body><link rel="canonical" href="/a">', None, False),
]


@pytest.mark.parametrize(("html", "canonical", "after_head"), AFTER_HEAD)
def test_after_head(html: str, canonical: str | None, after_head: bool) -> None:
    head = read_head(html.encode())
    assert (head.canonical, head.after_head) == (canonical, after_head)


def test_base_after_the_head_still_counts() -> None:
    # Browsers take the first <base href> of the document, in the head or not.
    assert read_head(b'<iframe></iframe><base href="/b/">') == Head(None, "/b/", False)


def test_after_head_reading_is_bounded() -> None:
    canonical = b'<link rel="canonical" href="/a">'
    # AFTER_HEAD_TAGS start tags, counting the one that ends the head, are read past...
    near = b"<head>" + b"<span>x</span>" * AFTER_HEAD_TAGS + canonical
    assert read_head(near) == Head("/a", None, True)
    # ...and no more: deep in a body without <body>, a <link> is not the page's.
    far = b"<head>" + b"<span>x</span>" * (AFTER_HEAD_TAGS + 1) + canonical
    assert read_head(far) == Head(None, None, False)
    # Head elements after the end of the head do not count: a warning then a whole head.
    warning = b"<br />\n<b>Warning</b>: x in <b>/a.php</b> on line <b>1</b><br />\n"
    page = warning * 10 + b"<html><head>" + b'<meta name="x" content="y">' * 2000 + canonical
    assert read_head(page) == Head("/a", None, True)
    # Nor the elements of an inline SVG sprite (it counts as one tag).
    sprite = b"<svg>" + b'<symbol id="i"><path d="M0 0"/><g></g></symbol>' * 1000 + b"</svg>"
    assert read_head(b"<head>" + sprite + canonical) == Head("/a", None, True)


def test_the_head_limit_is_one_mib() -> None:
    canonical = b'<link rel="canonical" href="/a">'
    style = b"<style>" + b".a>b{color:red}" * (580_000 // 15) + b"</style>"
    script = b"<script>" + b"if(a<b){c='</div>'}" * (300_000 // 19) + b"</script>"
    assert read_head(b"<html><head>" + style + canonical) == Head("/a", None, False)
    assert read_head(b"<html><head>" + script + style + canonical) == Head("/a", None, False)
    late = b"<html><head><style>" + b"x" * MIB + b"</style>" + canonical
    assert read_head(late) == Head(None, None, False)
    assert read_head(late, limit=len(late)) == Head("/a", None, False)
    # Reading stops at </head> and <body long before the limit.
    assert read_head(b"<head></head>" + canonical) == Head(None, None, False)
    assert read_head(b"<head><body>" + canonical) == Head(None, None, False)


# (html, canonical, after_head): inline <svg> and <math> ("foreign content")
FOREIGN = [
    # a canonical after an inline svg in the head: the svg ended the head
    (
        '<head><svg style="display:none"><symbol id="i"><path d="M0 0"/></symbol></svg>'
        '<link rel="canonical" href="/a"></head><body>',
        "/a",
        True,
    ),
    # a <link> inside an svg is an svg element, not an HTML link
    ('<head><svg><link rel="canonical" href="/x"></svg></head><body>', None, False),
    (
        '<head><svg><link rel="canonical" href="/x"></svg><link rel="canonical" href="/a">',
        "/a",
        True,
    ),
    ('<svg><g><link rel="canonical" href="/x"/></g></svg>', None, False),
    ('<svg><svg></svg><link rel="canonical" href="/x"></svg>', None, False),  # nested svg
    ('<svg><template><link rel="canonical" href="/x"></template></svg>', None, False),
    # an svg <style> or <script> holds markup, not text: "</head>" in it is an end tag that
    # browsers ignore there, the svg ends at </svg> even inside them, and CDATA is allowed
    (
        '<head><svg><style></head></style></svg><link rel="canonical" href="/a"></head><body>',
        "/a",
        True,
    ),
    ('<svg><style>.a{fill:red}</svg><link rel="canonical" href="/a">', "/a", True),
    ('<svg><script>x()</svg><link rel="canonical" href="/a">', "/a", True),
    ('<svg><style><link rel="canonical" href="/x"></style></svg>', None, False),
    (
        '<svg><script><![CDATA[ x = "</script>"; <link rel="canonical" href="/x"> ]]></script>'
        '</svg><link rel="canonical" href="/a">',
        "/a",
        True,
    ),
    # CDATA: text, whatever it holds
    (
        '<head><svg><![CDATA[ <link rel="canonical" href="/x"> ]]></svg>'
        '<link rel="canonical" href="/a">',
        "/a",
        True,
    ),
    ('<svg><![CDATA[ a > b <link rel="canonical" href="/x"> ]]></svg>', None, False),
    ('<svg><![CDATA[ </svg> ]]><link rel="canonical" href="/x"></svg>', None, False),
    ('<svg><![CDATA[ <link rel="canonical" href="/x">', None, False),  # never closed
    # ...but only in foreign content: in HTML it is a bogus comment, ending at ">"
    ('<![CDATA[ a > b <link rel="canonical" href="/a"> ]]>', "/a", True),
    # an svg <title>, <desc>, <foreignObject> holds HTML again
    ('<svg><title><link rel="canonical" href="/t"></title></svg>', "/t", True),
    ('<svg><title><style><link rel="canonical" href="/x"></style></title></svg>', None, False),
    ('<svg><foreignObject><div><![CDATA[ a > b <link rel="canonical" href="/f"> ]]>', "/f", True),
    ('<svg><title>t</title><link rel="canonical" href="/x"></svg>', None, False),
    # what ends an svg left open: </svg>, a breakout tag, an HTML end tag around it
    ('<svg><path d="M0 0"></svg><link rel="canonical" href="/a">', "/a", True),
    ('<svg/><link rel="canonical" href="/a">', "/a", True),
    ('<svg><meta charset="utf-8"><link rel="canonical" href="/a">', "/a", True),
    ('<svg><font color="red"><link rel="canonical" href="/a">', "/a", True),
    ('<svg><font><link rel="canonical" href="/x"></font></svg>', None, False),
    ('<svg></p><link rel="canonical" href="/a">', "/a", True),
    ('<head><span><svg><use href="#i"></span><link rel="canonical" href="/a">', "/a", True),
    ('<head><div><span><svg><use href="#i"></span><link rel="canonical" href="/a">', "/a", True),
    ('<head><span><div><svg></span><link rel="canonical" href="/x">', None, False),
    ('<svg><body><link rel="canonical" href="/x">', None, False),  # <body stops reading
    # MathML: the same, with <mi>, <mo>, <mn>, <ms>, <mtext> holding HTML
    ('<math><link rel="canonical" href="/x"></math>', None, False),
    ('<math><mi><link rel="canonical" href="/m"></mi></math>', "/m", True),
    ('<math><annotation-xml encoding="text/html"><link rel="canonical" href="/h">', "/h", True),
    (
        '<math><annotation-xml><link rel="canonical" href="/x"></annotation-xml></math>',
        None,
        False,
    ),
    ('<math><annotation-xml><svg><title><link rel="canonical" href="/s">', "/s", True),
    # in a <template>, an svg is part of its content: the head goes on
    ('<template><svg><p></svg></template><link rel="canonical" href="/a">', "/a", False),
    ('<template><svg></template><link rel="canonical" href="/a">', "/a", False),
]


@pytest.mark.parametrize(("html", "canonical", "after_head"), FOREIGN)
def test_svg_and_math(html: str, canonical: str | None, after_head: bool) -> None:
    head = read_head(html.encode())
    assert (head.canonical, head.after_head) == (canonical, after_head)


def test_base_inside_svg_is_not_the_base() -> None:
    assert read_head(b'<svg><base href="/x/"></svg><base href="/b/">').base == "/b/"


# (html, canonical): the tokenizer, where the old reader was loose
TOKENIZER = [
    ('<link rel="&#99;anonical" href="/a">', "/a"),  # character references in rel
    ('<link title="a>b" rel="canonical" href="/a">', "/a"),
    ('<meta content="<link rel=canonical href=/x>"><link rel="canonical" href="/a">', "/a"),
    ('<link a=b="c>" rel="canonical" href="/x">', None),  # an unquoted value ends at ">"
    ('<link rel="canonical"href="/a">', "/a"),
    ('<link rel =canonical href= "/a" />', "/a"),
    ('<link =rel="canonical" href="/x">', None),  # an attribute named '=rel="canonical"'
    ('<link rel="canonical" href="/a"/ >', "/a"),
    ("<link " + "a=b " * 1000 + 'rel="canonical" href="/a">', "/a"),
    ("<link " + "x " * 100_000 + 'rel="canonical" href="/a">', "/a"),
    ("<link " + 'rel="canonical" ' + 'a="x" ' * 1000 + 'href="/a">', "/a"),
    # <script> ends at its first "</script", except inside "<!-- <script> ... -->"
    (
        "<script><!-- document.write('<script></script><link rel=canonical href=/x>') -->"
        '</script><link rel="canonical" href="/a">',
        "/a",
    ),
    ('<script><!--></script><link rel="canonical" href="/a">', "/a"),
    ('<script><!-- x --></script><link rel="canonical" href="/a">', "/a"),
    ('<script><!-- <script> --></script><link rel="canonical" href="/a">', "/a"),
    ('<script><!-- <script> </script> x</script><link rel="canonical" href="/a">', "/a"),
    ('<script><!-- <script> </script><link rel="canonical" href="/x">', None),
    ('<style></style x="a>b"><link rel="canonical" href="/a">', "/a"),
]


@pytest.mark.parametrize(("html", "canonical"), TOKENIZER)
def test_tokenizer(html: str, canonical: str | None) -> None:
    assert read_head(html.encode()).canonical == canonical


def hostile() -> dict[str, tuple[bytes, str | None]]:
    """1 MiB bodies that cost a naive reader a Python step per byte or a regex
    backtracking; ``benches/bench_head.py`` times them."""
    n = MIB
    canonical = b'<link rel="canonical" href="/a">'
    return {
        "<": (b"<" * n, None),
        "<a": (b"<a" * (n // 2), None),
        "<a>": (b"<a>" * (n // 3), None),
        "<!-- unclosed": (b"<!--" + b"x" * n, None),
        "<!---->": (b"<!---->" * (n // 8) + canonical, "/a"),  # comments cost no step
        "<meta>": (b"<meta>" * (n // 6), None),
        "<link  no >": (b"<link " * (n // 6), None),
        "<link <link ... >": (b"<link " * (n // 7) + canonical, "/a"),  # one tag
        "<link rel=canonical>": (b"<link rel=canonical>" * (n // 20), None),
        "href=%": (b"<link rel=canonical href=" + b"%" * n, None),
        "href=a>": (b"<link rel=canonical href=" + b"a" * (n - 40) + b">", "a" * (n - 40)),
        "&#": (
            b'<link rel=canonical href="' + b"&#" * (n // 2 - 20) + b'">',
            "&#" * (n // 2 - 20),
        ),
        "<script> unclosed": (b"<script>" + b"x" * n + canonical, None),
        "<script><!--<script>": (b"<script><!--" + b"<script></script>" * (n // 17), None),
        "<template> nested": (b"<template>" * 100_000 + canonical, None),
        "<link a a a": (b"<link " + b"a " * (n // 2 - 40) + b'rel=canonical href="/a">', "/a"),
        # past MAX_STEPS attributes (read 64 at a time while looking for the tag's end)
        "<link a=b": (b"<link " + b"a=b " * (n // 4 - 20) + b"rel=canonical href=/a>", None),
        "<svg><g>": (b"<svg>" + b"<g>" * (n // 3), None),
        "CDATA unclosed": (b"<svg><![CDATA[" + b"]" * n + canonical, None),
        "null bytes": (b"\x00" * (n - 100) + canonical, "/a"),  # text: after the head
        "bytes 0-255": (bytes(range(256)) * (n // 256), None),
    }


@pytest.mark.parametrize("name", list(hostile()))
def test_hostile_bodies(name: str) -> None:
    body, canonical = hostile()[name]
    assert read_head(body).canonical == canonical


def test_what_the_step_bound_costs() -> None:
    """Past MAX_STEPS tags read one at a time, reading stops: a head is tens to
    a few thousand of them."""
    canonical = b'<link rel="canonical" href="/a">'
    assert read_head(b"<head>" + b"<meta>" * (MAX_STEPS - 10) + canonical).canonical == "/a"
    assert read_head(b"<head>" + b"<meta>" * MAX_STEPS + canonical).canonical is None
    # Text and comments are skipped without counting.
    cheap = b"<head>" + b"<!-- x -->\n" * 50_000 + canonical
    assert read_head(cheap).canonical == "/a"


# (body, encoding, canonical, after_head): decoding, and what comes before the first "<"
ENCODINGS = [
    (codecs.BOM_UTF8 + '<link rel="canonical" href="/café">'.encode(), None, "/café", False),
    (codecs.BOM_UTF8 + b'\n  <html><head><link rel="canonical" href="/a">', None, "/a", False),
    (codecs.BOM_UTF8 + '<link rel="canonical" href="/é">'.encode(), "cp1252", "/é", False),
    ('\ufeff<link rel="canonical" href="/é">'.encode("utf-16-le"), None, "/é", False),
    ('\ufeff<link rel="canonical" href="/é">'.encode("utf-16-be"), None, "/é", False),
    ('\ufeff<link rel="canonical" href="/é">'.encode("utf-16-be"), "utf-8", "/é", False),
    (b'\r\n\t \n<!DOCTYPE html>\n<link rel="canonical" href="/a">', None, "/a", False),
    # without a BOM, a UTF-16 body is not HTML to a browser either, unless declared
    ('<link rel="canonical" href="/a">'.encode("utf-16-le"), None, None, False),
    ('<link rel="canonical" href="/a">'.encode("utf-16-le"), "utf-16-le", "/a", False),
    # a <meta> charset in the first 1024 bytes, when no encoding is given
    (
        '<meta charset="windows-1252"><link rel="canonical" href="/café">'.encode("cp1252"),
        None,
        "/café",
        False,
    ),
    (
        '<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">'
        '<link rel="canonical" href="/\u0436">'.encode("koi8-r"),
        None,
        "/\u0436",
        False,
    ),
    ('<meta charset="utf-16"><link rel="canonical" href="/é">'.encode(), None, "/é", False),
    (
        b" " * 1024 + '<meta charset="cp1252"><link rel="canonical" href="/é">'.encode(),
        None,
        "/é",
        False,
    ),
    (
        '<meta charset="utf-8"><link rel="canonical" href="/é">'.encode("cp1252"),
        "cp1252",
        "/é",
        False,
    ),
    # encodings named as browsers name them; UTF-7 (which smuggles markup) is refused
    (b'<link rel="canonical" href="/\x80">', "latin-1", "/\u20ac", False),
    (b"+ADw-link rel=canonical href=/x+AD4-", "utf-7", None, False),
]


@pytest.mark.parametrize(("body", "encoding", "canonical", "after_head"), ENCODINGS)
def test_encoding(
    body: bytes, encoding: str | None, canonical: str | None, after_head: bool
) -> None:
    head = read_head(body, encoding=encoding)
    assert (head.canonical, head.after_head) == (canonical, after_head)


def test_overlong_attribute_values_are_not_decoded() -> None:
    """A 1 MiB href of character references is returned as written (and then
    ignored by the middleware as too long), not decoded at a Python call each."""
    href = "&a" * (512 * 1024)
    head = read_head(f'<link rel=canonical href="{href}">'.encode(), limit=2 * 1024 * 1024)
    assert head.canonical == href
    assert read_head(b'<link rel=canonical href="/a&amp;b">').canonical == "/a&b"
