"""What the add-on costs a crawl of a site with no duplicates: pure overhead, against plain Scrapy.

Run from the repository root::

    python benches/bench_overhead.py                       # 6,000 pages x 3 rounds, ~10 min
    python benches/bench_overhead.py --pages 2000 --repeat 2 --only plain,memory,sqlite  # ~2 min
    python benches/bench_overhead.py --pages 2000 --profile plain,memory  # where the time goes
    python benches/bench_overhead.py --components --pages 2000     # each part alone, ~25 s

The site (``--pages`` pages, served by ``tests.site.Site`` in a child process
on 127.0.0.1, so the server's CPU is not the crawler's) has no duplicate of
any kind: every URL is a page of its own with a text of its own (random
words of real English, 350-950 a page), no tracking parameters, no
fragments, no second URL for any page. Each page is 11-17 KB of ordinary
HTML: a head with meta tags, stylesheets, an inline script and JSON-LD, a
``<link rel="canonical">`` to its own URL (as most sites declare), a
navigation bar, the article, ten "related" links to other pages (the
previous, the next and eight others), and a footer. A repeated link (the
navigation, a page linked from several others) is the same URL, filtered
by either dupefilter.

Each crawl is ``scrapy`` with ``CrawlerProcess`` in a child process of its
own, from ``/``, following every link, one item (url, title, text) per
page; ``CONCURRENT_REQUESTS`` 16 (16 per domain), no delay, AutoThrottle and
the HTTP cache off, ``LOG_LEVEL`` INFO to a file. Variants:

- ``plain`` (a): Scrapy alone, its ``RFPDupeFilter``: the anchor;
- ``memory`` (b): ``ADDONS = {"scrapy_dedup.DedupAddon": 0}``, the default
  memory store;
- ``sqlite`` (c): the add-on with ``DEDUP_STORE = "sqlite:///<tmp file>"``
  (a fresh file per crawl; the frontier middleware is active);
- ``nolearn`` (d): the add-on (memory) with ``DEDUP_LEARN = False`` (learned
  URL rules are on by default: (b) minus (d) is what they cost);
- ``redis`` (e, only when named in ``--only``): the add-on with ``DEDUP_STORE =
  --redis``, a key prefix of its own, deleted after the crawl;
- parts of the add-on, only when named, to tell what costs what: ``urlonly``
  (f: ``DUPEFILTER_CLASS = "scrapy_dedup.CanonicalDupeFilter"`` alone),
  ``nocontent`` (g: the add-on with ``DEDUP_CONTENT_ENABLED = False``: no
  content pipeline), ``nocanonical`` (h: ``DEDUP_CANONICAL_ENABLED = False``:
  no rel=canonical middleware);
- ``plainfeed`` (i) and ``sqlitefeed`` (j), only when named: plain Scrapy and
  the add-on with SQLite, both with Scrapy's feed export to a local
  ``items.jsonl`` (what ``-o items.jsonl`` sets): the cost of the feed
  checkpoints (an fsync of the feed every ``DEDUP_FEED_CHECKPOINT`` second,
  pages recorded after it), printed as a ratio of the two.

The variants alternate, reversed every other round (a b c d, d c b a, ...).
Wall and CPU time are of the crawl inside the child, from ``process.crawl()``
until ``process.start()`` returns (engine stopped, store closed), after the
imports, which are the same in every variant; "process CPU" is the whole
child as its parent sees it (``getrusage(RUSAGE_CHILDREN)``: interpreter
start-up and imports included). Best and median of the rounds are
reported, the ratios to plain Scrapy of both, and the ratio in each round.

The crawl must fetch every page once and give one item per page in every
variant; on this site the add-on has nothing to drop. The server counts
the requests it serves and the distinct URLs; a variant that fetched or
scraped anything else fails the run (exit status 1).

``--profile VARIANT`` (or several, comma-separated) runs one crawl of each
under cProfile instead of the timed rounds and prints the profiled time
per page, the time spent in ``scrapy_dedup`` entered from Scrapy (by entry
point), and the top 25 ``scrapy_dedup`` functions by cumulative time; with
``plain`` among them, also every function (Scrapy's and asyncio's too) by
how much more own time per page it took than in plain Scrapy's crawl, which
shows costs the add-on causes outside its own code. cProfile slows small
Python calls more than C code: read the shares, not the totals.

``--components`` times each part of the add-on outside a crawl, on the same
pages, with no profiler (best of ``--repeat``): the dupefilter against
``RFPDupeFilter`` on the same requests, the rel=canonical middleware, the
content pipeline, and the signals the add-on listens to, with and without
its receivers. The table also gives the main thread's CPU, the time in the
cyclic GC (``gc.callbacks``) and the peak RSS of each crawl.

``scrapy_dedup`` is copied from the working tree when the run starts (or
from ``--code DIR``, another tree, for before/after runs) and every crawl
imports the copy (``bench_frontier.snapshot``), so edits made during a run
do not mix in.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT)]  # benches, tests

# Nothing that imports Twisted's reactor at module level: the crawl child runs
# this file too, and CrawlerProcess must install the asyncio reactor first.
from tests.site import Reply  # noqa: E402

SECTIONS = ("world", "business", "science", "culture", "sport", "travel", "health", "tech")
RELATED = 8  # links to other pages besides the previous and the next
OVERHEAD_LIMIT = 1.05  # issue 14: the add-on costs at most 5% of a crawl
BASE_SETTINGS: dict[str, Any] = {
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,  # one host: Scrapy's default of 8 would cap the 16
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": False,
    "HTTPCACHE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "INFO",
}
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}


@dataclass(frozen=True)
class Variant:
    name: str
    letter: str
    label: str


VARIANTS = [
    Variant("plain", "a", "(a) plain Scrapy (anchor)"),
    Variant("memory", "b", "(b) add-on, memory"),
    Variant("sqlite", "c", "(c) add-on, SQLite"),
    Variant("nolearn", "d", "(d) add-on, memory, DEDUP_LEARN=False"),
    Variant("redis", "e", "(e) add-on, Redis"),
    # Parts of the add-on, to tell what costs what:
    Variant("urlonly", "f", "(f) CanonicalDupeFilter alone"),
    Variant("nocontent", "g", "(g) add-on, DEDUP_CONTENT_ENABLED=False"),
    Variant("nocanonical", "h", "(h) add-on, DEDUP_CANONICAL_ENABLED=False"),
    # Scrapy's feed export (what `-o items.jsonl` sets), plain and with the
    # add-on + SQLite, whose feed checkpoints fsync it (DEDUP_FEED_CHECKPOINT):
    Variant("plainfeed", "i", "(i) plain Scrapy, -o items.jsonl"),
    Variant("sqlitefeed", "j", "(j) add-on, SQLite, -o items.jsonl"),
]
DEFAULT_VARIANTS = ["plain", "memory", "sqlite", "nolearn"]


# --- The site ---------------------------------------------------------------------


class DupFreeSite:
    """``pages`` article pages, each at one URL with a text of its own, built
    on request from its number (nothing is held in memory)."""

    def __init__(self, pages: int, seed: int) -> None:
        from pydoc_data.topics import topics

        self.pages, self.seed = pages, seed
        text = " ".join(topics[key] for key in sorted(topics))
        self.words = sorted({w.lower() for w in re.findall(r"\b[A-Za-z]{3,12}\b", text)})
        self._route = re.compile(r"^/([a-z]+)/([a-z-]+)-(\d+)$")

    def _rng(self, i: int) -> random.Random:
        return random.Random(self.seed * 1_000_003 + i)

    def title(self, i: int) -> list[str]:
        return self._rng(-1 - i).choices(self.words, k=5)

    def path(self, i: int) -> str:
        if i == 0:
            return "/"
        return f"/{SECTIONS[i % len(SECTIONS)]}/{'-'.join(self.title(i)[:4])}-{i}"

    def reply(self, host: str, path: str, query: str) -> Reply | None:
        """``tests.site.Site.handler``: the page at ``path``, or None (404)."""
        if path == "/":
            return self.page(0)
        found = self._route.match(path)
        if found is None or query:
            return None
        i = int(found.group(3))
        if not 0 < i < self.pages or self.path(i) != path:
            return None
        return self.page(i)

    def links(self, i: int) -> list[int]:
        """The previous page, the next, and ``RELATED`` others: every page is
        reachable from ``/`` along the next links."""
        n = self.pages
        rng = self._rng(n + i)
        others = [rng.randrange(n) for _ in range(RELATED)]
        return [j for j in dict.fromkeys([(i - 1) % n, (i + 1) % n, *others]) if j != i]

    def page(self, i: int) -> Reply:
        rng = self._rng(i)
        words = self.words
        title = " ".join(self.title(i)).capitalize()
        paragraphs = []
        for _ in range(rng.randint(5, 9)):
            sentences = []
            for _ in range(rng.randint(4, 8)):
                sentence = " ".join(rng.choices(words, k=rng.randint(8, 22)))
                sentences.append(sentence.capitalize() + ".")
            paragraphs.append(" ".join(sentences))
        section = SECTIONS[i % len(SECTIONS)]
        nav = "".join(
            f'<li class="nav__item"><a class="nav__link" href="{self.path(1 + k)}">'
            f"{s.capitalize()}</a></li>"
            for k, s in enumerate(SECTIONS)
        )
        related = "".join(
            f'<li class="related__item"><a class="related__link" href="{self.path(j)}">'
            f"{' '.join(self.title(j)).capitalize()}</a></li>"
            for j in self.links(i)
        )
        body = "".join(f'<p class="article__paragraph">{p}</p>\n' for p in paragraphs)
        date = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
        html = (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title} | The Daily Example</title>"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="description" content="{paragraphs[0][:150]}">'
            f'<meta property="og:title" content="{title}"><meta property="og:type" '
            f'content="article"><meta property="article:published_time" content="{date}">'
            f'<link rel="canonical" href="http://127.0.0.1:{{port}}{self.path(i)}">'
            '<link rel="stylesheet" href="/static/css/main.4f9a2c.css">'
            '<link rel="stylesheet" href="/static/css/article.81be0d.css">'
            '<link rel="preload" href="/static/fonts/serif.woff2" as="font" crossorigin>'
            f"<script>{_SCRIPT}</script>"
            '<script type="application/ld+json">{"@context": "https://schema.org", '
            f'"@type": "NewsArticle", "headline": "{title}", "datePublished": "{date}", '
            '"publisher": {"@type": "Organization", "name": "The Daily Example"}}</script>'
            '</head>\n<body class="page page--article">'
            f'<header class="masthead"><a class="masthead__logo" href="/">{_LOGO}</a>'
            f'<nav class="nav" aria-label="Sections"><ul class="nav__list">{nav}</ul></nav>'
            "</header>\n"
            f'<main id="content" class="article"><article><h1 class="article__title">{title}</h1>'
            f'<p class="article__meta">{section.capitalize()} &middot; <time datetime="{date}">'
            f"{date}</time></p>\n{body}</article></main>\n"
            '<aside class="related"><h2 class="related__title">Read next</h2>'
            f'<ul class="related__list">{related}</ul></aside>\n{_FOOTER}</body></html>'
        )
        return Reply(body=html, headers={"Content-Type": "text/html; charset=utf-8"})


_SCRIPT = (
    "window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}"
    "gtag('js',new Date());gtag('config','G-EXAMPLE0',{anonymize_ip:true});"
    + "".join(
        f"document.documentElement.classList.add('feature-{k}');"
        f"window.__flags=Object.assign(window.__flags||{{}},{{f{k}:{k % 2}}});"
        for k in range(14)
    )
)
_LOGO = (
    '<svg class="logo" viewBox="0 0 120 24" width="120" height="24" aria-hidden="true">'
    + "".join(
        f'<rect x="{4 * k}" y="{k % 7}" width="3" height="{24 - k % 7}"/>' for k in range(30)
    )
    + "<title>The Daily Example</title></svg>"
)
_FOOTER = (
    '<footer class="footer"><div class="footer__columns">'
    + "".join(
        f'<div class="footer__column"><h3 class="footer__heading">{heading}</h3>'
        f'<p class="footer__text">{heading} of The Daily Example: the same on every page, '
        f"written once by the site's template and never an item.</p></div>"
        for heading in ("About us", "Contact", "Advertising", "Careers", "Newsletters")
    )
    + '</div><p class="footer__legal">&copy; 2026 The Daily Example. All rights reserved. '
    + "Reproduction without permission is prohibited. " * 6
    + "</p></footer>"
)


def serve(pages: int, seed: int, ports: Any, commands: Any, answers: Any) -> None:
    """The child process serving the site; on "count" it answers (requests
    served, distinct paths) since the last count."""
    from tests.site import Site

    model = DupFreeSite(pages, seed)
    site = Site()
    site.handler = model.reply
    site.start()
    ports.put(site.port)
    while True:
        command = commands.get()
        if command == "stop":
            break
        with site._lock:
            served, site.log[:] = list(site.log), []
        answers.put((len(served), len({path for _, path in served})))
    site.stop()


class Server:
    """The site in a child process (fork), so its CPU is not the crawl's."""

    def __init__(self, pages: int, seed: int) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.commands, self.answers, ports = context.Queue(), context.Queue(), context.Queue()
        self.process = context.Process(
            target=serve, args=(pages, seed, ports, self.commands, self.answers), daemon=True
        )
        self.process.start()
        self.port: int = ports.get(timeout=60)

    def count(self) -> tuple[int, int]:
        """(requests served, distinct paths) since the last call."""
        self.commands.put("count")
        served: tuple[int, int] = self.answers.get(timeout=60)
        return served

    def stop(self) -> None:
        self.commands.put("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()


# --- One crawl, in a child process --------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    """One crawl; prints one ``RESULT`` JSON line."""
    sys.path.insert(0, spec["code"])  # the snapshot of scrapy_dedup taken by the runner
    import scrapy
    from scrapy.crawler import CrawlerProcess

    class OverheadSpider(scrapy.Spider):
        name = "overhead"

        async def start(self) -> Any:
            yield scrapy.Request(spec["start"])

        def parse(self, response: scrapy.http.Response) -> Any:
            yield {
                "url": response.url,
                "title": response.css("title::text").get(""),
                "text": " ".join(response.css("main p::text").getall()),
            }
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)

    process = CrawlerProcess({**BASE_SETTINGS, "LOG_FILE": spec["log"], **spec["settings"]})
    crawler = process.create_crawler(OverheadSpider)
    # Imported before the timer in every variant, plain Scrapy's included.
    import scrapy_dedup
    import scrapy_dedup.stores.sqlite

    profiler = None
    if spec["profile"]:
        import cProfile

        profiler = cProfile.Profile()
    import gc

    gc_time = [0.0, 0.0, 0.0]  # seconds in the cyclic GC, per generation
    gc_started = [0.0]

    def gc_clock(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_time[info["generation"]] += time.perf_counter() - gc_started[0]

    gc.callbacks.append(gc_clock)
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    thread_cpu = time.thread_time()
    if profiler is not None:
        profiler.enable()
    process.crawl(crawler)
    process.start()
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - wall
    thread_cpu = time.thread_time() - thread_cpu
    after = resource.getrusage(resource.RUSAGE_SELF)
    gc.callbacks.remove(gc_clock)
    if profiler is not None:
        profiler.dump_stats(spec["profile"])
    stats = dict(crawler.stats.get_stats()) if crawler.stats is not None else {}
    result = {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float))},
        "scrapy_dedup": os.path.dirname(scrapy_dedup.__file__),
        "gc": gc_time,
        "thread_cpu": thread_cpu,
        "maxrss": after.ru_maxrss,
    }
    print("RESULT " + json.dumps(result), flush=True)


