"""What verifying rel=canonical declarations before trusting them costs, in
fetches, on sites where every declaration is right: the default
(``DEDUP_CANONICAL_TRUST = "verified"``) against trusting every declaration at
once (``"always"``, the earlier default) and against plain Scrapy, in one run.

Run from the repository root::

    python benches/bench_canonical_trust.py                  # 4 hosts x 150 articles, ~1 min
    python benches/bench_canonical_trust.py --hosts 1 --articles 40   # a quick look

Each host (``h0.test``, ``h1.test``, ...; every ``*.test`` name resolves to
the site on 127.0.0.1, served by a thread of this process) has ``--articles``
articles ``/a/<n>`` of their own texts, reached through their views
(``tests.site.view_routes``): an AMP view ``/a/<n>/amp`` links the article's
print view, a tracking landing page ``/a/<n>?from=amp`` and the clean page;
all three views declare the clean page, rightly (the same article text).
Three shapes of site:

- ``chain``: each AMP view links the next article's, from the home page's
  link to the first: a few requests in flight at a time;
- ``hub``: the home page links every AMP view: many declarations are made
  before the first declared page is fetched and checks them;
- ``prints`` (not every declaration is safe to trust): a chain of articles
  ``/p/<n>``, each reachable only from the one before, each linking the print
  view of the article 10 further on, which has its text (a right
  declaration) but not its link to the next article
  (``tests.site.print_view_routes``). Verifying texts alone trusted the host
  after 3 and lost the chain behind the first article skipped; links are
  verified too, so the host is never trusted.

Each crawl follows every link from the home pages with ``CONCURRENT_REQUESTS``
16 (Scrapy's default), one item (url, main text) per page. Fetches are counted
by the server. For the add-on, an article is lost when no item came out under
its clean URL, doubled when two did. Plain Scrapy fetches every page; the
add-on with ``"always"`` skips every clean page (each was declared before it
was linked); ``"verified"`` fetches the first declared pages of each host until
``DEDUP_CANONICAL_TRUST_MIN_SUPPORT`` of them matched, those declared while
they were in flight, and one in ``1 / DEDUP_CANONICAL_TRUST_SAMPLE`` after.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scrapy

from tests.site import Reply, Site, article, print_view_routes, view_routes

CONFIGS: dict[str, dict[str, Any]] = {
    "plain Scrapy": {},
    "add-on, always": {
        "ADDONS": {"scrapy_dedup.DedupAddon": 0},
        "DEDUP_CANONICAL_TRUST": "always",
    },
    "add-on, verified (default)": {"ADDONS": {"scrapy_dedup.DedupAddon": 0}},
}


class _Spider(scrapy.Spider):
    name = "views"

    def __init__(self, starts: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.starts = starts

    async def start(self) -> AsyncIterator[Any]:
        for url in self.starts:
            yield scrapy.Request(url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "text": " ".join(response.css("main ::text").getall())}
        yield from response.follow_all(css="a", callback=self.parse)


def make_site(hosts: int, articles: int, shape: str) -> Site:
    sites = {}
    for h in range(hosts):
        if shape == "prints":
            sites[f"h{h}.test"] = print_view_routes(articles, range(10, articles), ahead=10)
            continue
        routes = view_routes(articles, first=h * articles)
        if shape == "hub":
            amps = [f"/a/{n}/amp" for n in range(articles)]
            routes["/"] = lambda q, amps=amps: article("Home", "the home page", *amps)
        sites[f"h{h}.test"] = routes

    def handler(host: str, path: str, query: str) -> Reply | None:
        routes = sites.get(host.split(":")[0])
        route = routes.get(path) if routes is not None else None
        return route(query) if route is not None else None

    site = Site()
    site.handler = handler
    return site


async def _crawl(settings: dict[str, Any], starts: tuple[str, ...]) -> tuple[float, list[Any]]:
    from scrapy import signals
    from scrapy.crawler import AsyncCrawlerRunner

    runner = AsyncCrawlerRunner(
        {
            "LOG_LEVEL": "ERROR",
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": 16,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
            **settings,
        }
    )
    crawler = runner.create_crawler(_Spider)
    items: list[Any] = []

    def collect(item: Any) -> None:  # held here: signals keep weak references
        items.append(dict(item))

    crawler.signals.connect(collect, signal=signals.item_scraped)
    started = time.perf_counter()
    await crawler.crawl_async(starts=starts)
    return time.perf_counter() - started, items


def run(hosts: int, articles: int, shapes: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Crawls every shape with every configuration; prints and returns
    {shape: {config: {"fetches", "seconds", "lost", "doubled"}}}."""
    from twisted.internet import asyncioreactor

    asyncioreactor.install()
    from twisted.internet import defer, reactor
    from twisted.internet.interfaces import IResolverSimple
    from zope.interface import implementer

    @implementer(IResolverSimple)
    class Loopback:
        def __init__(self, fallback: Any) -> None:
            self.fallback = fallback

        def getHostByName(self, name: str, timeout: Any = ()) -> Any:
            if name.endswith(".test"):
                return defer.succeed("127.0.0.1")
            return self.fallback.getHostByName(name, timeout)

    reactor.installResolver(Loopback(reactor.resolver))
    results: dict[str, dict[str, dict[str, float]]] = {}

    async def run_all() -> None:
        for shape in shapes:
            site = make_site(hosts, articles, shape).start()
            starts = tuple(site.url("/", host=f"h{h}.test") for h in range(hosts))
            clean = {
                site.url(f"/{'p' if shape == 'prints' else 'a'}/{n}", host=f"h{h}.test")
                for h in range(hosts)
                for n in range(articles)
            }
            results[shape] = {}
            for name, settings in CONFIGS.items():
                site.reset()
                seconds, items = await _crawl(settings, starts)
                filed = Counter(item["url"] for item in items if item["url"] in clean)
                results[shape][name] = {
                    "fetches": len(site.log),
                    "seconds": seconds,
                    "lost": len(clean - set(filed)),
                    "doubled": sum(1 for n in filed.values() if n > 1),
                }
            site.stop()

    def main() -> None:
        d = defer.Deferred.fromFuture(asyncio.ensure_future(run_all()))
        d.addErrback(lambda failure: print(failure))
        d.addBoth(lambda _: reactor.stop())

    reactor.callWhenRunning(main)
    reactor.run()
    return results


