"""Conservative URL canonicalization: the key the dupefilter stores for a URL.

Pure functions and classes, no Scrapy import. The canonical form is only a
*key*: nobody fetches it, so it may look odd (``+`` in a query becomes
``%20``) as long as two URLs share a key only when they serve the same page.

>>> canonicalize_url("HTTP://WWW.Example.com:80/a/./b/?utm_source=x&b=2&a=1#top")
'https://example.com/a/b?a=1&b=2'
>>> canonicalize_url("https://example.com/Pricing/")
'https://example.com/Pricing'
>>> canonicalize_url("https://example.com/x", trailing_slash=False, scheme=False)
'https://example.com/x'
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, cast

from scrapy_dedup.url.params import StripTable, load_strip_params

__all__ = [
    "C0_AND_SPACE",
    "DROPPING",
    "RULES",
    "UNPARSED",
    "URLCanonicalizer",
    "canonicalize_url",
    "host_to_ascii",
    "registrable_domain",
    "rule_names",
]

#: Every rule, in the order it is applied. Each can be switched off by name.
RULES: tuple[str, ...] = (
    "scheme",  # http and https share one key (each on its own default port)
    "host",  # host lowercased, IDNA (UTS #46) encoded, IPv6 compressed; empty userinfo dropped
    "www",  # a leading "www." dropped when what remains is a registrable domain
    "default_port",  # :80 for http, :443 for https, empty ":" dropped
    "empty_path",  # "" is "/"
    "percent_encoding",  # RFC 3986 6.2.2: hex upper-cased, unreserved decoded, unsafe encoded
    "dot_segments",  # "/a/./b/../c" is "/a/c"
    "session_param",  # session ids: in the query, ";jsessionid=", ASP.NET's "/(S(...))/"
    "trailing_slash",  # one trailing slash stripped ("/a/" is "/a", "/a//" stays)
    "tracking_param",  # known tracking parameters removed by exact name
    "empty_query",  # "a=1&&b=2&" is "a=1&b=2", a bare "?" is dropped
    "query_plus",  # "+" and "%20" are one thing in the query
    "query_order",  # parameters sorted by name (stable)
    "fragment",  # "#..." dropped
)
_BIT = {name: 1 << i for i, name in enumerate(RULES)}
#: Rules that drop part of a URL (as opposed to rewriting it into a normal form).
DROPPING = sum(
    _BIT[name]
    for name in ("fragment", "tracking_param", "session_param", "trailing_slash", "empty_query")
)
#: Set in the mask of :meth:`URLCanonicalizer.canonicalize_traced` when the URL
#: could not be parsed and its stripped self is its key.
UNPARSED = 1 << 30
_HOST_RULE_KEYS = frozenset(RULES) | {"strip_params", "keep_params"}


def rule_names(mask: int) -> list[str]:
    """The names of the rules whose bits are set in ``mask``.

    >>> rule_names(1 | 1 << 13)
    ['scheme', 'fragment']
    """
    return [name for name in RULES if mask & _BIT[name]]


# RFC 3986 appendix B: matches every string.
_URI_RE = re.compile(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?\Z", re.S)
_REG_NAME_RE = re.compile(r"[a-z0-9\-._~!$&'()*+,;=%]+")
_IPV_FUTURE_RE = re.compile(r"\[v[0-9a-f]+\.[^\]/\s]+\]")
_ZONE_ID_RE = re.compile(r"25(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})+")  # RFC 6874, after the "%"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# An escape, or a character that may not stand raw (besides the '%' of a valid escape).
_PATH_FIX_RE = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/]")
_QUERY_FIX_RE = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]")
_JSESSIONID_RE = re.compile(r";jsessionid=[^/;]*", re.I)
# ASP.NET's cookieless ids, a whole segment: "/(S(id))", "/(X(1)S(id))", "/(A(id)S(id)F(id))"
# (identifiers are upper case, as ASP.NET reads them), ASP.NET 1.x's "/(id)"; ids as
# the Internet Archive strips them, 24 characters.
_ASPNET_SESSION_RE = re.compile(
    r"/\((?:[0-9a-z]{24}|(?:X\(1\))*[A-Z]\([0-9a-z]{24}\)(?:X\(1\)|[A-Z]\([0-9a-z]{24}\))*)\)(?=/)"
)
_DEFAULT_PORT = {"http": 80, "https": 443}
_HOST_CACHE_SIZE = 100_000
_MAX_CACHED_HOST = 255
#: What browsers strip from both ends of a URL: C0 controls and space.
C0_AND_SPACE = "".join(map(chr, range(0x21)))


def _fix_escape(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 3:  # a %XX escape
        char = chr(int(text[1:], 16))
        return char if char in _UNRESERVED else text.upper()
    # '%' not starting an escape, a control/space/non-ASCII character, ...
    return "".join(f"%{b:02X}" for b in text.encode("utf-8", "surrogatepass"))


def _is_route(piece: str) -> bool:
    """``/blog/x`` in ``index.php?/blog/x``: a path in the query, whose place matters."""
    return "/" in piece and "=" not in piece


def _strippable_www(host: str) -> bool:
    """``www.`` leads and what remains is a registrable domain itself
    (``www.example.co.uk``; not ``www.com``, ``www.co.uk``, ``www.shop.example.com``)."""
    if not host.startswith("www."):
        return False
    rest = host[4:]
    return registrable_domain(rest) == rest


def _rule_host(host: str) -> str:
    """The form host rules are keyed by: the host's key, no trailing dot, no ``www.``."""
    host = host.strip()
    host = (host_to_ascii(host) or host.lower()).rstrip(".")  # not a host: never matches
    return host[4:] if _strippable_www(host) else host


