"""Benchmark the URL stage (CanonicalDupeFilter) against Scrapy's RFPDupeFilter.

Run from the repository root::

    python benches/bench_url_stage.py            # defaults: --n 100000 --mem-n 200000
    python benches/bench_url_stage.py --n 20000 --mem-n 50000 --repeat 2   # quick look

Three measurements, each with the anchor in the same run:

1. ``request_seen`` time per request on freshly built ``scrapy.Request``
   objects (built outside the timed region, each used once, so Scrapy's
   per-request fingerprint cache never helps), best of ``--repeat`` runs.
   Both filters are built as Scrapy builds them (``build_from_crawler``).
2. Memory retained per seen URL after ``--mem-n`` unique URLs, measured with
   ``tracemalloc`` (requests are built and dropped in batches, so only what the
   filter keeps is counted).
3. ``canonicalize_url`` cost per URL: ours (module function and a prebuilt
   ``URLCanonicalizer``) against the recipe's naive ``urllib.parse`` function
   and ``w3lib.url.canonicalize_url`` (what Scrapy's fingerprint uses).

The cyclic garbage collector is disabled inside timed regions (as ``timeit``
does) so a collection triggered by unrelated objects does not land on one side.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import scrapy
import w3lib.url
from scrapy import Request, Spider
from scrapy.dupefilters import RFPDupeFilter
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

import scrapy_dedup
from scrapy_dedup import CanonicalDupeFilter, URLCanonicalizer, canonicalize_url

# --- The recipe's naive function, copied verbatim -------------------------------

# fmt: off
TRACKING_PARAMS = {"utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content", "gclid", "fbclid", "msclkid", "mc_cid", "mc_eid", "ref", "src"}  # noqa: E501


def canonicalize(url: str) -> str:
    scheme, netloc, path, query, _fragment = urlsplit(url.strip())
    scheme = "https" if scheme in ("http", "https") else scheme
    netloc = netloc.lower().removeprefix("www.")
    if path != "/" and path.endswith("/"):
        path = path.rstrip("/")
    params = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k.lower() not in TRACKING_PARAMS]  # noqa: E501
    query = urlencode(sorted(params))
    return urlunsplit((scheme, netloc, path, query, ""))
# fmt: on


# --- Targets set by the issue ---------------------------------------------------

TIME_LIMIT, TIME_AIM = 0.50, 0.35  # request_seen time, ours / RFPDupeFilter
MEM_LIMIT, MEM_AIM = 0.50, 0.33  # retained bytes per URL, ours / RFPDupeFilter

# --- A deterministic, realistic URL mix -----------------------------------------

# fmt: off
_WORDS = (
    "shop", "news", "blog", "store", "market", "city", "daily", "tech", "green", "alpha",
    "nova", "metro", "urban", "north", "river", "stone", "bright", "cloud", "pixel", "open",
    "prime",
)
_TLDS = ("com", "com", "com", "org", "net", "io", "de", "co.uk", "fr", "com.au")
_SECTIONS = (
    "products", "category", "article", "news", "blog", "item", "docs", "user", "tag", "search",
    "p", "c", "en/products", "collections", "catalog", "stories",
)
_SLUGS = (
    "red-shoes", "blue-shirt", "summer-sale", "how-to-cook", "best-laptops", "winter-coat",
    "garden-tools", "coffee-beans", "running-gear", "kids-toys", "phone-cases",
    "office-chairs", "travel-bags",
)
# fmt: on
_QUERIES = ("red shoes", "cheap flights", "laptop", "garden chair", "coffee", "usb-c cable")
_TRACKING = (
    ("utm_source", ("google", "newsletter", "twitter", "facebook")),
    ("utm_medium", ("cpc", "email", "social")),
    ("gclid", None),
    ("fbclid", None),
)


def make_hosts(rng: random.Random, count: int = 200) -> list[str]:
    """``count`` distinct hosts; about a third start with ``www.``."""
    hosts: list[str] = []
    seen: set[str] = set()
    while len(hosts) < count:
        name = f"{rng.choice(_WORDS)}{rng.choice(_WORDS)}{rng.randrange(100)}"
        if name in seen:
            continue
        seen.add(name)
        sub = rng.random()
        prefix = "www." if sub < 0.35 else ("shop." if sub < 0.45 else "")
        hosts.append(f"{prefix}{name}.{rng.choice(_TLDS)}")
    return hosts


class URLMix:
    """Base URLs (unique by construction) and variants of them.

    A base is ``(host, scheme, path, params)``; ``params`` holds only content
    parameters (id, page, q, sort), each name at most once. A variant is a
    base rendered differently in ways that serve the same page: another
    scheme, ``www.`` added or removed, the trailing slash toggled, tracking
    parameters, parameters reordered, a
    fragment, or several of these at once ("mixed"). A "plain" variant is the
    base rendered without extras: an exact repeat, unless the base's first
    sighting carried tracking parameters or a fragment.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.hosts = make_hosts(self.rng)
        self.bases: list[tuple[str, str, str, list[tuple[str, str]]]] = []
        self._serial = 0

    def new_base(self) -> tuple[str, str, str, list[tuple[str, str]]]:
        rng = self.rng
        self._serial += 1
        host = rng.choice(self.hosts)
        scheme = "https" if rng.random() < 0.7 else "http"
        section = rng.choice(_SECTIONS)
        kind = rng.random()
        params: list[tuple[str, str]] = []
        if kind < 0.45:
            path = f"/{section}/{rng.choice(_SLUGS)}-{self._serial}"
        elif kind < 0.65:
            path = f"/{section}/{self._serial}/{rng.choice(_SLUGS)}"
        elif kind < 0.80:
            path = f"/{section}"
            params.append(("id", str(self._serial)))
        elif kind < 0.92:
            path = f"/{section}/{rng.choice(_SLUGS)}"
            params.append(("page", str(self._serial)))
        else:
            path = "/search"
            params.append(("q", rng.choice(_QUERIES)))
            params.append(("page", str(self._serial)))
        if rng.random() < 0.4:
            path += "/"
        if rng.random() < 0.15:  # a second ordinary parameter (names never repeat)
            name = "sort" if any(k == "page" for k, _ in params) else "page"
            params.append((name, rng.choice(("2", "3", "7", "price", "new"))))
        base = (host, scheme, path, params)
        self.bases.append(base)
        return base

    def render(
        self,
        base: tuple[str, str, str, list[tuple[str, str]]],
        *,
        tracking: bool = False,
        fragment: bool = False,
    ) -> str:
        host, scheme, path, params = base
        params = list(params)
        if tracking:
            for name, values in self.rng.sample(_TRACKING, self.rng.randint(1, 3)):
                if values is None:
                    value = "".join(self.rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=16))
                else:
                    value = self.rng.choice(values)
                params.insert(self.rng.randrange(len(params) + 1), (name, value))
        url = f"{scheme}://{host}{path}"
        if params:
            url += "?" + urlencode(params)
        if fragment:
            url += "#" + self.rng.choice(("top", "reviews", "comments", "section-2"))
        return url

    def variant(self) -> tuple[str, str]:
        """A URL serving the same page as an earlier base, and what changed."""
        rng = self.rng
        host, scheme, path, params = rng.choice(self.bases)
        kind = rng.choice(
            (
                "plain",
                "plain",
                "tracking",
                "tracking",
                "www",
                "scheme",
                "slash",
                "order",
                "fragment",
                "mixed",
            )
        )
        tracking = fragment = False
        if kind in ("www", "mixed") and host.startswith("www."):
            host = host[4:]
        elif kind in ("www", "mixed"):
            host = "www." + host
        if kind in ("scheme", "mixed"):
            scheme = "http" if scheme == "https" else "https"
        if kind in ("slash", "mixed") and path != "/":
            path = path[:-1] if path.endswith("/") else path + "/"
        if kind in ("order", "mixed") and len(params) > 1:
            params = params[::-1]
        elif kind == "order":
            kind = "plain"
        if kind in ("tracking", "mixed"):
            tracking = True
        if kind in ("fragment", "mixed"):
            fragment = True
        url = self.render((host, scheme, path, params), tracking=tracking, fragment=fragment)
        return url, kind

    def fresh(self) -> str:
        """A new page; one in five carries tracking parameters, a few a fragment."""
        base = self.new_base()
        return self.render(
            base, tracking=self.rng.random() < 0.2, fragment=self.rng.random() < 0.03
        )


