"""canonicalize_url against what browsers and other canonicalizers do (issue 11, "URL keys").

Cases quoted from elsewhere name their source:

- WPT: web-platform-tests ``url/resources/urltestdata.json`` (the WHATWG URL standard's
  tests; an ``input`` and the ``href`` browsers make of it).
- surt: internetarchive/surt ``tests/test_surt.py`` (the Wayback Machine's canonicalizer,
  "tests from IAURLCanonicalizerTest.java").
- urlcanon: iipc/urlcanon (formerly internetarchive/urlcanon) ``testdata/*.json``.
"""

from __future__ import annotations

import pytest
from scrapy import Request

from scrapy_dedup import URLCanonicalizer, canonicalize_url
from scrapy_dedup.html import judge, resolve
from scrapy_dedup.url import UNPARSED, host_to_ascii

# --- 1. International hosts: UTS #46 non-transitional, as browsers ------------------------

# Python's "idna" codec and w3lib (IDNA 2003) map these to one name; browsers and
# IDNA 2008 registries (DENIC registers faß.de apart from fass.de) keep them apart.
IDNA_2003_MERGES = [
    ("https://faß.de/", "https://fass.de/"),
    ("https://βόλος.com/", "https://βόλοσ.com/"),  # final sigma
    ("https://straße.de/", "https://strasse.de/"),
]

IDNA_KEYS = [
    ("https://faß.ExAmPlE/", "https://xn--fa-hia.example/"),  # WPT, href as quoted
    ("http://你好你好", "https://xn--6qqa088eba/"),  # WPT "http://xn--6qqa088eba/"
    ("https://faß.de/", "https://xn--fa-hia.de/"),
    ("https://βόλος.com/", "https://xn--nxasmm1c.com/"),
    ("https://βόλοσ.com/", "https://xn--nxasmq6b.com/"),
    ("https://straße.de/", "https://xn--strae-oqa.de/"),
    ("https://Bücher.example/", "https://xn--bcher-kva.example/"),
    ("https://☃.net/", "https://xn--n3h.net/"),  # a symbol: UTS #46 valid, not IDNA 2008
    # full-width "EXAMPLE" and ideographic full stop
    ("https://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\u3002com/a", "https://example.com/a"),
    ("https://ex\u00adample.com/", "https://example.com/"),  # a soft hyphen is ignored
    # Browsers use UseSTD3ASCIIRules=false, CheckHyphens=false: idna.encode(uts46=True)
    # refuses these, browsers do not.
    ("https://a_b.bücher.example/", "https://a_b.xn--bcher-kva.example/"),
    ("https://-x.bücher.example/", "https://-x.xn--bcher-kva.example/"),
]

IDNA_UNPARSEABLE = [
    "https://xn--bücher.de/",  # an A-label prefix on a non-ASCII label
    "https://ex\uff0fample.com/",  # a full-width solidus maps to "/", not a host character
    "https://ex\ufffdample.com/",  # disallowed by UTS #46
    "https://" + "ü" * 64 + ".de/",  # a label no DNS name can hold
]


@pytest.mark.parametrize(("a", "b"), IDNA_2003_MERGES)
def test_idna_2003_merges_are_two_hosts(a: str, b: str) -> None:
    assert canonicalize_url(a) != canonicalize_url(b)


@pytest.mark.parametrize(("url", "key"), IDNA_KEYS)
def test_international_hosts_are_keyed_as_browsers_write_them(url: str, key: str) -> None:
    assert canonicalize_url(url) == key
    assert canonicalize_url(key) == key


@pytest.mark.parametrize("url", IDNA_UNPARSEABLE)
def test_hosts_browsers_refuse_are_unparseable(url: str) -> None:
    assert URLCanonicalizer().canonicalize_traced(url) == (url, UNPARSED)


def test_a_crawl_keys_the_host_scrapy_requests() -> None:
    """What docs/url-rules.md says: a crawl keys the host Scrapy fetches. w3lib 2.6 encodes
    it as browsers do (the key's own form); w3lib 2.5 with IDNA 2003 (``fass.de``), and
    then the UTS #46 key only shows for a URL Scrapy has not rewritten."""
    request = Request("https://faß.de/")
    assert request.url in ("https://fass.de/", "https://xn--fa-hia.de/")
    assert canonicalize_url(request.url) == request.url  # the host Scrapy fetches
    assert canonicalize_url("https://faß.de/") == "https://xn--fa-hia.de/"


