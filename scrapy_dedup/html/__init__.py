"""rel=canonical declarations: read from HTML and ``Link`` headers, resolved
and judged the way browsers and search engines read them. No Scrapy import."""

from scrapy_dedup.html.head import DEFAULT_LIMIT, Head, find_canonical, read_head
from scrapy_dedup.html.judge import REASONS, judge, resolve
from scrapy_dedup.html.link_header import parse_link_header

__all__ = [
    "DEFAULT_LIMIT",
    "REASONS",
    "Head",
    "find_canonical",
    "judge",
    "parse_link_header",
    "read_head",
    "resolve",
]