def make_urls(n: int, seed: int, dup_share: float = 0.30) -> tuple[list[str], dict[str, int]]:
    """``n`` URLs, ``dup_share`` of them variants of earlier ones."""
    mix = URLMix(seed)
    urls: list[str] = []
    kinds: dict[str, int] = {}
    for i in range(n):
        if i >= 100 and mix.rng.random() < dup_share:
            url, kind = mix.variant()
            kinds[kind] = kinds.get(kind, 0) + 1
        else:
            url = mix.fresh()
        urls.append(url)
    return urls, kinds


def unique_url_batches(n: int, seed: int, batch: int) -> Iterator[list[str]]:
    """``n`` URLs of distinct pages (no variants), ``batch`` at a time."""
    mix = URLMix(seed)
    done = 0
    while done < n:
        size = min(batch, n - done)
        yield [mix.fresh() for _ in range(size)]
        mix.bases.clear()  # the generator itself must not hold on to memory
        done += size


# --- Filters --------------------------------------------------------------------


def build_ours() -> tuple[CanonicalDupeFilter, Spider]:
    crawler = get_crawler(settings_dict={"DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter"})
    return build_from_crawler(CanonicalDupeFilter, crawler), Spider.from_crawler(crawler, "b")


def build_anchor() -> tuple[RFPDupeFilter, Spider]:
    crawler = get_crawler()
    return build_from_crawler(RFPDupeFilter, crawler), Spider.from_crawler(crawler, "b")


