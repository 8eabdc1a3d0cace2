"""``DEDUP_REPORT``: the JSON report and the HTML page a user opens after a crawl."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.report import (
    MEMBERS,
    TOP_CLUSTERS,
    TRACKED_CLUSTERS,
    ReportCollector,
    build_report,
    render_html,
    report_paths,
)
from scrapy_dedup.summary import summary_line
from tests.browser import render
from tests.conftest import crawl
from tests.site import Site, url_stage_routes
from tests.test_example_project import PROJECT, _stat


class _Resources(HTMLParser):
    """Everything a page would fetch: scripts, stylesheets, images, frames, CSS url()."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script":
            self.scripts += 1
        for name in ("src", "srcset", "data", "poster"):
            if values.get(name):
                self.fetched.append(f"{tag} {name}={values[name]}")
        if tag == "link" and values.get("href"):
            self.fetched.append(f"link href={values['href']}")

    def handle_data(self, data: str) -> None:
        if "url(" in data or "@import" in data:
            self.fetched.append(data[:80])


def _crawl_with_report(tmp_path: Path, *args: str) -> tuple[str, Path]:
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SCRAPY_")
    }
    report = tmp_path / "out" / "dedup-report"
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "site", "-s", f"DEDUP_REPORT={report}", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr, report


def test_scrapy_crawl_writes_a_report_a_browser_opens_offline(tmp_path: Path) -> None:
    log, report = _crawl_with_report(tmp_path, "-O", str(tmp_path / "items.jsonl"))
    json_path, html_path = report.with_suffix(".json"), report.with_suffix(".html")
    assert f"scrapy-dedup report: {html_path} and {json_path}" in log
    data = json.loads(json_path.read_text("utf-8"))

    # The numbers are the crawl's: the same as the stats dump and the summary line.
    totals = data["totals"]
    assert totals["requests_filtered"] == _stat(log, "dedup/url/filtered") > 0
    assert totals["items_kept"] == _stat(log, "dedup/items/unique")
    assert totals["responses"] == _stat(log, "downloader/response_count")
    assert data["items_dropped"]["near"] == 1
    (summary,) = re.findall(r"scrapy-dedup summary: (.*)", log)
    assert f"{totals['fetches_saved']} fetches saved beyond Scrapy's own filter" in summary
    # (Net of the fetches Scrapy's filter would not have made: a redirect let through.)
    by_source = sum(row["fetches"] for row in data["savings"])
    assert by_source - totals["fetches_scrapy_filters"] == totals["fetches_saved"] > 0

    # Which rule merged which URL: the demo links ?utm_source= variants.
    rules = {entry["rule"]: entry for entry in data["url_rules"]}
    tracking = rules["tracking_param"]
    assert tracking["urls"] == _stat(log, "dedup/url/filtered/tracking_param")
    assert tracking["examples"]
    for example in tracking["examples"]:
        names = {pair.split("=")[0] for pair in urlsplit(example["url"]).query.split("&")}
        assert names & {"utm_source", "ref", "gclid"}
        assert not any(f"{name}=" in example["key"] for name in names)
        # ... and the URL it was seen as, as the site links it (http, not the key's https).
        assert example["seen_as"].startswith("http://") and "utm_" not in example["seen_as"]
    assert all(ex["seen_as"] == ex["url"] for ex in rules["exact"]["examples"])

    # The press release under another city name folds into the first one kept.
    clusters = data["duplicate_clusters"]["shown"]
    (press,) = [c for c in clusters if "/press/" in c["kept"]]
    (member,) = press["members"]
    assert member["kind"] == "near" and 0.75 <= member["similarity"] < 1
    assert {urlsplit(press["kept"]).path, urlsplit(member["url"]).path} == {
        "/press/berlin",
        "/press/lisbon",
    }
    # The print view's rel=canonical is applied, with the page and its target.
    canonical = data["canonical"]
    assert canonical["applied"] == 1
    (applied,) = canonical["examples"]["applied"]
    assert applied["url"].endswith("/print") and applied["canonical"] + "/print" == applied["url"]
    # ... and the item of the print view, if it was fetched, is folded in under its own URL.
    for cluster in clusters:
        for m in cluster["members"]:
            assert m["url"] != cluster["kept"], cluster
    # Learning is on (the default) and adopts nothing here: the demo's copies
    # are the fixed URL rules' (tracking, slashes, order) and rel=canonical's.
    assert data["learned_rules"] == {"rules": [], "other_rules": 0}

    # The HTML page: nothing to fetch, no script, and a browser opens it cleanly.
    page = html_path.read_text("utf-8")
    resources = _Resources()
    resources.feed(page)
    assert resources.fetched == [] and resources.scripts == 0
    rendered = render(html_path)
    assert rendered.console == [] and rendered.fetched == []
    dom = rendered.dom
    for key, value in totals.items():
        if key == "requests_seen" or key == "requests_filtered":
            continue
        if key == "fetches_scrapy_filters" and not value:  # a row only when it is not 0
            assert f'data-key="{key}"' not in dom
            continue
        cell = re.search(rf'data-key="{key}">([\d,]+)', dom)
        assert cell and cell.group(1) == f"{value:,}", key
    assert f"{tracking['urls']:,}" in dom and escape(tracking["examples"][0]["url"]) in dom
    assert escape(press["kept"]) in dom and escape(member["url"]) in dom
    for name, value in data["stats"].items():
        assert re.search(rf"<td>{re.escape(name)}</td><td class=\"n\">{value:,}</td>", dom), name


