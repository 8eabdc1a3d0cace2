"""ContentDedupPipeline on real crawls and on every item type."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import pytest
import scrapy
from scrapy.exceptions import DropItem
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_dedup import ContentDedupPipeline
from tests.conftest import crawl
from tests.site import PRESS, SOLAR, Site, content_stage_routes, page

SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_dedup.CanonicalDupeFilter",
    "ITEM_PIPELINES": {"scrapy_dedup.ContentDedupPipeline": 350},
}

# Pages grouped by the text they carry: one item per group must come out.
GROUPS = {
    "/": "home",
    "/articles/solar": "solar",
    "/articles/solar/print": "solar",
    "/articles/wind": "wind",
    "/shop/garden/hose-25": "hose",
    "/shop/sale/hose-25": "hose",
    "/shop/hose-25-blue": "hose",  # only the SKU differs
    "/news/office-boston": "office",
    "/news/office-denver": "office",  # only the city differs
    "/blog/post": "blog",  # raw HTML differs by timestamp and CSRF token
    "/archive/2024/post": "blog",
}


class ArticleSpider(scrapy.Spider):
    """Yields the main text of each page, as most content spiders do."""

    name = "articles"

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.start_url)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "text": " ".join(response.css("main ::text").getall())}
        yield from response.follow_all(css="a", callback=self.parse)


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"


@deferred_f_from_coro_f
async def test_one_item_per_content_whatever_the_url(fresh_site: Site) -> None:
    fresh_site.routes.update(content_stage_routes())
    runner_result = await crawl(ArticleSpider, SETTINGS, start=fresh_site.url("/"))
    kept = {_path(item["url"]): item for item in runner_result.items}
    stats = runner_result.stats

    assert sorted(fresh_site.fetched()) == sorted(GROUPS)  # every page fetched once
    assert sorted(GROUPS[p] for p in kept) == ["blog", "home", "hose", "office", "solar", "wind"]
    assert stats["dedup/items/unique"] == 6
    assert stats["dedup/items/exact"] + stats["dedup/items/near"] == 5
    assert stats["dedup/items/exact"] >= 2  # print view; blog post under two URLs
    assert stats["dedup/items/near"] >= 2  # city swap; SKU change
    assert stats["item_dropped_count"] == 5
    assert stats["item_dropped_reasons_count/DuplicateItem"] == 5


@deferred_f_from_coro_f
async def test_drop_reason_names_the_kept_url_and_the_kind(
    fresh_site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    fresh_site.routes.update(content_stage_routes())
    reasons: list[tuple[str, str]] = []
    caplog.set_level(logging.DEBUG)
    result = await crawl(ArticleSpider, SETTINGS, start=fresh_site.url("/"))
    kept = {item["url"] for item in result.items}
    for record in caplog.records:
        message = record.getMessage()
        if "duplicate of " in message:
            reasons.append((record.levelname, message))
    assert len(reasons) == 5
    for _, message in reasons:
        first = message.split("duplicate of ", 1)[1].split(" ", 1)[0]
        assert first in kept
    # one INFO line with a hint, then DEBUG: no WARNING per duplicate
    levels = [level for level, _ in reasons]
    assert levels.count("INFO") == 1 and levels.count("DEBUG") == 4
    assert "DEDUP_DEBUG" in next(m for level, m in reasons if level == "INFO")


@deferred_f_from_coro_f
async def test_mark_mode_keeps_every_item_and_points_to_the_kept_one(fresh_site: Site) -> None:
    fresh_site.routes.update(content_stage_routes())
    result = await crawl(
        ArticleSpider, {**SETTINGS, "DEDUP_ON_DUPLICATE": "mark"}, start=fresh_site.url("/")
    )
    assert len(result.items) == len(GROUPS)
    marked = [item for item in result.items if "duplicate_of" in item]
    unmarked = {item["url"] for item in result.items if "duplicate_of" not in item}
    assert len(marked) == 5
    for item in marked:
        assert item["duplicate_of"] in unmarked
        assert GROUPS[_path(item["duplicate_of"])] == GROUPS[_path(item["url"])]
        assert item["duplicate_kind"] in ("exact", "near")
    assert "item_dropped_count" not in result.stats


@deferred_f_from_coro_f
async def test_the_recipes_simhash_radius_misses_sku_and_city_changes(fresh_site: Site) -> None:
    """DEDUP_NEAR_METHOD = "simhash" with the recipe's radius 3 is a near-exact
    detector: the SKU variant and the city swap come out as second items."""
    fresh_site.routes.update(content_stage_routes())
    result = await crawl(
        ArticleSpider,
        {**SETTINGS, "DEDUP_NEAR_METHOD": "simhash", "DEDUP_SIMHASH_MAX_DISTANCE": 3},
        start=fresh_site.url("/"),
    )
    groups = sorted(GROUPS[_path(item["url"])] for item in result.items)
    assert groups == ["blog", "home", "hose", "hose", "office", "office", "solar", "wind"]
    assert result.stats["dedup/items/exact"] == 3  # print view, hose pair, blog pair
    assert "dedup/items/near" not in result.stats


# Item types ------------------------------------------------------------------


class ProductItem(scrapy.Item):
    url = scrapy.Field()
    text = scrapy.Field()
    duplicate_of = scrapy.Field()
    duplicate_kind = scrapy.Field()


class BareItem(scrapy.Item):
    url = scrapy.Field()
    text = scrapy.Field()


@dataclasses.dataclass
class ProductDataclass:
    url: str
    text: str
    duplicate_of: str | None = None
    duplicate_kind: str | None = None


@attrs.define
class ProductAttrs:
    url: str
    text: str
    duplicate_of: str | None = None
    duplicate_kind: str | None = None


def make_pipeline(**settings: Any) -> ContentDedupPipeline:
    crawler = get_crawler(settings_dict={**SETTINGS, **settings})
    pipeline = build_from_crawler(ContentDedupPipeline, crawler)
    pipeline.open_spider()
    return pipeline


ITEM_TYPES = [
    lambda url, text: {"url": url, "text": text},
    lambda url, text: ProductItem(url=url, text=text),
    lambda url, text: ProductDataclass(url=url, text=text),
    lambda url, text: ProductAttrs(url=url, text=text),
]


@pytest.mark.parametrize("make", ITEM_TYPES, ids=["dict", "Item", "dataclass", "attrs"])
@deferred_f_from_coro_f
async def test_every_item_type_is_deduplicated_and_marked(make: Any) -> None:
    drop = make_pipeline()
    assert await drop.process_item(make("https://a.example/1", SOLAR)) is not None
    with pytest.raises(DropItem, match=r"exact duplicate of https://a\.example/1 "):
        await drop.process_item(make("https://a.example/2", "  " + SOLAR.upper() + "\n"))
    with pytest.raises(DropItem, match=r"near duplicate of https://a\.example/1 "):
        await drop.process_item(make("https://a.example/3", SOLAR.replace("Tuesday", "Monday")))

    mark = make_pipeline(DEDUP_ON_DUPLICATE="mark")
    await mark.process_item(make("https://a.example/1", PRESS.format(city="Oslo")))
    item = await mark.process_item(make("https://a.example/2", PRESS.format(city="Lima")))
    adapter = dict(item) if isinstance(item, dict) else item
    getter = adapter.get if isinstance(adapter, dict) else lambda k: getattr(adapter, k, None)
    if isinstance(item, scrapy.Item):
        getter = item.get
    assert getter("duplicate_of") == "https://a.example/1"
    assert getter("duplicate_kind") == "near"


@deferred_f_from_coro_f
async def test_mark_on_an_item_without_the_fields_passes_it_through_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = make_pipeline(DEDUP_ON_DUPLICATE="mark")
    await pipeline.process_item(BareItem(url="https://a.example/1", text=SOLAR))
    with caplog.at_level(logging.WARNING):
        item = await pipeline.process_item(BareItem(url="https://a.example/2", text=SOLAR))
        await pipeline.process_item(BareItem(url="https://a.example/3", text=SOLAR))
    assert item["url"] == "https://a.example/2"
    assert caplog.text.count("no duplicate_of") == 1
    assert pipeline.stats.get_value("dedup/items/mark_unsupported") == 2
    assert pipeline.stats.get_value("dedup/items/exact") == 2


@pytest.mark.parametrize(
    "item",
    [
        {"url": "u"},
        {"url": "u", "text": ""},
        {"url": "u", "text": "   "},
        {"url": "u", "text": 42},
        {"url": "u", "text": None},
        {"url": "u", "text": [1, 2]},
    ],
)
@deferred_f_from_coro_f
async def test_items_without_text_pass_untouched_and_are_counted(item: dict[str, Any]) -> None:
    pipeline = make_pipeline()
    for _ in range(2):
        assert await pipeline.process_item(dict(item)) == item
    assert pipeline.stats.get_value("dedup/items/no_text") == 2


@deferred_f_from_coro_f
async def test_several_text_fields_and_html_values() -> None:
    pipeline = make_pipeline(DEDUP_TEXT_FIELD=["title", "body"])
    first = {
        "url": "1",
        "title": "Solar plan",
        "body": f"<div><p>{SOLAR}</p><script>x()</script></div>",
    }
    assert await pipeline.process_item(first) is first
    with pytest.raises(DropItem, match="exact"):
        await pipeline.process_item({"url": "2", "title": "solar PLAN", "body": SOLAR})
    # the same body under another title is another text
    assert await pipeline.process_item({"url": "3", "title": "Other", "body": SOLAR[:200]})


@deferred_f_from_coro_f
async def test_broken_html_is_still_processed() -> None:
    pipeline = make_pipeline()
    broken = f"<html><body><div><p>{SOLAR}<p><b>unclosed <i>tags</div></span>"
    assert await pipeline.process_item({"url": "1", "text": broken})
    with pytest.raises(DropItem, match="exact"):
        await pipeline.process_item({"url": "2", "text": SOLAR + " unclosed tags"})


@deferred_f_from_coro_f
async def test_a_10_mb_text_is_handled_in_bounded_time() -> None:
    pipeline = make_pipeline()
    words = (SOLAR + " ").split()
    huge = " ".join(words[i % len(words)] + str(i % 9973) for i in range(1_500_000))
    assert len(huge) > 10_000_000
    assert await pipeline.process_item({"url": "1", "text": huge})
    with pytest.raises(DropItem, match="exact"):
        await pipeline.process_item({"url": "2", "text": huge.upper()})
    # near duplicates read the first DEDUP_MAX_TEXT_CHARS characters only
    with pytest.raises(DropItem, match="near"):
        await pipeline.process_item({"url": "3", "text": huge[:2_000_000] + " a different ending"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DEDUP_ON_DUPLICATE", "delete"),
        ("DEDUP_NEAR_METHOD", "lsh"),
        ("DEDUP_NEAR_THRESHOLD", 1.5),
        ("DEDUP_SIMHASH_MAX_DISTANCE", 40),
        ("DEDUP_MAX_TEXT_CHARS", 0),
        ("DEDUP_NEAR_MIN_WORDS", 0),
    ],
)
def test_bad_settings_fail_clearly(name: str, value: Any) -> None:
    method = {"DEDUP_SIMHASH_MAX_DISTANCE": {"DEDUP_NEAR_METHOD": "simhash"}}.get(name, {})
    with pytest.raises(ValueError, match="DEDUP_"):
        make_pipeline(**{name: value}, **method)


def test_switched_off() -> None:
    from scrapy.exceptions import NotConfigured

    with pytest.raises(NotConfigured):
        build_from_crawler(
            ContentDedupPipeline, get_crawler(settings_dict={"DEDUP_CONTENT_ENABLED": False})
        )


@deferred_f_from_coro_f
async def test_one_addons_line_turns_on_both_stages(fresh_site: Site) -> None:
    fresh_site.routes.update(content_stage_routes())
    result = await crawl(
        ArticleSpider, {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}, start=fresh_site.url("/")
    )
    assert sorted(GROUPS[_path(item["url"])] for item in result.items) == [
        "blog",
        "home",
        "hose",
        "office",
        "solar",
        "wind",
    ]
    assert result.stats["dedup/url/filtered"] > 0


@deferred_f_from_coro_f
async def test_short_texts_are_compared_exactly_only() -> None:
    pipeline = make_pipeline()
    first = "Organic cotton T-shirt, short sleeves, crew neck, navy blue, size S"
    assert await pipeline.process_item({"url": "s", "text": first})
    assert await pipeline.process_item({"url": "m", "text": first.replace("size S", "size M")})
    with pytest.raises(DropItem, match="exact"):
        await pipeline.process_item({"url": "s2", "text": first.upper()})
    assert pipeline.stats.get_value("dedup/items/unique") == 2


@pytest.mark.parametrize(("url", "named"), [(None, "(an item without URL)"), (b"/b", "/b")])
@deferred_f_from_coro_f
async def test_items_without_a_string_url_are_still_deduplicated(url: Any, named: str) -> None:
    pipeline = make_pipeline()
    await pipeline.process_item({"url": url, "text": SOLAR})
    with pytest.raises(DropItem, match=re.escape(f"exact duplicate of {named} ")):
        await pipeline.process_item({"url": "https://a.example/2", "text": SOLAR})
    mark = make_pipeline(DEDUP_ON_DUPLICATE="mark")
    await mark.process_item({"text": SOLAR})
    item = await mark.process_item({"url": "https://a.example/2", "text": SOLAR})
    assert item["duplicate_of"] is None and item["duplicate_kind"] == "exact"


@deferred_f_from_coro_f
async def test_texts_in_any_language_and_unicode_spelling_are_deduplicated_in_a_crawl(
    fresh_site: Site,
) -> None:
    """A Chinese article edited by one character and a full stop is a near
    duplicate; a Thai one too; NFD, zero-width spaces and fullwidth letters are
    the same text as their plain spelling; a different article stays."""
    from unicodedata import normalize

    from tests.site import article
    from tests.text.multilingual_corpus import TEXTS

    zh, zh_other = TEXTS["zh"][0], TEXTS["zh"][1]
    th = TEXTS["th"][0]
    french = "Le café de la gare ferme à midi ; réservez votre déjeuner la veille, merci."
    pages = {
        "/zh/1": zh,
        "/zh/2": zh[:40] + "新" + zh[41:] + "。",
        "/zh/3": zh_other,
        "/th/1": th,
        "/th/2": th + "๚",
        "/fr/nfc": normalize("NFC", french),
        "/fr/nfd": normalize("NFD", french),
        "/fr/zw": french.replace("café", "ca\u200bfé").replace("déjeuner", "dé\u00adjeuner"),
        "/fr/wide": french.replace("Le", "\uff2c\uff45"),
    }
    links = list(pages)
    fresh_site.routes["/"] = lambda q: article("home", "index", *links)
    for path, text in pages.items():
        fresh_site.routes[path] = lambda q, text=text: article("page", text)
    result = await crawl(ArticleSpider, SETTINGS, start=fresh_site.url("/"))
    kept = sorted(_path(item["url"]) for item in result.items)

    # One item per text, whichever of its pages came first.
    groups = {"/": "home", "/zh/1": "zh", "/zh/2": "zh", "/zh/3": "zh other"}
    groups |= {"/th/1": "th", "/th/2": "th"} | {p: "fr" for p in pages if p.startswith("/fr/")}
    assert sorted(groups[p] for p in kept) == ["fr", "home", "th", "zh", "zh other"]
    assert result.stats["dedup/items/near"] == 2  # the edited Chinese and Thai
    assert result.stats["dedup/items/exact"] == 3  # the other French spellings


@pytest.mark.parametrize("pages", [30, 5])
@deferred_f_from_coro_f
async def test_a_text_field_the_items_lack_is_a_warning_not_silence(
    fresh_site: Site, caplog: pytest.LogCaptureFixture, pages: int
) -> None:
    # Each page twice, under two URLs (LinkSpider's items: url, title, text).
    # With DEDUP_TEXT_FIELD misspelt, both
    # copies come out and only dedup/items/no_text would say why.
    paths = [f"/{kind}/{n}" for n in range(pages) for kind in ("page", "copy")]
    fresh_site.routes["/"] = lambda q: page("Home", *paths)
    for n in range(pages):
        body = page(f"Page {n}", text=f"Story number {n}, " + "long enough to compare " * 5)
        fresh_site.routes[f"/page/{n}"] = fresh_site.routes[f"/copy/{n}"] = lambda q, b=body: b
    start = [fresh_site.url("/")]
    with caplog.at_level(logging.INFO):
        wrong = await crawl(settings={**SETTINGS, "DEDUP_TEXT_FIELD": "txt"}, start=start)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "scrapy_dedup.pipeline" and r.levelno == logging.WARNING
    ]
    assert wrong.stats["dedup/items/no_text"] == len(wrong.items) == 2 * pages + 1
    assert len(warnings) == 1, warnings
    assert "DEDUP_TEXT_FIELD" in warnings[0] and "no txt field" in warnings[0]
    assert warnings[0].endswith("these items have: text, title, url"), warnings[0]

    caplog.clear()
    with caplog.at_level(logging.INFO):
        right = await crawl(settings=SETTINGS, start=start)
    assert len(right.items) == pages + 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
