"""scrapy-dedup: stop Scrapy crawls paying the duplicate tax."""

from scrapy_dedup.canonical import URLCanonicalizer, canonicalize_url
from scrapy_dedup.dupefilter import CanonicalDupeFilter

__all__ = ["CanonicalDupeFilter", "URLCanonicalizer", "canonicalize_url"]
