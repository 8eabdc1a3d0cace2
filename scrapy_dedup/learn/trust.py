"""rel=canonical declarations, trusted per host once verified
(:class:`CanonicalTrust`); the crawl's glue is :mod:`scrapy_dedup.trust`.
No Scrapy import."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from scrapy_dedup.learn.evidence import _CLASSES, _ignore, _key
from scrapy_dedup.learn.scope import _split

__all__ = ["CanonicalTrust"]

logger = logging.getLogger(__name__)


@dataclass
class _Trust:
    verified: int = 0  # declarations whose target, fetched, had the declaring page's text
    revoked: bool = False
    # key of a declared target's URL -> (declaring page's digest, its URL)
    declared: dict[int, tuple[int, str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # targets not fetched on trust
    credit: float = 1.0


class CanonicalTrust:
    """Whether a host's rel=canonical declarations can be trusted to skip the
    declared page: only after ``min_support`` declared pages, fetched, turned
    out to have the declaring page's text; never again after one did not
    (``/~alice/`` declaring ``/~bob/``, page 2 of a list declaring page 1).
    One in ``1 / sample`` declared targets is still left to be fetched, to
    check. ``observe`` returns the targets skipped on trust when a host's
    trust is revoked, to fetch them after all."""

    def __init__(
        self,
        *,
        min_support: int = 3,
        sample: float = 0.05,
        inc: Callable[[str, int], None] | None = None,
    ) -> None:
        self.min_support = min_support
        self.sample = sample
        self.inc: Callable[[str, int], None] = inc or _ignore
        self.hosts: dict[str, _Trust] = {}

    def declare(self, target: str, digest: int, page: str, fetch: str = "") -> bool:
        """A page (its URL and visible-text digest) declares canonical URL
        ``target`` (canonical form; ``fetch``: as declared): whether to skip
        fetching it."""
        trust = self.record(target, digest, page)
        if trust is None or trust.verified < self.min_support:
            return False
        trust.credit += self.sample
        if self.sample and trust.credit >= 1.0:  # left to be fetched: a check
            trust.credit -= 1.0
            return False
        trust.skipped.append(fetch or target)
        return True

    def record(self, target: str, digest: int, page: str) -> _Trust | None:
        """Remember a declaration (made here, or by another worker), to check
        against the target's text when it is fetched; its host's trust."""
        parts = _split(target)
        if parts is None:
            return None
        trust = self.hosts.setdefault(parts.host, _Trust())
        if trust.revoked:
            return None
        if len(trust.declared) < _CLASSES:
            trust.declared.setdefault(_key(target), (digest, page))
        return trust

    def expects(self, url: str) -> bool:
        """Whether pages declared ``url`` (canonical form) canonical and their
        texts wait for its text: only then need :meth:`observe` be told."""
        if not self.hosts:
            return False
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        return trust is not None and not trust.revoked and _key(url) in trust.declared

    def observe(self, url: str, digest: int) -> list[str]:
        """A fetched page: if pages declared it canonical, does it have their
        text? The targets to fetch after all when that revokes its host's trust."""
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        if trust is None or trust.revoked:
            return []
        declared = trust.declared.pop(_key(url), None)
        if declared is None:
            return []
        if declared[0] == digest:
            trust.verified += 1
            self.inc("dedup/canonical/verified", 1)
            return []
        trust.revoked = True
        self.inc("dedup/canonical/revoked", 1)
        logger.info(
            "Not trusting the rel=canonical declarations of %s any more: %s declares %s, "
            "whose text is another",
            parts.host if parts else url,
            declared[1],
            url,
        )
        skipped, trust.skipped = trust.skipped, []
        trust.declared.clear()
        return skipped

    def trusted(self, host: str) -> bool:
        trust = self.hosts.get(host)
        return trust is not None and not trust.revoked and trust.verified >= self.min_support
