"""Every variant linked from the first page (issue 24): a shop's home page
links each product, its print view and a per-page referral parameter no URL
rule knows, before the crawl has any evidence. With DEDUP_LEARN the
variants wait while a few are fetched as evidence, then are skipped; the
blog's ?page=N, another page under the same kind of difference, is fetched.
Real crawls at 1, 8 and 16 requests in flight."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import scrapy
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.site import Reply, Site

PRODUCTS = 400
BLOG_PAGES = 10
SYLLABLES = ("ba", "ko", "ri", "mu", "te", "sa", "lo", "ven", "dar", "pil", "gos", "fen")


def _words(seed: int, n: int = 60) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choices(SYLLABLES, k=3)) for _ in range(n))


def _html(text: str, links: list[str], nav: str = "") -> Reply:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    body = (
        f"<!doctype html><html><head><title>{text[:40]}</title></head><body>"
        f"<nav>{nav}</nav><main><p>{text}</p></main><footer>{anchors}</footer></body></html>"
    )
    return Reply(body=body, headers={"Content-Type": "text/html; charset=utf-8"})


def _product(query: str, path: str) -> int | None:
    parts = path.strip("/").split("/")
    if parts[0] != "product" or len(parts) not in (2, 3) or not parts[1].isdigit():
        return None
    if len(parts) == 3 and parts[2] != "print":
        return None
    n = int(parts[1])
    return n if n < PRODUCTS else None


def shop(host: str, path: str, query: str) -> Reply | None:
    """``/`` links every product three ways (``/product/N``,
    ``/product/N/print``, ``/product/N?from=home``) and the blog's pages;
    a product links three others, with ``?from=pN``; the print view has no
    navigation."""
    if path == "/":
        links = []
        for n in range(PRODUCTS):
            links += [f"/product/{n}", f"/product/{n}/print", f"/product/{n}?from=home"]
        links += ["/blog"] + [f"/blog?page={k}" for k in range(2, BLOG_PAGES + 1)]
        return _html(f"the garden shop {_words(1)}", links)
    n = _product(query, path)
    if n is not None:
        if "from" in parse_qs(query) and set(parse_qs(query)) != {"from"}:
            return None
        related = [f"/product/{(n * 7 + k) % PRODUCTS}?from=p{n}" for k in (1, 2, 3)]
        nav = "" if path.endswith("/print") else "home shop blog cart"
        return _html(f"product {n}: {_words(n * 13 + 7)}", related, nav)
    if path == "/blog":
        page = parse_qs(query).get("page", ["1"])[0]
        if not page.isdigit() or not 1 <= int(page) <= BLOG_PAGES:
            return None
        return _html(f"blog page {page}: {_words(5000 + int(page))}", ["/"])
    return None


def page_of(url: str) -> str:
    parts = urlsplit(url)
    n = _product(parts.query, parts.path)
    if n is not None:
        return f"product {n}"
    if parts.path == "/blog":
        return f"blog {parse_qs(parts.query).get('page', ['1'])[0]}"
    return parts.path


REAL = {"/"} | {f"product {n}" for n in range(PRODUCTS)} | {f"blog {k}" for k in range(1, 11)}
# Every URL the site links, each fetched once by the add-on without learning.
PLAIN_FETCHES = 1 + 3 * PRODUCTS + BLOG_PAGES


class ShopSpider(scrapy.Spider):
    name = "shop"

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.start_url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "text": " ".join(response.css("main ::text").getall())}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


@pytest.mark.parametrize("in_flight", [1, 8, 16])
@deferred_f_from_coro_f
async def test_variants_linked_from_the_first_page_wait_and_are_skipped(
    fresh_site: Site, in_flight: int
) -> None:
    fresh_site.handler = shop
    fresh_site.reset()
    result = await crawl(
        ShopSpider,
        {
            "ADDONS": {"scrapy_dedup.DedupAddon": 100},
            "DEDUP_LEARN": True,
            "CONCURRENT_REQUESTS": in_flight,
        },
        start_url=fresh_site.url("/"),
    )
    stats = result.stats
    fetched = [page_of(target) for _, target in fresh_site.log]
    learn = {k: v for k, v in stats.items() if k.startswith("dedup/learn")}
    print(
        f"{len(fetched)} fetches for {len(REAL)} real pages "
        f"({len(fetched) / len(REAL):.2f}; without learning {PLAIN_FETCHES}): {learn}"
    )
    assert not REAL - set(fetched), (sorted(REAL - set(fetched)), learn)  # no page lost
    items = Counter(page_of(item["url"]) for item in result.items)
    assert set(items) == REAL and max(items.values()) == 1  # one item per real page
    # The items are the plain pages': no print view, no ?from.
    assert not [i["url"] for i in result.items if "print" in i["url"] or "from=" in i["url"]]
    # The variants waited rather than being fetched before any evidence ...
    assert stats["dedup/learn/deferred"] >= PRODUCTS
    assert stats["dedup/learn/skipped"] >= PRODUCTS
    # ... and the blog's pages, which ?page tells apart, were fetched once each.
    assert Counter(p for p in fetched if p.startswith("blog")) == {
        f"blog {k}": 1 for k in range(1, BLOG_PAGES + 1)
    }
    assert len(fetched) <= PLAIN_FETCHES
    assert len(fetched) / len(REAL) <= 1.5
