"""One learned rule of one host (:class:`Rule`), with its evidence; the rules
a pair of URLs with one text proposes (:func:`_explanations`); rules as the
entries of a rules file. No Scrapy import."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scrapy_dedup.learn.scope import _params, _Parts, _path, _prefix_matches, _segments

__all__ = [
    "ADOPTED",
    "CANDIDATE",
    "CASE",
    "PARAM",
    "PARAMS",
    "PREFIX",
    "REVOKED",
    "SUFFIX",
    "Rule",
    "Skip",
]

_MAX_SEGMENTS = 3  # a path rule replaces at most this many segments
# A parameter-set rule names at most this many parameters that vary together
# (?_pos=1&_sid=ab&_ss=r): more differences than that are another page.
_MAX_SET = 4

_WORD = re.compile(r"[A-Za-z_-]{1,16}")

PARAM, PARAMS, PREFIX, SUFFIX, CASE = "param", "params", "prefix", "suffix", "case"
CANDIDATE, ADOPTED, REVOKED = "candidate", "adopted", "revoked"


@dataclass(eq=False)
class Rule:
    """One learned rule of one host, with its evidence."""

    host: str
    kind: str
    # param: (name,) or (name, value); params: the names, sorted; path: segments;
    # case: (first,)
    old: tuple[str, ...]
    new: tuple[str, ...] = ()
    state: str = CANDIDATE
    support: int = 0  # distinct texts of the classes where two pages had one text
    # those classes: class URL key -> (text digest, part of the site of the pair)
    confirmed: dict[int, tuple[int, str]] = field(default_factory=dict, repr=False)
    seen_in: set[str] = field(default_factory=set)  # first segments where pages confirmed it
    adopted_at: int = 0  # when it was adopted: 1 for the first rule of the crawl
    verified: int = 0  # pages fetched after adoption that had their class's text
    # their classes (the URL of the class's page), by part of the site (_where)
    checked: dict[str, set[str]] = field(default_factory=dict, repr=False)
    # Loaded from a rules file: its counts include the pages of the run that
    # wrote it, which the store's evidence log replays (not counted again).
    loaded: bool = False
    skipped: int = 0
    excluded: set[str] = field(default_factory=set)  # first segments where it failed
    examples: list[tuple[str, str]] = field(default_factory=list)  # same text
    counterexamples: list[tuple[str, str]] = field(default_factory=list)
    # class URL key -> (text digest, URL of its first page, enough text, key of that
    # page's URL under the adopted rules)
    classes: dict[int, tuple[int, str, bool, int]] = field(default_factory=dict, repr=False)

    def forget_evidence(self) -> None:
        """Drop a candidate's evidence, to rebuild it from the pages again."""
        self.classes.clear()
        self.confirmed.clear()
        self.support = 0
        self.seen_in.clear()
        self.examples.clear()

    def supporting(self, excluded: Collection[str] = ()) -> int:
        """How many distinct texts confirmed it (outside the ``excluded`` parts)."""
        return len({digest for digest, where in self.confirmed.values() if where not in excluded})

    @property
    def spec(self) -> str:
        """The rule in the form of fixed host rules and of the log."""
        if self.kind == PARAM:
            return f"?{'='.join(self.old)} does not matter"
        if self.kind == PARAMS:
            return f"?{', ?'.join(self.old)} together do not matter"
        if self.kind == CASE:
            return f"/{self.old[0]}/... is case-insensitive"
        old, new = "/".join(self.old), "/".join(self.new)
        if self.kind == PREFIX:
            return f"/{old}/... = /{new + '/' if new else ''}..."
        return f".../{old} = ...{'/' + new if new else ''}"

    @property
    def family(self) -> tuple[str, str]:
        """Rules that can stand in for one another: one parameter's (or one
        set's), one path kind's under one first segment."""
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
        return _REWRITES[self.kind](self, parts)


def _rewrite_param(rule: Rule, parts: _Parts) -> _Parts | None:
    """The query without the rule's parameter (any value, or its one value)."""
    if not parts.query:
        return None
    pairs = _params(parts.query)
    if len(rule.old) == 1:
        kept = [p for p in pairs if p[0] != rule.old[0]]
    else:
        kept = [p for p in pairs if p != (rule.old[0], rule.old[1])]
    if len(kept) == len(pairs):
        return None
    return parts._replace(query="&".join(f"{n}={v}" if v else n for n, v in kept))


def _rewrite_params(rule: Rule, parts: _Parts) -> _Parts | None:
    """The query without the rule's parameters, only where all of them are
    there: the set was seen varying together, never one of them alone."""
    if not parts.query:
        return None
    pairs = _params(parts.query)
    names = set(rule.old)
    if not names <= {n for n, _ in pairs}:
        return None
    kept = [p for p in pairs if p[0] not in names]
    return parts._replace(query="&".join(f"{n}={v}" if v else n for n, v in kept))


def _rewrite_case(rule: Rule, parts: _Parts) -> _Parts | None:
    """The path lowercased, under the rule's first segment."""
    segments = parts.segments
    if not segments or segments[0].lower() != rule.old[0]:
        return None
    lowered = tuple(s.lower() for s in segments)
    return None if lowered == segments else parts._replace(segments=lowered)


def _rewrite_prefix(rule: Rule, parts: _Parts) -> _Parts | None:
    """The first segments replaced (``*`` matches any one)."""
    segments = parts.segments
    if not _prefix_matches(rule.old, segments):
        return None
    new = rule.new + segments[len(rule.old) :]
    return None if new == segments else parts._replace(segments=new)


