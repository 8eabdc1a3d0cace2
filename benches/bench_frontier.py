"""Benchmark what the frontier and the per-turn commit cost per request, in real crawls.

Run from the repository root::

    python benches/bench_frontier.py                          # 3000 pages x 3 rounds: ~5 min
    python benches/bench_frontier.py --pages 1000 --rounds 1  # quick look, under a minute
    python benches/bench_frontier.py --only all               # also Redis without the frontier
    python benches/bench_frontier.py --only plain,memory,sqlite
    python benches/bench_frontier.py --callgrind --only all   # instructions: ~16 min

A local site of ``--pages`` pages (a home page, list pages of 20 articles,
articles that each give one item; most links are repeats of links seen
before: navigation, "popular" and "related" articles, ``#comments``) is served
on 127.0.0.1 by ``tests.site.Site`` in a thread of this process. It is crawled
with the real Scrapy engine (``CrawlerProcess``, ``CONCURRENT_REQUESTS`` and
``CONCURRENT_REQUESTS_PER_DOMAIN`` 16) in each configuration:

- ``plain``: Scrapy alone (its ``RFPDupeFilter``): the anchor;
- ``memory``: ``ADDONS = {"scrapy_dedup.DedupAddon": 0}`` with ``DEDUP_STORE =
  "memory"`` (the frontier middleware is not active with memory);
- ``sqlite``: the add-on with ``sqlite:///<tmp>/d.db``: every scheduled request
  is written to the frontier as JSON, a page is recorded once its outputs are
  out, and what a reactor turn wrote is committed at its end;
- ``sqlite-nofrontier``: the same without ``DedupFrontierMiddleware``
  (``SPIDER_MIDDLEWARES = {"scrapy_dedup.DedupFrontierMiddleware": None}``), to
  isolate its cost: the store then records only the content stage's texts;
- ``redis``: the add-on with ``DEDUP_STORE = --redis`` (frontier active), a key
  prefix of its own per crawl, deleted afterwards;
- ``redis-nofrontier``: the same without the frontier middleware (only with
  ``--only all`` or named in ``--only``: it adds a minute or two);
- ``memory-nolearn``: ``memory`` with ``DEDUP_LEARN = False`` (named in
  ``--only``): learned URL rules are on by default, so ``memory`` minus this is
  what they cost per request on a site with no copies to learn from (every
  page still observed, every new URL checked).

Each crawl runs in a fresh subprocess (Scrapy's reactor cannot restart), and
the configurations alternate in order from round to round (``--rounds``);
the median of the rounds is reported. Inside the subprocess, a warm-up crawl
of a 40-page site with the same settings (its own store) runs first, so that
imports and one-time set-up are not charged to the timed crawl. The timed
region is the second crawl from ``process.crawl()`` to its end (engine
stopped, store closed): CPU time of the process (``getrusage(RUSAGE_SELF)``,
user + system, every thread) and wall time, each divided by the requests
made (``downloader/request_count``). SQLite commits (``SqliteStore.flush``
calls that wrote something) and Redis round trips (commands sent alone plus
pipelines executed) are counted by thin wrappers installed in every
configuration. The site's server runs in this process, so its CPU is not in
the numbers; its speed bounds the wall time. ``scrapy_dedup`` is copied from
the working tree when the run starts, and every crawl imports that copy, so
edits made during a run do not mix into its numbers.

On a shared machine the CPU time of one crawl moves by 10-30% from round to
round, more than the frontier costs. ``--callgrind`` counts instructions
instead (``valgrind --tool=callgrind``, which other processes do not
disturb): each configuration crawls once from a 100-page ``/small/`` site and
once from the ``--pages`` (default 600) site, and the difference of the two
totals over the difference of their requests is the cost per request, the
start-up and warm-up cancelling out. It takes about 16 minutes on 2 cores for
``--only all`` (two crawls at a time).
"""

from __future__ import annotations

import argparse
import hashlib
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
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT)]  # bench_url_stage, tests

# Nothing that imports Twisted's reactor at module level: the crawl subprocess
# runs this file too, and CrawlerProcess must install the asyncio reactor first
# (bench_url_stage, which imports scrapy.utils.test, is imported in main()).
from tests.site import Reply, Route, Site, article, page  # noqa: E402

ARTICLES_PER_LIST = 20
POPULAR = 5  # articles every list page links to (after the first, repeats)
RELATED = 3  # other articles each article links to
WARM_PAGES = 40
SMALL_PAGES = 100  # --callgrind: the smaller crawl, subtracted from the larger
CALLGRIND_PAGES = 600

BASE_SETTINGS: dict[str, Any] = {
    "CONCURRENT_REQUESTS": 16,
    # One host: without this, Scrapy's default of 8 per domain would cap the 16.
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    "LOG_LEVEL": "ERROR",
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
}
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}
NO_FRONTIER = {"SPIDER_MIDDLEWARES": {"scrapy_dedup.DedupFrontierMiddleware": None}}


