"""``rel=canonical`` in an HTTP ``Link`` header (RFC 8288). No Scrapy import."""

from __future__ import annotations

import re
from collections.abc import Iterable

from scrapy_dedup.html.head import WS_RUN_RE, ascii_lower

__all__ = ["parse_link_header"]

_QUOTED = r'"(?:[^"\\]|\\.)*"?'
# Pieces of a header that a "," (or ";") inside cannot split: <targets> and "quoted strings".
_LINKS_RE = re.compile(rf'<[^>]*>?|{_QUOTED}|[^<",]+|,', re.S)
_PARAMS_RE = re.compile(rf'<[^>]*>?|{_QUOTED}|[^<";]+|;', re.S)
_TARGET_RE = re.compile(r"[\t\n\r ]*<([^>]*)>(.*)\Z", re.S)
_BACKSLASH_RE = re.compile(r"\\(.)", re.S)


def _split(text: str, pattern: re.Pattern[str], sep: str) -> list[str]:
    parts: list[list[str]] = [[]]
    for piece in pattern.findall(text):
        if piece == sep:
            parts.append([])
        else:
            parts[-1].append(piece)
    return ["".join(part) for part in parts]


def _param_value(raw: str) -> str:
    raw = raw.strip(" \t\r\n")
    if raw.startswith('"'):
        raw = raw[1:-1] if len(raw) > 1 and raw.endswith('"') else raw[1:]
        return _BACKSLASH_RE.sub(r"\1", raw)
    return raw


def parse_link_header(values: Iterable[str | bytes]) -> str | None:
    """The target of the first ``rel=canonical`` link in HTTP ``Link`` header values
    (RFC 8288), as written (possibly relative: resolve it against the page URL,
    never against a ``<base>``), or ``None``.

    Links with an ``anchor`` parameter are about another resource and are skipped.
    ``bytes`` values (as Scrapy's ``Headers.getlist`` returns) are decoded as UTF-8,
    else Latin-1.

    >>> parse_link_header(['<https://x.org/a,b>; rel="alternate"; hreflang=de, '
    ...                    '<https://x.org/a>; type="text/html"; REL="canonical"'])
    'https://x.org/a'
    >>> parse_link_header(["</p>; rel=preload", "garbage;;<", '<x>; rel="next"']) is None
    True
    """
    for raw_value in values:
        if isinstance(raw_value, bytes):
            try:
                value = raw_value.decode("utf-8")
            except UnicodeDecodeError:
                value = raw_value.decode("latin-1")
        elif isinstance(raw_value, str):
            value = raw_value
        else:
            continue
        for link in _split(value, _LINKS_RE, ","):
            m = _TARGET_RE.match(link)
            if m is None:
                continue
            rel: str | None = None
            anchored = False
            for param in _split(m.group(2), _PARAMS_RE, ";")[1:]:
                name, _, raw = param.partition("=")
                name = ascii_lower(name.strip(" \t\r\n"))
                if name == "rel" and rel is None:  # RFC 8288: later rel parameters are ignored
                    rel = _param_value(raw)
                elif name == "anchor" and _param_value(raw):
                    anchored = True
            if rel is None or anchored:
                continue
            target = m.group(1).strip(" \t\r\n")
            if target and "canonical" in WS_RUN_RE.split(ascii_lower(rel)):
                return target
    return None
