"""``DEDUP_REPORT``: what dedup did in one crawl, as JSON and as one HTML page.

:class:`ReportCollector` gathers, during the crawl and within fixed bounds,
what the stats cannot say: example URLs per URL rule, the duplicate clusters
(the kept URL and what was folded into it), and the rel=canonical
declarations applied and ignored. :func:`build_report` adds the stats, the
savings and the learned rules; :func:`write_report` writes ``<path>.json`` and
a self-contained ``<path>.html`` (no script, no stylesheet or font fetched:
it opens offline). Imports nothing from Scrapy.
"""

from __future__ import annotations

import html
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = [
    "ReportCollector",
    "build_report",
    "render_html",
    "report_paths",
    "savings",
    "write_report",
]

#: Examples kept per URL rule and per rel=canonical reason.
EXAMPLES = 5
#: Clusters shown in the report (the largest), and members shown per cluster.
TOP_CLUSTERS = 100
MEMBERS = 10
#: Kept URLs whose clusters are tracked one by one; beyond, only counted.
TRACKED_CLUSTERS = 5_000
#: Learned rules listed (the most used first).
TOP_RULES = 200
#: Kept items whose fetched URL differs from the URL they are kept under,
#: remembered to say which copy was kept; and worse copies kept, listed.
TRACKED_KEPT = 20_000
WORSE_KEPT = 100

_SAVED_BY = (
    ("url_rules", "URL rules"),
    ("previous_run", "earlier runs"),
    ("rel_canonical", "rel=canonical"),
    ("learned", "learned rules"),
    ("dont_filter", "start URLs linked again"),
)
#: Responses a byte estimate needs: below, their average says little (a
#: second run may download only its start pages and robots.txt).
MIN_RESPONSES_FOR_BYTES = 20
ITEM_KINDS = ("exact", "near", "canonical", "unchanged")
#: What the reasons that are not DEDUP_URL_RULES names mean, on the page.
_REASONS = {
    "exact": "the same URL again (Scrapy's own filter drops these too)",
    "previous_run": "kept by an earlier run",
    "rel_canonical": "a fetched page declared it its canonical URL",
    "learned": "a learned URL rule",
}


def _get(stats: dict[str, Any], name: str) -> int:
    try:
        return int(stats.get(name, 0) or 0)
    except (TypeError, ValueError):
        return 0


def savings(stats: dict[str, Any]) -> dict[str, Any]:
    """Fetches saved beyond what Scrapy's own filter saves, by source, and an
    estimate of the bytes they would have cost, from a crawl's stats.

    A filtered request counts when Scrapy's own filter would have fetched it
    (``dedup/url/saved``: its Scrapy fingerprint was new to the crawl), once
    per fingerprint; requests skipped and then fetched after all (a learned
    rule that failed, a host whose rel=canonical lost trust) do not count.
    ``bytes`` is ``None`` (not estimated) when fewer than
    :data:`MIN_RESPONSES_FOR_BYTES` responses were downloaded.
    """
    saved = {key: _get(stats, f"dedup/url/saved/{key}") for key, _ in _SAVED_BY}
    # (Requests that waited for a rule were filtered; those fetched after all
    # saved nothing.)
    saved["learned"] -= (
        _get(stats, "dedup/learn/released")
        + _get(stats, "dedup/learn/audited")
        + _get(stats, "dedup/learn/deferred/released")
        + _get(stats, "dedup/learn/deferred/fetched")
    )
    # (A target skipped on trust was filtered at most once, however often refetched.)
    saved["rel_canonical"] -= min(_get(stats, "dedup/canonical/refetched"), saved["rel_canonical"])
    by = {key: max(0, n) for key, n in saved.items()}
    # Fetched here, and not by Scrapy's own filter (a redirect let through to a
    # URL Scrapy had seen; a key finer than Scrapy's fingerprint).
    extra = _get(stats, "dedup/url/scrapy_filters")
    fetches = max(0, sum(by.values()) - extra)
    responses = _get(stats, "downloader/response_count")
    estimate: int | None = None
    if responses >= MIN_RESPONSES_FOR_BYTES:
        estimate = round(fetches * _get(stats, "downloader/response_bytes") / responses)
    return {"fetches": fetches, "by": by, "extra": extra, "bytes": estimate}


def _bounded_add(examples: list[Any], example: Any, limit: int = EXAMPLES) -> None:
    if len(examples) < limit and example not in examples:
        examples.append(example)