@dataclass(frozen=True)
class Config:
    name: str
    label: str
    store: str  # "", "memory", "sqlite", "redis"
    frontier_off: bool = False
    learn: bool = True  # DEDUP_LEARN (the default)


CONFIGS = [
    Config("plain", "(a) plain Scrapy (anchor)", ""),
    Config("memory", "(b) add-on, memory", "memory"),
    Config("sqlite", "(c) add-on, SQLite + frontier", "sqlite"),
    Config("sqlite-nofrontier", "(d) add-on, SQLite, no frontier", "sqlite", True),
    Config("redis", "(e) add-on, Redis + frontier", "redis"),
    Config("redis-nofrontier", "(f) add-on, Redis, no frontier", "redis", True),
    Config("memory-nolearn", "(g) add-on, memory, DEDUP_LEARN=False", "memory", learn=False),
]
DEFAULT_CONFIGS = ["plain", "memory", "sqlite", "sqlite-nofrontier", "redis"]


# --- The site --------------------------------------------------------------------


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "de", "va", "gu", "fe", "zo"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def site_routes(
    prefix: str, pages: int, seed: int, canonical: bool = False
) -> tuple[dict[str, Route], int, int]:
    """``pages`` pages under ``prefix``: a home page linking to every list page,
    list pages of ``ARTICLES_PER_LIST`` articles (plus the previous and next
    list, home, and the same ``POPULAR`` articles), and articles (one item
    each, a text of their own of 150-300 words) linking to home, their list,
    ``RELATED`` other articles and themselves with ``#comments``. With
    ``canonical``, every page declares its own absolute URL (host 127.0.0.1,
    the one crawled) with ``<link rel="canonical">`` in its head.

    Returns the routes, the number of list pages and of articles."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    lists = max(1, -(-(pages - 1) // (ARTICLES_PER_LIST + 1)))
    articles = max(1, pages - 1 - lists)
    routes: dict[str, Route] = {}

    def fixed(reply: Reply) -> Route:
        return lambda q: reply

    def declaring(path: str, reply: Reply) -> Reply:
        if canonical:
            link = f'<link rel="canonical" href="http://127.0.0.1:{{port}}{path}">'
            reply.body = reply.body.replace("</title>", "</title>" + link, 1)
        return reply

    popular = [f"{prefix}/a/{j}" for j in range(min(POPULAR, articles))]
    for i in range(lists):
        own = [
            f"{prefix}/a/{j}"
            for j in range(i * ARTICLES_PER_LIST, min((i + 1) * ARTICLES_PER_LIST, articles))
        ]
        if i == lists - 1:  # the last list takes what is left
            own += [f"{prefix}/a/{j}" for j in range(lists * ARTICLES_PER_LIST, articles)]
        nav = [f"{prefix}/", *(f"{prefix}/list/{k}" for k in (i - 1, i + 1) if 0 <= k < lists)]
        path = f"{prefix}/list/{i}"
        routes[path] = fixed(declaring(path, page(f"List {i}", *own, *nav, *popular)))
    for j in range(articles):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(150, 300)))
        links = [
            f"{prefix}/",
            f"{prefix}/list/{min(j // ARTICLES_PER_LIST, lists - 1)}",
            *(f"{prefix}/a/{rng.randrange(articles)}" for _ in range(RELATED)),
            f"{prefix}/a/{j}#comments",
        ]
        routes[f"{prefix}/a/{j}"] = fixed(
            declaring(f"{prefix}/a/{j}", article(f"Article {j}", text, *links))
        )
    home = page("Home", *(f"{prefix}/list/{i}" for i in range(lists)))
    routes[f"{prefix}/"] = fixed(declaring(f"{prefix}/", home))
    return routes, lists, articles


# --- One crawl, in a subprocess ----------------------------------------------------


def _install_counters(counts: dict[str, int]) -> None:
    """Count SQLite commits and Redis round trips (a Python call per commit or
    round trip, each of which costs far more)."""
    import redis.client

    from scrapy_dedup.stores.sqlite import SqliteStore

    flush = SqliteStore.flush

    def counted_flush(self: Any, *args: Any, **kwargs: Any) -> None:
        waiting = getattr(self, "_pending_count", 0)
        flush(self, *args, **kwargs)
        if waiting and not getattr(self, "_pending_count", 0):
            counts["commits"] += 1

    execute_command: Any = redis.client.Redis.execute_command

    def counted_command(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["redis_commands"] += 1
        return execute_command(self, *args, **kwargs)

    execute: Any = redis.client.Pipeline.execute

    def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["redis_pipelines"] += 1
        return execute(self, *args, **kwargs)

    SqliteStore.flush = counted_flush  # type: ignore[method-assign]
    redis.client.Redis.execute_command = counted_command  # type: ignore[method-assign]
    redis.client.Pipeline.execute = counted_execute  # type: ignore[method-assign]


def _stats(crawler: Any) -> dict[str, Any]:
    try:
        return dict(crawler.stats.get_stats())
    except RuntimeError:  # the crawl never started
        return {}


def child(spec: dict[str, Any]) -> None:
    """Run the warm-up crawl then the timed crawl; print one ``RESULT`` JSON line."""
    sys.path.insert(0, spec["code"])  # the snapshot of scrapy_dedup taken by the runner
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    class BenchSpider(scrapy.Spider):
        name = "bench"
        start_url = ""

        async def start(self) -> Any:
            yield scrapy.Request(self.start_url)

        def parse(self, response: scrapy.http.Response) -> Any:
            if response.css("main"):  # an article: one item
                yield {
                    "url": response.url,
                    "title": response.css("title::text").get(""),
                    "text": " ".join(response.css("main *::text").getall()),
                }
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)

    def spider_class(name: str, start: str, settings: dict[str, Any]) -> type[scrapy.Spider]:
        return type(name, (BenchSpider,), {"start_url": start, "custom_settings": settings})

    process = CrawlerProcess(spec["settings"])
    result: dict[str, Any] = {}
    warm = process.create_crawler(spider_class("Warm", spec["warm_start"], spec["warm_store"]))
    timed = process.create_crawler(spider_class("Timed", spec["start"], spec["store"]))
    middlewares: list[str] = []

    def opened() -> None:
        assert timed.engine is not None
        middlewares.extend(type(m).__name__ for m in timed.engine.scraper.spidermw.middlewares)

    timed.signals.connect(opened, signal=signals.spider_opened)
    marks: dict[str, Any] = {}
    counts = {"commits": 0, "redis_commands": 0, "redis_pipelines": 0}

    profiler = None
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()

    def start_timed(_: Any) -> Any:
        for key in counts:
            counts[key] = 0
        marks["ru"], marks["t"] = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        return process.crawl(timed)

    def done(outcome: Any) -> None:
        wall = time.perf_counter() - marks.get("t", time.perf_counter())
        ru = resource.getrusage(resource.RUSAGE_SELF)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(spec["profile"])
        before = marks.get("ru", ru)
        result["cpu"] = (ru.ru_utime - before.ru_utime) + (ru.ru_stime - before.ru_stime)
        result["wall"] = wall
        if outcome is not None and hasattr(outcome, "getTraceback"):
            result["error"] = outcome.getTraceback()
        cast(Any, reactor).stop()

    d = process.crawl(warm)  # installs the asyncio reactor: nothing may import it before
    from twisted.internet import reactor

    # Imported before the timer in every configuration, the plain one included.
    import scrapy_dedup
    import scrapy_dedup.stores.redis
    import scrapy_dedup.stores.sqlite

    _install_counters(counts)
    d.addCallback(start_timed)
    d.addBoth(done)
    process.start(stop_after_crawl=False)

    stats = _stats(timed)
    result.update(counts)
    result["stats"] = {
        k: v
        for k, v in stats.items()
        if isinstance(v, int)
        and (
            k.startswith(("dedup/", "downloader/response_status_count/", "dupefilter/"))
            or k
            in (
                "downloader/request_count",
                "response_received_count",
                "item_scraped_count",
                "item_dropped_count",
                "log_count/ERROR",
            )
        )
    }
    result["frontier_active"] = "DedupFrontierMiddleware" in middlewares
    result["scrapy_dedup"] = os.path.dirname(scrapy_dedup.__file__)
    result["warm_requests"] = _stats(warm).get("downloader/request_count", 0)
    print("RESULT " + json.dumps(result), flush=True)


# --- The runner ----------------------------------------------------------------------


@dataclass
class Row:
    config: Config
    cpu: list[float] = field(default_factory=list)  # us per request, one per round
    wall: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    items: list[int] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)
    round_trips: list[int] = field(default_factory=list)
    frontier: set[bool] = field(default_factory=set)
    last_stats: dict[str, int] = field(default_factory=dict)
    profiles: list[tuple[Path, int]] = field(default_factory=list)  # --profile: (file, requests)

    def median(self, what: str) -> float:
        return float(statistics.median(getattr(self, what)))


def store_settings(cfg: Config, workdir: Path, redis_uri: str, prefix: str) -> dict[str, Any]:
    if not cfg.store:
        return {}
    settings: dict[str, Any] = dict(ADDON)
    if cfg.frontier_off:
        settings.update(NO_FRONTIER)
    settings["DEDUP_LEARN"] = cfg.learn
    if cfg.store == "memory":
        settings["DEDUP_STORE"] = "memory"
    elif cfg.store == "sqlite":
        settings["DEDUP_STORE"] = f"sqlite:///{workdir / 'd.db'}"
    else:
        settings["DEDUP_STORE"] = redis_uri
        settings["DEDUP_REDIS_PREFIX"] = prefix
    return settings


def run_one(
    cfg: Config,
    site: Site,
    workdir: Path,
    redis_uri: str,
    prefix: str,
    code: Path,
    start: str = "/",
    callgrind: bool = False,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One crawl of ``cfg`` from ``start`` in a fresh subprocess, with the package
    in ``code`` (under callgrind: plus ``instructions``, the process's total; with
    ``profile``, the timed crawl's cProfile stats are written there): its RESULT."""
    workdir.mkdir(parents=True)
    (workdir / "warm").mkdir()
    spec = {
        "code": str(code),
        "settings": BASE_SETTINGS,
        "start": site.url(start, host="127.0.0.1"),
        "warm_start": site.url("/warm/", host="127.0.0.1"),
        "store": store_settings(cfg, workdir, redis_uri, prefix),
        "warm_store": store_settings(cfg, workdir / "warm", redis_uri, prefix + "-warm"),
        "profile": str(profile) if profile else "",
    }
    wrap = []
    if callgrind:
        wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir / 'cg.out'}"]
    proc = subprocess.run(
        [*wrap, sys.executable, __file__, "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3600 if callgrind else 900,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            if "error" in result:
                raise RuntimeError(f"{cfg.name}: the crawl failed:\n{result['error']}")
            stats = result["stats"]
            if not stats.get("downloader/request_count") or stats.get("log_count/ERROR"):
                raise RuntimeError(
                    f"{cfg.name}: the crawl logged errors, stats {stats}:\n{proc.stderr[-3000:]}"
                )
            if not result["scrapy_dedup"].startswith(str(code)):
                raise RuntimeError(f"{cfg.name}: imported {result['scrapy_dedup']}, not {code}")
            if callgrind:
                found = re.search(r"Collected : (\d+)", proc.stderr)
                if found is None:
                    raise RuntimeError(f"{cfg.name}: no callgrind total:\n{proc.stderr[-3000:]}")
                result["instructions"] = int(found.group(1))
            return result
    raise RuntimeError(
        f"{cfg.name}: no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
        f"{proc.stderr[-3000:]}"
    )


def snapshot(dest: Path, source: Path = ROOT) -> Path:
    """Copy ``scrapy_dedup`` as it is now into ``dest``: every crawl of the run
    imports this copy, so edits made to the tree during the run do not mix in."""
    shutil.copytree(
        source / "scrapy_dedup",
        dest / "scrapy_dedup",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return dest


def describe_code(code: Path) -> str:
    """The commit, the files changed since, and a digest of the copied package."""
    digest = hashlib.sha256()
    for path in sorted((code / "scrapy_dedup").rglob("*.py")):
        digest.update(str(path.relative_to(code)).encode() + b"\0" + path.read_bytes())

    def git(*argv: str) -> str:
        try:
            return subprocess.run(
                ["git", *argv], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    changed = git("status", "--porcelain", "--", "scrapy_dedup").splitlines()
    head = git("rev-parse", "--short", "HEAD")
    return (
        f"scrapy_dedup copied at start from the working tree (HEAD {head}, "
        f"{len(changed)} files of scrapy_dedup/ changed since; sha256 of the copy's .py files "
        f"{digest.hexdigest()[:12]}): every crawl imports the copy"
    )


def connect_redis(uri: str) -> Any:
    import redis

    try:
        client = redis.Redis.from_url(uri, socket_timeout=2)
        client.ping()
    except Exception as exc:  # any failure: skip the Redis rows
        print(f"  redis     {uri} does not answer ({exc}): the Redis rows are skipped")
        return None
    return client


def delete_prefix(client: Any, prefix: str) -> int:
    names = list(client.scan_iter(match=f"{prefix}*", count=1000))
    for i in range(0, len(names), 1000):
        client.delete(*names[i : i + 1000])
    return len(names)


def ping_us(client: Any, count: int = 500) -> float:
    client.ping()
    t0 = time.perf_counter()
    for _ in range(count):
        client.ping()
    return (time.perf_counter() - t0) * 1e6 / count


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:.2f}x" if b else "-"


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.0f}-{max(values):.0f}" if len(values) > 1 else f"{values[0]:.0f}"


def report(rows: dict[str, Row]) -> None:
    from bench_url_stage import table

    plain, memory = rows.get("plain"), rows.get("memory")
    cpu_a = plain.median("cpu") if plain else None
    cpu_b = memory.median("cpu") if memory else None
    wall_a = plain.median("wall") if plain else None
    wall_b = memory.median("wall") if memory else None
    out = []
    for row in rows.values():
        requests = sorted(set(row.requests))
        n = statistics.median(row.requests)
        commits = (
            f"{statistics.median(row.commits) / n:.2f}" if row.config.store == "sqlite" else ""
        )
        trips = (
            f"{statistics.median(row.round_trips) / n:.2f}" if row.config.store == "redis" else ""
        )
        cpu, wall = row.median("cpu"), row.median("wall")
        out.append(
            [
                row.config.label,
                "/".join(str(r) for r in requests),
                str(int(statistics.median(row.items))),
                f"{cpu:.0f}",
                spread(row.cpu),
                f"{wall:.0f}",
                ratio(cpu, cpu_b),
                ratio(cpu, cpu_a),
                ratio(wall, wall_b),
                ratio(wall, wall_a),
                commits,
                trips,
                "yes" if True in row.frontier else "no",
            ]
        )
    header = [
        "config",
        "requests",
        "items",
        "CPU us/req",
        "CPU range",
        "wall us/req",
        "CPU vs (b)",
        "CPU vs (a)",
        "wall vs (b)",
        "wall vs (a)",
        "commits/req",
        "Redis trips/req",
        "frontier",
    ]
    print(table(header, out))

    def diff(x: str, y: str, what: str = "cpu") -> float | None:
        if x in rows and y in rows:
            return rows[x].median(what) - rows[y].median(what)
        return None

    lines = [
        ("the add-on with memory over plain Scrapy", diff("memory", "plain")),
        ("SQLite without the frontier over memory", diff("sqlite-nofrontier", "memory")),
        ("the frontier with SQLite (c - d)", diff("sqlite", "sqlite-nofrontier")),
        ("SQLite + frontier over memory (c - b)", diff("sqlite", "memory")),
        ("Redis without the frontier over memory", diff("redis-nofrontier", "memory")),
        ("the frontier with Redis (e - f)", diff("redis", "redis-nofrontier")),
        ("Redis + frontier over memory (e - b)", diff("redis", "memory")),
    ]
    lines = [(text, value) for text, value in lines if value is not None]
    if lines:
        print("   differences of the medians, CPU us per request:")
    for text, value in lines:
        print(f"     {text:45s} {value:+7.0f}")
    pairs = [
        ("memory", "plain", "(b)/(a)"),
        ("sqlite", "memory", "(c)/(b)"),
        ("sqlite", "sqlite-nofrontier", "(c)/(d)"),
        ("redis", "memory", "(e)/(b)"),
        ("redis", "redis-nofrontier", "(e)/(f)"),
    ]
    paired = [
        f"{label} "
        + ", ".join(f"{x / y:.2f}" for x, y in zip(rows[a].cpu, rows[b].cpu, strict=True))
        for a, b, label in pairs
        if a in rows and b in rows
    ]
    if paired:
        print("   CPU ratio in each round (the same round's crawls): " + "; ".join(paired))
    for name in ("sqlite", "sqlite-nofrontier"):
        if name in rows:
            row = rows[name]
            print(
                f"   {row.config.label}: {statistics.median(row.commits):.0f} commits for "
                f"{statistics.median(row.requests):.0f} requests"
            )


def write_json(path: str, argv: Sequence[str], rows: dict[str, Row]) -> None:
    """CPU and wall time per request of each configuration against plain
    Scrapy's, medians of the rounds (``--json``)."""
    from _results import Results

    results = Results("bench_frontier", argv)
    plain = rows.get("plain")
    for row in rows.values():
        if row is plain:
            continue
        for what, label in (("cpu", "CPU"), ("wall", "wall")):
            results.add(
                f"{row.config.label}: {label} per request, vs plain Scrapy",
                row.median(what),
                plain.median(what) if plain else None,
                unit="us",
            )
    results.write(path)


@dataclass
class Run:
    """Where this run's crawls find their site, code, stores and Redis."""

    site: Site
    code: Path
    tmp: Path
    redis_uri: str
    redis_prefix: str  # every Redis key written starts with it
    client: Any  # redis.Redis, or None
    profile_dir: Path | None = None  # --profile: one cProfile file per timed crawl
    _serial: int = 0

    def crawl(self, cfg: Config, start: str = "/", callgrind: bool = False) -> dict[str, Any]:
        """One crawl of ``cfg`` in a subprocess, its Redis keys and files deleted after."""
        self._serial += 1
        name = f"{self._serial}-{cfg.name}"
        prefix = f"{self.redis_prefix}-{name}"
        workdir = self.tmp / name
        profile = None
        if self.profile_dir is not None and not callgrind:
            profile = self.profile_dir / f"{name}.prof"
        try:
            return run_one(
                cfg,
                self.site,
                workdir,
                self.redis_uri,
                prefix,
                self.code,
                start,
                callgrind,
                profile,
            )
        finally:
            if self.client is not None and cfg.store == "redis":
                delete_prefix(self.client, prefix)
            shutil.rmtree(workdir, ignore_errors=True)


def measure_time(run: Run, configs: Sequence[Config], rounds: int) -> dict[str, Row]:
    """``rounds`` timed crawls of the whole site per configuration, interleaved."""
    rows = {c.name: Row(c) for c in configs}
    for rnd in range(rounds):
        for cfg in configs if rnd % 2 == 0 else configs[::-1]:
            t0 = time.perf_counter()
            res = run.crawl(cfg)
            stats = res["stats"]
            n = stats["downloader/request_count"]
            row = rows[cfg.name]
            row.cpu.append(res["cpu"] * 1e6 / n)
            row.wall.append(res["wall"] * 1e6 / n)
            row.requests.append(n)
            row.items.append(stats.get("item_scraped_count", 0))
            row.commits.append(res["commits"])
            row.round_trips.append(res["redis_commands"] + res["redis_pipelines"])
            row.frontier.add(res["frontier_active"])
            row.last_stats = stats
            if run.profile_dir is not None:
                row.profiles.append((run.profile_dir / f"{run._serial}-{cfg.name}.prof", n))
            print(
                f"   round {rnd + 1}  {cfg.name:18s} {n} requests  "
                f"cpu {res['cpu']:.2f} s  wall {res['wall']:.2f} s  "
                f"({time.perf_counter() - t0:.0f}s with start-up)",
                flush=True,
            )
    return rows


def report_profiles(rows: dict[str, Row], top: int = 25) -> None:
    """Where the add-on's time goes under cProfile (``--profile``): each
    configuration's rounds merged, in us per request. cProfile slows small
    Python calls more than C code, so these are shares, not the CPU table's
    numbers; plain Scrapy's total is the anchor."""
    import pstats

    totals: dict[str, float] = {}
    for name, row in rows.items():
        if not row.profiles:
            continue
        stats = pstats.Stats(*(str(path) for path, _ in row.profiles))
        n = sum(requests for _, requests in row.profiles)
        table = cast(dict[Any, Any], stats.stats)  # type: ignore[attr-defined]
        totals[name] = stats.total_tt * 1e6 / n  # type: ignore[attr-defined]
        own = [
            (func, tt, ct, calls)
            for func, (_, calls, tt, ct, _) in table.items()
            if f"{os.sep}scrapy_dedup{os.sep}" in func[0]
        ]
        if not own:
            print(f"\n   {name}: {totals[name]:.0f} us/req profiled in all")
            continue
        in_package = sum(tt for _, tt, _, _ in own) * 1e6 / n
        print(
            f"\n   {name}: {totals[name]:.0f} us/req profiled in all"
            + (f" ({totals[name] - totals['plain']:+.0f} over plain)" if "plain" in totals else "")
            + f"; {in_package:.0f} us/req inside scrapy_dedup's own functions (tottime)"
        )
        print(f"     {'function':58s} {'calls/req':>9s} {'own us/req':>10s} {'incl us/req':>11s}")
        for func, tt, ct, calls in sorted(own, key=lambda f: -f[2])[:top]:
            path, line, fname = func
            where = f"{path.rsplit('scrapy_dedup' + os.sep, 1)[-1]}:{line} {fname}"
            print(
                f"     {where[:58]:58s} {calls / n:9.2f} {tt * 1e6 / n:10.1f} {ct * 1e6 / n:11.1f}"
            )


def middleware_costs(code: Path, pages: int, seed: int, repeat: int) -> None:
    """``RelCanonicalMiddleware.process_response`` on every page of the
    ``--dup-free`` site, outside a crawl (no server: the bodies are built here),
    with the package copied in ``code``: CPU us per page in all, in reading
    the head (the parse: the encoding it is read with, and ``read_head``, timed
    alone on the same responses) and the rest (the bookkeeping). Each request
    first goes through ``CanonicalDupeFilter.request_seen`` untimed, as in a
    crawl. A fresh crawler and memory store per repeat; best of ``repeat``."""
    import gc

    sys.path.insert(0, str(code))
    import scrapy
    from scrapy.http import HtmlResponse
    from scrapy.utils.misc import build_from_crawler
    from scrapy.utils.test import get_crawler

    import scrapy_dedup
    from scrapy_dedup import CanonicalDupeFilter, RelCanonicalMiddleware
    from scrapy_dedup.html import read_head
    from scrapy_dedup.relcanonical import _declared_encoding
    from scrapy_dedup.state import CrawlState

    assert scrapy_dedup.__file__ is not None and scrapy_dedup.__file__.startswith(str(code))
    routes, _, _ = site_routes("", pages, seed, canonical=True)
    port = "8000"
    bodies = []
    for path, route in routes.items():
        reply = route("")
        headers = {k: v if isinstance(v, list) else [v] for k, v in reply.headers.items()}
        bodies.append(
            (f"http://127.0.0.1:{port}{path}", reply.body.replace("{port}", port), headers)
        )
    settings = {**ADDON, "DEDUP_STORE": "memory"}

    def responses() -> list[Any]:
        return [
            HtmlResponse(url, body=body.encode(), headers=headers, request=scrapy.Request(url))
            for url, body, headers in bodies
        ]

    def cpu(loop: Any) -> float:
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            loop()
            return time.process_time() - t0
        finally:
            gc.enable()

    totals: list[float] = []
    parses: list[float] = []
    verdicts: dict[str, int] = {}
    for _ in range(repeat):
        crawler = get_crawler(scrapy.Spider, settings_dict=settings)
        crawler.spider = scrapy.Spider("bench")
        dupefilter = build_from_crawler(CanonicalDupeFilter, crawler)
        middleware = build_from_crawler(RelCanonicalMiddleware, crawler)
        batch = responses()
        for response in batch:
            dupefilter.request_seen(response.request)
        limit = middleware.head_limit

        def run_all(batch: list[Any] = batch, middleware: Any = middleware) -> None:
            for response in batch:
                middleware.process_response(response.request, response)

        def parse_all(batch: list[Any] = batch, limit: int = limit) -> None:
            for response in batch:
                read_head(response.body, encoding=_declared_encoding(response, limit), limit=limit)

        parses.append(cpu(parse_all))
        totals.append(cpu(run_all))
        dupefilter.close("finished")
        buffered = getattr(middleware, "_stats", None)  # stats batched by the middleware
        if buffered is not None:
            buffered.flush()
        verdicts = {
            k: v for k, v in crawler.stats.get_stats().items() if k.startswith("dedup/canonical/")
        }
        CrawlState.of(crawler).close()
    n = len(bodies)
    total, parse = min(totals) * 1e6 / n, min(parses) * 1e6 / n
    print(
        f"RelCanonicalMiddleware.process_response on {n} pages declaring their own URL "
        f"(best of {repeat}, CPU us per page; code {code}):"
    )
    each = ", ".join(f"{t * 1e6 / n:.1f}" for t in totals)
    print(f"   in all        {total:7.1f}   (each repeat: {each})")
    print(f"   parse         {parse:7.1f}   (_declared_encoding + read_head alone)")
    print(f"   bookkeeping   {total - parse:7.1f}   ({(total - parse) / total:.0%} of the page)")
    print(f"   stats flushed so far: {verdicts}")


def measure_instructions(run: Run, configs: Sequence[Config], workers: int) -> None:
    """Each configuration crawled once under callgrind from ``/small/`` and once
    from ``/``; the difference of the instruction totals over the difference of
    the requests is what a request costs, start-up and warm-up cancelling out."""
    from bench_url_stage import table

    jobs = [(cfg, start) for cfg in configs for start in ("/small/", "/")]
    results: dict[tuple[str, str], dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run.crawl, cfg, start, True): (cfg, start) for cfg, start in jobs}
        for future in as_completed(futures):
            cfg, start = futures[future]
            res = results[cfg.name, start] = future.result()
            print(
                f"   {cfg.name:18s} from {start:8s} "
                f"{res['stats']['downloader/request_count']} requests  "
                f"{res['instructions'] / 1e9:.2f} G instructions",
                flush=True,
            )
    per: dict[str, float] = {}
    out = []
    for cfg in configs:
        small, big = results[cfg.name, "/small/"], results[cfg.name, "/"]
        n = big["stats"]["downloader/request_count"] - small["stats"]["downloader/request_count"]
        per[cfg.name] = (big["instructions"] - small["instructions"]) / n
    for cfg in configs:
        small, big = results[cfg.name, "/small/"], results[cfg.name, "/"]
        n = big["stats"]["downloader/request_count"] - small["stats"]["downloader/request_count"]
        commits = big["commits"] - small["commits"]
        trips = sum(big[k] - small[k] for k in ("redis_commands", "redis_pipelines"))
        out.append(
            [
                cfg.label,
                str(n),
                f"{per[cfg.name] / 1e6:.2f}",
                ratio(per[cfg.name], per.get("memory")),
                ratio(per[cfg.name], per.get("plain")),
                f"{commits / n:.2f}" if cfg.store == "sqlite" else "",
                f"{trips / n:.2f}" if cfg.store == "redis" else "",
                "yes" if big["frontier_active"] else "no",
            ]
        )
    print("\nInstructions per request (callgrind; the larger crawl minus the smaller)")
    header = ["config", "requests", "M instr/req", "vs (b)", "vs (a)"]
    print(table([*header, "commits/req", "Redis trips/req", "frontier"], out))
    for a, b, text in (
        ("memory", "plain", "the add-on with memory over plain Scrapy (b - a)"),
        ("sqlite-nofrontier", "memory", "SQLite without the frontier over memory (d - b)"),
        ("sqlite", "sqlite-nofrontier", "the frontier with SQLite (c - d)"),
        ("redis-nofrontier", "memory", "Redis without the frontier over memory (f - b)"),
        ("redis", "redis-nofrontier", "the frontier with Redis (e - f)"),
    ):
        if a in per and b in per:
            print(f"     {text:50s} {(per[a] - per[b]) / 1e6:+6.2f} M instructions per request")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, help="pages of the site (3000; 600 with --callgrind)")
    parser.add_argument("--rounds", type=int, default=3, help="crawls per configuration (3)")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis server URI")
    names = [c.name for c in CONFIGS]
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT_CONFIGS),
        help=f"configurations, comma-separated, or 'all' ({','.join(names)}; default: "
        "all but redis-nofrontier)",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count instructions under valgrind instead of timing (slow: ~16 min for all)",
    )
    parser.add_argument(
        "--dup-free",
        action="store_true",
        help="every page declares its own URL with <link rel=canonical> (as most sites do)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="cProfile each timed crawl into DIR and print where the add-on's time goes",
    )
    parser.add_argument(
        "--middleware",
        action="store_true",
        help="time RelCanonicalMiddleware alone on the --dup-free site's pages (seconds)",
    )
    parser.add_argument(
        "--code",
        metavar="DIR",
        help="copy scrapy_dedup from DIR/scrapy_dedup (another tree, for before/after) "
        "instead of this working tree",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    if args.pages is None:
        args.pages = CALLGRIND_PAGES if args.callgrind else 3000
    source = Path(args.code).resolve() if args.code else ROOT
    if args.middleware:
        tmp = Path(tempfile.mkdtemp(prefix="bench-frontier-"))
        try:
            middleware_costs(snapshot(tmp / "code", source), args.pages, args.seed, 7)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    wanted = (
        names if args.only == "all" else [n.strip() for n in args.only.split(",") if n.strip()]
    )
    unknown = set(wanted) - set(names)
    if unknown or args.pages < 30 or args.rounds < 1:
        parser.error(f"--pages >= 30, --rounds >= 1, --only from {names} ({sorted(unknown)})")
    if args.callgrind and (args.pages <= SMALL_PAGES or shutil.which("valgrind") is None):
        parser.error(f"--callgrind needs valgrind on PATH and --pages > {SMALL_PAGES}")

    import sqlite3

    import scrapy
    from bench_url_stage import _version, print_machine

    import scrapy_dedup

    started = time.perf_counter()
    print("scrapy-dedup frontier benchmark")
    print_machine()
    print(
        f"  versions  scrapy {scrapy.__version__}   twisted {_version('twisted')}   "
        f"redis-py {_version('redis')}   sqlite {sqlite3.sqlite_version}   "
        f"scrapy_dedup {_version('scrapy-dedup')} ({os.path.dirname(scrapy_dedup.__file__)})"
    )
    print(f"  load avg  {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-frontier-"))
    code = snapshot(tmp / "code", source)
    print(f"  code      {describe_code(code) if source == ROOT else f'copied from {source}'}")
    configs = [c for c in CONFIGS if c.name in wanted]
    client = None
    run_prefix = f"bench-frontier-{uuid.uuid4().hex[:12]}"
    if any(c.store == "redis" for c in configs):
        client = connect_redis(args.redis)
        if client is None:
            configs = [c for c in configs if c.store != "redis"]
        else:
            server = client.info("server")
            print(
                f"  redis     server {server['redis_version']} at {args.redis}, keys under "
                f"'{run_prefix}*' (deleted after each crawl); PING round trip "
                f"{ping_us(client):.0f} us"
            )

    canonical = args.dup_free
    routes, lists, articles = site_routes("", args.pages, args.seed, canonical)
    extra, _, _ = site_routes("/warm", WARM_PAGES, args.seed + 1, canonical)
    if args.callgrind:
        extra.update(site_routes("/small", SMALL_PAGES, args.seed + 2, canonical)[0])
    site = Site({**routes, **extra}).start()
    links = sum(r("").body.count("<a href=") for r in routes.values())
    print(
        f"  site      {len(routes)} pages on 127.0.0.1:{site.port} (1 home, {lists} lists, "
        f"{articles} articles, one item each); {links} links, "
        f"{1 - (len(routes) - 1) / links:.0%} of them repeats"
        + ("; every page declares its own URL rel=canonical" if canonical else "")
    )
    how = (
        f"each configuration once under callgrind, from / and from a {SMALL_PAGES}-page /small/"
        if args.callgrind
        else f"{args.rounds} rounds, configurations interleaved, median reported"
    )
    print(
        f"  crawl     CONCURRENT_REQUESTS 16 (16 per domain), LOG_LEVEL ERROR; {how}; each "
        f"crawl in a fresh process after a {WARM_PAGES}-page warm-up crawl"
    )
    print()

    profile_dir = None
    if args.profile:
        profile_dir = Path(args.profile).resolve()
        profile_dir.mkdir(parents=True, exist_ok=True)
    run = Run(site, code, tmp, args.redis, run_prefix, client, profile_dir)
    rows: dict[str, Row] = {}
    try:
        if args.callgrind:
            measure_instructions(run, configs, os.cpu_count() or 1)
        else:
            rows = measure_time(run, configs, args.rounds)
    finally:
        site.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if client is not None:
            left = delete_prefix(client, run_prefix)
            if left:
                print(f"   (cleanup: {left} Redis keys under '{run_prefix}*' deleted)")

    if rows:
        print(
            f"\nPer request (median of {args.rounds}; CPU range = fastest-slowest round, us/req)"
        )
        report(rows)
        if args.json:
            write_json(args.json, sys.argv[1:] if argv is None else argv, rows)
        if profile_dir is not None:
            print(f"\nWhere the time goes under cProfile (files in {profile_dir})")
            report_profiles(rows)
    print(
        f"\n(wall {time.perf_counter() - started:.0f}s; load avg at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
