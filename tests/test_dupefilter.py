"""CanonicalDupeFilter through the real Scrapy objects and real crawls."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any, ClassVar

import pytest
from scrapy import Request
from scrapy.core.scheduler import Scheduler
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_dedup import CanonicalDupeFilter
from tests.conftest import LinkSpider, crawl
from tests.site import Site, page, redirect, url_stage_routes

DEDUP = {"DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter"}


def make_filter(**settings: object) -> CanonicalDupeFilter:
    crawler = get_crawler(settings_dict={**DEDUP, **settings})
    return build_from_crawler(CanonicalDupeFilter, crawler)


def test_key_covers_method_and_body() -> None:
    df = make_filter()
    assert not df.request_seen(Request("https://example.com/form", method="POST", body=b"a=1"))
    assert not df.request_seen(Request("https://example.com/form", method="POST", body=b"a=2"))
    assert not df.request_seen(Request("https://example.com/form"))
    assert df.request_seen(Request("http://example.com/form/", method="POST", body=b"a=1"))
    assert df.request_seen(Request("https://www.example.com/form?utm_source=x"))


class VariantFingerprinter:
    """Like scrapy-zyte-api's: one URL fetched two ways is two requests."""

    def fingerprint(self, request: Request) -> bytes:
        return f"{request.url} {request.meta.get('variant')}".encode()


def test_a_custom_request_fingerprinter_is_honoured() -> None:
    df = make_filter(REQUEST_FINGERPRINTER_CLASS=VariantFingerprinter)
    assert not df.request_seen(Request("https://example.com/a", meta={"variant": "browser"}))
    assert not df.request_seen(Request("https://example.com/a", meta={"variant": "http"}))
    assert df.request_seen(
        Request("https://example.com/a/?utm_source=x", meta={"variant": "http"})
    )


def test_rel_canonical_marks_the_dupefilter_key_even_with_a_custom_fingerprinter() -> None:
    from scrapy.http import HtmlResponse

    from scrapy_dedup import RelCanonicalMiddleware

    # Trusted at once (DEDUP_CANONICAL_TRUST = "always"): by default a host's
    # declarations are verified first, by fetching the declared pages.
    settings = {
        **DEDUP,
        "REQUEST_FINGERPRINTER_CLASS": VariantFingerprinter,
        "DEDUP_CANONICAL_TRUST": "always",
    }
    crawler = get_crawler(settings_dict=settings)
    df = build_from_crawler(CanonicalDupeFilter, crawler)
    mw = build_from_crawler(RelCanonicalMiddleware, crawler)
    page = Request("https://example.com/shop/a")
    body = b'<html><head><link rel="canonical" href="/products/a"></head></html>'
    mw.process_response(page, HtmlResponse(page.url, body=body, request=page))
    request = Request("https://example.com/products/a")
    assert df.request_seen(request)
    df.log(request, None)
    df.close("finished")
    assert crawler.stats.get_value("dedup/url/filtered/rel_canonical") == 1


def test_verbatim_url_requests_are_keyed_on_their_own_url() -> None:
    df = make_filter()
    assert not df.request_seen(Request("https://example.com/a"))
    assert not df.request_seen(Request("https://example.com/a/", meta={"verbatim_url": True}))
    assert df.request_seen(Request("https://example.com/a/", meta={"verbatim_url": True}))


def test_redirect_to_same_key_goes_through_but_a_loop_does_not() -> None:
    df = make_filter()
    assert not df.request_seen(Request("https://example.com/pricing"))
    hop = Request(
        "https://example.com/pricing/", meta={"redirect_urls": ["https://example.com/pricing"]}
    )
    assert not df.request_seen(hop)  # the target of a same-key redirect
    back = Request(
        "https://example.com/pricing",
        meta={"redirect_urls": ["https://example.com/pricing", "https://example.com/pricing/"]},
    )
    assert df.request_seen(back)  # /pricing -> /pricing/ -> /pricing is a loop
    other = Request(
        "https://example.com/pricing/", meta={"redirect_urls": ["https://example.com/x"]}
    )
    assert df.request_seen(other)  # a redirect from another page to a seen key is a duplicate
    # a follow-up that copies the response's meta (meta=response.meta) is not a redirect
    copied = {"redirect_urls": ["https://example.com/pricing"]}
    for url in (
        "https://example.com/pricing#faq",
        "https://www.example.com/pricing/?utm_source=x",
    ):
        assert df.request_seen(Request(url, meta=copied))
    df.close("finished")  # stats are batched; closing flushes them
    assert df.crawler.stats.get_value("dedup/url/redirect_allowed") == 1


