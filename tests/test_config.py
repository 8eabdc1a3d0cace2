"""Settings: every bad value stops the crawl naming the setting; typos are warned."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_dedup import CanonicalDupeFilter, ContentDedupPipeline, RelCanonicalMiddleware
from scrapy_dedup.config import DEFAULTS, DedupConfig
from tests.conftest import crawl
from tests.site import Site, url_stage_routes


def make_filter(**settings: Any) -> CanonicalDupeFilter:
    return build_from_crawler(CanonicalDupeFilter, get_crawler(settings_dict=settings))


@pytest.mark.parametrize("off", ["false", "False", "0", 0, False])
def test_a_rule_set_off_as_text_is_off(off: Any) -> None:
    df = make_filter(DEDUP_URL_RULES={"www": off})
    assert not df.request_seen(Request("https://www.example.com/a"))
    assert not df.request_seen(Request("https://example.com/a"))  # another key without "www"
    df.close("finished")


def test_a_host_rule_set_off_as_text_is_off() -> None:
    df = make_filter(DEDUP_URL_HOST_RULES={"shop.example": {"trailing_slash": "false"}})
    assert not df.request_seen(Request("https://shop.example/a"))
    assert not df.request_seen(Request("https://shop.example/a/"))
    assert df.request_seen(Request("https://example.com/b")) is False
    assert df.request_seen(Request("https://example.com/b/"))  # the rule is on elsewhere
    df.close("finished")


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("DEDUP_URL_RULES", {"www": "off"}),
        ("DEDUP_URL_RULES", {"www": "no"}),
        ("DEDUP_URL_RULES", {"no_such_rule": False}),
        ("DEDUP_URL_RULES", '{"www": '),
        ("DEDUP_URL_HOST_RULES", {"a.example": {"www": "off"}}),
        ("DEDUP_URL_HOST_RULES", {"a.example": {"strip_params": 5}}),
        ("DEDUP_URL_STRIP_PARAMS", 5),
        ("DEDUP_URL_KEEP_PARAMS", [1]),
        ("DEDUP_TEXT_FIELD", 5),
        ("DEDUP_TEXT_FIELD", [5]),
        ("DEDUP_URL_FIELD", 5),
        ("DEDUP_CANONICAL_HEAD_LIMIT", 0),
        ("DEDUP_CANONICAL_HEAD_LIMIT", -1),
        ("DEDUP_CANONICAL_MIN_SIMILARITY", 5),
        ("DEDUP_CANONICAL_MIN_SIMILARITY", "high"),
        ("DEDUP_NEAR_THRESHOLD", 0),
        ("DEDUP_NEAR_THRESHOLD", 0.49),
        ("DEDUP_SIMHASH_MAX_DISTANCE", 9),
        ("DEDUP_MAX_TEXT_CHARS", 10),
        ("DEDUP_NEAR_MIN_WORDS", 0),
        ("DEDUP_NEAR_METHOD", "lsh"),
        ("DEDUP_ON_DUPLICATE", "delete"),
        ("DEDUP_STORE_ON_ERROR", "ignore"),
        ("DEDUP_CONTENT_ENABLED", "off"),
        ("DEDUP_DEBUG", "yes"),
        ("DEDUP_STORE", "mysql://db/x"),
        ("DEDUP_STORE", "sqlite:///a#b.db"),
        ("DEDUP_STORE", "sqlite:///:memory:"),
        ("DEDUP_STORE", "redis://"),
        ("DEDUP_STORE_CLASSES", {"x": "tests.test_config.make_filter"}),
        ("DEDUP_RECRAWL_AFTER", "7x"),
        ("DEDUP_RECRAWL_AFTER", "-1d"),
        ("DEDUP_RECRAWL_AFTER", 0),
        ("DEDUP_RECRAWL_AFTER", True),
        ("DEDUP_RECRAWL_AFTER", "inf"),
        ("DEDUP_FRONTIER_RETRIES", -1),
        ("DEDUP_FRONTIER_RETRIES", "often"),
    ],
)
def test_a_bad_value_stops_the_crawl_naming_the_setting(
    setting: str, value: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = {setting: value}
    if setting == "DEDUP_STORE_CLASSES":
        settings["DEDUP_STORE"] = "x://y"
    with pytest.raises(ValueError, match=setting):
        make_filter(**settings)
    assert not list(tmp_path.iterdir())  # no stray file ("a" for "a#b.db")


@pytest.mark.parametrize("component", [ContentDedupPipeline, RelCanonicalMiddleware])
def test_every_component_checks_the_settings(component: type) -> None:
    with pytest.raises(ValueError, match="DEDUP_NEAR_THRESHOLD"):
        build_from_crawler(component, get_crawler(settings_dict={"DEDUP_NEAR_THRESHOLD": 2}))


def test_a_misspelled_setting_is_named_with_the_closest_known_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        make_filter(DEDUP_STOER="sqlite:///x.db", DEDUP_NEAR_TRESHOLD=0.9).close("finished")
    assert "Unknown setting DEDUP_STOER is ignored; did you mean DEDUP_STORE?" in caplog.text
    assert "did you mean DEDUP_NEAR_THRESHOLD?" in caplog.text


def test_what_scrapy_itself_accepts_is_accepted() -> None:
    config = DedupConfig.from_settings(
        get_crawler(
            settings_dict={
                "DEDUP_DEBUG": 1.0,  # Settings.getbool reads bool(int(value))
                "DEDUP_RESET": "-1",
                "DEDUP_URL_RULES": [("www", "false")],  # getdict takes pairs too
                "DEDUP_URL_HOST_RULES": {"a.example": {"strip_params": "foo bar"}},
                "DEDUP_URL_STRIP_PARAMS": "affiliate,sort",
                "DEDUP_TEXT_FIELD": "",  # empty: the default
                "DEDUP_URL_FIELD": "",
                "DEDUP_NAMESPACE": 2026,
                "DEDUP_REDIS_PREFIX": "",
                "DEDUP_NEAR_THRESHOLD": 0.5,
                "DEDUP_CANONICAL_HEAD_LIMIT": 512,
            }
        ).settings
    )
    assert config.debug and config.reset
    assert config.url_rules == {"www": False}
    assert config.url_host_rules["a.example"]["strip_params"] == ("foo", "bar")
    assert config.url_strip_params == ("affiliate", "sort")
    assert (config.text_fields, config.url_field) == (("text",), "url")
    assert (config.namespace, config.redis_prefix) == ("2026", "")
    keys = config.canonicalizer()
    assert keys("https://a.example/p?foo=1&bar=2&id=3") == "https://a.example/p?id=3"


def test_defaults_are_what_a_config_without_settings_holds() -> None:
    config = DedupConfig.from_settings(get_crawler().settings)
    assert config == DedupConfig()
    assert config.canonical_head_limit == DEFAULTS["DEDUP_CANONICAL_HEAD_LIMIT"]
    assert config.text_fields == (DEFAULTS["DEDUP_TEXT_FIELD"],)


SETTINGS_DOC = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def documented_settings() -> dict[str, dict[str, str]]:
    """The ``### `NAME` `` entries of docs/settings.md: for each, the first line
    of its ``- Type:``, ``- Default:`` and ``- Example:`` items."""
    text = SETTINGS_DOC.read_text("utf-8")
    entries: dict[str, dict[str, str]] = {}
    for section in re.split(r"^### ", text, flags=re.MULTILINE)[1:]:
        heading, _, body = section.partition("\n")
        body = body.split("\n## ", 1)[0]  # the next group's text is not this setting's
        items = re.findall(r"^- (Type|Default|Example): *(.*)$", body, flags=re.MULTILINE)
        entries[heading.strip().strip("`")] = dict(items)
    return entries


def python_literal(value: Any) -> str:
    """A default as a settings.py would write it (``"text"``, ``{}``, ``0.75``, ``None``)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def test_every_setting_is_documented_with_its_type_default_and_example() -> None:
    entries = documented_settings()
    assert sorted(set(DEFAULTS) - set(entries)) == []  # undocumented settings
    assert sorted(n for n in entries if n.startswith("DEDUP_") and n not in DEFAULTS) == []
    for name, default in DEFAULTS.items():
        entry = entries[name]
        assert sorted(entry) == ["Default", "Example", "Type"], name
        assert all(value.strip() for value in entry.values()), (name, entry)
        # The documented default is the one the code uses.
        assert f"`{python_literal(default)}`" in entry["Default"], (name, entry["Default"])


