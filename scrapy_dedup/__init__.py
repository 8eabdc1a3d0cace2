"""scrapy-dedup: stop Scrapy crawls paying the duplicate tax."""

from scrapy_dedup.addon import DedupAddon
from scrapy_dedup.canonical import URLCanonicalizer, canonicalize_url
from scrapy_dedup.dupefilter import CanonicalDupeFilter
from scrapy_dedup.fingerprint import hamming, simhash
from scrapy_dedup.frontier import DedupFrontierMiddleware
from scrapy_dedup.middleware import RelCanonicalMiddleware
from scrapy_dedup.pipeline import ContentDedupPipeline

__all__ = [
    "CanonicalDupeFilter",
    "ContentDedupPipeline",
    "DedupAddon",
    "DedupFrontierMiddleware",
    "RelCanonicalMiddleware",
    "URLCanonicalizer",
    "canonicalize_url",
    "hamming",
    "simhash",
]