FILTERS: dict[str, Callable[[], Any]] = {"RFPDupeFilter": build_anchor, "ours": build_ours}


# --- Measurements ---------------------------------------------------------------


def time_request_seen(
    urls: Sequence[str], repeat: int
) -> tuple[dict[str, tuple[float, int]], list[float]]:
    """Best seconds for one pass of ``request_seen`` over ``urls`` and the
    number of requests judged duplicate, per filter; and the ratio ours/anchor
    of each repeat (both timed back to back), to show the spread."""
    best: dict[str, float] = {}
    dups: dict[str, int] = {}
    paired: list[float] = []
    for rep in range(repeat):
        times: dict[str, float] = {}
        order = list(FILTERS) if rep % 2 == 0 else list(FILTERS)[::-1]
        for name in order:
            df, spider = FILTERS[name]()
            requests = [Request(u) for u in urls]  # fresh objects, outside the timer
            seen, log = df.request_seen, df.log
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                count = 0
                for r in requests:  # as Scrapy's scheduler calls them
                    if seen(r):
                        log(r, spider)
                        count += 1
                elapsed = time.perf_counter() - t0
            finally:
                gc.enable()
            del requests, seen, log, df, spider
            gc.collect()
            times[name] = elapsed
            best[name] = min(best.get(name, float("inf")), elapsed)
            if dups.setdefault(name, count) != count:
                raise AssertionError(f"{name}: duplicate count changed between runs")
        paired.append(times["ours"] / times["RFPDupeFilter"])
    return {name: (best[name], dups[name]) for name in FILTERS}, paired


def _warm_up() -> None:
    """Load what both sides load once per process (public suffix list, strip
    table, Scrapy's fingerprint machinery), so it is not charged per URL."""
    for build in FILTERS.values():
        df, _ = build()
        for url in ("http://www.example.co.uk/a/?utm_source=x&id=1#f", "https://b.example.com/"):
            df.request_seen(Request(url))
        del df
    gc.collect()


def retained_memory(name: str, n: int, seed: int, batch: int) -> tuple[int, int, Any]:
    """Bytes retained by filter ``name`` after ``n`` unique URLs, its unique
    count, and the tracemalloc diff (for --verbose).

    The requests are built before tracing starts (so building them is neither
    traced nor slowed down by tracemalloc) in batches of ``batch``; each batch
    is dropped as soon as it has been fed, so only what the filter keeps, plus
    what the requests left behind, is in the final snapshot.
    """
    batches = [[Request(u) for u in urls] for urls in unique_url_batches(n, seed, batch)]
    batches.reverse()  # pop() from the end feeds them in generation order
    gc.collect()
    tracemalloc.start()
    try:
        df, _ = FILTERS[name]()  # the filter's own (fixed) size is counted
        before = tracemalloc.take_snapshot()
        dup = 0
        while batches:
            requests = batches.pop()
            for r in requests:
                dup += df.request_seen(r)
            del requests, r
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    retained = sum(s.size for s in after.statistics("filename")) - sum(
        s.size for s in before.statistics("filename")
    )
    diff = after.compare_to(before, "lineno")
    del df
    gc.collect()
    return retained, n - dup, diff


