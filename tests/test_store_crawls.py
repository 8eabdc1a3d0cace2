"""Real crawls on each store: incremental recrawls and kill -9 with SQLite, a
Redis server lost mid-crawl, three processes sharing one Redis namespace, and
a Redis Cluster."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import scrapy
from scrapy import signals
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.keys import url_key
from scrapy_dedup.url import canonicalize_url
from tests.conftest import crawl
from tests.crawl_worker import NewsSpider, read_items
from tests.redis_servers import free_port, start_redis
from tests.site import Reply, Site, article, store_stage_routes

ROOT = Path(__file__).resolve().parent.parent
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}
OTHER_TEXT = " ".join(
    f"Paragraph {i} of the annual report on coastal erosion describes sand loss at "
    f"beach {i * 7} and the dunes planted there"
    for i in range(12)
)


def _path(url: str) -> str:
    return urlsplit(url).path


def _names(items: list[dict[str, Any]], content: dict[str, str]) -> list[str]:
    return [content[_path(item["url"])] for item in items]


@pytest.fixture
def news(fresh_site: Site) -> Iterator[tuple[Site, dict[str, str]]]:
    routes, content = store_stage_routes()
    fresh_site.routes.update(routes)
    yield fresh_site, content


# -- SQLite: incremental recrawls ---------------------------------------------


@deferred_f_from_coro_f
async def test_sqlite_second_run_skips_what_the_first_kept(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    site, content = news
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
    first = await crawl(NewsSpider, settings, start=site.url("/"))
    fetched = site.fetched()
    assert len(fetched) == len({p.split("?")[0] for p in fetched})  # each page once
    names = _names(first.items, content)
    assert sorted(names) == sorted(set(content.values()))  # one item per real content

    # Next run: a new article appears on list 5; everything else is known.
    site.reset()
    content["/article/new"] = "fresh"
    site.routes["/article/new"] = lambda q: article("Fresh", OTHER_TEXT)
    old_list = site.routes["/list/5"]

    def list_5(q: str) -> Reply:
        reply = old_list(q)
        new_link = '<li><a href="/article/new">new</a></li></ul>'
        return replace(reply, body=reply.body.replace("</ul>", new_link))

    site.routes["/list/5"] = list_5
    second = await crawl(NewsSpider, settings, start=site.url("/"))
    again = site.fetched()
    assert not [p for p in again if p.startswith("/article/") and p != "/article/new"]
    assert "/article/new" in again
    assert [p.split("?")[0] for p in again if p.startswith("/list/")] == [
        f"/list/{n}" for n in range(1, 6)
    ]  # pages that gave no item are fetched again: that is how new links are found
    assert _names(second.items, content) == ["fresh"]
    assert second.stats["dedup/url/filtered/previous_run"] >= 40


# -- SQLite: kill -9 and resume ------------------------------------------------


def _worker(
    settings: dict[str, Any], start: str, items: Path, cwd: Path = ROOT, **popen: Any
) -> subprocess.Popen[str]:
    """``tests.crawl_worker`` in a process of its own, run from ``cwd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.crawl_worker", json.dumps(settings), start, str(items)],
        cwd=cwd,
        env=env,
        **{"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, **popen},
    )


def _recorded_keys(db: Path) -> set[int]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT key FROM urls").fetchall()
    return {key & ((1 << 64) - 1) for (key,) in rows}


def _key(url: str) -> int:
    return url_key("GET", canonicalize_url(url))


