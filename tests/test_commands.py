"""``scrapy dedup explain|stats|reset`` in a fresh ``scrapy startproject``,
run as a user runs them: subprocesses, after a real ``scrapy crawl``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.test import get_crawler

from scrapy_dedup.explain import Project, explain, store_stats
from scrapy_dedup.state import CrawlState
from scrapy_dedup.stores import StoreError
from tests.conftest import crawl
from tests.site import Site, page

SPIDER = """
import scrapy


class LinksSpider(scrapy.Spider):
    name = "links"

    def __init__(self, start=None, **kwargs):
        super().__init__(**kwargs)
        self.start_url = start

    async def start(self):
        yield scrapy.Request(self.start_url)

    def parse(self, response):
        yield {"url": response.url, "text": " ".join(response.css("p::text").getall())}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
"""

SETTINGS = """
ADDONS = {"scrapy_dedup.DedupAddon": 0}
DEDUP_STORE = "sqlite:///dedup.db"
DOWNLOAD_DELAY = 0
"""


def _routes() -> dict[str, Any]:
    home = page(
        "Home",
        "/pricing/",  # linked first: the URL the page is kept as
        "/pricing?utm_source=newsletter&utm_medium=email",
        "/pricing/#faq",
        "/Pricing",  # path case is kept: another page
        "/contact",
        text="Welcome to the shop",
    )
    return {
        "/": lambda q: home,
        "/pricing/": lambda q: page("Pricing", "/", text="Plans and prices"),
        "/pricing": lambda q: page("Pricing", "/", text="Plans and prices"),
        "/Pricing": lambda q: page("Old pricing", text="Legacy page, kept on purpose"),
        # response.follow() raises on a mailto: link: the page fails, and stays
        # in the frontier for the next run.
        "/contact": lambda q: page("Contact", "mailto:help@shop.example", text="Write to us"),
    }


def _run(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SCRAPY_")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh ``scrapy startproject shop`` with the settings the README gives."""
    _run("startproject", "shop", cwd=tmp_path)
    root = tmp_path / "shop"
    (root / "shop" / "spiders" / "links.py").write_text(SPIDER, encoding="utf-8")
    with (root / "shop" / "settings.py").open("a", encoding="utf-8") as settings:
        settings.write(SETTINGS)
    return root


