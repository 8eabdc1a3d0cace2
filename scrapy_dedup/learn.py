"""Learned URL rules: which differences between URLs of one host do not change
the page, learned from the pages the crawl fetched. No Scrapy import.

Evidence is pairs of fetched pages of one host whose visible text is the
same. Each pair proposes rules that would explain it:

- ``param``: a query parameter (any value, or one value) can be dropped
  (``?sid=…``, ``?view=print``);
- ``prefix``: the first path segments can be replaced (``/m/x`` = ``/x``,
  ``/shop/tools/x`` = ``/shop/*/x``, ``/shop/tools/x`` = ``/item/x``);
- ``suffix``: the last path segments can be replaced (``/x/amp`` = ``/x``);
- ``case``: the path is case-insensitive under its first segment.

A rule maps every URL to a *class* URL (the URL with the difference taken
out; never fetched). Every fetched page joins its class under each rule of
its host: a page whose text equals the text of the class's first page
supports the rule, one whose text differs contradicts it. A rule is adopted
once ``min_support`` different classes (different pages, not variants of one)
confirmed it, and contradicted nowhere else than in one first path segment
(``/docs`` where a parameter matters): there it is excluded. A second
contradicted first segment revokes it.

An adopted rule skips a new URL whose class (under all adopted rules of its
host) already holds a fetched page, in a first segment where a page
confirmed it; one in ``1 / sample`` of those is fetched anyway, and its text
checks the rule again, as does :meth:`Learner.audit` when the crawl would
end. A contradiction is blamed on the rule family with the least evidence.
Every skipped request is kept; a contradiction hands back the requests the
rule skipped (in the excluded segment, or all of them when revoked) for the
caller to fetch.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = [
    "CanonicalTrust",
    "Learner",
    "Rule",
    "Skip",
    "body_digest",
    "page_digest",
    "visible_text",
]

logger = logging.getLogger(__name__)

#: Pages with less visible text than this (characters) are no evidence for a
#: rule (soft-404 pages, empty templates: many URLs, one text), only against.
MIN_TEXT = 200
_HISTORY = 20_000  # pages per host replayed when a rule is proposed
_CLASSES = 200_000  # classes per rule (beyond: no more evidence, never a skip)
_RULES_PER_HOST = 64  # proposed rules per host
_PAIRS_PER_TEXT = 4  # pages per text compared with a new page of that text
_MAX_SEGMENTS = 3  # a path rule replaces at most this many segments

_WORD = re.compile(r"[A-Za-z_-]{1,16}")

PARAM, PREFIX, SUFFIX, CASE = "param", "prefix", "suffix", "case"
CANDIDATE, ADOPTED, REVOKED = "candidate", "adopted", "revoked"


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


# -- URLs -----------------------------------------------------------------------


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


# -- rules ----------------------------------------------------------------------


@dataclass(eq=False)
class Rule:
    """One learned rule of one host, with its evidence."""

    host: str
    kind: str
    old: tuple[str, ...]  # param: (name,) or (name, value); path: segments; case: (first,)
    new: tuple[str, ...] = ()
    state: str = CANDIDATE
    support: int = 0  # classes where two pages had the same text
    # ... counted by the first path segment of their pages
    support_by: dict[str, int] = field(default_factory=dict, repr=False)
    confirmed: set[int] = field(default_factory=set, repr=False)  # those classes
    seen_in: set[str] = field(default_factory=set)  # first segments where pages confirmed it
    adopted_at: int = 0  # when it was adopted: 1 for the first rule of the crawl
    verified: int = 0  # pages fetched after adoption that had their class's text
    skipped: int = 0
    excluded: set[str] = field(default_factory=set)  # first segments where it failed
    examples: list[tuple[str, str]] = field(default_factory=list)  # same text
    counterexamples: list[tuple[str, str]] = field(default_factory=list)
    # class URL key -> (text digest, URL of its first page, enough text, changed by the rule)
    classes: dict[int, tuple[int, str, bool, bool]] = field(default_factory=dict, repr=False)

    @property
    def spec(self) -> str:
        """The rule in the form of fixed host rules and of the log."""
        if self.kind == PARAM:
            return f"?{'='.join(self.old)} does not matter"
        if self.kind == CASE:
            return f"/{self.old[0]}/... is case-insensitive"
        old, new = "/".join(self.old), "/".join(self.new)
        if self.kind == PREFIX:
            return f"/{old}/... = /{new + '/' if new else ''}..."
        return f".../{old} = ...{'/' + new if new else ''}"

    @property
    def family(self) -> tuple[str, str]:
        """Rules that can stand in for one another: one parameter's, one path
        kind's under one first segment."""
        return (
            PREFIX if self.kind == SUFFIX else self.kind,
            self.old[0] if self.kind != SUFFIX else self.old[-1],
        )

    @property
    def name(self) -> str:
        return f"{self.host}: {self.spec}"

    def rewrite(self, parts: _Parts) -> _Parts | None:
        """``parts`` with the difference this rule ignores taken out, or
        ``None`` when the rule does not touch it."""
        if self.kind == PARAM:
            if not parts.query:
                return None
            name = self.old[0]
            pairs = _params(parts.query)
            if len(self.old) == 1:
                kept = [p for p in pairs if p[0] != name]
            else:
                kept = [p for p in pairs if p != (name, self.old[1])]
            if len(kept) == len(pairs):
                return None
            return parts._replace(query="&".join(f"{n}={v}" if v else n for n, v in kept))
        segments = parts.segments
        if self.kind == CASE:
            if not segments or segments[0].lower() != self.old[0]:
                return None
            lowered = tuple(s.lower() for s in segments)
            return None if lowered == segments else parts._replace(segments=lowered)
        n = len(self.old)
        if self.kind == PREFIX:
            if not _prefix_matches(self.old, segments):
                return None
            new = self.new + segments[n:]
        else:
            if len(segments) <= n or segments[-n:] != self.old:
                return None
            new = segments[:-n] + self.new
        return None if new == segments else parts._replace(segments=new)


