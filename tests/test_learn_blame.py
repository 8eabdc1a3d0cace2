"""Which rule a counterexample is blamed on (issue 24, why 4): the newest rule
that no page has proven yet, not an older one that pages checked."""

from __future__ import annotations

from scrapy_dedup.learn import Learner, page_digest

TEXT = "a product page with its description, sizes, care instructions and reviews " * 4
SHOP = "https://shop.test"


def _digest(name: str) -> tuple[int, int]:
    return page_digest(f"<main>{name} {TEXT}</main>")


def _rules(learner: Learner) -> dict[str, object]:
    return {rule.spec: rule for rule in learner.rules()}


def test_a_counterexample_is_blamed_on_the_newest_unproven_rule() -> None:
    learner = Learner(min_support=3, sample=0)
    # A category alias, written into the rules file by hand (no pages yet).
    learner.load(
        {"version": 1, "hosts": {"shop.test": [{"rule": "prefix", "from": "/collections/*"}]}}
    )
    # Pages prove it: each product under a collection is the product page.
    for n in (1, 2, 3):
        learner.observe(f"{SHOP}/products/p{n}", *_digest(f"p{n}"))
        learner.observe(f"{SHOP}/collections/shirts/products/p{n}", *_digest(f"p{n}"))
    # ?variant= is learned from products where it does not matter, then checked once.
    for n in (1, 2, 3, 4):
        learner.observe(f"{SHOP}/products/q{n}", *_digest(f"q{n}"))
        learner.observe(f"{SHOP}/products/q{n}?variant=7", *_digest(f"q{n}"))
    rules = _rules(learner)
    alias, variant = rules["/collections/*/... = /..."], rules["?variant does not matter"]
    assert alias.state == variant.state == "adopted"  # type: ignore[attr-defined]
    # The alias skips other collections' copies of fetched products.
    skip = learner.check(f"{SHOP}/collections/bags/products/p2")
    assert skip is not None and not skip.sample and skip.rules == (alias,)
    learner.keep(skip, "bags/p2")
    # A product whose variant is another text, reached through a collection.
    learner.observe(f"{SHOP}/products/p9", *_digest("p9"))
    released = learner.observe(
        f"{SHOP}/collections/shirts/products/p9?variant=2", *_digest("p9 in red")
    )
    # ?variant is to blame; the alias still applies, and keeps what it skipped.
    assert variant.excluded and not alias.excluded  # type: ignore[attr-defined]
    assert released == [] and learner.kept == 1
    assert learner.check(f"{SHOP}/collections/hats/products/p3") is not None