class ReportCollector:
    """What the report needs beyond the stats, bounded whatever the crawl's size."""

    def __init__(self) -> None:
        #: reason -> [{"url", "key"[, "seen_as"]}...]: requests filtered, with examples.
        self.url_examples: dict[str, list[dict[str, str]]] = {}
        #: kept URL -> [duplicates, Counter of kinds, members]
        self.clusters: dict[str, list[Any]] = {}
        self.untracked = 0  # duplicates of kept URLs beyond TRACKED_CLUSTERS
        self.untracked_clusters: set[int] = set()  # their hashes, to count them
        self.canonical: dict[str, list[dict[str, str]]] = {}
        #: kept URL -> the URL its item was fetched from, when they differ.
        self._kept_from: dict[str, str] = {}
        #: where a worse copy was kept: [{"kept", "kept_from", "plainer", "why"}...]
        self.worse: list[dict[str, str]] = []
        self.worse_count = 0

    def item_kept(self, url: str, fetched: str) -> None:
        """An item fetched from ``fetched`` was kept under ``url`` (its page's
        canonical or clean URL)."""
        if len(self._kept_from) < TRACKED_KEPT:
            self._kept_from[url] = fetched

    def kept_from(self, url: str) -> str:
        """The URL the item kept under ``url`` was fetched from (as far as known)."""
        return self._kept_from.get(url, url)

    def worse_kept(self, kept: str, kept_from: str, plainer: str, why: str) -> None:
        """The item kept under ``kept`` came from ``kept_from`` (for ``why``),
        and a copy from the plainer URL ``plainer`` was dropped."""
        self.worse_count += 1
        if len(self.worse) < WORSE_KEPT:
            self.worse.append(
                {"kept": kept, "kept_from": kept_from, "plainer": plainer, "why": why}
            )

    def url_filtered(
        self, reasons: tuple[str, ...], url: str, key: str, seen_as: str | None = None
    ) -> None:
        """A request for ``url`` was filtered for ``reasons``: its key (the
        canonical URL) was seen, as ``seen_as`` when that URL is known."""
        for reason in reasons:
            examples = self.url_examples.setdefault(reason, [])
            if len(examples) < EXAMPLES:
                example = {"url": url, "key": key}
                if seen_as is not None:
                    example["seen_as"] = seen_as
                _bounded_add(examples, example)

    def item_dropped(
        self, kind: str, kept: str, url: str, detail: str, similarity: float | None
    ) -> None:
        """An item from ``url`` was a ``kind`` duplicate of the one kept at ``kept``."""
        cluster = self.clusters.get(kept)
        if cluster is None:
            if len(self.clusters) >= TRACKED_CLUSTERS:
                self.untracked += 1
                if len(self.untracked_clusters) < 10 * TRACKED_CLUSTERS:
                    self.untracked_clusters.add(hash(kept))
                return
            cluster = self.clusters[kept] = [0, Counter(), []]
        cluster[0] += 1
        cluster[1][kind] += 1
        if len(cluster[2]) < MEMBERS:
            member: dict[str, Any] = {"url": url, "kind": kind, "detail": detail}
            if similarity is not None:
                member["similarity"] = round(similarity, 3)
            cluster[2].append(member)

    def canonical_seen(self, verdict: str, reason: str, url: str, target: str) -> None:
        """A page declared ``target`` canonical: ``apply``, or ``ignore`` for ``reason``."""
        key = "applied" if verdict == "apply" else f"ignored/{reason}"
        examples = self.canonical.setdefault(key, [])
        if len(examples) < EXAMPLES:
            _bounded_add(examples, {"url": url, "canonical": target})

    def _clusters(self) -> dict[str, Any]:
        ranked = sorted(self.clusters.items(), key=lambda entry: (-entry[1][0], entry[0]))
        shown = [
            {
                "kept": kept,
                "duplicates": count,
                "kinds": dict(sorted(kinds.items())),
                "members": members,
            }
            for kept, (count, kinds, members) in ranked[:TOP_CLUSTERS]
        ]
        rest = ranked[TOP_CLUSTERS:]
        return {
            "clusters": len(self.clusters) + len(self.untracked_clusters),
            "shown": shown,
            "other_clusters": len(rest) + len(self.untracked_clusters),
            "other_duplicates": sum(count for _, (count, _, _) in rest) + self.untracked,
        }


