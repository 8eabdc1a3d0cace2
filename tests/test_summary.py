"""What the log tells a user: the start line, progress, and the summary."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
import scrapy
from scrapy import signals
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.request import fingerprint
from scrapy.utils.test import get_crawler

from scrapy_dedup.summary import CrawlSummary, summary_line
from tests.conftest import CrawlResult, crawl
from tests.messy_site import MessySite
from tests.site import Site, page, url_stage_routes
from tests.test_learn_crawl import MessySpider

ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}
# Which copy of a page comes first depends on the order responses arrive: one
# request at a time, plain Scrapy and the add-on see the links in one order.
ONE_AT_A_TIME = {"CONCURRENT_REQUESTS": 1}


def _summary(caplog: pytest.LogCaptureFixture) -> str:
    (line,) = [
        r.getMessage()
        for r in caplog.records
        if r.name == "scrapy_dedup.summary" and r.getMessage().startswith("scrapy-dedup summary:")
    ]
    return line


def _saved(summary: str) -> int:
    found = re.search(r"([\d,]+) fetch(?:es)? saved beyond Scrapy's own filter", summary)
    assert found, summary
    return int(found.group(1).replace(",", ""))


async def _plain_and_dedup(
    site: Site, caplog: pytest.LogCaptureFixture, settings: dict[str, Any], **kwargs: Any
) -> tuple[CrawlResult, CrawlResult, str]:
    """The same crawl with plain Scrapy, then with the add-on (and its summary;
    ``site.log`` is then the add-on's crawl)."""
    site.reset()
    plain = await crawl(settings={**ONE_AT_A_TIME, **settings}, **kwargs)
    site.reset()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        dedup = await crawl(settings={**ADDON, **ONE_AT_A_TIME, **settings}, **kwargs)
    return plain, dedup, _summary(caplog)


def _fetches(result: CrawlResult) -> int:
    return int(result.stats["downloader/request_count"])


@deferred_f_from_coro_f
async def test_links_to_sections_of_a_page_are_no_saving(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    # A wiki: every page links to sections of the others (#History, #See_also):
    # Scrapy's own fingerprint drops the fragment, so it fetches each page once too.
    pages = [f"/wiki/{n}" for n in range(6)]
    sections = ("", "#History", "#See_also", "#References")
    links = [f"{path}{section}" for path in pages for section in sections]
    fresh_site.routes.update({path: (lambda q, p=path: page(p, *links)) for path in pages})
    fresh_site.routes["/"] = lambda q: page("Home", *links)
    plain, dedup, summary = await _plain_and_dedup(
        fresh_site, caplog, {}, start=[fresh_site.url("/")]
    )
    assert dedup.stats["dedup/url/filtered"] > 100  # every #section link, on every page
    assert _fetches(plain) == _fetches(dedup) == len(pages) + 1
    assert _saved(summary) == 0, summary


@deferred_f_from_coro_f
async def test_the_summary_saves_what_plain_scrapy_fetches_more(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    # Copies behind tracking parameters, a #fragment, a start URL linked again;
    # no copy links anywhere new, so the estimate is exact.
    home = page(
        "Home",
        "/a?utm_source=mail",
        "/a",
        "/a?utm_medium=email&utm_source=feed",
        "/b#top",
        "/b",
        "/b?ref=footer",
        "/?utm_campaign=spring",
        "/c?gclid=1",
        "/c?gclid=2",
        "/c",
    )
    fresh_site.routes["/"] = lambda q: home
    for name in "abc":
        fresh_site.routes[f"/{name}"] = lambda q, n=name: page(f"Page {n} {q}", "/", "/a#x")
    plain, dedup, summary = await _plain_and_dedup(
        fresh_site, caplog, {}, start=[fresh_site.url("/")]
    )
    saved = _saved(summary)
    assert _fetches(plain) == 11 and _fetches(dedup) == 4
    assert saved == _fetches(plain) - _fetches(dedup), summary
    assert "(6 by URL rules, 1 by start URLs linked again)" in summary


@deferred_f_from_coro_f
async def test_the_summary_never_claims_more_than_plain_scrapy_fetches_more(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    # Here a copy links to more copies: www.example.test serves the whole site
    # again. The add-on skips its first page and never sees the rest; plain
    # Scrapy fetches them all. The summary counts what the add-on skipped: the
    # difference less the pages only the skipped copies link to (its stated error).
    fresh_site.routes.update(url_stage_routes())
    fresh_site.reset()
    await crawl(settings=ONE_AT_A_TIME, start=[fresh_site.url("/")])
    mirror = [path for host, path in fresh_site.log if host.startswith("www.")]
    plain, dedup, summary = await _plain_and_dedup(
        fresh_site, caplog, {}, start=[fresh_site.url("/")]
    )
    assert not [host for host, _ in fresh_site.log if host.startswith("www.")]
    saved = _saved(summary)
    assert len(mirror) > 10
    # (The mirror's first page is a fetch saved: plain Scrapy would fetch it.)
    assert saved == _fetches(plain) - _fetches(dedup) - (len(mirror) - 1) > 0, summary
    # A redirect let through to a URL Scrapy had seen: one fetch more than Scrapy.
    assert "less 1 fetched that Scrapy's filter drops" in summary


@deferred_f_from_coro_f
async def test_the_log_says_what_is_on_how_it_goes_and_what_it_saved(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    fresh_site.routes.update(url_stage_routes())
    settings = {**ADDON, "LOGSTATS_INTERVAL": 0.3, "DOWNLOAD_DELAY": 0.1}
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        result = await crawl(settings=settings, start=[fresh_site.url("/")])
    lines = [r.getMessage() for r in caplog.records if r.name == "scrapy_dedup.summary"]
    start = [line for line in lines if line.startswith("scrapy-dedup on:")]
    assert start == [
        "scrapy-dedup on: learned URL rules, rel=canonical, content dedup (exact + near "
        "minhash), URL dupefilter; store: memory (this crawl only)"
    ]
    assert any(line.startswith("scrapy-dedup: filtered ") for line in lines)  # progress
    stats = result.stats
    (summary,) = [line for line in lines if line.startswith("scrapy-dedup summary:")]
    saved = stats["dedup/url/saved"] - stats.get("dedup/url/scrapy_filters", 0)
    assert f"{saved} fetch{'es' if saved != 1 else ''} saved beyond Scrapy's own filter" in summary
    assert f"{stats['dedup/items/unique']} kept" in summary
    assert lines[-1] == summary  # the last thing dedup says


def test_the_summary_counts_what_each_stage_saved() -> None:
    stats = {
        "dedup/url/seen": 100,
        "dedup/url/filtered": 74,
        "dedup/url/filtered/exact": 20,
        # Of the filtered requests, those Scrapy's own filter would have fetched:
        "dedup/url/saved": 56,
        "dedup/url/saved/url_rules": 31,
        "dedup/url/saved/rel_canonical": 5,
        "dedup/url/saved/learned": 19,
        "dedup/url/saved/dont_filter": 1,
        "dedup/url/scrapy_filters": 2,  # fetched, where Scrapy's filter would not
        "dedup/learn/released": 3,  # skipped, then fetched after all: a rule failed
        "dedup/learn/audited": 1,  # ... checked at the end
        "downloader/response_count": 100,
        "downloader/response_bytes": 100 * 20480,
        "dedup/items/unique": 80,
        "dedup/items/exact": 3,
        "dedup/items/near": 2,
        "dedup/items/unchanged": 4,
        "dedup/canonical/applied": 7,
        "dedup/learn/rules": 2,
    }
    assert summary_line(stats) == (
        "50 fetches saved beyond Scrapy's own filter (31 by URL rules, 5 by rel=canonical, "
        "15 by learned rules, 1 by start URLs linked again, less 2 fetched that Scrapy's "
        "filter drops), about 1,000.0 KiB not downloaded; 9 duplicate items "
        "(3 exact, 2 near, 4 unchanged), 80 kept; 7 pages filed under rel=canonical; "
        "2 learned URL rules"
    )
    assert summary_line({}) is None


def test_one_of_a_kind_is_said_in_the_singular() -> None:
    line = summary_line(
        {
            "dedup/url/filtered": 1,
            "dedup/url/saved": 1,
            "dedup/url/saved/url_rules": 1,
            "dedup/items/unique": 1,
            "dedup/items/canonical": 1,
            "dedup/canonical/applied": 1,
            "dedup/learn/rules": 1,
            "dedup/store/errors": 1,
        }
    )
    assert line == (
        "1 fetch saved beyond Scrapy's own filter (1 by URL rules), bytes not estimated "
        "(fewer than 20 responses to average); 1 duplicate item (1 canonical), 1 kept; "
        "1 page filed under rel=canonical; 1 learned URL rule; 1 store error"
    )


def test_the_summary_never_counts_below_zero() -> None:
    # Fifty pages declaring one target that lost trust refetch it fifty times.
    line = summary_line(
        {
            "dedup/url/filtered": 10,
            "dedup/url/filtered/rel_canonical": 1,
            "dedup/url/saved": 10,
            "dedup/url/saved/url_rules": 9,
            "dedup/url/saved/rel_canonical": 1,
            "dedup/canonical/refetched": 50,
            "downloader/response_count": 20,
            "downloader/response_bytes": 20_000,
        }
    )
    assert line is not None and "-" not in line
    assert line.startswith("9 fetches saved beyond Scrapy's own filter (9 by URL rules)")


def test_bytes_are_estimated_from_enough_responses_only() -> None:
    # A second run: 169 requests skipped, 2 responses (robots.txt, the start page).
    stats = {
        "dedup/url/filtered": 169,
        "dedup/url/saved": 169,
        "dedup/url/saved/previous_run": 169,
        "downloader/response_count": 2,
        "downloader/response_bytes": 10_000,
    }
    line = summary_line(stats)
    assert line == (
        "169 fetches saved beyond Scrapy's own filter (169 by earlier runs), bytes not "
        "estimated (fewer than 20 responses to average)"
    )
    stats.update({"downloader/response_count": 20, "downloader/response_bytes": 20 * 1024})
    assert summary_line(stats) == (
        "169 fetches saved beyond Scrapy's own filter (169 by earlier runs), "
        "about 169.0 KiB not downloaded"
    )


@deferred_f_from_coro_f
async def test_the_summary_and_the_report_count_every_item_dropped(
    fresh_site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A second run fetches the kept pages again (DEDUP_RECRAWL_AFTER): their
    # items, unchanged, are dropped too, and Scrapy counts them in item_dropped_count.
    words = " ".join(f"word{n}" for n in range(40))
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/a", "/b", "/copy-of-a"),
            "/a": lambda q: page("A", text=f"Page A {words}"),
            "/copy-of-a": lambda q: page("A", text=f"Page A {words}"),
            "/b": lambda q: page("B", text=f"Page B {words}"),
        }
    )
    report = tmp_path / "report"
    settings = {
        **ADDON,
        "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db",
        "DEDUP_RECRAWL_AFTER": "1s",
        "DEDUP_REPORT": str(report),
    }
    await crawl(settings=settings, start=[fresh_site.url("/")])
    time.sleep(2.1)  # times are kept to the second
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        second = await crawl(settings=settings, start=[fresh_site.url("/")])
    stats = second.stats
    assert stats["dedup/items/unchanged"] >= 2
    summary = _summary(caplog)
    dropped = re.search(r"([\d,]+) duplicate items \(([^)]*)\)", summary)
    assert dropped, summary
    assert int(dropped.group(1)) == stats["item_dropped_count"], summary
    assert f"{stats['dedup/items/unchanged']} unchanged" in dropped.group(2)
    totals = json.loads(report.with_suffix(".json").read_text("utf-8"))["totals"]
    assert totals["items_dropped"] == stats["item_dropped_count"]


def test_the_progress_line_counts_every_item_dropped(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(settings_dict={"LOGSTATS_INTERVAL": 60.0})
    summary = CrawlSummary(crawler, describe_store=lambda: "memory")
    for kind, n in (("exact", 1), ("near", 2), ("canonical", 3), ("unchanged", 4)):
        crawler.stats.set_value(f"dedup/items/{kind}", n)
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        summary._log_progress()
    assert caplog.records[-1].getMessage() == (
        "scrapy-dedup: filtered 0 URLs (at 0/min), dropped 10 duplicate items (at 10/min)"
    )
    # one of each is said in the singular
    crawler = get_crawler(settings_dict={"LOGSTATS_INTERVAL": 60.0})
    summary = CrawlSummary(crawler, describe_store=lambda: "memory")
    crawler.stats.set_value("dedup/url/filtered", 1)
    crawler.stats.set_value("dedup/items/near", 1)
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        summary._log_progress()
    assert caplog.records[-1].getMessage() == (
        "scrapy-dedup: filtered 1 URL (at 1/min), dropped 1 duplicate item (at 1/min)"
    )


class _SeenSpider(MessySpider):
    """Notes Scrapy's fingerprint of every request the crawl scheduled or filtered."""

    seen: ClassVar[set[bytes]] = set()

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        spider = super().from_crawler(crawler, *args, **kwargs)
        for signal in (signals.request_scheduled, signals.request_dropped):
            crawler.signals.connect(spider.note, signal=signal)
        return spider

    def note(self, request: scrapy.Request) -> None:
        self.seen.add(fingerprint(request))


@deferred_f_from_coro_f
async def test_on_the_messy_site_the_error_is_what_skipped_copies_link_to(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    # Learned URL rules skip copies whose links carry their own ?sid=: plain
    # Scrapy follows those links to more copies, which the add-on never sees.
    # The summary counts every fetch it skipped, and the difference from plain
    # Scrapy is exactly what those unseen links cost.
    model = MessySite(products=12, stories=4)
    fresh_site.handler = model.reply
    starts = ",".join(fresh_site.url("/", host) for host in ("shop.test", "news.test"))
    _SeenSpider.seen = set()
    plain = await crawl(_SeenSpider, ONE_AT_A_TIME, starts=starts)
    fetched_by_plain = set(_SeenSpider.seen)
    _SeenSpider.seen = set()
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        dedup = await crawl(
            _SeenSpider, {**ADDON, **ONE_AT_A_TIME, "DEDUP_LEARN": True}, starts=starts
        )
    saved = _saved(_summary(caplog))
    unseen = len(fetched_by_plain - _SeenSpider.seen)
    print(
        f"plain Scrapy {_fetches(plain)} fetches, the add-on {_fetches(dedup)}; "
        f"summary: {saved} saved; {unseen} only skipped copies link to"
    )
    assert dedup.stats["dedup/learn/rules"] > 0 and saved > 0
    assert saved == _fetches(plain) - _fetches(dedup) - unseen
