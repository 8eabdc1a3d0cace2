"""What later runs skip and fetch, on every persistent store, with real crawls:
start pages, new pages found by a recrawl, failed pages, DEDUP_RECRAWL_AFTER,
forgetting URLs, and kill -9 at several moments in each configuration."""

from __future__ import annotations

import json
import logging
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.settings import Settings
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler

from scrapy_dedup import forget
from scrapy_dedup.config import DedupConfig
from scrapy_dedup.frontier import DedupFrontierMiddleware
from scrapy_dedup.keys import RequestKeys
from scrapy_dedup.serialize import request_to_json
from scrapy_dedup.state import resolve_sqlite_path
from scrapy_dedup.stores import open_store
from tests.conftest import crawl
from tests.crawl_worker import NewsSpider, read_items
from tests.site import Reply, Site, article, store_stage_routes
from tests.test_store_crawls import ADDON, OTHER_TEXT, _names, _path, _worker

HOME_TEXT = " ".join(
    f"Welcome note {i}: the newsroom of the coastal gazette reports on harbour {i * 3} "
    "and the ferries that call there"
    for i in range(10)
)
THREE_SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter",
    "ITEM_PIPELINES": {"scrapy_dedup.ContentDedupPipeline": 350},
    "DOWNLOADER_MIDDLEWARES": {"scrapy_dedup.RelCanonicalMiddleware": 575},
}


def home(*extra_links: str) -> Reply:
    """A start page with content of its own (it gives an item) and links."""
    return article("Home", HOME_TEXT, "/list/1", "/article/chain-1", *extra_links)


