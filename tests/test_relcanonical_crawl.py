"""RelCanonicalMiddleware on a real crawl: which URL each item is filed under."""

from __future__ import annotations

import logging
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.crawl_worker import read_items
from tests.site import Site, article, canonical_routes, print_view_routes, view_routes
from tests.test_pipeline import ArticleSpider
from tests.test_store_crawls import _count_recorded, _worker

SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter",
    "ITEM_PIPELINES": {"scrapy_dedup.ContentDedupPipeline": 350},
    "DOWNLOADER_MIDDLEWARES": {"scrapy_dedup.RelCanonicalMiddleware": 575},
}
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}


@deferred_f_from_coro_f
async def test_items_are_filed_under_sensible_canonicals_only(fresh_site: Site) -> None:
    fresh_site.routes.update(canonical_routes())
    result = await crawl(ArticleSpider, SETTINGS, start=fresh_site.url("/"))
    url = fresh_site.url
    filed = {item["url"]: item.get("fetched_url") for item in result.items}
    stats = result.stats

    # one product under two categories: one item, under the product's URL. The
    # product page is fetched all the same (the host's declarations are not
    # verified: the category pages' breadcrumb even makes them fail the check),
    # and its own item is a duplicate of the one filed there first.
    assert filed[url("/products/hose")] in (url("/shop/garden/hose"), url("/shop/sale/hose"))
    assert "/products/hose" in fresh_site.fetched()
    assert stats["dedup/items/canonical"] == 3  # the second hose, the product; the lamp variant
    assert stats["dedup/canonical/fetched"] == 9
    assert "dedup/canonical/trusted" not in stats
    assert stats["dedup/canonical/revoked"] == 1
    assert "dedup/url/filtered/rel_canonical" not in stats
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
    # fetched: nothing links it), page 3's different text keeps its own URL
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
    assert stats["item_dropped_count"] == 3


@deferred_f_from_coro_f
async def test_trust_always_skips_every_declared_page_and_never_none(fresh_site: Site) -> None:
    # DEDUP_CANONICAL_TRUST = "always": the declared page is taken as fetched
    # at once (the behaviour before "verified" was the default).
    fresh_site.routes.update(canonical_routes())
    always = {**SETTINGS, "DEDUP_CANONICAL_TRUST": "always"}
    result = await crawl(ArticleSpider, always, start=fresh_site.url("/"))
    assert "/products/hose" not in fresh_site.fetched()
    assert result.stats["dedup/canonical/trusted"] == 9
    assert result.stats["dedup/url/filtered/rel_canonical"] == 2  # linked by both hoses
    assert result.stats["dedup/items/canonical"] == 2  # the second hose; the lamp variant
    assert fresh_site.url("/products/hose") in {item["url"] for item in result.items}

    # "never": every declared page is left to be fetched, nothing is checked.
    fresh_site.reset()
    fresh_site.routes.update(view_routes(10))
    never = {**ADDON, "DEDUP_CANONICAL_TRUST": "never"}
    result = await crawl(ArticleSpider, never, start=fresh_site.url("/a/0/amp"))
    assert [f"/a/{n}" in fresh_site.fetched() for n in range(10)] == [True] * 10
    assert result.stats["dedup/canonical/fetched"] == 30
    assert "dedup/canonical/verified" not in result.stats


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
    # the other hose page's three, and the product page's own three (fetched:
    # the host's declarations are not verified)
    assert result.stats["dedup/items/canonical"] == 6


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


def _pages(result_items: list[dict[str, Any]], site: Site) -> list[str]:
    """The paths the items are filed under."""
    return sorted(item["url"].removeprefix(site.url("/")[:-1]) for item in result_items)