class Skip(NamedTuple):
    """A request an adopted rule found a copy of."""

    rules: tuple[Rule, ...]
    copy_of: str  # the fetched page in the same class
    first: str  # the first path segment of the request's URL
    url: str  # the request's canonical URL
    sample: bool = False  # picked to be fetched anyway, to check the rules


class _Kept(NamedTuple):
    request: Any
    first: str
    rules: tuple[Rule, ...]
    url: str


class _Page(NamedTuple):
    digest: int
    url: str
    enough: bool  # enough text to count as evidence for a rule
    used: tuple[Rule, ...]  # the adopted rules that changed its URL
    earlier: bool = False  # fetched by an earlier run (replayed from the store)


@dataclass
class _Host:
    rules: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Rule] = field(default_factory=dict)
    adopted: list[Rule] = field(default_factory=list)
    # url, digest, enough, fetched by an earlier run
    history: list[tuple[str, int, bool, bool]] = field(default_factory=list)
    pages: set[int] = field(default_factory=set)  # keys of the page URLs observed
    by_text: dict[int, list[str]] = field(default_factory=dict)  # digest -> first URLs
    # class URL key under every adopted rule -> its first fetched page
    copies: dict[int, _Page] = field(default_factory=dict)
    kept: list[_Kept] = field(default_factory=list)
    credit: float = 1.0  # of the sample: the first check is fetched


