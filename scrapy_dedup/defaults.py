"""Every scrapy-dedup setting and its default, in one place.

Components read a setting with ``settings.getbool(name)``, ``getdict(name,
DEFAULTS[name])`` and the like, so a user who does not mention a name gets the
default written here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULTS"]

DEFAULTS: dict[str, Any] = {
    # URL stage (CanonicalDupeFilter)
    "DEDUP_URL_RULES": {},  # {rule name: bool}; every rule is on unless set to False
    "DEDUP_URL_STRIP_PARAMS": [],  # extra query parameter names to strip everywhere
    "DEDUP_URL_KEEP_PARAMS": [],  # names never stripped (overrides the built-in list)
    # {host: {rule: bool, "strip_params": [...], "keep_params": [...]}}
    "DEDUP_URL_HOST_RULES": {},
    # Content stage (ContentDedupPipeline)
    "DEDUP_CONTENT_ENABLED": True,
    "DEDUP_TEXT_FIELD": "text",  # a field name, or a list: their texts are joined
    "DEDUP_URL_FIELD": "url",  # where items keep their URL (also rel=canonical's)
    "DEDUP_ON_DUPLICATE": "drop",  # or "mark": keep it, with duplicate_of/duplicate_kind
    "DEDUP_NEAR_METHOD": "minhash",  # or "simhash" (the recipe's), or "off"
    "DEDUP_NEAR_THRESHOLD": 0.75,  # minhash: estimated 3-shingle Jaccard similarity
    "DEDUP_SIMHASH_MAX_DISTANCE": 3,  # simhash: Hamming radius in bits
    "DEDUP_MAX_TEXT_CHARS": 1_000_000,  # near-dup fingerprints read at most this much
    "DEDUP_NEAR_MIN_WORDS": 30,  # shorter texts are compared exactly only
    # rel=canonical (RelCanonicalMiddleware)
    "DEDUP_CANONICAL_ENABLED": True,
    "DEDUP_CANONICAL_CHECK_SITE": True,  # ignore a canonical on another registrable domain
    "DEDUP_CANONICAL_CHECK_HOMEPAGE": True,  # ignore a canonical to the homepage from a page
    "DEDUP_CANONICAL_HEAD_LIMIT": 256 * 1024,  # bytes of a page searched for the head's link
    "DEDUP_FETCHED_URL_FIELD": "fetched_url",  # where the fetched URL goes when it differs
    # a later page's item is a canonical duplicate only when its text is this close
    # (estimated Jaccard) to an item already filed under the canonical URL
    "DEDUP_CANONICAL_MIN_SIMILARITY": 0.5,
    # Stores
    # "memory", "sqlite:///relative.db", "sqlite:////abs.db", "redis://host:6379/0",
    # "redis+cluster://host:7000"
    "DEDUP_STORE": "memory",
    "DEDUP_NAMESPACE": None,  # None: the spider's name
    "DEDUP_RESET": False,  # forget the namespace's state when the crawl starts
    "DEDUP_STORE_ON_ERROR": "continue",  # or "stop": what a store failing mid-crawl does
    "DEDUP_REDIS_PREFIX": "dedup",  # Redis key names start "<prefix>:<namespace>:"
    # Logging
    "DEDUP_DEBUG": False,  # log every dropped request/item with the reason
}
