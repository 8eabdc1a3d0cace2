"""What ``scrapy dedup explain`` and ``scrapy dedup stats`` tell: why a URL
is (not) fetched, and what a store holds, with the project's settings.

Settings are read as a crawl reads them (a spider's ``custom_settings``, the
``ADDONS`` applied), so a URL is keyed exactly as the crawl keyed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import RequestFingerprinter

from scrapy_dedup.config import DedupConfig
from scrapy_dedup.keys import PREVIOUS_RUN, REL_CANONICAL, RequestKeys
from scrapy_dedup.learn import Learner
from scrapy_dedup.learning import kept_earlier, load_rules_file, read_record
from scrapy_dedup.state import resolve_sqlite_path
from scrapy_dedup.stores import DedupStore, StoreError, open_store, redact
from scrapy_dedup.url import RULES, UNPARSED, rule_names

__all__ = ["Explained", "Project", "explain", "format_explain", "format_stats", "store_stats"]


@dataclass
class Project:
    """A project's dedup settings, read as a crawl of ``spidercls`` reads them."""

    settings: Settings
    config: DedupConfig
    keys: RequestKeys
    #: The spider's ``start_urls`` where it lists them (``explain`` says a
    #: kept start URL is fetched again).
    start_urls: tuple[str, ...] = ()

    @classmethod
    def load(
        cls, settings: Settings | dict[str, Any] | None, spidercls: type[Spider] | None = None
    ) -> Project:
        settings = settings if isinstance(settings, Settings) else Settings(settings or {})
        crawler = Crawler(spidercls or Spider, settings)
        crawler.addons.load_settings(crawler.settings)
        config = DedupConfig.from_settings(crawler.settings)
        keys = RequestKeys(config.canonicalizer(), _fingerprinter(crawler), Request)
        start_urls = getattr(spidercls, "start_urls", None) or ()
        if isinstance(start_urls, str) or not all(isinstance(u, str) for u in start_urls):
            start_urls = ()
        return cls(crawler.settings, config, keys, tuple(start_urls))

    def open_store(self, namespace: str) -> DedupStore:
        """The project's store for ``namespace``, opened to look (a Redis
        store does not join a run); close it with :func:`close_store`."""
        config = self.config
        store = open_store(
            resolve_sqlite_path(config.store),
            namespace,
            prefix=config.redis_prefix,
            classes=config.store_classes,
            recrawl_after=config.recrawl_after,
            timeout=config.store_timeout,
            join=False,
        )
        try:
            exists = store.namespace_exists()
            known: list[str] = getattr(store, "namespaces", list)() if not exists else []
        except BaseException:
            close_store(store)
            raise
        if not exists:  # a typo does not read as an empty namespace
            close_store(store)
            raise StoreError(
                f"{redact(config.store)} has no namespace {namespace!r} "
                f"(it has: {', '.join(map(repr, known)) or 'none'})"
            )
        return store

    def describe_store(self, namespace: str) -> str:
        store = self.config.store
        if store.strip().lower() == "memory":
            return "memory (keeps nothing between runs)"
        return f"{redact(store)}, namespace {namespace!r}"


def close_store(store: DedupStore) -> None:
    """Close a store a tool opened (with ``join=False`` it recorded no run)."""
    store.close()


def _fingerprinter(crawler: Crawler) -> Any:
    """The crawl's ``REQUEST_FINGERPRINTER_CLASS`` when it is not Scrapy's
    default (it decides the keys of a crawl, so it decides these too)."""
    name = crawler.settings["REQUEST_FINGERPRINTER_CLASS"]
    fingerprinter = load_object(name) if isinstance(name, str) else name
    if fingerprinter is RequestFingerprinter:
        return None
    try:
        return build_from_crawler(fingerprinter, crawler)
    except Exception as exc:
        raise ValueError(
            f"cannot build REQUEST_FINGERPRINTER_CLASS {name!r} outside a crawl "
            f"({type(exc).__name__}: {exc}): it decides which pages are the same, so "
            "they cannot be found without it"
        ) from None


# -- explain --------------------------------------------------------------------