def build_report(
    collector: ReportCollector,
    stats: dict[str, Any],
    *,
    spider: str,
    version: str,
    components: list[str],
    store: str,
    rules: dict[str, Any] | None = None,
    finished: str = "",
) -> dict[str, Any]:
    """The report of one crawl, JSON-ready. ``rules``: the learned rules as
    :meth:`~scrapy_dedup.learn.Learner.export` gives them (``None``: learning off)."""
    saved = savings(stats)
    dropped = {kind: _get(stats, f"dedup/items/{kind}") for kind in ITEM_KINDS}
    url_rules: list[dict[str, Any]] = []
    prefix = "dedup/url/filtered/"
    for name in sorted(stats):
        if isinstance(name, str) and name.startswith(prefix):
            reason = name[len(prefix) :]
            url_rules.append(
                {
                    "rule": reason,
                    "urls": _get(stats, name),
                    "examples": collector.url_examples.get(reason, []),
                }
            )
    url_rules.sort(key=lambda entry: (-entry["urls"], entry["rule"]))
    ignored_prefix = "dedup/canonical/ignored/"
    ignored = {
        name[len(ignored_prefix) :]: _get(stats, name)
        for name in sorted(stats)
        if isinstance(name, str) and name.startswith(ignored_prefix)
    }
    learned: list[dict[str, Any]] | None = None
    if rules is not None:
        learned = [
            {"host": host, **entry}
            for host, entries in (rules.get("hosts") or {}).items()
            for entry in entries
        ]
        learned.sort(key=lambda entry: -int(entry.get("requests_skipped", 0)))
    return {
        "report": "scrapy-dedup",
        "version": version,
        "spider": spider,
        "finished": finished,
        "store": store,
        "components": components,
        "totals": {
            "requests_seen": _get(stats, "dedup/url/seen"),
            "requests_filtered": _get(stats, "dedup/url/filtered"),
            "responses": _get(stats, "downloader/response_count"),
            "fetches_saved": saved["fetches"],
            "fetches_scrapy_filters": saved["extra"],
            "bytes_not_downloaded": saved["bytes"],
            "items_kept": _get(stats, "dedup/items/unique"),
            "items_dropped": sum(dropped.values()),
        },
        "savings": [
            {"source": label, "key": key, "fetches": saved["by"][key]} for key, label in _SAVED_BY
        ],
        "items_dropped": dropped,
        "url_rules": url_rules,
        "duplicate_clusters": collector._clusters(),
        "worse_copies_kept": {
            "count": collector.worse_count,
            "shown": collector.worse,
        },
        "canonical": {
            "applied": _get(stats, "dedup/canonical/applied"),
            "same": _get(stats, "dedup/canonical/same"),
            "ignored": ignored,
            "examples": collector.canonical,
        },
        "learned_rules": None
        if learned is None
        else {"rules": learned[:TOP_RULES], "other_rules": max(0, len(learned) - TOP_RULES)},
        "stats": {
            name: value
            for name, value in sorted(stats.items())
            if isinstance(name, str) and name.startswith("dedup/")
        },
    }


def report_paths(path: str) -> tuple[Path, Path]:
    """(JSON, HTML) paths of ``DEDUP_REPORT``: ``report`` and ``report.json``
    both give ``report.json`` and ``report.html``."""
    base = Path(path)
    if base.suffix.lower() in (".json", ".html", ".htm"):
        base = base.with_suffix("")
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".html")