# --- The runner ---------------------------------------------------------------------


@dataclass
class Row:
    variant: Variant
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    process_cpu: list[float] = field(default_factory=list)
    gc: list[float] = field(default_factory=list)  # seconds in the cyclic GC
    maxrss: list[int] = field(default_factory=list)  # KiB
    pages: list[int] = field(default_factory=list)
    items: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class Run:
    server: Server
    pages: int
    code: Path
    tmp: Path
    redis_uri: str
    redis_prefix: str
    client: Any = None  # redis.Redis when a redis variant runs
    serial: int = 0

    def settings(self, variant: Variant, workdir: Path) -> dict[str, Any]:
        feed = {"FEEDS": {str(workdir / "items.jsonl"): {"format": "jsonlines"}}}
        if variant.name == "plain":
            return {}
        if variant.name == "plainfeed":
            return feed
        if variant.name == "sqlitefeed":
            return {**ADDON, **feed, "DEDUP_STORE": f"sqlite:///{workdir / 'dedup.sqlite'}"}
        if variant.name == "urlonly":
            return {"DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter"}
        settings: dict[str, Any] = dict(ADDON)
        if variant.name == "sqlite":
            settings["DEDUP_STORE"] = f"sqlite:///{workdir / 'dedup.sqlite'}"
        elif variant.name == "nolearn":
            settings["DEDUP_LEARN"] = False
        elif variant.name == "redis":
            settings["DEDUP_STORE"] = self.redis_uri
            settings["DEDUP_REDIS_PREFIX"] = f"{self.redis_prefix}-{self.serial}"
        elif variant.name == "nocontent":
            settings["DEDUP_CONTENT_ENABLED"] = False
        elif variant.name == "nocanonical":
            settings["DEDUP_CANONICAL_ENABLED"] = False
        return settings

    def crawl(self, variant: Variant, profile: Path | None = None) -> dict[str, Any]:
        """One crawl of ``variant`` in a child process: its RESULT, plus
        ``process_cpu`` and what the server served."""
        self.serial += 1
        workdir = self.tmp / f"{self.serial}-{variant.name}"
        workdir.mkdir(parents=True)
        spec = {
            "code": str(self.code),
            "start": f"http://127.0.0.1:{self.server.port}/",
            "settings": self.settings(variant, workdir),
            "log": str(workdir / "crawl.log"),
            "profile": str(profile) if profile else "",
        }
        self.server.count()  # reset the server's log
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(spec)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=3600,
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            served, distinct = self.server.count()
            log = (workdir / "crawl.log").read_text(errors="replace")
        finally:
            if self.client is not None and variant.name == "redis":
                from bench_frontier import delete_prefix

                delete_prefix(self.client, f"{self.redis_prefix}-{self.serial}")
            shutil.rmtree(workdir, ignore_errors=True)
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                result: dict[str, Any] = json.loads(line[7:])
                break
        else:
            raise RuntimeError(
                f"{variant.name}: no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}\n{log[-3000:]}"
            )
        if not result["scrapy_dedup"].startswith(str(self.code)):
            raise RuntimeError(f"{variant.name}: imported {result['scrapy_dedup']}, not the copy")
        result["process_cpu"] = (after.ru_utime - before.ru_utime) + (
            after.ru_stime - before.ru_stime
        )
        result["served"], result["distinct"] = served, distinct
        result["log_problems"] = [
            line
            for line in log.splitlines()
            if (" ERROR: " in line or " WARNING: " in line)
            # the parts switched off on purpose (nocontent, nocanonical)
            and "WARNING: Disabled <class 'scrapy_dedup." not in line
        ][:5]
        return result