def _count_recorded(db: Path) -> int:
    try:
        with closing(sqlite3.connect(db, timeout=1)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM urls").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


# Kill moments: early (nothing on disk yet), and once 3 or 12 pages are recorded.
@pytest.mark.parametrize("kill_when", [("fetched", 4), ("recorded", 3), ("recorded", 12)])
def test_sqlite_survives_kill_9_nothing_fetched_twice_nothing_lost(
    fresh_site: Site, tmp_path: Path, kill_when: tuple[str, int]
) -> None:
    routes, content = store_stage_routes(delay=0.08)
    fresh_site.routes.update(routes)
    db = tmp_path / "dedup.db"
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{db}", "CONCURRENT_REQUESTS": 2}
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"

    proc = _worker(settings, start, items)
    what, count = kill_when
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        done = len(fresh_site.fetched()) if what == "fetched" else _count_recorded(db)
        if done >= count:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the crawl ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    first = fresh_site.fetched()
    recorded = _recorded_keys(db)  # what the killed run left on disk
    assert len(recorded) >= (count if what == "recorded" else 0)

    fresh_site.reset()
    proc = _worker(settings, start, items)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log
    second = fresh_site.fetched()

    # Nothing recorded by the killed run is fetched again (the key is the
    # dupefilter's: same canonical URL, same method).
    again = [p for p in second if _key(fresh_site.url(p, host="127.0.0.1")) in recorded]
    assert again == [], log
    # Nothing lost: every real content is kept by one run or the other.
    kept = read_items(items)
    assert set(_names(kept, content)) == set(content.values())
    # Between them the two runs fetched every page.
    assert {p.split("?")[0] for p in first + second} == set(routes)


# -- Memory + JOBDIR ----------------------------------------------------------


@deferred_f_from_coro_f
async def test_jobdir_keeps_texts_across_pause_and_resume(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    site, content = news
    settings = {
        **ADDON,
        "JOBDIR": str(tmp_path / "job"),
        "CONCURRENT_REQUESTS": 1,
        "CLOSESPIDER_ITEMCOUNT": 12,
    }
    first = await crawl(NewsSpider, settings, start=site.url("/"))
    assert first.stats["finish_reason"] == "closespider_itemcount"
    fetched = site.fetched()
    site.reset()
    second = await crawl(NewsSpider, {**settings, "CLOSESPIDER_ITEMCOUNT": 0}, start=site.url("/"))
    assert second.stats["finish_reason"] == "finished"
    fetched += site.fetched()
    pages = [p.split("?")[0] for p in fetched]
    assert [p for p, n in Counter(pages).items() if n > 1] in ([], ["/"])
    names = _names(first.items + second.items, content)
    assert sorted(names) == sorted(set(content.values()))  # no text kept twice across runs


# -- Redis lost mid-crawl -----------------------------------------------------


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test's own, which the test may kill."""
    url, proc = start_redis(tmp_path)
    yield url, proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("on_error", ["continue", "stop"])
@deferred_f_from_coro_f
async def test_redis_lost_mid_crawl_loses_no_item(
    fresh_site: Site,
    own_redis: tuple[str, subprocess.Popen[bytes]],
    on_error: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    routes, content = store_stage_routes(delay=0.02)
    fresh_site.routes.update(routes)
    url, server = own_redis
    settings = {
        **ADDON,
        "DEDUP_STORE": url,
        "DEDUP_STORE_ON_ERROR": on_error,
        "CONCURRENT_REQUESTS": 2,
    }
    dropped: list[str] = []

    def kill_server(response: Any, request: Any, spider: Any) -> None:
        if len(fresh_site.fetched()) >= 12 and server.poll() is None:
            server.kill()
            server.wait()

    def on_drop(item: Any, response: Any, exception: BaseException) -> None:
        dropped.append(item["url"])

    async def run() -> Any:
        from scrapy.crawler import AsyncCrawlerRunner

        from tests.conftest import BASE_SETTINGS

        runner = AsyncCrawlerRunner({**BASE_SETTINGS, **settings})
        crawler = runner.create_crawler(NewsSpider)
        items: list[dict[str, Any]] = []
        crawler.signals.connect(kill_server, signal=signals.response_received)
        crawler.signals.connect(
            lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
        )
        crawler.signals.connect(on_drop, signal=signals.item_dropped)
        await crawler.crawl_async(start=fresh_site.url("/"))
        return crawler.stats.get_stats(), items

    stats, items = await run()
    assert stats["dedup/store/errors"] >= 1
    assert "redis://127.0.0.1" in caplog.text
    if on_error == "continue":
        assert stats["finish_reason"] == "finished"
        assert "WITHOUT the shared dedup state" in caplog.text
        # Every page was still crawled, and every text is in the output.
        assert {p.split("?")[0] for p in fresh_site.fetched()} == set(routes)
        assert set(_names(items, content)) == set(content.values())
    else:
        assert stats["finish_reason"] == "dedup_store_error"
        assert "stopping the crawl" in caplog.text
    # Only items dropped while the store still answered: their text was kept.
    kept_names = set(_names(items, content))
    assert set(_names([{"url": u} for u in dropped], content)) <= kept_names


# -- Three processes, one Redis namespace --------------------------------------


@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")
def test_three_workers_share_one_redis_namespace(
    fresh_site: Site, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    routes, content = store_stage_routes(delay=0.1)
    fresh_site.routes.update(routes)
    namespace = f"news-{uuid.uuid4().hex[:8]}"
    settings = {
        **ADDON,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "REDIS_URL": redis_url,
        "SCHEDULER_QUEUE_KEY": f"{redis_prefix}:%(spider)s:requests",
        # Persist: a worker that finishes first must not flush the shared queue
        # and seen set under the others (redis_prefix deletes them afterwards).
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
        "DEDUP_STORE": redis_url,
        "DEDUP_NAMESPACE": namespace,
        "DEDUP_REDIS_PREFIX": redis_prefix,
        "CONCURRENT_REQUESTS": 2,
        "WORKER_MIN_SECONDS": 4,  # stay up while the others still add work
    }
    # Every worker starts from the same URLs: each is fetched once between them.
    start = ",".join(
        fresh_site.url(path, host="127.0.0.1")
        for path in ["/", *(f"/list/{n}" for n in range(1, 6))]
    )
    files = [tmp_path / f"items-{n}.jsonl" for n in range(3)]
    procs = [_worker(settings, start, f) for f in files]
    logs = [proc.communicate(timeout=120)[0] for proc in procs]
    for proc, log in zip(procs, logs, strict=True):
        assert proc.returncode == 0, log

    fetched = fresh_site.fetched()
    assert [p for p, n in Counter(fetched).items() if n > 1] == []  # no URL fetched twice
    assert {p.split("?")[0] for p in fetched} == set(routes)  # nothing missing
    per_worker = [read_items(f) for f in files]
    names = _names([item for items in per_worker for item in items], content)
    assert sorted(names) == sorted(set(content.values()))  # exactly one item per content
    assert sum(1 for items in per_worker if items) >= 2  # the work was shared


# -- Redis Cluster -----------------------------------------------------------


@deferred_f_from_coro_f
async def test_a_crawl_on_a_redis_cluster_spreads_its_state(
    news: tuple[Site, dict[str, str]], redis_cluster_url: str
) -> None:
    site, content = news
    namespace = f"news-{uuid.uuid4().hex[:8]}"
    settings = {
        **ADDON,
        "DEDUP_STORE": redis_cluster_url,
        "DEDUP_NAMESPACE": namespace,
        "DEDUP_REDIS_PREFIX": "scrapy-dedup-test",
    }
    result = await crawl(NewsSpider, settings, start=site.url("/"))
    fetched = [p.split("?")[0] for p in site.fetched()]
    assert sorted(fetched) == sorted(set(fetched))
    assert sorted(_names(result.items, content)) == sorted(set(content.values()))
    cluster = redis.RedisCluster.from_url(redis_cluster_url.replace("redis+cluster", "redis"))
    try:
        per_node = []
        for node in cluster.get_primaries():
            client = redis.Redis(host=node.host, port=node.port)
            per_node.append(len(list(client.scan_iter(f"scrapy-dedup-test:{namespace}:*"))))
            client.close()
        assert len(per_node) == 3 and all(n > 0 for n in per_node), per_node
        for name in cluster.scan_iter(f"scrapy-dedup-test:{namespace}:*"):
            cluster.delete(name)
    finally:
        cluster.close()


# -- Settings: namespace, reset, a store that cannot be opened ---------------


def test_namespace_defaults_to_the_spider_and_reset_forgets_it(tmp_path: Path) -> None:
    from scrapy import Request, Spider
    from scrapy.utils.misc import build_from_crawler
    from scrapy.utils.test import get_crawler

    from scrapy_dedup import CanonicalDupeFilter

    store = f"sqlite:///{tmp_path}/dedup.db"

    def open_filter(spider: str, **settings: Any) -> CanonicalDupeFilter:
        crawler = get_crawler(
            type(spider, (Spider,), {"name": spider}), {"DEDUP_STORE": store, **settings}
        )
        crawler.spider = crawler._create_spider()
        return build_from_crawler(CanonicalDupeFilter, crawler)

    df = open_filter("shop")
    df.request_seen(Request("https://a.test/p", meta={}))
    df.store.keep_url(*df.request_key(Request("https://a.test/p"))[::2])  # as if it gave an item
    df.close("finished")
    with sqlite3.connect(tmp_path / "dedup.db") as db:
        assert db.execute("SELECT name FROM namespaces").fetchall() == [("shop",)]
    db.close()

    df = open_filter("shop")
    assert df.request_seen(Request("https://a.test/p"))  # recorded by the first run
    df.close("finished")
    df = open_filter("blog")
    assert not df.request_seen(Request("https://a.test/p"))  # another spider, another namespace
    df.close("finished")
    df = open_filter("blog", DEDUP_NAMESPACE="shop")
    assert df.request_seen(Request("https://a.test/p"))
    df.close("finished")
    df = open_filter("shop", DEDUP_RESET=True)
    assert not df.request_seen(Request("https://a.test/p"))  # forgotten
    df.close("finished")


def test_an_unreachable_redis_stops_scrapy_crawl_with_one_clear_error() -> None:
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SCRAPY_")
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            "site",
            "-s",
            f"DEDUP_STORE=redis://:secret@127.0.0.1:{port}/0",
            "-a",
            "url=http://127.0.0.1:1/",
        ],
        cwd=ROOT / "example_project",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "] ERROR: " in line]
    assert len(errors) >= 1 and "Cannot open the dedup store" in errors[0], result.stderr
    assert f"redis://:***@127.0.0.1:{port}/0" in errors[0]
    assert "secret" not in result.stderr
    assert "Crawled (" not in result.stderr  # nothing was fetched


class PersistSpider(NewsSpider):
    """Marks list 1 as done once fetched (it gives no item of its own) and the
    first story as fetched again by every run (it gives one)."""

    name = "persist"

    def parse(self, response: Any) -> Any:
        for output in super().parse(response):
            if isinstance(output, scrapy.Request):
                path = urlsplit(output.url).path
                if path == "/list/1":
                    output.meta["dedup_persist"] = True
                elif path == "/article/chain-1":
                    output.meta["dedup_persist"] = False
            yield output


@deferred_f_from_coro_f
async def test_dedup_persist_meta_overrides_what_later_runs_skip(
    news: tuple[Site, dict[str, str]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site, _ = news
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
    await crawl(PersistSpider, settings, start=site.url("/"))
    site.reset()
    second = await crawl(PersistSpider, settings, start=site.url("/"))
    # "/" gives no item (fetched again); list 1 is done (dedup_persist=True), and
    # so the rest of the lists are not reached; chain-1 is fetched again
    # (dedup_persist=False), chain-2 gave an item and is skipped.
    assert site.fetched() == ["/", "/article/chain-1"]
    # /list/1 and /list/1?utm_medium=home, chain-2
    assert second.stats["dedup/url/filtered/previous_run"] == 3
    assert "ERROR" not in caplog.text


class AsyncChainSpider(NewsSpider):
    """Yields a story's item first and its links after an await, as an async
    callback that fetches something else in between would."""

    name = "async-chain"

    async def parse(self, response: Any) -> Any:  # type: ignore[override]
        outputs = list(super().parse(response))
        for output in outputs:
            if not isinstance(output, scrapy.Request):
                yield output
        await asyncio.sleep(0.01)
        for output in outputs:
            if isinstance(output, scrapy.Request):
                yield output


class CopyAndDropPipeline:
    """Returns a copy of every item (a new object) and drops chain-5's."""

    def process_item(self, item: Any) -> Any:
        if item["url"].endswith("/article/chain-5"):
            raise scrapy.exceptions.DropItem("not wanted")
        return dict(item)


@deferred_f_from_coro_f
async def test_frontier_records_a_page_only_after_its_links_and_items_are_safe(
    news: tuple[Site, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every commit must leave the file resumable: a recorded story's next
    story is recorded, pending, or was pending and is done. Commits are forced
    after every write."""
    site, _ = news
    from scrapy_dedup.stores import SqliteStore

    chain = [
        url_key("GET", canonicalize_url(site.url(f"/article/chain-{n}"))) for n in range(1, 13)
    ]
    broken: list[int] = []
    was_pending: set[int] = set()  # done pages leave the frontier: their links are safe
    original_init, original_flush = SqliteStore.__init__, SqliteStore.flush

    def init(self: SqliteStore, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **{**kwargs, "batch": 1})

    def flush(self: SqliteStore) -> None:
        original_flush(self)
        db = self._db
        urls = {k & ((1 << 64) - 1) for (k,) in db.execute("SELECT key FROM urls")}
        pending = {k & ((1 << 64) - 1) for (k,) in db.execute("SELECT key FROM pending")}
        was_pending.update(pending)
        # A next story that is neither recorded nor waiting, and never waited: lost.
        broken.extend(
            n + 1 for n in range(11) if chain[n] in urls and chain[n + 1] not in urls | was_pending
        )

    monkeypatch.setattr(SqliteStore, "__init__", init)
    monkeypatch.setattr(SqliteStore, "flush", flush)
    settings = {
        **ADDON,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db",
        "ITEM_PIPELINES": {CopyAndDropPipeline: 100},  # before the dedup pipeline (350)
    }
    result = await crawl(AsyncChainSpider, settings, start=site.url("/"))
    assert result.stats["finish_reason"] == "finished"
    assert broken == []
    with sqlite3.connect(tmp_path / "dedup.db") as db:
        urls = {k & ((1 << 64) - 1) for (k,) in db.execute("SELECT key FROM urls")}
    db.close()
    # Pages whose item came out are recorded, though a pipeline returned a copy;
    # chain-5's item was dropped by another pipeline: it is fetched again next run.
    assert [n + 1 for n in range(12) if chain[n] not in urls] == [5]


# -- A store of one's own --------------------------------------------------------


@deferred_f_from_coro_f
async def test_a_store_named_in_dedup_store_classes_serves_the_crawl(
    news: tuple[Site, dict[str, str]],
) -> None:
    from tests.stores.test_stores import TaggedStore

    site, content = news
    settings = {
        **ADDON,
        "DEDUP_STORE": "tagged://shared",
        "DEDUP_STORE_CLASSES": {"tagged": "tests.stores.test_stores.TaggedStore"},
    }
    result = await crawl(NewsSpider, settings, start=site.url("/"))
    assert TaggedStore.opened[-1] == "tagged://shared news"
    fetched = site.fetched()
    assert len(fetched) == len({p.split("?")[0] for p in fetched})  # each page once
    assert sorted(_names(result.items, content)) == sorted(set(content.values()))
