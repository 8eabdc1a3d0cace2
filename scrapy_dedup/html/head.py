"""``rel=canonical`` in HTML: the canonical link and base of a page's ``<head>``.

Pure functions, no Scrapy import. Finding follows what browsers do with the
``<head>`` of a page, but only over a bounded prefix of the body, so a 10 MB
page costs no more than its first ``limit`` bytes:

>>> find_canonical(b'<head><base href="/blog/"><link REL="Canonical" href="post?id=1&amp;p=2">')
('post?id=1&p=2', '/blog/')

Every function here accepts garbage and never raises.
"""

from __future__ import annotations

import codecs
import html
import re
from html.entities import html5 as _HTML5_ENTITIES

__all__ = ["DEFAULT_LIMIT", "WS_RUN_RE", "ascii_lower", "find_canonical"]

#: How many bytes of a body :func:`find_canonical` looks at by default.
DEFAULT_LIMIT = 256 * 1024

_WS = "\t\n\f\r "  # HTML's ASCII whitespace (str.split/strip would also take U+00A0 and co.)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
WS_RUN_RE = re.compile(r"[\t\n\f\r ]+")
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


def ascii_lower(text: str) -> str:
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
        attrs.setdefault(ascii_lower(m.group(1)), value)  # the first of duplicates wins


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
    found = _Found()
    template_depth = 0  # a <template>'s content is parsed but is not part of the document
    pos: int | None = 0
    while pos is not None and pos < len(text) and not found.done():
        lt = text.find("<", pos)
        if lt < 0:
            break
        m = None if text.startswith("<!--", lt) else _TAG_NAME_RE.match(text, lt)
        if m is None:
            pos = _skip_markup(text, lt)
            continue
        is_end = text[lt + 1] == "/"
        name = ascii_lower(m.group(1))
        if not template_depth and ((name == "body" and not is_end) or (name == "head" and is_end)):
            break
        attrs, pos = _parse_attrs(text, m.end())
        if pos is None:
            break  # the text ends inside the tag
        if name == "template":
            template_depth = max(template_depth + (-1 if is_end else 1), 0)
        elif not is_end:
            pos = _after_start_tag(text, name, pos)
            if not template_depth:
                found.take(name, attrs)
    return found.canonical, found.base


class _Found:
    """The first canonical link and the first base of a head."""

    __slots__ = ("base", "base_seen", "canonical")

    def __init__(self) -> None:
        self.canonical: str | None = None
        self.base: str | None = None
        self.base_seen = False

    def done(self) -> bool:
        return self.canonical is not None and self.base_seen

    def take(self, name: str, attrs: dict[str, str]) -> None:
        if name == "link" and self.canonical is None:
            rel = ascii_lower(attrs.get("rel", ""))
            if "canonical" in WS_RUN_RE.split(rel):
                self.canonical = _clean_href(attrs.get("href"))
        elif name == "base" and not self.base_seen and "href" in attrs:
            self.base_seen = True
            self.base = _clean_href(attrs["href"])


def _skip_markup(text: str, lt: int) -> int | None:
    """Where reading goes on after the comment or other non-tag markup at ``lt``
    (``None``: it runs to the end)."""
    if text.startswith("<!--", lt):
        start = lt + 4
        if text.startswith(">", start):  # "<!-->" ends at once
            return start + 1
        if text.startswith("->", start):  # so does "<!--->"
            return start + 2
        m = _COMMENT_END_RE.search(text, start)
        return None if m is None else m.end()
    if text[lt + 1 : lt + 2] in ("!", "?", "/"):  # doctype, bogus comment, "</>", "</3"...
        gt = text.find(">", lt + 2)
        return None if gt < 0 else gt + 1
    return lt + 1  # a "<" that is just text


def _after_start_tag(text: str, name: str, pos: int) -> int | None:
    """Where reading goes on after a start tag ending at ``pos``: past the
    content of a text-only element (``None``: the document ends inside it)."""
    if name in _RAW_TEXT:
        end_match = _END_OF_RAW_RE[name].search(text, pos)
        return None if end_match is None else end_match.start()
    if name == "plaintext":
        return None
    return pos