def test_rel_canonical_sites_are_told_apart_as_keys_are() -> None:
    # judge() compares sites on the key's host; resolve() makes a link what Scrapy
    # fetches, as the middleware's targets are Requests' URLs.
    assert judge("https://faß.de/a", "https://fass.de/b", status=200) == ("ignore", "other_site")
    assert judge("https://faß.de/a", "https://xn--fa-hia.de/b", status=200) == (
        "apply",
        "applied",
    )
    assert resolve("/x", "https://faß.de/a") == Request("https://faß.de/x").url


def test_host_rules_are_keyed_like_hosts() -> None:
    canon = URLCanonicalizer(
        host_rules={
            "faß.de": {"keep_params": ["ref"]},
            "[2001:DB8:0::1]": {"trailing_slash": False},
        }
    )
    assert canon("https://faß.de/?ref=1") == "https://xn--fa-hia.de/?ref=1"
    assert canon("https://xn--fa-hia.de/?ref=1") == "https://xn--fa-hia.de/?ref=1"
    assert canon("https://fass.de/?ref=1") == "https://fass.de/"  # another host
    assert canon("https://[2001:db8::1]/a/") == "https://[2001:db8::1]/a/"


def test_host_to_ascii() -> None:
    assert host_to_ascii("FAß.de") == "xn--fa-hia.de"
    assert host_to_ascii("Example.COM") == "example.com"
    assert host_to_ascii("[::FFFF:192.0.2.128]") == "[::ffff:c000:280]"
    assert host_to_ascii("") is None
    assert host_to_ascii("exa mple.com") is None
    assert host_to_ascii("[fe80::1]x") is None


# --- 2. ASP.NET cookieless ids in the path (session_param) --------------------------------

ID = "4hqa0555fwsecu455xqckv45"

ASPNET_SESSIONS = [
    # surt: stripPathSessionID(b"/(S(4hqa0555fwsecu455xqckv45))/mileg.aspx") == b'/mileg.aspx';
    # urlcanon aggressive.json: "http://legislature.mi.gov/(S(…))/mileg.aspx" the same.
    (f"http://legislature.mi.gov/(S({ID}))/mileg.aspx", "http://legislature.mi.gov/mileg.aspx"),
    # surt: b"/(4hqa0555fwsecu455xqckv45)/mileg.aspx" == b'/mileg.aspx' (ASP.NET 1.x)
    (f"http://legislature.mi.gov/({ID})/mileg.aspx", "http://legislature.mi.gov/mileg.aspx"),
    # ASP.NET's cookie auto-detection marker X(1) before or after the ids
    (f"https://example.com/(X(1)S({ID}))/default.aspx", "https://example.com/default.aspx"),
    (f"https://example.com/(S({ID})X(1))/default.aspx", "https://example.com/default.aspx"),
    # anonymous-id and forms-ticket slots, as surt's third case with ASP.NET's upper case
    (
        f"http://legislature.mi.gov/(A({ID})S({ID})F({ID}))/mileg.aspx?page=sessionschedules",
        "http://legislature.mi.gov/mileg.aspx?page=sessionschedules",
    ),
    (f"https://example.com/app/(S({ID}))/Page.ASPX", "https://example.com/app/Page.ASPX"),
    (f"https://example.com/app/(S({ID}))/a.aspx/.", "https://example.com/app/a.aspx"),
]

ASPNET_KEPT = [
    # surt strips this one too (b"/(a(…)S(…)f(…))/mileg.aspx?page=sessionschedules"), but
    # ASP.NET reads only upper-case identifiers, so on a real server it is a path segment.
    f"https://example.com/(a({ID})S({ID})f({ID}))/mileg.aspx",
    f"https://example.com/(S({ID}))/mileg.html",  # only .aspx paths, as surt and urlcanon
    f"https://example.com/(S({ID}))/",
    f"https://example.com/(S({ID[:-1]}))/mileg.aspx",  # 23 characters
    f"https://example.com/(S({ID.upper()}))/mileg.aspx",  # ASP.NET ids are lower case
    f"https://example.com/a(S({ID}))/mileg.aspx",  # not a whole segment
    f"https://example.com/(S({ID}))mileg.aspx",
    "https://example.com/(X(1))/mileg.aspx",  # no id at all
    f"https://example.com/(X(1)F({'A1B2' * 20}))/mileg.aspx",  # a real forms ticket: kept
    "https://example.com/photos/36050182@N05/(1)/a.aspx",  # surt's "@ in path" kept too
]


@pytest.mark.parametrize(("url", "same_as"), ASPNET_SESSIONS)
def test_aspnet_cookieless_ids_are_session_ids(url: str, same_as: str) -> None:
    canon = URLCanonicalizer()
    key, mask = canon.canonicalize_traced(url)
    assert key == canon(same_as)
    assert "session_param" in canon.rule_names(mask)
    assert canon(key) == key
    assert URLCanonicalizer(session_param=False)(url) != key