@dataclass
class Explained:
    """Why one URL has the key it has, and what a crawl would do with it."""

    url: str
    key: int
    canonical: str
    #: (rule, URL before, URL after) for each rule that changed it, in order.
    steps: list[tuple[str, str, str]] = field(default_factory=list)
    unparsed: bool = False
    #: A learned rule makes it a copy of a fetched page: (rules, the page).
    learned: tuple[list[str], str] | None = None
    #: What the store says of its key (``None``: no store looked at).
    store: str | None = None


def _steps(config: DedupConfig, url: str) -> list[tuple[str, str, str]]:
    """The rules that change ``url`` (as Scrapy requests it), turned on one
    by one in the order the canonicalizer applies them; each step is named by
    the rules that acted (a later rule can let an earlier one act: with the
    ``:80`` gone, ``http`` becomes ``https``)."""
    steps = []
    before, before_mask = config.canonicalizer(only=frozenset()).canonicalize_traced(url)
    on: set[str] = set()
    for rule in RULES:
        on.add(rule)
        after, mask = config.canonicalizer(only=frozenset(on)).canonicalize_traced(url)
        if after != before:
            names = rule_names(mask & ~before_mask) or [rule]
            steps.append((", ".join(names), before, after))
            before, before_mask = after, mask
    return steps


def _learner(project: Project, store: DedupStore | None) -> Learner | None:
    """The rules a crawl would start with: ``DEDUP_LEARN_RULES`` and the
    store's evidence, as the crawl replays them (never sampled here)."""
    config = project.config
    if not config.learn:
        return None

    def kept(url: str) -> bool:
        return store is None or kept_earlier(store, project.keys, url)

    learner = Learner(
        min_support=config.learn_min_support,
        sample=0.0,
        max_kept=config.learn_max_kept,
        frozen=config.learn_frozen,
        kept=kept,
    )
    if config.learn_rules and Path(config.learn_rules).exists():
        load_rules_file(learner, Path(config.learn_rules))
    if store is not None:
        records, _ = store.exchange_evidence([], 0)
        for text in records:
            record = read_record(text)
            if record is not None and record[0] == "o":
                learner.observe(record[2], record[3], int(record[4]), True)
    return learner


def _store_says(store: DedupStore, key: int, pending: set[int], start: bool) -> str:
    if key in pending:
        return (
            "in the frontier: an earlier run scheduled it and did not finish it (or it "
            "failed); the next run fetches it"
        )
    as_url = store.kept_as(key)
    named = f" (as {as_url})" if as_url else ""
    if store.expired(key):
        return (
            f"kept by an earlier run{named}, forgotten or past DEDUP_RECRAWL_AFTER: "
            "the next run fetches it again"
        )
    info = store.get_url(key)
    if info is None:
        return "not seen: the next run fetches it"
    if info & REL_CANONICAL:
        return "declared its canonical URL by a fetched page: the next run skips it"
    if info & PREVIOUS_RUN and start:
        return (
            f"kept by an earlier run{named}; it is one of the spider's start_urls, which "
            "the next run fetches again, to find new links"
        )
    if info & PREVIOUS_RUN:
        return f"kept by an earlier run{named}: the next run skips it"
    return "seen in the run going on now"


def _with_learned(entry: Explained, pending: set[int]) -> str | None:
    """What the store says, once a learned rule that skips the URL is known."""
    if entry.learned is not None and entry.key in pending:
        return (
            "in the frontier, skipped by the learned rule above while it holds "
            "(fetched if the rule fails)"
        )
    if entry.learned is not None and entry.store and entry.store.startswith("not seen"):
        return "not kept: the learned rule above skips it"
    return entry.store


def _explain_one(project: Project, url: str, learner: Learner | None) -> Explained:
    """Why ``url`` has its key: the rules that made it, and a learned rule."""
    key, canonical, mask, requested = project.keys.of_url_traced(url)
    entry = Explained(url, key, canonical, unparsed=bool(mask & UNPARSED))
    if requested != url:
        entry.steps.append(("as Scrapy requests it", url, requested))
    if not entry.unparsed:
        entry.steps += _steps(project.config, requested)
    skip = learner.check(canonical) if learner is not None else None
    if skip is not None:
        entry.learned = ([rule.name for rule in skip.rules], skip.copy_of)
    return entry


