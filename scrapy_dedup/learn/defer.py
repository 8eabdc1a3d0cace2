"""Requests that wait instead of being fetched while a learned rule is
undecided (:meth:`Learner.wait <scrapy_dedup.learn.Learner.wait>`). No Scrapy import.

A page and its variants are often linked at once (a home page, a listing, a
sitemap links ``/p/7``, ``/p/7?sid=ab`` and ``/p/7/print``): without waiting,
every variant is queued and fetched before there is evidence for any rule. A
new request *waits* when it differs from a URL of its host already fetched
or queued (the *copy*) only where a rule would make them one:

- an open candidate rewrites it into the copy's URL; or
- before any candidate: it carries more print/amp/mobile marks, or as many
  and more query parameters, than the copy, and differs from it in nothing
  else (:func:`variants`): the pair proposes its rules as candidates.

The first requests of each (candidate, URL template) are fetched, one per
copy, ``PROBES`` of them: they are the evidence. The others wait until the
rule is decided: adopted, they are checked against the rules like any new
request (skipped, or fetched as a sample); refuted, they are fetched. A
request whose copy is queued but not fetched yet waits for it under the
adopted rules too. What still waits when the crawl would end is fetched,
plainest first (:meth:`Learner.undefer`). A waiting request is never lost:
it is fetched, or skipped like any request the rules skip (kept, handed back
if a rule fails, audited), and the caller keeps its place in a store that
outlives a kill.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy_dedup.learn.scope import _params, _Parts
from scrapy_dedup.url.plain import VARIANT_MARKS, marked_more

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy_dedup.learn.rules import Rule

__all__ = ["PROBES", "Held", "variants"]

#: Copies of each (candidate, template) whose variants are fetched as evidence
#: before the others wait: one more than the default ``min_support``, so that
#: one short or failed page does not leave a rule undecided.
PROBES = 4
#: URLs remembered per host as fetched or queued (beyond: nothing waits).
SEEN = 200_000
#: URLs remembered per path, to find a plainer one of a new request's.
PER_PATH = 4


class Held(NamedTuple):
    """A request waiting for a rule to be decided."""

    request: Any
    url: str  # its canonical URL
    scope: str  # its URL's template
    rule: Rule  # the rule it waits on (a candidate, or an adopted one)
    copy_of: str  # the fetched or queued URL it would be a copy of

    @property
    def rules(self) -> tuple[Rule, ...]:
        return (self.rule,)


def variants(based: _Parts, same_path: list[str], seen: dict[int, str], key: Any) -> Iterator[str]:
    """URLs (under the adopted rules) among those fetched or queued of which
    ``based`` (a new URL under the adopted rules) is a variant: it has more
    marks (or more parameters) and no other difference. ``same_path``: such
    URLs with ``based``'s path; ``seen``: the keys of every one; ``key``:
    the key function."""
    url = based.url
    if based.query:
        names = {name for name, _ in _params(based.query)}
        for other in same_path:
            if other != url and marked_more(url, other) and _fewer(other, names):
                yield other
    segments = based.segments
    for i, segment in enumerate(segments):
        if segment.lower().split(".")[0] in VARIANT_MARKS:
            plain = based._replace(segments=segments[:i] + segments[i + 1 :])
            if key(plain.url) in seen:
                yield plain.url


def _fewer(other: str, names: set[str]) -> bool:
    """Whether ``other``'s query names are among ``names`` (its variant adds
    or changes parameters, never drops one: ``?id=4`` is another page than
    ``?page=2``)."""
    _, _, query = other.partition("?")
    return {name for name, _ in _params(query.partition("#")[0])} <= names