@pytest.mark.parametrize("url", ASPNET_KEPT)
def test_other_parentheses_in_paths_are_kept(url: str) -> None:
    canon = URLCanonicalizer()
    key, mask = canon.canonicalize_traced(url)
    assert "session_param" not in canon.rule_names(mask)
    assert "(" in key


# --- 3. Tabs, newlines and backslashes, as browsers and Scrapy's Request read them ---------

WHATWG_CLEANUP = [
    ("http://exa\tmple.com/a\r\nb", "https://example.com/ab"),
    ("http:\\\\example.com\\a\\b", "https://example.com/a/b"),
    ("http://example\t.\norg", "https://example.org/"),  # WPT "http://example.org/"
    ("http://f:\n/c", "https://f/c"),  # WPT "http://f/c"
    ("http:\\\\www.google.com\\foo", "https://google.com/foo"),  # WPT "http://www.google.com/foo"
    ("http://example.com\\\\foo\\\\bar", "https://example.com//foo//bar"),  # WPT, "//" kept
    ("http://foo.com/\\@", "https://foo.com//@"),  # WPT "http://foo.com//@"
    ("http:\\\\a\\b:c\\d@foo.com\\", "https://a/b:c/d@foo.com"),  # WPT "http://a/b:c/d@foo.com/"
    ("h\ttt\np://example.com/a", "https://example.com/a"),
    ("https://example.com/a\\b?q=c\\d#e\\f", "https://example.com/a/b?q=c%5Cd"),
]


@pytest.mark.parametrize(("url", "key"), WHATWG_CLEANUP)
def test_tabs_newlines_and_backslashes_read_as_browsers_do(url: str, key: str) -> None:
    assert canonicalize_url(url) == key
    # the key Scrapy's dupefilter gets for the same link (Request cleans these first)
    assert canonicalize_url(Request(url).url) == key


def test_backslashes_after_the_path_and_in_other_schemes_stay() -> None:
    assert canonicalize_url("https://a.example/?q=a\\b") != canonicalize_url(
        "https://a.example/?q=a/b"
    )
    assert canonicalize_url("https://a.example/#a\\b", fragment=False) == "https://a.example/#a\\b"
    assert canonicalize_url("ftp:\\\\a.example\\b") == "ftp:\\\\a.example\\b"
    assert canonicalize_url("mailto:a\tb@example.com") == "mailto:a\tb@example.com"


# --- 4. IPv6 literals and empty userinfo ----------------------------------------------------

IPV6_KEYS = [
    ("http://[2001:0DB8:0:0:0:0:0:1]:8080/a", "https://[2001:db8::1]:8080/a"),
    ("http://[2001:db8::1]:8080/a", "https://[2001:db8::1]:8080/a"),
    ("http://[2001::1]:80", "https://[2001::1]/"),  # WPT "http://[2001::1]/"
    ("http://[::127.0.0.1]", "https://[::7f00:1]/"),  # WPT "http://[::7f00:1]/"
    ("http://[0:0:0:0:0:0:13.1.68.3]", "https://[::d01:4403]/"),  # WPT "http://[::d01:4403]/"
    ("http://[1:0::]", "https://[1::]/"),  # WPT "http://[1::]/"
    # WPT non-special://[1:2:0:0:5:0:0:0]/ is "non-special://[1:2:0:0:5::]/": the first
    # longest run of zeros; and [1:2:0:0:0:0:0:3] is [1:2::3]
    ("http://[1:2:0:0:5:0:0:0]/", "https://[1:2:0:0:5::]/"),
    ("http://[1:2:0:0:0:0:0:3]/", "https://[1:2::3]/"),
    ("http://[1:0:2:3:4:5:6:7]/", "https://[1:0:2:3:4:5:6:7]/"),  # one zero is not "::"
    # IPv4-mapped: hex as WHATWG writes it (Python 3.13 would write ::ffff:192.0.2.128)
    ("http://[::ffff:192.0.2.128]/", "https://[::ffff:c000:280]/"),
    # RFC 6874 zone ids, kept as written after the address
    ("http://[FE80:0:0::1%25eth0]/a", "https://[fe80::1%25eth0]/a"),
    ("http://[fe80::1%25En0]:8080/", "https://[fe80::1%25En0]:8080/"),
]

IPV6_UNPARSEABLE = [
    "http://[1::2]:3:4",  # WPT failure
    "http://[::1.2.3.]",  # WPT failure
    "http://[0:1:2:3:4:5:6:7:8]",  # WPT failure
    "https://[0::0::0]",  # WPT failure
    "http://[::1%eth0]/",  # a zone id without RFC 6874's "%25"
    "http://[::1%25]/",
    "http://[::1%25a b]/",
]

