"""``rel=canonical`` in HTML: the canonical link and base of a page's ``<head>``.

Pure functions, no Scrapy import. Reading follows the HTML tokenizer and, where
it matters for the head, the tree builder (comments, ``<script>`` and the other
text-only elements, ``<template>``, inline ``<svg>``/``<math>``), but only over a
bounded prefix of the body, so a 10 MB page costs no more than its first
``limit`` bytes:

>>> read_head(b'<head><base href="/blog/"><link REL="Canonical" href="post?id=1&amp;p=2">')
Head(canonical='post?id=1&p=2', base='/blog/', after_head=False)
>>> read_head(b'<head><iframe src="/tag"></iframe><link rel="canonical" href="/a">')
Head(canonical='/a', base=None, after_head=True)

Every function here accepts garbage and never raises.
"""

from __future__ import annotations

import codecs
import html
import re
from functools import cache
from html.entities import html5 as _HTML5_ENTITIES
from typing import NamedTuple

from w3lib.encoding import html_body_declared_encoding, resolve_encoding, to_unicode

__all__ = [
    "AFTER_HEAD_TAGS",
    "DEFAULT_LIMIT",
    "MAX_STEPS",
    "WS_RUN_RE",
    "Head",
    "ascii_lower",
    "find_canonical",
    "read_head",
]

#: How many bytes of a body :func:`read_head` looks at by default.
DEFAULT_LIMIT = 1024 * 1024

#: How many start tags of body elements are read once the head has ended without
#: ``</head>`` (counting the one that ended it) before reading gives up: a PHP
#: warning printed before ``<html>`` is 5 of them (``<br>``, three ``<b>``, ``<br>``),
#: an Xdebug one with its call stack 30 to 60, a hidden ``<iframe>`` or ``<input>``
#: one. Head elements after it (a whole head after a warning) and the inside of an
#: ``<svg>`` do not count.
AFTER_HEAD_TAGS = 256
#: How many tags (and runs of attributes of a ``<link>``, turns of a ``<script>``
#: holding ``<!--``) are read one at a time before reading gives up; the text and
#: comments between them are skipped by regexes. A real head has tens to a few
#: thousand (an inline SVG counts each of its elements); this bounds the cost of a
#: hostile body to about 30 ms.
MAX_STEPS = 10_000


class Head(NamedTuple):
    """What :func:`read_head` found."""

    #: The ``href`` of the first ``<link rel=canonical>`` with a non-empty one.
    canonical: str | None
    #: The ``href`` of the first ``<base>`` that has one.
    base: str | None
    #: The canonical link came after markup that ends ``<head>`` for browsers and
    #: Google (a ``<div>``, an ``<iframe>``, an ``<svg>``, text...): it is in
    #: the body of the document.
    after_head: bool


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_WS = "\t\n\f\r "  # HTML's ASCII whitespace (str.split/strip would also take U+00A0 and co.)
WS_RUN_RE = re.compile(r"[\t\n\f\r ]+")
_CHARREF_RE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]*;?)")


def ascii_lower(text: str) -> str:
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


# Tags as the HTML tokenizer reads them. An attribute name may start with "=" and
# hold quotes; a value is quoted only right after "=" (the name's, not one inside an
# unquoted value); a "/" before ">" is the self-closing flag, elsewhere a separator.
# The names between two values come in one run ("a b c=d" is one _ATTRS piece).
# Each regex reads a tag in one pass: what it has read is never read a second way
# ("(?=(...))\1" is an atomic group, which Python 3.10 lacks), and a tag with many
# attributes is read _ATTRS_AT_ONCE at a time (long repeats are slow in "re").
_S = r"[\t\n\f\r ]"
_SEPARATORS = r"[\t\n\f\r ]*(?:/+(?!>)[\t\n\f\r ]*)*"
_VALUE = r"""(?:"[^"]*"?|'[^']*'?|[^\t\n\f\r >]*)"""  # a quote left open runs to the end
_NAMES = r"(?:=[^\t\n\f\r />=]*|[^\t\n\f\r />=])[^/>=]*"
_ATTRS = rf"{_NAMES}(?:={_S}*{_VALUE}|/(?!>))?{_SEPARATORS}"
_ATTRS_AT_ONCE = 64
_CONTENT = rf"{_SEPARATORS}(?:{_ATTRS}){{0,{_ATTRS_AT_ONCE}}}"
_FLAGS = re.I | re.A
_TAG_RE = re.compile(rf"<(?=((/?)([A-Za-z][^\t\n\f\r />]*){_CONTENT}))\1(/?)>", _FLAGS)
_TAG_NAME_RE = re.compile(r"<(/?)([A-Za-z][^\t\n\f\r />]*)")
_CONTENT_RE = re.compile(_CONTENT, _FLAGS)
_ATTRS_RE = re.compile(rf"({_NAMES})(?:={_S}*({_VALUE})|/(?!>))?{_SEPARATORS}", _FLAGS)
_SEPARATORS_RE = re.compile(_SEPARATORS)
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_MARKUP_START = _LETTERS | {"!", "?", "/"}