def test_the_browser_check_sees_a_page_that_fetches(tmp_path: Path) -> None:
    # The control: what test_scrapy_crawl_writes_a_report_a_browser_opens_offline
    # asserts of the report would fail for a page that loads anything or errs.
    page = tmp_path / "fetches.html"
    page.write_text(
        '<!DOCTYPE html><html><body><p style="background:url(http://a.invalid/bg.png)">x</p>'
        '<img src="https://b.invalid/i.png"><svg><image href="http://c.invalid/s.png"/></svg>'
        "<script>console.error('oops')</script></body></html>",
        encoding="utf-8",
    )
    rendered = render(page)
    hosts = {re.search(r"[a-c]\.invalid", line).group(0) for line in rendered.fetched}  # type: ignore[union-attr]
    assert hosts == {"a.invalid", "b.invalid", "c.invalid"}
    assert rendered.console and "oops" in rendered.console[0]


def _stats(**extra: int) -> dict[str, int]:
    return {
        "dedup/url/seen": 100,
        "dedup/url/filtered": 40,
        "dedup/url/filtered/exact": 10,
        "dedup/url/filtered/tracking_param": 25,
        "dedup/url/filtered/previous_run": 5,
        # Of the 30 others, what Scrapy's own filter would have fetched (its
        # fingerprint new to the crawl): `#fragment` links are not among them.
        "dedup/url/saved": 28,
        "dedup/url/saved/url_rules": 23,
        "dedup/url/saved/previous_run": 5,
        "downloader/response_count": 60,
        "downloader/response_bytes": 60 * 1000,
        "dedup/items/unique": 50,
        **extra,
    }


def test_the_report_agrees_with_the_summary_line() -> None:
    stats = _stats(**{"dedup/items/exact": 3, "dedup/items/near": 2})
    data = build_report(
        ReportCollector(), stats, spider="s", version="0", components=[], store="memory"
    )
    line = summary_line(stats)
    assert line is not None
    assert line.startswith("28 fetches saved beyond Scrapy's own filter (23 by URL rules, 5 by")
    assert data["totals"]["fetches_saved"] == 28
    assert {row["key"]: row["fetches"] for row in data["savings"]} == {
        "url_rules": 23,
        "previous_run": 5,
        "rel_canonical": 0,
        "learned": 0,
        "dont_filter": 0,
    }
    assert data["totals"]["bytes_not_downloaded"] == 28_000
    assert data["items_dropped"] == {"exact": 3, "near": 2, "canonical": 0, "unchanged": 0}


