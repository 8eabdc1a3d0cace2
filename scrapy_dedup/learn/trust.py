"""rel=canonical declarations, trusted per host once verified
(:class:`CanonicalTrust`); the crawl's glue is :mod:`scrapy_dedup.trust`.
No Scrapy import."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from scrapy_dedup.learn.evidence import _CLASSES, _ignore, _key, within
from scrapy_dedup.learn.scope import _split

__all__ = ["CanonicalTrust"]

logger = logging.getLogger(__name__)

#: Fetched pages whose text digest is remembered (across hosts, the first
#: ones): a declaration read after its target was fetched is checked against
#: it (about 100 bytes a page; beyond, such a declaration checks nothing).
_FETCHED = 100_000


@dataclass
class _Trust:
    verified: int = 0  # declared pages, fetched, with the declaring page's text and links
    revoked: bool = False
    # key of a declared target's URL -> (declaring page's digest, its URL, the
    # filter of its links: evidence.links_filter, None when not known; the
    # target as declared, else its canonical form: for messages)
    declared: dict[int, tuple[int, str, int | None, str]] = field(default_factory=dict)
    # This process's declarations its log has not given back yet (with a
    # shared log they count from there, in its order): key -> as in declared.
    pending: dict[int, tuple[int, str, int | None, str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # targets not fetched on trust
    # Targets earlier runs (or a worker's earlier life) skipped on trust and
    # no fetch of them is known: key -> URL to fetch should the trust end.
    owed: dict[int, str] = field(default_factory=dict)
    credit: float = 1.0


class CanonicalTrust:
    """Whether a host's rel=canonical declarations can be trusted to skip the
    declared page: only after ``min_support`` declared pages, fetched, turned
    out to have the declaring page's text and no link it lacks; never again
    after one did not (``/~alice/`` declaring ``/~bob/``, page 2 of a list
    declaring page 1, a print view without the links its article has: skipping
    the declared page would lose what only it links to).
    One in ``1 / sample`` declared targets is still left to be fetched, to
    check. ``observe`` returns the targets skipped on trust when a host's
    trust is revoked, to fetch them after all; those an earlier run skipped
    (:meth:`skipped_earlier`) are in :meth:`take_due` then, unless a fetch
    of them turns up.

    A crawl whose declarations and fetched pages go through a shared log (the
    workers of one Redis) calls :meth:`declare` with ``record=False`` and
    :meth:`record` and :meth:`observe` with the log's records, its own
    included, in the log's order: every worker's trust is then the same
    function of the log. A declaration read after its target was fetched is
    checked against that page's text: another text ends the trust."""

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
        # Targets to fetch: skipped by an earlier run on a trust that ended
        # since, or here on a trust a declaration ended (record): key -> URL.
        self._due: dict[int, str] = {}
        self._fetched: dict[int, int] = {}  # key of a fetched page -> its digest

    def declare(
        self,
        target: str,
        digest: int,
        page: str,
        fetch: str = "",
        links: int | None = None,
        *,
        record: bool = True,
    ) -> bool:
        """A page (its URL, visible-text digest and ``links`` filter) declares
        canonical URL ``target`` (canonical form; ``fetch``: as declared):
        whether to skip fetching it. ``record=False``: the declaration counts
        when the shared log gives it back (:meth:`record`); until then it is
        only known to :meth:`links_within`."""
        if record:
            self.record(target, digest, page, links, fetch)
            trust = self._host(target)
        else:
            trust = self._host(target)
            if trust is not None and not trust.revoked and len(trust.pending) < _CLASSES:
                trust.pending.setdefault(_key(target), (digest, page, links, fetch or target))
        if trust is None or trust.revoked or trust.verified < self.min_support:
            return False
        trust.credit += self.sample
        if self.sample and trust.credit >= 1.0:  # left to be fetched: a check
            trust.credit -= 1.0
            return False
        trust.skipped.append(fetch or target)
        return True

    def _host(self, target: str) -> _Trust | None:
        parts = _split(target)
        return None if parts is None else self.hosts.setdefault(parts.host, _Trust())

    def record(
        self, target: str, digest: int, page: str, links: int | None = None, fetch: str = ""
    ) -> None:
        """Remember a declaration (made here, or by another worker), to check
        against the target's text when it is fetched. A target fetched
        already is checked now: another text ends its host's trust (the
        targets skipped on it are then in :meth:`take_due`); the same text
        verifies nothing (its links are not known). ``fetch``: the target as
        declared, for messages (else the one this worker's :meth:`declare`
        was told, else ``target``)."""
        trust = self._host(target)
        if trust is None:
            return
        key = _key(target)
        own = trust.pending.pop(key, None)
        if trust.revoked:
            return
        shown = fetch or (own[3] if own is not None else target)
        fetched = self._fetched.get(key)
        if fetched is not None:
            if fetched != digest:
                for url in self._revoke(trust, target, page, "has another text", shown):
                    self._due[_key(url)] = url
            return
        if len(trust.declared) < _CLASSES:
            trust.declared.setdefault(key, (digest, page, links, shown))

    def skipped_earlier(self, target: str, fetch: str) -> None:
        """An earlier run (or another worker's earlier life) skipped ``target``
        (canonical form; ``fetch``: the URL to fetch) on its host's trust:
        fetched after all should that trust end (here, or before this was
        read), since no later link to it is fetched (the store has it seen)."""
        parts = _split(target)
        if parts is None:
            return
        trust = self.hosts.setdefault(parts.host, _Trust())
        if trust.revoked:
            self._due[_key(target)] = fetch
        else:
            trust.owed[_key(target)] = fetch

    def take_due(self) -> list[str]:
        """The targets to fetch now (each once): those earlier runs skipped on
        a trust that has ended since, and those skipped here on a trust that
        a declaration of a page fetched already ended (:meth:`record`), but
        for any a fetch of is known."""
        due, self._due = list(self._due.values()), {}
        return due

    def expects(self, url: str) -> bool:
        """Whether pages declared ``url`` (canonical form) canonical and their
        texts wait for its text: only then need :meth:`observe` be told."""
        if not self.hosts:
            return False
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        if trust is None or trust.revoked:
            return False
        key = _key(url)
        return key in trust.declared or key in trust.pending

    def links_within(self, url: str, links: set[str]) -> bool | None:
        """Whether the ``links`` of fetched page ``url`` are all links of the
        page that declared it (None: no declaration of it, or its links are
        not known): what a worker fetching it tells the others."""
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        declared = None
        if trust is not None:
            key = _key(url)
            declared = trust.declared.get(key) or trust.pending.get(key)
        if declared is None or declared[2] is None:
            return None
        return within(links, declared[2])

    def observe(self, url: str, digest: int, links_within: bool | None = None) -> list[str]:
        """A fetched page: if pages declared it canonical, has it their text
        (``digest``), and no link they lack (``links_within``:
        :meth:`links_within`, None when not known: then it verifies nothing)?
        The targets to fetch after all when that revokes its host's trust."""
        parts = _split(url)
        trust = self.hosts.get(parts.host) if parts is not None else None
        key = _key(url)
        if self._due:
            self._due.pop(key, None)  # fetched after all: not owed any more
        if len(self._fetched) < _FETCHED or key in self._fetched:
            self._fetched[key] = digest  # for a declaration of it read later
        if trust is None:
            return []
        if trust.owed:
            trust.owed.pop(key, None)
        if trust.revoked:
            return []
        declared = trust.declared.pop(key, None)
        if declared is None:
            return []
        if declared[0] == digest and links_within:
            trust.verified += 1
            self.inc("dedup/canonical/verified", 1)
            return []
        if declared[0] == digest and links_within is None:
            return []  # the links are not known: no evidence either way
        why = "has another text" if declared[0] != digest else "links to pages it does not"
        return self._revoke(trust, url, declared[1], why, declared[3])

    def _revoke(
        self, trust: _Trust, target: str, page: str, why: str, shown: str = ""
    ) -> list[str]:
        """End ``trust``: page ``page`` declared ``target`` (canonical form;
        ``shown``: as declared, where known), which ``why``. The targets
        skipped on it, to fetch after all."""
        trust.revoked = True
        self.inc("dedup/canonical/revoked", 1)
        parts = _split(target)
        logger.info(
            "Not trusting the rel=canonical declarations of %s any more: %s declares %s, which %s",
            parts.host if parts else target,
            page,
            shown or target,
            why,
        )
        skipped, trust.skipped = trust.skipped, []
        self._due.update(trust.owed)
        trust.owed = {}
        trust.declared.clear()
        trust.pending.clear()
        return skipped

    def trusted(self, host: str) -> bool:
        trust = self.hosts.get(host)
        return trust is not None and not trust.revoked and trust.verified >= self.min_support