def explain(
    urls: list[str],
    *,
    project: Project,
    namespace: str | None = None,
) -> list[Explained]:
    """Explain each of ``urls``; with ``namespace``, what the project's store
    holds for it too."""
    store = project.open_store(namespace) if namespace is not None else None
    try:
        learner = _learner(project, store)
        explained = [_explain_one(project, url, learner) for url in urls]
        if store is not None:
            # (Read only: a tool's store hands the frontier to no crawl.)
            pending = {key for key, _ in store.pending_requests()}
            starts = {project.keys.of_url_traced(url)[0] for url in project.start_urls}
            for entry in explained:
                entry.store = _store_says(store, entry.key, pending, entry.key in starts)
                entry.store = _with_learned(entry, pending)
        return explained
    finally:
        if store is not None:
            close_store(store)


def _format_entry(entry: Explained, *, learning: bool) -> list[str]:
    lines = [entry.url, f"  key: {entry.canonical} ({entry.key:016x})"]
    if entry.unparsed:
        lines.append("  cannot be parsed: its key is the URL itself, stripped")
    elif not entry.steps:
        lines.append("  no rule changes it")
    lines += [f"  {rule}: {before} -> {after}" for rule, before, after in entry.steps]
    if entry.learned is not None:
        rules, copy = entry.learned
        lines.append(f"  learned rule {' and '.join(rules)}: a copy of {copy}, not fetched")
    elif learning:
        lines.append("  learned rules: none applies")
    if entry.store is not None:
        lines.append(f"  store: {entry.store}")
    return lines


def _format_groups(explained: list[Explained]) -> list[str]:
    """Which of the URLs are one page (after a blank line), for several URLs."""
    groups: dict[int, list[str]] = {}
    for entry in explained:
        groups.setdefault(entry.key, []).append(entry.url)
    together = [urls for urls in groups.values() if len(urls) > 1]
    if len(explained) < 2:
        return []
    if not together:
        return ["", "Every URL has a key of its own."]
    lines = ["", "The same page (one key, fetched once):"]
    lines += [f"  {' = '.join(urls)}" for urls in together]
    if len(groups) > len(together):
        lines.append(f"{len(groups) - len(together)} other keys of their own")
    return lines


def format_explain(explained: list[Explained], *, learning: bool) -> str:
    lines = [line for entry in explained for line in _format_entry(entry, learning=learning)]
    return "\n".join(lines + _format_groups(explained))


# -- stats ----------------------------------------------------------------------


def store_stats(*, project: Project, namespace: str, top: int = 10) -> dict[str, Any]:
    """What the project's store holds for ``namespace``, and the learned rules."""
    store = project.open_store(namespace)
    try:
        inventory = store.inventory(top)
        learner = _learner(project, store)
        rules = learner.export()["hosts"] if learner is not None else None
    finally:
        close_store(store)
    return {
        "store": project.describe_store(namespace),
        "counts": inventory["counts"],
        "hosts": inventory["hosts"],
        "hosts_of": inventory.get("hosts_of", "kept pages"),
        "learned_rules": rules,
    }


def format_stats(stats: dict[str, Any]) -> str:
    lines = [f"store: {stats['store']}"]
    width = max(len(name) for name in stats["counts"])
    for name, n in stats["counts"].items():
        lines.append(f"  {name:<{width}}  {n:>12,}")
    if stats["hosts"]:
        lines.append(f"top hosts ({stats['hosts_of']}):")
        for host, n in stats["hosts"]:
            lines.append(f"  {host:<{width}}  {n:>12,}")
    rules = stats["learned_rules"]
    if rules is None:
        lines.append("learned rules: learning is off (DEDUP_LEARN)")
    else:
        entries = [(host, entry) for host, found in rules.items() for entry in found]
        lines.append(f"learned rules: {len(entries)}")
        for host, entry in entries:
            state = "revoked" if entry.get("revoked") else "adopted"
            lines.append(
                f"  {host}: {entry.get('means', entry['rule'])} ({state}; "
                f"{entry['pages_confirming']} pages confirmed it, "
                f"{entry['pages_checked']} checked)"
            )
    return "\n".join(lines)
