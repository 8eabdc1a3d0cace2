"""The query parameters canonicalization strips: tracking and session ids.

The built-in list lives in ``data/strip_params.txt``, one entry a line with
the place it comes from. Names match exactly and case-insensitively; no
substring or prefix guessing (``reference``, ``source_id`` are real
parameters). No Scrapy import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files

__all__ = ["ParamRule", "StripTable", "load_strip_params"]


@dataclass(frozen=True)
class ParamRule:
    """One strippable parameter.

    ``name`` may end in ``?`` wildcards, each standing for one ASCII letter
    (``aspsessionid????????``); ``value`` is a regex the whole value must
    match for the parameter to be stripped (``None``: any value);
    ``requires`` names a parameter the query must also have.
    """

    name: str
    kind: str  # "tracking" or "session"
    value: re.Pattern[str] | None = None
    source: str = ""
    requires: str | None = None  # another parameter that must be present too

    def matches(self, value: str) -> bool:
        return self.value is None or self.value.fullmatch(value) is not None


@dataclass(frozen=True)
class StripTable:
    """Parameter rules looked up by lowercased name."""

    exact: dict[str, ParamRule] = field(default_factory=dict)
    patterns: tuple[tuple[re.Pattern[str], ParamRule], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exact or self.patterns)

    def get(self, name: str) -> ParamRule | None:
        rule = self.exact.get(name)
        if rule is None and self.patterns:
            for pattern, candidate in self.patterns:
                if pattern.fullmatch(name):
                    return candidate
        return rule

    def __iter__(self) -> Iterator[ParamRule]:
        yield from self.exact.values()
        for _, rule in self.patterns:
            yield rule

    def with_changes(self, add: Iterable[str], remove: Iterable[str]) -> StripTable:
        """A copy with ``add`` stripped (any value) and ``remove`` kept."""
        rules = [*self.__iter__(), *(ParamRule(n, "tracking", None, "configured") for n in add)]
        removed = set(remove)
        return _build(r for r in rules if r.name not in removed)


def _build(rules: Iterable[ParamRule]) -> StripTable:
    exact: dict[str, ParamRule] = {}
    patterns: dict[str, tuple[re.Pattern[str], ParamRule]] = {}
    for rule in rules:
        if "?" in rule.name:
            regex = re.escape(rule.name).replace(r"\?", "[a-z]")
            patterns[rule.name] = (re.compile(regex), rule)
        else:
            exact[rule.name] = rule
    return StripTable(exact, tuple(patterns.values()))


def parse_strip_params(text: str) -> StripTable:
    """Parse the data file format:
    ``name kind [value=REGEX] [requires=NAME] # source``."""
    rules = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line, _, comment = raw.partition("#")
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2 or fields[1] not in ("tracking", "session"):
            raise ValueError(f"strip_params.txt line {lineno}: cannot read {raw!r}")
        options = dict(field.partition("=")[::2] for field in fields[2:])
        if set(options) - {"value", "requires"} or not all(options.values()):
            raise ValueError(f"strip_params.txt line {lineno}: cannot read {raw!r}")
        value = re.compile(options["value"]) if "value" in options else None
        requires = options["requires"].lower() if "requires" in options else None
        rules.append(ParamRule(fields[0].lower(), fields[1], value, comment.strip(), requires))
    return _build(rules)


@lru_cache(maxsize=1)
def load_strip_params() -> StripTable:
    """The built-in list shipped with the package."""
    text = files("scrapy_dedup.url").joinpath("data/strip_params.txt").read_text("utf-8")
    return parse_strip_params(text)
