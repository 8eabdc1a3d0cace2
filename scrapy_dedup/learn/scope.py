"""URLs as a learned rule sees them: split into host, path segments and
query, put back together. No Scrapy import."""

from __future__ import annotations

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


def _split(url: str) -> _Parts | None:
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


def _first(path: str) -> str:
    return str(path).strip("/").split("/")[0]


def _path(segments: tuple[str, ...]) -> str:
    return "/" + "/".join(segments) if segments else ""


def _segments(path: Any) -> tuple[str, ...]:
    text = str(path).strip("/")
    return tuple(text.split("/")) if text else ()