def test_a_large_crawl_gives_a_bounded_report() -> None:
    collector = ReportCollector()
    # Many kept pages with one duplicate each, a few with many.
    for n in range(TRACKED_CLUSTERS + 500):
        collector.item_dropped("exact", f"https://s.test/{n}", f"https://s.test/{n}?x", "", 1.0)
    for n in range(TOP_CLUSTERS):
        for m in range(MEMBERS + 5):
            kept, url = f"https://s.test/{n}", f"https://s.test/{n}/{m}"
            collector.item_dropped("near", kept, url, "", 0.9)
    for n in range(1000):
        collector.url_filtered(("tracking_param", "www"), f"https://s.test/{n}?utm_source=a", "k")
    data = build_report(collector, _stats(), spider="s", version="0", components=[], store="m")
    clusters = data["duplicate_clusters"]
    assert len(clusters["shown"]) == TOP_CLUSTERS
    assert all(len(c["members"]) == MEMBERS for c in clusters["shown"])
    assert clusters["shown"][0]["duplicates"] == MEMBERS + 6
    # Every duplicate is counted, shown or not.
    total = sum(c["duplicates"] for c in clusters["shown"]) + clusters["other_duplicates"]
    assert total == TRACKED_CLUSTERS + 500 + TOP_CLUSTERS * (MEMBERS + 5)
    assert clusters["clusters"] == TRACKED_CLUSTERS + 500
    assert clusters["other_clusters"] == TRACKED_CLUSTERS + 500 - TOP_CLUSTERS
    assert len(collector.url_examples["www"]) == 5
    assert len(json.dumps(data)) < 200_000
    assert len(render_html(data)) < 1_000_000


def test_report_paths() -> None:
    for given in ("out/r", "out/r.json", "out/r.html"):
        assert report_paths(given) == (Path("out/r.json"), Path("out/r.html"))


def test_the_page_escapes_what_the_crawl_found() -> None:
    collector = ReportCollector()
    hostile = 'https://s.test/"><script>alert(1)</script>'
    collector.item_dropped("exact", hostile, hostile + "?a", "identical text", 1.0)
    collector.canonical_seen("apply", "", hostile, hostile)
    page = render_html(
        build_report(collector, _stats(), spider="<b>", version="0", components=[], store="m")
    )
    resources = _Resources()
    resources.feed(page)
    assert resources.scripts == 0 and "&lt;script&gt;" in page


@pytest.mark.parametrize("bad", ["/proc/forbidden/report", "/dev/null/report"])
def test_a_report_that_cannot_be_written_says_so(tmp_path: Path, bad: str) -> None:
    from scrapy_dedup.report import write_report

    data = build_report(ReportCollector(), {}, spider="s", version="0", components=[], store="m")
    with pytest.raises(OSError):
        write_report(bad, data)


def test_a_report_path_with_an_unknown_field_stops_the_crawl_at_start() -> None:
    from scrapy.settings import Settings

    from scrapy_dedup.config import DedupConfig

    with pytest.raises(ValueError, match=r"DEDUP_REPORT=.*only %\(name\)s and %\(time\)s"):
        DedupConfig.from_settings(Settings({"DEDUP_REPORT": "r-%(spider)s"}))
    config = DedupConfig.from_settings(Settings({"DEDUP_REPORT": "r/%(name)s-%(time)s-100%%"}))
    assert config.report == "r/%(name)s-%(time)s-100%%"


@deferred_f_from_coro_f
async def test_a_report_that_cannot_be_written_costs_the_crawl_nothing(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    fresh_site.routes.update(url_stage_routes())
    settings = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}, "DEDUP_REPORT": "/proc/no/report"}
    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        result = await crawl(settings=settings, start=[fresh_site.url("/")])
    assert result.items and result.stats["finish_reason"] == "finished"
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].startswith("Cannot write the dedup report to /proc/no")
