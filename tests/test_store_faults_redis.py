"""Real crawls against a Redis server of the test's own that freezes (SIGSTOP),
dies or asks for a password: the crawl goes on without stalling, fetches no
page twice, loses no item, and never shows the password.

Speed is measured in ``benches/bench_store_faults.py``, never asserted here.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import pytest
import redis
from scrapy import signals
from scrapy.crawler import AsyncCrawlerRunner
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.stores import GuardedStore, StoreError, guarded, open_store
from scrapy_dedup.stores.redis import RedisStore
from tests.conftest import BASE_SETTINGS
from tests.crawl_worker import NewsSpider
from tests.redis_servers import free_port, start_redis
from tests.site import Site, store_stage_routes

ROOT = Path(__file__).resolve().parent.parent
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}
PASSWORD = "s3cr@t?x"
ENCODED = quote(PASSWORD, safe="")  # s3cr%40t%3Fx


class RecordingRedisStore(RedisStore):
    """A RedisStore that remembers its instances and the thread of every ping."""

    instances: ClassVar[list[RecordingRedisStore]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ping_threads: list[threading.Thread] = []
        self.instances.append(self)

    def ping(self) -> None:
        self.ping_threads.append(threading.current_thread())
        super().ping()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of this test's own, which the test may freeze or kill."""
    url, proc = start_redis(tmp_path)
    yield url, proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    proc.wait()


@pytest.fixture
def secret_redis(
    own_redis: tuple[str, subprocess.Popen[bytes]],
) -> tuple[str, subprocess.Popen[bytes]]:
    """``own_redis`` asking for ``PASSWORD``, and its URL with the password."""
    url, proc = own_redis
    client = redis.Redis.from_url(url)
    client.config_set("requirepass", PASSWORD)
    client.close()
    parts = urlsplit(url)
    return f"redis://:{ENCODED}@{parts.netloc}{parts.path}", proc


@pytest.fixture
def news(fresh_site: Site) -> tuple[Site, dict[str, str]]:
    """The store tests' news site, each page answering after 0.1 s (so an
    outage spans many requests)."""
    routes, content = store_stage_routes(delay=0.1)
    fresh_site.routes.update(routes)
    return fresh_site, content