def write_report(path: str, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report`` as JSON and HTML (each replaced whole, never half
    written); the two paths written."""
    json_path, html_path = report_paths(path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for target, text in (
        (json_path, json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n"),
        (html_path, render_html(report)),
    ):
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(target)
    return json_path, html_path


# -- HTML -------------------------------------------------------------------------

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .7em;text-align:left;
vertical-align:top;border-bottom:1px solid #eee}th{background:#f6f6f6}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.url{font-family:ui-monospace,monospace;font-size:.88em;word-break:break-all}
.muted{color:#777}.totals td{font-size:1.1em}details{margin:.3em 0}
svg text{font:13px system-ui,sans-serif}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _n(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) else _e(value)


def _url(url: str) -> str:
    return f'<span class="url">{_e(url)}</span>'


def _bars(rows: list[tuple[str, int]], colour: str) -> str:
    """A horizontal bar chart as inline SVG."""
    if not rows:
        return '<p class="muted">Nothing.</p>'
    top = max(n for _, n in rows) or 1
    height = 26 * len(rows) + 6
    parts = [f'<svg width="640" height="{height}" role="img">']
    for i, (label, n) in enumerate(rows):
        y = 26 * i + 4
        width = round(380 * n / top)
        parts.append(
            f'<text x="0" y="{y + 15}">{_e(label)}</text>'
            f'<rect x="150" y="{y}" width="{max(width, 1)}" height="20" fill="{colour}"/>'
            f'<text x="{158 + width}" y="{y + 15}" class="value">{_n(n)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    def cell(tag: str, i: int, value: str) -> str:
        return f'<{tag} class="n">{value}</{tag}>' if i in numeric else f"<{tag}>{value}</{tag}>"

    out = ["<table><tr>", *(cell("th", i, _e(h)) for i, h in enumerate(head)), "</tr>"]
    for row in rows:
        out += ["<tr>", *(cell("td", i, value) for i, value in enumerate(row)), "</tr>"]
    out.append("</table>")
    return "".join(out)


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"  # pragma: no cover


def render_html(report: dict[str, Any]) -> str:
    """The report as one HTML page that needs nothing else to open."""
    out = [
        *_html_head(report),
        *_html_totals(report["totals"]),
        *_html_savings(report),
        *_html_url_rules(report["url_rules"]),
        *_html_clusters(report["duplicate_clusters"]),
        *_html_worse_kept(report.get("worse_copies_kept")),
        *_html_canonical(report["canonical"]),
        *_html_learned(report["learned_rules"]),
        "<h2>All dedup stats</h2>",
        _table(
            ["Stat", "Value"],
            [[_e(name), _n(value)] for name, value in report["stats"].items()],
            frozenset({1}),
        ),
        "</body></html>\n",
    ]
    return "\n".join(out)


def _html_head(report: dict[str, Any]) -> list[str]:
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>scrapy-dedup report: {_e(report['spider'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>scrapy-dedup report: {_e(report['spider'])}</h1>",
        f'<p class="muted">{_e(report["finished"])} · scrapy-dedup {_e(report["version"])} · '
        f"store: {_e(report['store'])} · on: {_e(', '.join(report['components']))}</p>",
    ]


def _html_totals(totals: dict[str, Any]) -> list[str]:
    out = ['<table class="totals" id="totals">']
    for key, label in (
        ("fetches_saved", "Fetches saved beyond Scrapy's own filter"),
        ("fetches_scrapy_filters", "Fetched, where Scrapy's own filter would not"),
        ("bytes_not_downloaded", "Bytes not downloaded (estimated)"),
        ("responses", "Responses downloaded"),
        ("items_kept", "Items kept"),
        ("items_dropped", "Duplicate items"),
    ):
        if key == "fetches_scrapy_filters" and not totals.get(key):
            continue  # (the saving above is net of them)
        value = _n(totals[key])
        if key == "bytes_not_downloaded":
            value = _bytes_cell(totals[key])
        out.append(f'<tr><td>{_e(label)}</td><td class="n" data-key="{key}">{value}</td></tr>')
    out.append("</table>")
    return out


def _bytes_cell(n: int | None) -> str:
    if n is None:
        return (
            f'<span class="muted">not estimated (fewer than {MIN_RESPONSES_FOR_BYTES} '
            "responses)</span>"
        )
    return f'{_n(n)} <span class="muted">({_e(_size(n))})</span>'


def _html_savings(report: dict[str, Any]) -> list[str]:
    by_source = [(row["source"], row["fetches"]) for row in report["savings"] if row["fetches"]]
    by_kind = [(kind, n) for kind, n in report["items_dropped"].items() if n]
    return [
        "<h2>Where the savings came from</h2>",
        "<h3>Fetches saved, by source</h3>",
        _bars(by_source, "#3b7dd8"),
        "<h3>Duplicate items, by kind</h3>",
        _bars(by_kind, "#d8833b"),
    ]


def _html_url_rules(url_rules: list[dict[str, Any]]) -> list[str]:
    rows = []
    for entry in url_rules:
        examples = "<br>".join(
            f"{_url(ex['url'])} → {_url(ex.get('seen_as') or ex['key'])}"
            for ex in entry["examples"]
        )
        rule = _e(entry["rule"])
        if entry["rule"] in _REASONS:
            rule += f'<br><span class="muted">{_e(_REASONS[entry["rule"]])}</span>'
        rows.append([rule, _n(entry["urls"]), examples])
    head = ["Rule", "URLs", "Examples (filtered → the URL or key seen first)"]
    return [
        "<h2>URL rules: requests filtered before fetching</h2>",
        _table(head, rows, frozenset({1}))
        if rows
        else '<p class="muted">No request was filtered.</p>',
    ]


def _html_clusters(clusters: dict[str, Any]) -> list[str]:
    out = ["<h2>Duplicate clusters: kept URL and what was folded into it</h2>"]
    more = ""
    if clusters["other_clusters"]:
        more = (
            f"; the {len(clusters['shown'])} largest are shown, "
            f"{_n(clusters['other_clusters'])} more hold {_n(clusters['other_duplicates'])} "
            "duplicates"
        )
    out.append(f"<p>{_n(clusters['clusters'])} clusters{more}.</p>")
    out.extend(_html_cluster(cluster) for cluster in clusters["shown"])
    return out


def _html_cluster(cluster: dict[str, Any]) -> str:
    kinds = ", ".join(f"{n} {kind}" for kind, n in cluster["kinds"].items())
    members = _table(
        ["Duplicate URL", "Kind", "Similarity"],
        [
            [
                _url(m["url"]),
                _e(m["kind"]),
                _e(m["similarity"] if "similarity" in m else m["detail"]),
            ]
            for m in cluster["members"]
        ],
    )
    more = cluster["duplicates"] - len(cluster["members"])
    return (
        f"<details><summary>{_url(cluster['kept'])} ← {_n(cluster['duplicates'])} "
        f"({_e(kinds)})</summary>{members}"
        + (f'<p class="muted">and {_n(more)} more</p>' if more > 0 else "")
        + "</details>"
    )


def _html_worse_kept(worse: dict[str, Any] | None) -> list[str]:
    """Where a worse copy of a page was kept and a plainer one dropped."""
    if not worse or not worse["count"]:
        return []
    rows = [
        f"<li>kept {_url(entry['kept_from'])} ({_e(entry['why'])}); {_url(entry['plainer'])}, "
        f"its plainer URL, came later"
        + (
            f' <span class="muted">(kept under {_url(entry["kept"])})</span>'
            if entry["kept"] != entry["kept_from"]
            else ""
        )
        + "</li>"
        for entry in worse["shown"]
    ]
    more = worse["count"] - len(worse["shown"])
    return [
        '<h2 id="worse-kept">Worse copies kept</h2>',
        f"<p>{_n(worse['count'])} items were kept from a worse copy of their page (a print "
        "view, an alias, more parameters) and the plainer copy's item dropped as its "
        'duplicate. DEDUP_KEEP = "best" holds such items while the page they declare '
        "canonical is on its way.</p>",
        "<ul>",
        *rows,
        "</ul>",
        *([f'<p class="muted">and {_n(more)} more</p>'] if more > 0 else []),
    ]


def _html_canonical(canonical: dict[str, Any]) -> list[str]:
    rows = [["applied", _n(canonical["applied"])], ["own URL (same)", _n(canonical["same"])]]
    rows += [[f"ignored: {_e(reason)}", _n(n)] for reason, n in canonical["ignored"].items()]
    out = [
        "<h2>rel=canonical declarations</h2>",
        _table(["Declarations", "Pages"], rows, frozenset({1})),
    ]
    for key, examples in sorted(canonical["examples"].items()):
        out.append(
            f"<details><summary>{_e(key)}: examples</summary>"
            + _table(
                ["Page", "Declared canonical"],
                [[_url(ex["url"]), _url(ex["canonical"])] for ex in examples],
            )
            + "</details>"
        )
    return out


_LEARNED_HEAD = [
    "Host",
    "Rule",
    "State",
    "Pages confirming",
    "Pages checked",
    "Skipped",
    "Evidence",
]


def _html_learned(learned: dict[str, Any] | None) -> list[str]:
    out = ["<h2>Learned URL rules</h2>"]
    if learned is None:
        out.append('<p class="muted">Learning is off (DEDUP_LEARN).</p>')
    elif not learned["rules"]:
        out.append('<p class="muted">No rule was adopted.</p>')
    else:
        rows = [_learned_row(rule) for rule in learned["rules"]]
        out.append(_table(_LEARNED_HEAD, rows, frozenset({3, 4, 5})))
        if learned["other_rules"]:
            out.append(f'<p class="muted">and {_n(learned["other_rules"])} more rules</p>')
    return out


def _learned_row(rule: dict[str, Any]) -> list[str]:
    spec = rule.get("means") or rule.get("rule") or ""
    examples = "<br>".join(" = ".join(_url(u) for u in pair) for pair in rule.get("examples", []))
    counter = "<br>".join(
        " ≠ ".join(_url(u) for u in pair) for pair in rule.get("counterexamples", [])
    )
    return [
        _e(rule["host"]),
        _e(spec),
        "revoked" if rule.get("revoked") else "adopted",
        _n(rule.get("pages_confirming", 0)),
        _n(rule.get("pages_checked", 0)),
        _n(rule.get("requests_skipped", 0)),
        examples + (f"<br>counterexamples:<br>{counter}" if counter else ""),
    ]
