"""Host template discounting on a real crawl: short pages of one template that
differ only in their own few words are all kept; true copies are still dropped."""

from __future__ import annotations

from itertools import count
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.site import Site, article
from tests.test_pipeline import ArticleSpider, _path

SETTINGS = {"ITEM_PIPELINES": {"scrapy_dedup.ContentDedupPipeline": 350}}
TICKETS = 20
# A query form of about 420 words on every page, as a tracker's filter form.
_ROW = " ".join(
    f"filter {name} is any of new assigned reopened closed and order by {name} ascending"
    for name in (
        "status",
        "owner",
        "reporter",
        "milestone",
        "version",
        "priority",
        "type",
        "component",
        "keywords",
        "severity",
    )
)
FORM = " ".join(_ROW.replace("filter", word) for word in ("filter", "field", "column"))
WORDS = (
    "crash",
    "login",
    "button",
    "export",
    "printer",
    "locale",
    "upload",
    "cache",
    "timezone",
    "search",
    "pager",
    "avatar",
    "invoice",
    "theme",
    "backup",
    "sync",
    "tooltip",
    "font",
    "mobile",
    "webhook",
)


def own(n: int) -> str:
    """Fifteen words of ticket ``n``'s own (a summary and a description)."""
    a, b, c = WORDS[n], WORDS[(n * 7 + 3) % 20], WORDS[(n * 11 + 5) % 20]
    return f"ticket {n} {a} fails when the {b} meets the {c} after upgrade to release {n}.{n}"


def routes() -> dict[str, Any]:
    stamp = count()  # a fresh "generated at" on every response: copies are never exact

    def ticket(n: int) -> Any:
        return lambda q: article(f"#{n}", f"{FORM} {own(n)} generated {next(stamp)}")

    table: dict[str, Any] = {
        "/": lambda q: article(
            "Tickets",
            "tickets",
            *(f"/t/{n}" for n in range(TICKETS)),
            *(f"/t/{n}/print" for n in range(0, TICKETS, 4)),
        )
    }
    for n in range(TICKETS):
        table[f"/t/{n}"] = ticket(n)
        table[f"/t/{n}/print"] = ticket(n)
    return table


def _kept(items: list[dict[str, Any]], site: Site) -> set[str]:
    return {_path(i["url"]) for i in items} - {"/"}


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
@deferred_f_from_coro_f
async def test_pages_differing_only_in_their_own_words_are_all_kept(
    fresh_site: Site, store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fresh_site.routes.update(routes())
    settings: dict[str, Any] = dict(SETTINGS)
    if store == "sqlite":
        settings["DEDUP_STORE"] = f"sqlite:///{tmp_path}/dedup.db"
    elif store == "redis":  # the candidates' fingerprints read back from Redis
        settings["DEDUP_STORE"] = request.getfixturevalue("redis_url")
        settings["DEDUP_REDIS_PREFIX"] = request.getfixturevalue("redis_prefix")
    result = await crawl(ArticleSpider, settings, start=fresh_site.url("/"))
    kept = _kept(result.items, fresh_site)
    tickets = {f"/t/{n}" for n in range(TICKETS)}
    prints = {f"/t/{n}/print" for n in range(0, TICKETS, 4)}
    assert prints <= set(fresh_site.fetched())
    # Every ticket's own words are in some kept item: no distinct page merged.
    texts = " ".join(i["text"] for i in result.items)
    assert all(own(n) in texts for n in range(TICKETS))
    # A ticket and its print view: one of the two is kept, the other dropped.
    for n in range(0, TICKETS, 4):
        assert len(kept & {f"/t/{n}", f"/t/{n}/print"}) == 1
    assert len(kept) == TICKETS
    assert kept <= tickets | prints
    assert result.stats["dedup/items/near"] == len(prints)
    assert result.stats["dedup/items/unique"] == TICKETS + 1
    # Tickets from the 4th on met the first ones on their whole text.
    assert result.stats["dedup/items/template_kept"] >= TICKETS - 4


@deferred_f_from_coro_f
async def test_without_template_discounting_the_form_merges_distinct_pages(
    fresh_site: Site,
) -> None:
    fresh_site.routes.update(routes())
    result = await crawl(
        ArticleSpider, {**SETTINGS, "DEDUP_NEAR_TEMPLATE": False}, start=fresh_site.url("/")
    )
    texts = " ".join(i["text"] for i in result.items)
    assert sum(own(n) not in texts for n in range(TICKETS)) >= 3


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@deferred_f_from_coro_f
async def test_many_copies_of_one_edited_page_are_all_dropped(
    fresh_site: Site, store: str, tmp_path: Path
) -> None:
    """A story kept, then six URLs serving one edited copy of it, one at a
    time: the copy is a near duplicate every time. Counting each copy into
    the template made the story itself template from the third page, and the
    fourth copy (its own part only the edit) was kept."""
    import re

    from tests.text.neardup_corpus import documents

    story = documents(min_words=200, max_words=200, seed=3)[0]
    copy = re.sub(r"\bthe\b", "a", story, count=1)
    assert copy != story
    copies = [f"/copy/{n}" for n in range(6)]
    fresh_site.routes["/story"] = lambda q: article("Story", story, *copies)
    for path in copies:
        fresh_site.routes[path] = lambda q: article("Story", copy)
    settings: dict[str, Any] = {**SETTINGS, "CONCURRENT_REQUESTS": 1}
    if store == "sqlite":
        settings["DEDUP_STORE"] = f"sqlite:///{tmp_path}/dedup.db"
    result = await crawl(ArticleSpider, settings, start=fresh_site.url("/story"))
    assert set(fresh_site.fetched()) >= {"/story", *copies}
    assert [_path(i["url"]) for i in result.items] == ["/story"]
    assert result.stats["dedup/items/near"] == len(copies)


@deferred_f_from_coro_f
async def test_the_store_stage_site_keeps_one_item_per_text_in_any_order() -> None:
    """The news site the store tests crawl (tests.site.store_stage_routes: one
    text at five URLs, another at four, each copy edited alike) through the
    pipeline in 100 orders: one item per real text in every order. Before
    each text taught the template once, 39 of 200 orders kept doc1 twice."""
    import random

    from scrapy.exceptions import DropItem

    from tests.site import store_stage_texts
    from tests.test_pipeline import make_pipeline

    pages = store_stage_texts()
    names = sorted({name for _, _, name in pages})
    for seed in range(100):
        order = random.Random(seed).sample(pages, len(pages))
        pipeline = make_pipeline()
        kept = []
        for url, text, name in order:
            try:
                await pipeline.process_item({"url": f"http://news.test{url}", "text": text})
            except DropItem:
                continue
            kept.append(name)
        assert sorted(kept) == names, f"order {seed}"
