"""Learned URL rules in real crawls of a messy local site (tests/messy_site.py):
fetches saved, and no real page lost or doubled, with the traps where the
same kind of difference matters."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest
import scrapy
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.explain import Project, explain, format_explain
from tests.conftest import CrawlResult, crawl
from tests.crawl_worker import read_items
from tests.messy_site import MessySite
from tests.site import Reply, Site
from tests.test_store_crawls import _worker

ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}


class MessySpider(scrapy.Spider):
    name = "messy"

    def __init__(self, starts: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.starts = starts.split(",")

    async def start(self) -> AsyncIterator[Any]:
        for url in self.starts:
            yield scrapy.Request(url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "text": " ".join(response.css("main ::text").getall())}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def _fetched(site: Site, model: MessySite) -> list[str | None]:
    """The real page of every fetch, in order."""
    found = []
    for host, target in site.log:
        parts = urlsplit(target)
        found.append(model.page_id(host.rpartition(":")[0], parts.path, parts.query))
    return found


def _item_pages(result: CrawlResult, model: MessySite) -> Counter[str | None]:
    pages: Counter[str | None] = Counter()
    for item in result.items:
        parts = urlsplit(item["url"])
        pages[model.page_id(parts.hostname or "", parts.path, parts.query)] += 1
    return pages


@pytest.fixture
def messy(fresh_site: Site) -> Iterator[tuple[Site, MessySite]]:
    model = MessySite(products=120, stories=40)
    fresh_site.handler = model.reply
    yield fresh_site, model


HOSTS = ("shop.test", "news.test", "wiki.test")


# Which copies a rule skips depends on the order pages arrive; with concurrency
# that order, so the count of fetches, changes from run to run. Tests that count
# fetches crawl one request at a time.
ONE_AT_A_TIME = {"CONCURRENT_REQUESTS": 1}


async def _crawl(site: Site, settings: dict[str, Any]) -> CrawlResult:
    starts = ",".join(site.url("/", host) for host in HOSTS)
    site.reset()
    return await crawl(MessySpider, {**ADDON, **settings}, starts=starts)


@pytest.mark.parametrize("in_flight", [1, 8, 16])
@deferred_f_from_coro_f
async def test_learning_saves_fetches_and_loses_no_page(
    messy: tuple[Site, MessySite], tmp_path: Path, in_flight: int
) -> None:
    site, model = messy
    real, plain = model.reachable([f"http://{host}/" for host in HOSTS])
    report = tmp_path / "report"
    settings = {"DEDUP_LEARN": True, "DEDUP_REPORT": str(report), "CONCURRENT_REQUESTS": in_flight}
    learned = await _crawl(site, settings)
    fetched = _fetched(site, model)
    print(
        f"real pages {len(real)}: {plain} fetches without learning "
        f"({plain / len(real):.2f} per page), {len(fetched)} with "
        f"({len(fetched) / len(real):.2f})",
        {k: v for k, v in learned.stats.items() if k.startswith("dedup/learn")},
    )
    lost = real - set(fetched)
    assert not lost, (sorted(lost), {k: v for k, v in learned.stats.items() if "learn" in k})
    items = _item_pages(learned, model)
    assert set(items) == real and max(items.values()) == 1  # one item per real page
    # 1.36-1.38 with the audit's old one in 40 (which missed minorities:
    # benches/fuzz_learn.py); 1.86 with one request of each unchecked page,
    # up to 59 per rule (scrapy_dedup.learn.audit.draw): ?lang, /m/ and /amp
    # have 35-40 pages each here, 2 of them checked by the crawl, so the
    # audit fetches all of them. With more in flight, responses come back in
    # another order each run, and more variants are fetched before a rule is
    # decided: 1.81-1.90 on an idle machine, 2.06 while the suite runs.
    assert len(fetched) / len(real) <= (1.9 if in_flight == 1 else 2.2)
    # 8 one at a time (/shop/kitchen/... first, then /shop/*/...); with more
    # in flight /shop/*/... may come first and cover kitchen too.
    assert learned.stats["dedup/learn/rules"] >= 7
    assert learned.stats["dedup/url/filtered/learned"] >= 400
    # ?v= does not matter on news.test, and names revisions on wiki.test.
    assert learned.stats["dedup/learn/rule/news.test: ?v does not matter/skipped"] > 20
    assert not [k for k in learned.stats if k.startswith("dedup/learn/rule/wiki.test")]
    assert len([p for p in fetched if p and p.startswith("wiki:page")]) == 4 * model.stories

    # The report lists each rule with its evidence, and what it skipped.
    data = json.loads(report.with_suffix(".json").read_text("utf-8"))
    rules = {(r["host"], r["means"]): r for r in data["learned_rules"]["rules"]}
    v = rules["news.test", "?v does not matter"]
    assert (
        v["requests_skipped"]
        == learned.stats["dedup/learn/rule/news.test: ?v does not matter/skipped"]
    )
    assert v["pages_confirming"] >= 3 and v["examples"]
    for a, b in v["examples"]:
        assert (
            urlsplit(a).path == urlsplit(b).path and "v=" in urlsplit(a).query + urlsplit(b).query
        )
    assert not [host for host, _ in rules if host == "wiki.test"]
    skipped = {e["rule"]: e for e in data["url_rules"]}["learned"]
    assert skipped["urls"] == learned.stats["dedup/url/filtered/learned"]
    assert skipped["examples"]
    for example in skipped["examples"]:  # a skipped URL, and the fetched page it copies
        url, copy = urlsplit(example["url"]), urlsplit(example["seen_as"])
        assert url.hostname == copy.hostname and url != copy


@pytest.mark.parametrize("in_flight", [1, 8, 16])
@deferred_f_from_coro_f
async def test_a_rule_that_fails_late_gives_back_what_it_skipped(
    fresh_site: Site, in_flight: int
) -> None:
    # ?edition= changes nothing for the products a depth-first crawl reaches
    # first, and the text of the others: learned, then contradicted.
    model = MessySite(products=80, stories=4, late_trap=True)
    fresh_site.handler = model.reply
    real, _ = model.reachable([f"http://{host}/" for host in HOSTS])
    result = await _crawl(fresh_site, {"DEDUP_LEARN": True, "CONCURRENT_REQUESTS": in_flight})
    fetched = _fetched(fresh_site, model)
    stats = result.stats
    print({k: v for k, v in stats.items() if k.startswith("dedup/learn")})
    assert not real - set(fetched), stats  # no real page lost
    items = _item_pages(result, model)
    assert set(items) == real and max(items.values()) == 1
    editions = [p for p in real if "edition" in p]
    assert len(editions) == 40
    assert stats["dedup/learn/rule/shop.test: ?edition does not matter/skipped"] >= 1
    assert stats["dedup/learn/contradicted"] >= 1
    assert stats["dedup/learn/refetched"] == stats["dedup/learn/released"] >= 1


@deferred_f_from_coro_f
async def test_rules_file_carries_rules_to_the_next_crawl(
    messy: tuple[Site, MessySite], tmp_path: Any
) -> None:
    site, model = messy
    real, _ = model.reachable([f"http://{host}/" for host in HOSTS])
    path = tmp_path / "rules.json"
    settings = {"DEDUP_LEARN": True, "DEDUP_LEARN_RULES": str(path)}
    first = await _crawl(site, settings)
    first_fetches = len(site.log)
    data = json.loads(path.read_text())
    shop = {json.dumps(r, sort_keys=True) for r in data["hosts"]["shop.test"]}
    sid = [r for r in data["hosts"]["shop.test"] if r.get("name") == "sid" and "value" not in r]
    assert sid and sid[0]["confirmed_under"] and not sid[0].get("revoked")
    assert len(shop) >= 2 and "wiki.test" not in data["hosts"]

    # The next crawl starts with them: fewer fetches, nothing lost.
    second = await _crawl(site, settings)
    fetched = _fetched(site, model)
    assert not real - set(fetched)
    assert len(fetched) < first_fetches
    assert second.stats.get("dedup/learn/adopted", 0) < first.stats["dedup/learn/adopted"]

    # Frozen, with a rule taken out by hand: nothing new is learned, the
    # removed difference is fetched again, the rest still skipped.
    data["hosts"]["shop.test"] = [
        r
        for r in data["hosts"]["shop.test"]
        if not (r["rule"] == "suffix" and r["from"] == "/print")
    ]
    path.write_text(json.dumps(data))
    frozen = await _crawl(site, {**settings, "DEDUP_LEARN_FROZEN": True})
    fetched = _fetched(site, model)
    assert not real - set(fetched)
    assert "dedup/learn/proposed" not in frozen.stats
    assert "dedup/learn/rule/shop.test: .../print = .../skipped" not in frozen.stats
    assert frozen.stats["dedup/url/filtered/learned"] > 100
    assert json.loads(path.read_text()) == data  # frozen: the file is left as it is


@deferred_f_from_coro_f
async def test_an_unreadable_rules_file_stops_the_crawl_with_its_name(
    messy: tuple[Site, MessySite], tmp_path: Any
) -> None:
    site, _ = messy
    path = tmp_path / "rules.json"
    path.write_text('{"version": 1, "hosts": {"shop.test": [{"rule": "regex", "from": "x"}]}}')
    with pytest.raises(ValueError, match=r"DEDUP_LEARN_RULES=.*rules\.json.*unknown rule"):
        await _crawl(site, {"DEDUP_LEARN": True, "DEDUP_LEARN_RULES": str(path)})
    assert site.fetched() == []


def _still_skipped(stats: dict[str, Any]) -> int:
    """Requests skipped under learned rules and never fetched after all."""
    handed_back = stats.get("dedup/learn/released", 0) + stats.get("dedup/learn/audited", 0)
    return int(stats.get("dedup/learn/skipped", 0)) - handed_back


@deferred_f_from_coro_f
async def test_with_sqlite_what_a_rule_skipped_stays_for_the_next_run(
    messy: tuple[Site, MessySite], tmp_path: Any
) -> None:
    site, model = messy
    real, _ = model.reachable([f"http://{host}/" for host in HOSTS])
    settings = {"DEDUP_LEARN": True, "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
    first = await _crawl(site, settings)
    assert not real - set(_fetched(site, model))
    skipped = _still_skipped(first.stats)
    assert skipped > 300
    assert "dedup/frontier/refused" not in first.stats  # skipped rows are not thrown away
    with sqlite3.connect(tmp_path / "dedup.db") as db:
        pending = db.execute("SELECT count(*) FROM pending").fetchone()[0]
        rows = [json.loads(r) for (r,) in db.execute("SELECT request FROM pending LIMIT 20")]
    assert pending == skipped

    # scrapy dedup explain: why one of them is not fetched (the rule, the copy).
    project = Project.load({**ADDON, **settings}, MessySpider)
    explained = explain([row["url"] for row in rows], project=project, namespace="messy")
    for entry in explained:
        assert entry.learned is not None, entry
        rules, copy = entry.learned
        assert rules and urlsplit(copy).hostname == urlsplit(entry.url).hostname
        assert entry.store is not None and "learned rule" in entry.store
    text = format_explain(explained, learning=True)
    assert f"learned rule {' and '.join(explained[0].learned[0])}: a copy of " in text

    # The next run gets them back, with the rules (the store's evidence):
    # still copies of pages kept, so skipped again, but for the sample it
    # fetches to check; no new item; their rows wait for the run after.
    site.reset()
    second = await _crawl(site, settings)
    stats = second.stats
    assert stats["dedup/frontier/restored"] == skipped
    assert stats["dedup/learn/evidence/replayed"] == first.stats["response_received_count"]
    assert second.items == []
    assert 0 < len(site.log) < skipped / 4
    assert stats["dedup/url/filtered/learned"] > skipped / 2
    with sqlite3.connect(tmp_path / "dedup.db") as db:
        assert db.execute("SELECT count(*) FROM pending").fetchone()[0] == _still_skipped(stats)


@pytest.mark.parametrize("in_flight", [1, 8, 16])
@deferred_f_from_coro_f
async def test_a_recrawl_starts_with_the_rules_the_store_learned(
    messy: tuple[Site, MessySite],
    tmp_path: Any,
    caplog: pytest.LogCaptureFixture,
    in_flight: int,
) -> None:
    # A crawl stopped early (CLOSESPIDER_PAGECOUNT) after rules were learned;
    # the next run resumes its frontier with those rules from its first
    # request: together they fetch no more than one crawl, and lose nothing.
    site, model = messy
    real, _ = model.reachable([f"http://{host}/" for host in HOSTS])
    settings = {
        "DEDUP_LEARN": True,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db",
        "CONCURRENT_REQUESTS": in_flight,
    }
    await _crawl(site, settings | {"DEDUP_NAMESPACE": "whole"})  # one crawl, to compare
    whole_fetches = len(site.log)
    first = await _crawl(site, settings | {"CLOSESPIDER_PAGECOUNT": 250})
    first_fetched = _fetched(site, model)
    assert first.stats["finish_reason"] == "closespider_pagecount"
    assert first.stats["dedup/learn/adopted"] >= 4
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        second = await _crawl(site, settings)
    fetched = first_fetched + _fetched(site, model)
    stats = second.stats
    replayed = first.stats["response_received_count"]
    assert f"learned rules from {replayed:,} pages of earlier runs" in caplog.text
    print(f"{whole_fetches} fetches in one crawl, {len(first_fetched)} + {len(site.log)} in two")
    assert stats["dedup/learn/evidence/replayed"] == first.stats["response_received_count"]
    assert not real - set(fetched)
    items = _item_pages(first, model) + _item_pages(second, model)
    assert set(items) == real and max(items.values()) == 1
    # The second run skips from its start (no rule to learn again first).
    assert len(fetched) <= whole_fetches * 1.1  # (pages in flight at the cap, rules timing)
    assert stats["dedup/url/filtered/learned"] >= 100


def _declaring_site(host: str, path: str, query: str) -> Reply | None:
    """users.test: /~alice/ declares /~bob/ as its canonical (wrong: another
    person's page, reached later through /~carol/). blog.test: /post/<n>?view=full
    declares /post/<n> (right: the same article), which each post links to."""
    words = (
        "a personal page with a list of projects, talks and notes about gardening, "
        "cooking and the history of the harbour town"
    )
    if host == "users.test":
        people = {"/": "", "/~alice/": "/~bob/", "/~carol/": "", "/~bob/": ""}
        if path not in people:
            return None
        head = f'<link rel="canonical" href="{people[path]}">' if people[path] else ""
        links = {"/": ["/~carol/", "/~alice/"], "/~carol/": ["/~bob/"]}.get(path, [])
        return _html(f"users {path}", f"{path} {words}", links, head)
    if host == "blog.test":
        if path == "/":
            return _html(
                "blog", "the blog home page " + words, [f"/post/{n}?view=full" for n in range(12)]
            )
        n = path.removeprefix("/post/")
        if not n.isdigit():
            return None
        head = f'<link rel="canonical" href="/post/{n}">' if query else ""
        return _html(f"post {n}", f"post number {n}: {words}", [f"/post/{n}"], head)
    return None


def _html(title: str, text: str, links: list[str], head: str = "") -> Reply:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    body = (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body>"
        f"<main><p>{text}</p></main>{anchors}</body></html>"
    )
    return Reply(body=body, headers={"Content-Type": "text/html; charset=utf-8"})


@deferred_f_from_coro_f
async def test_rel_canonical_is_trusted_per_host_once_verified(fresh_site: Site) -> None:
    fresh_site.handler = _declaring_site
    starts = f"{fresh_site.url('/', 'users.test')},{fresh_site.url('/', 'blog.test')}"
    settings = {**ADDON, "CONCURRENT_REQUESTS": 1, "DEDUP_CANONICAL_TRUST_SAMPLE": 0}

    # Trusting every declaration, /~alice/'s makes /~bob/ "seen": never fetched.
    fresh_site.reset()
    await crawl(MessySpider, {**settings, "DEDUP_CANONICAL_TRUST": "always"}, starts=starts)
    assert "/~bob/" not in fresh_site.fetched()

    # The default trusts a host's declarations once verified; with learning,
    # the declarations and the pages that check them go through the store's
    # evidence log: the same outcome.
    for learn in (False, True):
        fresh_site.reset()
        result = await crawl(MessySpider, {**settings, "DEDUP_LEARN": learn}, starts=starts)
        fetched = fresh_site.fetched()
        assert "/~bob/" in fetched
        assert any(item["url"].endswith("/~bob/") for item in result.items)
        stats = result.stats
        assert stats["dedup/canonical/revoked"] == 1  # users.test, at /~bob/
        # blog.test: the first declared posts are fetched and match; then trusted.
        assert stats["dedup/canonical/trusted"] >= 5
        plain_posts = [p for p in fetched if p.startswith("/post/") and "?" not in p]
        assert 3 <= len(plain_posts) < 12


@pytest.mark.parametrize("moment", [40, 150, 160])  # fetches: before rules, with them, late
def test_kill_9_while_learning_loses_nothing(fresh_site: Site, tmp_path: Any, moment: int) -> None:
    # A worker process learning on the shop (at 127.0.0.1: a subprocess cannot
    # resolve .test names) is killed mid-crawl, once rules skip pages; the
    # same command then runs to the end. Between them, every real page gives
    # its item, and nothing the killed run skipped is lost.
    model = MessySite(products=60, stories=0, shop_host="127.0.0.1")
    fresh_site.handler = model.reply
    real, _ = model.reachable([fresh_site.url("/", host="127.0.0.1")])
    settings = {
        **ADDON,
        "DEDUP_LEARN": True,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db",
        "CONCURRENT_REQUESTS": 2,
    }
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"
    proc = _worker(settings, start, items)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and len(fresh_site.log) < moment:
        time.sleep(0.005)
    assert proc.poll() is None, f"the crawl ended before it could be killed: {len(fresh_site.log)}"
    proc.send_signal(signal.SIGKILL)
    killed_log, _ = proc.communicate(timeout=30)
    first = _fetched(fresh_site, model)
    assert len(set(first) - {None}) < len(real)  # killed before the end
    if moment > 100:
        assert "Learned URL rule" in killed_log  # ...after rules were adopted

    fresh_site.reset()
    proc = _worker(settings, start, items)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log
    second = _fetched(fresh_site, model)
    assert not real - set(first + second), log  # every real page fetched by one run
    kept = read_items(items)
    pages = {
        model.page_id(
            urlsplit(i["url"]).hostname or "", urlsplit(i["url"]).path, urlsplit(i["url"]).query
        )
        for i in kept
    }
    assert pages == real  # and gave its item
    if moment > 100:  # the second run started with what the first learned
        assert "pages of evidence from earlier runs" in log


@pytest.mark.parametrize("waits", [1, 25])  # the first request that waits, or many
def test_kill_9_while_requests_wait_for_a_rule_loses_nothing(
    fresh_site: Site, tmp_path: Path, waits: int
) -> None:
    # The shop's home links every variant of every product, so variants wait
    # for rules not decided yet (DEDUP_LEARN_DEFER). A kill -9 while they
    # wait, then the same command to the end: every real page is fetched by
    # one of the runs and gives its item.
    model = MessySite(products=60, stories=0, shop_host="127.0.0.1")
    fresh_site.handler = model.reply
    real, _ = model.reachable([fresh_site.url("/", host="127.0.0.1")])
    settings = {
        **ADDON,
        "DEDUP_LEARN": True,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db",
        "CONCURRENT_REQUESTS": 2,
    }
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"
    log_path = tmp_path / "killed.log"
    debug = {**settings, "LOG_LEVEL": "DEBUG", "DEDUP_DEBUG": True}
    with log_path.open("w") as log_file:
        proc = _worker(debug, start, items, stdout=log_file)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if log_path.read_text().count("(learned URL rule") >= waits:
                break
            time.sleep(0.002)
        assert proc.poll() is None, "the crawl ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    killed_log = log_path.read_text()
    waited = killed_log.count("not decided yet")
    assert waited >= waits, killed_log[-3000:]  # killed while requests waited
    first = _fetched(fresh_site, model)
    assert len(set(first) - {None}) < len(real)  # killed before the end

    fresh_site.reset()
    proc = _worker(settings, start, items)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log
    second = _fetched(fresh_site, model)
    assert not real - set(first + second), log  # every real page fetched by one run
    pages = Counter(
        model.page_id(
            urlsplit(i["url"]).hostname or "", urlsplit(i["url"]).path, urlsplit(i["url"]).query
        )
        for i in read_items(items)
    )
    # and gave its item (a kill between an item and its page's record may write it twice)
    assert set(pages) == real, pages


# -- workers of one Redis -------------------------------------------------------


class SharedQueueSpider(MessySpider):
    """A worker of a scrapy-redis crawl: it stays up until every worker is
    idle at once (another may still add work, or contradict a rule)."""

    name = "messy"
    idle: ClassVar[dict[int, bool]] = {}

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SharedQueueSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        cls.idle[id(spider)] = False
        crawler.signals.connect(spider.went_idle, signal=scrapy.signals.spider_idle)
        crawler.signals.connect(spider.working, signal=scrapy.signals.response_received)
        return spider

    def went_idle(self) -> None:
        self.idle[id(self)] = True
        if not all(self.idle.values()):
            raise DontCloseSpider

    def working(self) -> None:
        self.idle[id(self)] = False


@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis
@deferred_f_from_coro_f
async def test_three_workers_on_one_redis_learn_together(
    messy: tuple[Site, MessySite], redis_url: str, redis_prefix: str
) -> None:
    # Three workers share scrapy-redis's queue and one dedup namespace: each
    # fetches a third of the pages and learns from all of them.
    site, model = messy
    real, plain = model.reachable([f"http://{host}/" for host in HOSTS])
    settings = {
        **ADDON,
        "DEDUP_LEARN": True,
        "DEDUP_STORE": redis_url,
        "DEDUP_REDIS_PREFIX": redis_prefix,
        "DEDUP_NAMESPACE": "messy",
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "REDIS_URL": redis_url,
        "SCHEDULER_QUEUE_KEY": f"{redis_prefix}:%(spider)s:requests",
        "SCHEDULER_PERSIST": True,  # one worker closing leaves the queue to the others
        "SCHEDULER_IDLE_BEFORE_CLOSE": 0,
        **ONE_AT_A_TIME,
    }
    starts = ",".join(site.url("/", host) for host in HOSTS)
    SharedQueueSpider.idle.clear()
    site.reset()
    workers = await asyncio.gather(
        *(crawl(SharedQueueSpider, settings, starts=starts) for _ in range(3))
    )
    fetched = _fetched(site, model)
    stats = [worker.stats for worker in workers]
    print(
        f"real pages {len(real)}: {plain} fetches without learning, {len(fetched)} by three "
        f"workers ({len(fetched) / len(real):.2f} per page)",
        [{k: v for k, v in s.items() if "learn" in k and "/rule/" not in k} for s in stats],
    )
    assert not real - set(fetched)
    items: Counter[str | None] = Counter()
    for worker in workers:
        items += _item_pages(worker, model)
    assert set(items) == real and max(items.values()) == 1
    # Three requests in flight instead of one, and evidence in another order:
    # 1.47-1.55 in ten runs (one worker: 1.36) with the audit's old one in
    # 40; 1.85-1.94 with the stratified audit (one worker: 1.86). The excess is
    # mostly rules adopted before the page that contradicts them (?color on
    # shirts) arrived, whose skipped requests are then fetched.
    # 1.95-1.97 here and 2.09 on CI's floors run with requests that wait for
    # undecided rules (DEDUP_LEARN_DEFER): each worker decides its waits alone.
    assert len(fetched) / len(real) <= 2.2
    # Each worker fetched part of the site and learned from the others' pages.
    for worker_stats in stats:
        assert worker_stats["response_received_count"] > len(fetched) / 6
        assert worker_stats["dedup/learn/evidence/others"] > len(fetched) / 3
    assert sum(s.get("dedup/url/filtered/learned", 0) for s in stats) >= 400
    assert not [k for s in stats for k in s if k.startswith("dedup/learn/rule/wiki.test")]
