"""Every scrapy-dedup setting: its default, how it is read and what it may be.

:meth:`DedupConfig.from_settings` reads them all once per crawl. A wrong value
stops the crawl with a ``ValueError`` naming the setting; an unknown
``DEDUP_*`` name gets a warning naming the closest known one. Booleans read as
Scrapy's ``Settings.getbool`` reads them (``"false"`` is ``False``, ``"off"``
is an error). Dicts and lists may also be given as JSON or comma-separated
strings, as on the command line (``-s 'DEDUP_URL_RULES={"www": false}'``).
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scrapy_dedup.text.minhash import MIN_THRESHOLD
from scrapy_dedup.url import RULES, URLCanonicalizer

__all__ = ["DEFAULTS", "DedupConfig", "dedup_enabled", "read_bool", "read_duration"]

logger = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    # False: the add-on adds nothing, the components stay out (NotConfigured)
    # and CanonicalDupeFilter filters as Scrapy's RFPDupeFilter
    "DEDUP_ENABLED": True,
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
    "DEDUP_NEAR_THRESHOLD": 0.75,  # minhash: estimated 3-shingle Jaccard similarity, 0.5 to 1
    "DEDUP_SIMHASH_MAX_DISTANCE": 3,  # simhash: Hamming radius in bits
    "DEDUP_MAX_TEXT_CHARS": 1_000_000,  # near-dup fingerprints read at most this much
    "DEDUP_NEAR_MIN_WORDS": 30,  # shorter texts are compared exactly only
    "DEDUP_NEAR_TEMPLATE": True,  # near duplicates must share what is not their host's template
    # rel=canonical (RelCanonicalMiddleware)
    "DEDUP_CANONICAL_ENABLED": True,
    "DEDUP_CANONICAL_CHECK_SITE": True,  # ignore a canonical on another registrable domain
    "DEDUP_CANONICAL_CHECK_HOMEPAGE": True,  # ignore a canonical to the homepage from a page
    "DEDUP_CANONICAL_HEAD_LIMIT": 1024 * 1024,  # bytes of a page searched for the head's link
    # when a declared canonical page is skipped: "verified" (once the host's
    # declarations proved right), "always" (every sensible one), "never"
    "DEDUP_CANONICAL_TRUST": "verified",
    "DEDUP_CANONICAL_TRUST_MIN_SUPPORT": 3,  # declared pages fetched and matching first
    "DEDUP_CANONICAL_TRUST_SAMPLE": 0.05,  # share of trusted declarations still fetched
    "DEDUP_FETCHED_URL_FIELD": "fetched_url",  # where the fetched URL goes when it differs
    # "clean": an item's URL without what the URL rules drop (tracking and session
    # parameters, fragment), or the page's own rel=canonical; "fetched": as fetched
    "DEDUP_ITEM_URL": "clean",
    # a later page's item is a canonical duplicate only when its text is this close
    # (estimated Jaccard) to an item already filed under the canonical URL
    "DEDUP_CANONICAL_MIN_SIMILARITY": 0.5,
    # which copy of a text is kept: "first" (the first to arrive) or "best" (an item
    # from a page declaring another canonical URL is held while that page is on its
    # way, and dropped as its duplicate when that page has the same text)
    "DEDUP_KEEP": "first",
    "DEDUP_KEEP_WAIT": 30.0,  # "best": seconds an item is held at most
    "DEDUP_KEEP_MAX_HELD": 100,  # "best": items held at once at most; beyond, kept as they come
    # Stores
    # "memory" (also None or ""), "sqlite:///relative.db", "sqlite:////abs.db",
    # "redis://host:6379/0", "redis+cluster://host:7000", or "redis": REDIS_URL
    "DEDUP_STORE": "memory",
    "DEDUP_NAMESPACE": None,  # None: the spider's name
    "DEDUP_RESET": False,  # forget the namespace's state when the crawl starts
    "DEDUP_STORE_ON_ERROR": "continue",  # or "stop": what a store failing mid-crawl does
    "DEDUP_STORE_TIMEOUT": 0.5,  # seconds a shared store's connect or reply may take
    "DEDUP_REDIS_PREFIX": "dedup",  # Redis key names start "<prefix>:<namespace>:"
    # seconds a Redis worker's lease lasts unrenewed: a dead worker's frontier is adopted after it
    "DEDUP_REDIS_LEASE": 20.0,
    # how long a later run skips a kept page: None (for ever), seconds, or "7d", "12h", "30m"
    "DEDUP_RECRAWL_AFTER": None,
    "DEDUP_FRONTIER_RETRIES": 3,  # later runs that try a failed or unfinished request again
    # seconds between feed checkpoints: local feed files (FEEDS, -o) are fsynced, then the
    # pages whose items they hold are recorded for later runs
    "DEDUP_FEED_CHECKPOINT": 1.0,
    # {scheme: "path.to.StoreClass"}: stores of your own, by DEDUP_STORE URI scheme
    "DEDUP_STORE_CLASSES": {},
    # Learned URL rules (CanonicalDupeFilter)
    "DEDUP_LEARN": True,  # learn per host which URL differences do not change a page
    "DEDUP_LEARN_MIN_SUPPORT": 3,  # pages confirming a rule before it skips anything
    "DEDUP_LEARN_SAMPLE": 0.05,  # share of the URLs a rule would skip fetched to check it
    "DEDUP_LEARN_MAX_KEPT": 100_000,  # skipped requests kept to fetch if a rule fails
    "DEDUP_LEARN_RULES": None,  # a JSON file: rules read at start, written at the end
    "DEDUP_LEARN_FROZEN": False,  # learn no new rule: only those of DEDUP_LEARN_RULES
    "DEDUP_LEARN_DEFER": True,  # a request a rule not decided yet would skip waits
    # Logging
    "DEDUP_DEBUG": False,  # log every dropped request/item with the reason
    # at the end, write <path>.json and a self-contained <path>.html of what
    # dedup did (%(name)s and %(time)s as in FEEDS); None: no report
    "DEDUP_REPORT": None,
}


_HOST_RULE_KEYS = frozenset(RULES) | {"strip_params", "keep_params"}


def read_bool(name: str, value: Any) -> bool:
    """``value`` read as Scrapy's ``getbool`` reads it; ``ValueError`` naming
    ``name`` for anything else.

    >>> read_bool("X", "false"), read_bool("X", 1), read_bool("X", "True")
    (False, True, True)
    """
    try:
        return bool(int(value))
    except (TypeError, ValueError):
        pass
    if value in ("True", "true"):
        return True
    if value in ("False", "false"):
        return False
    raise ValueError(f"{name} must be a boolean (True/False, 1/0, 'true'/'false'), got {value!r}")


def dedup_enabled(settings: Any) -> bool:
    """``DEDUP_ENABLED``: whether scrapy-dedup acts at all in this crawl."""
    value = settings.get("DEDUP_ENABLED")
    return read_bool("DEDUP_ENABLED", True if value in (None, "") else value)


#: Where ``DEDUP_STORE = "redis"`` points without ``REDIS_URL`` (scrapy-redis's default).
DEFAULT_REDIS_URL = "redis://localhost:6379/0"


def _store(r: _Reader) -> str:
    """``DEDUP_STORE``; ``"redis"`` is the ``REDIS_URL`` scrapy-redis users set."""
    store = r.text("DEDUP_STORE")
    if store.strip().lower() != "redis":
        return store
    url = r.settings.get("REDIS_URL")
    if url in (None, ""):
        return DEFAULT_REDIS_URL
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"DEDUP_STORE='redis' uses REDIS_URL, which is not a URL: {url!r}")
    return url


class _Reader:
    """Typed access to settings, each error naming the setting."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def raw(self, name: str) -> Any:
        """The value set, or the default for one not set (``None`` or ``""``)."""
        value = self.settings.get(name)
        return DEFAULTS[name] if value is None or value == "" else value

    def flag(self, name: str) -> bool:
        return read_bool(name, self.raw(name))

    def number(
        self, name: str, kind: type, low: float, high: float | None = None, *, above: bool = False
    ) -> Any:
        """A number of ``kind`` at least ``low`` (above it, with ``above``)
        and at most ``high``."""
        value = self.raw(name)
        try:
            if isinstance(value, bool):
                raise ValueError
            number = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, got {value!r}") from None
        too_low = number <= low if above else number < low
        if too_low or (high is not None and number > high):
            lower = f"above {low}" if above else f"at least {low}"
            span = f"{lower} and at most {high}" if high is not None else lower
            raise ValueError(f"{name} must be {span}, got {value!r}")
        return number

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if value not in choices:
            raise ValueError(
                f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}"
            )
        return str(value)

    def text(self, name: str, *, empty_ok: bool = False) -> str:
        """A string; an empty one means the default unless ``empty_ok``."""
        value = self.settings.get(name)
        if value is None or (value == "" and not empty_ok):
            value = DEFAULTS[name]
        if not isinstance(value, str) or not (value.strip() or empty_ok):
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        return value

    def names(self, name: str) -> tuple[str, ...]:
        return read_names(name, self.raw(name), spaces=False)

    def fields(self, name: str) -> tuple[str, ...]:
        """Item field names; none at all means the default."""
        return self.names(name) or read_names(name, DEFAULTS[name])

    def optional_text(self, name: str) -> str | None:
        """A string or ``None``; a number is its text (``DEDUP_NAMESPACE = 2026``)."""
        value = self.settings.get(name)
        if value in (None, ""):
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return self.text(name)

    def mapping(self, name: str) -> dict[str, Any]:
        return read_dict(name, self.raw(name))


