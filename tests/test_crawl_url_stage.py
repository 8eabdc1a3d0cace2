from __future__ import annotations

from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.site import Site, url_stage_routes

DEDUP = {"DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter"}

# Every real page of the scenario, fetched once each, and nothing else.
EXPECTED = [
    "/",
    "/pricing?utm_source=newsletter&utm_medium=email",  # answers 301 ...
    "/pricing/",  # ... to its own slash variant: same key, still fetched
    "/Pricing",
    "/docs/",
    "/docs/intro",
    "/search?q=a+b&page=2",
    "/search?page=3&q=a+b",
    "/reference?id=1",
    "/reference?id=2",
    "/product?source_id=5",
    "/product?campaign_id=6",
    "/index.php?/blog/x",
    "/index.php?/blog/y",
]


@deferred_f_from_coro_f
async def test_each_real_page_fetched_exactly_once(fresh_site: Site) -> None:
    fresh_site.routes.update(url_stage_routes())
    result = await crawl(settings=DEDUP, start=[fresh_site.url("/")])

    assert sorted(fresh_site.fetched()) == sorted(EXPECTED)
    # the redirect target is a page the spider got, under its own URL
    titles = {item["url"]: item["title"] for item in result.items}
    assert titles[fresh_site.url("/pricing/")] == "Pricing"
    assert titles[fresh_site.url("/Pricing")] == "Old pricing"
    stats = result.stats
    assert stats["dedup/url/redirect_allowed"] == 1
    assert stats["dedup/url/seen"] == len(EXPECTED) - 1  # the redirect shares a key
    filtered = stats["dedup/url/filtered"]
    assert filtered == stats["dupefilter/filtered"]
    assert filtered == 12  # 9 links on the home page, 2 on /pricing/, 1 on /docs/
    for rule in (
        "tracking_param",
        "trailing_slash",
        "fragment",
        "www",
        "scheme",
        "query_order",
        "query_plus",
    ):
        assert stats.get(f"dedup/url/filtered/{rule}", 0) >= 1, rule


@deferred_f_from_coro_f
async def test_scrapy_default_filter_fetches_the_copies(fresh_site: Site) -> None:
    """The anchor: what the same crawl costs without the bundle."""
    fresh_site.routes.update(url_stage_routes())
    await crawl(start=[fresh_site.url("/")])
    fetched = fresh_site.fetched()
    assert set(EXPECTED) <= set(fetched)
    assert len(fetched) > len(EXPECTED) + 5
