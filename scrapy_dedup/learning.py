"""Learned URL rules in a crawl (``DEDUP_LEARN``): the Scrapy glue around
:class:`scrapy_dedup.learn.Learner`.

Every fetched 2xx page is evidence (its canonical URL and the digest of the
visible text of its main region). New requests that adopted rules make copies
of a fetched page are not fetched: the dupefilter filters them when they are
scheduled, and :class:`LearnedRulesMiddleware` drops those that became copies
while they waited in the queue (a page of their class was fetched meanwhile).
Every such request is kept; when a rule fails, the requests it skipped are
scheduled again.

The evidence lives in the store (:meth:`DedupStore.exchange_evidence`): one
log per namespace that every process replays in the same order. The workers
of one Redis learn the same rules from all their pages, and a later run of an
SQLite file starts where the last one ended. A worker appends what it fetched
and applies the log up to its own record, so no two workers apply pages in
another order; what it decides alone (which requests to skip or to sample,
and the requests it keeps) stays its own.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakSet

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured

from scrapy_dedup._stats import StatsBuffer
from scrapy_dedup.config import dedup_enabled
from scrapy_dedup.keys import PREVIOUS_RUN
from scrapy_dedup.learn import Held, Learner, Skip
from scrapy_dedup.state import CrawlState
from scrapy_dedup.trust import canonical_trust, fetch_again

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

__all__ = [
    "LearnedRules",
    "LearnedRulesMiddleware",
    "describe",
    "kept_earlier",
    "learned_rules",
    "load_rules_file",
    "read_record",
]

logger = logging.getLogger(__name__)


def learned_rules(state: CrawlState) -> LearnedRules | None:
    """The crawl's learned rules (made on first use), or ``None`` without
    ``DEDUP_LEARN``."""
    if not state.config.learn:
        return None
    if state.learned is None:
        state.learned = LearnedRules(state.crawler, state)
    learned: LearnedRules = state.learned
    return learned


def load_rules_file(learner: Learner, path: Path) -> int:
    """Load ``DEDUP_LEARN_RULES`` into ``learner``; how many rules. A file
    that cannot be read is like a wrong setting: ``ValueError`` naming it."""
    try:
        return learner.load(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"DEDUP_LEARN_RULES={str(path)!r}: cannot read it: {exc}") from None


def kept_earlier(store: Any, keys: Any, url: str) -> bool:
    """Whether an earlier run kept the page at canonical ``url`` and the
    next fetch of it is not due (DEDUP_RECRAWL_AFTER, forgotten)."""
    key = keys.of_url(url)
    info = store.get_url(key)
    return info is not None and bool(info & PREVIOUS_RUN) and not store.expired(key)


def read_record(text: str) -> tuple[str, Any, str, int, Any, Any, str | None] | None:
    """One record of the store's evidence log: ``("o", worker, canonical URL,
    text digest, text length, links within, None)`` for a fetched page
    (whether it has no link the page that declared it canonical lacks, as its
    worker found; None when nothing declared it there), ``("c", worker,
    target, digest, page, links filter, skipped)`` for a rel=canonical
    declaration (the filter None in records of earlier versions; skipped: the
    URL not fetched because the host was trusted, else None), ``("?", ...)``
    for a kind a newer version writes (``("w", worker, its name in the
    store, ...)`` names a worker for the store's leases, ``("a", worker, the
    store's name of a dead worker, ...)`` says it adopted that one's
    frontier); ``None`` when it cannot be read."""
    try:
        return _record(json.loads(text))
    except (ValueError, TypeError, RecursionError):
        return None


def _record(record: Any) -> tuple[str, Any, str, int, Any, Any, str | None] | None:
    """:func:`read_record` of a record as written (a list), before or after JSON."""
    try:
        kind, worker = record[0], record[1]
        extra = record[5] if len(record) > 5 else None
        if kind == "o":
            within = None if extra is None else bool(extra)
            return "o", worker, str(record[2]), int(record[3]), int(record[4]), within, None
        if kind == "c":
            bits = None if extra is None else int(str(extra), 16)
            skipped = str(record[6] or record[2]) if len(record) > 6 else None
            return "c", worker, str(record[2]), int(record[3]), str(record[4]), bits, skipped
        if kind in ("w", "a"):
            return kind, worker, str(record[2]), 0, None, None, None
        return "?", worker, "", 0, None, None, None
    except (ValueError, TypeError, IndexError, KeyError, OverflowError):
        return None


def _texts(records: list[list[Any]]) -> list[str]:
    return [json.dumps(r, separators=(",", ":")) for r in records]


class LearnedRules:
    """The learned rules of one crawl (``CrawlState.learned``)."""

    def __init__(self, crawler: Crawler, state: CrawlState) -> None:
        config = state.config
        self.crawler = crawler
        self.canonicalizer = state.canonicalizer
        self.debug = config.debug or crawler.settings.getbool("DUPEFILTER_DEBUG")
        self._stats = StatsBuffer(crawler.stats)
        self.learner = Learner(
            min_support=config.learn_min_support,
            sample=config.learn_sample,
            max_kept=config.learn_max_kept,
            frozen=config.learn_frozen,
            defer=config.learn_defer,
            inc=self._stats.inc,
            kept=self._kept_earlier,
        )
        # rel=canonical trust (scrapy_dedup.trust): its declarations and the
        # pages that check them go through the evidence log, shared.
        self.trust = canonical_trust(state)
        self.trust.on_declare = self._declared
        # Requests picked to check the rules: fetched whatever the middleware
        # finds later (a set of the objects: a meta key would pass to every
        # request built with meta=response.meta).
        self._checking: WeakSet[Request] = WeakSet()
        self.rules_file = Path(config.learn_rules) if config.learn_rules else None
        if self.rules_file is not None and self.rules_file.exists():
            self._load(self.rules_file)
        self.state = state
        state.summary.uses("learned URL rules")
        self._worker = os.urandom(4).hex()  # marks this process's records in the log
        self._position = 0  # how much of the store's evidence log is applied
        self._outbox: list[list[Any]] = []  # records not appended yet
        self._others = 0  # pages of the log fetched by other workers or earlier runs
        # Targets other workers of this run skipped on a host's trust and no
        # fetch of is known: canonical URL -> (worker, URL to fetch). Owed
        # here (CanonicalTrust.skipped_earlier) once this worker adopts the
        # frontier of the one that skipped it (it died: nobody else fetches
        # them should the trust end).
        self._skips: dict[str, tuple[str, str]] = {}
        self._names: dict[str, str] = {}  # worker name in the store -> worker in the log
        self._gone: set[str] = set()  # workers whose frontier this one adopted
        crawler.signals.connect(self._replay, signal=signals.spider_opened)
        crawler.signals.connect(self._stats.start, signal=signals.spider_opened)
        crawler.signals.connect(self.response_received, signal=signals.response_received)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    def _load(self, path: Path) -> None:
        count = load_rules_file(self.learner, path)
        logger.info(
            "Loaded %d learned URL rules from %s%s",
            count,
            path,
            " (frozen: no new rule is learned)" if self.learner.frozen else "",
        )

    def _save(self, path: Path) -> None:
        data = self.learner.export()
        temporary = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            temporary.replace(path)
        except OSError as exc:
            logger.error("Cannot write the learned URL rules to %s: %s", path, exc)
            return
        count = sum(len(rules) for rules in data["hosts"].values())
        logger.info("Wrote %d learned URL rules to %s", count, path)

    # -- the evidence log ---------------------------------------------------------

    def _kept_earlier(self, url: str) -> bool:
        """Whether an earlier run kept the page at canonical ``url`` (its items
        are saved) and this run does not fetch it again: only then does it
        stand for its class (a list page that gave no item, a failed page, a
        page past DEDUP_RECRAWL_AFTER or forgotten is fetched again, and so
        are its copies, until this run fetched one)."""
        return kept_earlier(self.state.store, self.state.keys, url)

    def _replay(self) -> None:
        """At start, what earlier runs and the other workers fetched."""
        before = {rule.name for rule in self.learner.rules() if rule.state == "adopted"}
        if self.state.store.worker is not None:  # for a worker that adopts this one's frontier
            self._outbox.append(["w", self._worker, self.state.store.worker])
        self._exchange(earlier=True)
        if self._position:
            adopted = [r for r in self.learner.rules() if r.state == "adopted"]
            new = [r.name for r in adopted if r.name not in before]
            logger.info(
                "Learned URL rules: the store holds %d fetched pages of evidence from earlier "
                "runs or other workers; %d rules adopted from them%s",
                self._others,
                len(new),
                f" ({', '.join(new[:5])}{' ...' if len(new) > 5 else ''})" if new else "",
            )
            self._stats.inc("dedup/learn/evidence/replayed", self._others)
            self._stats.flush()  # for the start line
            self._others = 0

    def _exchange(self, *records: list[Any], earlier: bool = False) -> int:
        """Append ``records`` (and what waits) to the store's log, and apply
        what the log holds since the last exchange, in its order (``earlier``:
        pages of earlier runs, at start); how many requests that scheduled again."""
        outbox, self._outbox = self._outbox + list(records), []
        store = self.state.store
        found: list[Any]
        if store.keeps_evidence:
            texts, self._position = store.exchange_evidence(_texts(outbox), self._position)
            found = [read_record(text) for text in texts]
        else:  # the log would give them back as they are: no JSON both ways
            found = [_record(r) for r in outbox]
        released: list[Any] = []
        targets = 0  # pages skipped on a host's rel=canonical trust, fetched after all
        for record in found:
            if record is None:
                self._stats.inc("dedup/learn/evidence/unreadable")
                continue
            kind, worker, url, digest, extra, links, skipped = record
            if kind == "o":
                if worker != self._worker:
                    self._others += 1
                released += self.learner.observe(url, digest, int(extra), earlier)
                targets += self.trust.observe(url, digest, links)
                if self._skips:
                    self._skips.pop(url, None)
            elif kind == "c":  # own ones too: every worker counts them in the log's order
                self.trust.record(url, digest, str(extra), links, skipped or "")
                if skipped is not None and (earlier or worker in self._gone):
                    # No later link to it is fetched (the store has it seen):
                    # fetched after all if this run stops trusting its host.
                    self.trust.trust.skipped_earlier(url, skipped)
                elif skipped is not None and worker != self._worker:
                    self._skips[url] = (worker, skipped)
            elif kind == "w":
                self._names[url] = worker
            elif kind == "a" and worker != self._worker:
                # Another worker adopted a dead one's frontier: what that one
                # skipped on trust (and what it had taken over) is owed there
                # now, and passes on again should that worker die too.
                dead = self._names.get(url)
                for target, (by, fetch) in list(self._skips.items()):
                    if by == dead:
                        self._skips[target] = (worker, fetch)
        targets += self.trust.fetch_due()
        if released:
            self._stats.inc("dedup/learn/refetched", len(released))
            self._fetch_again(released, "the learned rule that skipped it failed")
        unheld = self.learner.fetch_held()
        if unheld:
            self._fetch_again(unheld, "the learned rule it waited for is decided")
        return len(released) + len(unheld) + targets

    def adopted(self, name: str) -> int:
        """This worker adopted the frontier of worker ``name`` (the store's
        name of it: it died): the targets it skipped on a host's rel=canonical
        trust are owed here, fetched should that trust end (now, if it has);
        how many were fetched now. The log says so, for whoever adopts this
        worker's frontier in turn: they owe these targets then."""
        # Its last records first (it is dead: all of them are in the log
        # before this one), and the others told at once.
        self._exchange(["a", self._worker, name])
        worker = self._names.get(name)
        if worker is None:
            return 0
        self._gone.add(worker)
        for url, (by, fetch) in list(self._skips.items()):
            if by == worker:
                del self._skips[url]
                self.trust.trust.skipped_earlier(url, fetch)
        return self.trust.fetch_due()

    def skip(self, request: Request, canonical_url: str) -> Skip | Held | None:
        """Keep and return the skip when learned rules make ``request`` a
        copy, or the wait when it is to wait for a rule to be decided
        (``DEDUP_LEARN_DEFER``): either way it is not fetched now."""
        if request.method != "GET" or request.body or request in self._checking:
            return None
        skip = self.learner.check(canonical_url)
        if skip is None:
            held = self.learner.wait(canonical_url, request)
            if held is True:  # fetched as a rule's evidence (and not checked again)
                self._checking.add(request)
                return None
            return held or None
        if skip.sample:  # fetched, to check the rules (and not checked again)
            self._checking.add(request)
            return None
        self.learner.keep(skip, request)
        return skip

    def digest(self, response: Response) -> tuple[int, int] | None:
        """``(digest, length)`` of a response's visible text, computed once."""
        return self.trust.digest(response)

    def _declared(
        self, target: str, digest: int, page: str, links: int | None, skipped: str | None
    ) -> None:
        """A rel=canonical declaration checked here: for the other workers
        and later runs (``CanonicalTrust.record``). One that skips its target
        (``skipped``: the URL not fetched) is in the store's log before the
        target is marked seen there, so a later run that stops trusting the
        host knows to fetch it, whenever this process is killed."""
        record: list[Any] = ["c", self._worker, target, digest, page]
        if links is not None or skipped is not None:
            record.append(None if links is None else f"{links:x}")
        if skipped is not None:
            record.append("" if skipped == target else skipped)
        self._outbox.append(record)
        if skipped is not None:
            self._exchange()

    def response_received(self, response: Response, request: Request) -> None:
        """A fetched page is evidence for (or against) learned rules."""
        if not 200 <= response.status < 300 or request.method != "GET":
            self.trust.forget(response)
            return
        found = self.digest(response)
        if found is None:
            return
        digest, length = found
        url = self.canonicalizer.canonicalize(response.url)
        record: list[Any] = ["o", self._worker, url, digest, length]
        within = self.trust.links_within(url, response)
        if within is not None:  # what this worker knows of the declarations of it
            record.append(int(within))
        self._exchange(record)

    def _fetch_again(self, requests: list[Any], why: str) -> None:
        fetch_again(self.crawler, requests, why, debug=self.debug)

    def spider_idle(self) -> None:
        """Before the crawl ends, a last sample of what the rules skipped is
        fetched; what it contradicts is fetched too (then the crawl ends).
        First, what other workers fetched meanwhile: a rule it contradicts
        gives back what it skipped here."""
        if self._exchange():
            raise DontCloseSpider
        waiting = self.learner.undefer()
        if waiting:
            self._fetch_again(waiting, "it waited for a learned rule not decided by the end")
            raise DontCloseSpider
        audited = self.learner.audit()
        if audited:
            self._fetch_again(audited, "a last check of a learned rule")
            raise DontCloseSpider

    def spider_closed(self) -> None:
        if self._outbox:  # declarations made since the last page: for later runs
            if self.state.store.keeps_evidence:
                self.state.store.exchange_evidence(_texts(self._outbox), self._position)
            self._outbox = []
        if self._others:
            self._stats.inc("dedup/learn/evidence/others", self._others)
        self._stats.stop()
        if self.rules_file is not None and not self.learner.frozen:
            self._save(self.rules_file)
        stats = self.crawler.stats
        adopted = 0
        for rule in self.learner.rules():
            if rule.state == "candidate" and not rule.skipped:
                continue
            adopted += rule.state == "adopted"
            logger.info(
                "Learned URL rule %s: %s; %d pages confirmed it, %d requests skipped, "
                "%d pages checked%s",
                rule.name,
                rule.state,
                rule.support,
                rule.skipped,
                rule.verified,
                f"; not under /{', /'.join(sorted(rule.excluded))}" if rule.excluded else "",
            )
            stats.set_value(f"dedup/learn/rule/{rule.name}/skipped", rule.skipped)
        stats.set_value("dedup/learn/rules", adopted)


