"""What a fetched page brings as evidence for a learned rule: the digest of
the visible text of its main region (a print view without the navigation is
the same page), and how long that text is. No Scrapy import."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from html import unescape
from urllib.parse import urldefrag, urljoin

__all__ = [
    "MIN_TEXT",
    "body_digest",
    "links_filter",
    "main_region",
    "page_digest",
    "page_links",
    "visible_text",
    "within",
]

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


def _unfolded(html: str) -> str:
    """The text of ``html`` without tags, comments, scripts and styles (each
    replaced by a space), its whitespace as it is."""
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
    return _TAG.sub(" ", " ".join(parts))


def visible_text(html: str) -> str:
    """The text a reader sees in ``html``: no tags, comments, scripts, styles
    (attributes, so links carrying session ids, do not count), whitespace
    collapsed, lowercased. Linear in the input, however broken."""
    return " ".join(_unfolded(html).split()).lower()


#: Whitespace (``str.isspace``) beyond ASCII: replaced by a space before the
#: text is encoded, so that only ASCII whitespace is left to collapse. (Listed:
#: finding them among every code point at import takes a tenth of a second.)
_WIDE_SPACES = (
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
#: Every ASCII whitespace byte (``\x1c``-``\x1f`` too, as ``str.split``) to a space.
_SPACES = bytes.maketrans(
    bytes(c for c in range(128) if chr(c).isspace()),
    b" " * sum(chr(c).isspace() for c in range(128)),
)
_SPACE_RUN_END = re.compile(b" *")
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))


def _folded(text: str) -> bytes:
    """``" ".join(text.split()).lower()`` encoded as UTF-8 (surrogates
    passed), made without splitting the text into words: a text has few runs
    of whitespace to collapse and hundreds of words, and one string object
    per word is what collapsing by ``split`` costs (about half of a page's
    digest)."""
    if text.isascii():
        folded = text.lower().encode()
    else:
        for space in _WIDE_SPACES:
            if space in text:
                text = text.replace(space, " ")
        folded = text.lower().encode("utf-8", "surrogatepass")
    folded = folded.translate(_SPACES)
    run = folded.find(b"  ")
    if run >= 0:
        parts, start, run_end = [], 0, _SPACE_RUN_END.match
        while run >= 0:
            parts.append(folded[start : run + 1])
            start = run_end(folded, run).end()  # type: ignore[union-attr]  # always matches
            run = folded.find(b"  ", start)
        parts.append(folded[start:])
        folded = b"".join(parts)
    return folded.strip(b" ")


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
    folded = _folded(_unfolded(main_region(html)))
    digest, length = body_digest(folded)
    if folded.isascii():
        return digest, length
    return digest, len(folded.translate(None, _UTF8_CONTINUATION))  # characters, not bytes


# -- links ---------------------------------------------------------------------

_HREF = re.compile(
    r"""<(?:a|area)\b[^>]*?\shref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I
)
#: Bits of a page's links filter (a Bloom filter of 2 bits a link): a link of
#: the declared page missing from a declaring page of 100 links is noticed
#: 99 times in 100, one of a print view (no links) always.
FILTER_BITS = 2048


def page_links(html: str, base_url: str) -> set[str]:
    """The links of ``html``: every ``<a>`` and ``<area>`` href, resolved
    against ``base_url``, without its fragment.

    >>> sorted(page_links('<a href="/b#x">b</a> <A HREF=c>c</A>', "http://s.test/a/"))
    ['http://s.test/a/c', 'http://s.test/b']
    """
    links = set()
    for match in _HREF.finditer(html):
        href = unescape(match.group(1) or match.group(2) or match.group(3) or "").strip()
        try:
            links.add(urldefrag(urljoin(base_url, href))[0])
        except ValueError:  # an href urljoin cannot parse: as it is
            links.add(href)
    return links


def _bits(link: str) -> tuple[int, int]:
    h = _key(link)
    return h % FILTER_BITS, (h >> 32) % FILTER_BITS


def links_filter(links: Iterable[str]) -> int:
    """A Bloom filter (an int of :data:`FILTER_BITS` bits) of ``links``."""
    bits = 0
    for link in links:
        a, b = _bits(link)
        bits |= (1 << a) | (1 << b)
    return bits


def within(links: Iterable[str], bits: int) -> bool:
    """Whether every link of ``links`` may be in the filter ``bits`` (a link
    that is not is noticed, but for the filter's false positives).

    >>> f = links_filter(["http://s.test/a", "http://s.test/b"])
    >>> within(["http://s.test/b"], f), within(["http://s.test/b", "http://s.test/next"], f)
    (True, False)
    """
    for link in links:
        a, b = _bits(link)
        if not (bits >> a) & (bits >> b) & 1:
            return False
    return True


def _ignore(stat: str, count: int) -> None:
    pass
