"""The text stage's algorithms: cleaning, shingles, MinHash, SimHash and their
indexes, and the near-duplicate methods stores use. No Scrapy import."""

from scrapy_dedup.text.clean import clean_text, content_digest, extract_text, looks_like_html
from scrapy_dedup.text.near import MinHashMethod, NearIndex, NearMethod, SimhashMethod, make_method
from scrapy_dedup.text.shingles import normalize_text, shingle_hashes
from scrapy_dedup.text.simhash import hamming, simhash, simhash_from_hashes

__all__ = [
    "MinHashMethod",
    "NearIndex",
    "NearMethod",
    "SimhashMethod",
    "clean_text",
    "content_digest",
    "extract_text",
    "hamming",
    "looks_like_html",
    "make_method",
    "normalize_text",
    "shingle_hashes",
    "simhash",
    "simhash_from_hashes",
]
