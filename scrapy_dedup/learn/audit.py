"""The requests learned rules skipped, kept to be handed back if a rule
fails, and the ones drawn from them to be fetched as a check. No Scrapy import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from scrapy_dedup.learn.rules import Rule


class _Kept(NamedTuple):
    request: Any
    first: str
    rules: tuple[Rule, ...]
    url: str


def draw(kept: list[_Kept], period: int) -> tuple[list[_Kept], list[_Kept]]:
    """``(drawn, still kept)``: one in ``period`` of each group of ``kept``
    skipped by the same rules in the same part of the site, and at least
    one of each."""
    groups: dict[tuple[str, tuple[Rule, ...]], int] = {}
    drawn: list[_Kept] = []
    rest: list[_Kept] = []
    for entry in kept:
        group = (entry.first, entry.rules)
        seen = groups.get(group, 0)
        groups[group] = seen + 1
        (rest if seen % period else drawn).append(entry)
    return drawn, rest