class Learner:
    """Learns URL rules per host from fetched pages and answers whether a new
    URL is a copy of a fetched page under them.

    ``inc(stat, n)`` counts what happens (``dedup/learn/...``); ``observe``
    returns the kept requests a contradiction releases, to fetch again.
    """

    def __init__(
        self,
        *,
        min_support: int = 3,
        sample: float = 0.05,
        max_kept: int = 100_000,
        frozen: bool = False,
        inc: Callable[[str, int], None] | None = None,
        kept: Callable[[str], bool] | None = None,
    ) -> None:
        if min_support < 1:
            raise ValueError("min_support must be at least 1")
        self.min_support = min_support
        self.sample = sample
        self.max_kept = max_kept
        #: Learn no new rule: the loaded ones apply (and can still fail).
        self.frozen = frozen
        self.inc: Callable[[str, int], None] = inc or _ignore
        #: Whether a page an earlier run fetched still stands for its class:
        #: its items were kept (and it is not to be fetched again). ``None``:
        #: always (no store to ask).
        self.kept_earlier = kept
        self.hosts: dict[str, _Host] = {}
        self.kept = 0
        self._adoptions = 0
        self._contradictions = 0
        self._audits = 0
        self._audited_at = 0
        self._released: list[Any] = []  # by contradictions, until observe returns them

    # -- what the crawl asks --

    def rules(self) -> list[Rule]:
        return [rule for host in self.hosts.values() for rule in host.rules.values()]

    # -- rules as a file a user can read and edit --

    def export(self) -> dict[str, Any]:
        """The adopted and revoked rules, as JSON-ready data (see :meth:`load`)."""
        hosts: dict[str, list[dict[str, Any]]] = {}
        for name, host in sorted(self.hosts.items()):
            for rule in host.rules.values():
                if rule.state == CANDIDATE:
                    continue
                entry = _rule_spec(rule)
                entry["means"] = rule.spec  # for the reader; load() ignores it
                if rule.state == REVOKED:
                    entry["revoked"] = True
                entry["not_under"] = sorted(f"/{first}" for first in rule.excluded)
                entry["confirmed_under"] = sorted(f"/{first}" for first in rule.seen_in)
                entry["pages_confirming"] = rule.support
                entry["pages_checked"] = rule.verified
                entry["requests_skipped"] = rule.skipped
                entry["examples"] = [list(pair) for pair in rule.examples[:3]]
                if rule.counterexamples:
                    entry["counterexamples"] = [list(pair) for pair in rule.counterexamples[:3]]
                hosts.setdefault(name, []).append(entry)
        return {"version": 1, "hosts": hosts}

    def load(self, data: dict[str, Any]) -> int:
        """Take the rules of :meth:`export`'s data (edited or not): adopted
        ones apply from the start (and are still checked), revoked ones are
        never proposed again. ``ValueError`` naming what is wrong. Returns how
        many rules were loaded."""
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError('not a rules file: expected {"version": 1, "hosts": {...}}')
        loaded = 0
        for host_name, entries in dict(data.get("hosts") or {}).items():
            host = self.hosts.setdefault(str(host_name).lower(), _Host())
            for entry in entries:
                kind, old, new = _parse_spec(entry)
                rule = Rule(str(host_name).lower(), kind, old, new)
                rule.excluded = {_first(p) for p in entry.get("not_under", ())}
                rule.seen_in = {_first(p) for p in entry.get("confirmed_under", ())}
                rule.support = int(entry.get("pages_confirming", 0))
                rule.verified = int(entry.get("pages_checked", 0))
                host.rules[(kind, old, new)] = rule
                if entry.get("revoked"):
                    rule.state = REVOKED
                else:
                    self._adoptions += 1
                    rule.adopted_at = self._adoptions
                    rule.state = ADOPTED
                    host.adopted.append(rule)
                    host.adopted.sort(key=lambda r: (r.kind != PARAM, r.kind, r.old))
                loaded += 1
        return loaded

    def check(self, url: str) -> Skip | None:
        """A :class:`Skip` when adopted rules make ``url`` a copy of a fetched
        page (its ``sample`` set when it is to be fetched anyway, to check
        them), else ``None``."""
        parts = _split(url)
        if parts is None:
            return None
        host = self.hosts.get(parts.host)
        if host is None or not host.adopted or _key(url) in host.pages:
            # (A page fetched itself is never its own copy: requested again,
            # it is one whose items an interrupted run did not save.)
            return None
        rewritten, used = self._apply(host, parts)
        if not used:
            return None
        copy = host.copies.get(_key(rewritten.url))
        if copy is None:
            return None
        if copy.earlier and self.kept_earlier is not None and not self.kept_earlier(copy.url):
            # An earlier run fetched that page but did not keep it (no item, a
            # failed callback, DEDUP_RECRAWL_AFTER passed, forgotten): fetched,
            # its class gets this run's page.
            return None
        first = parts.first
        if any(_where(rule, first) not in rule.seen_in for rule in used) or self._sampled(host):
            # Fetched: a rule skips in a part of the site (first path segment)
            # only once a page there confirmed it; then one in 1 / sample.
            self.inc("dedup/learn/sampled", 1)
            return Skip(used, copy.url, first, url, sample=True)
        if self.kept >= self.max_kept:
            self.inc("dedup/learn/kept_full", 1)
            return None
        return Skip(used, copy.url, first, url)

    def _sampled(self, host: _Host) -> bool:
        """Whether this check is one of the sample (the first, then one in 1 / sample)."""
        if not self.sample:
            return False
        host.credit += self.sample
        if host.credit >= 1.0:
            host.credit -= 1.0
            return True
        return False

    def keep(self, skip: Skip, request: Any) -> None:
        """Keep a request skipped by ``skip``, to hand back if a rule fails."""
        host = self.hosts[skip.rules[0].host]
        host.kept.append(_Kept(request, skip.first, skip.rules, skip.url))
        self.kept += 1
        for rule in skip.rules:
            rule.skipped += 1
        self.inc("dedup/learn/skipped", 1)

    def audit(self) -> list[Any]:
        """Kept requests to fetch as a last check before the crawl ends: one
        in twice ``1 / sample`` of each group skipped by the same rules in the
        same part of the site, and at least one of each. Up to three rounds, a
        new one only after a round that contradicted a rule."""
        if self._audits >= 3 or (self._audits and self._contradictions == self._audited_at):
            return []
        self._audits += 1
        self._audited_at = self._contradictions
        period = 2 * round(1 / self.sample) if self.sample else 20
        picked: list[Any] = []
        for host in self.hosts.values():
            groups: dict[tuple[str, tuple[Rule, ...]], int] = {}
            kept = []
            for entry in host.kept:
                group = (entry.first, entry.rules)
                seen = groups.get(group, 0)
                groups[group] = seen + 1
                if seen % period == 0:
                    picked.append(entry.request)
                else:
                    kept.append(entry)
            host.kept = kept
        self.kept -= len(picked)
        if picked:
            self.inc("dedup/learn/audited", len(picked))
        return picked

    def observe(self, url: str, digest: int, length: int, earlier: bool = False) -> list[Any]:
        """Record a fetched page (its canonical URL, its visible text's digest
        and length; ``earlier``: fetched by an earlier run); the kept requests
        a contradiction released."""
        parts = _split(url)
        if parts is None:
            return []
        host = self.hosts.setdefault(parts.host, _Host())
        page = _key(url)
        if page in host.pages:  # fetched again (a redirect back, a retry): nothing new
            return []
        host.pages.add(page)
        enough = length >= MIN_TEXT
        based, used = self._apply(host, parts)
        if host.adopted:
            self._check_copies(host, parts, based, _Page(digest, url, enough, used, earlier))
        for rule in list(host.rules.values()):
            if rule.state == CANDIDATE:
                self._evidence(host, rule, parts, based, digest, enough)
        if len(host.history) < _HISTORY:
            host.history.append((url, digest, enough, earlier))
        if enough:
            same_text = host.by_text.setdefault(digest, [])
            for other in same_text:
                self._propose(host, other, url)
            if len(same_text) < _PAIRS_PER_TEXT:
                same_text.append(url)
        released, self._released = self._released, []
        return released

    # -- evidence --

    def _apply(
        self, host: _Host, parts: _Parts, without: tuple[str, str] | None = None
    ) -> tuple[_Parts, tuple[Rule, ...]]:
        """``parts`` under every adopted rule of ``host`` (but those of the
        family ``without``), and the rules that changed it."""
        used = []
        first = parts.first
        for rule in host.adopted:
            if _where(rule, first) in rule.excluded or (
                without is not None and rule.family == without
            ):
                continue
            rewritten = rule.rewrite(parts)
            if rewritten is not None:
                parts = rewritten
                used.append(rule)
        return parts, tuple(used)

    def _check_copies(self, host: _Host, parts: _Parts, based: _Parts, page: _Page) -> None:
        """Adopted rules checked against the page of their class fetched first."""
        cls = _key(based.url)
        first = host.copies.get(cls)
        if first is None:
            if page.enough:  # a short page (an error, "busy") never stands for a class
                host.copies[cls] = page
            return
        if first.digest == page.digest:
            if page.enough:
                for rule in dict.fromkeys(first.used + page.used):
                    rule.verified += 1
                    rule.seen_in.add(_where(rule, parts.first))
                self.inc("dedup/learn/verified", 1)
                if first.earlier and not page.earlier:
                    host.copies[cls] = page  # this run's page stands for the class
            return
        self._blame(host, parts, first.url)

    def _blame(
        self, host: _Host, parts: _Parts, earlier_url: str, candidate: Rule | None = None
    ) -> None:
        """Two pages with different texts in one class: blame, of the rule
        families (one parameter's rules, one path kind's under one segment)
        without which they would not be one class, the one with the least
        evidence (a session id confirmed a hundred times is not what a colour
        parameter adopted a moment ago got wrong)."""
        earlier = _split(earlier_url)
        assert earlier is not None
        families: dict[tuple[str, str], list[Rule]] = {}
        for rule in self._apply(host, parts)[1] + self._apply(host, earlier)[1]:
            if rule not in families.setdefault(rule.family, []):
                families[rule.family].append(rule)
        if candidate is not None:
            families.setdefault(candidate.family, []).append(candidate)
        if not families:
            return

        def merged(without: tuple[str, str]) -> bool:
            a, b = self._apply(host, parts, without)[0], self._apply(host, earlier, without)[0]
            if candidate is not None and candidate.family != without:
                a, b = candidate.rewrite(a) or a, candidate.rewrite(b) or b
            return a == b

        def evidence(family: tuple[str, str]) -> int:
            return sum(rule.support + rule.verified for rule in families[family])

        needed = [family for family in families if not merged(family)] or list(families)
        if candidate is not None and candidate.family in needed:
            # The newest hypothesis is blamed; the adopted rules that helped are
            # checked by the pages of their own classes.
            needed = [candidate.family]
        else:
            needed = [
                family for family in needed if candidate is None or family != candidate.family
            ]
            if not needed:
                return
            weakest = min(evidence(family) for family in needed)
            needed = [family for family in needed if evidence(family) == weakest]
            # Of equals, the one adopted last.
            newest = max(rule.adopted_at for family in needed for rule in families[family])
            needed = [
                family
                for family in needed
                if any(rule.adopted_at == newest for rule in families[family])
            ]
        for family in needed:
            # The whole family: ?lang=de goes with ?lang.
            blamed = (
                families[family]
                if candidate is not None and family == candidate.family
                else [
                    rule
                    for rule in host.rules.values()
                    if rule.family == family and rule.state != REVOKED
                ]
            )
            for rule in blamed:
                # Excluded where it changed a URL: under the first segment of
                # the page it rewrote.
                where = parts if rule.rewrite(parts) or not rule.rewrite(earlier) else earlier
                self._contradict(host, rule, parts.url, earlier_url, where.first)

    def _evidence(
        self, host: _Host, rule: Rule, parts: _Parts, based: _Parts, digest: int, enough: bool
    ) -> None:
        """A candidate rule checked against the page of its class fetched first."""
        rewritten = rule.rewrite(based)
        cls = _key((rewritten or based).url)
        url = parts.url
        known = rule.classes.get(cls)
        if known is None:
            if len(rule.classes) < _CLASSES:
                rule.classes[cls] = (digest, url, enough, rewritten is not None)
            return
        if known[1] == url or not (known[3] or rewritten is not None):
            return  # the adopted rules alone made them one class: not this rule's doing
        if known[0] == digest:
            if enough and known[2]:
                self._support(host, rule, cls, known[1], url, parts.first)
            return
        self._blame(host, parts, known[1], candidate=rule)

    def _support(
        self, host: _Host, rule: Rule, cls: int, earlier: str, url: str, first: str
    ) -> None:
        # A class counts once: variants of one page are not independent.
        if cls in rule.confirmed:
            return
        rule.confirmed.add(cls)
        rule.support += 1
        first = _where(rule, first)
        rule.seen_in.add(first)
        rule.support_by[first] = rule.support_by.get(first, 0) + 1
        if len(rule.examples) < 8:
            rule.examples.append((earlier, url))
        if rule.state == CANDIDATE and self._supported(rule):
            self._adopt(host, rule)

    def _supported(self, rule: Rule) -> bool:
        """Enough classes confirmed it outside the segments where it failed."""
        support = sum(n for first, n in rule.support_by.items() if first not in rule.excluded)
        return support >= self.min_support and len(rule.excluded) < 2

    def _contradict(self, host: _Host, rule: Rule, url: str, earlier: str, first: str) -> None:
        first = _where(rule, first)
        if len(rule.counterexamples) < 8:
            rule.counterexamples.append((earlier, url))
        if first in rule.excluded:
            return
        rule.excluded.add(first)
        rule.seen_in.discard(first)
        self._contradictions += 1
        self.inc("dedup/learn/contradicted", 1)
        was_adopted = rule.state == ADOPTED
        # A case rule covers one segment: failing there is failing.
        if len(rule.excluded) >= 2 or rule.kind == CASE:
            rule.state = REVOKED
        if not was_adopted:
            return
        if rule.state == REVOKED:
            host.adopted.remove(rule)
            self.inc("dedup/learn/revoked", 1)
            logger.info(
                "Revoked learned URL rule %s: %s and %s have different texts",
                rule.name,
                earlier,
                url,
            )
        else:
            self.inc("dedup/learn/excluded", 1)
            logger.info(
                "Learned URL rule %s no longer applies under /%s/: %s and %s have different texts",
                rule.name,
                first,
                earlier,
                url,
            )
        self._release(
            host,
            lambda entry: (
                rule in entry.rules
                and (rule.state == REVOKED or _where(rule, entry.first) == first)
            ),
        )
        self._rebuild(host)

    def _release(self, host: _Host, which: Callable[[_Kept], bool]) -> None:
        """Hand back the kept requests ``which`` picks (``observe`` returns them)."""
        released = [entry.request for entry in host.kept if which(entry)]
        if not released:
            return
        host.kept = [entry for entry in host.kept if not which(entry)]
        self.kept -= len(released)
        self._released += released
        self.inc("dedup/learn/released", len(released))

    def _adopt(self, host: _Host, rule: Rule) -> None:
        self._adoptions += 1
        rule.adopted_at = self._adoptions
        rule.state = ADOPTED
        host.adopted.append(rule)
        # Parameters first, then paths: one order for every URL.
        host.adopted.sort(key=lambda r: (r.kind != PARAM, r.kind, r.old))
        self.inc("dedup/learn/adopted", 1)
        example = rule.examples[0] if rule.examples else ("", "")
        logger.info(
            "Learned URL rule %s from %d pages with the same text (e.g. %s = %s)",
            rule.name,
            rule.support,
            *example,
        )
        self._rebuild(host)

    def _rebuild(self, host: _Host) -> None:
        """Classes again from the pages fetched so far, under the adopted rules
        as they are now: the copies, and the candidates' evidence; then every
        kept request whose class no longer holds a fetched page is handed back."""
        host.copies = {}
        candidates = [rule for rule in host.rules.values() if rule.state == CANDIDATE]
        for rule in candidates:
            rule.classes.clear()
            rule.confirmed.clear()
        for url, digest, enough, earlier in host.history:
            parts = _split(url)
            if parts is None:
                continue
            based, used = self._apply(host, parts)
            if host.adopted and enough:
                cls = _key(based.url)
                first = host.copies.get(cls)
                if first is None or (first.earlier and not earlier):
                    host.copies[cls] = _Page(digest, url, enough, used, earlier)
            for rule in candidates:
                if rule.state == CANDIDATE:  # (one may be adopted meanwhile)
                    self._evidence(host, rule, parts, based, digest, enough)
        self._release(host, lambda entry: not self._still_a_copy(host, entry))

    def _still_a_copy(self, host: _Host, entry: _Kept) -> bool:
        parts = _split(entry.url)
        if parts is None:
            return False
        based, used = self._apply(host, parts)
        return bool(used) and _key(based.url) in host.copies

    # -- proposals --

    def _propose(self, host: _Host, a_url: str, b_url: str) -> None:
        a, b = _split(a_url), _split(b_url)
        if self.frozen or a is None or b is None or a.base != b.base:
            return
        # What adopted rules explain already is not a difference any more.
        a, b = self._apply(host, a)[0], self._apply(host, b)[0]
        for kind, old, new in _explanations(a, b):
            key = (kind, old, new)
            if key in host.rules or len(host.rules) >= _RULES_PER_HOST:
                continue
            rule = host.rules[key] = Rule(a.host, kind, old, new)
            self.inc("dedup/learn/proposed", 1)
            for url, digest, enough, _ in host.history:  # the pages fetched so far
                parts = _split(url)
                if parts is not None and rule.state == CANDIDATE:
                    based = self._apply(host, parts)[0]
                    self._evidence(host, rule, parts, based, digest, enough)


