"""Learned URL rules in real crawls of a messy local site (tests/messy_site.py):
fetches saved, and no real page lost or doubled, with the traps where the
same kind of difference matters."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import scrapy
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import CrawlResult, crawl
from tests.messy_site import MessySite
from tests.site import Site

ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}


class MessySpider(scrapy.Spider):
    name = "messy"

    def __init__(self, starts: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.starts = starts.split(",")

    async def start(self) -> AsyncIterator[Any]:
        for url in self.starts:
            yield scrapy.Request(url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "text": " ".join(response.css("main ::text").getall())}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def _fetched(site: Site, model: MessySite) -> list[str | None]:
    """The real page of every fetch, in order."""
    found = []
    for host, target in site.log:
        parts = urlsplit(target)
        found.append(model.page_id(host.rpartition(":")[0], parts.path, parts.query))
    return found


def _item_pages(result: CrawlResult, model: MessySite) -> Counter[str | None]:
    pages: Counter[str | None] = Counter()
    for item in result.items:
        parts = urlsplit(item["url"])
        pages[model.page_id(parts.hostname or "", parts.path, parts.query)] += 1
    return pages


@pytest.fixture
def messy(fresh_site: Site) -> Iterator[tuple[Site, MessySite]]:
    model = MessySite(products=120, stories=40)
    fresh_site.handler = model.reply
    yield fresh_site, model


HOSTS = ("shop.test", "news.test", "wiki.test")


async def _crawl(site: Site, settings: dict[str, Any]) -> CrawlResult:
    starts = ",".join(site.url("/", host) for host in HOSTS)
    site.reset()
    return await crawl(MessySpider, {**ADDON, **settings}, starts=starts)


@deferred_f_from_coro_f
async def test_learning_saves_fetches_and_loses_no_page(messy: tuple[Site, MessySite]) -> None:
    site, model = messy
    real, plain = model.reachable([f"http://{host}/" for host in HOSTS])
    learned = await _crawl(site, {"DEDUP_LEARN": True})
    fetched = _fetched(site, model)
    print(
        f"real pages {len(real)}: {plain} fetches without learning "
        f"({plain / len(real):.2f} per page), {len(fetched)} with "
        f"({len(fetched) / len(real):.2f})",
        {k: v for k, v in learned.stats.items() if k.startswith("dedup/learn")},
    )
    lost = real - set(fetched)
    assert not lost, (sorted(lost), {k: v for k, v in learned.stats.items() if "learn" in k})
    items = _item_pages(learned, model)
    assert set(items) == real and max(items.values()) == 1  # one item per real page
    assert len(fetched) / len(real) <= 1.5
    assert learned.stats["dedup/learn/rules"] >= 8
    assert learned.stats["dedup/url/filtered/learned"] >= 400
    # ?v= does not matter on news.test, and names revisions on wiki.test.
    assert learned.stats["dedup/learn/rule/news.test: ?v does not matter/skipped"] > 20
    assert not [k for k in learned.stats if k.startswith("dedup/learn/rule/wiki.test")]
    assert len([p for p in fetched if p and p.startswith("wiki:page")]) == 4 * model.stories


@deferred_f_from_coro_f
async def test_a_rule_that_fails_late_gives_back_what_it_skipped(fresh_site: Site) -> None:
    # ?edition= changes nothing for the products a depth-first crawl reaches
    # first, and the text of the others: learned, then contradicted.
    model = MessySite(products=80, stories=4, late_trap=True)
    fresh_site.handler = model.reply
    real, _ = model.reachable([f"http://{host}/" for host in HOSTS])
    result = await _crawl(fresh_site, {"DEDUP_LEARN": True})
    fetched = _fetched(fresh_site, model)
    stats = result.stats
    print({k: v for k, v in stats.items() if k.startswith("dedup/learn")})
    assert not real - set(fetched), stats  # no real page lost
    items = _item_pages(result, model)
    assert set(items) == real and max(items.values()) == 1
    editions = [p for p in real if "edition" in p]
    assert len(editions) == 40
    assert stats["dedup/learn/rule/shop.test: ?edition does not matter/skipped"] >= 1
    assert stats["dedup/learn/contradicted"] >= 1
    assert stats["dedup/learn/refetched"] == stats["dedup/learn/released"] >= 1
