"""Learned URL rules on a generated messy site of 10k+ pages: fetches per real
page and real pages lost, learning on against off (the anchor), and the
learner's CPU per request (issue 13).

Run from the repository root::

    python benches/bench_learn.py                 # 3,000 products: ~10k real pages, ~1 minute
    python benches/bench_learn.py --products 300 --orders 200   # many crawl orders, small site

The crawl is simulated in this process, with no network: a frontier of
requests taken in a random order (a seed per run: Scrapy's order depends on
timing), each new URL checked as the dupefilter checks it when it is
scheduled (canonical URL key seen? learned rule makes it a copy?), every
fetched page observed as ``LearnedRules`` observes a response (visible text
digest of its main region), and the last check when the frontier runs dry
(``Learner.audit``, as at ``spider_idle``). The site is ``tests/messy_site.py`` (shop.test,
news.test, wiki.test), which knows the real page behind every URL, so a
lost page (reachable, never fetched, not even after a rule failed and its
skipped requests came back) is counted exactly. CPU: the time spent in the
learner (check, keep, observe and the digest) per request, against the time
of the same simulated crawl without it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_dedup.learn import Learner, page_digest
from scrapy_dedup.url import URLCanonicalizer
from tests.messy_site import MessySite

HOSTS = ("shop.test", "news.test", "wiki.test")


def simulate(
    model: MessySite, *, learn: bool, seed: int, sample: float = 0.05, min_support: int = 3
) -> dict[str, float]:
    rng = random.Random(seed)
    canonicalizer = URLCanonicalizer()
    learner = Learner(min_support=min_support, sample=sample)
    seen: set[str] = set()
    frontier = [f"http://{host}/" for host in HOSTS]
    fetched_pages: set[str] = set()
    fetches = 0
    spent = 0.0
    skipped = 0

    def schedule(url: str, refetch: bool = False) -> None:
        nonlocal spent, skipped
        key = canonicalizer.canonicalize(url)
        if not refetch:
            if key in seen:
                return
            seen.add(key)
            if learn:
                start = time.perf_counter()
                skip = learner.check(key)
                if skip is not None and not skip.sample:
                    learner.keep(skip, url)
                    skipped += 1
                    spent += time.perf_counter() - start
                    return
                spent += time.perf_counter() - start
        frontier.append(url)

    start_all = time.perf_counter()
    while True:
        if not frontier:  # idle: the last check of what the rules skipped
            frontier += learner.audit() if learn else []
            if not frontier:
                break
        url = frontier.pop(rng.randrange(len(frontier)) if rng.random() < 0.5 else -1)
        parts = urlsplit(url)
        host = parts.hostname or ""
        reply = model.reply(host, parts.path, parts.query)
        fetches += 1
        if reply is None:
            continue
        fetched_pages.add(model.page_id(host, parts.path, parts.query) or "")
        if learn:
            start = time.perf_counter()
            digest, length = page_digest(reply.body)
            released = learner.observe(canonicalizer.canonicalize(url), digest, length)
            spent += time.perf_counter() - start
            for again in released:
                schedule(again, refetch=True)
        for href in _links(reply.body):
            schedule(urljoin(url, href))
    total = time.perf_counter() - start_all
    real, _ = model.reachable([f"http://{host}/" for host in HOSTS])
    lost = real - fetched_pages
    return {
        "fetches": fetches,
        "real": len(real),
        "lost": len(lost),
        "lost_pages": sorted(lost)[:5],  # type: ignore[dict-item]
        "learner_s": spent,
        "total_s": total,
        "requests": len(seen),
        "rules": sum(rule.state == "adopted" for rule in learner.rules()),
        "learner": learner,  # type: ignore[dict-item]
    }


def _links(html: str) -> list[str]:
    found = []
    start = 0
    while (at := html.find('href="', start)) >= 0:
        end = html.find('"', at + 6)
        found.append(html[at + 6 : end])
        start = end
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=3000)
    parser.add_argument("--stories", type=int, default=None)
    parser.add_argument("--orders", type=int, default=3, help="crawl orders (seeds) per setting")
    parser.add_argument("--late-trap", action="store_true")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    stories = args.stories if args.stories is not None else args.products // 3
    model = MessySite(products=args.products, stories=stories, late_trap=args.late_trap)
    print(f"messy site: {args.products} products, {stories} stories and wiki pages")
    worst_lost = 0
    ratios = []
    off_ratios = []
    for seed in range(args.orders):
        off = simulate(model, learn=False, seed=seed)
        on = simulate(model, learn=True, seed=seed)
        worst_lost = max(worst_lost, int(on["lost"]))
        ratios.append(on["fetches"] / on["real"])
        off_ratios.append(off["fetches"] / off["real"])
        per_request = on["learner_s"] / on["requests"] * 1e6
        base = off["total_s"] / off["requests"] * 1e6
        if args.orders <= 5 or on["lost"]:
            print(
                f"order {seed}: {int(on['real']):,} real pages; fetches per real page "
                f"{off['fetches'] / off['real']:.2f} off, {on['fetches'] / on['real']:.2f} on "
                f"({on['fetches'] / off['fetches']:.2f}x); lost {on['lost']} {on['lost_pages']}; "
                f"{on['rules']} rules; learner {per_request:.1f} us per request "
                f"(the simulated crawl without it: {base:.1f} us)"
            )
    print(
        f"{args.orders} orders: fetches per real page {min(ratios):.2f}-{max(ratios):.2f} "
        f"with learning; real pages lost, worst order: {worst_lost}"
    )
    if args.json:
        from _results import Results

        results = Results("bench_learn", sys.argv[1:])
        results.add(
            f"simulated crawl: fetches per real page, learning vs off ({args.orders} orders)",
            sum(ratios) / len(ratios),
            sum(off_ratios) / len(off_ratios),
        )
        results.add(
            "simulated crawl: real pages lost, worst order", worst_lost, target="ours == 0"
        )
        results.write(args.json)


if __name__ == "__main__":
    main()