def test_stats_name_the_rules_that_merged_each_request() -> None:
    df = make_filter()
    first = Request("http://example.com:8080/docs#intro")
    assert not df.request_seen(first)
    for url in [
        "http://example.com:8080/docs#install",  # both lost a fragment: fragment
        "http://example.com:8080/docs/",  # one lost a slash, the other a fragment
        "http://example.com:8080/docs#intro",  # the very same URL
        "https://example.com:8080/docs",  # only the first was rewritten to https
    ]:
        request = Request(url)
        assert df.request_seen(request)
        df.log(request, None)
    df.close("finished")
    stats = df.crawler.stats
    assert stats.get_value("dedup/url/filtered") == 4
    assert stats.get_value("dedup/url/filtered/fragment") == 3
    assert stats.get_value("dedup/url/filtered/trailing_slash") == 1
    assert stats.get_value("dedup/url/filtered/exact") == 1
    assert stats.get_value("dedup/url/filtered/scheme") == 1


def test_unparseable_url_still_gets_a_key() -> None:
    # An A-label prefix on a non-ASCII label: Scrapy lets it through (w3lib 2.6 refuses
    # hosts with a space, 2.5 did not), browsers refuse it.
    df = make_filter()
    assert not df.request_seen(Request("https://xn--bücher.de/"))
    assert df.request_seen(Request("https://xn--bücher.de/"))
    assert not df.request_seen(Request("https://xn--bücher.de/other"))
    df.close("finished")
    assert df.crawler.stats.get_value("dedup/url/unparsed") == 3


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("DEDUP_URL_RULES", {"no_such_rule": False}),
        ("DEDUP_URL_RULES", ["trailing_slash"]),
        ("DEDUP_URL_HOST_RULES", {"example.com": {"trailing": False}}),
        ("DEDUP_URL_STRIP_PARAMS", [1, 2]),
    ],
)
def test_bad_settings_fail_clearly(setting: str, value: object) -> None:
    with pytest.raises(ValueError, match="DEDUP_URL"):
        make_filter(**{setting: value})


@pytest.mark.parametrize(("value", "expected"), [("False", False), ("0", False), ("True", True)])
def test_dedup_debug_setting_reads_like_a_boolean(value: str, expected: bool) -> None:
    assert make_filter(DEDUP_DEBUG=value).debug is expected


def test_dict_and_list_settings_may_be_strings_as_on_the_command_line() -> None:
    df = make_filter(
        DEDUP_URL_RULES='{"trailing_slash": false}',
        DEDUP_URL_STRIP_PARAMS="affiliate,sort",
        DEDUP_URL_HOST_RULES='{"shop.example": {"keep_params": ["sort"]}}',
    )
    assert not df.request_seen(Request("https://example.com/a"))
    assert not df.request_seen(Request("https://example.com/a/"))
    assert df.request_seen(Request("https://example.com/a?affiliate=9&sort=asc"))
    assert not df.request_seen(Request("https://shop.example/a?sort=asc"))
    assert df.request_seen(Request("https://shop.example/a?sort=asc&affiliate=1"))


def test_settings_switch_rules_off() -> None:
    df = make_filter(
        DEDUP_URL_RULES={"trailing_slash": False},
        DEDUP_URL_KEEP_PARAMS=["ref"],
        DEDUP_URL_HOST_RULES={"shop.example": {"strip_params": ["sort"]}},
        # Learning would hold ?ref=x (a variant of /a: one more parameter)
        # until it knows whether ?ref matters: not what this test is about.
        DEDUP_LEARN=False,
    )
    assert not df.request_seen(Request("https://example.com/a"))
    assert not df.request_seen(Request("https://example.com/a/"))
    assert not df.request_seen(Request("https://example.com/a?ref=x"))
    assert not df.request_seen(Request("https://shop.example/a"))
    assert df.request_seen(Request("https://shop.example/a?sort=price"))


def test_jobdir_keeps_seen_keys_for_the_next_run(tmp_path: Path) -> None:
    df = make_filter(JOBDIR=str(tmp_path))
    for i in range(10):
        assert not df.request_seen(Request(f"https://example.com/p{i}"))
    df.close("shutdown")
    assert (tmp_path / "dedup.sqlite3").exists()

    df = make_filter(JOBDIR=str(tmp_path))
    for i in range(10):
        request = Request(f"http://www.example.com/p{i}/")
        assert df.request_seen(request)
        df.log(request, None)
    assert not df.request_seen(Request("https://example.com/p10"))
    df.close("finished")
    stats = df.crawler.stats.get_stats()
    assert stats["dedup/url/filtered/previous_run"] == 10


