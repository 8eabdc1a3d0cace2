"""URL canonicalization: the key the dupefilter stores for a URL. No Scrapy import."""

from scrapy_dedup.url.canonical import (
    C0_AND_SPACE,
    DROPPING,
    RULES,
    UNPARSED,
    URLCanonicalizer,
    canonicalize_url,
    host_to_ascii,
    registrable_domain,
    rule_names,
)

__all__ = [
    "C0_AND_SPACE",
    "DROPPING",
    "RULES",
    "UNPARSED",
    "URLCanonicalizer",
    "canonicalize_url",
    "host_to_ascii",
    "registrable_domain",
    "rule_names",
]
