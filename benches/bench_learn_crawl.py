"""Learned URL rules in real Scrapy crawls of a generated messy site of 10k+
pages: fetches per real page, real pages lost and items doubled, wall time
and CPU per fetch, learning on against off and against plain Scrapy (the
anchors), in one run (issue 13).

Run from the repository root::

    python benches/bench_learn_crawl.py              # 2,400 products: ~10k real pages, ~15 min
    python benches/bench_learn_crawl.py --products 200   # a quick look
    python benches/bench_learn_crawl.py --only learn --redis redis://127.0.0.1:6379/0

The site is ``tests/messy_site.py`` (shop.test, news.test, wiki.test, with
its traps), served by a child process on 127.0.0.1 (every ``*.test`` name
resolves there), so the crawl's CPU time is the crawler's alone. Each
configuration is a whole crawl with the real engine, from the three home
pages, with ``CONCURRENT_REQUESTS`` requests in flight. With ``--redis``,
three workers (crawlers in this process) share scrapy-redis's queue and one
dedup namespace, learning together. The model knows the
real page behind every URL: a real page never fetched is lost, a real page
that gave two items is doubled.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar
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
    parser.add_argument("--redis", help="also crawl with three workers on this Redis")
    parser.add_argument("--only", help="comma-separated: scrapy, add-on, learn, workers")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    stories = args.stories if args.stories is not None else args.products // 3

    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    import scrapy
    from scrapy import signals
    from scrapy.crawler import AsyncCrawlerRunner
    from scrapy.exceptions import DontCloseSpider
    from scrapy.utils.defer import deferred_from_coro
    from twisted.internet import defer, reactor
    from twisted.internet.interfaces import IResolverSimple
    from zope.interface import implementer

    from scrapy_dedup.report import savings
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
        idle: ClassVar[dict[int, bool]] = {}  # workers of one crawl: close once all are idle

        @classmethod
        def from_crawler(cls, crawler: Any, *a: Any, **kw: Any) -> Any:
            spider = super().from_crawler(crawler, *a, **kw)
            cls.idle[id(spider)] = False
            crawler.signals.connect(spider.went_idle, signal=signals.spider_idle)
            crawler.signals.connect(spider.working, signal=signals.response_received)
            return spider

        def went_idle(self) -> None:
            self.idle[id(self)] = True
            if not all(self.idle.values()):
                raise DontCloseSpider

        def working(self) -> None:
            self.idle[id(self)] = False

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
    configs: dict[str, tuple[int, dict[str, Any]]] = {
        "scrapy": (1, {}),
        "add-on": (1, {**addon, "DEDUP_LEARN": False}),  # learning is on by default
        "add-on + learn": (1, {**addon, "DEDUP_LEARN": True}),
    }
    prefix = f"bench-learn-{os.getpid()}"
    if args.redis:
        configs["learn, 3 workers on Redis"] = (
            3,
            {
                **addon,
                "DEDUP_LEARN": True,
                "DEDUP_STORE": args.redis,
                "DEDUP_REDIS_PREFIX": prefix,
                "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "REDIS_URL": args.redis,
                "SCHEDULER_QUEUE_KEY": f"{prefix}:%(spider)s:requests",
                "SCHEDULER_PERSIST": True,
                "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
                "CONCURRENT_REQUESTS": max(1, args.concurrency // 3),
                "CONCURRENT_REQUESTS_PER_DOMAIN": max(1, args.concurrency // 3),
            },
        )
    if args.only:
        names = {"learn": "add-on + learn", "workers": "learn, 3 workers on Redis"}
        wanted = {names.get(n.strip(), n.strip()) for n in args.only.split(",")}
        configs = {n: c for n, c in configs.items() if n in wanted}
    results: dict[str, dict[str, float]] = {}

    async def run_all() -> None:
        for name, (workers, settings) in configs.items():
            items: Counter[str | None] = Counter()

            def collect(item: Any, items: Counter[str | None] = items) -> None:
                parts = urlsplit(item["url"])
                items[model.page_id(parts.hostname or "", parts.path, parts.query)] += 1

            crawlers = []
            MessySpider.idle.clear()
            for _ in range(workers):
                runner = AsyncCrawlerRunner({**base, **settings})
                crawler = runner.create_crawler(MessySpider)
                crawler.signals.connect(collect, signal=signals.item_scraped)
                crawlers.append(crawler)
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(crawler.crawl_async() for crawler in crawlers))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            commands.put("log")
            served = log.get(timeout=60)
            fetched = set()
            for host, target in served:
                parts = urlsplit(target)
                fetched.add(model.page_id(host.rpartition(":")[0], parts.path, parts.query))
            rules = [c.stats.get_stats().get("dedup/learn/rules", 0) for c in crawlers]
            results[name] = {
                "fetches": len(served),
                "requests": sum(
                    c.stats.get_value("downloader/request_count", 0) for c in crawlers
                ),
                # What the log's summary line says was saved beyond Scrapy's filter.
                "summary_saved": sum(savings(c.stats.get_stats())["fetches"] for c in crawlers),
                "lost": len(real - fetched),
                "doubled": sum(1 for n in items.values() if n > 1),
                "items": sum(items.values()),
                "wall": wall,
                "cpu": cpu,
                "rules": max(rules),
            }
            print(f"  {name}: done in {wall:.1f} s", flush=True)

    def finish(result: Any) -> Any:
        reactor.stop()
        return result

    reactor.callWhenRunning(lambda: deferred_from_coro(run_all()).addBoth(finish))
    reactor.run()
    commands.put("stop")
    server.join(10)
    if args.redis:
        import redis

        client = redis.Redis.from_url(args.redis)
        names = list(client.scan_iter(f"{prefix}*"))
        if names:
            client.delete(*names)

    anchor = results.get("scrapy", {"fetches": distinct})
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
    if "scrapy" in results:
        print("\n| crawl | summary: fetches saved | plain Scrapy's requests - this crawl's |")
        print("| --- | --- | --- |")
        for name, r in results.items():
            if name != "scrapy":
                print(
                    f"| {name} | {r['summary_saved']:,.0f} "
                    f"| {results['scrapy']['requests'] - r['requests']:,.0f} |"
                )
    if args.json:
        write_json(args.json, results, len(real))
    if "add-on + learn" not in results or "add-on" not in results:
        return
    on, off = results["add-on + learn"], results["add-on"]
    print(
        f"\nlearning: {off['fetches'] - on['fetches']:,.0f} fetches saved "
        f"({on['fetches'] / off['fetches']:.2f}x the add-on's), CPU per fetch "
        f"{on['cpu'] / on['fetches'] / (off['cpu'] / off['fetches']):.2f}x, whole crawl CPU "
        f"{on['cpu'] / off['cpu']:.2f}x"
    )


def write_json(path: str, results: dict[str, dict[str, float]], real: int) -> None:
    """Fetches per real page against plain Scrapy's, pages lost and doubled (``--json``)."""
    from _results import Results

    out = Results("bench_learn_crawl", sys.argv[1:])
    anchor = results.get("scrapy")
    for name in ("add-on + learn", "learn, 3 workers on Redis", "add-on"):
        r = results.get(name)
        if r is None:
            continue
        out.add(
            f"real crawl ({real:,} real pages): fetches per real page, {name} vs plain Scrapy",
            r["fetches"] / real,
            anchor["fetches"] / real if anchor else None,
        )
        out.add(f"real crawl: real pages lost, {name}", r["lost"], target="ours == 0")
        out.add(
            f"real crawl: real pages giving two items, {name}", r["doubled"], target="ours == 0"
        )
    if anchor and "add-on" in results:
        r = results["add-on"]
        out.add(
            "real crawl: CPU per fetch, add-on vs plain Scrapy (site with duplicates)",
            1000 * r["cpu"] / r["fetches"],
            1000 * anchor["cpu"] / anchor["fetches"],
            unit="ms",
        )
    out.write(path)


if __name__ == "__main__":
    main()
