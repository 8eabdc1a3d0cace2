"""Learned rules for parameters that vary together (issue 24): a shop's
search-attribution links (``?_pos=3&_sid=9f2c1&_ss=r``, a new ``_sid`` on
every listing) are one rule, learned from the pairs where the whole set
differs, while the same kind of pair elsewhere on the site (a listing's
``?page=&sort_by=``) is not learned, since its pages differ."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import scrapy
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.learn import Learner, _split, page_digest
from scrapy_dedup.learn.rules import _explanations
from tests.conftest import crawl
from tests.site import Reply, Site, article

PRODUCTS = 40
PER_PAGE = 8
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}, "CONCURRENT_REQUESTS": 1}
WORDS = [
    "sturdy",
    "handmade",
    "oak",
    "walnut",
    "linen",
    "wool",
    "copper",
    "brass",
    "cotton",
    "maple",
]


def _product_text(n: int) -> str:
    words = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(40)]
    return f"Product {n}: " + " ".join(words) + f" item number {n} ships in {n % 9 + 1} days"


def shop_routes() -> dict[str, Any]:
    """A collection of PRODUCTS products in pages of PER_PAGE; every listing
    links its products with Shopify's search attribution and a session id of
    its own (one per listing); product pages link two neighbours the same way
    (a session id per product page) and the collection's first page plainly."""

    def attributed(n: int, pos: int, session: str) -> str:
        return f"/products/p{n}?_pos={pos}&_sid={session}&_ss=r"

    def listing(q: str) -> Reply:
        args = parse_qs(q)
        page = int(args.get("page", ["1"])[0])
        order = args.get("sort_by", ["manual"])[0]
        ids = list(range(PRODUCTS))
        if order == "price":
            ids.reverse()
        shown = ids[(page - 1) * PER_PAGE : page * PER_PAGE]
        session = f"{page:x}{len(order):x}0c"
        links = [attributed(n, i + 1, session) for i, n in enumerate(shown)]
        pages = PRODUCTS // PER_PAGE
        if page < pages:
            links.append(f"/collections/all?page={page + 1}&sort_by={order}")
        body = f"All products, page {page} by {order}: " + ", ".join(f"product {n}" for n in shown)
        return article(f"All products {page} {order}", body, *links)

    def product(n: int) -> Reply:
        near = [(n + 1) % PRODUCTS, (n + 7) % PRODUCTS]
        links = [attributed(m, i + 1, f"{n:x}e5") for i, m in enumerate(near)]
        return article(f"Product {n}", _product_text(n), "/collections/all", *links)

    routes: dict[str, Any] = {
        "/": lambda q: article(
            "Shop", "welcome to the shop", "/collections/all", "/collections/all?sort_by=price"
        ),
        "/collections/all": listing,
    }
    for n in range(PRODUCTS):
        routes[f"/products/p{n}"] = lambda q, n=n: product(n)
    return routes


class ShopSpider(scrapy.Spider):
    name = "shop"

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.start_url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        if "/products/" in response.url:
            yield {"url": response.url, "text": " ".join(response.css("main p ::text").getall())}
        for href in response.css("nav a::attr(href)").getall():
            yield response.follow(href)


def _product_fetches(site: Site) -> Counter[str]:
    return Counter(
        urlsplit(target).path for target in site.fetched() if target.startswith("/products/")
    )


def _listing_fetches(site: Site) -> set[str]:
    return {t for t in site.fetched() if t.startswith("/collections/")}


def test_a_set_of_parameters_that_differ_together_is_one_proposal() -> None:
    a = _split("https://s.test/products/p1?_pos=2&_sid=ab&_ss=r")
    b = _split("https://s.test/products/p1")
    c = _split("https://s.test/products/p1?_pos=5&_sid=cd&_ss=r")
    assert a is not None and b is not None and c is not None
    assert _explanations(a, b) == [("params", ("_pos", "_sid", "_ss"), ())]
    assert _explanations(a, c) == [("params", ("_pos", "_sid"), ())]  # _ss is the same
    five = _split("https://s.test/p?a=1&b=1&c=1&d=1&e=1")
    assert five is not None and _explanations(five, b._replace(segments=("p",))) == []


def test_a_set_rule_skips_only_urls_with_the_whole_set() -> None:
    learner = Learner(min_support=3, sample=0)
    for n in range(3):
        digest = page_digest(f"<main>{_product_text(n)}</main>")
        learner.observe(f"https://s.test/products/p{n}", *digest)
        learner.observe(f"https://s.test/products/p{n}?_pos=1&_sid=a{n}&_ss=r", *digest)
    [rule] = [r for r in learner.rules() if r.state == "adopted"]
    assert rule.spec == "?_pos, ?_sid, ?_ss together do not matter"
    skip = learner.check("https://s.test/products/p1?_pos=4&_sid=zz&_ss=r")
    assert skip is not None and skip.copy_of == "https://s.test/products/p1"
    # One of them alone was never seen to make no difference.
    assert learner.check("https://s.test/products/p1?_sid=zz") is None
    # The rule travels through the rules file.
    again = Learner(min_support=3, sample=0)
    assert again.load(learner.export()) == 1
    again.observe("https://s.test/products/p1", *page_digest(f"<main>{_product_text(1)}</main>"))
    assert again.check("https://s.test/products/p1?_pos=9&_sid=q&_ss=r") is not None


@pytest.mark.parametrize("in_flight", [1, 8, 16])
@deferred_f_from_coro_f
async def test_a_shops_attribution_parameters_are_learned_as_one_rule(
    fresh_site: Site, in_flight: int
) -> None:
    fresh_site.routes.update(shop_routes())
    start = fresh_site.url("/", host="shop.test")
    without = await crawl(ShopSpider, {**ADDON, "DEDUP_LEARN": False}, start_url=start)
    plain_fetches = len(fresh_site.fetched())
    fresh_site.reset()
    settings = {**ADDON, "DEDUP_LEARN": True, "CONCURRENT_REQUESTS": in_flight}
    result = await crawl(ShopSpider, settings, start_url=start)
    products = _product_fetches(fresh_site)
    stats = result.stats
    # Which pair comes first decides the set: all three (a plain link and an
    # attributed one) or ?_pos and ?_sid (two listings' links, _ss=r in both).
    together = {
        k: v for k, v in stats.items() if k.startswith("dedup/learn/rule/") and "together" in k
    }
    print(
        plain_fetches, len(fresh_site.fetched()), {k: v for k, v in stats.items() if "learn" in k}
    )
    # No product lost, one item each, under its own page.
    assert set(products) == {f"/products/p{n}" for n in range(PRODUCTS)}
    items = Counter(urlsplit(item["url"]).path for item in result.items)
    assert set(items) == set(products) and max(items.values()) == 1
    assert len(without.items) == PRODUCTS
    # The set was learned and skipped most attribution links.
    assert together and all("?_sid" in k and "?_pos" in k for k in together), together
    assert sum(together.values()) >= 40
    assert len(fresh_site.fetched()) < 0.6 * plain_fetches
    # Every listing page was fetched: ?page&sort_by differ together too, but
    # their pages differ, so nothing was learned of them.
    assert len(_listing_fetches(fresh_site)) == 2 * PRODUCTS // PER_PAGE
    assert not [k for k in stats if "sort_by" in k or "?page" in k]
