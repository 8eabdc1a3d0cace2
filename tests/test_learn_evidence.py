"""Evidence for a learned rule is counted honestly (issue 24): a pair of pages
supports a candidate only when the candidate is the one difference left
between their URLs after the adopted rules, and a rule's support is the set
of distinct texts (classes) that confirmed it, rebuilt at every adoption or
contradiction, never counted again."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_dedup.learn import Learner, Rule, _split, page_digest, visible_text
from scrapy_dedup.learn.evidence import _WIDE_SPACES, main_region
from scrapy_dedup.learn.scope import _Parts
from scrapy_dedup.learning import _record, read_record

TEXT = "a page of text long enough to count as evidence for a learned rule " * 5
MIN_SUPPORT = 3
ADOPTIONS: list[str] = []  # every adoption checked, for the test to see it checked some


def _digest(name: str) -> tuple[int, int]:
    return page_digest(f"<main>{name} {TEXT}</main>")


def _snapshot(learner: Learner) -> list[tuple[str, str, int, list[tuple[str, str]]]]:
    return sorted(
        (rule.name, rule.state, rule.support, sorted(rule.examples)) for rule in learner.rules()
    )


class _Watch:
    """Feeds a learner and checks each rule at the moment it is adopted."""

    def __init__(self) -> None:
        self.learner = Learner(min_support=MIN_SUPPORT, sample=0, inc=self.inc)
        self.texts: dict[str, str] = {}  # URL observed -> its text
        self.checked: set[int] = set()

    def observe(self, url: str, text: str) -> None:
        self.texts.setdefault(url, text)
        self.learner.observe(url, *_digest(text))

    def inc(self, stat: str, count: int) -> None:
        if stat != "dedup/learn/adopted":
            return
        ADOPTIONS.append(stat)
        for rule in self.learner.rules():
            if rule.state == "adopted" and id(rule) not in self.checked:
                self.checked.add(id(rule))
                self.check_adopted(rule)

    def check_adopted(self, rule: Rule) -> None:
        pairs = rule.examples
        for a, b in pairs:
            # A real pair: two different pages fetched, with one text.
            assert a != b and self.texts[a] == self.texts[b], (rule.name, a, b)
            # The rule is the only difference the adopted rules leave.
            host = self.learner.hosts[rule.host]
            pa, pb = _split(a), _split(b)
            assert pa is not None and pb is not None
            others = [r for r in host.adopted if r is not rule]
            assert _under(others, pa) != _under(others, pb), (rule.name, a, b)
        classes = {self.texts[a] for a, _ in pairs}
        assert len(classes) >= MIN_SUPPORT, (rule.name, pairs)
        assert rule.support == len(classes), (rule.name, rule.support, pairs)


def _under(rules: list[Rule], parts: _Parts) -> str:
    for rule in rules:
        if parts.first not in rule.excluded:
            parts = rule.rewrite(parts) or parts
    return parts.url


VARIANTS: tuple[str, ...] = (
    "",
    "?sid=a1",
    "?sid=b2",
    "?f=1",
    "?f=2",
    "?hl=x",
    "?f=1&hl=x",
    "?f=2&sid=a1",
)
VARIANTS += ("/print",)


@st.composite
def _observations(draw: st.DrawFn) -> list[tuple[str, str]]:
    """The pages a crawl of a small generated site fetches, in some order:
    topics at several URLs (a session id, an ignored forum id, a highlight,
    a print view), some topics sharing one text, and a listing whose
    ``?page=`` matters."""
    topics = draw(st.integers(1, 5))
    texts = draw(st.integers(1, topics))
    pages = []
    for n in range(topics):
        variants = st.lists(st.sampled_from(VARIANTS), min_size=1, max_size=5, unique=True)
        for variant in draw(variants):
            pages.append((f"https://s.test/t/{n}{variant}", f"topic {n % texts}"))
    for k in draw(st.lists(st.integers(1, 4), max_size=3, unique=True)):
        pages.append((f"https://s.test/list?page={k}", f"list page {k}"))
        pages.append((f"https://s.test/list?page={k}&sid=a1", f"list page {k}"))
    return draw(st.permutations(pages))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_observations())
def test_no_rule_is_adopted_on_fewer_distinct_classes_than_min_support(
    pages: list[tuple[str, str]],
) -> None:
    watch = _Watch()
    for url, text in pages:
        watch.observe(url, text)
    for rule in watch.learner.rules():
        if rule.state == "candidate":
            # Support is the classes that confirmed it, once each.
            texts = {watch.texts[a] for a, _ in rule.examples}
            assert rule.support == len(texts) < MIN_SUPPORT or len(rule.excluded) >= 1


def test_the_property_saw_adoptions() -> None:
    # (Runs after the property test, in file order: it did check adoptions.)
    assert len(ADOPTIONS) > 20


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_observations())
def test_replaying_the_evidence_counts_nothing_twice(pages: list[tuple[str, str]]) -> None:
    learner = Learner(min_support=MIN_SUPPORT, sample=0)
    for url, text in pages:
        learner.observe(url, *_digest(text))
    before = _snapshot(learner)
    for host in learner.hosts.values():
        learner._rebuild(host)  # what every adoption or contradiction does
        learner._rebuild(host)
    assert _snapshot(learner) == before
    again = Learner(min_support=MIN_SUPPORT, sample=0)
    for url, text in pages + pages:  # the same evidence twice (a replayed log)
        again.observe(url, *_digest(text))
    assert _snapshot(again) == before


def test_an_adoption_elsewhere_does_not_count_a_pair_again() -> None:
    learner = Learner(min_support=MIN_SUPPORT, sample=0)
    for n in (1, 2):  # two topics at two session ids: ?sid has 2 classes
        learner.observe(f"https://s.test/t/{n}?sid=a", *_digest(f"topic {n}"))
        learner.observe(f"https://s.test/t/{n}?sid=b", *_digest(f"topic {n}"))
    for n in (1, 2, 3):  # ?hl is adopted from 3 classes; the learner rebuilds
        learner.observe(f"https://s.test/p/{n}", *_digest(f"post {n}"))
        learner.observe(f"https://s.test/p/{n}?hl=x", *_digest(f"post {n}"))
    rules = {rule.spec: rule for rule in learner.rules()}
    assert rules["?hl does not matter"].state == "adopted"
    assert rules["?sid does not matter"].state == "candidate"
    assert rules["?sid does not matter"].support == 2


def test_a_pair_adopted_rules_already_explain_credits_no_candidate() -> None:
    learner = Learner(min_support=MIN_SUPPORT, sample=0)
    for n in (1, 2, 3):  # ?hl is adopted
        learner.observe(f"https://s.test/p/{n}", *_digest(f"post {n}"))
        learner.observe(f"https://s.test/p/{n}?hl=x", *_digest(f"post {n}"))
    learner.observe("https://s.test/t/9?f=1", *_digest("topic 9"))
    learner.observe("https://s.test/t/9?f=2", *_digest("topic 9"))  # ?f: one class
    for n in (1, 2, 3):  # pairs that differ by ?hl only: no evidence for ?f
        learner.observe(f"https://s.test/t/{n}?f=1&hl=x", *_digest(f"topic {n}"))
        learner.observe(f"https://s.test/t/{n}?f=1", *_digest(f"topic {n}"))
    rules = {rule.spec: rule for rule in learner.rules()}
    assert rules["?f does not matter"].state == "candidate"
    assert rules["?f does not matter"].support == 1


@given(
    st.one_of(
        st.tuples(
            st.just("o"),
            st.text(max_size=8),
            st.text(),
            st.integers(0, 2**64 - 1),
            st.integers(0, 10**9),
        ).map(list),
        st.tuples(
            st.just("o"),
            st.text(max_size=8),
            st.text(),
            st.integers(0, 2**64 - 1),
            st.integers(0, 10**9),
            st.sampled_from([0, 1]),
        ).map(list),
        st.tuples(
            st.just("c"),
            st.text(max_size=8),
            st.text(),
            st.integers(0, 2**64 - 1),
            st.text(),
            st.one_of(st.none(), st.integers(0, 2**2048 - 1).map(lambda n: f"{n:x}")),
            st.one_of(st.just(""), st.text()),
        ).map(list),
        st.tuples(st.sampled_from(["w", "a", "z"]), st.text(max_size=8), st.text()).map(list),
    )
)
@settings(deadline=None)
def test_a_record_applied_without_a_log_reads_as_it_would_from_the_log(record: list[Any]) -> None:
    # The memory store keeps no log: its records are applied as written,
    # without the JSON round trip a store's log makes; they must read the same.
    assert _record(record) == read_record(json.dumps(record, separators=(",", ":")))


_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def test_the_listed_wide_spaces_are_every_whitespace_beyond_ascii() -> None:
    assert sorted(_WIDE_SPACES) == [c for c in _WHITESPACE if not c.isascii()]


@settings(max_examples=500, deadline=None)
@given(
    st.text(
        st.sampled_from(_WHITESPACE + "aZéİẞ的<>/ main!-\ud800\udfff") | st.characters(),
        max_size=300,
    )
)
def test_a_page_digest_is_the_digest_of_its_visible_text(html: str) -> None:
    # Digests in an evidence log were made from " ".join(text.split()).lower():
    # the digest made without splitting must be that one, to the byte, for a
    # later run to compare its pages with them.
    text = visible_text(main_region(html))
    expected = int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )
    assert page_digest(html) == (expected, len(text))