def test_the_settings_entries_are_read_whole() -> None:
    entries = documented_settings()
    assert entries["DEDUP_NEAR_THRESHOLD"]["Default"] == "`0.75`"
    assert entries["DEDUP_NAMESPACE"]["Default"] == "`None` (the spider's name)"
    assert entries["DEDUP_STORE"]["Example"].startswith('`"sqlite:///dedup.db"`')


@deferred_f_from_coro_f
async def test_a_crawl_with_a_bad_setting_fetches_nothing(fresh_site: Site) -> None:
    fresh_site.routes.update(url_stage_routes())
    with pytest.raises(ValueError, match="DEDUP_URL_RULES"):
        await crawl(
            settings={"ADDONS": {"scrapy_dedup.DedupAddon": 0}, "DEDUP_URL_RULES": {"www": "off"}},
            start=[fresh_site.url("/")],
        )
    assert fresh_site.fetched() == []


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("", None),
        (90, 90.0),
        ("90", 90.0),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("12h", 43200.0),
        ("7d", 604800.0),
        (" 2W ", 1209600.0),
        (0.5, 0.5),
    ],
)
def test_recrawl_after_reads_durations(value: Any, seconds: float | None) -> None:
    from scrapy.settings import Settings

    from scrapy_dedup.config import DedupConfig

    config = DedupConfig.from_settings(Settings({"DEDUP_RECRAWL_AFTER": value}))
    assert config.recrawl_after == seconds


