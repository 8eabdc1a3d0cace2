"""The learner: URL rules per host from the pages a crawl fetched, and which
new URLs they make copies of a fetched page (see :mod:`scrapy_dedup.learn`).
No Scrapy import."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scrapy_dedup.learn.audit import _Kept, draw
from scrapy_dedup.learn.defer import PER_PATH, PROBES, SEEN, Held, variants
from scrapy_dedup.learn.evidence import _CLASSES, MIN_TEXT, _ignore, _key
from scrapy_dedup.learn.rules import (
    ADOPTED,
    CANDIDATE,
    CASE,
    PARAM,
    PARAMS,
    REVOKED,
    Proposal,
    Rule,
    Skip,
    _explanations,
    _parse_spec,
    _rule_spec,
    _where,
)
from scrapy_dedup.learn.scope import _Parts, _scope, _split
from scrapy_dedup.url.plain import plainer, plainness

__all__ = ["Learner"]

logger = logging.getLogger(__name__)

_HISTORY = 20_000  # pages per host replayed when a rule is proposed
_RULES_PER_HOST = 64  # proposed rules per host
_PAIRS_PER_TEXT = 4  # pages per text compared with a new page of that text


class _Page(NamedTuple):
    digest: int
    url: str
    enough: bool  # enough text to count as evidence for a rule
    used: tuple[Rule, ...]  # the adopted rules that changed its URL
    earlier: bool = False  # fetched by an earlier run (replayed from the store)


@dataclass
class _Host:
    rules: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Rule] = field(default_factory=dict)
    adopted: list[Rule] = field(default_factory=list)
    # url, digest, enough, fetched by an earlier run
    history: list[tuple[str, int, bool, bool]] = field(default_factory=list)
    pages: set[int] = field(default_factory=set)  # keys of the page URLs observed
    by_text: dict[int, list[str]] = field(default_factory=dict)  # digest -> first URLs
    # class URL key under every adopted rule -> its first fetched page
    copies: dict[int, _Page] = field(default_factory=dict)
    kept: list[_Kept] = field(default_factory=list)
    credit: float = 1.0  # of the sample: the first check is fetched
    # Waiting requests (scrapy_dedup.learn.defer): URLs fetched or queued,
    # key under the adopted rules -> the plainest such URL; the same, per
    # path (a few URLs under the adopted rules); those queued, to index again.
    seen: dict[int, str] = field(default_factory=dict)
    fetched: set[int] = field(default_factory=set)  # of those, the keys of pages fetched
    by_path: dict[tuple[str, ...], list[str]] = field(default_factory=dict)
    passed: list[str] = field(default_factory=list)
    # key of the URL each waits for (its copy's) -> the requests
    held: dict[int, list[Held]] = field(default_factory=dict)
    # per (candidate, template): the copies whose variants were fetched as evidence
    probes: dict[tuple[Rule, str], set[int]] = field(default_factory=dict)
    settled: int = 0  # rule decisions (adoptions + contradictions) when its held were settled


class Learner:
    """Learns URL rules per host from fetched pages and answers whether a new
    URL is a copy of a fetched page under them.

    ``inc(stat, n)`` counts what happens (``dedup/learn/...``); ``observe``
    returns the kept requests a contradiction releases, to fetch again.
    """

    def __init__(
        self,
        *,
        min_support: int = 3,
        sample: float = 0.05,
        max_kept: int = 100_000,
        frozen: bool = False,
        defer: bool = True,
        inc: Callable[[str, int], None] | None = None,
        kept: Callable[[str], bool] | None = None,
    ) -> None:
        if min_support < 1:
            raise ValueError("min_support must be at least 1")
        self.min_support = min_support
        self.sample = sample
        self.max_kept = max_kept
        #: Learn no new rule: the loaded ones apply (and can still fail).
        self.frozen = frozen
        #: Let requests a rule not decided yet would skip wait (:meth:`wait`).
        self.defer = defer
        self.inc: Callable[[str, int], None] = inc or _ignore
        #: Whether a page an earlier run fetched still stands for its class:
        #: its items were kept (and it is not to be fetched again). ``None``:
        #: always (no store to ask).
        self.kept_earlier = kept
        self.hosts: dict[str, _Host] = {}
        self.kept = 0
        self.held = 0  # requests waiting (:meth:`wait`)
        self._adoptions = 0
        self._contradictions = 0
        self._audits = 0
        self._audited_at = 0
        self._rebuilds = 0  # rebuilds of any host's evidence so far
        self._released: list[Any] = []  # by contradictions, until observe returns them
        self._unheld: list[Any] = []  # waiting requests to fetch, until :meth:`fetch_held`

    # -- what the crawl asks --

    def rules(self) -> list[Rule]:
        return [rule for host in self.hosts.values() for rule in host.rules.values()]

    # -- rules as a file a user can read and edit --

    def export(self) -> dict[str, Any]:
        """The adopted and revoked rules, as JSON-ready data (see :meth:`load`)."""
        hosts: dict[str, list[dict[str, Any]]] = {}
        for name, host in sorted(self.hosts.items()):
            for rule in host.rules.values():
                if rule.state == CANDIDATE:
                    continue
                entry = _rule_spec(rule)
                entry["means"] = rule.spec  # for the reader; load() ignores it
                if rule.state == REVOKED:
                    entry["revoked"] = True
                entry["not_under"] = sorted(f"/{scope}" for scope in rule.excluded)
                entry["confirmed_under"] = sorted(f"/{scope}" for scope in rule.seen_in)
                entry["pages_confirming"] = rule.support
                entry["pages_checked"] = rule.verified
                entry["requests_skipped"] = rule.skipped
                entry["examples"] = [list(pair) for pair in rule.examples[:3]]
                if rule.counterexamples:
                    entry["counterexamples"] = [list(pair) for pair in rule.counterexamples[:3]]
                hosts.setdefault(name, []).append(entry)
        return {"version": 1, "hosts": hosts}

    def load(self, data: dict[str, Any]) -> int:
        """Take the rules of :meth:`export`'s data (edited or not): adopted
        ones apply from the start (and are still checked), revoked ones are
        never proposed again. ``ValueError`` naming what is wrong. Returns how
        many rules were loaded."""
        if not isinstance(data, dict) or data.get("version") != 1:
            raise ValueError('not a rules file: expected {"version": 1, "hosts": {...}}')
        loaded = 0
        for host_name, entries in dict(data.get("hosts") or {}).items():
            host = self.hosts.setdefault(str(host_name).lower(), _Host())
            for entry in entries:
                kind, old, new = _parse_spec(entry)
                rule = Rule(str(host_name).lower(), kind, old, new)
                rule.excluded = {_scope(p) for p in entry.get("not_under", ())}
                rule.seen_in = {_scope(p) for p in entry.get("confirmed_under", ())}
                rule.support = int(entry.get("pages_confirming", 0))
                rule.verified = int(entry.get("pages_checked", 0))
                rule.loaded = True
                host.rules[(kind, old, new)] = rule
                if entry.get("revoked"):
                    rule.state = REVOKED
                else:
                    self._adoptions += 1
                    rule.adopted_at = self._adoptions
                    rule.state = ADOPTED
                    host.adopted.append(rule)
                    host.adopted.sort(key=lambda r: (r.kind not in (PARAM, PARAMS), r.kind, r.old))
                loaded += 1
        return loaded

    def check(self, url: str) -> Skip | None:
        """A :class:`Skip` when adopted rules make ``url`` a copy of a fetched
        page (its ``sample`` set when it is to be fetched anyway, to check
        them), else ``None``."""
        parts = _split(url)
        if parts is None:
            return None
        host = self.hosts.get(parts.host)
        if host is None or not host.adopted or _key(url) in host.pages:
            # (A page fetched itself is never its own copy: requested again,
            # it is one whose items an interrupted run did not save.)
            return None
        rewritten, used = self._apply(host, parts)
        if not used:
            return None
        copy = host.copies.get(_key(rewritten.url))
        if copy is None:
            return None
        if copy.earlier and self.kept_earlier is not None and not self.kept_earlier(copy.url):
            # An earlier run fetched that page but did not keep it (no item, a
            # failed callback, DEDUP_RECRAWL_AFTER passed, forgotten): fetched,
            # its class gets this run's page.
            return None
        # The rules that made the copy's URL the class's are what the skip
        # rests on too: they fail, it is handed back (and the audit counts it
        # for them).
        scope = parts.scope
        copied = _split(copy.url)
        unseen = any(_where(rule, scope) not in rule.seen_in for rule in used) or (
            # (each rule where it rewrote: the copy's rules in the copy's template)
            copied is not None
            and any(_where(rule, copied.scope) not in rule.seen_in for rule in copy.used)
        )
        used = tuple(dict.fromkeys(used + copy.used))
        if unseen or self._sampled(host):
            # Fetched: a rule skips in a part of the site (a URL template)
            # only once a page there confirmed it; then one in 1 / sample.
            self.inc("dedup/learn/sampled", 1)
            return Skip(used, copy.url, scope, url, sample=True)
        if self.kept >= self.max_kept:
            self.inc("dedup/learn/kept_full", 1)
            return None
        return Skip(used, copy.url, scope, url)

    def _sampled(self, host: _Host) -> bool:
        """Whether this check is one of the sample (the first, then one in 1 / sample)."""
        if not self.sample:
            return False
        host.credit += self.sample
        if host.credit >= 1.0:
            host.credit -= 1.0
            return True
        return False

    def keep(self, skip: Skip, request: Any) -> None:
        """Keep a request skipped by ``skip``, to hand back if a rule fails."""
        host = self.hosts[skip.rules[0].host]
        host.kept.append(_Kept(request, skip.first, skip.rules, skip.url, skip.copy_of))
        self.kept += 1
        for rule in skip.rules:
            rule.skipped += 1
        self.inc("dedup/learn/skipped", 1)

    # -- requests that wait for a rule to be decided (scrapy_dedup.learn.defer) --

    def wait(self, url: str, request: Any) -> Held | bool | None:
        """For a new request (canonical ``url``) that :meth:`check` found no
        copy for: a :class:`~scrapy_dedup.learn.defer.Held` when it is to wait
        (kept here: :meth:`observe` decides it, :meth:`fetch_held` hands it
        back to fetch, :meth:`undefer` at the end); ``True`` when it is
        fetched as evidence for a rule (not to be checked again); ``None``
        when it is fetched (and stands for its class until a plainer URL of
        it is queued)."""
        parts = _split(url)
        if parts is None or not self.defer:
            return None
        host = self.hosts.setdefault(parts.host, _Host())
        if _key(url) in host.pages:
            return None  # fetched itself: one whose items an interrupted run did not save
        based, used = self._apply(host, parts)
        key = _key(based.url)
        scope = parts.scope
        if self.held + self.kept >= self.max_kept:
            self._note(host, url, based)
            return None
        first = host.seen.get(key)
        if used and first is not None and first != url and key not in host.copies:
            # The adopted rules make it a copy of a page queued, not fetched yet.
            return self._hold(host, Held(request, url, scope, used[-1], first), key)
        found = self._open_candidate(host, parts, based, url)
        if found is None and not self.frozen:
            proposed = len(host.rules)
            for other in variants(based, host.by_path.get(based.segments, []), host.seen, _key):
                plain = _split(other)
                if plain is not None:
                    for proposal in _explanations(plain, based):
                        if proposal not in host.rules and len(host.rules) < _RULES_PER_HOST:
                            self._new_rule(host, parts.host, proposal)
            if len(host.rules) != proposed:  # else nothing new to find
                found = self._open_candidate(host, parts, based, url)
        if found is None:
            self._note(host, url, based)
            return None
        rule, where, copy_key = found
        if self._probe(host, rule, where, copy_key):
            self._note(host, url, based)
            return True
        return self._hold(host, Held(request, url, scope, rule, host.seen[copy_key]), copy_key)

    def _probe(self, host: _Host, rule: Rule, where: str, copy_key: int) -> bool:
        """Whether a variant of the page ``copy_key`` is fetched as evidence for
        ``rule``: one per page, ``PROBES`` pages per (rule, template), once
        that page is fetched (so that its item, the plain one, comes first)."""
        probed = host.probes.setdefault((rule, where), set())
        if copy_key in probed or len(probed) >= PROBES or copy_key not in host.fetched:
            return False
        probed.add(copy_key)
        self.inc("dedup/learn/probed", 1)
        return True

    def _open_candidate(
        self, host: _Host, parts: _Parts, based: _Parts, url: str
    ) -> tuple[Rule, str, int] | None:
        """A candidate that makes ``based`` a copy of another URL fetched or
        queued: ``(rule, its template, that URL's key)``."""
        scope = parts.scope
        for rule in host.rules.values():
            if rule.state != CANDIDATE:
                continue
            where = _where(rule, scope)
            if where in rule.excluded:
                continue
            rewritten = rule.rewrite(based)
            if rewritten is None:
                continue
            copy_key = _key(rewritten.url)
            first = host.seen.get(copy_key)
            if first is not None and first != url:
                return rule, where, copy_key
        return None

    def _hold(self, host: _Host, entry: Held, copy_key: int, again: bool = False) -> Held:
        host.held.setdefault(copy_key, []).append(entry)
        self.held += 1
        if not again:
            self.inc("dedup/learn/deferred", 1)
        return entry

    def _note(self, host: _Host, url: str, based: _Parts) -> None:
        """``url`` is fetched or queued: the URL other requests can wait for."""
        if host.seen.get(_key(based.url)) == url:
            # Noted already: the dupefilter let it through, and now it leaves
            # the queue (LearnedRulesMiddleware asks again).
            return
        if len(host.passed) < SEEN:
            host.passed.append(url)
        self._index(host, url, based)

    @staticmethod
    def _index(host: _Host, url: str, based: _Parts, fetched: bool = False) -> None:
        class_url = based.url
        key = _key(class_url)
        if fetched:
            host.fetched.add(key)
        first = host.seen.get(key)
        if first is None:
            if len(host.seen) >= SEEN:
                return
            host.seen[key] = url
        elif url != first and plainer(url, first):
            host.seen[key] = url
        same = host.by_path.setdefault(based.segments, [])
        if len(same) < PER_PATH and class_url not in same:
            same.append(class_url)

    def _settle(self, host: _Host, parts: _Parts | None) -> None:
        """Decide what waits on a rule decided since (every waiting request
        of ``host``), or on the page of ``parts`` just fetched."""
        if not host.held:
            return
        decisions = self._adoptions + self._contradictions
        if decisions != host.settled:
            host.settled = decisions
            entries = [entry for waiting in host.held.values() for entry in waiting]
            host.held = {}
        elif parts is not None:
            entries = host.held.pop(_key(self._apply(host, parts)[0].url), [])
        else:
            return
        self.held -= len(entries)
        for entry in entries:
            self._decide(host, entry)

    def _decide(self, host: _Host, entry: Held) -> None:
        """Skip a waiting request, fetch it, or let it wait again."""
        skip = self.check(entry.url)
        if skip is not None:
            if skip.sample:  # fetched, to check the rules
                self._unhold(entry)
            else:
                self.keep(skip, entry.request)
            return
        rule, where = entry.rule, _where(entry.rule, entry.scope)
        parts = _split(entry.url)
        assert parts is not None
        if where not in rule.excluded:
            if rule.state == CANDIDATE:
                rewritten = rule.rewrite(self._apply(host, parts)[0])
                if rewritten is not None:
                    if self._probe(host, rule, where, _key(rewritten.url)):
                        self._unhold(entry)
                    else:
                        self._hold(host, entry, _key(rewritten.url), again=True)
                    return
            elif rule.state == ADOPTED:
                based, used = self._apply(host, parts)
                key = _key(based.url)
                first = host.seen.get(key)
                if used and first is not None and first != entry.url and key not in host.copies:
                    self._hold(host, entry, key, again=True)  # its copy is not fetched yet
                    return
        self._unhold(entry)

    def _unhold(self, entry: Held) -> None:
        self._unheld.append(entry.request)
        self.inc("dedup/learn/deferred/released", 1)

    def fetch_held(self) -> list[Any]:
        """Waiting requests a decision handed back since the last call: to fetch."""
        unheld, self._unheld = self._unheld, []
        return unheld

    def undefer(self) -> list[Any]:
        """When the crawl would end: every request still waiting, decided by
        the rules as they are (skipped when they make it a copy of a fetched
        page), else to fetch, plainest first."""
        for host in self.hosts.values():
            host.settled = -1  # decide them all
            self._settle(host, None)
        waiting = [
            (entry.url, entry.request)
            for host in self.hosts.values()
            for held in host.held.values()
            for entry in held
        ]
        for host in self.hosts.values():
            host.held = {}
        self.held = 0
        fetched = self.fetch_held()
        waiting.sort(key=lambda pair: plainness(pair[0]))
        if waiting:
            self.inc("dedup/learn/deferred/fetched", len(waiting))
        return fetched + [request for _, request in waiting]

    def audit(self) -> list[Any]:
        """Kept requests to fetch as a last check before the crawl ends: of
        each rule, one of each class (the page a request copies) the crawl
        did not check, until 59 classes of the rule are checked (see
        :func:`~scrapy_dedup.learn.audit.draw`), and the first of each group
        skipped by the same rules in the same part of the site. Up to three
        rounds, a new one only after a round that contradicted a rule."""
        if self._audits >= 3 or (self._audits and self._contradictions == self._audited_at):
            return []
        self._audits += 1
        self._audited_at = self._contradictions
        picked: list[Any] = []
        for host in self.hosts.values():
            checked = {
                (rule, where): classes
                for rule in host.adopted
                for where, classes in rule.checked.items()
                if where not in rule.excluded
            }
            drawn, host.kept = draw(host.kept, checked=checked)
            picked += [entry.request for entry in drawn]
        self.kept -= len(picked)
        if picked:
            self.inc("dedup/learn/audited", len(picked))
        return picked

    def observe(self, url: str, digest: int, length: int, earlier: bool = False) -> list[Any]:
        """Record a fetched page (its canonical URL, its visible text's digest
        and length; ``earlier``: fetched by an earlier run); the kept requests
        a contradiction released."""
        parts = _split(url)
        if parts is None:
            return []
        host = self.hosts.setdefault(parts.host, _Host())
        page = _key(url)
        if page in host.pages:  # fetched again (a redirect back, a retry): nothing new
            return []
        host.pages.add(page)
        enough = length >= MIN_TEXT
        # In the history first: a rebuild (an adoption, a contradiction) while
        # this page is checked replays it under the rules as they are then.
        replayed = len(host.history) < _HISTORY
        if replayed:
            host.history.append((url, digest, enough, earlier))
        rebuilds = self._rebuilds
        based, used = self._apply(host, parts)
        self._index(host, url, based, fetched=True)
        if host.adopted:
            self._check_copies(host, parts, based, _Page(digest, url, enough, used, earlier))
        for rule in list(host.rules.values()):
            if self._rebuilds != rebuilds:
                if replayed:
                    break  # the rebuild gave every candidate this page's evidence
                rebuilds = self._rebuilds
                based = self._apply(host, parts)[0]
            if rule.state == CANDIDATE:
                self._evidence(host, rule, parts, based, digest, enough)
        if enough:
            same_text = host.by_text.setdefault(digest, [])
            for other in same_text:
                self._propose(host, other, url)
            if len(same_text) < _PAIRS_PER_TEXT:
                same_text.append(url)
        self._settle(host, parts)
        released, self._released = self._released, []
        return released

    # -- evidence --

    def _apply(
        self, host: _Host, parts: _Parts, without: tuple[str, str] | None = None
    ) -> tuple[_Parts, tuple[Rule, ...]]:
        """``parts`` under every adopted rule of ``host`` (but those of the
        family ``without``), and the rules that changed it."""
        used = []
        scope = parts.scope
        for rule in host.adopted:
            if _where(rule, scope) in rule.excluded or (
                without is not None and rule.family == without
            ):
                continue
            rewritten = rule.rewrite(parts)
            if rewritten is not None:
                parts = rewritten
                used.append(rule)
        return parts, tuple(used)

    def _check_copies(self, host: _Host, parts: _Parts, based: _Parts, page: _Page) -> None:
        """Adopted rules checked against the page of their class fetched first."""
        cls = _key(based.url)
        first = host.copies.get(cls)
        if first is None:
            if page.enough:  # a short page (an error, "busy") never stands for a class
                host.copies[cls] = page
            return
        if first.digest == page.digest:
            if page.enough:
                earlier = _split(first.url)
                assert earlier is not None
                used = first.used + page.used
                # Only a pair the rule made one class checks it: two ?sid
                # variants of one ?sort=desc page say nothing about ?sort, and
                # two ?sid variants of viewforum.php?f=2 nothing about whether
                # ?f matters there (counted, it would let ?f skip f=1 as f=2).
                tested = {
                    family
                    for family in _families(used, None)
                    if not self._merged(host, (parts, earlier), family, None)
                }
                for rule in dict.fromkeys(used):
                    if rule.family not in tested:
                        continue
                    wheres = _rewritten_where(rule, (first.url, page.url), parts.scope)
                    if not (page.earlier and rule.loaded):
                        # (A page of an earlier run is in a loaded rule's
                        # count already: the run that wrote the file counted it.)
                        rule.verified += 1
                    rule.seen_in.update(wheres)
                    for where in wheres:
                        rule.checked.setdefault(where, set()).add(first.url)
                self.inc("dedup/learn/verified", 1)
                if first.earlier and not page.earlier:
                    host.copies[cls] = page  # this run's page stands for the class
            return
        self._blame(host, parts, first.url)

    def _blame(
        self, host: _Host, parts: _Parts, earlier_url: str, candidate: Rule | None = None
    ) -> None:
        """Two pages with different texts in one class: blame, of the rule
        families (one parameter's rules, one path kind's under one segment)
        without which they would not be one class, the one :func:`_suspects`
        picks (a session id confirmed a hundred times is not what a colour
        parameter adopted a moment ago got wrong). A candidate that made them
        one class is blamed first: the adopted rules that helped are checked
        by the pages of their own classes."""
        earlier = _split(earlier_url)
        assert earlier is not None
        used = self._apply(host, parts)[1] + self._apply(host, earlier)[1]
        families = _families(used, candidate)
        if not families:
            return
        needed = [
            family
            for family in families
            if not self._merged(host, (parts, earlier), family, candidate)
        ] or list(families)
        if candidate is not None and candidate.family in needed:
            blamed = families[candidate.family]
        else:
            # The whole family: ?lang=de goes with ?lang.
            weakest = _suspects(families, needed, self.min_support)
            blamed = [
                rule
                for rule in host.rules.values()
                if rule.family in weakest and rule.state != REVOKED
            ]
        for rule in blamed:
            # Excluded where it changed a URL: under the template of the
            # page it rewrote.
            where = parts if rule.rewrite(parts) or not rule.rewrite(earlier) else earlier
            self._contradict(host, rule, parts.url, earlier_url, where.scope)

    def _merged(
        self,
        host: _Host,
        pair: tuple[_Parts, _Parts],
        without: Family,
        candidate: Rule | None,
    ) -> bool:
        """Whether the pair is still one class without the rules of family ``without``."""
        a, b = (self._apply(host, parts, without)[0] for parts in pair)
        if candidate is not None and candidate.family != without:
            a, b = candidate.rewrite(a) or a, candidate.rewrite(b) or b
        return a == b

    def _evidence(
        self, host: _Host, rule: Rule, parts: _Parts, based: _Parts, digest: int, enough: bool
    ) -> None:
        """A candidate rule checked against the page of its class fetched first.
        The pair is evidence only when the candidate is the one difference the
        adopted rules leave between their URLs."""
        rewritten = rule.rewrite(based)
        cls = _key((rewritten or based).url)
        based_key = _key(based.url)
        known = rule.classes.get(cls)
        if known is None:
            if len(rule.classes) < _CLASSES:
                rule.classes[cls] = (digest, parts.url, enough, based_key)
            return
        if known[3] == based_key:
            return  # one page, or the adopted rules alone made them one: not this rule's doing
        if known[0] == digest:
            if enough and known[2]:
                self._support(host, rule, cls, digest, (known[1], parts.url), parts.scope)
            return
        self._blame(host, parts, known[1], candidate=rule)

    def _support(
        self, host: _Host, rule: Rule, cls: int, digest: int, pair: tuple[str, str], scope: str
    ) -> None:
        # A class counts once: variants of one page are not independent; and
        # so does a text (two classes with one text are copies of one page).
        if cls in rule.confirmed:
            return
        # Where it holds: the template of the page of the pair it rewrites
        # (/p/7/print, not /p/7, whichever of the two was fetched last).
        wheres = _rewritten_where(rule, pair, scope)
        where = wheres[0]
        rule.confirmed[cls] = (digest, where)
        rule.support = rule.supporting()
        rule.seen_in.update(wheres)
        if len(rule.examples) < 8:
            rule.examples.append(pair)
        if rule.state == CANDIDATE and self._supported(rule):
            self._adopt(host, rule)

    def _supported(self, rule: Rule) -> bool:
        """Enough distinct texts confirmed it outside the segments where it failed."""
        return rule.supporting(rule.excluded) >= self.min_support and len(rule.excluded) < 2

    def _contradict(self, host: _Host, rule: Rule, url: str, earlier: str, scope: str) -> None:
        scope = _where(rule, scope)
        if len(rule.counterexamples) < 8 and (earlier, url) not in rule.counterexamples:
            rule.counterexamples.append((earlier, url))
        if scope in rule.excluded:
            return
        rule.excluded.add(scope)
        rule.seen_in.discard(scope)
        self._contradictions += 1
        self.inc("dedup/learn/contradicted", 1)
        was_adopted = rule.state == ADOPTED
        # A case rule covers one section: failing there is failing.
        if len(rule.excluded) >= 2 or rule.kind == CASE:
            rule.state = REVOKED
        if not was_adopted:
            return
        if rule.state == REVOKED:
            host.adopted.remove(rule)
            self.inc("dedup/learn/revoked", 1)
            logger.info(
                "Revoked learned URL rule %s: canonical URLs %s and %s have different texts",
                rule.name,
                earlier,
                url,
            )
        else:
            self.inc("dedup/learn/excluded", 1)
            logger.info(
                "Learned URL rule %s no longer applies under /%s: canonical URLs %s and %s have "
                "different texts",
                rule.name,
                scope,
                earlier,
                url,
            )
        self._release(
            host,
            lambda entry: (
                rule in entry.rules
                and (rule.state == REVOKED or _where(rule, entry.first) == scope)
            ),
        )
        self._rebuild(host)

    def _release(self, host: _Host, which: Callable[[_Kept], bool]) -> None:
        """Hand back the kept requests ``which`` picks (``observe`` returns them)."""
        released = [entry.request for entry in host.kept if which(entry)]
        if not released:
            return
        host.kept = [entry for entry in host.kept if not which(entry)]
        self.kept -= len(released)
        self._released += released
        self.inc("dedup/learn/released", len(released))

    def _adopt(self, host: _Host, rule: Rule) -> None:
        self._adoptions += 1
        rule.adopted_at = self._adoptions
        rule.state = ADOPTED
        host.adopted.append(rule)
        # Parameters first, then paths: one order for every URL.
        host.adopted.sort(key=lambda r: (r.kind not in (PARAM, PARAMS), r.kind, r.old))
        self.inc("dedup/learn/adopted", 1)
        example = rule.examples[0] if rule.examples else ("", "")
        logger.info(
            "Learned URL rule %s from %d pages with the same text (e.g. canonical URLs %s = %s)",
            rule.name,
            rule.support,
            *example,
        )
        self._rebuild(host)

    def _rebuild(self, host: _Host) -> None:
        """Classes again from the pages fetched so far, under the adopted rules
        as they are now: the copies, and the candidates' evidence; then every
        kept request whose class no longer holds a fetched page is handed back."""
        self._rebuilds += 1
        rebuilds = self._rebuilds
        host.copies = {}
        # The URLs requests wait for, keyed under the rules as they are now.
        host.seen, host.by_path, host.fetched = {}, {}, set()
        for fetched, urls in ((False, host.passed), (True, [page[0] for page in host.history])):
            for url in urls:
                parts = _split(url)
                if parts is not None:
                    self._index(host, url, self._apply(host, parts)[0], fetched)
        candidates = [rule for rule in host.rules.values() if rule.state == CANDIDATE]
        for rule in candidates:
            rule.forget_evidence()  # rebuilt below, never counted twice
        for url, digest, enough, earlier in host.history:
            parts = _split(url)
            if parts is None:
                continue
            based, used = self._apply(host, parts)
            if host.adopted and enough:
                cls = _key(based.url)
                first = host.copies.get(cls)
                if first is None or (first.earlier and not earlier):
                    host.copies[cls] = _Page(digest, url, enough, used, earlier)
            for rule in candidates:
                if self._rebuilds != rebuilds:
                    return  # one was adopted or failed meanwhile: rebuilt from the start
                if rule.state == CANDIDATE:
                    self._evidence(host, rule, parts, based, digest, enough)
        self._release(host, lambda entry: not self._still_a_copy(host, entry))

    def _still_a_copy(self, host: _Host, entry: _Kept) -> bool:
        parts = _split(entry.url)
        if parts is None:
            return False
        based, used = self._apply(host, parts)
        return bool(used) and _key(based.url) in host.copies

    # -- proposals --

    def _propose(self, host: _Host, a_url: str, b_url: str) -> None:
        a, b = _split(a_url), _split(b_url)
        if self.frozen or a is None or b is None or a.base != b.base:
            return
        # What adopted rules explain already is not a difference any more.
        a, b = self._apply(host, a)[0], self._apply(host, b)[0]
        for proposal in _explanations(a, b):
            if proposal not in host.rules and len(host.rules) < _RULES_PER_HOST:
                self._new_rule(host, a.host, proposal)

    def _new_rule(self, host: _Host, name: str, proposal: Proposal) -> None:
        """A candidate, with the evidence of the pages fetched so far."""
        kind, old, new = proposal
        rule = host.rules[proposal] = Rule(name, kind, old, new)
        self.inc("dedup/learn/proposed", 1)
        rebuilds = self._rebuilds
        for url, digest, enough, _ in host.history:  # the pages fetched so far
            parts = _split(url)
            if self._rebuilds != rebuilds:
                break  # rebuilt meanwhile, with this rule
            if parts is not None and rule.state == CANDIDATE:
                based = self._apply(host, parts)[0]
                self._evidence(host, rule, parts, based, digest, enough)


Family = tuple[str, str]


def _rewritten_where(rule: Rule, pair: tuple[str, str], scope: str) -> list[str]:
    """The parts of the site (:func:`_where`) of the pages of ``pair`` that
    ``rule`` rewrites (the variant; both, when it rewrites both); ``scope``
    when it rewrites neither."""
    found = []
    for url in pair:
        parts = _split(url)
        if parts is not None and rule.rewrite(parts) is not None:
            where = _where(rule, parts.scope)
            if where not in found:
                found.append(where)
    return found or [_where(rule, scope)]


def _families(used: tuple[Rule, ...], candidate: Rule | None) -> dict[Family, list[Rule]]:
    """The rules that made a pair one class (and the candidate), by family."""
    families: dict[Family, list[Rule]] = {}
    for rule in used:
        if rule not in families.setdefault(rule.family, []):
            families[rule.family].append(rule)
    if candidate is not None:
        families.setdefault(candidate.family, []).append(candidate)
    return families


def _suspects(
    families: dict[Family, list[Rule]], needed: list[Family], proven: int
) -> list[Family]:
    """Of the ``needed`` families, the one to blame. First the newest of those
    no page has proven yet (checked fewer than ``proven`` times since
    adopted): a rule adopted a moment ago (``?variant=``) is the likelier
    mistake than an older one pages checked (a category alias), whatever
    evidence it was adopted on. Else those with the least evidence; of
    equals, the one adopted last."""

    def evidence(family: Family) -> int:
        return sum(rule.support + rule.verified for rule in families[family])

    def newest(candidates: list[Family]) -> list[Family]:
        last = max(rule.adopted_at for family in candidates for rule in families[family])
        return [f for f in candidates if any(r.adopted_at == last for r in families[f])]

    unproven = [f for f in needed if sum(r.verified for r in families[f]) < proven]
    if unproven:
        return newest(unproven)
    weakest = min(evidence(family) for family in needed)
    return newest([family for family in needed if evidence(family) == weakest])
