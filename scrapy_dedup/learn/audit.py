"""The requests learned rules skipped, kept to be handed back if a rule
fails, and the ones drawn from them to be fetched as a check. No Scrapy import."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy_dedup.learn.rules import _where

if TYPE_CHECKING:
    from scrapy_dedup.learn.rules import Rule


class _Kept(NamedTuple):
    request: Any
    first: str
    rules: tuple[Rule, ...]
    url: str
    copy: str = ""  # the fetched page of its class (``Skip.copy_of``)


#: Distinct pages (classes) of one rule that the crawl's checks and the audit
#: together look at: a difference that matters on a 5% minority of the pages
#: a rule skips escapes 59 of them with probability (1 - 0.05) ** 59 < 0.05.
STRATA = 59

# A rule, and the part of the site it skipped in (``_where``: a URL template).
Group = tuple["Rule", str]


def draw(
    kept: list[_Kept],
    strata: int = STRATA,
    checked: Mapping[Group, Collection[str]] | None = None,
) -> tuple[list[_Kept], list[_Kept]]:
    """``(drawn, still kept)``. Of each rule, kept requests of classes (the
    page a request copies) the crawl has not checked, one per class, until
    ``strata`` classes of the rule are checked: those of ``checked`` (per
    rule and template, the classes whose text a page fetched anyway
    confirmed) count, and a request drawn counts for every rule that skipped
    it. A rule's draws are shared among its templates in proportion to their
    unchecked classes (at least one each), and taken in the order the
    requests were kept. And the first request of each group skipped by the
    same rules in the same template, as a last look at each.

    Why this many: a rule that fails on a minority of the pages it skips (a
    share ``p``: ``?variant`` that changes 5% of the products, ``?sort`` that
    is the text of 10% of the listings) fails on each class a sample or the
    audit fetches with probability ``p``, whatever the crawl's order (it
    cannot know a page's text before fetching it); ``k`` classes all miss
    the minority with probability ``(1 - p) ** k``, so 59 find a 5% minority
    with 95% probability. A rule with fewer unchecked classes than that has
    every one of them drawn, and then no class can hide a minority. The
    crawl's checks are such draws already: a rule it checked on 59 pages
    costs the audit one request per group. Drawing in proportion keeps each
    template's share of the draws its share of the rule's pages, so the
    argument holds for the rule's pages as a whole (a minority confined to
    one template counts as its share of them). One request suffices for a
    class: a contradiction excludes the rule in that template and hands back
    every request it skipped there.

    >>> from scrapy_dedup.learn.rules import Rule
    >>> sid = Rule("s.test", "param", ("sid",))
    >>> kept = [_Kept(n, "p/*", (sid,), f"u{n}", f"c{n % 3}") for n in range(9)]
    >>> [e.request for e in draw(kept)[0]]  # one of each class
    [0, 1, 2]
    >>> [e.request for e in draw(kept, strata=1)[0]]
    [0]
    >>> [e.request for e in draw(kept, checked={(sid, "p/*"): {"c0", "c1"}})[0]]
    [0, 2]
    """
    checked = checked or {}
    unchecked: dict[Group, set[str]] = {}  # per group, the classes not checked yet
    for entry in kept:
        for rule in entry.rules:
            group = (rule, _where(rule, entry.first))
            if entry.copy not in checked.get(group, ()):
                unchecked.setdefault(group, set()).add(entry.copy)
    done: dict[Rule, int] = {}  # per rule, its classes checked
    for (rule, _), classes in checked.items():
        done[rule] = done.get(rule, 0) + len(classes)
    total: dict[Rule, int] = {}
    for (rule, _), classes in unchecked.items():
        total[rule] = total.get(rule, 0) + len(classes)
    quota: dict[Group, int] = {}  # per group, how many of its classes to draw
    for group, classes in unchecked.items():
        rule = group[0]
        wanted = max(0, strata - done.get(rule, 0))
        share = math.ceil(wanted * len(classes) / total[rule])
        quota[group] = min(len(classes), share)
    have = {group: set(checked.get(group, ())) for group in unchecked}  # checked or drawn
    first: set[tuple[str, tuple[Rule, ...]]] = set()
    drawn: list[_Kept] = []
    rest: list[_Kept] = []
    for entry in kept:
        key = (entry.first, entry.rules)
        take = key not in first
        first.add(key)
        groups = [(rule, _where(rule, entry.first)) for rule in entry.rules]
        for group in groups:
            seen = have.get(group)
            if seen is not None and entry.copy not in seen and quota[group] > 0:
                take = True
        if take:
            for group in groups:
                seen = have.get(group)
                if seen is not None and entry.copy not in seen:
                    seen.add(entry.copy)
                    quota[group] -= 1
            drawn.append(entry)
        else:
            rest.append(entry)
    return drawn, rest
