"""Crawl throughput while the Redis store is frozen, against a healthy Redis and memory.

Run from the repository root::

    python benches/bench_store_faults.py               # about 1 minute
    python benches/bench_store_faults.py --seconds 20  # a longer frozen window

Three crawls of the same endless local site (a binary tree of pages, each
waiting ``--delay`` seconds before it answers, each with a text of its own,
so the content pipeline records every item), one after the other in one
process, with ``ADDONS = {"scrapy_dedup.DedupAddon": 0}``:

1. ``DEDUP_STORE = "memory"`` (the anchor);
2. a ``redis-server`` of the bench's own, healthy;
3. the same server frozen with SIGSTOP (as a hung host or a black-holed
   network: connections open, nothing answers) after ``--warmup`` seconds,
   for the rest of the crawl, then thawed with SIGCONT.

Each crawl runs ``--warmup`` + ``--seconds`` seconds; the rate is the
responses received in the last ``--seconds`` per second. Before the fix for
issue 10 a frozen Redis blocked Scrapy's reactor thread 10 s per failed call
and again at every retry ping (34.6 -> 9.5 requests/s); now each call waits
at most ``DEDUP_STORE_TIMEOUT`` and the retry ping runs on another thread.
Performance is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # tests

from scrapy.utils.reactor import install_reactor  # noqa: E402

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import scrapy  # noqa: E402
from scrapy import signals  # noqa: E402
from scrapy.crawler import AsyncCrawlerRunner  # noqa: E402
from scrapy.utils.defer import deferred_from_coro  # noqa: E402
from twisted.internet import reactor  # noqa: E402

import scrapy_dedup  # noqa: E402
from tests.redis_servers import start_redis  # noqa: E402
from tests.site import Reply, Site, page  # noqa: E402

WORDS = [f"w{i}" for i in range(5000)]


class TreeRoutes(dict[str, Any]):
    """``/p/<n>`` links to its two children, its parent and the root: an
    endless site where half the links are duplicates."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def get(self, path: str, default: Any = None) -> Any:
        if path == "/":
            path = "/p/1"
        if not path.startswith("/p/") or not path[3:].isdigit():
            return default
        n = int(path[3:])
        return lambda query: self.reply(n)

    def reply(self, n: int) -> Reply:
        time.sleep(self.delay)
        text = " ".join(random.Random(n).choices(WORDS, k=150))
        links = (f"/p/{2 * n}", f"/p/{2 * n + 1}", f"/p/{n // 2 or 1}", "/")
        return page(f"Page {n}", *links, text=text)


class TreeSpider(scrapy.Spider):
    name = "tree"

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.start_url)

    def parse(self, response: Any) -> Iterator[Any]:
        yield {"url": response.url, "text": response.css("p::text").get("")}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


async def run(
    site: Site, store: str, args: argparse.Namespace, server: subprocess.Popen[bytes] | None
) -> tuple[float, dict[str, Any]]:
    """Responses per second over the last ``args.seconds`` of one crawl, and its stats."""
    runner = AsyncCrawlerRunner(
        {
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "ERROR",
            "RETRY_ENABLED": False,
            "CONCURRENT_REQUESTS": args.concurrency,
            "CLOSESPIDER_TIMEOUT": args.warmup + args.seconds,
            "ADDONS": {"scrapy_dedup.DedupAddon": 0},
            "DEDUP_STORE": store,
            "DEDUP_NAMESPACE": f"bench-{os.getpid()}-{time.monotonic_ns()}",
        }
    )
    crawler = runner.create_crawler(TreeSpider)
    times: list[float] = []
    crawler.signals.connect(
        lambda **kw: times.append(time.monotonic()), signal=signals.response_received, weak=False
    )
    started = time.monotonic()
    frozen = False

    def freeze() -> None:
        nonlocal frozen
        if server is not None:
            server.send_signal(signal.SIGSTOP)
            frozen = True

    timer = reactor.callLater(args.warmup, freeze)
    try:
        await crawler.crawl_async(start=site.url("/", host="127.0.0.1"))
    finally:
        if timer.active():
            timer.cancel()
        if frozen and server is not None:
            server.send_signal(signal.SIGCONT)
    window_start = started + args.warmup
    window_end = window_start + args.seconds
    count = sum(window_start <= t < window_end for t in times)
    return count / args.seconds, dict(crawler.stats.get_stats())


async def bench(args: argparse.Namespace) -> dict[str, float]:
    """Prints the rates; returns responses per second: memory, healthy, frozen."""
    site = Site().start()
    site.routes = TreeRoutes(args.delay)
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        url, server = start_redis(Path(tmp))
        try:
            rows = []
            for name, store, freeze in (
                ("memory", "memory", None),
                ("redis, healthy", url, None),
                (f"redis, frozen after {args.warmup:g} s", url, server),
            ):
                rate, stats = await run(site, store, args, freeze)
                rows.append((name, rate, stats))
                print(
                    f"  {name:<28} {rate:7.1f} responses/s   "
                    f"store errors {stats.get('dedup/store/errors', 0):>4}   "
                    f"bypassed {stats.get('dedup/store/bypassed', 0):>6}",
                    flush=True,
                )
        finally:
            server.send_signal(signal.SIGCONT)
            server.terminate()
            server.wait(10)
            site.stop()
    memory, healthy, frozen = (rate for _, rate, _ in rows)
    print(
        f"  ratios: frozen / healthy {frozen / healthy:.2f}   healthy / memory "
        f"{healthy / memory:.2f}   frozen / memory {frozen / memory:.2f}"
    )
    return {"memory": memory, "healthy": healthy, "frozen": frozen}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15, help="measured window (15)")
    parser.add_argument("--warmup", type=float, default=3, help="seconds before it (3)")
    parser.add_argument("--delay", type=float, default=0.05, help="each page's latency (0.05)")
    parser.add_argument("--concurrency", type=int, default=4, help="CONCURRENT_REQUESTS (4)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    print("scrapy-dedup: crawl throughput with a frozen Redis store")
    print(
        f"  scrapy {scrapy.__version__}, scrapy_dedup from "
        f"{os.path.dirname(scrapy_dedup.__file__)}; window {args.seconds:g} s after "
        f"{args.warmup:g} s, page latency {args.delay:g} s, "
        f"CONCURRENT_REQUESTS {args.concurrency}"
    )
    failure: list[Any] = []
    rates: dict[str, float] = {}
    done = deferred_from_coro(bench(args))
    done.addCallbacks(rates.update, failure.append)
    done.addBoth(lambda _: reactor.stop())
    reactor.run()
    if failure:
        failure[0].printTraceback()
        return 1
    if args.json:
        from _results import Results

        results = Results("bench_store_faults", sys.argv[1:] if argv is None else argv)
        results.add(
            "crawl rate with Redis frozen, vs Redis healthy",
            rates["frozen"],
            rates["healthy"],
            unit="responses/s",
        )
        results.add(
            "crawl rate with Redis healthy, vs the memory store",
            rates["healthy"],
            rates["memory"],
            unit="responses/s",
        )
        results.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