def host_to_ascii(host: str) -> str | None:
    """The key of a URL's host, as browsers write it (WHATWG URL): lowercased,
    international names through UTS #46 non-transitional processing and
    punycode, IPv6 literals compressed (an RFC 6874 zone id kept as written);
    ``None`` when it cannot be a host.

    >>> host_to_ascii("Faß.DE")  # IDNA 2003 (Python's "idna" codec, w3lib) says fass.de
    'xn--fa-hia.de'
    >>> host_to_ascii("[2001:0DB8:0:0:0:0:0:1]")
    '[2001:db8::1]'
    >>> host_to_ascii("exa mple.com") is None
    True
    """
    if not host.isascii():
        return None if host.startswith("[") else _idna_to_ascii(host)
    if host.startswith("["):
        return _ip_literal(host)
    host = host.lower()
    return host if _REG_NAME_RE.fullmatch(host) else None


def _idna_to_ascii(host: str) -> str | None:
    """UTS #46 ToASCII as the WHATWG URL standard runs it: non-transitional
    (``ß`` and ``ς`` are kept), no STD3 rules (``_`` is fine), no hyphen or DNS
    length checks. A label of more than 63 characters, which no DNS name can
    hold, is refused rather than encoded (punycode takes quadratic time)."""
    from idna import uts46_remap

    try:
        labels = uts46_remap(host, std3_rules=False).split(".")
        for i, label in enumerate(labels):
            if not label.isascii():
                if len(label) > 63 or label.startswith("xn--"):
                    return None
                labels[i] = "xn--" + label.encode("punycode").decode("ascii")
    except ValueError:  # idna.IDNAError and UnicodeError are ValueErrors
        return None
    host = ".".join(labels)
    return host if _REG_NAME_RE.fullmatch(host) else None


def _ip_literal(host: str) -> str | None:
    """A bracketed ASCII host: IPv6 as WHATWG URL serializes it, or IPvFuture lowercased."""
    inner = host[1:-1] if host.endswith("]") else ""
    if inner[:1] in ("v", "V"):
        host = host.lower()
        return host if _IPV_FUTURE_RE.fullmatch(host) else None
    address, percent, zone = inner.partition("%")
    if percent and not _ZONE_ID_RE.fullmatch(zone):
        return None
    try:
        value = int(ipaddress.IPv6Address(address))
    except ValueError:
        return None
    return f"[{_ipv6_text(value)}{percent}{zone}]"


