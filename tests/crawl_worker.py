"""One crawl in a process of its own, for tests that need several processes or kill -9.

    python -m tests.crawl_worker SETTINGS_JSON START_URL[,START_URL...] ITEMS_FILE

Follows every link; one item per article page (url, title, text; a page with
a ``<main>``), and raises in the callback for the paths listed in the
``WORKER_FAIL_PATHS`` setting. Each item is written
to ITEMS_FILE (JSON lines) and flushed as soon as it is scraped, so a process
killed with SIGKILL leaves every item it emitted on disk, but for a line the
kill cut short (:func:`read_items` leaves it out).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import DontCloseSpider


def _ends_a_line(path: str) -> bool:
    with open(path, "rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"


def read_items(path: Any) -> list[dict[str, Any]]:
    """The items of a worker's ITEMS_FILE, across runs: a line a kill -9 cut
    short (its page was not recorded, so a later run wrote the item again)
    is left out; none when there is no file."""
    if not Path(path).exists():
        return []
    items = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            items.append(json.loads(line))
        except ValueError:
            continue
    return items


class NewsSpider(scrapy.Spider):
    name = "news"

    def __init__(self, start: str = "", items_file: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start
        self.items = open(items_file or os.devnull, "a", encoding="utf-8")  # noqa: SIM115
        if items_file and self.items.tell() and not _ends_a_line(items_file):
            # A run killed mid-line (a kill -9 can cut a write that spans
            # pages): its torn line stays a line of its own, never glued to
            # the next item (read_items leaves it out; its page, never
            # recorded, gives the item again).
            self.items.write("\n")

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> NewsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(spider.closed_items, signal=signals.spider_closed)
        crawler.signals.connect(spider.idle, signal=signals.spider_idle)
        spider.started = time.monotonic()
        return spider  # type: ignore[return-value]

    def idle(self) -> None:
        # Workers sharing a queue: stay up a while, others may still add work.
        if time.monotonic() - self.started < self.settings.getfloat("WORKER_MIN_SECONDS"):
            raise DontCloseSpider

    def closed_items(self) -> None:
        self.items.close()

    def item_scraped(self, item: Any) -> None:
        self.items.write(json.dumps(dict(item)) + "\n")
        self.items.flush()

    async def start(self) -> AsyncIterator[Any]:
        # Filtered like any link, so several workers fetch each once between them.
        for url in self.start_url.split(","):
            yield scrapy.Request(url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        if not isinstance(response, scrapy.http.TextResponse):
            return
        if response.url.split("?")[0].endswith(tuple(self.settings.getlist("WORKER_FAIL_PATHS"))):
            raise ValueError(f"a bug in the spider at {response.url}")
        if response.css("main"):  # an article page (tests.site.article)
            yield {
                "url": response.url,
                "title": response.css("title::text").get(""),
                "text": " ".join(response.css("main *::text").getall()),
            }
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


def main() -> None:
    settings, start, items_file = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    process = CrawlerProcess(
        {
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "INFO",
            "RETRY_ENABLED": False,
            **settings,
        }
    )
    process.crawl(NewsSpider, start=start, items_file=items_file)
    process.start()


if __name__ == "__main__":
    main()