@deferred_f_from_coro_f
async def test_a_correct_canonical_never_hides_what_only_its_target_links_to(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    # The home page links /p/0 and the print view of /p/79, which declares
    # /p/79 (rightly: the same article, without the navigation). /p/80 to
    # /p/119 are reached only through /p/79: it must be fetched.
    fresh_site.routes.update(print_view_routes())
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        result = await crawl(ArticleSpider, ADDON, start=fresh_site.url("/"))
    assert "/p/79" in fresh_site.fetched()
    assert _pages(result.items, fresh_site) == sorted(["/", *(f"/p/{n}" for n in range(120))])
    # The print view's item is filed under /p/79 (or /p/79's own item came
    # first and the print view's is a duplicate): one item for the page.
    assert result.stats["dedup/items/canonical"] == 1
    assert result.stats["dedup/canonical/applied"] == 1
    assert result.stats["dedup/canonical/fetched"] == 1  # its host is not trusted yet
    # /p/79 has the print view's text and a link the print view lacks: the
    # declaration does not verify, and the host is not trusted.
    assert "dedup/canonical/verified" not in result.stats
    assert result.stats["dedup/canonical/revoked"] == 1
    assert "dedup/url/filtered/rel_canonical" not in result.stats
    # The message names both pages as the crawl knows them (http://, as
    # fetched and as declared), not by their keys (https://).
    url = fresh_site.url
    assert (
        f"{url('/p/79/print')} declares {url('/p/79')}, which links to pages it does not"
        in caplog.text
    )


@pytest.mark.parametrize("concurrency", [1, 8])
@deferred_f_from_coro_f
async def test_print_views_of_every_page_never_hide_the_chain_behind_them(
    fresh_site: Site, concurrency: int
) -> None:
    # Each page links the print view of the page 10 further on: every
    # declaration is right (the same article), so a check of the text alone
    # trusted the host once /p/10, /p/11 and /p/12 had their print views'
    # text, then skipped /p/22 (its print view came first), and with it the
    # rest of the chain. The print views lack the pages' links: a
    # declaration verifies only with the page's links too.
    fresh_site.routes.update(print_view_routes(pages=60, print_of=range(10, 60), ahead=10))
    result = await crawl(
        ArticleSpider, {**ADDON, "CONCURRENT_REQUESTS": concurrency}, start=fresh_site.url("/")
    )
    assert {f"/p/{n}" for n in range(60)} <= set(fresh_site.fetched())
    assert _pages(result.items, fresh_site) == sorted(["/", *(f"/p/{n}" for n in range(60))])
    assert "dedup/url/filtered/rel_canonical" not in result.stats
    assert result.stats["dedup/canonical/revoked"] == 1


@pytest.mark.parametrize("store", ["sqlite", "redis"])
@deferred_f_from_coro_f
async def test_a_later_run_fetches_a_canonical_target_no_run_fetched(
    fresh_site: Site, tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    # The first run stops after the print view was kept and before the chain
    # reached /p/79; the second run must fetch /p/79 (not call it kept by an
    # earlier run) and find the pages behind it. Every page gives one item
    # across the two runs.
    fresh_site.routes.update(print_view_routes())
    if store == "redis":
        uri = request.getfixturevalue("redis_url")
        stored = {
            "DEDUP_STORE": uri,
            "DEDUP_REDIS_PREFIX": request.getfixturevalue("redis_prefix"),
        }
    else:
        stored = {"DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
    settings = {
        **ADDON,
        **stored,
        "CONCURRENT_REQUESTS": 1,
        "CLOSESPIDER_PAGECOUNT": 12,
    }
    first = await crawl(ArticleSpider, settings, start=fresh_site.url("/"))
    assert first.stats["finish_reason"] == "closespider_pagecount"
    assert "/p/79/print" in fresh_site.fetched()
    assert "/p/79" not in fresh_site.fetched()
    fresh_site.reset()
    second = await crawl(
        ArticleSpider, {**settings, "CLOSESPIDER_PAGECOUNT": 0}, start=fresh_site.url("/")
    )
    assert second.stats["finish_reason"] == "finished"
    assert "/p/79" in fresh_site.fetched()
    assert "dedup/url/filtered/rel_canonical" not in second.stats
    items = _pages(first.items + second.items, fresh_site)
    assert items == sorted(["/", *(f"/p/{n}" for n in range(120))])

    # A third run finds nothing new and loses nothing: every page was kept.
    fresh_site.reset()
    third = await crawl(
        ArticleSpider, {**settings, "CLOSESPIDER_PAGECOUNT": 0}, start=fresh_site.url("/")
    )
    assert [item for item in third.items if item["url"] != fresh_site.url("/")] == []
    assert fresh_site.fetched() == ["/"]


@deferred_f_from_coro_f
async def test_declarations_save_fetches_once_verified(fresh_site: Site) -> None:
    # 40 articles, each reached through its AMP view, which links the print
    # view, a tracking landing page and the clean page; every view declares
    # the clean page, rightly. The first clean pages are fetched and checked;
    # then the host's declarations are trusted and the clean pages skipped.
    fresh_site.routes.update(view_routes(40))
    result = await crawl(ArticleSpider, ADDON, start=fresh_site.url("/"))
    stats = result.stats
    fetched = fresh_site.fetched()
    clean = [p for p in fetched if p.startswith("/a/") and p.count("/") == 2 and "?" not in p]
    assert stats["dedup/canonical/verified"] >= 3
    assert stats["dedup/canonical/trusted"] >= 30
    assert stats["dedup/url/filtered/rel_canonical"] >= 20
    assert 3 <= len(clean) <= 20  # checked until trusted, then 1 in 20
    assert "dedup/canonical/revoked" not in stats
    # Nothing is lost: one item per article, under its clean URL.
    assert _pages(result.items, fresh_site) == sorted(["/", *(f"/a/{n}" for n in range(40))])


# Kill moments: before the host is trusted (6 pages recorded), and once trusted pages
# skip their clean pages (30 recorded).
@pytest.mark.parametrize("recorded", [6, 30])
def test_kill_9_while_declarations_are_trusted_loses_nothing(
    fresh_site: Site, tmp_path: Path, recorded: int
) -> None:
    # A crawl of the AMP/print/tracking views site with SQLite is killed with
    # SIGKILL, then run again to the end: every article gives its item (under
    # its clean URL) in one run or the other, whether its clean page was
    # fetched or skipped on trust.
    def slow(route: Any) -> Any:
        return lambda q: (time.sleep(0.03), route(q))[1]

    fresh_site.routes.update({path: slow(route) for path, route in view_routes(40).items()})
    db = tmp_path / "dedup.db"
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{db}", "CONCURRENT_REQUESTS": 2}
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"

    proc = _worker(settings, start, items)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if _count_recorded(db) >= recorded:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the crawl ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    fresh_site.reset()
    proc = _worker(settings, start, items)
    log, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, log

    kept = read_items(items)
    filed = Counter(item["url"] for item in kept)
    articles = {fresh_site.url(f"/a/{n}", host="127.0.0.1") for n in range(40)}
    assert articles <= set(filed), sorted(articles - set(filed))
    assert set(filed) - articles == {start}  # nothing filed under a view's URL


def _teaser_routes(articles: int, right: int) -> dict[str, Any]:
    """:func:`view_routes`, but from article ``right`` on the clean page is the
    whole story and its views (which declare it canonical) show only the
    teaser: declarations that are wrong, found only by fetching a clean page."""
    from tests.text.neardup_corpus import documents

    texts = documents(min_words=60, max_words=120, seed=31)[: 2 * articles]
    routes = view_routes(articles)
    for n in range(right, articles):
        story = f"{texts[n]} {texts[articles + n]}"
        teaser = routes[f"/a/{n}"]  # with a query: the tracking landing page, a view

        def clean(q: str, n: int = n, story: str = story, teaser: Any = teaser) -> Any:
            return teaser(q) if q else article(f"Article {n}", story, f"/a/{n}/amp")

        routes[f"/a/{n}"] = clean
    return routes


@pytest.mark.parametrize("store", ["sqlite", "redis"])
@deferred_f_from_coro_f
async def test_a_later_run_that_stops_trusting_a_host_fetches_what_earlier_runs_skipped(
    fresh_site: Site, tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    # Articles 0-2 declare their clean pages rightly; from article 3 on the
    # views are teasers declaring the whole story as canonical. The first run
    # trusts the host after articles 0-2 and (sampling nothing, the unlucky
    # draw of DEDUP_CANONICAL_TRUST_SAMPLE) skips the stories of the next
    # articles. The second run checks the declarations, finds another text and
    # stops trusting the host: the stories the first run skipped must be
    # fetched then, or they are lost for good (nothing links them again).
    fresh_site.routes.update(_teaser_routes(12, right=3))
    if store == "redis":
        stored = {
            "DEDUP_STORE": request.getfixturevalue("redis_url"),
            "DEDUP_REDIS_PREFIX": request.getfixturevalue("redis_prefix"),
        }
    else:
        stored = {"DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
    settings = {
        **ADDON,
        **stored,
        "CONCURRENT_REQUESTS": 1,
        # Breadth first: each article's views, then its clean page.
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    }
    first = await crawl(
        ArticleSpider,
        {**settings, "CLOSESPIDER_PAGECOUNT": 25, "DEDUP_CANONICAL_TRUST_SAMPLE": 0.0},
        start=fresh_site.url("/"),
    )
    assert first.stats["finish_reason"] == "closespider_pagecount"
    skipped = {f"/a/{n}" for n in range(3, 12)} - set(fresh_site.fetched())
    assert first.stats["dedup/canonical/trusted"] >= 2, first.stats  # stories skipped on trust
    assert len(skipped) >= 2, fresh_site.fetched()
    assert "dedup/canonical/revoked" not in first.stats
    fresh_site.reset()
    # The second run checks every declaration (the draw that finds a teaser).
    second = await crawl(
        ArticleSpider, {**settings, "DEDUP_CANONICAL_TRUST_SAMPLE": 1.0}, start=fresh_site.url("/")
    )
    assert second.stats["finish_reason"] == "finished"
    assert second.stats["dedup/canonical/revoked"] == 1
    assert second.stats["dedup/canonical/refetched"] >= 2  # (views declare a story each)
    assert skipped <= set(fresh_site.fetched()), sorted(skipped - set(fresh_site.fetched()))
    # Every story is in an item, under its clean URL.
    items = first.items + second.items
    routes = _teaser_routes(12, right=3)
    for n in range(12):
        story = " ".join(routes[f"/a/{n}"]("").body.split("<p>")[1].split("</p>")[0].split())
        filed = [
            " ".join(i["text"].split()) for i in items if i["url"] == fresh_site.url(f"/a/{n}")
        ]
        assert any(text.endswith(story) for text in filed), n


@pytest.mark.parametrize("store", ["memory", "redis"])
@deferred_f_from_coro_f
async def test_a_wrong_declaration_of_a_page_fetched_before_ends_the_trust(
    fresh_site: Site, store: str, request: pytest.FixtureRequest
) -> None:
    # The teaser site of the test above, but the home page also links the
    # whole story of article 3, so it is fetched before its teaser view
    # declares it. Articles 0-2 (declared first, then fetched) make the host
    # trusted; the teaser's declaration of the story fetched already is
    # checked against the story's text when it is read, and ends the trust:
    # the stories of articles 4-11 are fetched, not skipped on a trust that
    # no sampled fetch would have checked (DEDUP_CANONICAL_TRUST_SAMPLE 0).
    routes = _teaser_routes(12, right=3)
    routes["/"] = lambda q: article("Home", "the home page", "/a/0/amp", "/a/3")
    teaser, story = routes["/a/3"], routes["/a/3"]("")
    # (the story links nothing: its views come through the chain of AMP views)
    story.body = story.body.replace('<a href="/a/3/amp">/a/3/amp</a>', "")
    routes["/a/3"] = lambda q: teaser(q) if q else story
    fresh_site.routes.update(routes)
    stored = {}
    if store == "redis":
        stored = {
            "DEDUP_STORE": request.getfixturevalue("redis_url"),
            "DEDUP_REDIS_PREFIX": request.getfixturevalue("redis_prefix"),
        }
    settings = {
        **ADDON,
        **stored,
        "CONCURRENT_REQUESTS": 1,
        "DEPTH_PRIORITY": 1,  # breadth first: the story linked from home comes first
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "DEDUP_CANONICAL_TRUST_SAMPLE": 0.0,
    }
    result = await crawl(ArticleSpider, settings, start=fresh_site.url("/"))
    fetched = fresh_site.fetched()
    assert fetched.index("/a/3") < fetched.index("/a/3/amp")
    assert result.stats["dedup/canonical/revoked"] == 1
    stories = {f"/a/{n}" for n in range(3, 12)}
    assert stories <= set(fetched), sorted(stories - set(fetched))
    for n in range(3, 12):
        story = " ".join(routes[f"/a/{n}"]("").body.split("<p>")[1].split("</p>")[0].split())
        url = fresh_site.url(f"/a/{n}")
        filed = [" ".join(i["text"].split()) for i in result.items if i["url"] == url]
        assert any(text.endswith(story) for text in filed), n