def _ipv6_text(value: int) -> str:
    """An IPv6 address in lowercase hex pieces, the first longest run of two or
    more zero pieces written ``::`` (WHATWG URL, RFC 5952; an embedded IPv4
    address is written in hex too, whatever Python version formats it)."""
    pieces = [f"{(value >> shift) & 0xFFFF:x}" for shift in range(112, -1, -16)]
    best_start, best_len, start = 0, 1, -1
    for i, piece in enumerate([*pieces, "end"]):
        if piece == "0":
            start = i if start < 0 else start
        elif start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    if best_len < 2:
        return ":".join(pieces)
    return ":".join(pieces[:best_start]) + "::" + ":".join(pieces[best_start + best_len :])


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path."""
    segments = path.split("/")[1:]
    out: list[str] = []
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        elif seg == ".":
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def registrable_domain(host: str) -> str | None:
    """The registrable domain ("eTLD+1") of a lowercased ASCII host, from the
    public suffix list shipped offline with ``publicsuffixlist``; ``None`` for
    public suffixes, IP addresses and single-label hosts.

    >>> registrable_domain("shop.example.co.uk")
    'example.co.uk'
    >>> registrable_domain("co.uk") is None
    True
    >>> registrable_domain("a.github.io")
    'a.github.io'
    """
    if len(host) > 254:  # no DNS name: not cached (hostile redirects send 16 KB hosts)
        return None
    return _registrable_domain(host)


@lru_cache(maxsize=65536)
def _registrable_domain(host: str) -> str | None:
    if not host or host.startswith("[") or host.replace(".", "").isdigit():
        return None
    suffix: str | None = _psl().privatesuffix(host.rstrip("."))
    return suffix


@lru_cache(maxsize=1)
def _psl() -> Any:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


class _Config:
    """The rules in force for one host, as plain attributes for speed."""

    def __init__(self, rules: int, strip: StripTable) -> None:
        self.rules = rules
        self.strip = strip
        for name, bit in _BIT.items():
            setattr(self, name, bool(rules & bit))

    scheme: bool
    host: bool
    www: bool
    default_port: bool
    empty_path: bool
    percent_encoding: bool
    dot_segments: bool
    session_param: bool
    trailing_slash: bool
    tracking_param: bool
    empty_query: bool
    query_plus: bool
    query_order: bool
    fragment: bool


#: Sentinels of :meth:`URLCanonicalizer._origin` (compared by identity): a
#: scheme other than http(s), an authority that cannot be parsed.
_NOT_WEB = cast("tuple[str, _Config, int]", ("", None, 0))
_UNPARSED_ORIGIN = cast("tuple[str, _Config, int]", ("", None, -1))


def _make_config(
    base_rules: int,
    base_strip: StripTable,
    overrides: Mapping[str, Any],
    strip_params: Iterable[str],
    keep_params: Iterable[str],
) -> _Config:
    rules = base_rules
    for name, value in overrides.items():
        if name not in _BIT:
            raise ValueError(f"unknown URL rule {name!r}; known rules: {', '.join(RULES)}")
        rules = rules | _BIT[name] if value else rules & ~_BIT[name]
    add, keep = _names(strip_params, "strip_params"), _names(keep_params, "keep_params")
    strip = base_strip.with_changes(add, keep) if add or keep else base_strip
    return _Config(rules, strip)


def _names(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        values = values.split(",") if "," in values else values.split()
    names = []
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{what} must hold parameter names (strings), got {value!r}")
        if value.strip():
            names.append(value.strip().lower())
    return names


class URLCanonicalizer:
    """Builds canonical keys for URLs with a fixed set of rules.

    Every name in :data:`RULES` is a keyword (``True`` by default).
    ``strip_params`` adds parameter names to remove everywhere,
    ``keep_params`` protects names from the built-in list, and ``host_rules``
    maps a host to overrides of any of these, e.g.
    ``{"shop.example": {"trailing_slash": False, "keep_params": ["ref"]}}``.
    A host rule covers the host's subdomains and builds on the rule of its
    nearest parent; a rule for ``www.example.com`` is one for ``example.com``.
    """

    def __init__(
        self,
        *,
        strip_params: Iterable[str] = (),
        keep_params: Iterable[str] = (),
        host_rules: Mapping[str, Mapping[str, Any]] | None = None,
        **rules: bool,
    ) -> None:
        all_on = (1 << len(RULES)) - 1
        self._default = _make_config(all_on, load_strip_params(), rules, strip_params, keep_params)
        self._hosts: dict[str, _Config] = {}
        self._host_cache: dict[str, tuple[str, _Config, int]] = {}
        self._origin_cache: dict[tuple[str, str], tuple[str, _Config, int]] = {}
        normalized: dict[str, Mapping[str, Any]] = {}
        for host, overrides in (host_rules or {}).items():
            if not isinstance(overrides, Mapping):
                raise ValueError(f"host_rules[{host!r}] must be a mapping, got {overrides!r}")
            unknown = set(overrides) - _HOST_RULE_KEYS
            if unknown:
                raise ValueError(
                    f"host_rules[{host!r}]: unknown keys {sorted(unknown)}; "
                    f"known: {', '.join(sorted(_HOST_RULE_KEYS))}"
                )
            normalized[_rule_host(host)] = overrides
        # A host is looked up by its suffixes of at most this many labels.
        self._max_labels = max((h.count(".") + 1 for h in normalized), default=0)
        # Parents first, so a subdomain's rule builds on its parent's.
        for host in sorted(normalized, key=lambda h: h.count(".")):
            overrides = normalized[host]
            parent = self._config_for(host.partition(".")[2]) if "." in host else self._default
            self._hosts[host] = _make_config(
                parent.rules,
                parent.strip,
                {k: v for k, v in overrides.items() if k in _BIT},
                overrides.get("strip_params", ()),
                overrides.get("keep_params", ()),
            )

    def __call__(self, url: str) -> str:
        return self.canonicalize_traced(url)[0]

    canonicalize = __call__

    @staticmethod
    def rule_names(mask: int) -> list[str]:
        """The names of the rules whose bits are set in ``mask``."""
        return rule_names(mask)

    def _config_for(self, host: str) -> _Config:
        if not self._hosts:
            return self._default
        candidate = host.rstrip(".")
        # Only suffixes as long as a rule's host can match: a hostile host of
        # 100k labels is not sliced 100k times.
        labels = candidate.rsplit(".", self._max_labels)
        if len(labels) > self._max_labels:
            candidate = candidate[len(labels[0]) + 1 :]
        while True:
            cfg = self._hosts.get(candidate)
            if cfg is not None:
                return cfg
            dot = candidate.find(".")
            if dot < 0:
                return self._default
            candidate = candidate[dot + 1 :]

    def _host(self, host: str) -> tuple[str, _Config, int]:
        """Normalize a host once; crawls meet the same few hosts again and again.

        Returns (host, rules in force there, mask of rules applied); a mask of
        -1 means the host cannot be parsed.
        """
        applied = 0
        low = host_to_ascii(host)
        if low is None:
            return host, self._default, -1
        cfg = self._config_for(low)
        if low != host:
            if not cfg.host:
                low = host
            else:
                applied |= _BIT["host"]
        host = low
        if cfg.www and _strippable_www(host):
            host = host[4:]
            applied |= _BIT["www"]
        return host, cfg, applied

    def _cache_host(self, host: str) -> tuple[str, _Config, int]:
        if len(host) > _MAX_CACHED_HOST:  # no DNS name is this long: a hostile page's
            return self._host(host)
        if len(self._host_cache) >= _HOST_CACHE_SIZE:
            self._host_cache.clear()
        found = self._host_cache[host] = self._host(host)
        return found

    def canonicalize_traced(self, url: str) -> tuple[str, int]:
        """The key of ``url`` and a bit mask of the rules that changed it.

        Never raises: a URL that cannot be parsed is its own key, stripped of
        leading and trailing C0 control characters and spaces (as browsers do).
        """
        stripped = url.strip(C0_AND_SPACE)
        try:
            result = self._canonicalize(stripped)
        except (ValueError, UnicodeError):
            result = None
        if result is None:
            return stripped, UNPARSED
        # Dropping a fragment or a parameter can bare whitespace that only
        # percent-encoding (when switched off) would have protected.
        return result[0].strip(C0_AND_SPACE), result[1]

    def _canonicalize(self, url: str) -> tuple[str, int] | None:
        if "\t" in url or "\n" in url or "\r" in url or "\\" in url:
            url = _clean_web_url(url)
        match = _URI_RE.match(url)
        assert match is not None  # the pattern matches every string
        scheme, netloc, path, query, fragment = match.groups()
        if scheme is None:
            return url, 0
        origin = self._origin_cache.get((scheme, netloc)) or self._cache_origin(scheme, netloc)
        if origin is _NOT_WEB:
            return url, 0  # only http(s) URLs are rewritten; others are left alone
        if origin is _UNPARSED_ORIGIN:
            return None
        prefix, cfg, applied = origin
        path, applied = _path(path, cfg, applied)
        if query is not None:
            query, applied = _query(query, cfg, applied)
        if fragment is not None and cfg.fragment:
            fragment = None
            applied |= _BIT["fragment"]
        parts = [prefix, path]
        if query is not None:
            parts += ["?", query]
        if fragment is not None:
            parts += ["#", fragment]
        return "".join(parts), applied

    def _cache_origin(self, scheme: str, netloc: str | None) -> tuple[str, _Config, int]:
        if netloc is None or len(netloc) > _MAX_CACHED_HOST:
            return self._origin(scheme, netloc)
        if len(self._origin_cache) >= _HOST_CACHE_SIZE:
            self._origin_cache.clear()
        found = self._origin_cache[scheme, netloc] = self._origin(scheme, netloc)
        return found

    def _origin(self, scheme: str, netloc: str | None) -> tuple[str, _Config, int]:
        """What a URL's scheme and authority become: ``(scheme://authority,
        rules in force on the host, mask of rules applied)``; :data:`_NOT_WEB`
        for a scheme other than http(s), :data:`_UNPARSED_ORIGIN` for an
        authority that cannot be parsed. A crawl meets a few origins again and
        again: they are cached."""
        if scheme.lower() not in _DEFAULT_PORT:
            return _NOT_WEB
        if netloc and "@" not in netloc and ":" not in netloc and "[" not in netloc:
            userinfo, host, port_text = None, netloc, None  # the common case, at once
        else:
            authority = _split_authority(netloc)
            if authority is None:
                return _UNPARSED_ORIGIN
            userinfo, host, port_text = authority
        host, cfg, applied = self._host_cache.get(host) or self._cache_host(host)
        if applied < 0:
            return _UNPARSED_ORIGIN
        if userinfo is not None and cfg.host:
            # "user:" is "user" (an empty password), and ":" or "" no userinfo at all.
            user, colon, password = userinfo.partition(":")
            if (colon and not password) or not userinfo:
                userinfo = user or None
                applied |= _BIT["host"]
        scheme = scheme.lower()
        if port_text is not None or scheme == "http":
            scheme, port_text, applied = _scheme_and_port(scheme, port_text, cfg, applied)
        parts = [scheme, "://"]
        if userinfo is not None:
            parts += [userinfo, "@"]
        parts.append(host)
        if port_text is not None:
            parts += [":", port_text]
        return "".join(parts), cfg, applied


def _clean_web_url(url: str) -> str:
    """What browsers (WHATWG URL) do to an http(s) URL before parsing it: ASCII
    tabs and newlines go, and ``\\`` is ``/`` before the query. Scrapy's
    ``Request`` does the same, so this matters when canonicalizing on one's own.
    Other URLs are returned unchanged."""
    cleaned = url.replace("\t", "").replace("\n", "").replace("\r", "")
    scheme = cleaned.partition(":")[0].lower()
    if scheme not in _DEFAULT_PORT:
        return url
    end = len(cleaned)
    cut = min((i for i in (cleaned.find("?"), cleaned.find("#")) if i >= 0), default=end)
    return cleaned[:cut].replace("\\", "/") + cleaned[cut:]


def _split_authority(netloc: str | None) -> tuple[str | None, str, str | None] | None:
    """``(userinfo, host, port text)`` of an authority (``None`` parts are
    absent); ``None`` when it cannot be a valid one."""
    if netloc is None:
        return None
    userinfo, at, hostport = netloc.rpartition("@")
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            return None
        host, port_text = hostport[: end + 1], hostport[end + 1 :]
        if port_text and port_text[0] != ":":
            return None
        port = port_text[1:] if port_text else None
    else:
        host, colon, port = hostport.partition(":")
        if not colon:
            port = None
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        return None
    return (userinfo if at else None), host, port


def _scheme_and_port(
    scheme: str, port_text: str | None, cfg: _Config, applied: int
) -> tuple[str, str | None, int]:
    """The ``scheme`` and ``default_port`` rules."""
    port = int(port_text) if port_text else None
    if port_text is not None and cfg.default_port:
        if port is None or port == _DEFAULT_PORT[scheme]:
            port_text = None
            applied |= _BIT["default_port"]
        elif str(port) != port_text:
            port_text = str(port)  # ":080" is ":80"
            applied |= _BIT["default_port"]
    # Without a port, or on a port that is not one of the two defaults (the same
    # port cannot speak both protocols), http and https share one key.
    if scheme == "http" and cfg.scheme and (port_text is None or port not in (80, 443)):
        scheme = "https"
        applied |= _BIT["scheme"]
    return scheme, port_text, applied


def _path(path: str, cfg: _Config, applied: int) -> tuple[str, int]:
    """The path rules, in their order."""
    if not path and cfg.empty_path:
        path = "/"
        applied |= _BIT["empty_path"]
    if cfg.percent_encoding and _PATH_FIX_RE.search(path):
        fixed = _PATH_FIX_RE.sub(_fix_escape, path)
        if fixed != path:
            path = fixed
            applied |= _BIT["percent_encoding"]
    if cfg.session_param and ";" in path:
        fixed = _JSESSIONID_RE.sub("", path)
        if fixed != path:
            path = fixed
            applied |= _BIT["session_param"]
    if cfg.dot_segments and "." in path and path.startswith("/"):
        fixed = _remove_dot_segments(path)
        if fixed != path:
            path = fixed
            applied |= _BIT["dot_segments"]
    if cfg.trailing_slash and len(path) > 1 and path[-1] == "/" and path[-2] != "/":
        path = path[:-1]
        applied |= _BIT["trailing_slash"]
    # Last, as the other rules can end a path in ".aspx" ("/(S(id))/a.aspx/." is
    # "/(S(id))/a.aspx/", then "/(S(id))/a.aspx"); dropping the segment changes no end.
    if cfg.session_param and "/(" in path and path[-5:].lower() == ".aspx":
        fixed = _ASPNET_SESSION_RE.sub("", path)
        if fixed != path:
            path = fixed
            applied |= _BIT["session_param"]
    return path, applied


def _query(query: str, cfg: _Config, applied: int) -> tuple[str | None, int]:
    """The query rules, in their order; ``None`` for no query at all."""
    pieces = query.split("&")
    if cfg.empty_query and "" in pieces:
        pieces = [p for p in pieces if p]
        applied |= _BIT["empty_query"]
    if "+" in query or _QUERY_FIX_RE.search(query):
        pieces, applied = _rewrite_pieces(query, pieces, cfg, applied)
    if cfg.strip:
        pieces, applied = _strip_params(pieces, cfg, applied)
    if (
        cfg.query_order
        and len(pieces) > 1
        and ("/" not in query or not any(_is_route(p) for p in pieces))
    ):
        ordered = sorted(pieces, key=lambda p: p.partition("=")[0])
        if ordered != pieces:
            pieces = ordered
            applied |= _BIT["query_order"]
    if not pieces and cfg.empty_query:
        return None, applied if query else applied | _BIT["empty_query"]
    return "&".join(pieces), applied


def _rewrite_pieces(
    query: str, pieces: list[str], cfg: _Config, applied: int
) -> tuple[list[str], int]:
    """The ``percent_encoding`` and ``query_plus`` rules on the query's pieces."""
    if cfg.percent_encoding and _QUERY_FIX_RE.search(query):
        fixed = [_QUERY_FIX_RE.sub(_fix_escape, p) for p in pieces]
        if fixed != pieces:
            pieces = fixed
            applied |= _BIT["percent_encoding"]
    if cfg.query_plus and "+" in query:
        fixed = [p.replace("+", "%20") for p in pieces]
        if fixed != pieces:
            pieces = fixed
            applied |= _BIT["query_plus"]
    return pieces, applied