def _where(rule: Rule, first: str) -> str:
    """The part of the site a rule's evidence and exclusions are kept for:
    the first path segment (a case rule's, lowercased)."""
    return first.lower() if rule.kind == CASE else first


def _first(path: str) -> str:
    return str(path).strip("/").split("/")[0]


def _path(segments: tuple[str, ...]) -> str:
    return "/" + "/".join(segments) if segments else ""


def _segments(path: Any) -> tuple[str, ...]:
    text = str(path).strip("/")
    return tuple(text.split("/")) if text else ()


def _rule_spec(rule: Rule) -> dict[str, Any]:
    if rule.kind == PARAM:
        spec = {"rule": PARAM, "name": rule.old[0]}
        if len(rule.old) > 1:
            spec["value"] = rule.old[1]
        return spec
    if rule.kind == CASE:
        return {"rule": CASE, "under": f"/{rule.old[0]}"}
    return {"rule": rule.kind, "from": _path(rule.old), "to": _path(rule.new)}


def _parse_spec(entry: Any) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    if not isinstance(entry, dict):
        raise ValueError(f"a rule is an object, not {entry!r}")
    kind = entry.get("rule")
    if kind == PARAM and isinstance(entry.get("name"), str) and entry["name"]:
        value = entry.get("value")
        return PARAM, (entry["name"],) if value is None else (entry["name"], str(value)), ()
    if kind == CASE and _segments(entry.get("under", "")):
        return CASE, (_segments(entry["under"])[0].lower(),), ()
    if kind in (PREFIX, SUFFIX) and _segments(entry.get("from", "")):
        return kind, _segments(entry["from"]), _segments(entry.get("to", ""))
    raise ValueError(
        f"unknown rule {entry!r}: expected "
        '{"rule": "param", "name": ...[, "value": ...]}, {"rule": "prefix" or "suffix", '
        '"from": "/a/b", "to": "/c"} or {"rule": "case", "under": "/help"}'
    )


