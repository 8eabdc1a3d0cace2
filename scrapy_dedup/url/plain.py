"""Which of two URLs of one page is the plainer: the copy worth keeping.

A page often has variants: a print view, an AMP or mobile page, the page with
tracking parameters. When their items have the same text, the one to keep is
the page's own clean URL. No Scrapy import.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

__all__ = ["VARIANT_MARKS", "marked_more", "plainer", "plainness"]

#: Path segments, query names and query values that mark a variant of a page
#: (compared lowercased; a segment's extension is ignored: ``print.html``).
VARIANT_MARKS = frozenset(
    {"print", "printable", "printer", "printview", "print-view", "amp", "mobile", "m", "lite"}
)
#: Host labels that mark a variant site (``m.example.com``, ``amp.example.com``).
_HOST_MARKS = frozenset({"m", "amp", "mobile"})


def _marks(url: str) -> tuple[int, int, int]:
    """``(variant marks, query parameters, path length)`` of ``url``."""
    parts = urlsplit(url)
    host = (parts.hostname or "").split(".")
    marks = int(len(host) > 2 and host[0] in _HOST_MARKS)
    for segment in parts.path.lower().split("/"):
        if segment.split(".")[0] in VARIANT_MARKS:
            marks += 1
    params = parse_qsl(parts.query, keep_blank_values=True)
    for name, value in params:
        if name.lower() in VARIANT_MARKS or value.lower() in VARIANT_MARKS:
            marks += 1
    return marks, len(params), len(parts.path.rstrip("/"))


def plainness(url: str, canonical: str | None = None) -> tuple[int, int, int, int, int, str]:
    """A sort key: the plainer URL sorts first. In order: the declared
    canonical URL itself; fewer print/amp/mobile marks in the host, path or
    query; fewer query parameters; a shorter path; a shorter URL; then the
    URL itself, so that the order is total and deterministic.

    >>> sorted(["https://s.test/p/28/print", "https://s.test/p/28"], key=plainness)[0]
    'https://s.test/p/28'
    >>> plainness("https://s.test/a?x=1") < plainness("https://s.test/a/b/c")
    False
    """
    marks, params, path = _marks(url)
    return (int(url != canonical) if canonical else 0, marks, params, path, len(url), url)


def marked_more(url: str, other: str) -> bool:
    """Whether ``url`` has more print/amp/mobile marks than ``other``, or as
    many and more query parameters: a variant of the page, not another page
    whose URL merely is longer.

    >>> marked_more("https://s.test/p/5/print", "https://s.test/p/5")
    True
    >>> marked_more("https://s.test/news/office-denver", "https://s.test/news/boston")
    False
    """
    return _marks(url)[:2] > _marks(other)[:2]


def plainer(url: str, other: str, canonical: str | None = None) -> bool:
    """Whether ``url`` is a plainer copy of a page than ``other``
    (:func:`plainness`); ``canonical``: the URL the page's copies declare.

    >>> plainer("https://s.test/p/28", "https://s.test/p/28/print")
    True
    >>> plainer("https://s.test/a?id=4", "https://s.test/a?id=4&sort=asc")
    True
    >>> plainer("https://s.test/about", "https://s.test/about-us", canonical="https://s.test/about-us")
    False
    >>> plainer("https://s.test/x", "https://s.test/x")
    False
    """
    return plainness(url, canonical) < plainness(other, canonical)