def _strip_params(pieces: list[str], cfg: _Config, applied: int) -> tuple[list[str], int]:
    """The ``tracking_param`` and ``session_param`` rules on the query's pieces."""
    kept = []
    present: set[str] | None = None
    for piece in pieces:
        name, _, value = piece.partition("=")
        rule = cfg.strip.get(name.lower())
        if rule is not None and rule.matches(value):
            bit = _BIT["session_param" if rule.kind == "session" else "tracking_param"]
            if rule.requires is not None:
                if present is None:
                    present = {p.partition("=")[0].lower() for p in pieces}
                if rule.requires not in present:
                    bit = 0
            if cfg.rules & bit:
                applied |= bit
                continue
        kept.append(piece)
    return kept, applied


_default_canonicalizer: URLCanonicalizer | None = None


def canonicalize_url(url: str, **options: Any) -> str:
    """The dedup key of ``url``.

    Options are those of :class:`URLCanonicalizer`: any rule name from
    :data:`RULES` set to ``False`` switches that rule off; ``strip_params``,
    ``keep_params`` and ``host_rules`` extend the parameter lists. Build a
    :class:`URLCanonicalizer` once instead when calling this in a loop with
    options.

    Never raises on a ``str`` and is idempotent:
    ``canonicalize_url(canonicalize_url(u)) == canonicalize_url(u)``.

    >>> canonicalize_url("http://example.com/index.php?/blog/x&utm_medium=mail")
    'https://example.com/index.php?/blog/x'
    >>> canonicalize_url("http://[::1")  # unparseable: the stripped original
    'http://[::1'
    """
    global _default_canonicalizer
    if options:
        return URLCanonicalizer(**options)(url)
    if _default_canonicalizer is None:
        _default_canonicalizer = URLCanonicalizer()
    return _default_canonicalizer(url)
