"""RelCanonicalMiddleware on a real crawl: which URL each item is filed under."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import scrapy
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.site import Site, article, canonical_routes
from tests.test_pipeline import ArticleSpider

SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter",
    "ITEM_PIPELINES": {"scrapy_dedup.ContentDedupPipeline": 350},
    "DOWNLOADER_MIDDLEWARES": {"scrapy_dedup.RelCanonicalMiddleware": 575},
}


@deferred_f_from_coro_f
async def test_items_are_filed_under_sensible_canonicals_only(fresh_site: Site) -> None:
    fresh_site.routes.update(canonical_routes())
    result = await crawl(ArticleSpider, SETTINGS, start=fresh_site.url("/"))
    url = fresh_site.url
    filed = {item["url"]: item.get("fetched_url") for item in result.items}
    stats = result.stats

    # one product under two categories: one item, under the product's URL, and the
    # product URL itself is never fetched (its key was marked seen)
    assert filed[url("/products/hose")] in (url("/shop/garden/hose"), url("/shop/sale/hose"))
    assert "/products/hose" not in fresh_site.fetched()
    assert stats["dedup/items/canonical"] == 2  # the second hose; the lamp variant
    # the canonical page came first: its variant's item is a duplicate, not a second item
    assert filed[url("/products/lamp")] is None
    assert url("/shop/lamps/desk-lamp") not in filed
    # relative canonical against <base href>; a Link header; a huge page
    assert filed[url("/catalog/widget")] == url("/rel/page")
    assert filed[url("/docs/report")] == url("/files/report")
    assert filed[url("/products/huge")] == url("/huge")
    # a gzip-compressed page: the middleware reads the decompressed body
    assert filed[url("/products/zipped")] == url("/zipped")
    # absurd targets are ignored: the page stays under the URL it was fetched from
    for path in ("/missing-thing", "/spam", "/js", "/broken", "/self"):
        assert filed[url(path)] is None, path
    # page 2 and 3 of a list declaring page 1: page 2 is filed under /list (never
    # fetched: its key was marked seen), page 3's different text keeps its own URL
    assert filed[url("/list")] in (url("/list?page=2"), url("/list?page=3"))
    other_page = ({url("/list?page=2"), url("/list?page=3")} - {filed[url("/list")]}).pop()
    assert filed[other_page] is None
    assert "/list" not in fresh_site.fetched()
    assert stats["dedup/canonical/ignored/content_differs"] == 1
    assert len(result.items) == 1 + 13  # home + every page above but two variants
    assert (
        stats["dedup/canonical/applied"] == 9
    )  # hoses, widget, report, huge, zipped, lists, lamp
    assert stats["dedup/canonical/same"] == 1
    for reason in ("homepage", "other_site", "scheme", "status"):
        assert stats[f"dedup/canonical/ignored/{reason}"] == 1, reason
    assert stats["item_dropped_count"] == 2


@deferred_f_from_coro_f
async def test_the_addon_turns_the_middleware_on(fresh_site: Site) -> None:
    fresh_site.routes.update(canonical_routes())
    result = await crawl(
        ArticleSpider, {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}, start=fresh_site.url("/")
    )
    assert result.stats["dedup/canonical/applied"] == 9
    assert fresh_site.url("/catalog/widget") in {item["url"] for item in result.items}


REVIEWS = (
    "Sturdy and cheap. The hose survived a winter outside without cracking, and the brass "
    "fittings still screw on by hand. I would buy it again for the vegetable garden.",
    "It kinks less than my old one but it is heavy to carry across the lawn. The wall "
    "bracket was missing two screws, which the shop sent after a week.",
    "Delivery was quick. Water pressure at the far end of the garden is much better now, "
    "and the spray gun from the same brand fits perfectly on the coupling.",
)


class ReviewsSpider(ArticleSpider):
    """Yields several items per product page, all with the page's URL."""

    name = "reviews"

    def parse(self, response):  # type: ignore[no-untyped-def]
        if "/hose" in response.url:  # the product's pages carry its reviews
            for opinion in REVIEWS:
                yield {"url": response.url, "text": opinion}
        yield from response.follow_all(css="nav a", callback=self.parse)


@deferred_f_from_coro_f
async def test_every_item_of_the_first_page_filed_under_a_canonical_is_kept(
    fresh_site: Site,
) -> None:
    fresh_site.routes.update(canonical_routes())
    result = await crawl(ReviewsSpider, SETTINGS, start=fresh_site.url("/"))
    under_product = [
        item for item in result.items if item["url"] == fresh_site.url("/products/hose")
    ]
    assert len(under_product) == 3  # the first hose page's three reviews
    assert len({item["fetched_url"] for item in under_product}) == 1
    assert result.stats["dedup/items/canonical"] == 3  # the other hose page's three
    assert result.stats["dedup/url/filtered/rel_canonical"] >= 1  # /products/hose not fetched


def _clean_url_site(site: Site) -> None:
    # The blog links its post and its about page with campaign parameters; the
    # post declares its clean URL (the same page), the about page declares none.
    site.routes.update(
        {
            "/": lambda q: article(
                "Blog",
                "the blog home page with the newest posts",
                "/brand-new-post?utm_source=blog&utm_campaign=index",
                "/about?utm_medium=email#team",
            ),
            "/brand-new-post": lambda q: article(
                "Post",
                "a brand new post about the harbour",
                extra_head=f'<link rel="canonical" href="{site.url("/brand-new-post")}">',
            ),
            "/about": lambda q: article("About", "who writes this blog and why"),
        }
    )


@deferred_f_from_coro_f
async def test_items_get_the_clean_url_and_keep_the_fetched_one(fresh_site: Site) -> None:
    _clean_url_site(fresh_site)
    url = fresh_site.url
    result = await crawl(ArticleSpider, SETTINGS, start=url("/"))
    items = {item["url"]: item.get("fetched_url") for item in result.items}
    assert items == {
        url("/"): None,
        url("/brand-new-post"): url("/brand-new-post?utm_source=blog&utm_campaign=index"),
        url("/about"): url("/about?utm_medium=email"),
    }

    # DEDUP_ITEM_URL = "fetched": as they were fetched.
    result = await crawl(ArticleSpider, {**SETTINGS, "DEDUP_ITEM_URL": "fetched"}, start=url("/"))
    assert {item["url"] for item in result.items} == {
        url("/"),
        url("/brand-new-post?utm_source=blog&utm_campaign=index"),
        url("/about?utm_medium=email"),
    }
    assert not any("fetched_url" in item for item in result.items)


class Page(scrapy.Item):
    """An item type with no ``fetched_url`` field."""

    url = scrapy.Field()
    text = scrapy.Field()


class PageSpider(ArticleSpider):
    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield Page(url=response.url, text=" ".join(response.css("main ::text").getall()))
        yield from response.follow_all(css="nav a", callback=self.parse)


@deferred_f_from_coro_f
async def test_an_item_without_a_fetched_url_field_keeps_the_url_it_was_fetched_from(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    _clean_url_site(fresh_site)
    url = fresh_site.url
    with caplog.at_level(logging.WARNING, logger="scrapy_dedup"):
        result = await crawl(PageSpider, SETTINGS, start=url("/"))
    assert {item["url"] for item in result.items} == {
        url("/"),
        url("/brand-new-post?utm_source=blog&utm_campaign=index"),
        url("/about?utm_medium=email"),
    }
    assert "Page items have no fetched_url field: their URLs are left as fetched" in caplog.text