def test_clear_forgets_everything(tmp_path: Path) -> None:
    df = make_filter(JOBDIR=str(tmp_path))
    df.request_seen(Request("https://example.com/a"))
    df.request_seen(Request("https://example.com/b"))
    df.clear()
    assert not df.request_seen(Request("https://example.com/a"))
    df.close("finished")
    df = make_filter(JOBDIR=str(tmp_path))
    assert df.request_seen(Request("https://example.com/a"))  # recorded after the clear
    assert not df.request_seen(Request("https://example.com/b"))
    df.close("finished")


def test_dedup_debug_keeps_what_each_key_collapsed_onto(caplog: pytest.LogCaptureFixture) -> None:
    df = make_filter(DEDUP_DEBUG=True)
    df.request_seen(Request("https://example.com/a?utm_source=x"))
    request = Request("http://www.example.com/a/")
    assert df.request_seen(request)
    with caplog.at_level(logging.DEBUG, logger="scrapy_dedup"):
        df.log(request, None)
    assert "already seen as https://example.com/a?utm_source=x" in caplog.text
    assert "ignored: scheme, www, trailing_slash, tracking_param;" in caplog.text


def test_scrapy_redis_builds_it_from_the_spider() -> None:
    """scrapy-redis's Scheduler calls from_spider(): the filter is configured from
    the spider's crawler settings, as with from_crawler()."""
    crawler = get_crawler(settings_dict={**DEDUP, "DEDUP_URL_RULES": {"trailing_slash": False}})
    crawler.spider = crawler._create_spider("s")
    df = CanonicalDupeFilter.from_spider(crawler.spider)
    assert not df.request_seen(Request("https://example.com/a"))
    assert not df.request_seen(Request("https://example.com/a/"))
    assert df.request_seen(Request("https://example.com/a?utm_source=x"))


@deferred_f_from_coro_f
async def test_start_urls_are_recorded_and_not_fetched_again(fresh_site: Site) -> None:
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/a"),
            "/a": lambda q: page("A", "/?utm_source=a", "/#top", "/b"),
            "/b": lambda q: page("B", "http://www.example.test:{port}/"),
        }
    )
    result = await crawl(settings=DEDUP, start=[fresh_site.url("/")])
    assert sorted(fresh_site.fetched()) == ["/", "/a", "/b"]
    assert result.stats["dedup/url/filtered"] == 3


@deferred_f_from_coro_f
async def test_debug_logs_every_filtered_request_with_what_it_collapsed_onto(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    fresh_site.routes.update(url_stage_routes())
    with caplog.at_level(logging.DEBUG, logger="scrapy_dedup"):
        result = await crawl(
            settings={**DEDUP, "DUPEFILTER_DEBUG": True}, start=[fresh_site.url("/")]
        )
    lines = [r.getMessage() for r in caplog.records if "Filtered duplicate" in r.getMessage()]
    assert len(lines) == result.stats["dedup/url/filtered"]
    www = next(line for line in lines if "www.example.test" in line)
    assert (
        f"already seen as {fresh_site.url('/pricing?utm_source=newsletter&utm_medium=email')}"
        in www
    )
    assert "differences are ignored: www, tracking_param;" in www


@deferred_f_from_coro_f
async def test_without_debug_only_the_first_is_logged_with_a_hint(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    fresh_site.routes.update(url_stage_routes())
    with caplog.at_level(logging.DEBUG, logger="scrapy_dedup"):
        await crawl(settings=DEDUP, start=[fresh_site.url("/")])
    lines = [r.getMessage() for r in caplog.records if "Filtered duplicate" in r.getMessage()]
    assert len(lines) == 1
    assert "DUPEFILTER_DEBUG" in lines[0]
    # Said in a user's words: no canonical key (https for this http site).
    assert "https://" not in lines[0]
    assert "(the same URL" in lines[0]


@deferred_f_from_coro_f
async def test_redirect_chain_through_a_same_key_url_is_crawled(fresh_site: Site) -> None:
    """/old -> /new (another key, seen) is dropped; /docs -> /docs/ is fetched; a loop ends."""
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/new", "/docs", "/loop", "/old"),
            "/new": lambda q: page("New"),
            "/old": lambda q: redirect("/new"),
            "/docs": lambda q: redirect("/docs/"),
            "/docs/": lambda q: page("Docs"),
            "/loop": lambda q: redirect("/loop/"),
            "/loop/": lambda q: redirect("/loop"),
        }
    )
    result = await crawl(settings=DEDUP, start=[fresh_site.url("/")])
    fetched = fresh_site.fetched()
    assert sorted(fetched) == ["/", "/docs", "/docs/", "/loop", "/loop/", "/new", "/old"]
    assert sorted(item["title"] for item in result.items) == ["Docs", "Home", "New"]
    assert result.stats["dedup/url/redirect_allowed"] == 2  # /docs/ and /loop/