@cache
def _whole_name_re(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![^\t\n\f\r ]){name}(?![^\t\n\f\r ])", _FLAGS)


# What reading skips in one regex call, text and comments, 256 pieces at a time;
# a tag or anything else is left to Python. The head itself skips only whitespace:
# other text ends it.
_COMMENT = r"<!--(?:-?>|.*?--!?>)"
_BOGUS = r"<(?:!(?!--)|\?|/(?![A-Za-z]))[^>]*>"  # doctype, <?xml>, "</>", "</3>"...
_CDATA = r"<!(?-i:\[CDATA\[).*?\]\]>"  # only in <svg> and <math>
_BOGUS_IN_FOREIGN = r"<(?:!(?!--|(?-i:\[CDATA\[))|\?|/(?![A-Za-z]))[^>]*>"
_TEXT = r"[^<]+|<+(?![A-Za-z!?/])"  # a "<" that starts no markup is text
_SKIP_SPACE, _SKIP_TEXT, _SKIP_FOREIGN = (
    re.compile(rf"(?:{alternatives}){{0,256}}", _FLAGS | re.S).match
    for alternatives in (
        rf"[\t\n\f\r ]+|{_COMMENT}|{_BOGUS}",
        rf"{_TEXT}|{_COMMENT}|{_BOGUS}",
        rf"{_TEXT}|{_COMMENT}|{_CDATA}|{_BOGUS_IN_FOREIGN}",
    )
)

# Elements whose content is text, not markup, as long as they are HTML elements:
# a <link> inside is no link. <noscript> is one when scripting is on, as in
# every browser; <plaintext> never ends. <script> has its own rules (see _SCRIPT_RE).
_RAW_TEXT = frozenset(
    {"script", "style", "noscript", "title", "textarea", "xmp", "iframe", "noembed", "noframes"}
)
_END_OF_RAW_RE = {
    name: re.compile(rf"</{name}(?=[\t\n\f\r />])", _FLAGS) for name in _RAW_TEXT - {"script"}
}
# The start tags the "in head" insertion mode keeps in the head; any other, and
# any text that is not whitespace, ends it.
_HEAD_ELEMENTS = frozenset(
    {"base", "basefont", "bgsound", "link", "meta", "title", "noscript", "noframes"}
    | {"style", "script", "template", "head", "html"}
)
# Start tags that end an <svg> or <math> (foreign content) that is still open.
_BREAKOUT = frozenset(
    {"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em"}
    | {"embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing"}
    | {"menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong"}
    | {"strike", "sub", "sup", "table", "tt", "u", "ul", "var"}
)
# Foreign elements whose content is parsed as HTML again (integration points).
_HTML_POINTS = frozenset({("svg", "foreignobject"), ("svg", "desc"), ("svg", "title")})
_TEXT_POINTS = frozenset({"mi", "mo", "mn", "ms", "mtext"})
# HTML elements that stop an end tag looking for its element further up (the
# "special" category); end tags that close their element wherever it is "in
# scope", and what bounds a scope; elements that have no end tag.
_SPECIAL = frozenset(
    {"address", "applet", "area", "article", "aside", "base", "basefont", "bgsound"}
    | {"blockquote", "body", "br", "button", "caption", "center", "col", "colgroup", "dd"}
    | {"details", "dir", "div", "dl", "dt", "embed", "fieldset", "figcaption", "figure"}
    | {"footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head"}
    | {"header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen", "li", "link"}
    | {"listing", "main", "marquee", "menu", "meta", "nav", "noembed", "noframes"}
    | {"noscript", "object", "ol", "p", "param", "plaintext", "pre", "script", "search"}
    | {"section", "select", "source", "style", "summary", "table", "tbody", "td", "template"}
    | {"textarea", "tfoot", "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp"}
)
_SCOPED = frozenset(
    {"address", "article", "aside", "blockquote", "button", "center", "details", "dialog"}
    | {"dir", "div", "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup"}
    | {"listing", "main", "menu", "nav", "ol", "pre", "search", "section", "summary", "ul"}
    | {"li", "dd", "dt", "h1", "h2", "h3", "h4", "h5", "h6"}
)
_SCOPE = frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object"})
_VOID = frozenset(
    {"area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input"}
    | {"keygen", "link", "meta", "param", "source", "track", "wbr"}
)