def time_canonicalizers(urls: Sequence[str], repeat: int) -> dict[str, tuple[float, int]]:
    """Best seconds for one pass over ``urls`` and the number of distinct keys."""
    prebuilt = URLCanonicalizer()
    funcs: dict[str, Callable[[str], str]] = {
        "scrapy_dedup.canonicalize_url": canonicalize_url,
        "URLCanonicalizer() instance": prebuilt,
        "recipe canonicalize (naive)": canonicalize,
        "w3lib.url.canonicalize_url": w3lib.url.canonicalize_url,
    }
    best = dict.fromkeys(funcs, float("inf"))
    distinct: dict[str, int] = {}
    for func in funcs.values():
        func(urls[0])  # warm caches (host cache, public suffix list)
    for rep in range(repeat):  # interleaved, so drift on a busy machine hits all alike
        for name in funcs if rep % 2 == 0 else list(funcs)[::-1]:
            func = funcs[name]
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                keys = [func(u) for u in urls]
                elapsed = time.perf_counter() - t0
            finally:
                gc.enable()
            best[name] = min(best[name], elapsed)
            distinct[name] = len(set(keys))
            del keys
    return {name: (best[name], distinct[name]) for name in funcs}


# --- Report ---------------------------------------------------------------------


def verdict(ratio: float, limit: float, aim: float) -> str:
    if ratio <= aim:
        return f"PASS (<= {limit:.2f}x, aim {aim:.2f}x met)"
    if ratio <= limit:
        return f"PASS (<= {limit:.2f}x; aim {aim:.2f}x missed)"
    return f"MISS (> {limit:.2f}x; aim {aim:.2f}x)"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in (header, ["-" * w for w in widths], *rows)
    ]
    return "\n".join(("  " + line).rstrip() for line in lines)


