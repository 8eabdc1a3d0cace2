"""The audit's draw on its own (scrapy_dedup.learn.audit.draw, pure): which
kept requests are fetched as a last check of the rules that skipped them."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from scrapy_dedup.learn import Learner, page_digest
from scrapy_dedup.learn.audit import STRATA, _Kept, draw
from scrapy_dedup.learn.rules import Rule

SID = Rule("s.test", "param", ("sid",))
PRINT = Rule("s.test", "suffix", ("print",))


def _kept(n: int, cls: int, rules: tuple[Rule, ...] = (SID,), first: str = "p/*") -> _Kept:
    return _Kept(n, first, rules, f"https://s.test/p/{cls}?sid={n}", f"https://s.test/p/{cls}")


def _requests(drawn: list[_Kept]) -> list[object]:
    return [entry.request for entry in drawn]


def test_one_request_of_each_class_in_the_order_kept() -> None:
    kept = [_kept(n, cls) for n, cls in enumerate([0, 1, 0, 2, 1, 0, 3])]
    drawn, rest = draw(kept)
    assert _requests(drawn) == [0, 1, 3, 6]
    assert _requests(rest) == [2, 4, 5]


def test_the_classes_the_crawl_checked_count_and_are_not_drawn_again() -> None:
    kept = [_kept(n, n % 10) for n in range(40)]
    checked = {(SID, "p/*"): {f"https://s.test/p/{c}" for c in range(7)}}
    drawn, _ = draw(kept, checked=checked)
    assert _requests(drawn) == [0, 7, 8, 9]  # the first of the group, and the 3 unchecked
    # A rule checked on enough classes: only the first of the group.
    many = {(SID, "p/*"): {f"https://s.test/other/{c}" for c in range(STRATA)}}
    assert _requests(draw(kept, checked=many)[0]) == [0]
    assert _requests(draw(kept, strata=9, checked=checked)[0]) == [0, 7, 8]


def test_up_to_strata_classes_of_a_rule_then_nothing_more() -> None:
    kept = [_kept(n, n) for n in range(200)]
    drawn, rest = draw(kept)
    assert _requests(drawn) == list(range(STRATA))
    assert len(rest) == 200 - STRATA


def test_a_rules_draws_are_shared_among_its_templates_in_proportion() -> None:
    kept = [_kept(n, n, first="p/*") for n in range(90)]
    kept += [_kept(100 + n, 100 + n, first="q/*") for n in range(30)]
    random.Random(1).shuffle(kept)
    drawn, _ = draw(kept)
    per_template = {first: sum(e.first == first for e in drawn) for first in ("p/*", "q/*")}
    assert per_template == {"p/*": 45, "q/*": 15}  # 59 * 90 / 120 and 59 * 30 / 120, rounded up


def test_a_request_drawn_counts_for_every_rule_that_skipped_it() -> None:
    both = [_kept(n, n, (SID, PRINT), first="p/*/*") for n in range(100)]
    drawn, _ = draw(both)
    assert _requests(drawn) == list(range(STRATA))  # not STRATA for each rule


@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.sampled_from(["p/*", "q/*"]), st.booleans()),
        max_size=80,
    ),
    st.integers(1, 8),
)
def test_every_kept_request_is_drawn_or_still_kept_once(
    entries: list[tuple[int, str, bool]], strata: int
) -> None:
    kept = [
        _kept(n, cls, (SID, PRINT) if both else (SID,), first)
        for n, (cls, first, both) in enumerate(entries)
    ]
    drawn, rest = draw(kept, strata=strata)
    assert sorted(_requests(drawn + rest)) == list(range(len(kept)))  # type: ignore[type-var]
    # The first of each group, and every class up to strata per rule.
    assert {(e.first, e.rules) for e in drawn} == {(e.first, e.rules) for e in kept}
    for rule in (SID, PRINT):
        classes = {(e.first, e.copy) for e in kept if rule in e.rules}  # per template
        assert len({(e.first, e.copy) for e in drawn if rule in e.rules}) >= min(
            strata, len(classes)
        )


def test_a_five_percent_minority_is_found_nineteen_times_in_twenty() -> None:
    # The docstring's claim: 200 pages, 10 of which a difference changes,
    # kept in random orders; the drawn requests hit one of the 10.
    rng = random.Random(0)
    found = 0
    for _ in range(400):
        minority = set(rng.sample(range(200), 10))
        kept = [_kept(n, n) for n in rng.sample(range(200), 200)]
        found += any(e.request in minority for e in draw(kept)[0])
    assert found / 400 >= 0.95


TEXT = "a product page with enough words to count as evidence for a rule " * 4


def test_the_audit_finds_a_parameter_that_matters_on_a_minority() -> None:
    # ?variant does not change 95 products and changes 5: three pairs adopt
    # the rule, then one variant of each product is skipped; the audit
    # fetches those of unchecked classes, a minority one contradicts the
    # rule, and everything it skipped there is handed back.
    learner = Learner(min_support=3, sample=0)
    minority = {10, 30, 50, 70, 90}

    def text(n: int, variant: str) -> tuple[int, int]:
        own = f"variant {variant}" if n in minority and variant else ""
        return page_digest(f"<main>product {n} {own} {TEXT}</main>")

    for n in range(3):
        for variant in ("", "2"):
            learner.observe(
                f"https://s.test/p/{n}{'?variant=' + variant if variant else ''}",
                *text(n, variant),
            )
    assert [r.name for r in learner.rules() if r.state == "adopted"] == [
        "s.test: ?variant does not matter"
    ]
    for n in range(3, 100):
        learner.observe(f"https://s.test/p/{n}", *text(n, ""))
    for n in range(3, 100):
        url = f"https://s.test/p/{n}?variant=3"
        skip = learner.check(url)
        assert skip is not None and not skip.sample
        learner.keep(skip, url)
    audited = learner.audit()
    assert len(audited) <= STRATA
    released: list[object] = []
    for url in audited:
        n = int(str(url).split("/p/")[1].split("?")[0])
        released += learner.observe(str(url), *text(n, "3"))
    assert any(f"/p/{n}?" in str(url) for url in audited for n in minority)
    fetched = set(audited) | set(released)
    assert {f"https://s.test/p/{n}?variant=3" for n in minority} <= fetched
