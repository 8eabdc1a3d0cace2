"""What the log tells a user: the start line, progress, and the summary."""

from __future__ import annotations

import logging

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.summary import summary_line
from tests.conftest import crawl
from tests.site import Site, url_stage_routes

ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}


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
        "scrapy-dedup on: rel=canonical, content dedup (exact + near minhash), URL dupefilter; "
        "store: memory (this crawl only)"
    ]
    assert any(line.startswith("scrapy-dedup: filtered ") for line in lines)  # progress
    stats = result.stats
    saved = stats["dedup/url/filtered"] - stats.get("dedup/url/filtered/exact", 0)
    assert saved > 0
    (summary,) = [line for line in lines if line.startswith("scrapy-dedup summary:")]
    assert f"{saved} fetches saved beyond Scrapy's own filter ({saved} by URL rules)" in summary
    assert f"{stats['dedup/items/unique']} kept" in summary
    assert lines[-1] == summary  # the last thing dedup says


def test_the_summary_counts_what_each_stage_saved() -> None:
    stats = {
        "dedup/url/seen": 100,
        "dedup/url/filtered": 74,
        "dedup/url/filtered/exact": 20,  # Scrapy's own filter drops these too
        "dedup/url/filtered/rel_canonical": 5,
        "dedup/url/filtered/learned": 19,
        "dedup/learn/released": 3,  # skipped, then fetched after all: a rule failed
        "dedup/learn/audited": 1,  # ... checked at the end
        "downloader/response_count": 100,
        "downloader/response_bytes": 100 * 20480,
        "dedup/items/unique": 80,
        "dedup/items/exact": 3,
        "dedup/items/near": 2,
        "dedup/canonical/applied": 7,
        "dedup/learn/rules": 2,
    }
    assert summary_line(stats) == (
        "50 fetches saved beyond Scrapy's own filter (30 by URL rules, 5 by rel=canonical, "
        "15 by learned rules), about 1,000.0 KiB not downloaded; 5 duplicate items "
        "(3 exact, 2 near), 80 kept; 7 pages filed under rel=canonical; 2 learned URL rules"
    )
    assert summary_line({}) is None


def test_the_summary_never_counts_below_zero() -> None:
    # Fifty pages declaring one target that lost trust refetch it fifty times.
    line = summary_line(
        {
            "dedup/url/filtered": 10,
            "dedup/url/filtered/rel_canonical": 1,
            "dedup/canonical/refetched": 50,
            "downloader/response_count": 10,
            "downloader/response_bytes": 10_000,
        }
    )
    assert line is not None and "-" not in line
    assert line.startswith("9 fetches saved beyond Scrapy's own filter (9 by URL rules)")
