"""URLs as a learned rule sees them: split into host, path segments and
query, put back together. No Scrapy import."""

from __future__ import annotations

import re
from typing import Any, NamedTuple
from urllib.parse import urlsplit


class _Parts(NamedTuple):
    base: str  # scheme://host[:port]
    host: str
    # The path split on "/", as it is: "/a/" is ("a", ""), "//a" is ("", "a").
    segments: tuple[str, ...]
    query: str
    fragment: str = ""

    @property
    def url(self) -> str:
        url = f"{self.base}/{'/'.join(self.segments)}"
        if self.query:
            url += f"?{self.query}"
        return f"{url}#{self.fragment}" if self.fragment else url

    @property
    def first(self) -> str:
        return self.segments[0] if self.segments else ""

    @property
    def scope(self) -> str:
        """Its path's :func:`template`."""
        return template(self.segments)


# A plain canonical URL: http(s), a host without user, brackets or zone; then
# the path, the query and the fragment as urlsplit cuts them.
_PLAIN = re.compile(
    r"(https?://([^/?#@\[\]%:]*)(:[^/?#@\[\]%]*)?)(/[^?#]*)?(?:\?([^#]*))?(?:#(.*))?", re.S
)


def _split(url: str) -> _Parts | None:
    """``url`` as a rule sees it: ``urlsplit``'s parts (None when it has no
    host or cannot be parsed). Plain canonical URLs (printable ASCII, see
    ``_PLAIN``) are cut here without ``urlsplit``, to the same parts: the
    learner splits several URLs for every request and for every page of the
    evidence log it replays."""
    if url.isascii() and url.isprintable():
        match = _PLAIN.fullmatch(url)
        if match is not None and (match.group(2) or match.group(3)):  # a netloc
            base, host, _, path, query, fragment = match.groups()
            segments = tuple(path[1:].split("/")) if path and path != "/" else ()
            return _Parts(base, host.lower(), segments, query or "", fragment or "")
    return _split_parsed(url)


def _split_parsed(url: str) -> _Parts | None:
    """:func:`_split` through ``urlsplit``, for every URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not parts.netloc:
        return None
    path = parts.path
    segments = tuple(path[1:].split("/")) if path not in ("", "/") else ()
    return _Parts(
        f"{parts.scheme}://{parts.netloc}",
        parts.hostname or "",
        segments,
        parts.query,
        parts.fragment,
    )


def _params(query: str) -> list[tuple[str, str]]:
    pairs = []
    for piece in query.split("&") if query else ():
        name, _, value = piece.partition("=")
        pairs.append((name, value))
    return pairs


def _prefix_matches(pattern: tuple[str, ...], segments: tuple[str, ...]) -> bool:
    return len(segments) > len(pattern) and all(
        p == "*" or p == s for p, s in zip(pattern, segments, strict=False)
    )


def _scope(path: str) -> str:
    """A scope as the rules file writes it (``/forum/viewtopic.php``)."""
    text = str(path)
    return text[1:] if text.startswith("/") else text


def _path(segments: tuple[str, ...]) -> str:
    return "/" + "/".join(segments) if segments else ""


def _segments(path: Any) -> tuple[str, ...]:
    text = str(path).strip("/")
    return tuple(text.split("/")) if text else ()


# A script's name: the page is chosen by its query (viewtopic.php?t=54).
_SCRIPT = re.compile(
    r"[A-Za-z_][A-Za-z_-]*\.(?:php\d?|phtml|aspx?|ashx|asmx|jspa?|cgi|pl|py|cfm|do|action|dll)",
    re.IGNORECASE,
)


def template(segments: tuple[str, ...]) -> str:
    """The part of the site a rule's evidence and exclusions are kept for: the
    path's template. The first segment as it is (the section), the last one
    when it is a script's name (the page is chosen by the query), every other
    segment ``*``: ids, slugs, dates and page names, and the words between,
    which cannot be told from a slug (``/shop/tools/x``, ``/shop/hammer-kit/x``)
    and would make every category a template of its own.

    >>> template(("forum", "viewtopic.php")), template(("forum", "viewforum.php"))
    ('forum/viewtopic.php', 'forum/viewforum.php')
    >>> template(("shop", "tools", "blue-hammer-2")), template(("item", "42", "print"))
    ('shop/*/*', 'item/*/*')
    >>> template(("docs",)), template(()), template(("blog", ""))
    ('docs', '', 'blog/')
    """
    if len(segments) < 2:
        return "/".join(segments)
    middle = ["" if s == "" else "*" for s in segments[1:-1]]
    last = segments[-1]
    if last and not _SCRIPT.fullmatch(last):
        last = "*"
    return "/".join((segments[0], *middle, last))
