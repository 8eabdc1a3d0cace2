"""The shortcuts for a page that declares its own URL give what the full steps give."""

from __future__ import annotations

import importlib
import random

import pytest
from w3lib.url import safe_url_string

from scrapy_dedup.html import judge, resolve
from scrapy_dedup.url import URLCanonicalizer

J = importlib.import_module("scrapy_dedup.html.judge")


def _resolve_slowly(href: str, page_url: str, base_href: str | None, encoding: str) -> str:
    """resolve() without its shortcut (the steps it skips, verbatim)."""
    base = J._clean_url(page_url)
    if base_href:
        joined_base = J._join(base, J._clean_url(base_href))
        if J._scheme(joined_base) in J._WEB_SCHEMES:
            base = joined_base
    href = J._clean_url(href)
    url = J._join(base, href) if href else base.partition("#")[0]
    for enc in (encoding, "utf-8"):
        try:
            return safe_url_string(url, encoding=enc)
        except Exception:
            continue
    return url


_HOSTS = ["a", "b", "xn--caf-dma", "xn--Caf-dma", "0", "127", "255", "256", "01", "0x7f", "www"]
_HOSTS += ["ex-ample", "ex--ample", "-a", "a-", "Z", "é", "a" * 63, "a" * 64, "", "com", "1a"]
_TOKENS = [
    *"abcXYZ019-._~!$&()*+,=:@/?%'#;[]|\\ é",
    "%2e", "%2E", "%41", "%zz", "%C3%A9", "%c3", "..", "/./", "/../", "//", "%25", ".", "/.", "a.",
]  # fmt: skip


def _urls(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    urls = []
    for _ in range(count):
        if rng.random() < 0.3:
            octets = [0, 1, 9, 10, 99, 100, 127, 199, 200, 249, 250, 255, 256, 300]
            host = ".".join(str(rng.choice(octets)) for _ in range(rng.choice([3, 4, 4, 5])))
        else:
            host = ".".join(rng.choice(_HOSTS) for _ in range(rng.randint(1, 4)))
        port = rng.choice(["", "", ":80", ":8080", ":0", ":080", ":65535", ":99999", ":"])
        if rng.random() < 0.5:  # then hosts, ports and characters the shortcut may take
            host = rng.choice(["example.com", "www.example.co.uk", "127.0.0.1", "a-b.c.de"])
            port = rng.choice(["", ":8080"])
        tokens = _TOKENS if rng.random() < 0.5 else _TOKENS[:26] + _TOKENS[36:]
        path = "/" + "".join(rng.choice(tokens) for _ in range(rng.randint(0, 10)))
        urls.append(f"{rng.choice(['http', 'https', 'HTTP'])}://{host}{port}{path}")
    return urls


def test_resolve_own_url_shortcut_matches_the_full_steps() -> None:
    shortcut = 0
    for url in _urls(10_000, seed=5):
        if J._PLAIN_WEB_URL.fullmatch(url):
            shortcut += 1
        for base_href in (None, "/x/", "https://other.org/"):
            for encoding in ("utf-8", "cp1252"):
                expected = _resolve_slowly(url, url, base_href, encoding)
                assert resolve(url, url, base_href, encoding=encoding) == expected, url
    assert shortcut > 300  # the shortcut was taken often enough to mean something


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/a/1",
        "https://example.com/p?id=1&x=%C3%A9",
        "https://www.example.co.uk/",
        "https://example.com/index.html",
        "http://shop.example.com/",
        "https://a.github.io/x",
    ],
)
@pytest.mark.parametrize("allowed", [None, [], ["example.com"], ["other.org"], [None, 3]])
def test_judge_own_url_matches_the_full_checks(url: str, allowed: list[str] | None) -> None:
    canonicalizer = URLCanonicalizer()
    for status in (200, 204, 301, 404):
        for check_site in (True, False):
            got = judge(
                url,
                url,
                status=status,
                allowed_domains=allowed,
                check_site=check_site,
                canonicalize=canonicalizer,
            )
            # The same target, not string-equal to the page URL: the full checks.
            full = judge(
                url,
                url.replace("://", "://", 1) + "#",
                status=status,
                allowed_domains=allowed,
                check_site=check_site,
                canonicalize=canonicalizer,
            )
            assert got == full