@deferred_f_from_coro_f
async def test_why_was_this_url_not_fetched_in_one_command(
    fresh_site: Site, project: Path
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    crawl = _run("crawl", "links", "-a", f"start={base}/", "-O", "items.jsonl", cwd=project)
    assert "scrapy-dedup summary:" in crawl.stderr
    fetched = [path for path in fresh_site.fetched() if path != "/robots.txt"]
    assert sorted(fetched) == ["/", "/Pricing", "/contact", "/pricing/"]
    items = [json.loads(line) for line in (project / "items.jsonl").read_text().splitlines()]
    assert len(items) == 4

    # Why was /pricing?utm_source=... not fetched?
    tracked = f"{base}/pricing?utm_source=newsletter&utm_medium=email"
    urls = [
        tracked,
        f"{base}/pricing/#faq",
        f"{base}/Pricing",
        f"{base}/never-linked",
        f"{base}/contact",
    ]
    out = _run("dedup", "explain", *urls, cwd=project).stdout
    blocks = out.split("\n\n")[0].split(f"\n{base}")
    explained = dict(zip(urls, [blocks[0]] + [base + b for b in blocks[1:]], strict=True))
    tracked_block = explained[tracked]
    key = f"https://127.0.0.1:{fresh_site.port}/pricing"
    assert f"key: {key} (" in tracked_block
    assert f"tracking_param: https://127.0.0.1:{fresh_site.port}/pricing?utm_source" in (
        tracked_block
    )
    assert "trailing_slash:" not in tracked_block
    assert f"store: kept by an earlier run (as {base}/pricing/): the next run skips it" in (
        tracked_block
    )
    assert "fragment:" in explained[f"{base}/pricing/#faq"]
    assert "trailing_slash:" in explained[f"{base}/pricing/#faq"]
    assert "no rule changes it" not in explained[f"{base}/Pricing"]  # the scheme rule does
    assert f"key: https://127.0.0.1:{fresh_site.port}/Pricing (" in explained[f"{base}/Pricing"]
    assert "store: not seen: the next run fetches it" in explained[f"{base}/never-linked"]
    assert f"The same page (one key, fetched once):\n  {tracked} = {base}/pricing/#faq\n" in out
    assert (
        "store: in the frontier: an earlier run scheduled it and did not finish it"
        in (explained[f"{base}/contact"])
    )
    assert "3 other keys of their own" in out

    # What does the store hold?
    stats = _run("dedup", "stats", "links", cwd=project).stdout
    assert "pages kept" in stats and "  127.0.0.1" in stats
    kept = int(next(line for line in stats.splitlines() if "pages kept" in line).split()[-1])
    assert kept == 3  # the pages fetched, but the one that failed
    frontier = next(line for line in stats.splitlines() if "frontier" in line)
    assert frontier.split()[-1] == "1"  # the page that failed
    assert "learned rules: 0" in stats  # on by default, none adopted on 4 pages

    # Start over: asked first, then done.
    refused = _run("dedup", "reset", "links", cwd=project, check=False)
    assert refused.returncode == 1 and "scrapy dedup reset links --yes" in refused.stdout
    assert "not seen" not in _run("dedup", "explain", tracked, cwd=project).stdout
    _run("dedup", "reset", "links", "--yes", cwd=project)
    assert "store: not seen" in _run("dedup", "explain", tracked, cwd=project).stdout
    fresh_site.reset()
    _run("crawl", "links", "-a", f"start={base}/", cwd=project)
    again = [path for path in fresh_site.fetched() if path != "/robots.txt"]
    assert sorted(again) == ["/", "/Pricing", "/contact", "/pricing/"]  # all again


def test_explain_outside_a_project_and_with_a_bad_store(tmp_path: Path) -> None:
    out = _run(
        "dedup", "explain", "HTTP://WWW.Example.com/a/./b/?b=2&a=1&gclid=x", cwd=tmp_path
    ).stdout
    assert "key: https://example.com/a/b?a=1&b=2 (" in out
    rules = ["as Scrapy requests it", "scheme", "www", "dot_segments", "trailing_slash"]
    rules += ["tracking_param", "query_order"]
    if "/./" not in Request("http://a.example/a/./b").url:  # w3lib 2.6 resolves them
        rules.remove("dot_segments")
    assert [line.split(":")[0].strip() for line in out.splitlines()[2 : 2 + len(rules)]] == rules
    assert "(store: memory, which keeps nothing between runs)" in out
    # A rule switched off in the settings is not applied.
    off = _run(
        "dedup",
        "explain",
        "https://www.example.com/a/",
        "-s",
        'DEDUP_URL_RULES={"www": false}',
        cwd=tmp_path,
    ).stdout
    assert "key: https://www.example.com/a (" in off and "\n  www:" not in off
    bad = _run(
        "dedup", "stats", "x", "-s", "DEDUP_STORE=redis://127.0.0.1:1/0", cwd=tmp_path, check=False
    )
    assert bad.returncode == 1 and "cannot reach the dedup store" in bad.stderr
    usage = _run("dedup", "frobnicate", cwd=tmp_path, check=False)
    assert usage.returncode == 2 and "explain" in usage.stderr


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
@deferred_f_from_coro_f
async def test_explain_tells_what_the_next_run_does_with_each_store(
    fresh_site: Site, tmp_path: Path, redis_url: str, redis_prefix: str, kind: str
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    store = (
        {"DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db"}
        if kind == "sqlite"
        else {"DEDUP_STORE": redis_url, "DEDUP_REDIS_PREFIX": redis_prefix}
    )
    settings = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}, **store}
    await crawl(settings=settings, start=[f"{base}/"])
    project = Project.load(settings)
    urls = [f"{base}/pricing/#faq", f"{base}/contact", f"{base}/never-linked"]
    db = tmp_path / "dedup.db"
    before = db.read_bytes() if kind == "sqlite" else b""
    kept, failed, never = explain(urls, project=project, namespace="links")
    assert kept.store is not None and kept.store.startswith("kept by an earlier run")
    assert "the next run skips it" in kept.store
    if kind == "sqlite":  # it keeps the URL a page was kept as
        assert f"(as {base}/pricing/)" in kept.store
    assert failed.store is not None and failed.store.startswith("in the frontier")
    assert never.store == "not seen: the next run fetches it"
    stats = store_stats(project=project, namespace="links")
    assert stats["counts"]["unfinished requests (frontier)"] == 1
    if kind == "sqlite":
        # Looking changes nothing: the next crawl finds the file as the last one left it.
        assert db.read_bytes() == before
        assert "pages kept" in stats["counts"] and stats["counts"]["pages kept"] == 3
        with pytest.raises(StoreError, match="has no namespace 'typo'"):
            explain(urls, project=project, namespace="typo")
        missing = Project.load({"DEDUP_STORE": f"sqlite:///{tmp_path}/nothing.db"})
        with pytest.raises(StoreError, match="there is no dedup store at"):
            store_stats(project=missing, namespace="links")
        assert not (tmp_path / "nothing.db").exists()
    # The next run does what explain said.
    fresh_site.reset()
    await crawl(settings=settings, start=[f"{base}/"])
    assert "/contact" in fresh_site.fetched() and "/pricing/" not in fresh_site.fetched()


@pytest.mark.parametrize(
    ("url", "settings"),
    [
        ("https://faß.de/", {}),  # Scrapy's Request encodes the host (IDNA 2003)
        ("https://fass.de/", {}),
        ("http://example.com/a b", {"DEDUP_URL_RULES": {"percent_encoding": False}}),
        ("http://EXAMPLE.com/x#", {"DEDUP_URL_RULES": {"host": False, "fragment": False}}),
        ("http://example.com:80/a/", {}),
        ("https://www.shop.example/p/?b=1&a=2&utm_source=x", {}),
        (
            "https://www.shop.example/p/?b=1&a=2&ref=x",
            {"DEDUP_URL_HOST_RULES": {"shop.example": {"www": False, "keep_params": ["ref"]}}},
        ),
    ],
)
def test_explain_keys_a_url_as_the_crawl_does(url: str, settings: dict[str, Any]) -> None:
    project = Project.load(settings)
    crawled = _crawl_keys(settings).compute(Request(url))
    (entry,) = explain([url], project=project)
    assert (entry.key, entry.canonical) == (crawled.key, crawled.url)
    if entry.steps:  # the trace ends at the key
        assert entry.steps[-1][2] == entry.canonical


def _crawl_keys(settings: dict[str, Any]) -> Any:
    """The request keys of a crawl with ``settings``, as its dupefilter has them."""
    crawler = get_crawler(settings_dict=settings)
    return CrawlState.of(crawler).keys


def test_explain_names_every_rule_a_step_took() -> None:
    (entry,) = explain(["http://example.com:80/a"], project=Project.load({}))
    # Without the :80, http could become https: both rules acted in one step.
    assert [step[0] for step in entry.steps] == ["scheme, default_port"]
