"""Real crawls against a redis-server of the test's own that forgets
everything (restarted without persistence: between two runs, or while a crawl
runs and then the crawl is killed with kill -9 or goes on to its end), or
that goes away for a few seconds and comes back with its data (AOF).

What a user would notice is asserted: the loss is said once at WARNING, no
page is lost across runs, a new run never reuses the number of an old one,
no false warning about texts of an older normalization, and no item is kept
twice because of an outage.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from scrapy import signals
from scrapy.crawler import AsyncCrawlerRunner
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.stores import guarded
from scrapy_dedup.stores.redis import RedisStore
from tests.conftest import BASE_SETTINGS
from tests.crawl_worker import NewsSpider, read_items
from tests.redis_servers import free_port, redis_binaries
from tests.site import Reply, Site, article, page
from tests.test_store_crawls import _worker
from tests.text.neardup_corpus import documents

ROOT = Path(__file__).resolve().parent.parent
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}
LOST = "lost the data of namespace 'news'"
OLD_TEXTS = "earlier text normalization"
TEXTS = documents(min_words=60, max_words=200, seed=3)


class Server:
    """A redis-server on one port that the test kills and starts again:
    without persistence (it comes back empty) or with AOF (every write
    fsynced: it comes back with everything it answered)."""

    def __init__(self, workdir: Path, *, aof: bool) -> None:
        self.dir, self.aof, self.port = workdir, aof, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        persistence = ["yes", "--appendfsync", "always"] if self.aof else ["no"]
        command = [redis_binaries()[0], "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--dir", str(self.dir), "--appendonly", *persistence]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=2)
        deadline = time.monotonic() + 30
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    assert self.proc.poll() is None, "redis-server exited at start"
                    assert time.monotonic() < deadline, "redis-server did not answer"
                    time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.kill()
        self.start()

    def field(self, name: str) -> bytes | None:
        client = redis.Redis.from_url(self.url, socket_timeout=2)
        try:
            value: bytes | None = client.hget("dedup:news:run", name)
            return value
        finally:
            client.close()


@pytest.fixture
def empty_redis(tmp_path: Path) -> Iterator[Server]:
    """A redis-server that forgets everything when restarted."""
    server = Server(tmp_path, aof=False)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def aof_redis(tmp_path: Path) -> Iterator[Server]:
    """A redis-server that keeps everything (AOF, fsync always) across a restart."""
    server = Server(tmp_path, aof=True)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Path:
    """The crawls' working directory: its ``.scrapy`` holds the marker files
    (the same for the in-process crawls and the ``scrapy`` subprocesses)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    caplog.set_level(logging.INFO)
    return tmp_path


class Valve:
    """Holds every page of the site while closed (the crawl waits on its
    downloads), and ``/list/<gated>`` until :meth:`release`."""

    def __init__(self, gated: int | None = None) -> None:
        self.open = threading.Event()
        self.open.set()
        self.gate = threading.Event()
        self.gated = gated
        self.waiting = 0
        self._lock = threading.Lock()

    def passing(self, list_number: int | None = None) -> None:
        with self._lock:
            self.waiting += 1
        self.open.wait(120)
        with self._lock:
            self.waiting -= 1
        if list_number is not None and list_number == self.gated:
            self.gate.wait(120)

    def release(self) -> None:
        self.open.set()
        self.gate.set()


def site_of_120(site: Site, valve: Valve, delay: float = 0.05) -> dict[str, str]:
    """12 list pages in a chain, each linking to 10 articles of texts of
    their own: 120 real pages, one item each. Returns article path -> name."""
    content: dict[str, str] = {}
    for k in range(1, 13):
        links = [f"/a/{k}-{m}" for m in range(1, 11)] + ([f"/list/{k + 1}"] if k < 12 else [])

        def listing(query: str, k: int = k, links: tuple[str, ...] = tuple(links)) -> Reply:
            valve.passing(k)
            time.sleep(delay)
            return page(f"List {k}", *links)

        site.routes[f"/list/{k}"] = listing
        for m in range(1, 11):
            i = (k - 1) * 10 + m - 1
            path, name = f"/a/{k}-{m}", f"doc{i}"
            content[path] = name

            def story(query: str, body: str = TEXTS[i], name: str = name) -> Reply:
                valve.passing()
                time.sleep(delay)
                return article(f"Story {name}", body, "/", "/list/1")

            site.routes[path] = story
    site.routes["/"] = lambda query: page("News", "/list/1")
    return content