def read_names(name: str, value: Any, *, spaces: bool = True) -> tuple[str, ...]:
    """A list of names, or one string of names separated by commas (or, with
    ``spaces`` and no comma, by whitespace, as host rules always read them)."""
    if isinstance(value, str):
        value = value.split(",") if "," in value or not spaces else value.split()
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"{name} must be a list of strings, got {value!r}")
    if not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must hold strings only, got {value!r}")
    return tuple(v.strip() for v in value if v.strip())


def read_dict(name: str, value: Any) -> dict[str, Any]:
    """A dict, or its JSON text."""
    if hasattr(value, "copy_to_dict"):  # a Scrapy BaseSettings
        value = value.copy_to_dict()
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"{name} must be a dict (or its JSON): {exc}") from None
    try:
        found = dict(value)  # as Scrapy's getdict: a list of pairs is a dict too
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a dict, got {value!r}") from None
    return {str(k): v for k, v in found.items()}


def _rules(name: str, value: Mapping[str, Any]) -> dict[str, bool]:
    unknown = sorted(set(value) - set(RULES))
    if unknown:
        raise ValueError(f"{name}: unknown URL rules {unknown}; known rules: {', '.join(RULES)}")
    return {rule: read_bool(f"{name}[{rule!r}]", on) for rule, on in value.items()}


