"""Crawl a real application (Trac 1.6) with and without the add-on: is anything lost?

Nothing here was designed for scrapy-dedup: Trac's wiki, tickets, reports, queries,
roadmap and milestones, with their sort links, ``?action=`` and ``?version=`` views.
Set it up once (a separate venv; only 127.0.0.1 traffic)::

    python -m venv /tmp/tracvenv && /tmp/tracvenv/bin/pip install trac
    /tmp/tracvenv/bin/trac-admin /tmp/tracenv initenv demo sqlite:db/trac.db
    /tmp/tracvenv/bin/python - <<'PY'   # ~30 tickets, the Trac API (trac-admin cannot)
    from trac.env import Environment
    from trac.ticket.model import Ticket
    env = Environment("/tmp/tracenv")
    for i in range(30):
        t = Ticket(env)
        t["summary"] = f"Problem number {i}"
        t["description"] = f"Steps for problem {i}: ..."  # make them differ
        t["reporter"] = "x"
        t["milestone"] = "milestone1"
        t.insert()
    PY
    /tmp/tracvenv/bin/tracd --port 8800 --hostname 127.0.0.1 -s /tmp/tracenv &

then, from the repository root (about 1 minute on a 2-core VM)::

    python benches/bench_real_app.py --url http://127.0.0.1:8800

Each configuration is a ``python -m scrapy runspider`` subprocess of the same spider
(``CONCURRENT_REQUESTS`` 8). The spider follows every same-host link under ``/wiki``,
``/ticket``, ``/report``, ``/query``, ``/roadmap``, ``/milestone`` (skipping ``?format=``
downloads, ``/login``, ``/logout``, ``/prefs``, ``action=edit``/``diff``/``history``
and ``version=`` views, ``DEPTH_LIMIT`` 3) and yields ``{url, title, text}`` per page,
``text`` being the text of ``#content``:

a) plain Scrapy;
b) ``ADDONS = {"scrapy_dedup.DedupAddon": 0}``, memory store;
   Learned URL rules are on (the default): does a rule skip a page of its own on a site
   whose query strings mostly matter?
b0) the same with ``DEDUP_NEAR_TEMPLATE = False`` (near duplicates decided on the whole text);
bn) (b) with ``DEDUP_LEARN = False``: the anchor learning must never fetch more than;
c) the add-on with ``DEDUP_STORE="sqlite:///<tmp>/d.db"`` and ``-o items.jsonl``, killed
   with SIGKILL after ``N`` responses (``N`` random, ``--seed``) ``--kills`` times, then
   run to its end with the same command, appending to the same feed.

Printed: fetches (``downloader/request_count``, summed over c's runs) and their ratio to
plain; distinct item texts (whitespace-collapsed, lower-cased ``#content``); plain's texts
missing from (b) and from (c)'s feed, counted as lost only if no kept item has the same
normalized text (first) nor a near-same one (Jaccard of 3-word shingles >= 0.8, second;
a near-duplicate dropped while another URL keeps its text is not a loss), with up to 5 examples;
the share of the site's 3-word shingles (over plain's items) in no kept item;
URLs duplicated in (c)'s feed; (b)'s learned rules (adopted, requests skipped, fetched again
when a rule failed; each rule's log line); and (b)'s summary line's "fetches saved" against
plain - (b).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPIDER = r"""
import json, os, re, sys
from urllib.parse import urlsplit
import scrapy

ALLOW = ("/wiki", "/ticket", "/report", "/query", "/roadmap", "/milestone")
SKIP = re.compile(r"format=|/login|/logout|/prefs|/changeset|/browser|/timeline|"
                  r"action=(edit|diff|history)|version=|/attachment|/raw-attachment")


class Trac(scrapy.Spider):
    name = "trac"
    start_urls = [os.environ["BENCH_URL"] + "/wiki"]

    def parse(self, response):
        print("R", response.url, flush=True)  # a line a response: the parent kills after N
        content = " ".join(response.css("#content ::text").getall())
        yield {"url": response.url, "title": response.css("title::text").get("").strip(),
               "text": content}
        host = urlsplit(response.url).netloc
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href).split("#")[0]
            parts = urlsplit(url)
            if parts.netloc != host or SKIP.search(url):
                continue
            if not parts.path.startswith(ALLOW):
                continue
            yield scrapy.Request(url, callback=self.parse)
