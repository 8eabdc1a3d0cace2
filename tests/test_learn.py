"""The learner of URL rules on its own (scrapy_dedup.learn, no Scrapy): what a
pair of pages proposes, when a rule is adopted, what it skips, and what a
contradiction gives back."""

from __future__ import annotations

import logging
import time

import pytest

from scrapy_dedup.learn import MIN_TEXT, Learner, _explanations, _split, page_digest, visible_text

TEXT = "a page of text long enough to count as evidence for a learned rule " * 5


def _digest(name: str) -> tuple[int, int]:
    return page_digest(f"<main>{name} {TEXT}</main>")


def _learn(learner: Learner, pages: dict[str, str]) -> list[object]:
    released: list[object] = []
    for url, name in pages.items():
        released += learner.observe(url, *_digest(name))
    return released


def _rules(a: str, b: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    pa, pb = _split(a), _split(b)
    assert pa is not None and pb is not None
    return _explanations(pa, pb)


def test_pairs_propose_the_rules_that_explain_them() -> None:
    assert _rules("https://s.test/p/1?sid=ab12", "https://s.test/p/1?sid=cd34") == [
        ("param", ("sid",), ())
    ]
    assert _rules("https://s.test/p/1", "https://s.test/p/1?view=print") == [
        ("param", ("view",), ()),
        ("param", ("view", "print"), ()),
    ]
    assert _rules("https://s.test/m/story/1", "https://s.test/story/1") == [("prefix", ("m",), ())]
    assert _rules("https://s.test/story/1/amp", "https://s.test/story/1") == [
        ("suffix", ("amp",), ())
    ]
    assert _rules("https://s.test/shop/tools/x", "https://s.test/shop/garden/x") == [
        ("prefix", ("shop", "tools"), ("shop", "garden")),
        ("prefix", ("shop", "*"), ("shop", "*")),
    ]
    assert _rules("https://s.test/shop/tools/x", "https://s.test/item/x") == [
        ("prefix", ("shop", "tools"), ("item",)),
        ("prefix", ("shop", "*"), ("item",)),
    ]
    assert _rules("https://s.test/Help/Guide", "https://s.test/help/guide") == [
        ("case", ("help",), ())
    ]
    # Two parameters at once: the set (tests/test_learn_paramsets.py); the
    # last segment itself, or path and query at once: nothing.
    assert _rules("https://s.test/p/1?a=1&b=2", "https://s.test/p/1?a=2&b=3") == [
        ("params", ("a", "b"), ())
    ]
    assert _rules("https://s.test/p/1", "https://s.test/p/2") == [("suffix", ("2",), ("1",))]
    assert _rules("https://s.test/a/x?q=1", "https://s.test/b/y?q=1") == []


def test_a_rule_is_adopted_after_three_pages_and_then_skips_copies(
    caplog: pytest.LogCaptureFixture,
) -> None:
    learner = Learner(min_support=3, sample=0)
    pages = {}
    for n in range(3):
        pages[f"https://s.test/p/{n}?sid=aaaa"] = f"product {n}"
        pages[f"https://s.test/p/{n}?sid=bbbb"] = f"product {n}"
    pages["https://s.test/p/9?sid=aaaa"] = "product 9"
    assert learner.check("https://s.test/p/0?sid=zzzz") is None  # nothing learned yet
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        _learn(learner, pages)
    [rule] = [r for r in learner.rules() if r.state == "adopted"]
    assert rule.name == "s.test: ?sid does not matter" and rule.support == 3
    # The learner knows pages by canonical URL (https://, no www.): it says so.
    assert "from 3 pages with the same text (e.g. canonical URLs https://s.test/p/" in caplog.text
    skip = learner.check("https://s.test/p/9?sid=cccc")
    assert skip is not None and skip.copy_of == "https://s.test/p/9?sid=aaaa"
    assert learner.check("https://s.test/p/10?sid=cccc") is None  # no page of its class
    assert learner.check("https://other.test/p/9?sid=cccc") is None  # another host
    assert learner.check("https://s.test/q/9?sid=cccc") is None  # /q never confirmed it


def test_variants_of_one_page_are_not_independent_support() -> None:
    learner = Learner(min_support=3, sample=0)
    _learn(learner, {f"https://s.test/p/1?sid={n:04}": "product 1" for n in range(10)})
    assert [r.state for r in learner.rules()] == ["candidate"]


def test_short_pages_are_no_evidence_for_a_rule() -> None:
    learner = Learner(min_support=1, sample=0)
    for n in range(5):  # soft-404 pages: one short text at many URLs
        learner.observe(f"https://s.test/p/{n}?sid=a", *page_digest("<main>not found</main>"))
        learner.observe(f"https://s.test/p/{n}?sid=b", *page_digest("<main>not found</main>"))
    assert page_digest("<main>not found</main>")[1] < MIN_TEXT
    assert learner.rules() == []


def test_a_contradiction_excludes_the_segment_and_gives_back_what_it_skipped() -> None:
    learner = Learner(min_support=2, sample=0)
    _learn(
        learner,
        {
            "https://s.test/blog/1": "blog 1",
            "https://s.test/blog/1?lang=de": "blog 1",
            "https://s.test/blog/2": "blog 2",
            "https://s.test/blog/2?lang=de": "blog 2",
            "https://s.test/docs/1": "docs 1",
            "https://s.test/docs/2": "docs 2",
            "https://s.test/docs/3": "docs 3",
        },
    )
    assert [r.state for r in learner.rules() if r.old == ("lang",)] == ["adopted"]
    assert learner.check("https://s.test/docs/1?lang=de") is not None  # not confirmed there
    # ...so the first is fetched as a check (sample), the next ones skipped:
    first = learner.check("https://s.test/docs/1?lang=de")
    assert first is not None and first.sample
    released = learner.observe("https://s.test/docs/1?lang=de", *_digest("docs 1 auf deutsch"))
    assert released == []
    [rule] = [r for r in learner.rules() if r.old == ("lang",)]
    assert rule.excluded == {"docs/*"} and rule.state == "adopted"
    assert learner.check("https://s.test/docs/2?lang=de") is None
    skip = learner.check("https://s.test/blog/2?lang=fr")
    assert skip is not None and not skip.sample
    learner.keep(skip, "the request for /blog/2?lang=fr")
    # A second part of the site contradicts it: revoked, the skipped request back.
    learner.observe("https://s.test/blog/1?lang=it", *_digest("blog 1 in italiano"))
    assert rule.state == "revoked"
    assert learner.check("https://s.test/blog/3?lang=de") is None
    released = learner.observe("https://s.test/blog/2?lang=it", *_digest("blog 2 in italiano"))
    assert released == [] and learner.kept == 0


def test_revoking_releases_every_request_the_rule_skipped() -> None:
    learner = Learner(min_support=2, sample=0)
    pages = {
        f"https://s.test/{s}/{n}{q}": f"{s} {n}"
        for s in ("a", "b")
        for n in range(2)
        for q in ("", "?ed=1")
    }
    _learn(learner, pages)
    kept = []
    for s in ("a", "b"):
        for n in range(2):
            skip = learner.check(f"https://s.test/{s}/{n}?ed=2")
            assert skip is not None and not skip.sample
            learner.keep(skip, f"{s}/{n}?ed=2")
            kept.append(f"{s}/{n}?ed=2")
    assert learner.kept == 4
    released = learner.observe("https://s.test/a/0?ed=3", *_digest("a 0, third edition"))
    assert sorted(released) == ["a/0?ed=2", "a/1?ed=2"]  # excluded under /a
    released = learner.observe("https://s.test/b/0?ed=3", *_digest("b 0, third edition"))
    assert sorted(released) == ["b/0?ed=2", "b/1?ed=2"]  # and revoked
    assert learner.kept == 0


def test_the_sample_fetches_one_copy_in_n() -> None:
    learner = Learner(min_support=2, sample=0.25)
    _learn(learner, {f"https://s.test/p/{n}{q}": f"p {n}" for n in range(4) for q in ("", "?x=1")})
    samples = [learner.check(f"https://s.test/p/{n % 4}?x={n + 2}") for n in range(40)]
    assert all(skip is not None for skip in samples)
    assert sum(skip.sample for skip in samples if skip) == 11  # the first, then one in 4


def test_visible_text_ignores_markup_and_attributes() -> None:
    html = (
        "<html><head><title>T</title><style>p{color:red}</style></head><body>"
        '<nav><a href="/x?sid=1">Home</a></nav><main><p>Hello <b>world</b></p>'
        "<script>var sid = 'abc';</script><!-- a comment --></main></body></html>"
    )
    assert visible_text(html) == "t home hello world"
    other = html.replace("sid=1", "sid=2").replace("'abc'", "'def'")
    assert page_digest(html) == page_digest(other)
    assert page_digest(html) == page_digest(html.replace("<nav>", "<nav hidden>"))
    assert page_digest(html)[0] != page_digest(html.replace("world", "there"))[0]


@pytest.mark.parametrize("piece", ["<script", "<!--", "<a ", "<", "<main>", "</main>"])
def test_visible_text_is_linear_on_hostile_pages(piece: str) -> None:
    started = time.process_time()
    page_digest(piece * 200_000)
    assert time.process_time() - started < 30  # quadratic would take hours


def test_rules_export_and_load_as_an_editable_file() -> None:
    learner = Learner(min_support=2, sample=0)
    _learn(
        learner,
        {
            **{f"https://s.test/p/{n}{q}": f"p {n}" for n in range(2) for q in ("", "?sid=ab")},
            **{f"https://s.test/m/story/{n}": f"story {n}" for n in range(2)},
            **{f"https://s.test/story/{n}": f"story {n}" for n in range(2)},
        },
    )
    data = learner.export()
    specs = [
        {k: v for k, v in r.items() if k in ("rule", "name", "from", "to")}
        for r in data["hosts"]["s.test"]
    ]
    assert {"rule": "param", "name": "sid"} in specs
    assert {"rule": "prefix", "from": "/m", "to": ""} in specs
    fresh = Learner(min_support=2, sample=0, frozen=True)
    assert fresh.load(data) == len(specs)
    specs_back = [
        {k: v for k, v in r.items() if k in ("rule", "name", "from", "to")}
        for r in fresh.export()["hosts"]["s.test"]
    ]
    assert specs_back == specs  # the same rules back
    fresh.observe("https://s.test/p/7", *_digest("p 7"))
    skip = fresh.check("https://s.test/p/7?sid=zz")
    assert skip is not None and skip.copy_of == "https://s.test/p/7"
    # Frozen: pairs propose nothing.
    fresh.observe("https://s.test/q/1", *_digest("q 1"))
    fresh.observe("https://s.test/q/1?ref=x", *_digest("q 1"))
    assert len(fresh.rules()) == len(specs)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"version": 2, "hosts": {}},
        {"version": 1, "hosts": {"s.test": [{"rule": "param"}]}},
        {"version": 1, "hosts": {"s.test": [{"rule": "prefix", "from": "/"}]}},
        {"version": 1, "hosts": {"s.test": ["sid"]}},
    ],
)
def test_a_bad_rules_file_is_a_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match=r"rules file|rule"):
        Learner().load(bad)  # type: ignore[arg-type]


