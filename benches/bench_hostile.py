"""What hostile pages cost the rel=canonical stage, against plain Scrapy in the same run.

1. Per response: ``RelCanonicalMiddleware.process_response`` on each hostile
   shape of ``tests/test_hostile.py`` (and a normal page), timed directly,
   and the memory the crawl state keeps per response (tracemalloc).
2. Whole crawl: a local site serving every shape ``--pages`` times, crawled by
   plain Scrapy and with ``DedupAddon``, interleaved, ``--repeat`` times; the
   ratio of wall times.

Run from the repository root: ``python benches/bench_hostile.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scrapy
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_dedup import RelCanonicalMiddleware
from scrapy_dedup.state import CrawlState
from tests.site import Reply, Site
from tests.test_hostile import hostile_routes

SHAPES = [path for path in hostile_routes() if path != "/"]


def _normal_page() -> Reply:
    head = '<meta charset="utf-8"><link rel="canonical" href="/normal">' + "<meta>" * 20
    body = "<p>" + "Some text of a normal article. " * 300 + "</p>"
    return Reply(
        body=f"<!doctype html><html><head><title>n</title>{head}</head><body>{body}</body></html>",
        headers={"Content-Type": "text/html; charset=utf-8"},
    )


def _response(url: str, reply: Reply) -> Response:
    import gzip

    body = reply.body.encode("utf-8")
    headers = {
        name: value if isinstance(value, list) else [value]
        for name, value in reply.headers.items()
    }
    if reply.gzip:  # what HttpCompressionMiddleware hands on: the decompressed body
        body = gzip.decompress(gzip.compress(body))
    request = Request(url)
    return HtmlResponse(url, body=body, headers=headers, request=request)


def per_response(count: int) -> dict[str, float]:
    """Prints the table; returns the median seconds per response of each shape."""
    routes = hostile_routes()
    shapes = [("normal page", lambda q: _normal_page()), *((p, routes[p]) for p in SHAPES)]
    # Warm up process-wide caches (the public suffix list, regexes) first.
    warm = build_from_crawler(
        RelCanonicalMiddleware,
        get_crawler(settings_dict={"ADDONS": {"scrapy_dedup.DedupAddon": 0}}),
    )
    for _name, route in shapes:
        response = _response("https://example.test/warm", route(""))
        warm.process_response(response.request, response)
    print(f"\n1. process_response per response ({count} responses per shape)")
    print(f"   {'shape':<20} {'median ms':>10} {'max ms':>8} {'kept B/resp':>12}")
    medians: dict[str, float] = {}
    for name, route in shapes:
        crawler = get_crawler(settings_dict={"ADDONS": {"scrapy_dedup.DedupAddon": 0}})
        middleware = build_from_crawler(RelCanonicalMiddleware, crawler)
        responses = [
            _response(
                f"https://example.test{name if name.startswith('/') else '/n'}?n={i}", route("")
            )
            for i in range(count)
        ]
        state = CrawlState.of(crawler)
        times = []
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for response in responses:
            start = time.perf_counter()
            middleware.process_response(response.request, response)
            times.append(time.perf_counter() - start)
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        kept = sum(s.size_diff for s in after.compare_to(before, "filename"))
        # timings without tracemalloc's overhead
        times = []
        for response in responses:
            response.request.meta.pop("dedup_canonical_url", None)
            start = time.perf_counter()
            middleware.process_response(response.request, response)
            times.append(time.perf_counter() - start)
        print(
            f"   {name:<20} {1000 * statistics.median(times):>10.2f} {1000 * max(times):>8.2f}"
            f" {kept / count:>12.0f}"
        )
        medians[name] = statistics.median(times)
        state.close()
    return medians


class _Spider(scrapy.Spider):
    name = "hostile"

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start

    async def start(self) -> Any:
        yield scrapy.Request(self.start_url)

    def parse(self, response: Response) -> Any:
        yield {"url": response.url, "text": response.url}
        if response.url.endswith("/"):
            yield from response.follow_all(css="a", callback=self.parse)


async def _crawl(settings: dict[str, Any], start: str) -> float:
    from scrapy.crawler import AsyncCrawlerRunner

    runner = AsyncCrawlerRunner(
        {
            "LOG_LEVEL": "ERROR",
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": 8,
            **settings,
        }
    )
    started = time.perf_counter()
    await runner.crawl(_Spider, start=start)
    return time.perf_counter() - started


def whole_crawl(pages: int, repeat: int) -> tuple[dict[str, float], dict[str, int]]:
    """Prints the comparison; returns the best wall time and the fetches of each."""
    from twisted.internet import asyncioreactor

    asyncioreactor.install()
    from twisted.internet import defer, reactor

    routes = hostile_routes()
    links = "".join(f'<a href="{p}?n={i}">x</a> ' for p in SHAPES for i in range(pages))
    routes["/"] = lambda q: Reply(
        body=f"<html><head><title>home</title></head><body>{links}</body></html>",
        headers={"Content-Type": "text/html; charset=utf-8"},
    )
    site = Site(routes).start()
    configs = {"plain Scrapy": {}, "DedupAddon": {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}}
    results: dict[str, list[float]] = {name: [] for name in configs}
    fetched: dict[str, int] = {}

    async def run_all() -> None:
        for _ in range(repeat):
            for name, settings in configs.items():
                site.reset()
                results[name].append(await _crawl(settings, site.url("/", host="127.0.0.1")))
                fetched[name] = len(site.fetched())

    def main() -> None:
        d = defer.Deferred.fromFuture(asyncio.ensure_future(run_all()))
        d.addBoth(lambda _: reactor.stop())

    reactor.callWhenRunning(main)
    reactor.run()
    site.stop()
    print(f"\n2. whole crawl: {len(SHAPES)} shapes x {pages} pages + home, best of {repeat}")
    best = {name: min(times) for name, times in results.items()}
    for name, seconds in best.items():
        each = ", ".join(f"{t:.2f}" for t in results[name])
        print(f"   {name:<14} {seconds:6.2f} s   {fetched[name]} fetches   (each: {each})")
    print(f"   ratio DedupAddon / plain Scrapy: {best['DedupAddon'] / best['plain Scrapy']:.2f}x")
    return best, fetched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20, help="responses per shape (part 1)")
    parser.add_argument("--pages", type=int, default=10, help="pages per shape (part 2)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    print(f"scrapy-dedup hostile pages benchmark, scrapy {scrapy.__version__}")
    medians = per_response(args.count)
    best, fetched = whole_crawl(args.pages, args.repeat)
    if args.json:
        from _results import Results

        results = Results("bench_hostile", sys.argv[1:])
        worst = max((s for s in medians if s != "normal page"), key=medians.__getitem__)
        results.add(
            f"process_response, worst hostile shape ({worst}), vs a normal page",
            medians[worst] * 1e3,
            medians["normal page"] * 1e3,
            unit="ms",
        )
        results.add(
            "whole crawl of the hostile site, wall (best), DedupAddon vs plain Scrapy",
            best["DedupAddon"],
            best["plain Scrapy"],
            unit="s",
        )
        results.add(
            "whole crawl of the hostile site, fetches, DedupAddon vs plain Scrapy",
            fetched["DedupAddon"],
            fetched["plain Scrapy"],
            unit="fetches",
            target="ratio == 1",
        )
        results.write(args.json)


if __name__ == "__main__":
    main()