def check(result: dict[str, Any], pages: int) -> list[str]:
    """What a crawl of the duplicate-free site did wrong: every page fetched
    once, one item each, nothing dropped or logged as an error."""
    stats = result["stats"]
    problems = []
    expected = {
        "requests served by the site": result["served"],
        "distinct URLs served": result["distinct"],
        "responses received": stats.get("response_received_count", 0),
        "items scraped": stats.get("item_scraped_count", 0),
    }
    for what, value in expected.items():
        if value != pages:
            problems.append(f"{what}: {value}, not {pages}")
    for key in ("item_dropped_count", "log_count/ERROR", "dedup/items/exact", "dedup/items/near"):
        if stats.get(key):
            problems.append(f"{key}: {stats[key]}")
    problems += [f"logged: {line[:200]}" for line in result["log_problems"]]
    return problems


def measure(run: Run, variants: Sequence[Variant], repeat: int) -> dict[str, Row]:
    rows = {v.name: Row(v) for v in variants}
    for rnd in range(repeat):
        for variant in variants if rnd % 2 == 0 else variants[::-1]:
            started = time.perf_counter()
            res = run.crawl(variant)
            row = rows[variant.name]
            row.wall.append(res["wall"])
            row.cpu.append(res["cpu"])
            row.process_cpu.append(res["process_cpu"])
            row.gc.append(sum(res["gc"]))
            row.maxrss.append(res["maxrss"])
            row.pages.append(res["stats"].get("response_received_count", 0))
            row.items.append(res["stats"].get("item_scraped_count", 0))
            problems = check(res, run.pages)
            row.problems += problems
            print(
                f"   round {rnd + 1}  {variant.name:7s} {row.pages[-1]} pages  "
                f"{row.items[-1]} items  wall {res['wall']:6.2f} s  cpu {res['cpu']:6.2f} s  "
                f"main thread {res['thread_cpu']:6.2f} s  "
                f"process cpu {res['process_cpu']:6.2f} s  gc {sum(res['gc']):5.2f} s "
                f"(gen2 {res['gc'][2]:.2f})  peak RSS {res['maxrss'] / 1024:.0f} MiB  "
                f"({time.perf_counter() - started:.0f}s with start-up)"
                + ("  PROBLEM: " + "; ".join(problems) if problems else ""),
                flush=True,
            )
    return rows


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:.3f}x" if b else "-"


