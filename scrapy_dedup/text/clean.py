"""The text of an item, as the content stage compares it. No Scrapy import.

Every step is a single linear pass: no pattern here can scan past the next
``<`` (or, for a comment or a hidden element, it runs once to the end), so a
text of unclosed tags or of escaped tags costs what any text of its size costs.

>>> content_digest(clean_text("<p>Hello,  <b>World</b></p>")) == content_digest("hello, world")
True
>>> clean_text("use the <p> tag for paragraphs")
'use the <p> tag for paragraphs'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from html import unescape
from html.entities import html5
from typing import Any

from scrapy_dedup.text.shingles import (
    SHARED_MAX_CHARS,
    NormalizedText,
    normalized_utf8,
    normalized_utf8_chunks,
)

__all__ = [
    "TEXT_VERSION",
    "clean_text",
    "content_digest",
    "decode_entities",
    "extract_text",
    "looks_like_html",
]

#: The version of the normalization that :func:`content_digest` and
#: :func:`~scrapy_dedup.text.shingles.shingle_hashes` apply (and of the tag and
#: entity handling of :func:`clean_text` before them). Persistent stores record
#: it next to what they keep: bump it whenever the digest or a shingle of some
#: text changes, so digests and fingerprints of two versions are never mixed.
#: 1: lowercase and whitespace only; 2: NFKC, format characters dropped,
#: entities decoded in plain text, one token per character of CJK, Thai and
#: other scripts written without spaces.
TEXT_VERSION = 2

# Elements whose tags count as markup. A name outside this list (``List<T>``
# ... ``</T>``) never makes a text HTML.
_ELEMENTS = frozenset(
    """a abbr address article aside audio b blockquote body button canvas caption center cite
    code dd del details dfn div dl dt em fieldset figcaption figure font footer form h1 h2 h3
    h4 h5 h6 head header html i iframe ins kbd label legend li main mark nav noscript object
    ol option p picture pre q s samp script section select small span strike strong style sub
    summary sup svg table tbody td template textarea tfoot th thead time title tr tt u ul var
    video""".split()  # noqa: SIM905
)

# A tag, a comment opening or a doctype. [^<>]* cannot run past the next "<",
# so each "<" is looked at once, whatever follows it.
_MARKUP_RE = re.compile(
    r"<(?:(!--)|!doctype\b[^<>]*>|(/?)([a-z][a-z0-9]{0,15})(?=[\s/>])[^<>]*>)", re.IGNORECASE
)
# What a <br> follows when it breaks a line, rather than being named in a
# sentence: a letter or digit ("one<br>two") or the end of a sentence ("end.<br>").
_BEFORE_BR = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.!?:;,")


def looks_like_html(text: str) -> bool:
    """True when ``text`` holds markup, not prose that mentions a tag.

    Markup is a doctype, an HTML comment, an element closed after it was
    opened (``<p>...</p>``, ``<b>...</b>``), or a ``<br>`` written against a
    word (``one<br>two``, ``end.<br>``). A lone tag in a sentence ("use the <p> tag"), a
    closing tag with no opening one before it, tags of unknown elements and
    stray ``<`` are prose, so the text is left as it is. One pass over the
    ``<`` of the text, stopping at the first markup found.

    >>> looks_like_html("<p>Hello</p>"), looks_like_html("line one<br>line two")
    (True, True)
    >>> looks_like_html("use the <p> tag, close it with </div>"), looks_like_html("a < b > c")
    (False, False)
    """
    if "<" not in text:
        return False
    opened: set[str] = set()
    comments = True  # until a comment opening is found never closed
    for match in _MARKUP_RE.finditer(text):
        comment, closing, name = match.groups()
        if comment:
            if comments and text.find("-->", match.end()) >= 0:
                return True
            comments = False  # no later opening is closed either: look once
            continue
        if name is None:  # a doctype
            return True
        name = name.lower()
        if name == "br":
            start, end = match.span()
            if text[start - 1 : start] in _BEFORE_BR or text[end : end + 1].isalnum():
                return True
        elif name in _ELEMENTS:
            if not closing:
                opened.add(name)
            elif name in opened:
                return True
    return False


_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_HIDDEN_TAG_RE = re.compile(r"<(/?)(script|style|noscript|template)\b[^<>]*>", re.IGNORECASE)
# A tag, with quoted attribute values that may hold ">" (never "<"), or else
# anything up to the next ">" that comes before the next "<".
_TAG_RE = re.compile(
    r"""<[a-z/!?](?:[^<>"']|"[^"<]*"|'[^'<]*')*>|<[a-z/!?][^<>]*>""", re.IGNORECASE
)


def _drop_hidden(text: str) -> str:
    """Remove script, style, noscript and template elements with their content
    in one linear pass (an unclosed one runs to the end, as in browsers;
    w3lib's regex is quadratic on many unclosed tags)."""
    kept, pos, inside = [], 0, None
    for match in _HIDDEN_TAG_RE.finditer(text):
        closing, name = match.group(1), match.group(2).lower()
        if inside is None and not closing:
            kept.append(text[pos : match.start()])
            inside = name
        elif inside == name and closing:
            pos, inside = match.end(), None
    if inside is None:
        kept.append(text[pos:])
    return " ".join(kept)


# A character reference: decimal, hexadecimal or named (names are at most 32
# characters in HTML5, so a long run of letters is looked at once).
_ENTITY_RE = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[A-Za-z][A-Za-z0-9]{0,31};?)")


