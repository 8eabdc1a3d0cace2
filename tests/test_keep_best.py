"""DEDUP_KEEP: which copy of a page's text is kept (real crawls, with the add-on)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.crawl_worker import read_items
from tests.site import Reply, Route, Site, article, redirect
from tests.test_store_crawls import _count_recorded, _worker
from tests.text.neardup_corpus import documents

# Learning off: with it (the default), the print view waits behind /p/28 (a
# variant of a queued page), so the plain page comes first and there is no
# worse copy to keep (test_with_learning_the_plain_page_comes_first). These
# tests are about the copies that arrive first anyway.
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}, "DEDUP_LEARN": False}
TEXTS = documents(min_words=60, max_words=120, seed=31)


class ProductSpider(scrapy.Spider):
    """Yields each page's title and main text, and follows every link."""

    name = "products"

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.start_url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {
            "url": response.url,
            "title": response.css("title::text").get(""),
            "text": " ".join(response.css("main p::text").getall()),
        }
        yield from response.follow_all(css="a", callback=self.parse)


def _slow(reply: Reply, seconds: float = 1.0) -> Route:
    """The page, answered ``seconds`` late: it arrives after the print view."""

    def route(q: str) -> Reply:
        time.sleep(seconds)
        return reply

    return route


def _print_view(n: int, target: str) -> Reply:
    return article(
        f"Product {n} (print)", TEXTS[n], extra_head=f'<link rel="canonical" href="{target}">'
    )


def _routes(product: Reply | None = None) -> dict[str, Route]:
    """The home page links the print view of /p/28 (which declares /p/28
    canonical) before /p/28 itself; /p/28 answers late."""
    return {
        "/": lambda q: article("Home", "the home page", "/p/28/print", "/p/28"),
        "/p/28/print": lambda q: _print_view(28, "/p/28"),
        "/p/28": _slow(product or article("Product 28", TEXTS[28], "/")),
    }


def _path(url: str | None) -> str | None:
    return None if url is None else "/" + url.split("/", 3)[3]