def report(rows: dict[str, Row], results: Any) -> None:
    from bench_url_stage import table

    plain = rows.get("plain")
    out = []
    for row in rows.values():
        bw, mw = min(row.wall), statistics.median(row.wall)
        bc, mc = min(row.cpu), statistics.median(row.cpu)
        out.append(
            [
                row.variant.label,
                "/".join(str(p) for p in sorted(set(row.pages))),
                "/".join(str(i) for i in sorted(set(row.items))),
                f"{bw:.2f}",
                f"{mw:.2f}",
                f"{bc:.2f}",
                f"{mc:.2f}",
                f"{statistics.median(row.process_cpu):.2f}",
                f"{statistics.median(row.gc):.2f}",
                f"{statistics.median(row.maxrss) / 1024:.0f}",
                ratio(bw, min(plain.wall) if plain else None),
                ratio(mw, statistics.median(plain.wall) if plain else None),
                ratio(bc, min(plain.cpu) if plain else None),
                ratio(mc, statistics.median(plain.cpu) if plain else None),
            ]
        )
    header = [
        "crawl",
        "pages",
        "items",
        "wall s best",
        "median",
        "CPU s best",
        "median",
        "process CPU s",
        "GC s",
        "peak RSS MiB",
        "wall/plain best",
        "median",
        "CPU/plain best",
        "median",
    ]
    print(table(header, out))
    feeds = rows.get("plainfeed"), rows.get("sqlitefeed")
    if feeds[0] is not None and feeds[1] is not None:
        # The feed checkpoints' cost: the same -o feed, with and without the add-on.
        anchor, ours = feeds
        for what, name in (("wall", "wall time"), ("cpu", "CPU time")):
            a, o = statistics.median(getattr(anchor, what)), statistics.median(getattr(ours, what))
            print(f"   -o items.jsonl, add-on + SQLite vs plain Scrapy, {name}: {o / a:.3f}x")
            if results is not None:
                results.add(
                    f"dup-free crawl, -o items.jsonl, add-on, SQLite: {name} "
                    f"(median of {len(getattr(ours, what))}), vs plain Scrapy with the same feed",
                    o,
                    a,
                    unit="s",
                )
        sqlite = rows.get("sqlite")
        if sqlite is not None:
            o, a = statistics.median(ours.wall), statistics.median(sqlite.wall)
            print(f"   add-on + SQLite, with the -o feed vs without, wall time: {o / a:.3f}x")
    if plain is None:
        return
    for row in rows.values():
        if row is plain:
            continue
        walls = ", ".join(f"{a / b:.3f}" for a, b in zip(row.wall, plain.wall, strict=True))
        cpus = ", ".join(f"{a / b:.3f}" for a, b in zip(row.cpu, plain.cpu, strict=True))
        n = statistics.median(row.pages) or 1
        extra = (statistics.median(row.cpu) - statistics.median(plain.cpu)) / n * 1e6
        print(
            f"   {row.variant.name:7s} each round, wall: {walls};  CPU: {cpus};  "
            f"CPU over plain (medians): {extra:+.0f} us per page"
        )
        if results is None:
            continue
        limit = f"ratio <= {OVERHEAD_LIMIT}" if row.variant.name in ("memory", "sqlite") else None
        label = row.variant.label.split(" ", 1)[1]
        for what, name in (("wall", "wall time"), ("cpu", "CPU time")):
            ours, anchor = getattr(row, what), getattr(plain, what)
            results.add(
                f"dup-free crawl, {label}: {name} (median of {len(ours)}), vs plain Scrapy",
                statistics.median(ours),
                statistics.median(anchor),
                unit="s",
                target=limit,
            )


