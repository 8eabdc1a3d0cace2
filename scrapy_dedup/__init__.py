"""scrapy-dedup: stop Scrapy crawls paying the duplicate tax.

Names are imported on first use, so ``import scrapy_dedup.url`` (or
``from scrapy_dedup import canonicalize_url``) does not import Scrapy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_WHERE = {
    "CanonicalDupeFilter": "scrapy_dedup.dupefilter",
    "ContentDedupPipeline": "scrapy_dedup.pipeline",
    "DedupAddon": "scrapy_dedup.addon",
    "DedupFrontierMiddleware": "scrapy_dedup.frontier",
    "LearnedRulesMiddleware": "scrapy_dedup.learning",
    "RelCanonicalMiddleware": "scrapy_dedup.relcanonical",
    "URLCanonicalizer": "scrapy_dedup.url",
    "canonicalize_url": "scrapy_dedup.url",
    "forget": "scrapy_dedup.forget",
    "hamming": "scrapy_dedup.text",
    "simhash": "scrapy_dedup.text",
}

__all__ = [
    "CanonicalDupeFilter",
    "ContentDedupPipeline",
    "DedupAddon",
    "DedupFrontierMiddleware",
    "LearnedRulesMiddleware",
    "RelCanonicalMiddleware",
    "URLCanonicalizer",
    "canonicalize_url",
    "forget",
    "hamming",
    "simhash",
]

if TYPE_CHECKING:
    from scrapy_dedup.addon import DedupAddon
    from scrapy_dedup.dupefilter import CanonicalDupeFilter
    from scrapy_dedup.forget import forget
    from scrapy_dedup.frontier import DedupFrontierMiddleware
    from scrapy_dedup.learning import LearnedRulesMiddleware
    from scrapy_dedup.pipeline import ContentDedupPipeline
    from scrapy_dedup.relcanonical import RelCanonicalMiddleware
    from scrapy_dedup.text import hamming, simhash
    from scrapy_dedup.url import URLCanonicalizer, canonicalize_url


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'scrapy_dedup' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