# Where a <script> ends: after "<!--", a "<script" nested in it hides the next
# "</script" (old pages: "<!-- document.write('<script></script>') -->").
_SCRIPT_DATA, _SCRIPT_ESCAPED, _SCRIPT_DOUBLE = range(3)
_SCRIPT_RE = {
    _SCRIPT_DATA: re.compile(r"<!--|</script(?=[\t\n\f\r />])", _FLAGS),
    _SCRIPT_ESCAPED: re.compile(r"-->|</script(?=[\t\n\f\r />])|<script(?=[\t\n\f\r />])", _FLAGS),
    _SCRIPT_DOUBLE: re.compile(r"-->|</script(?=[\t\n\f\r />])", _FLAGS),
}


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


#: Attribute values longer than this are returned undecoded: a URL that long is
#: no URL Scrapy follows (the middleware ignores it by length), and decoding
#: costs a Python call per reference (390 ms for 1 MiB of "&a").
MAX_DECODED = 16 * 1024


def _unescape_attr(value: str) -> str:
    if "&" not in value or len(value) > MAX_DECODED:
        return value
    return _CHARREF_RE.sub(_charref, value)


def _clean_href(value: str | None) -> str | None:
    if value is None:
        return None
    value = _unescape_attr(value).strip(_WS)
    return value or None


# Only these byte order marks count, and they win over any declared encoding.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _decode(raw: bytes, encoding: str | None) -> str:
    """``raw`` as browsers decode it: after a byte order mark in its encoding; else
    in ``encoding``; else in the one a ``<meta>`` of the first 1024 bytes
    declares; else (or when the encoding is unknown) in UTF-8."""
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return raw[len(bom) :].decode(name, "replace")
    try:
        if encoding is None:
            encoding = html_body_declared_encoding(raw[:1024])
            if encoding and encoding.startswith(("utf-16", "utf-32")):
                encoding = "utf-8"  # an ASCII <meta> cannot be UTF-16: browsers read UTF-8
        else:
            encoding = resolve_encoding(encoding)  # browsers' names (latin-1 is cp1252...)
        if encoding:
            return to_unicode(raw, encoding)
    except Exception:  # a bytes-to-bytes codec, a codec that fails anyway
        pass
    return raw.decode("utf-8", "replace")


def read_head(body: bytes, *, encoding: str | None = None, limit: int = DEFAULT_LIMIT) -> Head:
    """The canonical link and the base declared by the ``<head>`` of an HTML ``body``.

    The canonical is the ``href`` of the first ``<link>`` whose ``rel`` token list
    holds ``canonical`` (any case) and whose ``href`` is not empty; the base is the
    ``href`` of the first ``<base>`` that has one. Both are returned as written, with
    character references decoded and surrounding whitespace stripped; resolve them
    with :func:`resolve`.

    Only the first ``limit`` bytes are read, and reading stops at ``</head>`` or
    ``<body``. A ``<link>`` in a comment, in ``<script>``, ``<style>``,
    ``<noscript>`` or another text-only element, in a ``<template>``, or inside
    an inline ``<svg>`` or ``<math>`` (but for their ``<title>``-like parts that
    hold HTML) is not one. Markup that ends the head for browsers without
    ``</head>`` (a start tag that is not for the head, text) does not stop
    reading: a canonical link up to :data:`AFTER_HEAD_TAGS` start tags further
    is still taken, with ``after_head`` set; past :data:`MAX_STEPS` tags,
    reading stops.

    ``body`` is decoded with its byte order mark, else ``encoding``, else the
    ``<meta charset>`` of its first 1024 bytes, else (or when the encoding is
    unknown) as UTF-8, bad bytes replaced.

    >>> read_head(b"<link rel='alternate Canonical' href=' /a?b=1&amp;c=2 '/>")
    Head(canonical='/a?b=1&c=2', base=None, after_head=False)
    >>> read_head(b"<!-- <link rel=canonical href=/old> --><link href=/new rel=canonical>")
    Head(canonical='/new', base=None, after_head=False)
    >>> read_head(b"<head></head><body><link rel=canonical href=/late>")
    Head(canonical=None, base=None, after_head=False)
    >>> read_head(b"<svg><link rel=canonical href=/icon></svg><link rel=canonical href=/a>")
    Head(canonical='/a', base=None, after_head=True)
    """
    return _Reader(_decode(bytes(body[: max(limit, 0)]), encoding)).read()