def report_profile(path: Path, pages: int, label: str, top: int = 25) -> None:
    """The profiled crawl: its total, the time inside scrapy_dedup entered
    from outside it, and the package's top functions by cumulative time."""
    import pstats

    stats = pstats.Stats(str(path))
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = stats.total_tt  # type: ignore[attr-defined]
    marker = f"{os.sep}scrapy_dedup{os.sep}"

    def ours(func: Any) -> bool:
        return marker in func[0]

    def where(func: Any) -> str:
        path = (
            func[0].rsplit(marker, 1)[-1] if ours(func) else func[0].rsplit("site-packages/")[-1]
        )
        return f"{path}:{func[1]} {func[2]}"

    def line(name: str, calls: float, tt: float, ct: float) -> str:
        return (
            f"   {name[:66]:66s} {calls / pages:10.2f} {tt * 1e6 / pages:11.1f} "
            f"{ct * 1e6 / pages:11.1f}"
        )

    header = f"   {'':66s} {'calls/page':>10s} {'own us/page':>11s} {'cum us/page':>11s}"
    entries: dict[Any, list[float]] = {}  # scrapy_dedup functions called from outside it
    for func, (_, _, _, _, callers) in table.items():
        if ours(func):
            for caller, (_, nc, _, ct) in callers.items():
                if not ours(caller):
                    entry = entries.setdefault(func, [0.0, 0.0])
                    entry[0] += nc
                    entry[1] += ct
    entered = sum(ct for _, ct in entries.values())
    own = sum(tt for func, (_, _, tt, _, _) in table.items() if ours(func))
    print(
        f"\n{label}: {total:.2f} s profiled, {total * 1e6 / pages:.0f} us per page; inside "
        f"scrapy_dedup, entered from outside it: {entered * 1e6 / pages:.0f} us per page "
        f"({entered / total:.1%}); scrapy_dedup's own lines (tottime): "
        f"{own * 1e6 / pages:.0f} us per page"
    )
    anchor = [
        (func, v)
        for func, v in table.items()
        if func[0].endswith(f"scrapy{os.sep}dupefilters.py") and func[2] in ("request_seen", "log")
    ]
    if anchor:
        print("   Scrapy's own duplicate filter (what the add-on's dupefilter replaces):")
        print(header)
        for func, (_, calls, tt, ct, _) in anchor:
            print(line(where(func), calls, tt, ct))
    if not entries:
        return
    print("   where scrapy_dedup is entered from Scrapy (cumulative time of those calls):")
    print(header)
    for func, (calls, ct) in sorted(entries.items(), key=lambda e: -e[1][1])[:10]:
        print(line(where(func), calls, table[func][2] * calls / max(table[func][1], 1), ct))
    rows = sorted(((f, v) for f, v in table.items() if ours(f)), key=lambda fv: -fv[1][3])
    print(f"   top {top} scrapy_dedup functions by cumulative time:")
    print(header)
    for func, (_, calls, tt, ct, _) in rows[:top]:
        print(line(where(func), calls, tt, ct))


