"""canonicalize_url: tables of URLs that must and must not share a key."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.provisional import urls as hyp_urls

from scrapy_dedup import URLCanonicalizer, canonicalize_url
from scrapy_dedup.url import RULES, UNPARSED

# Each pair is one page behind two URLs.
MUST_MERGE = [
    ("http://example.com/pricing", "https://example.com/pricing"),
    ("https://example.com/pricing/", "https://example.com/pricing"),
    ("https://www.example.com/pricing", "https://example.com/pricing"),
    ("https://EXAMPLE.com/pricing", "https://example.com/pricing"),
    ("https://example.com/pricing#faq", "https://example.com/pricing"),
    ("https://example.com/pricing?utm_source=newsletter", "https://example.com/pricing"),
    ("https://example.com/pricing?ref=footer", "https://example.com/pricing"),
    ("https://example.com/p?UTM_Source=x&id=1", "https://example.com/p?id=1"),
    ("https://example.com/p?gclid=1&fbclid=2&msclkid=3&id=1", "https://example.com/p?id=1"),
    ("https://example.com/p?mc_cid=a&mc_eid=b", "https://example.com/p"),
    ("https://example.com/p?dclid=a&gbraid=b&wbraid=c&yclid=d", "https://example.com/p"),
    ("http://example.com:80/", "https://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("https://example.com:/", "https://example.com/"),
    ("http://example.com:080/a", "https://example.com/a"),
    ("https://example.com", "https://example.com/"),
    ("https://example.com/a/./b/../c", "https://example.com/a/c"),
    ("https://example.com/%7euser", "https://example.com/~user"),
    ("https://example.com/a%2fb", "https://example.com/a%2Fb"),
    ("https://example.com/caf%c3%a9", "https://example.com/café"),
    ("https://example.com/a b", "https://example.com/a%20b"),
    ("https://example.com/?b=2&a=1", "https://example.com/?a=1&b=2"),
    ("https://example.com/?q=a+b", "https://example.com/?q=a%20b"),
    ("https://example.com/?a=1&&b=2&", "https://example.com/?a=1&b=2"),
    ("https://example.com/?", "https://example.com/"),
    ("https://example.com/?%61=1", "https://example.com/?a=1"),
    ("https://bücher.example/", "https://xn--bcher-kva.example/"),
    ("https://www.example.co.uk/", "https://example.co.uk/"),
    ("https://example.com/a;jsessionid=0A1B2C3D?x=1", "https://example.com/a?x=1"),
    (
        "https://example.com/?PHPSESSID=0123456789abcdef0123456789abcdef&x=1",
        "https://example.com/?x=1",
    ),
    ("https://example.com/?sid=0123456789abcdef0123456789abcdef", "https://example.com/"),
    ("https://example.com/?ASPSESSIONIDQQGQQKTA=ABCDEFGHIJKLMNOPQRSTUVWX", "https://example.com/"),
    ("https://example.com/?sessionid=a8F3kd92LmQ0xYz1&x=1", "https://example.com/?x=1"),
    ("https://example.com/?CFID=123&CFTOKEN=456&x=1", "https://example.com/?x=1"),
    ("https://example.com/shop/..;jsessionid=0A1B/admin", "https://example.com/admin"),
    ("http://example.com:8080/a", "https://example.com:8080/a"),
    ("  https://example.com/a\n", "https://example.com/a"),
]

# Each pair is two real pages: merging them would silently lose one.
MUST_NOT_MERGE = [
    ("https://example.com/Pricing", "https://example.com/pricing"),  # paths are case-sensitive
    ("https://example.com/?page=2", "https://example.com/?page=3"),
    ("https://example.com/?id=42", "https://example.com/"),
    ("https://example.com/?reference=1", "https://example.com/"),  # not "ref"
    ("https://example.com/?source_id=1", "https://example.com/"),  # not "src"
    ("https://example.com/?campaign_id=1", "https://example.com/"),  # not "utm_campaign"
    ("https://example.com/?utm_source_id=1", "https://example.com/"),  # no prefix guessing
    ("https://example.com/?sid=42", "https://example.com/"),  # not a session id's shape
    ("https://example.com/talk?sessionid=41", "https://example.com/talk?sessionid=42"),
    ("https://example.com/list?cfid=3", "https://example.com/list?cfid=4"),  # cfid alone
    ("https://www.shop.example.com/", "https://shop.example.com/"),  # a subdomain, not eTLD+1
    ("https://example.com/a%C2%A0", "https://example.com/a"),  # NBSP is not trimmed
    (
        "https://example.com/index.php?page=2&/blog/x",
        "https://example.com/index.php?/blog/x&page=2",
    ),
    ("https://www.com/", "https://com/"),  # www.com is itself the registrable domain
    ("https://www2.example.com/", "https://example.com/"),
    ("https://www.co.uk/", "https://co.uk/"),
    ("https://a.github.io/", "https://b.github.io/"),
    ("http://example.com:443/", "https://example.com/"),  # plain HTTP on 443 is not TLS
    ("https://example.com:80/", "http://example.com/"),
    ("https://example.com:8443/", "https://example.com/"),
    ("https://example.com/a%2Fb", "https://example.com/a/b"),  # %2F is never decoded
    ("https://example.com/a+b", "https://example.com/a%20b"),  # '+' is only a space in queries
    ("https://example.com/a//", "https://example.com/a"),  # one slash only
    ("https://example.com//", "https://example.com/"),
    ("https://example.com/?a", "https://example.com/?a="),  # bare key kept as it is
    ("https://example.com/?a=1&a=2", "https://example.com/?a=2&a=1"),  # repeated keys keep order
    ("https://example.com/?q=%E9", "https://example.com/?q=%C3%A9"),  # latin-1 vs UTF-8 bytes
    ("https://example.com/index.php?/blog/x", "https://example.com/index.php?/blog/y"),
    ("https://example.com/index.php?/blog/x&page=2", "https://example.com/index.php?page=2"),
    ("https://user:Pass@example.com/", "https://user:pass@example.com/"),  # userinfo keeps case
    ("https://example.com/a;b=1", "https://example.com/a"),  # other path parameters are real
    ("ftp://example.com/a", "ftp://example.com/a/"),  # other schemes are left alone
    ("https://example.com/a?x=1", "https://example.com/a?x=2"),
    ("https://example.com/a", "https://example.org/a"),
]

EXPECTED_KEYS = [
    (
        "HTTP://WWW.Example.COM:80/a/./b/?utm_source=x&b=2&a=1#top",
        "https://example.com/a/b?a=1&b=2",
    ),
    (
        "https://example.com/index.php?/blog/x&utm_medium=mail",
        "https://example.com/index.php?/blog/x",
    ),
    (
        "https://example.com/index.php?page=2&/blog/x",
        "https://example.com/index.php?page=2&/blog/x",
    ),
    ("https://example.com/?a&b=&c=1", "https://example.com/?a&b=&c=1"),
    ("https://example.com/?z=1&a=2&z=0", "https://example.com/?a=2&z=1&z=0"),
    ("https://example.com/?q=%e9%zz", "https://example.com/?q=%E9%25zz"),
    ("https://[2001:DB8::1]:443/", "https://[2001:db8::1]/"),
    ("mailto:Someone@Example.com", "mailto:Someone@Example.com"),
    ("https://example.com/a\xa0", "https://example.com/a%C2%A0"),
    ("\x00\x1f https://example.com/a \t\n", "https://example.com/a"),
]

UNPARSEABLE = [
    "http://[::1",  # broken IPv6
    "http://example.com:99999/",  # port out of range
    "http://example.com:8o/",  # bad port
    "http://exa mple.com/",  # space in host
    "http://",  # no host
    "http:///path",
    "http://ex\x00ample.com/",
]


@pytest.mark.parametrize(("a", "b"), MUST_MERGE)
def test_same_page_shares_a_key(a: str, b: str) -> None:
    assert canonicalize_url(a) == canonicalize_url(b)


@pytest.mark.parametrize(("a", "b"), MUST_NOT_MERGE)
def test_real_pages_keep_their_own_key(a: str, b: str) -> None:
    assert canonicalize_url(a) != canonicalize_url(b)


@pytest.mark.parametrize(("url", "key"), EXPECTED_KEYS)
def test_expected_keys(url: str, key: str) -> None:
    assert canonicalize_url(url) == key


@pytest.mark.parametrize("url", UNPARSEABLE)
def test_unparseable_url_is_its_own_stripped_key(url: str) -> None:
    key, mask = URLCanonicalizer().canonicalize_traced(f"  {url} ")
    assert key == url.strip()
    assert mask & UNPARSED


@pytest.mark.parametrize("rule", RULES)
def test_every_rule_can_be_switched_off(rule: str) -> None:
    """For every rule there is a URL it changes, and switching it off keeps that change out."""
    samples = {
        "scheme": "http://example.com/a",
        "host": "https://EXAMPLE.com/a",
        "www": "https://www.example.com/a",
        "default_port": "https://example.com:443/a",
        "empty_path": "https://example.com",
        "percent_encoding": "https://example.com/%7ea",
        "dot_segments": "https://example.com/b/../a",
        "session_param": "https://example.com/a;jsessionid=1",
        "trailing_slash": "https://example.com/a/",
        "tracking_param": "https://example.com/a?utm_source=x",
        "empty_query": "https://example.com/a?",
        "query_plus": "https://example.com/a?q=a+b",
        "query_order": "https://example.com/a?b=1&a=2",
        "fragment": "https://example.com/a#x",
    }
    url = samples[rule]
    on = URLCanonicalizer()
    off = URLCanonicalizer(**{rule: False})
    assert on.rule_names(on.canonicalize_traced(url)[1]) == [rule]
    assert off.canonicalize_traced(url)[1] == 0
    assert off(url) != on(url)


def test_strip_and_keep_lists_extend_globally_and_per_host() -> None:
    canon = URLCanonicalizer(
        strip_params=["sessid"],
        keep_params=["ref"],
        host_rules={
            "shop.example": {"strip_params": ["sort"], "trailing_slash": False},
            "blog.example": {"keep_params": ["utm_source"]},
        },
    )
    assert canon("https://a.example/?sessid=1&ref=x") == "https://a.example/?ref=x"
    # a host rule applies to the host and its subdomains, and only there
    assert canon("https://www.shop.example/p/?sort=asc") == "https://shop.example/p/"
    assert canon("https://eu.shop.example/p/?sort=asc") == "https://eu.shop.example/p/"
    assert canon("https://a.example/p/?sort=asc") == "https://a.example/p?sort=asc"
    assert canon("https://blog.example/?utm_source=x") == "https://blog.example/?utm_source=x"


def test_host_rules_match_however_the_host_is_written() -> None:
    canon = URLCanonicalizer(
        host_rules={
            "Bücher.de": {"keep_params": ["utm_source"]},
            "www.example.com": {"keep_params": ["ref"], "trailing_slash": False},
            "example.org": {"keep_params": ["src"]},
            "shop.example.org": {"trailing_slash": False},
        }
    )
    assert canon("https://bücher.de/?utm_source=x") == "https://xn--bcher-kva.de/?utm_source=x"
    assert (
        canon("https://xn--bcher-kva.de./?utm_source=x")
        == "https://xn--bcher-kva.de./?utm_source=x"
    )
    # a rule written for www.example.com holds for example.com too, so keys stay stable
    key = canon("https://www.example.com/a/?ref=1")
    assert key == "https://example.com/a/?ref=1" == canon(key)
    # a subdomain's rule builds on its parent's
    assert canon("https://shop.example.org/a/?src=1") == "https://shop.example.org/a/?src=1"


def test_host_rules_reach_hosts_of_many_labels() -> None:
    """Lookups are bounded by the longest rule host (3 labels here); a host of
    thousands of labels still finds its rule, and one just outside does not."""
    canon = URLCanonicalizer(
        host_rules={"a.shop.example": {"trailing_slash": False}, "example": {"keep_params": ["x"]}}
    )
    deep = "x." * 5000 + "a.shop.example"
    assert canon(f"https://{deep}/p/?x=1") == f"https://{deep}/p/?x=1"
    assert canon(f"https://{'x.' * 5000}b.shop.example/p/?x=1") == (
        f"https://{'x.' * 5000}b.shop.example/p?x=1"
    )
    assert canon("https://a.shop.example/p/") == "https://a.shop.example/p/"
    assert canon("https://shop.example/p/") == "https://shop.example/p"


def test_unknown_rule_names_are_errors() -> None:
    with pytest.raises(ValueError, match="trailing_slashes"):
        URLCanonicalizer(trailing_slashes=False)
    with pytest.raises(ValueError, match="strip"):
        URLCanonicalizer(host_rules={"a.example": {"strip": ["x"]}})


def test_huge_inputs_get_a_key() -> None:
    long_path = "https://example.com/" + "a/" * 50_000
    assert canonicalize_url(long_path) == long_path[:-1]
    many = "https://example.com/?" + "&".join(f"p{i}={i}" for i in range(5000, 0, -1))
    key = canonicalize_url(many)
    assert key.startswith("https://example.com/?p1=1&p10=10&p100=100")
    assert key.count("&") == 4999


# hypothesis ---------------------------------------------------------------

_chars = st.characters(codec="utf-8", exclude_categories=("Cs",))
_url_ish = st.one_of(
    hyp_urls(),
    st.text(_chars, max_size=80),
    st.builds(
        "".join,
        st.lists(
            st.sampled_from(
                [
                    "http://",
                    "https://",
                    "HTTP://",
                    "www.",
                    "WWW.",
                    "example.com",
                    "Bücher.de",
                    "[::1]",
                    "[",
                    "]",
                    ":",
                    ":80",
                    ":443",
                    ":08",
                    "@",
                    "user:pw@",
                    "/",
                    "//",
                    "/./",
                    "/../",
                    "..",
                    "%",
                    "%2f",
                    "%7E",
                    "%zz",
                    "%41",
                    "%e9",
                    "?",
                    "&",
                    "&&",
                    "=",
                    "+",
                    "%20",
                    " ",
                    "#",
                    "#frag",
                    "utm_source=x",
                    "ref=1",
                    "a=1",
                    "b=",
                    "jsessionid=1",
                    ";jsessionid=ABC",
                    "ASPSESSIONIDABCDEFGH=x",
                    "\t",
                    "\x00",
                    "é",
                    "\u2028",
                    "xn--",
                    ".",
                    "a",
                    "B",
                    "\\",
                    "\r\n",
                    "faß",
                    "ς",
                    "\uff25\uff38\u3002",  # full-width "EX."
                    "_",
                    "[2001:0DB8:0:0::1]",
                    "[::ffff:1.2.3.4]",
                    "%25eth0",
                    ":@",
                    "(S(4hqa0555fwsecu455xqckv45))",
                    "(X(1)S(4hqa0555fwsecu455xqckv45))",
                    ".aspx",
                ]
            ),
            max_size=14,
        ),
    ),
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_url_ish)
def test_never_raises_and_is_idempotent(url: str) -> None:
    key = canonicalize_url(url)
    assert isinstance(key, str)
    assert canonicalize_url(key) == key


_HOST_RULES = {
    "www.example.com": {"trailing_slash": False, "keep_params": ["ref"]},
    "bücher.de": {"www": False, "strip_params": ["a"]},
    "com": {"query_order": False},
}


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_url_ish, st.sets(st.sampled_from(RULES)), st.booleans())
def test_idempotent_with_any_rules_off(url: str, off: set[str], host_rules: bool) -> None:
    canon = URLCanonicalizer(
        host_rules=_HOST_RULES if host_rules else None, **dict.fromkeys(off, False)
    )
    key = canon(url)
    assert canon(key) == key