async def crawl(
    settings: dict[str, Any],
    site: Site,
    on_response: Callable[[int, str], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One crawl of ``site`` from ``/`` (at 127.0.0.1, as the subprocesses
    crawl it): ``(stats, items)``; ``on_response(n, url)`` at the n-th response."""
    runner = AsyncCrawlerRunner({**BASE_SETTINGS, **ADDON, "CONCURRENT_REQUESTS": 2, **settings})
    crawler = runner.create_crawler(NewsSpider)
    items: list[dict[str, Any]] = []
    crawler.signals.connect(
        lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
    )
    if on_response is not None:
        count = iter(range(1, 1_000_000))
        crawler.signals.connect(
            lambda response, request, spider: on_response(next(count), response.url),
            signal=signals.response_received,
            weak=False,
        )
    await crawler.crawl_async(start=site.url("/", host="127.0.0.1"))
    return crawler.stats.get_stats(), items


def worker(settings: dict[str, Any], start: str, items: Path, cwd: Path) -> subprocess.Popen[str]:
    """``tests.crawl_worker`` with the add-on, two requests in flight, run from ``cwd``."""
    return _worker({**ADDON, "CONCURRENT_REQUESTS": 2, **settings}, start, items, cwd=cwd)


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str] | None = None) -> bool:
    """Whether ``condition`` came true within a generous minute (while ``proc`` runs)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def names(items: list[dict[str, Any]], content: dict[str, str]) -> Counter[str]:
    return Counter(content[urlsplit(item["url"]).path] for item in items)


def warnings_with(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and text in r.getMessage()
    ]


def articles(site: Site) -> Counter[str]:
    return Counter(p for p in map(lambda u: urlsplit(u).path, site.fetched()) if "/a/" in p)


# -- Between two runs -------------------------------------------------------


@deferred_f_from_coro_f
async def test_a_redis_restarted_empty_between_runs_is_said_and_loses_no_page(
    fresh_site: Site,
    empty_redis: Server,
    project: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    content = site_of_120(fresh_site, Valve())
    items_file = project / "items.jsonl"
    settings = {"DEDUP_STORE": empty_redis.url}
    run1 = worker(settings, fresh_site.url("/", host="127.0.0.1"), items_file, project)
    assert wait_for(lambda: len(articles(fresh_site)) >= 30, run1), "run 1 ended early"
    run1.send_signal(signal.SIGKILL)
    run1.communicate(timeout=60)
    first = read_items(items_file)
    empty_redis.restart()  # without persistence: the namespace is gone
    fresh_site.reset()

    stats, items = await crawl(settings, fresh_site)

    # Said once, at WARNING, counted; the new run has a number of its own.
    assert len(warnings_with(caplog, LOST)) == 1
    assert "since this machine last used it" in warnings_with(caplog, LOST)[0]
    assert stats["dedup/store/lost_state"] == 1
    assert "started run 2" in caplog.text
    assert not warnings_with(caplog, OLD_TEXTS)
    # Nothing is lost: the run after the loss fetches every page again.
    assert stats["finish_reason"] == "finished"
    assert set(articles(fresh_site)) == set(content)
    assert set(names(first + items, content)) == set(content.values())
    assert set(names(items, content)) == set(content.values())
    assert not warnings_with(caplog, "This run is not complete")  # it fetched everything


# -- While a crawl runs -------------------------------------------------------


@deferred_f_from_coro_f
async def test_a_redis_restarted_empty_mid_crawl_then_a_kill_9_loses_no_page(
    fresh_site: Site,
    empty_redis: Server,
    project: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The case: Redis forgets everything while a worker crawls; the
    # worker goes on writing to the empty server, then is killed. The next
    # run used to reuse run number 1, so the URLs the killed worker had seen
    # counted as seen, and the pages behind them were lost for that run.
    valve = Valve(gated=7)
    content = site_of_120(fresh_site, valve)
    items_file = project / "items.jsonl"
    settings = {"DEDUP_STORE": empty_redis.url}
    run1 = worker(settings, fresh_site.url("/", host="127.0.0.1"), items_file, project)
    try:
        assert wait_for(lambda: len(fresh_site.fetched()) >= 4, run1), "run 1 ended early"
        # Restart Redis while the worker waits on its downloads (so it makes
        # no call in between: it finds the empty server at its next call).
        valve.open.clear()
        assert wait_for(lambda: valve.waiting >= 2, run1)
        time.sleep(0.5)  # the worker finishes what it was doing
        empty_redis.restart()
        valve.open.set()
        # The worker reaches /list/7 (held) and finds out (on the fixed code).
        assert wait_for(lambda: "/list/7" in fresh_site.fetched(), run1)
        wait_for(lambda: empty_redis.field("trusted_since") is not None, run1)
        assert wait_for(lambda: len(articles(fresh_site)) >= 30, run1)
        run1.send_signal(signal.SIGKILL)
        log1, _ = run1.communicate(timeout=60)
    finally:
        valve.release()
        if run1.poll() is None:
            run1.kill()
            run1.communicate(timeout=60)
    first = read_items(items_file)
    assert log1.count(LOST) == 1, log1[-3000:]
    assert "during the crawl" in log1
    fresh_site.reset()

    stats, items = await crawl(settings, fresh_site)

    # Every page gives an item across the two runs, and the run after the
    # loss fetched everything it could not trust again.
    assert set(names(first + items, content)) == set(content.values())
    assert {f"/list/{k}" for k in range(7, 13)} <= set(fresh_site.fetched())
    assert stats["finish_reason"] == "finished"
    assert "started run 2" in caplog.text  # not run 1 again
    assert not warnings_with(caplog, OLD_TEXTS)


@deferred_f_from_coro_f
async def test_a_redis_restarted_empty_mid_crawl_loses_nothing_and_the_run_is_not_complete(
    fresh_site: Site,
    empty_redis: Server,
    project: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    content = site_of_120(fresh_site, Valve())
    settings = {"DEDUP_STORE": empty_redis.url}

    before: list[str] = []  # the responses before Redis forgot them

    def restart(n: int, url: str) -> None:
        if n == 40:  # on the crawl's thread: the worker makes no call meanwhile
            empty_redis.restart()
        elif n < 40:
            before.append(urlsplit(url).path)

    stats, items = await crawl(settings, fresh_site, restart)

    # The crawl itself loses nothing and fetches nothing twice.
    assert stats["finish_reason"] == "finished"
    assert Counter(fresh_site.fetched()) == dict.fromkeys(Counter(fresh_site.fetched()), 1)
    assert set(articles(fresh_site)) == set(content)
    assert names(items, content) == dict.fromkeys(content.values(), 1)
    # Said, counted, and the run is not called complete.
    lost = warnings_with(caplog, LOST)
    assert len(lost) == 1 and "during the crawl" in lost[0]
    assert stats["dedup/store/lost_state"] == 1
    assert len(warnings_with(caplog, "This run is not complete")) == 1
    # Its unfinished requests were written again, and settled.
    tool = RedisStore.from_uri(empty_redis.url, "news", join=False)
    assert tool.inventory()["counts"]["unfinished requests (frontier)"] == 0
    tool.close()

    caplog.clear()
    fresh_site.reset()
    stats, items2 = await crawl(settings, fresh_site)

    assert "started run 2" in caplog.text  # the run number survived the loss
    assert not warnings_with(caplog, OLD_TEXTS)
    assert not warnings_with(caplog, LOST)  # said once, by the run that found it
    assert stats["finish_reason"] == "finished"
    # The pages kept before the loss are fetched again.
    assert {path for path in before if path in content} <= set(articles(fresh_site))
    assert set(names(items + items2, content)) == set(content.values())


# -- An outage: Redis away a few seconds, back with its data ------------------


def chain_site(site: Site, answered: threading.Event) -> dict[str, str]:
    """/c/1 -> /c/2 -> ... -> /c/60, one item each. Pages 21-35 have texts
    of their own, and 41-55 repeat them: a correct crawl keeps 45 texts.
    Page 41 waits until the store answered again after the outage."""
    content: dict[str, str] = {}
    for n in range(1, 61):
        text = n - 20 if 41 <= n <= 55 else n
        content[f"/c/{n}"] = name = f"doc{text}"

        def chained(query: str, n: int = n, body: str = TEXTS[text], name: str = name) -> Reply:
            if n == 41:
                answered.wait(120)
            time.sleep(0.05)
            return article(f"Story {name}", body, *([f"/c/{n + 1}"] if n < 60 else []))

        site.routes[f"/c/{n}"] = chained
    site.routes["/"] = lambda query: page("Chain", "/c/1")
    return content


class _Answered(logging.Handler):
    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "answers again" in record.getMessage():
            self.event.set()


@deferred_f_from_coro_f
async def test_texts_kept_during_an_outage_are_not_kept_again_after_it(
    fresh_site: Site,
    aof_redis: Server,
    project: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(guarded, "_RETRY_AFTER", 0.2)
    answered = threading.Event()
    content = chain_site(fresh_site, answered)
    handler = _Answered(answered)
    logging.getLogger("scrapy_dedup.stores.guarded").addHandler(handler)
    down_at: list[float] = []

    def outage(n: int, url: str) -> None:
        if n == 20:  # away: pages 20-30 are answered from this worker's memory
            aof_redis.kill()
            down_at.append(time.monotonic())
        elif n == 30:
            aof_redis.start()

    try:
        stats, items = await crawl(
            {"DEDUP_STORE": aof_redis.url, "DEDUP_STORE_TIMEOUT": 0.3, "CONCURRENT_REQUESTS": 1},
            fresh_site,
            outage,
        )
    finally:
        answered.set()
        logging.getLogger("scrapy_dedup.stores.guarded").removeHandler(handler)

    assert stats["finish_reason"] == "finished"
    assert stats["dedup/store/errors"] >= 1
    assert "answers again" in caplog.text
    assert Counter(fresh_site.fetched()) == dict.fromkeys(fresh_site.fetched(), 1)
    # No text kept twice: the ones kept during the outage were known after it.
    kept = names(items, content)
    assert [name for name, n in kept.items() if n > 1] == []
    assert set(kept) == set(content.values())
    assert stats["dedup/store/outage_texts"] >= 1
    # ...and written to Redis (45 texts, once each): a later run keeps none again.
    store = RedisStore.from_uri(aof_redis.url, "news", join=False)
    assert len(_texts(store)) == len(kept) == 45
    store.close()
    # A restart that kept everything is no data loss.
    assert not warnings_with(caplog, LOST)
    assert "dedup/store/lost_state" not in stats


def _texts(store: RedisStore) -> list[bytes]:
    names = [f"{store.base}:c:{byte:02x}" for byte in range(256)]
    values: list[bytes] = []
    for found in store._pipe("read texts", lambda p: [p.hvals(n) for n in names]):
        values += found
    return values


# -- A server that went back to an older snapshot -----------------------------


def _frontier(url: str) -> set[int]:
    """The keys of the namespace's frontier rows, as a worker starting a run reads them."""
    reader = RedisStore.from_uri(url, "news", join=False)
    reader.new_run = True
    try:
        return {key for key, _ in reader.pending_requests()}
    finally:
        reader.close()


def test_a_redis_back_to_an_older_snapshot_is_noticed_mid_crawl_and_at_start(
    empty_redis: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    state = str(tmp_path / "state")
    store = RedisStore.from_uri(empty_redis.url, "news", state_dir=state)
    store.add_pending(1, "one")
    client = redis.Redis.from_url(empty_redis.url)
    client.save()  # the snapshot the server comes back with
    client.close()
    store.add_pending(2, "two")  # written after it: lost at the restart
    empty_redis.restart()
    assert _frontier(empty_redis.url) == {1}

    store.add_pending(3, "three")  # the next write finds the older state

    assert store.lost_state == 1
    assert len(warnings_with(caplog, LOST)) == 1
    assert _frontier(empty_redis.url) == {1, 2, 3}  # written again
    store.close()

    # Between runs: a later snapshot is lost, the marker file remembers more writes.
    client = redis.Redis.from_url(empty_redis.url)
    client.save()
    client.close()
    store = RedisStore.from_uri(empty_redis.url, "news", state_dir=state)
    store.add_pending(4, "four")
    store.close()
    empty_redis.restart()
    caplog.clear()
    later = RedisStore.from_uri(empty_redis.url, "news", state_dir=state)
    assert later.lost_state == 1
    assert "since this machine last used it" in warnings_with(caplog, LOST)[0]
    assert later.run == 3  # not the number of the run whose end was lost
    later.close()


def test_a_reset_by_another_worker_is_no_loss(
    empty_redis: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = str(tmp_path / "state")
    worker = RedisStore.from_uri(empty_redis.url, "news", state_dir=state)
    worker.add_pending(1, "one")
    other = RedisStore.from_uri(empty_redis.url, "news", state_dir=state)
    other.clear()  # DEDUP_RESET
    worker.add_pending(2, "two")
    other.close()
    worker.close()
    again = RedisStore.from_uri(empty_redis.url, "news", state_dir=state)
    again.close()
    assert worker.lost_state == other.lost_state == again.lost_state == 0
    assert not warnings_with(caplog, LOST)