class ProjectPipeline:
    """A project's own pipeline, as ``scrapy startproject`` writes it."""

    def process_item(self, item: Any) -> Any:
        return item


def test_the_add_on_keeps_the_project_components_and_ties_with_none() -> None:
    # A project made by `scrapy startproject` has its pipeline at 300: the add-on
    # adds its own beside it, at numbers no Scrapy default or template uses.
    from scrapy.utils.test import get_crawler

    own = "tests.test_config.ProjectPipeline"
    crawler = get_crawler(
        settings_dict={"ADDONS": {"scrapy_dedup.DedupAddon": 0}, "ITEM_PIPELINES": {own: 300}}
    )
    crawler._apply_settings()
    settings = crawler.settings
    pipelines = {str(k): v for k, v in settings.getwithbase("ITEM_PIPELINES").items()}
    assert pipelines[own] == 300
    assert [v for k, v in pipelines.items() if "ContentDedupPipeline" in k] == [350]
    for name in ("ITEM_PIPELINES", "DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES"):
        components = {str(k): v for k, v in settings.getwithbase(name).items() if v is not None}
        ours = {k: v for k, v in components.items() if "scrapy_dedup" in k}
        others = {v for k, v in components.items() if "scrapy_dedup" not in k}
        assert ours and not set(ours.values()) & others, (name, ours)


def test_a_clean_item_url_only_loses_what_the_rules_drop() -> None:
    from scrapy.settings import Settings

    from scrapy_dedup.config import DedupConfig

    config = DedupConfig.from_settings(
        Settings({"DEDUP_URL_HOST_RULES": {"e.test": {"www": True, "query_order": True}}})
    )
    cleaner = config.canonicalizer(dropping_only=True)
    assert (
        cleaner.canonicalize("http://www.e.test/A/B/?b=1&a=2&utm_source=x#top")
        == "http://www.e.test/A/B/?b=1&a=2"
    )