def report_profile_diff(base: Path, path: Path, pages: int, label: str, top: int = 20) -> None:
    """Where a profiled crawl spends more than plain Scrapy's: every function
    (Scrapy's, asyncio's, the add-on's) by its own time per page, minus the
    same function's in plain Scrapy's profile; the costs the add-on causes
    outside its own code show up here."""
    import pstats

    def own_times(p: Path) -> dict[Any, tuple[float, float]]:
        table: dict[Any, Any] = pstats.Stats(str(p)).stats  # type: ignore[attr-defined]
        times: dict[Any, tuple[float, float]] = {}
        for (file, line, name), v in table.items():
            # "<built-in method __new__ of type object at 0x7f...>": one per process
            func = (file, line, re.sub(r" at 0x[0-9a-f]+", "", name))
            calls, tt = times.get(func, (0, 0.0))
            times[func] = (calls + v[1], tt + v[2])
        return times

    plain, other = own_times(base), own_times(path)
    diffs = []
    for func in set(plain) | set(other):
        calls_a, tt_a = plain.get(func, (0, 0.0))
        calls_b, tt_b = other.get(func, (0, 0.0))
        diffs.append((tt_b - tt_a, calls_b - calls_a, func))
    diffs.sort(key=lambda d: -d[0])
    marker = f"{os.sep}scrapy_dedup{os.sep}"
    print(f"\n{label}: functions by own time per page over plain Scrapy's (cProfile)")
    print(f"   {'':66s} {'calls/page':>10s} {'own us/page':>11s}")
    for dt, dcalls, func in diffs[:top]:
        path_ = func[0].rsplit(marker, 1)[-1] if marker in func[0] else func[0]
        path_ = path_.rsplit("site-packages/", 1)[-1].rsplit("lib/python3", 1)[-1]
        name = f"{path_}:{func[1]} {func[2]}"
        print(f"   {name[-66:]:66s} {dcalls / pages:+10.2f} {dt * 1e6 / pages:+11.1f}")


