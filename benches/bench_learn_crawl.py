"""Learned URL rules in real Scrapy crawls of a generated messy site of 10k+
pages: fetches per real page, real pages lost and items doubled, wall time
and CPU per fetch, learning on against off and against plain Scrapy (the
anchors), in one run (issue 13).

Run from the repository root::

    python benches/bench_learn_crawl.py              # 2,400 products: ~10k real pages, ~15 min
    python benches/bench_learn_crawl.py --products 200   # a quick look

The site is ``tests/messy_site.py`` (shop.test, news.test, wiki.test, with
its traps), served by a child process on 127.0.0.1 (every ``*.test`` name
resolves there), so the crawl's CPU time is the crawler's alone. Each
configuration is a whole crawl with the real engine, from the three home
pages, with ``CONCURRENT_REQUESTS`` requests in flight. The model knows the
real page behind every URL: a real page never fetched is lost, a real page
that gave two items is doubled.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HOSTS = ("shop.test", "news.test", "wiki.test")


def serve(products: int, stories: int, ports: Any, commands: Any, log: Any) -> None:
    """The child process: the messy site, counting what it serves."""
    from tests.messy_site import MessySite
    from tests.site import Site

    model = MessySite(products=products, stories=stories)
    site = Site()
    site.handler = model.reply
    site.start()
    ports.put(int(site.url("/", "127.0.0.1").split(":")[2].split("/")[0]))
    while True:
        command = commands.get()
        if command == "stop":
            break
        with site._lock:
            served, site.log[:] = list(site.log), []
        log.put(served)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=2400)
    parser.add_argument("--stories", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    stories = args.stories if args.stories is not None else args.products // 3

    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    import scrapy
    from scrapy import signals
    from scrapy.crawler import AsyncCrawlerRunner
    from scrapy.utils.defer import deferred_from_coro
    from twisted.internet import defer, reactor
    from twisted.internet.interfaces import IResolverSimple
    from zope.interface import implementer

    from tests.messy_site import MessySite

    model = MessySite(products=args.products, stories=stories)
    real, distinct = model.reachable([f"http://{host}/" for host in HOSTS])
    print(
        f"messy site: {args.products} products, {stories} stories: {len(real):,} real pages "
        f"behind {distinct:,} distinct URLs; {args.concurrency} requests in flight"
    )

    context = multiprocessing.get_context("fork")
    ports, commands, log = context.Queue(), context.Queue(), context.Queue()
    server = context.Process(target=serve, args=(args.products, stories, ports, commands, log))
    server.start()
    port = ports.get(timeout=30)

    @implementer(IResolverSimple)
    class Loopback:
        def __init__(self, fallback: Any) -> None:
            self.fallback = fallback

        def getHostByName(self, name: str, timeout: Any = ()) -> Any:
            if name.endswith(".test"):
                return defer.succeed("127.0.0.1")
            return self.fallback.getHostByName(name, timeout)

    reactor.installResolver(Loopback(reactor.resolver))

    class MessySpider(scrapy.Spider):
        name = "messy"

        async def start(self) -> AsyncIterator[Any]:
            for host in HOSTS:
                yield scrapy.Request(f"http://{host}:{port}/")

        def parse(self, response: Any) -> Iterator[Any]:
            yield {"url": response.url, "text": " ".join(response.css("main ::text").getall())}
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)

    base = {
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
    }
    addon = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}
    configs = {
        "scrapy": {},
        "add-on": addon,
        "add-on + learn": {**addon, "DEDUP_LEARN": True},
    }
    results: dict[str, dict[str, float]] = {}

    async def run_all() -> None:
        for name, settings in configs.items():
            runner = AsyncCrawlerRunner({**base, **settings})
            crawler = runner.create_crawler(MessySpider)
            items: Counter[str | None] = Counter()

            def collect(item: Any, items: Counter[str | None] = items) -> None:
                parts = urlsplit(item["url"])
                items[model.page_id(parts.hostname or "", parts.path, parts.query)] += 1

            crawler.signals.connect(collect, signal=signals.item_scraped)
            wall, cpu = time.perf_counter(), time.process_time()
            await crawler.crawl_async()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            commands.put("log")
            served = log.get(timeout=60)
            fetched = set()
            for host, target in served:
                parts = urlsplit(target)
                fetched.add(model.page_id(host.rpartition(":")[0], parts.path, parts.query))
            stats = crawler.stats.get_stats()
            results[name] = {
                "fetches": len(served),
                "lost": len(real - fetched),
                "doubled": sum(1 for n in items.values() if n > 1),
                "items": sum(items.values()),
                "wall": wall,
                "cpu": cpu,
                "rules": stats.get("dedup/learn/rules", 0),
            }
            print(f"  {name}: done in {wall:.1f} s", flush=True)

    def finish(result: Any) -> Any:
        reactor.stop()
        return result

    reactor.callWhenRunning(lambda: deferred_from_coro(run_all()).addBoth(finish))
    reactor.run()
    commands.put("stop")
    server.join(10)

    anchor = results["scrapy"]
    print()
    print(
        "| crawl | fetches | per real page | vs Scrapy | real pages lost | items (doubled) "
        "| wall s | CPU ms/fetch | rules |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        print(
            f"| {name} | {r['fetches']:,.0f} | {r['fetches'] / len(real):.2f} "
            f"| {r['fetches'] / anchor['fetches']:.2f}x | {r['lost']:.0f} "
            f"| {r['items']:,.0f} ({r['doubled']:.0f}) | {r['wall']:.1f} "
            f"| {1000 * r['cpu'] / r['fetches']:.2f} | {r['rules']:.0f} |"
        )
    on, off = results["add-on + learn"], results["add-on"]
    print(
        f"\nlearning: {off['fetches'] - on['fetches']:,.0f} fetches saved "
        f"({on['fetches'] / off['fetches']:.2f}x the add-on's), CPU per fetch "
        f"{on['cpu'] / on['fetches'] / (off['cpu'] / off['fetches']):.2f}x, whole crawl CPU "
        f"{on['cpu'] / off['cpu']:.2f}x"
    )


if __name__ == "__main__":
    main()