def _store_settings(kind: str, tmp_path: Path, redis_url: str, prefix: str) -> dict[str, Any]:
    if kind == "sqlite":
        return {"DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
    if kind == "redis":
        return {"DEDUP_STORE": redis_url, "DEDUP_REDIS_PREFIX": prefix}
    return {"JOBDIR": str(tmp_path / "job")}


@pytest.fixture
def blog(fresh_site: Site) -> Iterator[tuple[Site, dict[str, str]]]:
    """The news site of tests.site.store_stage_routes, its home page an article."""
    routes, content = store_stage_routes()
    fresh_site.routes.update(routes)
    fresh_site.routes["/"] = lambda q: home()
    content["/"] = "home"
    yield fresh_site, content


def _publish(site: Site, content: dict[str, str]) -> None:
    """A new article, linked from the home page and from the last list page."""
    content["/article/new"] = "fresh"
    site.routes["/article/new"] = lambda q: article("Fresh", OTHER_TEXT, "/")
    site.routes["/"] = lambda q: home("/article/new")
    old_list = site.routes["/list/5"]

    def list_5(q: str) -> Reply:
        reply = old_list(q)
        return replace(
            reply, body=reply.body.replace("</ul>", '<li><a href="/article/new">n</a></li></ul>')
        )

    site.routes["/list/5"] = list_5


# -- Recrawls find new pages ----------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
@deferred_f_from_coro_f
async def test_a_recrawl_fetches_the_start_page_and_lists_and_finds_the_new_article(
    blog: tuple[Site, dict[str, str]],
    tmp_path: Path,
    redis_url: str,
    redis_prefix: str,
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    site, content = blog
    settings = {**ADDON, **_store_settings(kind, tmp_path, redis_url, redis_prefix)}
    first = await crawl(NewsSpider, settings, start=site.url("/"))
    assert sorted(_names(first.items, content)) == sorted(set(content.values()))

    site.reset()
    _publish(site, content)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        second = await crawl(NewsSpider, settings, start=site.url("/"))
    fetched = [p.split("?")[0] for p in site.fetched()]
    # The start page gave an item, and is fetched all the same: it is how a
    # recrawl finds new links. Lists gave no item: fetched again.
    assert fetched.count("/") == 1
    assert sorted(p for p in fetched if p.startswith("/list/")) == [
        f"/list/{n}" for n in range(1, 6)
    ]
    assert "/article/new" in fetched
    assert [p for p in fetched if p.startswith("/article/") and p != "/article/new"] == []
    assert _names(second.items, content) == ["fresh"]
    assert second.stats["dedup/url/start_refetched"] == 1
    # Skipped because an earlier run kept them, and the stats say so.
    assert second.stats["dedup/url/filtered/previous_run"] >= 40
    assert second.stats.get("dedup/url/filtered/exact", 0) < 10
    # One line at start says what earlier runs left and how to start over.
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Dedup store"))
    assert "pages kept" in line and "DEDUP_RESET" in line
    assert " 0 pages kept" not in line

    # A third run with nothing new fetches the start page and the lists only.
    site.reset()
    third = await crawl(NewsSpider, settings, start=site.url("/"))
    assert third.items == []
    assert {p.split("?")[0] for p in site.fetched()} == {"/", *[f"/list/{n}" for n in range(1, 6)]}


@deferred_f_from_coro_f
async def test_jobdir_resume_after_a_pause_fetches_nothing_twice(
    blog: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """JOBDIR is pause and resume of one crawl: every key seen is kept, and
    the frontier is only fed back after a crash (Scrapy's queue holds it)."""
    site, content = blog
    settings = {**ADDON, "JOBDIR": str(tmp_path / "job"), "CONCURRENT_REQUESTS": 1}
    first = await crawl(NewsSpider, {**settings, "CLOSESPIDER_ITEMCOUNT": 10}, start=site.url("/"))
    assert first.stats["finish_reason"] == "closespider_itemcount"
    fetched = site.fetched()
    site.reset()
    second = await crawl(NewsSpider, settings, start=site.url("/"))
    assert second.stats["finish_reason"] == "finished"
    assert "dedup/frontier/restored" not in second.stats
    pages = [p.split("?")[0] for p in fetched + site.fetched()]
    assert [p for p, n in Counter(pages).items() if n > 1] in ([], ["/"])
    assert set(_names(first.items + second.items, content)) == set(content.values())


# -- kill -9, in every configuration ----------------------------------------------


@dataclass
class FeedWatch:
    """A killed run's feed file as the test saw it: its bytes reach the file
    only at checkpoints (scrapy_dedup.durable), so each size seen is one
    checkpoint's write, first seen at a time (polled every 2 ms)."""

    path: Path | None
    seen: list[tuple[float, int]] = field(default_factory=list)  # (time first seen, size)
    killed_at: float | None = None

    def look(self) -> None:
        if self.path is None or not self.path.exists():
            return
        size = self.path.stat().st_size
        if size and (not self.seen or self.seen[-1][1] != size):
            self.seen.append((time.monotonic(), size))

    def last_write(self) -> tuple[int, float | None]:
        """Where the last checkpoint's bytes start in the file, and when the
        file was first seen whole (None: the kill came before the poll saw
        that write)."""
        assert self.path is not None
        final = self.path.stat().st_size if self.path.exists() else 0
        start = max((size for _, size in self.seen if size < final), default=0)
        whole = next((at for at, size in self.seen if size == final), None)
        return start, whole


def _kill_after(
    proc: subprocess.Popen[str],
    site: Site,
    fetched: int,
    *,
    may_finish: bool = False,
    feed: Path | None = None,
    writes: int = 0,
    wait: float = 0.0,
) -> FeedWatch:
    """Kills the crawl (kill -9) once the site has served ``fetched`` requests
    (and the ``feed`` file was written at ``writes`` checkpoints), ``wait``
    seconds later. A crawl that ended first fails the test unless
    ``may_finish``. The process and its pipe are reaped either way. Returns
    what was seen of the feed file."""
    watch = FeedWatch(feed)
    deadline = time.monotonic() + 60
    due = None
    while time.monotonic() < deadline and proc.poll() is None:
        watch.look()
        now = time.monotonic()
        if due is None and len(site.fetched()) >= fetched and len(watch.seen) >= writes:
            due = now + wait
        if due is not None and now >= due:
            break
        time.sleep(0.002)
    ended = proc.poll() is not None
    if not ended:
        watch.look()
        watch.killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
    log, _ = proc.communicate(timeout=30)
    assert may_finish or not ended, f"the crawl ended before it could be killed: {log[-3000:]}"
    return watch


#: A checkpoint's sync and the commit of its pages take about a millisecond;
#: a kill this long after the feed was written finds them committed (with room
#: for a machine that stalls the crawl for a while).
SYNC_MARGIN = 0.15


def _feed_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The whole lines of a feed file (a kill -9 may cut the last one), each
    with the offset it starts at."""
    if not path.exists():
        return []
    lines, offset = [], 0
    *whole, _cut = path.read_bytes().split(b"\n")
    for line in whole:
        lines.append((offset, json.loads(line)))
        offset += len(line) + 1
    return lines


def _written_again(
    runs: list[tuple[FeedWatch | None, Path]], content: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The feeds of runs in order (a watch for each killed run, None for the
    last): the items a later run wrote again, and what breaks the guarantee.

    An item is written again only if the kill came between the checkpoint
    that wrote it to the file and the commit of its page, right after: only
    items of the killed run's last checkpoint, and only if the kill came
    within :data:`SYNC_MARGIN` of that write."""
    names = [[content[_path(item["url"])] for _, item in _feed_lines(path)] for _, path in runs]
    again: list[str] = []
    problems: list[str] = []
    for n, (watch, path) in enumerate(runs):
        if watch is None or watch.killed_at is None:
            continue
        later = {name for run in names[n + 1 :] for name in run}
        repeated = [(off, content[_path(i["url"])]) for off, i in _feed_lines(path)]
        repeated = [(off, name) for off, name in repeated if name in later]
        again += [name for _, name in repeated]
        start, whole = watch.last_write()
        early = [name for off, name in repeated if off < start]
        if early:
            problems.append(f"run {n + 1}: written before its last checkpoint, again: {early}")
        if repeated and whole is not None and watch.killed_at - whole > SYNC_MARGIN:
            problems.append(
                f"run {n + 1}: killed {watch.killed_at - whole:.3f} s after its last "
                f"checkpoint's write, its items written again: {[name for _, name in repeated]}"
            )
    return again, problems


CONFIGS = {
    "addon+sqlite": lambda tmp, url, prefix: {**ADDON, "DEDUP_STORE": f"sqlite:///{tmp}/d.db"},
    "addon+redis": lambda tmp, url, prefix: {
        **ADDON,
        "DEDUP_STORE": url,
        "DEDUP_REDIS_PREFIX": prefix,
    },
    "addon+scrapy-redis": lambda tmp, url, prefix: {
        **ADDON,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "REDIS_URL": url,
        "SCHEDULER_QUEUE_KEY": f"{prefix}:%(spider)s:requests",
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
        "DEDUP_STORE": url,
        "DEDUP_REDIS_PREFIX": prefix,
    },
    "addon+jobdir": lambda tmp, url, prefix: {**ADDON, "JOBDIR": f"{tmp}/job"},
    "three+sqlite": lambda tmp, url, prefix: {
        **THREE_SETTINGS,
        "DEDUP_STORE": f"sqlite:///{tmp}/d.db",
    },
}


def _feed(tmp_path: Path, run: int) -> dict[str, Any]:
    """Scrapy's own feed export, a file per run (what `-o run1.jsonl` sets)."""
    return {"FEEDS": {str(tmp_path / f"feed{run}.jsonl"): {"format": "jsonlines"}}}


def _feed_items(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a feed file (a kill -9 may cut the last one)."""
    if not path.exists():
        return []
    *whole, _cut = path.read_bytes().split(b"\n")
    return [json.loads(line) for line in whole]


@pytest.mark.parametrize("feed", [False, True], ids=["own-pipeline", "and-feed"])
@pytest.mark.parametrize("fetched", [3, 25])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_kill_9_then_the_same_command_loses_no_page(
    fresh_site: Site,
    tmp_path: Path,
    redis_url: str,
    redis_prefix: str,
    config: str,
    fetched: int,
    feed: bool,
) -> None:
    """Items are written by a pipeline that writes each at once (the
    worker's file), and with ``feed`` by Scrapy's feed export too (-o)."""
    routes, content = store_stage_routes(delay=0.04)
    fresh_site.routes.update(routes)
    fresh_site.routes["/"] = lambda q: home()
    content["/"] = "home"
    settings = {**CONFIGS[config](tmp_path, redis_url, redis_prefix), "CONCURRENT_REQUESTS": 2}
    if feed:
        # Pages that gave items wait for the feed's checkpoint: after a kill
        # those of the last checkpoint period are fetched again.
        settings["DEDUP_FEED_CHECKPOINT"] = 0.1
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"

    watch = _kill_after(
        _worker({**settings, **(_feed(tmp_path, 1) if feed else {})}, start, items),
        fresh_site,
        fetched,
        feed=tmp_path / "feed1.jsonl" if feed else None,
    )
    first = [p.split("?")[0] for p in fresh_site.fetched()]
    emitted = len(items.read_text().splitlines()) if items.exists() else 0

    fresh_site.reset()
    proc = _worker({**settings, **(_feed(tmp_path, 2) if feed else {})}, start, items)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log
    second = [p.split("?")[0] for p in fresh_site.fetched()]

    # Nothing lost: every content came out of one run or the other, and
    # every page was fetched by one run or the other.
    kept = read_items(items)
    assert set(_names(kept, content)) == set(content.values()), log
    assert set(first) | set(second) == set(routes), log
    fed = _feed_items(tmp_path / "feed1.jsonl") + _feed_items(tmp_path / "feed2.jsonl")
    if feed:
        # The feed files on disk too (kill -9 loses what a feed buffers).
        assert set(_names(fed, content)) == set(content.values()), log
    if config == "three+sqlite":
        # Without the frontier nothing was recorded for later runs, and the
        # log said what to add.
        assert "keeps pages for later runs only with DedupFrontierMiddleware" in log
        assert "previous_run" not in log
        return
    # Repeats are bounded by the pages in flight at the kill, not by a timer:
    # an item comes out twice only if its page was being processed then. In
    # flight: the 2 downloads and the responses Scrapy's scraper holds; a
    # second of work would be about 40 pages here.
    # With a feed, add the pages of one checkpoint period (0.1 s: 2 pages).
    bound = 6 + 4 * feed
    doubled = [name for name, n in Counter(_names(kept, content)).items() if n > 1]
    assert len(doubled) <= bound, (doubled, emitted, log)
    refetched_articles = {p for p in set(first) & set(second) if p.startswith("/article/")}
    assert len(refetched_articles) <= bound, (refetched_articles, log)
    if feed:
        # The feed writes an item again only after a kill between a
        # checkpoint's write of the file and the commit of its pages.
        runs = [(watch, tmp_path / "feed1.jsonl"), (None, tmp_path / "feed2.jsonl")]
        again, problems = _written_again(runs, content)
        assert problems == [], (again, watch.seen, watch.killed_at, log)


# -- Failed pages are tried again by later runs ----------------------------------


def _chain_site(site: Site, content: dict[str, str], length: int = 30) -> None:
    """A home page with content, then a chain of articles each reachable only
    from the one before."""
    from tests.text.neardup_corpus import documents

    texts = documents(min_words=80, max_words=150, seed=11)
    site.routes["/"] = lambda q: article("Home", HOME_TEXT, "/flaky/1")
    content["/"] = "home"
    for n in range(1, length + 1):
        links = (f"/flaky/{n + 1}",) if n < length else ()
        site.routes[f"/flaky/{n}"] = lambda q, n=n, links=links: article(
            f"Flaky {n}", texts[n], *links
        )
        content[f"/flaky/{n}"] = f"flaky{n}"


@pytest.mark.parametrize("failure", ["503", "callback"])
@pytest.mark.parametrize("kind", ["sqlite", "redis", "jobdir"])
@deferred_f_from_coro_f
async def test_a_page_that_failed_is_fetched_by_the_next_run(
    fresh_site: Site, tmp_path: Path, redis_url: str, redis_prefix: str, kind: str, failure: str
) -> None:
    content: dict[str, str] = {}
    _chain_site(fresh_site, content)
    good = fresh_site.routes["/flaky/7"]
    settings = {**ADDON, **_store_settings(kind, tmp_path, redis_url, redis_prefix)}
    first_settings = dict(settings)
    if failure == "503":
        fresh_site.routes["/flaky/7"] = lambda q: Reply(status=503, body="busy")
    else:  # the spider has a bug there, fixed before the next run
        first_settings["WORKER_FAIL_PATHS"] = ["/flaky/7"]
    first = await crawl(NewsSpider, first_settings, start=fresh_site.url("/"))
    assert first.stats["finish_reason"] == "finished"
    assert first.stats["dedup/frontier/failed"] == 1
    assert len(first.items) == 7  # home and /flaky/1-6

    fresh_site.routes["/flaky/7"] = good
    fresh_site.reset()
    second = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert second.stats["dedup/frontier/restored"] == 1
    assert sorted(_names(first.items + second.items, content)) == sorted(content.values())
    # The chain is done: a third run fetches only the start page.
    fresh_site.reset()
    third = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert [p for p in fresh_site.fetched()] == ["/"]
    assert third.items == [] and "dedup/frontier/restored" not in third.stats


@deferred_f_from_coro_f
async def test_a_page_that_always_fails_is_given_up_after_the_retries(
    fresh_site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    content: dict[str, str] = {}
    _chain_site(fresh_site, content, length=3)
    fresh_site.routes["/flaky/2"] = lambda q: Reply(status=503, body="gone for good")
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{tmp_path}/d.db", "DEDUP_FRONTIER_RETRIES": 2}
    runs = []
    for _ in range(4):
        fresh_site.reset()
        runs.append(await crawl(NewsSpider, settings, start=fresh_site.url("/")))
        runs[-1].fetched = fresh_site.fetched()  # type: ignore[attr-defined]
    assert [r.stats.get("dedup/frontier/restored", 0) for r in runs] == [0, 1, 1, 0]
    assert [r.stats.get("dedup/frontier/given_up", 0) for r in runs] == [0, 0, 0, 1]
    assert ["/flaky/2" in r.fetched for r in runs] == [True, True, True, False]  # type: ignore[attr-defined]
    assert "Giving up 1 requests" in caplog.text and "/flaky/2" in caplog.text


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
@deferred_f_from_coro_f
async def test_a_failed_page_keyed_otherwise_by_the_next_run_is_restored_once(
    fresh_site: Site, tmp_path: Path, redis_url: str, redis_prefix: str, kind: str
) -> None:
    """The URL rules changed between runs: the failed page's row was written
    under its old key, and is settled under its new one."""
    content: dict[str, str] = {}
    _chain_site(fresh_site, content, length=3)
    good = fresh_site.routes["/flaky/2"]
    fresh_site.routes["/flaky/2"] = lambda q: Reply(status=503, body="busy")
    settings = {**ADDON, **_store_settings(kind, tmp_path, redis_url, redis_prefix)}
    first = await crawl(
        NewsSpider, {**settings, "DEDUP_URL_RULES": {"scheme": False}}, start=fresh_site.url("/")
    )
    assert first.stats["dedup/frontier/failed"] == 1

    fresh_site.routes["/flaky/2"] = good
    fresh_site.reset()
    second = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert second.stats["dedup/frontier/restored"] == 1
    assert "/flaky/2" in fresh_site.fetched() and "/flaky/3" in fresh_site.fetched()
    fresh_site.reset()
    third = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert "dedup/frontier/restored" not in third.stats
    assert fresh_site.fetched() == ["/"]


class _ChainSpider(Spider):
    name = "chain"

    def parse(self, response: Any) -> None:
        pass


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_rows_moved_to_new_keys_survive_when_one_row_takes_anothers_old_key(
    tmp_path: Path, redis_url: str, redis_prefix: str, kind: str
) -> None:
    """The new rules give /p/ the key the old ones gave /p?sid=1, and /p?sid=1
    a key of its own: both rows move, and both are there for the next run even
    if this one is killed before it fetches anything."""
    store_settings = _store_settings(kind, tmp_path, redis_url, redis_prefix)
    frontier = {"SPIDER_MIDDLEWARES": {"scrapy_dedup.DedupFrontierMiddleware": 10}}
    old_rules = {"DEDUP_URL_STRIP_PARAMS": ["sid"], "DEDUP_URL_RULES": {"trailing_slash": False}}

    def keys(settings: dict[str, Any]) -> RequestKeys:
        return RequestKeys(DedupConfig.from_settings(Settings(settings)).canonicalizer())

    spider = _ChainSpider()
    old, new = keys(old_rules), keys({})
    # Redis hands rows back by the key's top byte: find a pair where the row
    # that moves comes first.
    for i in range(200):
        x = Request(f"https://h.example/p{i}/", callback=spider.parse)
        y = Request(f"https://h.example/p{i}?sid=1", callback=spider.parse)
        k1, k2 = old.compute(x).key, old.compute(y).key
        assert new.compute(x).key == k2 and new.compute(y).key not in (k1, k2)
        if kind == "sqlite" or (k1 >> 56) < (k2 >> 56):
            break
    store = open_store(store_settings.get("DEDUP_STORE", ""), "chain", prefix=redis_prefix)
    store.add_pending(k1, request_to_json(x, spider)[0] or "")
    store.add_pending(k2, request_to_json(y, spider)[0] or "")
    store.flush()
    store.close()

    crawler = get_crawler(_ChainSpider, {**store_settings, **frontier})
    crawler.spider = spider
    middleware = DedupFrontierMiddleware(crawler)
    assert sorted(r.url for r in middleware._restored()) == sorted([x.url, y.url])
    middleware.store.flush()  # and the run is killed before fetching anything
    middleware.store.close()

    store = open_store(store_settings.get("DEDUP_STORE", ""), "chain", prefix=redis_prefix)
    try:
        if kind == "redis":
            store.new_run = True  # type: ignore[attr-defined]
        rows = {json.loads(text)["url"] for _, text in store.pending_requests()}
        assert rows == {x.url, y.url}
    finally:
        store.clear()
        store.close()


# -- DEDUP_RECRAWL_AFTER and forgetting URLs -----------------------------------------


class ProjectFingerprinter(RequestFingerprinter):
    """A project's own request fingerprinter (scrapy-zyte-api and
    scrapy-playwright install theirs): it decides the keys of a crawl."""


class FingerprinterAddon:
    """An add-on that installs its fingerprinter, as scrapy-zyte-api's does."""

    def update_settings(self, settings: Settings) -> None:
        settings.set("REQUEST_FINGERPRINTER_CLASS", ProjectFingerprinter, "addon")


# A custom fingerprinter keys pages by its fingerprints: DEDUP_RECRAWL_AFTER
# and forget() must find them under those, however it was set.
STORES_AND_FINGERPRINTERS = [
    ("sqlite", None),
    ("redis", None),
    ("sqlite", "setting"),
    ("sqlite", "addon"),
]


def _fingerprinter_settings(how: str | None) -> dict[str, Any]:
    if how == "setting":
        return {"REQUEST_FINGERPRINTER_CLASS": ProjectFingerprinter}
    if how == "addon":
        return {"ADDONS": {**ADDON["ADDONS"], FingerprinterAddon: 0}}
    return {}


@pytest.mark.parametrize(("kind", "fingerprinter"), STORES_AND_FINGERPRINTERS)
@deferred_f_from_coro_f
async def test_recrawl_after_fetches_kept_pages_again_and_compares_their_text(
    blog: tuple[Site, dict[str, str]],
    tmp_path: Path,
    redis_url: str,
    redis_prefix: str,
    kind: str,
    fingerprinter: str | None,
) -> None:
    site, _ = blog
    settings = {
        **ADDON,
        **_store_settings(kind, tmp_path, redis_url, redis_prefix),
        **_fingerprinter_settings(fingerprinter),
    }
    first = await crawl(NewsSpider, {**settings, "DEDUP_RECRAWL_AFTER": "1s"}, start=site.url("/"))
    kept_pages = {_path(item["url"]) for item in first.items}
    time.sleep(2.1)  # times are kept to the second
    changed = site.routes["/article/2-2"]
    site.routes["/article/2-2"] = lambda q: replace(
        changed(q), body=changed(q).body.replace("<p>", "<p>Update: a correction was added. ")
    )
    site.reset()
    second = await crawl(
        NewsSpider, {**settings, "DEDUP_RECRAWL_AFTER": "1s"}, start=site.url("/")
    )
    refetched = {p.split("?")[0] for p in site.fetched()}
    assert kept_pages <= refetched  # every kept page's time had passed
    assert [_path(item["url"]) for item in second.items] == ["/article/2-2"]
    assert second.stats["dedup/items/changed"] == 1
    assert second.stats["dedup/items/unchanged"] == len(kept_pages) - 1
    # With a longer period the pages just kept again are skipped.
    site.reset()
    third = await crawl(NewsSpider, {**settings, "DEDUP_RECRAWL_AFTER": "1h"}, start=site.url("/"))
    assert not [p for p in site.fetched() if p.startswith("/article/")]
    assert third.items == []


@pytest.mark.parametrize(("kind", "fingerprinter"), STORES_AND_FINGERPRINTERS)
@deferred_f_from_coro_f
async def test_forgotten_urls_are_fetched_by_the_next_run(
    blog: tuple[Site, dict[str, str]],
    tmp_path: Path,
    redis_url: str,
    redis_prefix: str,
    kind: str,
    fingerprinter: str | None,
) -> None:
    site, _ = blog
    settings = {
        **ADDON,
        **_store_settings(kind, tmp_path, redis_url, redis_prefix),
        **_fingerprinter_settings(fingerprinter),
    }
    await crawl(NewsSpider, settings, start=site.url("/"))
    # Any spelling of the URL: it is canonicalized like the crawl's requests.
    gone = forget(
        [site.url("/article/1-1?utm_source=mail#top")], namespace="news", settings=settings
    )
    assert len(gone) == 1
    if kind == "sqlite":  # a prefix of the URLs pages were kept under
        by_prefix = forget(prefix=site.url("/article/3-"), namespace="news", settings=settings)
        assert len(by_prefix) == 8
    else:  # Redis knows the URLs of kept texts
        by_prefix = forget(prefix=site.url("/article/3-"), namespace="news", settings=settings)
        assert len(by_prefix) >= 6
    site.reset()
    second = await crawl(NewsSpider, settings, start=site.url("/"))
    fetched = {p.split("?")[0] for p in site.fetched()}
    assert "/article/1-1" in fetched and "/article/3-1" in fetched
    assert "/article/2-1" not in fetched
    # Unchanged pages: their items are dropped as the same text again.
    assert second.items == []
    dropped = {k: v for k, v in second.stats.items() if k.startswith("dedup/items")}
    assert second.stats["dedup/items/unchanged"] >= 5, (
        dropped
    )  # 3-1 to 3-6, but a text kept first elsewhere


def test_scrapy_dedup_forget_on_the_command_line(
    blog: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    site, _ = blog
    db = tmp_path / "dedup.db"
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{db}", "CONCURRENT_REQUESTS": 4}
    items = tmp_path / "items.jsonl"
    log, _ = _worker(settings, site.url("/", host="127.0.0.1"), items).communicate(timeout=120)
    assert "Dedup store" in log
    url = site.url("/article/1-2", host="127.0.0.1")
    command = [
        sys.executable,
        "-m",
        "scrapy",
        "dedup",
        "forget",
        "news",
        url,
        "-s",
        f"DEDUP_STORE=sqlite:///{db}",
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"forgotten: {url}" in done.stdout and "1 pages forgotten" in done.stdout
    with closing(sqlite3.connect(db)) as conn:
        kept_at = dict(conn.execute("SELECT url, kept_at FROM urls").fetchall())
    assert kept_at[url] == -1  # marked: the next run fetches it and compares its text
    assert kept_at[site.url("/article/1-1", host="127.0.0.1")] > 0
    # A namespace in use (a crawl running) or a bad store: a clear error, status 1.
    bad = subprocess.run(
        [*command[:-1], "DEDUP_STORE=redis://127.0.0.1:1/0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "cannot reach the dedup store" in bad.stderr


# -- Where relative SQLite paths go ---------------------------------------------------


def test_a_relative_sqlite_path_lives_in_the_project_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = demo.settings\n")
    (tmp_path / "demo" / "spiders").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "demo" / "spiders")  # wherever the command runs from
    monkeypatch.delenv("SCRAPY_PROJECT", raising=False)
    resolved = resolve_sqlite_path("sqlite:///state/dedup.db")
    assert resolved == f"sqlite:///{tmp_path}/.scrapy/state/dedup.db"
    assert resolve_sqlite_path("sqlite:////abs/x.db") == "sqlite:////abs/x.db"
    assert resolve_sqlite_path("redis://h/0") == "redis://h/0"
    assert resolve_sqlite_path("sqlite:///:memory:") == "sqlite:///:memory:"


@deferred_f_from_coro_f
async def test_requests_robots_txt_refuses_are_not_kept_for_later_runs(
    fresh_site: Site, tmp_path: Path
) -> None:
    content: dict[str, str] = {}
    _chain_site(fresh_site, content, length=6)
    fresh_site.routes["/robots.txt"] = lambda q: Reply(
        body="User-agent: *\nDisallow: /flaky/4\n", headers={"Content-Type": "text/plain"}
    )
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{tmp_path}/d.db", "ROBOTSTXT_OBEY": True}
    first = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert first.stats["dedup/frontier/refused"] == 1
    assert "/flaky/4" not in fresh_site.fetched()
    fresh_site.reset()
    second = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert "dedup/frontier/restored" not in second.stats  # refused again would be pointless


@deferred_f_from_coro_f
async def test_runs_cut_short_do_not_use_up_the_retries_of_what_they_never_fetched(
    fresh_site: Site, tmp_path: Path
) -> None:
    """Retries count downloads, not restores: runs stopped early (a time
    slice, CLOSESPIDER_*) leave most of the frontier untouched."""
    content: dict[str, str] = {}
    _chain_site(fresh_site, content, length=4)
    fresh_site.routes["/"] = lambda q: article(
        "Home",
        HOME_TEXT,
        *(f"/flaky/{n}" for n in range(1, 5)),
        *(f"/more/{n}" for n in range(20)),
    )
    for n in range(20):
        fresh_site.routes[f"/more/{n}"] = lambda q, n=n: article(f"More {n}", f"{OTHER_TEXT} {n}")
    settings = {
        **ADDON,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/d.db",
        "DEDUP_FRONTIER_RETRIES": 1,
        "CONCURRENT_REQUESTS": 1,
    }
    fetched: list[str] = []
    for _ in range(4):  # four short runs of about 6 pages each
        fresh_site.reset()
        short = await crawl(
            NewsSpider, {**settings, "CLOSESPIDER_PAGECOUNT": 6}, start=fresh_site.url("/")
        )
        assert short.stats.get("dedup/frontier/given_up", 0) == 0
        fetched += fresh_site.fetched()
    fresh_site.reset()
    last = await crawl(NewsSpider, settings, start=fresh_site.url("/"))
    assert last.stats.get("dedup/frontier/given_up", 0) == 0
    fetched += fresh_site.fetched()
    assert {p for p in fetched} >= {*(f"/more/{n}" for n in range(20)), "/flaky/4"}


def test_runs_killed_while_a_slow_page_is_in_flight_do_not_use_up_its_retries(
    fresh_site: Site, tmp_path: Path
) -> None:
    """A request in flight at a kill -9 was never downloaded: the retries count
    downloads that completed, so the slow page and the chain behind it (which
    only it links to) are fetched however many runs were killed while it was
    on its way."""
    content: dict[str, str] = {}
    _chain_site(fresh_site, content, length=8)
    fast = fresh_site.routes["/flaky/3"]

    def slow(q: Any) -> Reply:
        time.sleep(4)
        return fast(q)

    fresh_site.routes["/flaky/3"] = slow
    settings = {
        **ADDON,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/d.db",
        "DEDUP_FRONTIER_RETRIES": 1,
        "DOWNLOAD_TIMEOUT": 30,
    }
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"
    logs = []
    for _ in range(3):  # three runs, each killed while /flaky/3 is on its way
        fresh_site.reset()
        proc = _worker(settings, start, items)
        deadline = time.monotonic() + 60
        while "/flaky/3" not in fresh_site.fetched() and time.monotonic() < deadline:
            if proc.poll() is not None:  # it never asked for /flaky/3
                break
            time.sleep(0.01)
        time.sleep(0.5)
        proc.kill()
        logs.append(proc.communicate(timeout=30)[0])
    fresh_site.reset()
    proc = _worker(settings, start, items)
    logs.append(proc.communicate(timeout=120)[0])
    assert proc.returncode == 0, logs[-1]
    assert not [log for log in logs if "Giving up" in log]
    assert "/flaky/8" in fresh_site.fetched(), logs[-1]
    kept = read_items(items)
    assert set(_names(kept, content)) == set(content.values()), logs[-1]