def test_a_page_an_earlier_run_did_not_keep_stands_for_no_class() -> None:
    # A later run replays the evidence: ?sid does not matter. A variant of a
    # page the earlier run kept is skipped; one of a page it did not keep (a
    # list page that gave no item, a failed page, one past DEDUP_RECRAWL_AFTER)
    # is fetched, and then stands for its class in this run.
    text = "words of a page long enough to be evidence for a rule " * 8

    def pages(learner: Learner, earlier: bool) -> None:
        for n in range(4):
            for sid in ("aaaa1111", "bbbb2222"):
                learner.observe(
                    f"https://shop.test/item/{n}?sid={sid}", hash(f"{text}{n}"), 500, earlier
                )

    kept_pages = {"https://shop.test/item/0?sid=aaaa1111"}
    learner = Learner(sample=0, kept=kept_pages.__contains__)
    pages(learner, earlier=True)
    assert [r.name for r in learner.rules() if r.state == "adopted"] == [
        "shop.test: ?sid does not matter"
    ]
    skip = learner.check("https://shop.test/item/0?sid=cccc3333")
    assert skip is not None and skip.copy_of == "https://shop.test/item/0?sid=aaaa1111"
    assert learner.check("https://shop.test/item/1?sid=cccc3333") is None  # not kept: fetched
    learner.observe("https://shop.test/item/1?sid=cccc3333", hash(f"{text}1"), 500)
    skip = learner.check("https://shop.test/item/1?sid=dddd4444")
    assert skip is not None and skip.copy_of == "https://shop.test/item/1?sid=cccc3333"