@lru_cache(maxsize=4096)
def _decode_ref(ref: str) -> str:
    if ref[1] == "#":
        digits = ref[3:] if ref[2] in "xX" else ref[2:]
        if len(digits.rstrip(";").lstrip("0")) > 8:  # past U+10FFFF: html.unescape's
            return "\ufffd"  # int() would fail on thousands of digits
    return unescape(ref)


def _decode_html(match: re.Match[str]) -> str:
    return _decode_ref(match.group())


def _decode_plain(match: re.Match[str]) -> str:
    ref = match.group()
    if not ref.endswith(";"):
        return ref  # "?id=1&section=2" is a URL, not "§ion=2"
    if ref[1] != "#" and ref[1:] not in html5:
        return ref
    return _decode_ref(ref)


def decode_entities(text: str, *, html: bool = True) -> str:
    """``text`` with its character references (``&eacute;``, ``&#233;``,
    ``&#xE9;``) decoded. In HTML (``html=True``) as a browser decodes text,
    legacy references without ``;`` included (``&copy`` is ``©``); in plain
    text only complete references ending in ``;``, so ``AT&T`` and
    ``?id=1&section=2`` stay as they are.

    >>> decode_entities("caf&eacute; &amp; cr&egrave;me"), decode_entities("a&sect=1", html=False)
    ('café & crème', 'a&sect=1')
    """
    if "&" not in text:
        return text
    return _ENTITY_RE.sub(_decode_html if html else _decode_plain, text)


def clean_text(text: str) -> str:
    """``text`` as the content stage compares it.

    When it :func:`looks like HTML <looks_like_html>`: scripts, styles and
    comments dropped, tags replaced by a space, then character references
    decoded (last, so a decoded ``&lt;p&gt;`` is text, never a tag). Broken HTML
    is fine: this works on the text, it does not parse a tree. Otherwise (plain
    text, including prose that mentions a tag) only complete character
    references are decoded, so ``caf&eacute;`` and ``café`` are the same text.

    >>> clean_text("<p>Hi<script>x()</script> <b>there</b> &amp; bye</p>").split()
    ['Hi', 'there', '&', 'bye']
    >>> clean_text("the <b> tag is not &lt;strong&gt;")
    'the <b> tag is not <strong>'
    """
    if not looks_like_html(text):
        return decode_entities(text, html=False)
    text = _drop_hidden(_COMMENT_RE.sub("", text))
    return decode_entities(_TAG_RE.sub(" ", text))  # a tag separates words


def extract_text(item: Mapping[str, Any], fields: Iterable[str]) -> str | None:
    """The text to compare, from ``fields`` of ``item`` (an ItemAdapter or a
    dict): the fields that hold a non-empty string (or a list of strings)
    joined by newlines, in the order given. ``None`` when none does."""
    parts = []
    for field in fields:
        value = item.get(field)
        if isinstance(value, (list, tuple)):
            value = "\n".join(v for v in value if isinstance(v, str))
        if isinstance(value, str) and value and not value.isspace():  # no strip() copy
            parts.append(clean_text(value))
    text = "\n".join(parts)
    return text if text and not text.isspace() else None


# Pieces of a long text digested one by one: small enough that a piece's
# arrays stay in the CPU's cache (1.3x faster than pieces of CHUNK_CHARS).
_DIGEST_PIECE_CHARS = 1 << 16
assert SHARED_MAX_CHARS <= _DIGEST_PIECE_CHARS  # a shared text's digest is one piece


def content_digest(text: str | NormalizedText) -> bytes:
    """The exact-duplicate key: SHA-256 (first 16 bytes) of
    :func:`~scrapy_dedup.text.shingles.normalize_text` of ``text`` (NFKC,
    lowercase, no format characters, whitespace collapsed), computed piece by
    piece so a 50 MB text needs little memory beyond itself. ``text`` may be a
    :class:`~scrapy_dedup.text.shingles.NormalizedText`, whose normalization
    the shingles then reuse: the digest is the same.

    >>> content_digest("Cafe\\u0301  AU\\u200b LAIT") == content_digest("café au lait")
    True
    >>> content_digest(NormalizedText("Caf\\u00c9 au lait")) == content_digest("café au lait")
    True
    """
    if isinstance(text, NormalizedText):
        if len(text.text) <= SHARED_MAX_CHARS:
            return hashlib.sha256(text.utf8()).digest()[:16]
        text = text.text
    if len(text) <= _DIGEST_PIECE_CHARS:  # one piece
        return hashlib.sha256(normalized_utf8(text)).digest()[:16]
    digest = hashlib.sha256()
    for piece in normalized_utf8_chunks(text, _DIGEST_PIECE_CHARS):
        digest.update(piece)
    return digest.digest()[:16]
