"""A hostile site crawled with everything on: each page is a shape that once
slowed or broke a crawl (issue 11). Every page is still fetched once and gives
its item under its own URL, absurd declarations are counted, nothing long is
kept. How long each shape costs is measured in ``benches/bench_hostile.py``."""

from __future__ import annotations

from typing import Any

from scrapy.utils.defer import deferred_f_from_coro_f

from scrapy_dedup.state import CrawlState
from tests.conftest import crawl
from tests.site import Reply, Route, Site
from tests.test_pipeline import ArticleSpider

SETTINGS: dict[str, Any] = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}

BIG = 250 * 1024


def _html(title: str, head: str = "", *, content_type: str | None = "text/html") -> Reply:
    body = (
        f"<!doctype html><html><head><title>{title}</title>{head}</head>"
        f"<body><main><p>The page called {title} has text of its own.</p></main></body></html>"
    )
    return Reply(body=body, headers={"Content-Type": content_type} if content_type else {})


def hostile_routes() -> dict[str, Route]:
    fill = "x" * (15 * 1024)  # Twisted takes header lines up to 16 KiB
    pages: dict[str, Route] = {
        # 100 Link headers of 15 KiB: preloads, and canonicals
        "/preload-headers": lambda q: Reply(
            body=_html("preload headers").body,
            headers={
                "Content-Type": "text/html",
                "Link": [f"</s/{i}/{fill}.js>; rel=preload" for i in range(100)],
            },
        ),
        "/canonical-headers": lambda q: Reply(
            body=_html("canonical headers").body,
            headers={
                "Content-Type": "text/html",
                "Link": [f"</c/{i}/{fill}>; rel=canonical" for i in range(100)],
            },
        ),
        # long values that mention "canonical" use up the budget: the short
        # canonical after them is still read
        "/link-budget": lambda q: Reply(
            body=_html("link budget").body,
            headers={
                "Content-Type": "text/html",
                "Link": [
                    *(f"</s/{i}/{fill}/canonical.js>; rel=preload" for i in range(3)),
                    '</link-target>; rel="canonical"',
                ],
            },
        ),
        # ... but a long value that declares a canonical may hold the page's
        # first one: no header canonical is taken then
        "/link-first-skipped": lambda q: Reply(
            body=_html("link first skipped").body,
            headers={
                "Content-Type": "text/html",
                "Link": [
                    f"</s/{fill}/canonical.js>; rel=preload",
                    f"</true/{fill}>; rel=canonical",
                    '</other-target>; rel="canonical"',
                ],
            },
        ),
        # canonical hrefs of 250 KiB: a path, a subdomain, a run of "%"
        "/long-path": lambda q: _html("long path", f'<link rel=canonical href="/{"a" * BIG}">'),
        "/long-host": lambda q: _html(
            "long host", f'<link rel=canonical href="http://{"b" * BIG}.example.test/">'
        ),
        "/percent": lambda q: _html("percent", f'<link rel=canonical href="/{"%" * BIG}">'),
        # 1 MiB of "<" in the head, then a canonical past the limit
        "/lt-flood": lambda q: _html(
            "lt flood", "<" * (1024 * 1024) + "<link rel=canonical href=/x>"
        ),
        # 8 MB of text, gzip-compressed, no charset declared anywhere
        "/bomb": lambda q: Reply(
            body=_html("bomb").body.replace("</main>", "a" * 8_000_000 + "</main>"),
            headers={"Content-Type": "text/html"},
            gzip=True,
        ),
        # no Content-Type, a byte-order mark and whitespace before the markup
        "/bom": lambda q: _html(
            "bom", '<link rel="canonical" href="/bom-canonical">', content_type=None
        ),
        # a canonical after an <input>, which ends the head for browsers
        "/after-head": lambda q: _html(
            "after head",
            '<input type="hidden" name="t" value="1"><link rel="canonical" href="/after-target">',
        ),
    }
    bom = pages["/bom"]
    pages["/bom"] = lambda q: Reply(body="\ufeff\n  " + bom(q).body, headers={})
    links = "".join(f'<a href="{path}">{path}</a> ' for path in pages)
    pages["/"] = lambda q: Reply(
        body=f"<html><head><title>home</title></head><body><main>{links}</main></body></html>",
        headers={"Content-Type": "text/html; charset=utf-8"},
    )
    return pages


@deferred_f_from_coro_f
async def test_a_hostile_site_is_crawled_whole_and_nothing_long_is_kept(
    fresh_site: Site,
) -> None:
    routes = hostile_routes()
    fresh_site.routes.update(routes)
    result = await crawl(ArticleSpider, SETTINGS, start=fresh_site.url("/"))
    url = fresh_site.url
    stats = result.stats

    assert sorted(fresh_site.fetched()) == sorted(routes)  # every page, once
    filed = {item.get("fetched_url") or item["url"]: item["url"] for item in result.items}
    assert len(filed) == len(routes)
    # sensible declarations are followed, read the way browsers read the page
    assert filed[url("/bom")] == url("/bom-canonical")
    assert filed[url("/after-head")] == url("/after-target")
    assert filed[url("/link-budget")] == url("/link-target")
    assert stats["dedup/canonical/after_head"] == 1
    # absurd ones leave the page under its own URL, and are counted
    for path in (
        "/canonical-headers",
        "/long-path",
        "/long-host",
        "/percent",
        "/lt-flood",
        "/link-first-skipped",
    ):
        assert filed[url(path)] == url(path), path
    assert stats["dedup/canonical/ignored/too_long"] == 6  # and /link-budget's skipped values
    assert stats["dedup/canonical/applied"] == 3
    # what the crawl keeps about canonicals stays short
    state = CrawlState._states[result.crawler]
    longest = max(
        len(part) for entry in state.canonicals.items() for part in (entry[0], entry[1][0])
    )
    assert longest < 200
