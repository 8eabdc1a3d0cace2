"""The text of an item, as the content stage compares it. No Scrapy import.

>>> content_digest(clean_text("<p>Hello,  <b>World</b></p>")) == content_digest("hello, world")
True
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from w3lib.html import remove_comments, replace_entities, replace_tags

from scrapy_dedup.text.shingles import normalize_text

__all__ = ["clean_text", "content_digest", "extract_text", "looks_like_html"]

_HTML_RE = re.compile(
    r"<(?:!doctype|html|head|body|div|p|br|span|a|h[1-6]|li|ul|ol|table|tr|td|section|article"
    r"|main|nav|header|footer|script|style|img)\b[^>]*>",
    re.IGNORECASE,
)


def looks_like_html(text: str) -> bool:
    """True when ``text`` holds HTML tags (markup, not a stray ``<``)."""
    return _HTML_RE.search(text) is not None


_HIDDEN_TAG_RE = re.compile(r"<(/?)(script|style|noscript|template)\b[^<>]*>", re.IGNORECASE)


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


def clean_text(text: str) -> str:
    """``text`` without markup when it looks like HTML: scripts, styles and
    comments dropped, tags removed, entities decoded. Broken HTML is fine:
    this works on the text, it does not parse a tree.

    >>> clean_text("<p>Hi<script>x()</script> <b>there</b></p>").split()
    ['Hi', 'there']
    """
    if not looks_like_html(text):
        return text
    text = _drop_hidden(remove_comments(text))
    return replace_entities(replace_tags(text, " "))  # a tag separates words


def extract_text(item: Mapping[str, Any], fields: Iterable[str]) -> str | None:
    """The text to compare, from ``fields`` of ``item`` (an ItemAdapter or a
    dict): the fields that hold a non-empty string (or a list of strings)
    joined by newlines, in the order given. ``None`` when none does."""
    parts = []
    for field in fields:
        value = item.get(field)
        if isinstance(value, (list, tuple)):
            value = "\n".join(v for v in value if isinstance(v, str))
        if isinstance(value, str) and value.strip():
            parts.append(clean_text(value))
    text = "\n".join(parts)
    return text if text.strip() else None


def content_digest(text: str) -> bytes:
    """The exact-duplicate key: SHA-256 (first 16 bytes) of the lowercased,
    whitespace-collapsed text, as the recipe's ``content_key``."""
    normalized = normalize_text(text).encode("utf-8", "surrogatepass")
    return hashlib.sha256(normalized).digest()[:16]
