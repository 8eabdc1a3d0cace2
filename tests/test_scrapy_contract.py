"""Scrapy's own dupefilter tests, run against CanonicalDupeFilter.

The cases come from Scrapy's ``tests/test_dupefilters.py`` (``TestRFPDupeFilter``,
Scrapy 2.18), with ``RFPDupeFilter`` replaced by ours and built the way Scrapy's
scheduler builds it. What differs on purpose is said where it differs: our log
lines are our own (they name the canonical URL and the rule), and with
``JOBDIR`` the seen keys live in an SQLite file, not ``requests.seen``.
Then: stats are readable mid-crawl, as monitoring reads them.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.core.scheduler import Scheduler
from scrapy.http import Request
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.python import to_bytes
from scrapy.utils.test import get_crawler

from scrapy_dedup import CanonicalDupeFilter
from tests.conftest import LinkSpider, crawl
from tests.site import Site, page

DEDUP = {"DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter"}


def _get_dupefilter(
    *, crawler: Any = None, settings: dict[str, Any] | None = None, open_: bool = True
) -> CanonicalDupeFilter:
    """Scrapy's helper: the dupefilter the scheduler builds."""
    if crawler is None:
        crawler = get_crawler(settings_dict={**DEDUP, **(settings or {})})
    scheduler = build_from_crawler(Scheduler, crawler)
    dupefilter = scheduler.df
    assert isinstance(dupefilter, CanonicalDupeFilter)
    if open_:
        dupefilter.open()
    return dupefilter


class LowercaseFingerprinter:
    """Scrapy's ``test_request_fingerprint``: a fingerprinter that merges URLs by case."""

    def fingerprint(self, request: Request) -> bytes:
        fp = hashlib.sha1()
        fp.update(to_bytes(request.url.lower()))
        return fp.digest()


def test_df_from_crawler_scheduler() -> None:
    crawler = get_crawler(settings_dict={**DEDUP, "DUPEFILTER_DEBUG": True})
    scheduler = build_from_crawler(Scheduler, crawler)
    assert scheduler.df.debug


def test_filter() -> None:
    dupefilter = _get_dupefilter()
    r1 = Request("http://scrapytest.org/1")
    r2 = Request("http://scrapytest.org/2")
    r3 = Request("http://scrapytest.org/2")

    assert not dupefilter.request_seen(r1)
    assert dupefilter.request_seen(r1)

    assert not dupefilter.request_seen(r2)
    assert dupefilter.request_seen(r3)

    dupefilter.close("finished")


def test_dupefilter_path(tmp_path: Path) -> None:
    r1 = Request("http://scrapytest.org/1")
    r2 = Request("http://scrapytest.org/2")

    df = _get_dupefilter(settings={"JOBDIR": str(tmp_path)}, open_=False)
    try:
        df.open()
        assert not df.request_seen(r1)
        assert df.request_seen(r1)
    finally:
        df.close("finished")

    df2 = _get_dupefilter(settings={"JOBDIR": str(tmp_path)}, open_=False)
    assert df is not df2
    try:
        df2.open()
        assert df2.request_seen(r1)
        assert not df2.request_seen(r2)
        assert df2.request_seen(r2)
    finally:
        df2.close("finished")


def test_request_fingerprint() -> None:
    """A custom ``REQUEST_FINGERPRINTER_CLASS`` that merges URLs merges them under
    our filter too: the fingerprinter decides which requests are the same, as it
    does for Scrapy's (it fingerprints the request with its canonical URL)."""
    dupefilter = _get_dupefilter()
    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request("http://scrapytest.org/INDEX.html")

    assert not dupefilter.request_seen(r1)
    assert not dupefilter.request_seen(r2)

    dupefilter.close("finished")

    settings = {"REQUEST_FINGERPRINTER_CLASS": LowercaseFingerprinter}
    case_insensitive_dupefilter = _get_dupefilter(settings=settings)

    assert not case_insensitive_dupefilter.request_seen(r1)
    assert case_insensitive_dupefilter.request_seen(r2)
    # ... and our canonical URL still merges what the fingerprinter alone would not.
    assert case_insensitive_dupefilter.request_seen(
        Request("https://scrapytest.org/index.html?utm_source=x#top")
    )

    case_insensitive_dupefilter.close("finished")