def _rewrite_suffix(rule: Rule, parts: _Parts) -> _Parts | None:
    """The last segments replaced."""
    segments, n = parts.segments, len(rule.old)
    if len(segments) <= n or segments[-n:] != rule.old:
        return None
    new = segments[:-n] + rule.new
    return None if new == segments else parts._replace(segments=new)


_REWRITES = {
    PARAM: _rewrite_param,
    PARAMS: _rewrite_params,
    CASE: _rewrite_case,
    PREFIX: _rewrite_prefix,
    SUFFIX: _rewrite_suffix,
}


class Skip(NamedTuple):
    """A request an adopted rule found a copy of."""

    rules: tuple[Rule, ...]
    copy_of: str  # the fetched page in the same class
    first: str  # the template of the request's URL (its scope)
    url: str  # the request's canonical URL
    sample: bool = False  # picked to be fetched anyway, to check the rules


def _where(rule: Rule, scope: str) -> str:
    """The part of the site a rule's evidence and exclusions are kept for:
    the URL's template (:func:`~scrapy_dedup.learn.scope.template`); a case
    rule's, its first path segment, lowercased (it covers that section)."""
    return scope.split("/", 1)[0].lower() if rule.kind == CASE else scope


def _rule_spec(rule: Rule) -> dict[str, Any]:
    if rule.kind == PARAM:
        spec = {"rule": PARAM, "name": rule.old[0]}
        if len(rule.old) > 1:
            spec["value"] = rule.old[1]
        return spec
    if rule.kind == PARAMS:
        return {"rule": PARAMS, "names": list(rule.old)}
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
    names = entry.get("names")
    if (
        kind == PARAMS
        and isinstance(names, list)
        and all(isinstance(n, str) and n for n in names)
        and 2 <= len(set(names)) <= _MAX_SET
    ):
        return PARAMS, tuple(sorted(set(names))), ()
    if kind == CASE and _segments(entry.get("under", "")):
        return CASE, (_segments(entry["under"])[0].lower(),), ()
    if kind in (PREFIX, SUFFIX) and _segments(entry.get("from", "")):
        return kind, _segments(entry["from"]), _segments(entry.get("to", ""))
    raise ValueError(
        f"unknown rule {entry!r}: expected "
        '{"rule": "param", "name": ...[, "value": ...]}, {"rule": "params", "names": '
        '[2 to 4 names]}, {"rule": "prefix" or "suffix", '
        '"from": "/a/b", "to": "/c"} or {"rule": "case", "under": "/help"}'
    )


Proposal = tuple[str, tuple[str, ...], tuple[str, ...]]  # (kind, old, new)


def _explanations(a: _Parts, b: _Parts) -> list[Proposal]:
    """The rules that would make URLs ``a`` and ``b`` one."""
    if a.fragment != b.fragment:
        return []
    if a.segments == b.segments:
        return _param_explanations(_params(a.query), _params(b.query))
    if a.query != b.query:
        return []
    sa, sb = a.segments, b.segments
    if sa and [s.lower() for s in sa] == [s.lower() for s in sb]:
        return [(CASE, (sa[0].lower(),), ())]
    return _path_explanations(sa, sb)


def _param_explanations(pa: list[tuple[str, str]], pb: list[tuple[str, str]]) -> list[Proposal]:
    """One query parameter differs: it does not matter (with one value, if
    only one side has it and its value is a word). Two to four differ: the
    set does not matter, as one rule (session and position parameters that
    come together: ``?_pos=1&_sid=ab&_ss=r``); each alone was never seen to
    make no difference, so no rule of one of them is proposed."""
    names = {n for n, _ in pa} | {n for n, _ in pb}
    differing = [
        n
        for n in sorted(names)
        if sorted(v for m, v in pa if m == n) != sorted(v for m, v in pb if m == n)
    ]
    if 2 <= len(differing) <= _MAX_SET:
        return [(PARAMS, tuple(differing), ())]
    if len(differing) != 1:
        return []
    name = differing[0]
    found: list[Proposal] = [(PARAM, (name,), ())]
    values = {v for m, v in pa + pb if m == name}
    present = [n for n, _ in pa].count(name) + [n for n, _ in pb].count(name)
    # One side has it, with one value that is a word (view=print, lang=de).
    if len(values) == 1 and present == 1 and _WORD.fullmatch(next(iter(values))):
        found.append((PARAM, (name, values.pop()), ()))
    return found


def _path_explanations(sa: tuple[str, ...], sb: tuple[str, ...]) -> list[Proposal]:
    """The first segments differ (a prefix rule), else the last (a suffix rule)."""
    common = min(len(sa), len(sb))
    tail = 0
    while tail < common and sa[-1 - tail] == sb[-1 - tail]:
        tail += 1
    head = 0
    while head < common - tail and sa[head] == sb[head]:
        head += 1
    if tail:
        return _prefix_explanations(*_longer_first(sa[: len(sa) - tail], sb[: len(sb) - tail]))
    if head:
        old, new = _longer_first(sa[head:], sb[head:])
        if 0 < len(old) <= _MAX_SEGMENTS:
            return [(SUFFIX, old, new)]
    return []


def _longer_first(
    x: tuple[str, ...], y: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (y, x) if (len(y), y) > (len(x), x) else (x, y)


def _prefix_explanations(old: tuple[str, ...], new: tuple[str, ...]) -> list[Proposal]:
    if len(old) > _MAX_SEGMENTS or not old:
        return []
    found: list[Proposal] = [(PREFIX, old, new)]
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
    return found