@deferred_f_from_coro_f
async def test_jobdir_pause_and_resume_fetches_nothing_twice(
    fresh_site: Site, tmp_path: Path
) -> None:
    pages = {
        f"/p{i}": [f"/p{j}?utm_source=x" for j in range(i + 1, min(i + 4, 12))] for i in range(12)
    }
    fresh_site.routes.update(
        {
            path: (lambda q, links=links, path=path: page(path, *links))
            for path, links in pages.items()
        }
    )
    fresh_site.routes["/"] = lambda q: page("Home", "/p0", "/p1?ref=home")
    settings = {
        **DEDUP,
        "JOBDIR": str(tmp_path / "job"),
        "CONCURRENT_REQUESTS": 1,
        "CLOSESPIDER_PAGECOUNT": 4,
    }
    first = await crawl(settings=settings, start=[fresh_site.url("/")])
    assert first.stats["finish_reason"] == "closespider_pagecount"
    first_fetched = fresh_site.fetched()
    fresh_site.reset()
    second = await crawl(
        settings={**settings, "CLOSESPIDER_PAGECOUNT": 0}, start=[fresh_site.url("/")]
    )
    assert second.stats["finish_reason"] == "finished"
    second_fetched = fresh_site.fetched()
    # the start URL is fetched again on resume (dont_filter); nothing else is
    assert [p for p in second_fetched if p != "/"] and "/" in second_fetched
    fetched = [p for p in first_fetched + second_fetched if p != "/"]
    assert len(fetched) == len(set(fetched))
    assert {p.split("?")[0] for p in fetched} == set(pages)


def test_the_plain_key_groups_requests_as_scrapys_own_fingerprint_does() -> None:
    # The fetches saved count a filtered request when Scrapy's fingerprint of
    # it was new; the dupefilter keys it the same way without that cost.
    from scrapy.utils.request import fingerprint

    from scrapy_dedup.dupefilter import _scrapy_canonical

    rng = random.Random(7)
    pieces = ["a", "B", "%41", "%2f", "+", "%20", "%2B", "ä", "=", "&", "#x", "?", "/", ".", ".."]
    pieces += ["//", "utm_source=1", "id=2", "b=1", "a=2", "a=", "&c=3", ";p", "-", "~", "q=a+b"]
    by_scrapy: dict[bytes, set[str]] = {}
    by_ours: dict[str, set[bytes]] = {}
    for _ in range(20_000):
        path = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        url = f"http://Ex.com{rng.choice(['', '/', '/x', '/x/'])}{rng.choice(['', '?'])}{path}"
        try:
            request = Request(url)
        except ValueError:  # w3lib 2.6 refuses a host like "ex.com%2f": never requested
            continue
        ours = _scrapy_canonical(request.url)
        by_scrapy.setdefault(fingerprint(request), set()).add(ours)
        by_ours.setdefault(ours, set()).add(fingerprint(request))
    assert len(by_scrapy) > 5_000
    assert [keys for keys in by_scrapy.values() if len(keys) > 1] == []
    assert [fps for fps in by_ours.values() if len(fps) > 1] == []


class _RetakeSpider(LinkSpider):
    """Follows links; ``/a`` also asks for ``/b`` again with ``dont_filter``
    (as a spider re-requesting a page it wants whatever the filter says)."""

    seen: ClassVar[dict[str, Any]] = {}

    def parse(self, response):  # type: ignore[no-untyped-def]
        from pydispatch.dispatcher import getAllReceivers, liveReceivers
        from scrapy import signals

        if not self.seen:  # what the crawl runs with, while it runs
            engine: Any = self.crawler.engine
            scheduler = engine._slot.scheduler
            self.seen["scheduler"] = type(scheduler)
            sender = self.crawler.signals.sender
            receivers = list(liveReceivers(getAllReceivers(sender, signals.request_scheduled)))
            self.seen["receiver"] = scheduler.df.record_unfiltered in receivers
        yield from super().parse(response)
        if response.url.endswith("/a"):
            yield response.follow("/b", dont_filter=True, callback=self.parse)


