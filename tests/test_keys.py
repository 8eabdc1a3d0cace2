"""The info word and request keys."""

from __future__ import annotations

import gc
from itertools import combinations

from scrapy import Request

from scrapy_dedup.keys import (
    PREVIOUS_RUN,
    REL_CANONICAL,
    RULE_BITS,
    Info,
    RequestKeys,
    merge_reasons,
    url_info,
)
from scrapy_dedup.url import RULES, UNPARSED, URLCanonicalizer, canonicalize_url


def test_the_fields_of_the_info_word_never_overlap() -> None:
    fields = list(Info.__members__.values())
    for a, b in combinations(fields, 2):
        assert int(a) & int(b) == 0, (a, b)
    assert max(int(f) for f in fields) < 1 << 63  # fits a signed 64-bit column


def test_every_rule_has_a_bit_of_its_own_below_rel_canonical() -> None:
    assert len(RULES) <= RULE_BITS
    every_rule = (1 << len(RULES)) - 1
    assert every_rule & int(Info.RULES) == every_rule
    assert every_rule & (REL_CANONICAL | PREVIOUS_RUN | int(Info.URL_CRC)) == 0
    # What the canonicalizer reports beyond rules is never stored.
    assert url_info("https://a.test/", UNPARSED | every_rule) & ~int(Info.URL_CRC) == every_rule


def test_merge_reasons_name_what_recorded_the_first_key() -> None:
    url = "https://a.test/x"
    assert merge_reasons(url, 0, url_info(url) | PREVIOUS_RUN) == ("previous_run",)
    assert merge_reasons(url, 0, url_info("https://a.test/y") | REL_CANONICAL) == (
        "rel_canonical",
    )
    assert merge_reasons(url, 0, url_info(url)) == ("exact",)
    fragment = 1 << RULES.index("fragment")
    assert merge_reasons(url, fragment, url_info(url + "#a")) == ("fragment",)


def test_a_request_is_canonicalized_once_and_its_key_forgotten_with_it() -> None:
    calls = []

    class Counting(URLCanonicalizer):
        def canonicalize_traced(self, url: str) -> tuple[str, int]:
            calls.append(url)
            return super().canonicalize_traced(url)

    keys = RequestKeys(Counting())
    request = Request("http://www.a.test/p?utm_source=x")
    first = keys.of(request)
    assert keys.of(request) is first
    assert first.url == canonicalize_url(request.url) == "https://a.test/p"
    assert len(calls) == 1
    del request
    gc.collect()
    assert len(keys._cache) == 0


def test_page_keys_cover_redirect_hops_and_the_declared_canonical() -> None:
    keys = RequestKeys(URLCanonicalizer())
    request = Request(
        "https://a.test/new",
        meta={"redirect_urls": ["https://a.test/old"], "dedup_canonical_url": "https://a.test/c"},
    )
    page = keys.page(request)
    hop = keys.compute(Request("https://a.test/old")).key
    canonical = keys.compute(Request("https://a.test/c")).key
    assert [key for key, _, _ in page] == [keys.of(request).key, hop, canonical]
    assert [url for _, _, url in page] == [request.url, "https://a.test/old", "https://a.test/c"]
    assert page[2][1] & REL_CANONICAL and not page[1][1] & REL_CANONICAL
    assert keys.hops(request) == [hop]