USERINFO_KEYS = [
    ("https://:@test", "https://test/"),  # WPT "https://test/"
    ("https://test:@test", "https://test@test/"),  # WPT "https://test@test/"
    ("http://:@www.example.com", "https://example.com/"),  # WPT "http://www.example.com/"
    ("http://@www.example.com", "https://example.com/"),  # WPT "http://www.example.com/"
    ("http://a:@www.example.com", "https://a@example.com/"),  # WPT "http://a@www.example.com/"
    ("http://:b@www.example.com", "https://:b@example.com/"),  # WPT, kept
    ("http://:@example.com", "https://example.com/"),
    ("http://@example.com", "https://example.com/"),
    ("https://user@example.com/", "https://user@example.com/"),
    ("https://User:PW@example.com/", "https://User:PW@example.com/"),
]


@pytest.mark.parametrize(("url", "key"), IPV6_KEYS + USERINFO_KEYS)
def test_authority_keys(url: str, key: str) -> None:
    assert canonicalize_url(url) == key
    assert canonicalize_url(key) == key


@pytest.mark.parametrize("url", IPV6_UNPARSEABLE)
def test_broken_ipv6_literals_are_unparseable(url: str) -> None:
    assert URLCanonicalizer().canonicalize_traced(url) == (url, UNPARSED)


def test_the_host_rule_covers_ipv6_and_userinfo() -> None:
    canon = URLCanonicalizer(host=False)
    assert canon("https://[2001:0DB8::1]/") == "https://[2001:0DB8::1]/"
    assert canon("https://:@example.com/") == "https://:@example.com/"
    on = URLCanonicalizer()
    assert on.rule_names(on.canonicalize_traced("https://:@example.com/")[1]) == ["host"]


# --- 5. What peers do and we do not: each pair is two pages --------------------------------

NOT_MERGED = [
    # urlcanon aggressive.json lowercases paths:
    # "http://www.flickr.com/photos/36050182@N05/": "http://flickr.com/photos/36050182@n05"
    ("https://www.flickr.com/photos/36050182@N05/", "https://www.flickr.com/photos/36050182@n05/"),
    ("https://example.com/About-Us", "https://example.com/about-us"),
    # urlcanon semantic_precise.json collapses slashes:
    # "http://host.com//twoslashes?more//slashes": "http://host.com/twoslashes?more//slashes"
    ("http://host.com//twoslashes?more//slashes", "http://host.com/twoslashes?more//slashes"),
    ("https://example.com/a//b", "https://example.com/a/b"),
    # Perl's URL::Normalize remove_directory_index, normalize-url's removeDirectoryIndex
    ("http://www.example.com/index.html", "http://www.example.com/"),
    ("https://example.com/blog/index.php", "https://example.com/blog/"),
    ("https://example.com/default.aspx", "https://example.com/"),
    # NFC and NFD spellings of "café" are different bytes to the server
    ("https://example.com/caf%C3%A9", "https://example.com/cafe%CC%81"),
    # urlcanon aggressive.json: "http://www232.chub.org:8080/foo": "http://chub.org:8080/foo"
    ("http://www232.chub.org:8080/foo", "http://chub.org:8080/foo"),
    ("https://www2.example.com/", "https://www.example.com/"),
    # reserved escapes mean something else decoded
    ("https://example.com/a%2Fb", "https://example.com/a/b"),
    ("https://example.com/a%3Fb", "https://example.com/a?b"),
    ("https://example.com/?q=1%262", "https://example.com/?q=1&2"),
    ("https://example.com/?q=a%3Db", "https://example.com/?q=a=b"),
    # tracking parameters by pattern: normalize-url's default [/^utm_\w+/i], ClearURLs'
    # "utm(?:_[a-z_]*)?", substring guessers; these name real content
    ("https://example.com/feed?source=podcast", "https://example.com/feed"),
    ("https://example.com/?my_utm=1", "https://example.com/"),
    ("https://example.com/translate?src_lang=de", "https://example.com/translate"),
    ("https://example.com/sale?campaign=summer", "https://example.com/sale"),
    ("https://example.com/?utm_source_id_custom=7", "https://example.com/"),
]


@pytest.mark.parametrize(("a", "b"), NOT_MERGED)
def test_what_peers_merge_keeps_two_keys(a: str, b: str) -> None:
    assert canonicalize_url(a) != canonicalize_url(b)


def test_hosts_longer_than_any_dns_name_have_no_registrable_domain() -> None:
    from scrapy_dedup.url import registrable_domain

    assert registrable_domain("www." + "a" * 16_000 + ".com") is None
    assert registrable_domain("shop.example.co.uk") == "example.co.uk"