def test_log(caplog: pytest.LogCaptureFixture) -> None:
    """``dupefilter/filtered`` is exact right after ``log()``, as Scrapy's test reads it."""
    crawler = get_crawler(scrapy.Spider, settings_dict={**DEDUP, "DUPEFILTER_DEBUG": False})
    spider = scrapy.Spider.from_crawler(crawler, name="simple")
    dupefilter = _get_dupefilter(crawler=crawler)

    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request("http://scrapytest.org/index.html")

    with caplog.at_level(logging.DEBUG):
        dupefilter.log(r1, spider)
        dupefilter.log(r2, spider)

    assert crawler.stats.get_value("dupefilter/filtered") == 2
    # Our wording: the first filtered request, its key, and how to see them all.
    lines = [r.getMessage() for r in caplog.records if "Filtered duplicate" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith(
        "Filtered duplicate request: <GET http://scrapytest.org/index.html>"
    )
    assert "no more duplicates will be shown" in lines[0]

    dupefilter.close("finished")


def test_log_debug(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(scrapy.Spider, settings_dict={**DEDUP, "DUPEFILTER_DEBUG": True})
    spider = scrapy.Spider.from_crawler(crawler, name="simple")
    dupefilter = _get_dupefilter(crawler=crawler)

    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request(
        "http://scrapytest.org/index.html",
        headers={"Referer": "http://scrapytest.org/INDEX.html"},
    )

    with caplog.at_level(logging.DEBUG):
        dupefilter.log(r1, spider)
        dupefilter.log(r2, spider)

    assert crawler.stats.get_value("dupefilter/filtered") == 2
    lines = [r.getMessage() for r in caplog.records if "Filtered duplicate" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].startswith(
        "Filtered duplicate request: <GET http://scrapytest.org/index.html>"
    )
    assert lines[0].endswith("(referer: None)") or "referer: None" in lines[0]
    assert "referer: http://scrapytest.org/INDEX.html" in lines[1]

    dupefilter.close("finished")


class _ReadsStatsSpider(LinkSpider):
    """Reads the stats in the callback of a page served after a pause, as
    LogStats or a Prometheus exporter would while the crawl runs."""

    seen_mid_crawl: dict[str, Any]

    def parse(self, response: scrapy.http.Response) -> Any:
        if response.url.endswith("/slow"):
            stats = self.crawler.stats
            type(self).seen_mid_crawl = {
                key: stats.get_value(key)
                for key in (
                    "dupefilter/filtered",
                    "dedup/url/filtered",
                    "dedup/url/filtered/tracking_param",
                    "dedup/url/seen",
                )
            }
        yield from super().parse(response)


@deferred_f_from_coro_f
async def test_stats_lag_at_most_about_a_second_of_crawl_time(fresh_site: Site) -> None:
    """Ten tracking variants are filtered at once; a page answered 2.5 s later
    reads every stat already counted (batched stats are flushed every second)."""
    variants = [f"/a?utm_source={n}" for n in range(11)]
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", *variants, "/slow"),
            "/a": lambda q: page("A"),
            "/slow": lambda q: (time.sleep(2.5), page("Slow"))[1],
        }
    )
    _ReadsStatsSpider.seen_mid_crawl = {}
    result = await crawl(
        _ReadsStatsSpider,
        settings={**DEDUP, "CONCURRENT_REQUESTS": 1},
        start=[fresh_site.url("/")],
    )
    assert sorted(fresh_site.fetched()) == ["/", "/a?utm_source=0", "/slow"]
    assert _ReadsStatsSpider.seen_mid_crawl == {
        "dupefilter/filtered": 10,
        "dedup/url/filtered": 10,
        "dedup/url/filtered/tracking_param": 10,
        "dedup/url/seen": 3,
    }
    assert result.stats["dedup/url/filtered"] == 10


@deferred_f_from_coro_f
async def test_a_fingerprinter_that_merges_urls_saves_their_fetches(fresh_site: Site) -> None:
    """With Scrapy's filter, this fingerprinter fetches one of /Guide and /guide;
    with ours too, and the tracking variant is still merged."""
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/Guide", "/guide", "/GUIDE/?utm_source=x"),
            "/Guide": lambda q: page("Guide"),
            "/guide": lambda q: page("Guide"),
            "/GUIDE/": lambda q: page("Guide"),
        }
    )
    result = await crawl(
        settings={**DEDUP, "REQUEST_FINGERPRINTER_CLASS": LowercaseFingerprinter},
        start=[fresh_site.url("/")],
    )
    assert sorted(fresh_site.fetched()) == ["/", "/Guide"]
    assert result.stats["dupefilter/filtered"] == 2