def _explanations(a: _Parts, b: _Parts) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """The rules that would make URLs ``a`` and ``b`` one."""
    found: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    if a.fragment != b.fragment:
        return found
    if a.segments == b.segments:
        pa, pb = _params(a.query), _params(b.query)
        names = {n for n, _ in pa} | {n for n, _ in pb}
        differing = [
            n
            for n in sorted(names)
            if sorted(v for m, v in pa if m == n) != sorted(v for m, v in pb if m == n)
        ]
        if len(differing) == 1:
            name = differing[0]
            found.append((PARAM, (name,), ()))
            values = {v for m, v in pa + pb if m == name}
            present = [n for n, _ in pa].count(name) + [n for n, _ in pb].count(name)
            # One side has it, with one value that is a word (view=print, lang=de).
            if len(values) == 1 and present == 1 and _WORD.fullmatch(next(iter(values))):
                found.append((PARAM, (name, values.pop()), ()))
        return found
    if a.query != b.query:
        return found
    sa, sb = a.segments, b.segments
    if sa and [s.lower() for s in sa] == [s.lower() for s in sb]:
        return [(CASE, (sa[0].lower(),), ())]
    common = min(len(sa), len(sb))
    tail = 0
    while tail < common and sa[-1 - tail] == sb[-1 - tail]:
        tail += 1
    head = 0
    while head < common - tail and sa[head] == sb[head]:
        head += 1
    if tail:
        old, new = sa[: len(sa) - tail], sb[: len(sb) - tail]
        if (len(new), new) > (len(old), old):
            old, new = new, old
        if len(old) > _MAX_SEGMENTS or not old:
            return found
        found.append((PREFIX, old, new))
        # The same for any value of the one segment that differs:
        # /shop/tools/x = /shop/garden/x gives /shop/*/x, and /shop/tools/x =
        # /item/x gives /shop/*/x = /item/x.
        if len(old) == len(new):
            diff = [i for i, (x, y) in enumerate(zip(old, new, strict=True)) if x != y]
            if len(diff) == 1:
                star = (*old[: diff[0]], "*", *old[diff[0] + 1 :])
                found.append((PREFIX, star, star))
        elif len(old) >= 2:
            found.append((PREFIX, (*old[:-1], "*"), new))
    elif head:
        old, new = sa[head:], sb[head:]
        if (len(new), new) > (len(old), old):
            old, new = new, old
        if 0 < len(old) <= _MAX_SEGMENTS:
            found.append((SUFFIX, old, new))
    return found