def describe(skip: Skip | Held) -> str:
    """Why a request is not fetched now, for the log."""
    rules = " and ".join(rule.name for rule in skip.rules)
    if isinstance(skip, Held):
        return (
            f"waits: it may be a copy of {skip.copy_of} (learned URL rule {rules} not decided yet)"
        )
    return f"a copy of {skip.copy_of} by learned URL rule {rules}"


class LearnedRulesMiddleware:
    """Downloader middleware (the add-on enables it at 60): a request that
    learned rules made a copy of a page fetched while it waited in the queue
    is dropped (``IgnoreRequest``) and kept, like one the dupefilter filtered.
    Only active with ``DEDUP_LEARN``."""

    def __init__(self, crawler: Crawler) -> None:
        if not dedup_enabled(crawler.settings):
            raise NotConfigured("DEDUP_ENABLED is False")
        state = CrawlState.of(crawler)
        learned = learned_rules(state)
        if learned is None:
            raise NotConfigured  # DEDUP_LEARN = False: the user switched it off
        self.learned = learned
        self.keys = state.keys
        self.state = state
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_request(self, request: Request) -> Any:
        # Requests an earlier run left in the frontier are checked too: the
        # rules and the pages they copy come back from the store's evidence.
        if request.dont_filter or request.meta.get("is_start_request"):
            return None
        key = self.keys.of(request)
        skip = self.learned.skip(request, key.url)
        if skip is None:
            return None
        # Its frontier row (a store that outlives the run) stays: a later run
        # gets it back and checks it again.
        self.state.unsent.pop(key.key, None)
        self.stats.inc_value("dedup/url/filtered")
        self.stats.inc_value("dedup/url/filtered/learned")
        # Scrapy's own filter let it through too (or the dupefilter counted the
        # fetch it would have made as one Scrapy does not: dedup/url/scrapy_filters).
        self.stats.inc_value("dedup/url/saved")
        self.stats.inc_value("dedup/url/saved/learned")
        if self.state.summary.report is not None:
            self.state.summary.report.url_filtered(
                ("learned",), request.url, skip.copy_of, skip.copy_of
            )
        if self.learned.debug:
            logger.debug(
                "Not fetching %s: %s",
                request,
                describe(skip),
            )
        raise IgnoreRequest(describe(skip))
