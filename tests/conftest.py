from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import scrapy
from scrapy import signals
from scrapy.crawler import AsyncCrawlerRunner
from twisted.internet import defer
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

from tests.site import Site

BASE_SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "INFO",
    "DOWNLOAD_TIMEOUT": 10,
    "RETRY_ENABLED": False,
    "CONCURRENT_REQUESTS": 4,
}


@implementer(IResolverSimple)
class LoopbackResolver:
    """Resolves every ``*.test`` name to 127.0.0.1, so one local server can be
    ``example.test`` and ``www.example.test`` at once; other names as before."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback

    def getHostByName(self, name: str, timeout: Any = ()) -> defer.Deferred[str]:
        if name == "test" or name.endswith(".test"):
            return defer.succeed("127.0.0.1")
        return self.fallback.getHostByName(name, timeout)


@pytest.fixture(scope="session", autouse=True)
def loopback_resolver() -> Iterator[None]:
    from twisted.internet import reactor

    previous = reactor.resolver
    reactor.installResolver(LoopbackResolver(previous))
    yield
    reactor.installResolver(previous)


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    server = Site().start()
    yield server
    server.stop()


@pytest.fixture
def fresh_site(site: Site) -> Iterator[Site]:
    """The session's site with an empty route table and log."""
    site.routes.clear()
    site.reset()
    yield site
    site.routes.clear()
    site.reset()


class LinkSpider(scrapy.Spider):
    """Follows every link on the site and yields one item per page."""

    name = "links"

    def __init__(self, start: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_list = start or []

    async def start(self) -> AsyncIterator[Any]:
        for url in self.start_list:
            yield scrapy.Request(url, dont_filter=True)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        if not isinstance(response, scrapy.http.TextResponse):
            return
        yield {
            "url": response.url,
            "title": response.css("title::text").get(""),
            "text": " ".join(response.css("body *::text").getall()),
        }
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


@dataclass
class CrawlResult:
    items: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    crawler: Any = None


async def crawl(
    spidercls: type[scrapy.Spider] = LinkSpider,
    settings: dict[str, Any] | None = None,
    **spider_kwargs: Any,
) -> CrawlResult:
    """Run one crawl with the real engine and collect what a user would see."""
    runner = AsyncCrawlerRunner({**BASE_SETTINGS, **(settings or {})})
    crawler = runner.create_crawler(spidercls)
    result = CrawlResult(crawler=crawler)

    def collect(item: Any) -> None:
        result.items.append(dict(item))

    crawler.signals.connect(collect, signal=signals.item_scraped)
    await crawler.crawl_async(**spider_kwargs)
    result.stats = dict(crawler.stats.get_stats())
    return result