def print_machine() -> None:
    """The header lines every benchmark prints: date, Python, CPUs."""
    print(f"  date      {datetime.date.today().isoformat()}")
    impl, pyver = platform.python_implementation(), platform.python_version()
    print(f"  python    {impl} {pyver} ({sys.platform})")
    print(f"  cpus      {os.cpu_count()}  ({platform.machine()}, {platform.processor() or '?'})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="requests timed (default 100000)")
    parser.add_argument(
        "--mem-n", type=int, default=200_000, help="unique URLs, memory run (default 200000)"
    )
    parser.add_argument(
        "--canon-n", type=int, default=50_000, help="URLs canonicalized (default 50000)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats (default 3)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument(
        "--batch", type=int, default=10_000, help="requests per batch, memory run (default 10000)"
    )
    parser.add_argument("--verbose", action="store_true", help="top allocation sites (memory)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if min(args.n, args.mem_n, args.canon_n, args.repeat, args.batch) < 1:
        parser.error("sizes and --repeat must be positive")

    started = time.perf_counter()
    print("scrapy-dedup URL stage benchmark")
    print_machine()
    print(
        f"  scrapy    {scrapy.__version__}   w3lib {_version('w3lib')}   "
        f"scrapy_dedup {_version('scrapy-dedup')} ({os.path.dirname(scrapy_dedup.__file__)})"
    )
    print(
        f"  N         {args.n} requests timed (best of {args.repeat}), "
        f"{args.mem_n} unique URLs for memory, {args.canon_n} URLs canonicalized, "
        f"seed {args.seed}"
    )
    _warm_up()

    # 1. request_seen -------------------------------------------------------
    section = time.perf_counter()
    urls, kinds = make_urls(args.n, args.seed)
    variants = sum(kinds.values())
    print(f"\n1. request_seen on fresh Request objects ({args.n} requests, ~200 hosts)")
    print(
        f"   mix: {variants} ({variants / args.n:.0%}) are variants of earlier URLs "
        f"serving the same page: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    )
    res, paired = time_request_seen(urls, args.repeat)
    t_anchor, d_anchor = res["RFPDupeFilter"]
    t_ours, d_ours = res["ours"]
    rows = []
    for name, (t, d) in res.items():
        rows.append(
            [
                "CanonicalDupeFilter" if name == "ours" else name,
                f"{t * 1e6 / args.n:.2f}",
                f"{args.n / t:,.0f}",
                f"{t:.3f}",
                f"{d} ({d / args.n:.1%})",
            ]
        )
    rows.append(
        [
            "ratio ours/anchor",
            f"{t_ours / t_anchor:.3f}x",
            "",
            "",
            f"{d_ours / max(d_anchor, 1):.2f}x",
        ]
    )
    print(table(["filter", "us/request", "requests/s", "total s", "judged duplicate"], rows))
    time_ratio = t_ours / t_anchor
    print(
        f"   target: time <= {TIME_LIMIT}x (aim {TIME_AIM}x): {time_ratio:.3f}x -> "
        f"{verdict(time_ratio, TIME_LIMIT, TIME_AIM)}"
    )
    print("   ratio of each repeat (timed back to back): " + ", ".join(f"{r:.3f}" for r in paired))
    print(f"   designed duplicates: {variants}; ours caught {d_ours}, RFPDupeFilter {d_anchor}")
    del urls
    print(f"   ({time.perf_counter() - section:.0f}s)")

    # 2. retained memory ----------------------------------------------------
    section = time.perf_counter()
    print(f"\n2. memory retained per seen URL after {args.mem_n} unique URLs (tracemalloc)")
    mem: dict[str, tuple[int, int]] = {}
    for name in FILTERS:
        retained, unique, diff = retained_memory(name, args.mem_n, args.seed + 1, args.batch)
        mem[name] = (retained, unique)
        if args.verbose:
            print(f"   top allocation sites, {name}:")
            for stat in diff[:6]:
                print(f"     {stat}")
    rows = []
    for name, (retained, unique) in mem.items():
        rows.append(
            [
                "CanonicalDupeFilter" if name == "ours" else name,
                f"{retained / args.mem_n:.1f}",
                f"{retained / 2**20:.2f}",
                str(unique),
            ]
        )
    mem_ratio = (mem["ours"][0] / args.mem_n) / (mem["RFPDupeFilter"][0] / args.mem_n)
    rows.append(["ratio ours/anchor", f"{mem_ratio:.3f}x", "", ""])
    print(table(["filter", "bytes/URL", "MiB total", "unique seen"], rows))
    print(
        f"   target: memory <= {MEM_LIMIT}x (aim {MEM_AIM}x): {mem_ratio:.3f}x -> "
        f"{verdict(mem_ratio, MEM_LIMIT, MEM_AIM)}"
    )
    print("   (the issue quotes ~133 bytes/URL for RFPDupeFilter; see benches/README.md)")
    print(f"   ({time.perf_counter() - section:.0f}s)")

    # 3. canonicalize_url ---------------------------------------------------
    section = time.perf_counter()
    canon_urls, _ = make_urls(args.canon_n, args.seed + 2)
    print(f"\n3. URL canonicalization cost ({args.canon_n} URLs of the same mix)")
    res_c = time_canonicalizers(canon_urls, args.repeat)
    t_naive = res_c["recipe canonicalize (naive)"][0]
    t_w3lib = res_c["w3lib.url.canonicalize_url"][0]
    rows = [
        [
            name,
            f"{t * 1e6 / args.canon_n:.2f}",
            f"{t / t_naive:.2f}x",
            f"{t / t_w3lib:.2f}x",
            str(keys),
        ]
        for name, (t, keys) in res_c.items()
    ]
    print(table(["function", "us/URL", "vs naive", "vs w3lib", "distinct keys"], rows))
    print(f"   ({time.perf_counter() - section:.0f}s)")

    if args.json:
        from _results import Results

        results = Results("bench_url_stage", sys.argv[1:] if argv is None else argv)
        results.add(
            "request_seen + log() per request, vs RFPDupeFilter",
            t_ours * 1e6 / args.n,
            t_anchor * 1e6 / args.n,
            unit="us",
            target=f"ratio <= {TIME_LIMIT}",
        )
        results.add(
            "memory retained per seen URL, vs RFPDupeFilter",
            mem["ours"][0] / args.mem_n,
            mem["RFPDupeFilter"][0] / args.mem_n,
            unit="B",
            target=f"ratio <= {MEM_LIMIT}",
        )
        results.add(
            f"designed duplicates caught (of {variants}), vs RFPDupeFilter",
            d_ours,
            d_anchor,
            unit="requests",
        )
        results.add(
            "canonicalize_url per URL, vs w3lib.url.canonicalize_url",
            res_c["scrapy_dedup.canonicalize_url"][0] * 1e6 / args.canon_n,
            t_w3lib * 1e6 / args.canon_n,
            unit="us",
        )
        results.write(args.json)

    print(
        f"\nSummary: request_seen {time_ratio:.3f}x "
        f"[{verdict(time_ratio, TIME_LIMIT, TIME_AIM).split()[0]}], "
        f"memory/URL {mem_ratio:.3f}x [{verdict(mem_ratio, MEM_LIMIT, MEM_AIM).split()[0]}]  "
        f"(wall {time.perf_counter() - started:.0f}s)"
    )
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