@pytest.mark.parametrize("scheduler", ["default", "scrapy"])
@deferred_f_from_coro_f
async def test_the_add_on_scheduler_records_start_urls_without_a_signal_receiver(
    fresh_site: Site, scheduler: str
) -> None:
    from scrapy_dedup.scheduler import DedupScheduler

    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/a"),
            "/a": lambda q: page("A", "/?utm_source=a", "/b"),
            "/b": lambda q: page("B", "/", "/a"),
        }
    )
    settings: dict[str, object] = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}
    if scheduler == "scrapy":  # set by the project: Scrapy's own, named
        settings["SCHEDULER"] = "scrapy.core.scheduler.Scheduler"
    _RetakeSpider.seen = {}
    result = await crawl(_RetakeSpider, settings=settings, start=[fresh_site.url("/")])
    assert _RetakeSpider.seen == {"scheduler": DedupScheduler, "receiver": False}
    # "/" once (the start URL, recorded at enqueue), "/b" twice (the
    # spider's own dont_filter request, then not a third time from "/b"'s links).
    assert sorted(fresh_site.fetched()) == ["/", "/a", "/b", "/b"]
    assert result.stats["dedup/url/saved/dont_filter"] == 1  # "/" from "/b"


@deferred_f_from_coro_f
async def test_another_scheduler_is_left_alone_and_the_signal_records_start_urls(
    fresh_site: Site,
) -> None:
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/a"),
            "/a": lambda q: page("A", "/?utm_source=a", "/"),
        }
    )
    own = "tests.test_dupefilter.ProjectScheduler"
    _RetakeSpider.seen = {}
    await crawl(
        _RetakeSpider,
        settings={"ADDONS": {"scrapy_dedup.DedupAddon": 0}, "SCHEDULER": own},
        start=[fresh_site.url("/")],
    )
    assert _RetakeSpider.seen == {"scheduler": ProjectScheduler, "receiver": True}
    # "/" once: recorded at request_scheduled, "/?utm_source=a" and "/" are copies.
    assert sorted(fresh_site.fetched()) == ["/", "/a", "/b"]


class ProjectScheduler(Scheduler):
    """A project's own scheduler (a subclass of Scrapy's): not replaced."""


class IgnoreFirstRetake:
    """An extension that drops (``IgnoreRequest`` at ``request_scheduled``,
    as Scrapy documents) the first ``dont_filter`` request for ``/b``."""

    def __init__(self, crawler: Any) -> None:
        from scrapy import signals

        self.dropped = 0
        crawler.signals.connect(self.scheduled, signal=signals.request_scheduled)

    @classmethod
    def from_crawler(cls, crawler: Any) -> IgnoreFirstRetake:
        return cls(crawler)

    def scheduled(self, request: Request) -> None:
        if request.dont_filter and request.url.endswith("/b") and not self.dropped:
            self.dropped += 1
            raise IgnoreRequest("dropped by the project")


@deferred_f_from_coro_f
async def test_a_dont_filter_request_dropped_at_request_scheduled_does_not_hide_the_page(
    fresh_site: Site,
) -> None:
    # /a asks for /b with dont_filter first (dropped by the project's
    # extension), then links it: /b must be fetched once.
    fresh_site.routes.update(
        {
            "/": lambda q: page("Home", "/a"),
            "/a": lambda q: page("A", "/b"),
            "/b": lambda q: page("B"),
        }
    )

    class FirstRetake(LinkSpider):
        def parse(self, response):  # type: ignore[no-untyped-def]
            if response.url.endswith("/a"):
                yield response.follow("/b", dont_filter=True, callback=self.parse)
            yield from LinkSpider.parse(self, response)

    result = await crawl(
        FirstRetake,
        settings={
            "ADDONS": {"scrapy_dedup.DedupAddon": 0},
            "EXTENSIONS": {"tests.test_dupefilter.IgnoreFirstRetake": 0},
        },
        start=[fresh_site.url("/")],
    )
    assert sorted(fresh_site.fetched()) == ["/", "/a", "/b"]
    assert [item["url"] for item in result.items if item["url"].endswith("/b")]