"""

DEDUP_SUMMARY = re.compile(r"scrapy-dedup summary: (.*)")
SAVED = re.compile(r"([\d,.]+k?) fetch(?:es)? saved")
LEARN_STAT = re.compile(r"'(dedup/learn/[^']+)': (\d+)")
LEARNED_RULE = re.compile(r"Learned URL rule (.*)")


def normalize(text: str) -> str:
    return " ".join(text.split()).lower()


def crawl(
    spider: Path,
    url: str,
    settings: dict[str, Any],
    feed: Path | None = None,
    kill_after: int | None = None,
) -> dict[str, Any]:
    """One ``scrapy runspider``; killed with SIGKILL after ``kill_after`` responses."""
    stats_file = Path(tempfile.mktemp(suffix=".json"))
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-L", "INFO"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={json.dumps(value) if isinstance(value, dict) else value}"]
    cmd += ["-s", "STATS_DUMP=True"]
    if feed is not None:
        cmd += ["-o", str(feed)]
    else:
        cmd += ["-o", f"{stats_file.with_suffix('.jsonl')}:jsonlines"]
    env = {**os.environ, "BENCH_URL": url}
    err = tempfile.TemporaryFile()  # noqa: SIM115 (read after the process ends)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    responses = 0
    fetched = set()
    killed = False
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("R"):
            responses += 1
            fetched.add(line.split()[1])
            if kill_after is not None and responses >= kill_after:
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
    proc.wait()
    err.seek(0)
    log = err.read().decode(errors="replace")
    requests = 0
    match = re.search(r"'downloader/request_count': (\d+)", log)
    if match:
        requests = int(match.group(1))
    summary = DEDUP_SUMMARY.search(log)
    out: dict[str, Any] = {
        "responses": responses,
        "fetched": fetched,
        "requests": requests if not killed else responses,
        "killed": killed,
        "summary": summary.group(1) if summary else "",
        "learn": {key: int(n) for key, n in LEARN_STAT.findall(log)},
        "rules": LEARNED_RULE.findall(log),
    }
    if feed is None:
        items_path = stats_file.with_suffix(".jsonl")
        out["items"] = [json.loads(x) for x in items_path.read_text().splitlines() if x]
        items_path.unlink()
    if not killed and not requests:
        sys.stderr.write(log[-3000:])
    return out


def shingles(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + 3]) for i in range(max(1, len(words) - 2))}


def closest(item: dict[str, Any], kept: list[dict[str, Any]]) -> tuple[float, str]:
    """The kept item nearest ``item`` (3-word Jaccard) and how near."""
    mine = shingles(normalize(item["text"]))
    best = (0.0, "")
    for other in kept:
        theirs = shingles(normalize(other["text"]))
        best = max(best, (len(mine & theirs) / len(mine | theirs), other["url"]))
    return best


def lost(plain: list[dict[str, Any]], kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plain's items whose text no kept item has, exactly or nearly (3-word Jaccard >= 0.8)."""
    texts = {normalize(i["text"]) for i in kept}
    missing: dict[str, dict[str, Any]] = {}
    for item in plain:
        text = normalize(item["text"])
        if text not in texts:
            missing.setdefault(text, item)
    pool = [shingles(t) for t in texts]
    out = []
    for text, item in missing.items():
        mine = shingles(text)
        if not any(len(mine & other) >= 0.8 * len(mine | other) for other in pool):
            out.append(item)
    return out


def shingles_lost(plain: list[dict[str, Any]], kept: list[dict[str, Any]]) -> float:
    """The share of the site's 3-word shingles (over plain's items) in no kept item."""
    site = set().union(*(shingles(normalize(i["text"])) for i in plain))
    held = set().union(*(shingles(normalize(i["text"])) for i in kept))
    return len(site - held) / max(1, len(site))