def _product_items(items: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    return sorted(
        (item["title"], _path(item["url"]), _path(item.get("fetched_url")))
        for item in items
        if item["title"] != "Home"
    )


@deferred_f_from_coro_f
async def test_first_keeps_the_print_view_and_the_report_says_why(
    fresh_site: Site, tmp_path: Path
) -> None:
    fresh_site.routes.update(_routes())
    report = tmp_path / "report"
    result = await crawl(
        ProductSpider, {**ADDON, "DEDUP_REPORT": str(report)}, start=fresh_site.url("/")
    )
    assert result.stats["finish_reason"] == "finished"
    # The print view came first: its item is kept (under /p/28), /p/28's dropped.
    assert _product_items(result.items) == [("Product 28 (print)", "/p/28", "/p/28/print")]
    assert result.stats["dedup/items/canonical"] == 1
    assert "dedup/keep/held" not in result.stats
    data = json.loads(report.with_suffix(".json").read_text())
    worse = data["worse_copies_kept"]
    assert worse["count"] == 1
    [entry] = worse["shown"]
    assert _path(entry["kept_from"]) == "/p/28/print"
    assert _path(entry["plainer"]) == "/p/28"
    assert entry["why"] == "first to arrive"
    page = report.with_suffix(".html").read_text()
    assert (
        f'kept <span class="url">{fresh_site.url("/p/28/print")}</span> (first to arrive); '
        f'<span class="url">{fresh_site.url("/p/28")}</span>, its plainer URL, came later'
    ) in page


@deferred_f_from_coro_f
async def test_with_learning_the_plain_page_comes_first(fresh_site: Site, tmp_path: Path) -> None:
    # The default: the print view, linked first, is a variant of /p/28 (one
    # print mark more), so it waits while /p/28 is fetched, however late.
    fresh_site.routes.update(_routes())
    report = tmp_path / "report"
    settings = {**ADDON, "DEDUP_LEARN": True, "DEDUP_REPORT": str(report)}
    result = await crawl(ProductSpider, settings, start=fresh_site.url("/"))
    assert result.stats["finish_reason"] == "finished"
    fetched = fresh_site.fetched()
    assert fetched[:2] == ["/", "/p/28"]  # /p/28 before its print view, if that is fetched
    assert set(fetched) <= {"/", "/p/28", "/p/28/print"}
    assert _product_items(result.items) == [("Product 28", "/p/28", None)]
    assert result.stats["dedup/learn/deferred"] >= 1
    data = json.loads(report.with_suffix(".json").read_text())
    assert data["worse_copies_kept"]["count"] == 0


@deferred_f_from_coro_f
async def test_best_keeps_the_canonical_page_and_drops_the_print_view(
    fresh_site: Site, tmp_path: Path
) -> None:
    fresh_site.routes.update(_routes())
    report = tmp_path / "report"
    settings = {**ADDON, "DEDUP_KEEP": "best", "DEDUP_REPORT": str(report)}
    result = await crawl(ProductSpider, settings, start=fresh_site.url("/"))
    assert result.stats["finish_reason"] == "finished"
    assert sorted(fresh_site.fetched()) == ["/", "/p/28", "/p/28/print"]
    # The print view's item waited for /p/28's, then was dropped as its duplicate.
    assert _product_items(result.items) == [("Product 28", "/p/28", None)]
    assert result.stats["dedup/keep/held"] == 1
    assert result.stats["dedup/keep/released/arrived"] == 1
    assert result.stats["dedup/items/canonical"] == 1
    assert result.stats["item_dropped_count"] == 1
    assert "dedup/canonical/ignored/content_differs" not in result.stats
    data = json.loads(report.with_suffix(".json").read_text())
    assert data["worse_copies_kept"]["count"] == 0
    clusters = data["duplicate_clusters"]["shown"]
    assert [(_path(c["kept"]), [_path(m["url"]) for m in c["members"]]) for c in clusters] == [
        ("/p/28", ["/p/28/print"])
    ]


@deferred_f_from_coro_f
async def test_best_keeps_the_held_item_when_its_canonical_page_is_missing(
    fresh_site: Site,
) -> None:
    gone = Reply(status=404, body="gone", headers={"Content-Type": "text/html"})
    fresh_site.routes.update(_routes(gone))
    # A wait far longer than the crawl: the 404 releases the item, not the clock.
    settings = {**ADDON, "DEDUP_KEEP": "best", "DEDUP_KEEP_WAIT": 600}
    result = await crawl(ProductSpider, settings, start=fresh_site.url("/"))
    assert result.stats["finish_reason"] == "finished"
    assert _product_items(result.items) == [("Product 28 (print)", "/p/28", "/p/28/print")]
    assert result.stats["dedup/keep/held"] == 1
    assert result.stats["dedup/keep/released/failed"] == 1
    assert "item_dropped_count" not in result.stats


@deferred_f_from_coro_f
async def test_best_with_a_different_text_keeps_both(fresh_site: Site) -> None:
    # /p/28 declares nothing and has another text: both items are kept, the
    # print view's under the URL it was fetched from.
    fresh_site.routes.update(_routes(article("Product 28", TEXTS[29], "/")))
    settings = {**ADDON, "DEDUP_KEEP": "best"}
    result = await crawl(ProductSpider, settings, start=fresh_site.url("/"))
    assert result.stats["dedup/keep/released/arrived"] == 1
    assert [(title, url) for title, url, _ in _product_items(result.items)] == [
        ("Product 28", "/p/28"),
        ("Product 28 (print)", "/p/28/print"),
    ]
    assert "item_dropped_count" not in result.stats


@deferred_f_from_coro_f
async def test_a_crawl_with_many_held_items_finishes_and_loses_none(fresh_site: Site) -> None:
    # 40 print views, each declaring /q/<n>, which redirects: the declared
    # page never answers under its own URL, so every held item waits out
    # DEDUP_KEEP_WAIT; at most DEDUP_KEEP_MAX_HELD wait at once.
    pages = 40
    links = [f"/p/{n}/print" for n in range(pages)] + [f"/q/{n}" for n in range(pages)]
    fresh_site.routes["/"] = lambda q: article("Home", "the home page", *links)
    for n in range(pages):
        fresh_site.routes[f"/p/{n}/print"] = lambda q, n=n: _print_view(n, f"/q/{n}")
        fresh_site.routes[f"/q/{n}"] = lambda q, n=n: redirect(f"/r/{n}")
        fresh_site.routes[f"/r/{n}"] = lambda q, n=n: article(f"Product {n}", TEXTS[n])
    settings = {
        **ADDON,
        "DEDUP_KEEP": "best",
        "DEDUP_KEEP_WAIT": 1.0,
        "DEDUP_KEEP_MAX_HELD": 10,
        "CONCURRENT_REQUESTS": 8,
    }
    result = await crawl(ProductSpider, settings, start=fresh_site.url("/"))
    stats = result.stats
    assert stats["finish_reason"] == "finished"
    # Every text is out once, whichever copy came first.
    texts = [item["text"] for item in result.items if item["title"] != "Home"]
    assert len(texts) == len(set(texts)) == pages
    assert stats["dedup/keep/held"] >= 1
    assert stats["dedup/keep/held"] == stats["dedup/keep/released/timeout"]
    assert stats["dedup/keep/held"] + stats.get("dedup/keep/full", 0) >= 1
    assert stats["dedup/items/unique"] == 1 + pages


@deferred_f_from_coro_f
async def test_the_report_names_a_print_view_kept_without_a_declaration(
    fresh_site: Site, tmp_path: Path
) -> None:
    # The print view declares nothing: it is kept under its own URL, /p/5's
    # item is its exact duplicate, and the report says a worse copy was kept.
    # Two different pages with one text are not called worse copies.
    fresh_site.routes.update(
        {
            "/": lambda q: article("Home", "the home page", "/p/5/print", "/p/5", "/a", "/b"),
            "/p/5/print": lambda q: article("Product 5 (print)", TEXTS[5]),
            "/p/5": _slow(article("Product 5", TEXTS[5])),
            "/a": lambda q: article("A", TEXTS[6]),
            "/b": _slow(article("B", TEXTS[6])),
        }
    )
    report = tmp_path / "report"
    result = await crawl(
        ProductSpider, {**ADDON, "DEDUP_REPORT": str(report)}, start=fresh_site.url("/")
    )
    assert result.stats["dedup/items/exact"] == 2
    worse = json.loads(report.with_suffix(".json").read_text())["worse_copies_kept"]
    assert [(_path(e["kept_from"]), _path(e["plainer"])) for e in worse["shown"]] == [
        ("/p/5/print", "/p/5")
    ]


def test_kill_9_while_an_item_is_held_loses_nothing(fresh_site: Site, tmp_path: Path) -> None:
    # The print view's item is held while /p/28 hangs; the crawl (SQLite) is
    # killed then. The held item was never recorded as kept: the next run
    # fetches the print view again, and the page's item comes out, from /p/28.
    hang = [15.0]

    def product(q: str) -> Reply:
        time.sleep(hang[0])
        return article("Product 28", TEXTS[28], "/")

    fresh_site.routes.update({**_routes(), "/p/28": product})
    db = tmp_path / "dedup.db"
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{db}", "DEDUP_KEEP": "best"}
    start = fresh_site.url("/", host="127.0.0.1")
    items = tmp_path / "items.jsonl"

    proc = _worker(settings, start, items)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if _count_recorded(db) >= 1 and "/p/28/print" in fresh_site.fetched():
            break
        time.sleep(0.005)
    time.sleep(1.0)  # the print view's item reaches the pipeline and is held
    assert proc.poll() is None, "the crawl ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    first = read_items(items) if items.exists() else []
    assert [item["title"] for item in first] in ([], ["Home"])

    hang[0] = 0.0
    fresh_site.reset()
    proc = _worker(settings, start, items)
    log, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, log
    assert "/p/28/print" in fresh_site.fetched()  # not recorded as kept by the killed run
    kept = read_items(items)
    products = [(item["title"], _path(item["url"])) for item in kept if item["title"] != "Home"]
    assert products == [("Product 28", "/p/28")]