def _host_rules(name: str, value: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    for host, overrides in value.items():
        where = f"{name}[{host!r}]"
        if not isinstance(overrides, Mapping):
            raise ValueError(f"{where} must be a dict, got {overrides!r}")
        unknown = sorted(set(overrides) - _HOST_RULE_KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {unknown}; known: {', '.join(sorted(_HOST_RULE_KEYS))}"
            )
        rules = {k: v for k, v in overrides.items() if k in RULES}
        hosts[host] = _rules(where, rules)
        for key in ("strip_params", "keep_params"):
            if key in overrides:
                hosts[host][key] = read_names(f"{where}[{key!r}]", overrides[key])
    return hosts


@dataclass(frozen=True)
class DedupConfig:
    """Every ``DEDUP_*`` setting of one crawl, read and checked once."""

    enabled: bool = True
    # URL stage
    url_rules: dict[str, bool] = field(default_factory=dict)
    url_strip_params: tuple[str, ...] = ()
    url_keep_params: tuple[str, ...] = ()
    url_host_rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Content stage
    content_enabled: bool = True
    text_fields: tuple[str, ...] = ("text",)
    url_field: str = "url"
    fetched_url_field: str = "fetched_url"
    item_url: str = "clean"
    on_duplicate: str = "drop"
    near_method: str = "minhash"
    near_threshold: float = 0.75
    simhash_max_distance: int = 3
    max_text_chars: int = 1_000_000
    near_min_words: int = 30
    near_template: bool = True
    # rel=canonical
    canonical_enabled: bool = True
    canonical_check_site: bool = True
    canonical_check_homepage: bool = True
    canonical_head_limit: int = 1024 * 1024
    canonical_min_similarity: float = 0.5
    keep: str = "first"
    keep_wait: float = 30.0
    keep_max_held: int = 100
    canonical_trust: str = "verified"
    canonical_trust_min_support: int = 3
    canonical_trust_sample: float = 0.05
    # Stores
    store: str = "memory"
    namespace: str | None = None
    reset: bool = False
    store_on_error: str = "continue"
    store_timeout: float = 0.5
    redis_prefix: str = "dedup"
    redis_lease: float = 20.0
    store_classes: dict[str, Any] = field(default_factory=dict)
    recrawl_after: float | None = None
    frontier_retries: int = 3
    feed_checkpoint: float = 1.0
    # Learned URL rules
    learn: bool = True
    learn_min_support: int = 3
    learn_sample: float = 0.05
    learn_max_kept: int = 100_000
    learn_rules: str | None = None
    learn_frozen: bool = False
    learn_defer: bool = True
    # Logging
    debug: bool = False
    report: str | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> DedupConfig:
        """The configuration ``settings`` give; ``ValueError`` naming the first
        bad setting. Warns about unknown ``DEDUP_*`` names."""
        _warn_unknown(settings)
        r = _Reader(settings)
        config = cls(
            enabled=dedup_enabled(settings),
            url_rules=_rules("DEDUP_URL_RULES", r.mapping("DEDUP_URL_RULES")),
            url_strip_params=r.names("DEDUP_URL_STRIP_PARAMS"),
            url_keep_params=r.names("DEDUP_URL_KEEP_PARAMS"),
            url_host_rules=_host_rules("DEDUP_URL_HOST_RULES", r.mapping("DEDUP_URL_HOST_RULES")),
            content_enabled=r.flag("DEDUP_CONTENT_ENABLED"),
            text_fields=r.fields("DEDUP_TEXT_FIELD"),
            url_field=r.text("DEDUP_URL_FIELD"),
            fetched_url_field=r.text("DEDUP_FETCHED_URL_FIELD"),
            item_url=r.choice("DEDUP_ITEM_URL", ("clean", "fetched")),
            on_duplicate=r.choice("DEDUP_ON_DUPLICATE", ("drop", "mark")),
            near_method=r.choice("DEDUP_NEAR_METHOD", ("minhash", "simhash", "off")),
            near_threshold=_near_threshold(r),
            simhash_max_distance=r.number("DEDUP_SIMHASH_MAX_DISTANCE", int, 0, 8),
            max_text_chars=r.number("DEDUP_MAX_TEXT_CHARS", int, 1000),
            near_min_words=r.number("DEDUP_NEAR_MIN_WORDS", int, 1),
            near_template=r.flag("DEDUP_NEAR_TEMPLATE"),
            canonical_enabled=r.flag("DEDUP_CANONICAL_ENABLED"),
            canonical_check_site=r.flag("DEDUP_CANONICAL_CHECK_SITE"),
            canonical_check_homepage=r.flag("DEDUP_CANONICAL_CHECK_HOMEPAGE"),
            canonical_head_limit=r.number("DEDUP_CANONICAL_HEAD_LIMIT", int, 1),
            canonical_min_similarity=r.number("DEDUP_CANONICAL_MIN_SIMILARITY", float, 0.0, 1.0),
            keep=r.choice("DEDUP_KEEP", ("first", "best")),
            keep_wait=r.number("DEDUP_KEEP_WAIT", float, 0, above=True),
            keep_max_held=r.number("DEDUP_KEEP_MAX_HELD", int, 0),
            canonical_trust=r.choice("DEDUP_CANONICAL_TRUST", ("verified", "always", "never")),
            canonical_trust_min_support=r.number("DEDUP_CANONICAL_TRUST_MIN_SUPPORT", int, 1),
            canonical_trust_sample=r.number("DEDUP_CANONICAL_TRUST_SAMPLE", float, 0.0, 1.0),
            store=_store(r),
            namespace=r.optional_text("DEDUP_NAMESPACE"),
            reset=r.flag("DEDUP_RESET"),
            store_on_error=r.choice("DEDUP_STORE_ON_ERROR", ("continue", "stop")),
            store_timeout=r.number("DEDUP_STORE_TIMEOUT", float, 0, above=True),
            redis_prefix=r.text("DEDUP_REDIS_PREFIX", empty_ok=True),
            redis_lease=r.number("DEDUP_REDIS_LEASE", float, 0, above=True),
            store_classes=r.mapping("DEDUP_STORE_CLASSES"),
            recrawl_after=read_duration("DEDUP_RECRAWL_AFTER", r.raw("DEDUP_RECRAWL_AFTER")),
            frontier_retries=r.number("DEDUP_FRONTIER_RETRIES", int, 0),
            feed_checkpoint=r.number("DEDUP_FEED_CHECKPOINT", float, 0.0, above=True),
            learn=r.flag("DEDUP_LEARN"),
            learn_min_support=r.number("DEDUP_LEARN_MIN_SUPPORT", int, 1),
            learn_sample=r.number("DEDUP_LEARN_SAMPLE", float, 0.0, 1.0),
            learn_max_kept=r.number("DEDUP_LEARN_MAX_KEPT", int, 0),
            learn_rules=r.optional_text("DEDUP_LEARN_RULES"),
            learn_frozen=r.flag("DEDUP_LEARN_FROZEN"),
            learn_defer=r.flag("DEDUP_LEARN_DEFER"),
            debug=r.flag("DEDUP_DEBUG"),
            report=r.optional_text("DEDUP_REPORT"),
        )
        config.canonicalizer()  # host rules are checked by building one
        if config.report and "%" in config.report:
            try:
                config.report % {"name": "spider", "time": "time"}
            except (KeyError, ValueError, TypeError):
                raise ValueError(
                    f"DEDUP_REPORT={config.report!r}: only %(name)s and %(time)s are filled "
                    "in (write a % sign as %%)"
                ) from None
        return config

    def canonicalizer(
        self, *, dropping_only: bool = False, only: frozenset[str] | None = None
    ) -> URLCanonicalizer:
        """A :class:`URLCanonicalizer` with the ``DEDUP_URL_*`` rules; with
        ``dropping_only``, one that only takes out what they drop (tracking
        and session parameters, fragments) and rewrites nothing else: the
        clean URL of an item (``DEDUP_ITEM_URL``). With ``only``, none of the
        rules but those named (each as the settings have it): ``scrapy dedup
        explain`` turns them on one by one."""
        rules = dict(self.url_rules)
        host_rules = self.url_host_rules
        if dropping_only:
            only = frozenset(("session_param", "tracking_param", "empty_query", "fragment"))
        if only is not None:
            kept = only
            rules = {name: rules.get(name, True) and name in kept for name in RULES}
            # A host's rules may switch rules off, never a rewriting one on.
            host_rules = {
                host: {k: v for k, v in overrides.items() if k not in RULES or k in kept}
                for host, overrides in (host_rules or {}).items()
            }
        try:
            return URLCanonicalizer(
                strip_params=self.url_strip_params,
                keep_params=self.url_keep_params,
                host_rules=host_rules,
                **rules,
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid DEDUP_URL_HOST_RULES: {exc}") from exc


def _near_threshold(r: _Reader) -> float:
    """``DEDUP_NEAR_THRESHOLD``, within what the MinHash band index serves
    (:data:`~scrapy_dedup.text.minhash.MIN_THRESHOLD` to 1)."""
    name = "DEDUP_NEAR_THRESHOLD"
    value = r.raw(name)
    try:
        number = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        number = float("nan")
    if not MIN_THRESHOLD <= number <= 1.0:
        raise ValueError(
            f"{name} must be between {MIN_THRESHOLD} and 1.0, got {value!r}: below "
            f"{MIN_THRESHOLD} (about one word in eight changed), MinHash bands find a pair "
            "only by comparing each text with most texts sharing its site's template"
        )
    return number


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def read_duration(name: str, value: Any) -> float | None:
    """Seconds of a duration setting: ``None`` or ``""`` (never), a number of
    seconds, or a string such as ``"90s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"``.

    >>> read_duration("X", "7d"), read_duration("X", 90), read_duration("X", None)
    (604800.0, 90.0, None)
    """
    if value is None or value == "":
        return None
    text = str(value).strip().lower()
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "s")
    try:
        seconds = float(number) * _UNITS[unit]
    except ValueError:
        seconds = -1.0
    if isinstance(value, bool) or not seconds > 0 or seconds == float("inf"):
        raise ValueError(
            f"{name} must be a positive duration such as 3600, '30m', '12h' or '7d', "
            f"or None for never; got {value!r}"
        )
    return seconds


def _warn_unknown(settings: Any) -> None:
    for name in sorted(n for n in settings if isinstance(n, str) and n.startswith("DEDUP_")):
        if name not in DEFAULTS:
            close = difflib.get_close_matches(name, DEFAULTS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            logger.warning("Unknown setting %s is ignored%s", name, hint)