def saved_number(summary: str) -> float | None:
    match = SAVED.search(summary)
    if not match:
        return None
    raw = match.group(1).replace(",", "")
    return float(raw[:-1]) * 1000 if raw.endswith("k") else float(raw)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8800", help="the Trac site")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs in (c)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--depth", type=int, default=3, help="DEPTH_LIMIT")
    args = parser.parse_args(argv)

    common = {
        "CONCURRENT_REQUESTS": 8,
        "DEPTH_LIMIT": args.depth,
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
    }
    addon = {"ADDONS": {"scrapy_dedup.DedupAddon": 0}}
    rng = random.Random(args.seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        spider = Path(tmp) / "trac_spider.py"
        spider.write_text(SPIDER)
        a = crawl(spider, args.url, common)
        b = crawl(spider, args.url, {**common, **addon})
        b0 = crawl(spider, args.url, {**common, **addon, "DEDUP_NEAR_TEMPLATE": False})
        bn = crawl(spider, args.url, {**common, **addon, "DEDUP_LEARN": False})
        store = {**common, **addon, "DEDUP_STORE": f"sqlite:///{tmp}/d.db"}
        feed = Path(tmp) / "items.jsonl"
        runs = []
        total = len(a["items"])
        for _ in range(args.kills):
            runs.append(crawl(spider, args.url, store, feed, rng.randint(20, max(21, total // 3))))
        runs.append(crawl(spider, args.url, store, feed))
        c_items = []
        torn = 0
        for line in feed.read_text().splitlines():
            try:
                c_items.append(json.loads(line))
            except json.JSONDecodeError:
                torn += 1
    elapsed = time.monotonic() - started

    c_requests = sum(r["requests"] for r in runs)
    print(f"Trac at {args.url}, DEPTH_LIMIT {args.depth}, {elapsed:.0f} s in all")
    print(
        f"(c): {' / '.join(str(r['responses']) + ('+kill' if r['killed'] else '') for r in runs)}"
    )
    rows = (
        ("a) plain", a["requests"], a["items"]),
        ("b) add-on, memory", b["requests"], b["items"]),
        ("b0) (b), DEDUP_NEAR_TEMPLATE=False", b0["requests"], b0["items"]),
        ("bn) (b), DEDUP_LEARN=False", bn["requests"], bn["items"]),
        ("c) add-on, SQLite, -o, kill -9", c_requests, c_items),
    )
    print(f"{'config':34} {'fetches':>8} {'/plain':>7} {'items':>6} {'distinct texts':>15}")
    for name, fetches, items in rows:
        distinct = len({normalize(i["text"]) for i in items})
        print(f"{name:34} {fetches:8} {fetches / a['requests']:7.2f} {len(items):6} {distinct:15}")
    c_fetched = set().union(*(r["fetched"] for r in runs))
    for name, items, seen in (
        ("b", b["items"], b["fetched"]),
        ("b0", b0["items"], b0["fetched"]),
        ("bn", bn["items"], bn["fetched"]),
        ("c", c_items, c_fetched),
    ):
        texts = {normalize(i["text"]) for i in items}
        exact = len({normalize(i["text"]) for i in a["items"]} - texts)
        gone = lost(a["items"], items)
        print(f"plain texts not in ({name}): {exact} exactly, {len(gone)} with no near-same text")
        share = shingles_lost(a["items"], items)
        print(f"site shingles in no item of ({name}): {100 * share:.2f}%")
        for item in gone[:5]:
            near, where = closest(item, items)
            how = "fetched, item dropped" if item["url"] in seen else "not fetched"
            if item["url"] in {i["url"] for i in items}:
                how = "kept, its text changed since plain's crawl"  # Trac's "N minutes ago"
            print(f"    {item['url']}  {item['title'][:40]!r} ({how})")
            print(f"        nearest kept ({near:.2f}): {where}")
    dup = Counter(i["url"] for i in c_items)
    dups = {u: n for u, n in dup.items() if n > 1}
    print(f"(c) feed: {len(c_items)} items, {len(dups)} URLs more than once, {torn} torn lines")
    for u, n in list(dups.items())[:5]:
        same = len({normalize(i["text"]) for i in c_items if i["url"] == u}) == 1
        print(f"    {n}x {u} ({'same text' if same else 'texts differ'})")
    learn = b["learn"]
    print(
        f"(b) learned rules: {learn.get('dedup/learn/rules', 0)} adopted, "
        f"{learn.get('dedup/learn/skipped', 0)} requests skipped, "
        f"{learn.get('dedup/learn/refetched', 0)} fetched again"
    )
    for rule in b["rules"]:
        print(f"    {rule}")
    saved = saved_number(b["summary"])
    print(f"(b) summary: {b['summary']}")
    print(
        f"(b) fetches saved (summary) {saved}, plain - (b) fetches {a['requests'] - b['requests']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