def report(results: dict[str, dict[str, dict[str, float]]], hosts: int, articles: int) -> None:
    pages = hosts * (1 + 4 * articles)
    print(f"{hosts} hosts x {articles} articles ({pages} pages, every declaration right)")
    for shape, by in results.items():
        plain = by["plain Scrapy"]["fetches"]
        always = by["add-on, always"]["fetches"]
        print(f"\nshape {shape}:")
        head = f"{'fetches':>8}{'/ plain':>9}{'/ always':>10}{'lost':>6}{'doubled':>9}"
        print(f"  {'':<28}{head}{'wall':>8}")
        for name, r in by.items():
            print(
                f"  {name:<28}{r['fetches']:>8.0f}{r['fetches'] / plain:>8.3f}x"
                f"{r['fetches'] / always:>9.3f}x"
                + (
                    f"{r['lost']:>6.0f}{r['doubled']:>9.0f}"
                    if name != "plain Scrapy"
                    else f"{'-':>6}{'-':>9}"
                )
                + f"{r['seconds']:>7.1f}s"
            )
        verified = by["add-on, verified (default)"]["fetches"]
        print(
            f"  verified fetches {verified - always:.0f} more pages than always "
            f"({(verified - always) / hosts:.1f} per host), and saves {plain - verified:.0f} "
            f"of plain Scrapy's {plain:.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--articles", type=int, default=150, help="articles per host")
    parser.add_argument(
        "--shapes",
        default="chain,hub",
        help="chain, hub, prints (comma-separated; prints: with --hosts 1, its hosts share texts)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    print(f"scrapy-dedup rel=canonical trust benchmark, scrapy {scrapy.__version__}")
    results = run(args.hosts, args.articles, shapes)
    report(results, args.hosts, args.articles)
    # "always" loses the prints site's chain by design: only the default must not.
    failed = any(
        r["lost"] or r["doubled"]
        for shape, by in results.items()
        for name, r in by.items()
        if name != "plain Scrapy" and not (shape == "prints" and name == "add-on, always")
    )
    if args.json:
        from _results import Results

        out = Results("bench_canonical_trust", sys.argv[1:])
        for shape, by in results.items():
            verified = by["add-on, verified (default)"]
            plain, always = by["plain Scrapy"], by["add-on, always"]
            where = f"{shape} site, {args.hosts} hosts x {args.articles} articles"
            out.add(
                f"fetches, {where}: add-on (verified) vs plain Scrapy",
                verified["fetches"],
                plain["fetches"],
                unit="fetches",
            )
            out.add(
                f"fetches, {where}: add-on (verified) vs add-on (always, the earlier default)",
                verified["fetches"],
                always["fetches"],
                unit="fetches",
            )
            out.add(
                f"fetches, {where}: add-on (always) vs plain Scrapy",
                always["fetches"],
                plain["fetches"],
                unit="fetches",
            )
            out.add(
                f"articles lost or doubled, {shape} site, add-on (verified)",
                verified["lost"] + verified["doubled"],
                unit="articles",
                target="ours == 0",
            )
        out.write(args.json)
    if failed:
        print("FAILED: an article was lost or doubled")
        sys.exit(1)


if __name__ == "__main__":
    main()
