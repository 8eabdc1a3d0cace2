"""Crawl one site and yield a URL, title and text for every page.

From example_project/::

    scrapy crawl site -O items.jsonl                                # the bundled demo site
    scrapy crawl site -a url=https://example.com/ -O items.jsonl    # a real site
    scrapy crawl site -a url=https://example.com/ -a max_pages=200 -O items.jsonl
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response, TextResponse

from demo.demo_site import DemoSite


class SiteSpider(scrapy.Spider):
    """Follows every link within the site of ``url`` (default: the demo site)."""

    name = "site"

    def __init__(self, url: str | None = None, max_pages: int | str = 50, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if url and "://" not in url:
            url = f"https://{url}"
        self.url = url
        self.max_pages = int(max_pages)
        host = urlsplit(url).hostname if url else "127.0.0.1"
        if not host:
            raise ValueError(f"-a url={url!r}: not a URL")
        self.allowed_domains = [host.removeprefix("www.")]
        self.demo_site: DemoSite | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> SiteSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        # Settings are frozen only after the spider is built, so -a can set them.
        crawler.settings.set("CLOSESPIDER_PAGECOUNT", spider.max_pages, priority="spider")
        crawler.signals.connect(spider.spider_closed, signal=signals.spider_closed)
        return spider

    async def start(self) -> AsyncIterator[Any]:
        if self.url is None:
            self.demo_site = DemoSite().start()
            self.url = self.demo_site.url
            self.logger.info(
                "Crawling the demo site at %s (pass -a url=... to crawl a real site)", self.url
            )
        yield scrapy.Request(self.url)

    def parse(self, response: Response) -> Iterator[Any]:
        if not isinstance(response, TextResponse):  # images, PDFs, ...
            return
        main = response.css("main") or response.css("body")
        text = main.xpath(".//text()[not(ancestor::script or ancestor::style)]").getall()
        yield {
            "url": response.url,
            "title": response.css("title::text").get("").strip(),
            "text": " ".join(" ".join(text).split()),
        }
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if url.startswith(("http://", "https://")):  # not mailto:, tel:, javascript:
                yield response.follow(url)

    def spider_closed(self) -> None:
        if self.demo_site is not None:
            self.demo_site.stop()