def find_canonical(
    body: bytes, *, encoding: str | None = None, limit: int = DEFAULT_LIMIT
) -> tuple[str | None, str | None]:
    """``(canonical_href, base_href)`` of :func:`read_head`.

    >>> find_canonical(b"<link rel='alternate Canonical' href=' /a?b=1&amp;c=2 '/>")
    ('/a?b=1&c=2', None)
    >>> find_canonical(b"<link rel=canonical href='/unclosed>")
    (None, None)
    """
    head = read_head(body, encoding=encoding, limit=limit)
    return head.canonical, head.base


# An open element that matters to reading: an HTML <template>, or an element of
# an <svg> or <math>, as (namespace, lowercase name, kind).
_Open = tuple[str, str, str]
_PLAIN, _HTML_POINT, _TEXT_POINT, _ANNOTATION = "", "html", "text", "annotation"
# A tag: end tag?, lowercase name, where the name ends, where the tag ends, self-closing?
_Tag = tuple[bool, str, int, int, bool]


class _Reader:
    """One reading of a decoded head: the HTML tokenizer, and of the tree builder
    what decides where a ``<link>`` ends up (the head, the body, a template, an svg).
    Text and comments are skipped by regexes; each tag costs a step."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.canonical: str | None = None
        self.base: str | None = None
        self.base_seen = False
        self.after_head = False
        self.head_ended = False
        self.tags_left = AFTER_HEAD_TAGS
        self.steps_left = MAX_STEPS
        self.stack: list[_Open] = []
        self.templates: list[int] = []  # where the <template>s are in the stack
        self.points: list[int] = []  # where the integration points are
        self.named: dict[str, list[int]] = {}  # where the foreign elements of each name are
        self.html_named: dict[str, list[int]] = {}  # and the HTML ones inside them
        # HTML elements started after the head and not ended, roughly: the body's
        # structure is not followed, this is only for an <svg> left open in one.
        self.opened: list[str] = []

    def read(self) -> Head:
        end = len(self.text)
        pos = 0
        while self.steps_left > 0:
            self.steps_left -= 1
            pos = self._skip(pos)
            if pos >= end:
                break
            after = self._step(pos)
            if after is None or (self.canonical is not None and self.base_seen):
                break
            pos = after
        return Head(self.canonical, self.base, self.after_head)

    def _skip(self, pos: int) -> int:
        if self.text.startswith("<", pos) and self.text[pos + 1 : pos + 2] in _LETTERS:
            return pos  # a tag: the most common case by far
        if self.stack and self.stack[-1][0] != "html":
            skip = _SKIP_FOREIGN
        else:
            skip = _SKIP_TEXT if self.head_ended or self.stack else _SKIP_SPACE
        while True:
            after = skip(self.text, pos).end()  # type: ignore[union-attr]  # always matches
            if after == pos:
                return pos
            pos = after

    def _step(self, pos: int) -> int | None:
        """Handle the markup at ``pos`` (or text, in the head) that the skipping
        left; where reading goes on (``None``: it stops)."""
        text = self.text
        if text[pos] != "<" or text[pos + 1 : pos + 2] not in _MARKUP_START:
            self.head_ended = True  # text that is not whitespace: only the head stops at it
            return pos
        tag = self._tag(pos)
        if tag is None:
            return None  # a comment, a tag... that runs to the end of the text
        is_end, name, _, end, _ = tag
        return self._end_tag(name, end) if is_end else self._start_tag(tag)

    def _tag(self, pos: int) -> _Tag | None:
        m = _TAG_RE.match(self.text, pos)
        if m is not None:
            return bool(m.group(2)), ascii_lower(m.group(3)), m.end(3), m.end(), bool(m.group(4))
        # A tag with many attributes, or one that never ends, or no tag at all.
        m = _TAG_NAME_RE.match(self.text, pos)
        if m is None:
            return None
        name_end = end = m.end()
        while self.steps_left > 0:
            self.steps_left -= 1
            start, end = end, _CONTENT_RE.match(self.text, end).end()  # type: ignore[union-attr]
            if self.text.startswith((">", "/>"), end):
                self_closing = self.text[end] == "/"
                end += 2 if self_closing else 1
                return bool(m.group(1)), ascii_lower(m.group(2)), name_end, end, self_closing
            if end == start:
                break  # the text ends inside the tag
        return None

    def _attrs(self, tag: _Tag, *names: str) -> dict[str, str]:
        """The first value of each of ``names`` in ``tag`` (``""`` when it has none),
        each piece of attributes read costing a step."""
        found: dict[str, str] = {}
        text, end = self.text, tag[3] - 1  # the ">"
        pos = _SEPARATORS_RE.match(text, tag[2], end).end()  # type: ignore[union-attr]
        source = text[pos:end].lower()
        names = tuple(name for name in names if name in source)  # the rest are surely missing
        while pos < end and len(found) < len(names) and self.steps_left > 0:
            self.steps_left -= 1
            m = _ATTRS_RE.match(text, pos, end)
            if m is None:  # pragma: no cover - a complete tag is all attributes
                break
            run, value = m.group(1).rstrip(_WS), m.group(2)
            for name in names:
                if name not in found and (hit := _whole_name_re(name).search(run)):
                    last = hit.end() == len(run)  # the name the value belongs to
                    found[name] = _unquote(value) if last and value is not None else ""
            pos = m.end()
        return found

    def _start_tag(self, tag: _Tag) -> int | None:
        name = tag[1]
        if self.stack and self.stack[-1][0] != "html":
            namespace, _, kind = self.stack[-1]
            as_html = (
                kind == _HTML_POINT
                or (kind == _TEXT_POINT and name not in ("mglyph", "malignmark"))
                or (kind == _ANNOTATION and name == "svg")
            )
            if not as_html:
                breakout = name in _BREAKOUT or (
                    name == "font" and bool(self._attrs(tag, "color", "face", "size"))
                )
                if not breakout:
                    if not tag[4]:  # not self-closing
                        self._push_foreign(namespace, tag)
                    return tag[3]
                self._pop_foreign()
        return self._html_start_tag(tag)

    def _html_start_tag(self, tag: _Tag) -> int | None:
        name, end = tag[1], tag[3]
        head_element = name in _HEAD_ELEMENTS
        if not head_element and name != "body" and not self._body_tag():
            return None
        if name in _RAW_TEXT:
            return self._skip_text_only(name, end)
        if name == "plaintext":
            return None
        if name == "template":
            self.templates.append(len(self.stack))
            self.stack.append(("html", "template", _PLAIN))
        elif name in ("svg", "math"):
            if not tag[4]:
                self._push_foreign(name, tag)
        elif self.templates:
            pass  # a template's content is not part of the document
        elif name == "body":
            return None
        elif name == "link":
            if self.canonical is None:
                attrs = self._attrs(tag, "rel", "href")
                rel = ascii_lower(_unescape_attr(attrs.get("rel", "")))
                if "canonical" in WS_RUN_RE.split(rel):
                    self.canonical = _clean_href(attrs.get("href"))
                    self.after_head = self.head_ended and self.canonical is not None
        elif name == "base":
            if not self.base_seen and (href := self._attrs(tag, "href").get("href")) is not None:
                self.base_seen = True
                self.base = _clean_href(href)
        elif head_element or name in _VOID:
            pass
        elif self.stack:  # HTML in an integration point of an <svg>: no CDATA in it
            self.html_named.setdefault(name, []).append(len(self.stack))
            self.stack.append(("html", name, _PLAIN))
        else:
            self.opened.append(name)
        return end

    def _body_tag(self) -> bool:
        """A start tag that is not for the head; ``False`` once reading has gone
        :data:`AFTER_HEAD_TAGS` of them past the end of the head."""
        if self.stack:  # in a template or an svg: the head has ended or will not
            return True
        self.head_ended = True
        self.tags_left -= 1
        return self.tags_left >= 0

    def _end_tag(self, name: str, end: int) -> int | None:
        if not self.stack:
            if name == "head":
                return None
            if name in ("body", "html", "br"):
                self.head_ended = True
            self._close_html(name)
            return end
        template = self.templates[-1] if self.templates else -1
        namespace, top, kind = self.stack[-1]
        if namespace == "html" and top != "template":  # HTML in an integration point
            where = self.html_named.get(name)
            if where and where[-1] > max(template, self.points[-1] if self.points else -1):
                self._pop_to(where[-1])
                return end
        elif namespace != "html":  # foreign content: close the element of that name
            if name in ("p", "br") and kind not in (_HTML_POINT, _TEXT_POINT):
                self._pop_foreign()
                return end
            where = self.named.get(name)
            if where and where[-1] > template:
                self._pop_to(where[-1])
                return end
            # Else HTML rules: an HTML element of that name around the <svg> ends it,
            # unless a "special" one comes first; "</head>" and the like are ignored.
            if not self.templates and not self.points and self._close_html(name):
                self._pop_to(0)
                return end
        if name == "template" and template >= 0:
            self._pop_to(template)
        return end

    def _close_html(self, name: str) -> bool:
        """Close the element an HTML end tag ``name`` closes in the body, if open.
        Only the 32 innermost elements are looked at."""
        if name not in self.opened:
            return False
        stops = _SCOPE if name in _SCOPED else _SPECIAL
        for index in range(len(self.opened) - 1, max(len(self.opened) - 32, 0) - 1, -1):
            if self.opened[index] == name:
                del self.opened[index:]
                return True
            if self.opened[index] in stops:
                break
        return False

    def _push_foreign(self, namespace: str, tag: _Tag) -> None:
        name, kind = tag[1], _PLAIN
        if (namespace, name) in _HTML_POINTS:
            kind = _HTML_POINT
        elif namespace == "math" and name in _TEXT_POINTS:
            kind = _TEXT_POINT
        elif namespace == "math" and name == "annotation-xml":
            encoding = ascii_lower(self._attrs(tag, "encoding").get("encoding", ""))
            html = encoding in ("text/html", "application/xhtml+xml")
            kind = _HTML_POINT if html else _ANNOTATION
        if kind in (_HTML_POINT, _TEXT_POINT):
            self.points.append(len(self.stack))
        self.named.setdefault(name, []).append(len(self.stack))
        self.stack.append((namespace, name, kind))

    def _pop_foreign(self) -> None:
        """Close the foreign elements down to an integration point or an HTML one."""
        template = self.templates[-1] if self.templates else -1
        point = self.points[-1] if self.points else -1
        self._pop_to(max(template, point) + 1)

    def _pop_to(self, index: int) -> None:
        """Close the open elements from ``index`` up."""
        for namespace, name, kind in self.stack[index:]:
            if namespace == "html":
                (self.templates if name == "template" else self.html_named[name]).pop()
            else:
                self.named[name].pop()
                if kind in (_HTML_POINT, _TEXT_POINT):
                    self.points.pop()
        del self.stack[index:]

    def _skip_text_only(self, name: str, pos: int) -> int | None:
        """Where reading goes on after the content of a text-only element that
        starts at ``pos``, and its end tag."""
        if name == "script":
            content_end = self._end_of_script(pos)
        else:
            m = _END_OF_RAW_RE[name].search(self.text, pos)
            content_end = None if m is None else m.start()
        end_tag = None if content_end is None else self._tag(content_end)
        return None if end_tag is None else end_tag[3]

    def _end_of_script(self, pos: int) -> int | None:
        """Where the content of a ``<script>`` starting at ``pos`` ends."""
        state = _SCRIPT_DATA
        while self.steps_left > 0:
            self.steps_left -= 1
            m = _SCRIPT_RE[state].search(self.text, pos)
            if m is None:
                return None
            found = ascii_lower(m.group())
            if found.startswith("</script"):
                if state != _SCRIPT_DOUBLE:
                    return m.start()
                state, pos = _SCRIPT_ESCAPED, m.end()
            elif found == "<!--":
                state, pos = _SCRIPT_ESCAPED, m.end() - 2  # "<!-->" ends at once
            elif found == "-->":
                state, pos = _SCRIPT_DATA, m.end()
            else:  # "<script"
                state, pos = _SCRIPT_DOUBLE, m.end()
        return None


def _unquote(value: str) -> str:
    return value[1:-1] if value[:1] in ("'", '"') else value