def components(pages: int, seed: int, code: Path, repeat: int) -> None:
    """CPU per page of each part of the add-on, outside a crawl, on this
    site's pages: each part as the crawl calls it, with no profiler, best of
    ``repeat`` (a fresh crawler and memory store each time). The dupefilter is
    timed against ``RFPDupeFilter`` on the same requests (every link of every
    page, ``log()`` for each one judged duplicate); the signals the add-on
    listens to per request or item are timed with and without its receivers."""
    import gc

    sys.path.insert(0, str(code))
    import scrapy
    from scrapy import signals
    from scrapy.dupefilters import RFPDupeFilter
    from scrapy.http import HtmlResponse
    from scrapy.utils.misc import build_from_crawler
    from scrapy.utils.test import get_crawler

    import scrapy_dedup
    from scrapy_dedup import CanonicalDupeFilter, ContentDedupPipeline, RelCanonicalMiddleware
    from scrapy_dedup.state import CrawlState

    assert scrapy_dedup.__file__ is not None and scrapy_dedup.__file__.startswith(str(code))
    model = DupFreeSite(pages, seed)
    port = "8000"
    site: list[tuple[str, bytes, dict[str, list[str]]]] = []
    for i in range(pages):
        reply = model.page(i)
        headers = {k: v if isinstance(v, list) else [v] for k, v in reply.headers.items()}
        url = f"http://127.0.0.1:{port}{model.path(i)}"
        site.append((url, reply.body.replace("{port}", port).encode(), headers))
    # What the spider makes of each page (untimed): its item and its links.
    parsed = []
    for url, body, headers in site:
        response = HtmlResponse(url, body=body, headers=headers)
        item = {
            "url": url,
            "title": response.css("title::text").get(""),
            "text": " ".join(response.css("main p::text").getall()),
        }
        links = [response.urljoin(h) for h in response.css("a::attr(href)").getall()]
        parsed.append((item, links))
    links_per_page = sum(len(links) for _, links in parsed) / pages

    def cpu(loop: Any) -> float:
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            loop()
            return (time.process_time() - t0) * 1e6 / pages
        finally:
            gc.enable()

    def once() -> dict[str, float]:
        """One repeat: fresh crawlers, stores and requests."""
        measured: dict[str, float] = {}
        plain = get_crawler(scrapy.Spider, settings_dict={})
        ours = get_crawler(scrapy.Spider, settings_dict={**ADDON, "DEDUP_STORE": "memory"})
        for crawler in (plain, ours):
            crawler.spider = scrapy.Spider.from_crawler(crawler, "overhead")
        spider = ours.spider
        # Every link of every page as a fresh Request (Scrapy caches fingerprints per request).
        anchor_requests = [scrapy.Request(u) for _, links in parsed for u in links]
        our_requests = [scrapy.Request(u) for _, links in parsed for u in links]

        def filter_all(df: Any, requests: list[Any], spider: Any) -> None:
            for request in requests:
                if df.request_seen(request):
                    df.log(request, spider)

        rfp = build_from_crawler(RFPDupeFilter, plain)
        measured["RFPDupeFilter (anchor)"] = cpu(
            lambda: filter_all(rfp, anchor_requests, plain.spider)
        )
        dupefilter = build_from_crawler(CanonicalDupeFilter, ours)
        measured["CanonicalDupeFilter"] = cpu(lambda: filter_all(dupefilter, our_requests, spider))
        for name, crawler, requests in (
            ("request_scheduled, plain", plain, anchor_requests),
            ("request_scheduled, add-on", ours, our_requests),
        ):
            send = crawler.signals.send_catch_log

            def scheduled(send: Any = send, requests: list[Any] = requests) -> None:
                for request in requests:
                    send(signals.request_scheduled, request=request, spider=spider)

            measured[name] = cpu(scheduled)

        middleware = build_from_crawler(RelCanonicalMiddleware, ours)
        pairs = [
            (request, HtmlResponse(url, body=body, headers=headers, request=request))
            for url, body, headers in site
            for request in [scrapy.Request(url)]
        ]
        for request, _ in pairs:
            dupefilter.request_seen(request)

        def canonical_all() -> None:
            for request, response in pairs:
                middleware.process_response(request, response)

        measured["RelCanonicalMiddleware.process_response"] = cpu(canonical_all)
        pipeline = build_from_crawler(ContentDedupPipeline, ours)
        pipeline.open_spider()
        items = [dict(item) for item, _ in parsed]

        def pipeline_all() -> None:
            for item in items:
                coroutine = pipeline.process_item(item)
                try:
                    coroutine.send(None)
                except StopIteration:
                    pass
                else:  # pragma: no cover - it never awaits
                    raise RuntimeError("process_item awaited")

        measured["ContentDedupPipeline.process_item"] = cpu(pipeline_all)
        for name, crawler in (("item_scraped, plain", plain), ("item_scraped, add-on", ours)):
            send = crawler.signals.send_catch_log

            def scraped(send: Any = send, items: list[Any] = items) -> None:
                for item, (_, response) in zip(items, pairs, strict=True):
                    send(signals.item_scraped, item=item, response=response, spider=spider)

            measured[name] = cpu(scraped)
        pipeline.close_spider()
        dupefilter.close("finished")
        rfp.close("finished")
        CrawlState.of(ours).close()
        return measured

    times: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, value in once().items():
            times.setdefault(name, []).append(value)

    best = {name: min(values) for name, values in times.items()}
    print(
        f"Parts of the add-on outside a crawl: CPU us per page of the {pages}-page site "
        f"({links_per_page:.1f} links a page), best of {repeat}, no profiler"
    )
    for name, value in best.items():
        each = ", ".join(f"{v:.0f}" for v in times[name])
        print(f"   {name:42s} {value:8.1f}   (each: {each})")
    extra = {
        "URL stage (CanonicalDupeFilter - RFPDupeFilter)": best["CanonicalDupeFilter"]
        - best["RFPDupeFilter (anchor)"],
        "its request_scheduled receiver": best["request_scheduled, add-on"]
        - best["request_scheduled, plain"],
        "rel=canonical middleware": best["RelCanonicalMiddleware.process_response"],
        "content pipeline": best["ContentDedupPipeline.process_item"],
        "its item_scraped receiver": best["item_scraped, add-on"] - best["item_scraped, plain"],
    }
    print("   the add-on's cost over plain Scrapy, by part (us per page):")
    for name, value in extra.items():
        print(f"     {name:50s} {value:+8.1f}")
    print(f"     {'in all':50s} {sum(extra.values()):+8.1f}")