@pytest.fixture
def quick_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ask a failed store again every 0.2 s instead of 5, so that a short
    outage sees several probes and its end."""
    monkeypatch.setattr(guarded, "_RETRY_AFTER", 0.2)


class Outage:
    """Freezes (SIGSTOP) or kills the server at the ``start``-th response and
    thaws it (SIGCONT) at the ``end``-th; records every fetched URL and the
    thread the crawl runs on."""

    def __init__(
        self, server: subprocess.Popen[bytes], start: int, end: int | None, *, kill: bool = False
    ) -> None:
        self.server, self.start, self.end, self.kill = server, start, end, kill
        self.fetched: list[str] = []
        self.crawl_threads: set[threading.Thread] = set()

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        self.fetched.append(response.url)
        self.crawl_threads.add(threading.current_thread())
        if len(self.fetched) == self.start:
            if self.kill:
                self.server.kill()
                self.server.wait()
            else:
                self.server.send_signal(signal.SIGSTOP)
        elif len(self.fetched) == self.end:
            self.server.send_signal(signal.SIGCONT)


async def run(settings: dict[str, Any], site: Site, outage: Outage | None = None) -> Any:
    """One crawl of ``site`` with NewsSpider: ``(stats, items)``."""
    runner = AsyncCrawlerRunner({**BASE_SETTINGS, **ADDON, **settings})
    crawler = runner.create_crawler(NewsSpider)
    items: list[dict[str, Any]] = []
    crawler.signals.connect(
        lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
    )
    if outage is not None:
        crawler.signals.connect(outage.response_received, signal=signals.response_received)
    await crawler.crawl_async(start=site.url("/"))
    return crawler.stats.get_stats(), items


def _paths(urls: list[str]) -> Counter[str]:
    return Counter(urlsplit(url).path for url in urls)


def _names(items: list[dict[str, Any]], content: dict[str, str]) -> set[str]:
    return {content[urlsplit(item["url"]).path] for item in items}


# -- A frozen server ------------------------------------------------------------


@deferred_f_from_coro_f
async def test_a_frozen_redis_neither_stalls_nor_loses_the_crawl(
    news: tuple[Site, dict[str, str]],
    own_redis: tuple[str, subprocess.Popen[bytes]],
    quick_retry: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    site, content = news
    url, server = own_redis
    RecordingRedisStore.instances.clear()
    settings = {
        "DEDUP_STORE": url,
        "DEDUP_STORE_CLASSES": {"redis": RecordingRedisStore},
        "DEDUP_STORE_TIMEOUT": 0.3,
        "CONCURRENT_REQUESTS": 2,
    }
    outage = Outage(server, start=10, end=30)
    stats, items = await run(settings, site, outage)

    assert stats["finish_reason"] == "finished"
    assert stats["dedup/store/errors"] >= 1
    assert "WITHOUT the shared dedup state" in caplog.text
    assert "answers again" in caplog.text  # thawed while the crawl went on
    # Every page fetched exactly once, every text in the output.
    assert _paths(outage.fetched) == dict.fromkeys(site.routes, 1)
    assert _names(items, content) == set(content.values())
    # The timeout reached the client, and no ping ran on the crawl's thread.
    (store,) = RecordingRedisStore.instances
    connection = store.client.connection_pool.connection_kwargs
    assert connection["socket_timeout"] == connection["socket_connect_timeout"] == 0.3
    assert store.ping_threads, "the store was never asked whether it answers again"
    assert not outage.crawl_threads & set(store.ping_threads)
    assert {thread.name for thread in store.ping_threads} == {"dedup-store-probe"}


# -- What the worker knew survives the outage -----------------------------------


@pytest.mark.parametrize("fault", ["killed", "frozen then thawed"])
@deferred_f_from_coro_f
async def test_a_worker_fetches_no_page_twice_across_an_outage(
    news: tuple[Site, dict[str, str]],
    own_redis: tuple[str, subprocess.Popen[bytes]],
    quick_retry: None,
    fault: str,
) -> None:
    site, content = news
    url, server = own_redis
    settings = {"DEDUP_STORE": url, "DEDUP_STORE_TIMEOUT": 0.3, "CONCURRENT_REQUESTS": 2}
    if fault == "killed":
        outage = Outage(server, start=15, end=None, kill=True)
    else:
        outage = Outage(server, start=15, end=25)
    stats, items = await run(settings, site, outage)

    assert stats["finish_reason"] == "finished"
    assert stats["dedup/store/errors"] >= 1
    twice = [path for path, n in _paths(outage.fetched).items() if n > 1]
    assert twice == []  # the list pages and "/", linked from every article, included
    assert set(_paths(outage.fetched)) == set(site.routes)
    assert _names(items, content) == set(content.values())


# -- Passwords ------------------------------------------------------------------


def _shown(caplog: pytest.LogCaptureFixture, *errors: BaseException) -> str:
    """Everything logged (messages, arguments, tracebacks) and the full
    tracebacks of ``errors``, as one text."""
    parts = [caplog.text]
    parts += [f"{record.getMessage()} {record.args!r}" for record in caplog.records]
    parts += ["".join(traceback.format_exception(error)) for error in errors]
    return "\n".join(parts)


def _assert_hidden(text: str) -> None:
    for secret in (PASSWORD, ENCODED, ENCODED.lower(), "s3cr"):
        assert secret not in text


@deferred_f_from_coro_f
async def test_the_password_is_never_logged_in_reset_outage_and_recovery(
    news: tuple[Site, dict[str, str]],
    secret_redis: tuple[str, subprocess.Popen[bytes]],
    quick_retry: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    site, _ = news
    url, server = secret_redis
    settings = {
        "DEDUP_STORE": url,
        "DEDUP_RESET": True,
        "DEDUP_STORE_TIMEOUT": 0.3,
        "CONCURRENT_REQUESTS": 2,
    }
    stats, _ = await run(settings, site, Outage(server, start=10, end=30))

    assert stats["finish_reason"] == "finished"
    assert "DEDUP_RESET is set" in caplog.text
    assert "WITHOUT the shared dedup state" in caplog.text
    assert "answers again" in caplog.text
    assert ":***@127.0.0.1" in caplog.text  # the store is still named
    _assert_hidden(_shown(caplog))


@pytest.mark.parametrize("where", ["wrong port", "wrong password"])
@deferred_f_from_coro_f
async def test_the_password_is_never_shown_when_redis_refuses_at_start(
    fresh_site: Site,
    secret_redis: tuple[str, subprocess.Popen[bytes]],
    where: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    url, _ = secret_redis
    if where == "wrong port":
        url = url.replace(f":{urlsplit(url).port}/", f":{free_port()}/")
    else:
        url = url.replace(ENCODED, quote("s3cr@t?y", safe=""))
    with pytest.raises(StoreError) as raised:
        await run({"DEDUP_STORE": url}, fresh_site)

    assert "cannot reach the dedup store at redis://:***@127.0.0.1:" in str(raised.value)
    assert "Cannot open the dedup store" in caplog.text
    assert fresh_site.fetched() == []
    _assert_hidden(_shown(caplog, raised.value))


def test_an_unreachable_redis_cluster_is_one_error_naming_the_uri() -> None:
    port = free_port()
    uri = f"redis+cluster://:{ENCODED}@127.0.0.1:{port}"
    shown = f"redis+cluster://:***@127.0.0.1:{port}"
    with pytest.raises(StoreError) as raised:
        open_store(uri, "news", timeout=0.3)
    error = raised.value
    assert f"cannot reach the dedup store at {shown}: " in str(error)
    assert error.__cause__ is None and error.__suppress_context__  # no redis-py chain
    _assert_hidden("".join(traceback.format_exception(error)))

    # As a user sees it: `scrapy crawl` exits 1 with one error line naming it.
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SCRAPY_")
    }
    command = ["scrapy", "crawl", "site", "-s", f"DEDUP_STORE={uri}", "-a", "url=http://x.test/"]
    result = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT / "example_project",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "] ERROR: " in line]
    assert f"Cannot open the dedup store: cannot reach the dedup store at {shown}" in errors[0]
    assert "RedisClusterException" not in result.stderr
    assert "direct cause" not in result.stderr
    assert "During handling" not in result.stderr
    _assert_hidden(result.stderr)


def test_evidence_learned_while_redis_is_down_reaches_the_log(
    own_redis: tuple[str, subprocess.Popen[bytes]], quick_retry: None
) -> None:
    # A worker learns on its own while Redis is frozen; once it answers, what
    # the worker fetched meanwhile is appended, for the others and later runs.
    url, server = own_redis
    errors: list[str] = []
    store = GuardedStore(
        RedisStore.from_uri(url, "learn", timeout=0.3),
        url,
        "continue",
        count=errors.append,
        stop=lambda: None,
    )
    assert store.exchange_evidence(["a"], 0) == (["a"], 1)
    server.send_signal(signal.SIGSTOP)
    try:
        assert store.exchange_evidence(["b"], 1) == (["b"], 1)  # applied here at once
        assert store.exchange_evidence(["c"], 1) == (["c"], 1)
    finally:
        server.send_signal(signal.SIGCONT)
    assert "dedup/store/errors" in errors
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the store answers again
        found, position = store.exchange_evidence([], 1)
        if position > 1:
            break
        time.sleep(0.1)
    # (The frozen server ran the append whose reply timed out: "b" may come
    # twice, which the learner ignores: a page it has.)
    assert found in (["b", "c"], ["b", "b", "c"]) and position == 1 + len(found)
    assert store.exchange_evidence(["d"], position) == (["d"], position + 1)
    other = RedisStore.from_uri(url, "learn")
    assert other.exchange_evidence([], 0) == (["a", *found, "d"], position + 1)
    other.close()
    store.close()