# -- rel=canonical declarations, trusted per host once verified ------------------


@dataclass
class _Trust:
    verified: int = 0  # declarations whose target, fetched, had the declaring page's text
    revoked: bool = False
    # key of a declared target's URL -> (declaring page's digest, its URL)
    declared: dict[int, tuple[int, str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # targets not fetched on trust
    credit: float = 1.0


class CanonicalTrust:
    """Whether a host's rel=canonical declarations can be trusted to skip the
    declared page: only after ``min_support`` declared pages, fetched, turned
    out to have the declaring page's text; never again after one did not
    (``/~alice/`` declaring ``/~bob/``, page 2 of a list declaring page 1).
    One in ``1 / sample`` declared targets is still left to be fetched, to
    check. ``observe`` returns the targets skipped on trust when a host's
    trust is revoked, to fetch them after all."""

    def __init__(
        self,
        *,
        min_support: int = 3,
        sample: float = 0.05,
        inc: Callable[[str, int], None] | None = None,
    ) -> None:
        self.min_support = min_support
        self.sample = sample
        self.inc: Callable[[str, int], None] = inc or _ignore
        self.hosts: dict[str, _Trust] = {}

    def declare(self, target: str, digest: int, page: str, fetch: str = "") -> bool:
        """A page (its URL and visible-text digest) declares canonical URL
        ``target`` (canonical form; ``fetch``: as declared): whether to skip
        fetching it."""
        trust = self.record(target, digest, page)
        if trust is None or trust.verified < self.min_support:
            return False
        trust.credit += self.sample
        if self.sample and trust.credit >= 1.0:  # left to be fetched: a check
            trust.credit -= 1.0
            return False
        trust.skipped.append(fetch or target)
        return True

    def record(self, target: str, digest: int, page: str) -> _Trust | None:
        """Remember a declaration (made here, or by another worker), to check
        against the target's text when it is fetched; its host's trust."""
        parts = _split(target)
        if parts is None:
            return None
        trust = self.hosts.setdefault(parts.host, _Trust())
        if trust.revoked:
            return None
        if len(trust.declared) < _CLASSES:
            trust.declared.setdefault(_key(target), (digest, page))
        return trust

    def expects(self, url: str) -> bool:
        """Whether pages declared ``url`` (canonical form) canonical and their
        texts wait for its text: only then need :meth:`observe` be told."""
        if not self.hosts:
            return False
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        return trust is not None and not trust.revoked and _key(url) in trust.declared

    def observe(self, url: str, digest: int) -> list[str]:
        """A fetched page: if pages declared it canonical, does it have their
        text? The targets to fetch after all when that revokes its host's trust."""
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        if trust is None or trust.revoked:
            return []
        declared = trust.declared.pop(_key(url), None)
        if declared is None:
            return []
        if declared[0] == digest:
            trust.verified += 1
            self.inc("dedup/canonical/verified", 1)
            return []
        trust.revoked = True
        self.inc("dedup/canonical/revoked", 1)
        logger.info(
            "Not trusting the rel=canonical declarations of %s any more: %s declares %s, "
            "whose text is another",
            parts.host if parts else url,
            declared[1],
            url,
        )
        skipped, trust.skipped = trust.skipped, []
        trust.declared.clear()
        return skipped

    def trusted(self, host: str) -> bool:
        trust = self.hosts.get(host)
        return trust is not None and not trust.revoked and trust.verified >= self.min_support