def pick(only: str) -> list[Variant]:
    by_key = {v.name: v for v in VARIANTS} | {v.letter: v for v in VARIANTS}
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in by_key]
    if unknown:
        names = ", ".join(f"{v.letter}/{v.name}" for v in VARIANTS)
        raise SystemExit(f"unknown variant(s) {unknown}: use {names}")
    return list(dict.fromkeys(by_key[w] for w in wanted))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=6000, help="pages of the site (6000)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (3)")
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT_VARIANTS),
        help="variants, comma-separated, by name or letter: plain (a), memory (b), "
        "sqlite (c), learn (d), redis (e), urlonly (f), nocontent (g), nocanonical (h), "
        "plainfeed (i), sqlitefeed (j); "
        "default a,b,c,d",
    )
    parser.add_argument(
        "--redis", default="redis://127.0.0.1:6379/0", help="for the redis variant"
    )
    parser.add_argument("--seed", type=int, default=20261204)
    parser.add_argument(
        "--profile",
        metavar="VARIANT",
        help="instead of timing, crawl each of these variants (comma-separated) once under "
        "cProfile and print where the time goes",
    )
    parser.add_argument(
        "--profile-dir", metavar="DIR", help="with --profile: keep the .prof files in DIR"
    )
    parser.add_argument(
        "--code",
        metavar="DIR",
        help="copy scrapy_dedup from DIR/scrapy_dedup (another tree: before/after a change) "
        "instead of this working tree",
    )
    parser.add_argument(
        "--components",
        action="store_true",
        help="instead of crawling, time each part of the add-on on the site's pages "
        "outside a crawl (best of --repeat, no profiler)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    if args.pages < 50 or args.repeat < 1:
        parser.error("--pages >= 50 and --repeat >= 1")
    source = Path(args.code).resolve() if args.code else ROOT
    if args.components:
        from bench_frontier import snapshot

        tmp = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
        try:
            components(args.pages, args.seed, snapshot(tmp / "code", source), args.repeat)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    variants = pick(args.profile or args.only)

    import scrapy
    from bench_frontier import connect_redis, describe_code, snapshot
    from bench_url_stage import _version, print_machine

    started = time.perf_counter()
    print("scrapy-dedup overhead benchmark: a duplicate-free site, the add-on on and off")
    print_machine()
    print(
        f"  versions  scrapy {scrapy.__version__}   twisted {_version('twisted')}   "
        f"scrapy_dedup {_version('scrapy-dedup')}"
    )
    print(f"  load avg  {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    code = snapshot(tmp / "code", source)
    profiles = Path(args.profile_dir).resolve() if args.profile_dir else tmp
    profiles.mkdir(parents=True, exist_ok=True)
    print(f"  code      {describe_code(code) if source == ROOT else f'copied from {source}'}")
    client = None
    if any(v.name == "redis" for v in variants):
        client = connect_redis(args.redis)
        if client is None:
            variants = [v for v in variants if v.name != "redis"]
    model = DupFreeSite(args.pages, args.seed)
    sizes = [len(model.page(i).body) for i in range(0, args.pages, max(1, args.pages // 200))]
    words = [
        len(" ".join(re.findall(r'article__paragraph">([^<]*)', model.page(i).body)).split())
        for i in range(0, args.pages, max(1, args.pages // 50))
    ]
    server = Server(args.pages, args.seed)
    print(
        f"  site      {args.pages} pages on 127.0.0.1:{server.port} in a child process; "
        f"HTML {min(sizes) / 1024:.1f}-{max(sizes) / 1024:.1f} KB "
        f"(mean {statistics.mean(sizes) / 1024:.1f}), {min(words)}-{max(words)} words of text, "
        f"{RELATED + 2} links to other pages + {len(SECTIONS) + 1} navigation links each; "
        "no two URLs serve the same page, every page declares its own URL rel=canonical"
    )
    print(
        "  crawl     CONCURRENT_REQUESTS 16 (16 per domain), no delay, AutoThrottle and "
        "HTTP cache off, LOG_LEVEL INFO to a file; one child process per crawl"
        + ("" if args.profile else f"; {args.repeat} rounds, variants alternating")
    )
    print()

    run = Run(server, args.pages, code, tmp, args.redis, f"bench-overhead-{uuid.uuid4().hex[:8]}")
    run.client = client
    failed: list[str] = []
    results = None
    if args.json:
        from _results import Results

        results = Results("bench_overhead", argv if argv is not None else sys.argv[1:])
    try:
        if args.profile:
            for variant in variants:
                path = profiles / f"{variant.name}.prof"
                res = run.crawl(variant, profile=path)
                problems = check(res, args.pages)
                failed += [f"{variant.name}: {p}" for p in problems]
                report_profile(path, args.pages, f"{variant.label}, under cProfile")
            base = profiles / "plain.prof"
            for variant in variants:
                if variant.name != "plain" and base.exists():
                    path = profiles / f"{variant.name}.prof"
                    report_profile_diff(base, path, args.pages, variant.label)
        else:
            rows = measure(run, variants, args.repeat)
            print(f"\nWhole crawls ({args.pages} pages; best and median of {args.repeat} rounds)")
            report(rows, results)
            for row in rows.values():
                failed += [f"{row.variant.name}: {p}" for p in dict.fromkeys(row.problems)]
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if results is not None:
        results.add(
            "pages lost, doubled or items dropped on a dup-free site",
            float(len(failed)),
            unit="problems",
            target="ours == 0",
        )
        results.write(args.json)
    if failed:
        print(
            "\nFAIL: the crawls of a site without duplicates did not all fetch every page "
            f"once and keep every item ({len(failed)} problems):"
        )
        for line in failed:
            print(f"   {line}")
    else:
        print(
            f"\nEvery crawl fetched each of the {args.pages} pages once and scraped one item "
            "per page: nothing dropped."
        )
    print(f"(wall {time.perf_counter() - started:.0f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
