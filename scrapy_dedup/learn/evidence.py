"""What a fetched page brings as evidence for a learned rule: the digest of
the visible text of its main region (a print view without the navigation is
the same page), and how long that text is. No Scrapy import."""

from __future__ import annotations

import hashlib
import re

__all__ = ["MIN_TEXT", "body_digest", "main_region", "page_digest", "visible_text"]

#: Pages with less visible text than this (characters) are no evidence for a
#: rule (soft-404 pages, empty templates: many URLs, one text), only against.
MIN_TEXT = 200
_CLASSES = 200_000  # classes remembered per rule or host (beyond: no more evidence, never a skip)


def _key(text: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )


# -- visible text ---------------------------------------------------------------

_HIDDEN = ("script", "style", "noscript", "template", "textarea")
_OPENERS = re.compile(r"<!--|<(?:script|style|noscript|template|textarea)(?=[\s>/])", re.I)
_CLOSERS = {name: re.compile(rf"</{name}", re.I) for name in _HIDDEN}
_TAG = re.compile(r"<[^<>]*>")


def visible_text(html: str) -> str:
    """The text a reader sees in ``html``: no tags, comments, scripts, styles
    (attributes, so links carrying session ids, do not count), whitespace
    collapsed, lowercased. Linear in the input, however broken."""
    parts = []
    pos = 0
    for match in _OPENERS.finditer(html):
        if match.start() < pos:
            continue  # inside a hidden block already skipped
        parts.append(html[pos : match.start()])
        opener = match.group()
        if opener == "<!--":
            end = html.find("-->", match.end())
            pos = len(html) if end < 0 else end + 3
        else:
            closing = _CLOSERS[opener[1:].lower()].search(html, match.end())
            pos = len(html) if closing is None else closing.start()
    parts.append(html[pos:])
    text = _TAG.sub(" ", " ".join(parts))
    return " ".join(text.split()).lower()


def body_digest(body: bytes) -> tuple[int, int]:
    """``(64-bit digest, length)`` of a body that is not text."""
    return int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little"), len(body)


_REGIONS = [
    (re.compile(rf"<{name}(?=[\s>])", re.I), re.compile(rf"</{name}\s*>", re.I))
    for name in ("main", "article")
]


def main_region(html: str) -> str:
    """The page's ``<main>`` (else its ``<article>``s, else all of it): a
    print view with the same article and no navigation is the same page."""
    for opener, closer in _REGIONS:
        start = opener.search(html)
        if start is None:
            continue
        last = None
        for last in closer.finditer(html, start.end()):  # noqa: B007 (the last one)
            pass
        if last is not None:
            return html[start.start() : last.end()]
    return html


def page_digest(html: str) -> tuple[int, int]:
    """``(64-bit digest, length)`` of the visible text of the main region of ``html``."""
    text = visible_text(main_region(html))
    return _key(text), len(text)


def _ignore(stat: str, count: int) -> None:
    pass