def test_a_rules_file_and_the_store_replaying_its_pages_count_them_once() -> None:
    # A later run loads DEDUP_LEARN_RULES and replays the store's evidence
    # log at start: the pages of the run that wrote the file. Their checks
    # are in the file's counts already; the file written back (export) must
    # not count them again, or "pages checked" grows with every restart.
    pages = [
        (f"https://s.test/p/{n}{q}", _digest(f"p {n}"))
        for n in range(6)
        for q in ("", "?sid=a", "?sid=b")
    ]
    first = Learner(min_support=3, sample=0)
    for url, digest in pages:
        first.observe(url, *digest)
    written = first.export()
    counts = [
        (r["means"], r["pages_confirming"], r["pages_checked"]) for r in written["hosts"]["s.test"]
    ]
    assert counts[0][2] > 0

    later = Learner(min_support=3, sample=0)
    later.load(written)
    for url, digest in pages:  # the store's log, replayed
        later.observe(url, *digest, earlier=True)
    again = [
        (r["means"], r["pages_confirming"], r["pages_checked"])
        for r in later.export()["hosts"]["s.test"]
    ]
    assert again == counts
    # A page this run fetched is new evidence: it counts.
    later.observe("https://s.test/p/0?sid=c", *_digest("p 0"))
    assert later.export()["hosts"]["s.test"][0]["pages_checked"] == counts[0][2] + 1
