"""Fuzz the URL-rule learner: random sites of real platforms' shapes, random
crawl orders and requests in flight; how many real pages learning loses
(issue 24: "the fuzzer reports the loss rate over >=10,000 random sites and
orders").

Run from the repository root::

    python benches/fuzz_learn.py                      # 10,000 seeds, both cores, ~10-20 min
    python benches/fuzz_learn.py --seeds 500 --jobs 1 # a quick look
    python benches/fuzz_learn.py --seed 4711 -v       # one site again, with what it lost

Each seed draws one site (``RandomSite``) and one crawl of it. A site is one
host with 2-5 sections, each of a platform's shape: a shop (products by id
or slug, category aliases ``/shop/<cat>/x`` = ``/item/x``, attribution
parameters ``?_pos&_sid&_ss``, ``?variant=`` that changes the page on a
minority of products), a blog (``/amp``, ``/print``, ``?utm``-like and
session parameters, ``/m/`` mobile copies), a wiki (case-sensitive page
names: ``/wiki/Foo`` and ``/wiki/foo`` are two pages; ``?oldid=`` names a
revision), a forum (``viewtopic.php?f&t``, where ``f`` does not matter, and
``viewforum.php?f``, where it is the page) and a tracker (``?sort=&order=``
listings whose order is their text). Which differences matter, and for which
share of the pages, is drawn per site: a load-bearing minority (a parameter
that is irrelevant on 90-95% of a template's pages and changes the rest) is
the case the stratified audit and honest evidence are for.

Links are deterministic per page (a "session id" is one of five, a hash of
the linking page), so the site is finite: every URL a plain crawl can reach is
enumerated first (breadth first, without learning), and its real pages (a
page's identity: the section, the id and the values of the differences that
matter for it) are the pages a crawl must fetch. The crawl is simulated as
``benches/bench_learn.py`` does (no network; the dupefilter's check when a
URL is scheduled, ``Learner.observe`` on every fetched page, ``audit`` at
idle), with ``--in-flight`` 1, 8 or 16 requests (drawn per seed): a response
is observed only after up to that many requests were sent, in a random
order. A real page none of whose URLs was fetched is lost.

Printed: seeds, real pages, fetches per real page with and without learning,
the seeds where learning fetched more than without, seeds that lost a page,
pages lost, and the first seeds that lost one (run them again with
``--seed N -v``).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_dedup.learn import Learner, page_digest
from scrapy_dedup.url import URLCanonicalizer

HOST = "fuzz.test"
WORDS = tuple(
    [
        "river",
        "stone",
        "lamp",
        "garden",
        "copper",
        "north",
        "window",
        "paper",
        "silver",
        "orange",
        "basket",
        "mountain",
        "engine",
        "harbor",
        "violet",
        "candle",
        "meadow",
        "pocket",
        "ribbon",
        "tunnel",
        "marble",
        "falcon",
        "lemon",
        "ladder",
        "canvas",
        "thunder",
        "pepper",
        "island",
        "velvet",
        "anchor",
    ]
)


def _h(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


def _text(identity: tuple[object, ...]) -> str:
    """About 60 words of its own: well over the learner's 200 characters."""
    seed = _h(identity)
    return " ".join(WORDS[(seed >> (i % 50)) % len(WORDS)] + str(i % 7) for i in range(60))


@dataclass
class Section:
    """One template of the site and the differences its URLs can carry."""

    kind: str
    name: str
    ids: list[str]
    # difference -> share of the pages for which it changes the page (0: a copy
    # everywhere, 1: a page of its own everywhere)
    matters: dict[str, float] = field(default_factory=dict)


@dataclass
class Page:
    section: Section
    ident: str
    variant: tuple[tuple[str, str], ...] = ()  # the differences this URL carries


class RandomSite:
    """A random site: sections of real platforms' shapes; see the module."""

    def __init__(self, rng: random.Random) -> None:
        self.sections: list[Section] = []
        for n in range(rng.randint(2, 5)):
            kind = rng.choice(("shop", "blog", "wiki", "forum", "tracker"))
            self.sections.append(_SHAPES[kind](rng, f"{kind}{n}"))
        self.link_share = rng.choice((0.3, 0.6, 0.9))  # links that carry a difference
        self.fanout = rng.randint(3, 8)
        self.hub = rng.random() < 0.5  # the home page links every variant of some pages

    # -- URLs --

    def url(self, page: Page) -> str:
        s, ident, v = page.section, page.ident, dict(page.variant)
        if s.kind == "forum":
            script = "viewforum.php" if ident.startswith("f") else "viewtopic.php"
            query = f"f={v.get('f', '1')}" + ("" if script == "viewforum.php" else f"&t={ident}")
            query = f"f={ident[1:]}" if script == "viewforum.php" else query
            return self._finish(f"/{s.name}/{script}", query, v)
        path = f"/{s.name}/{v.get('case', ident)}"
        if "cat" in v:
            path = f"/{s.name}/{v['cat']}/{ident}"
        if "mobile" in v:
            path = "/m" + path
        if "suffix" in v:
            path += "/" + v["suffix"]
        return self._finish(path, "", v)

    @staticmethod
    def _finish(path: str, query: str, v: dict[str, str]) -> str:
        params = [query] if query else []
        for name in ("sid", "oldid", "variant", "sort", "view"):
            if name in v:
                params.append(f"{name}={v[name]}")
        if "attr" in v:
            params.append(f"_pos={v['attr'][0]}&_sid={v['attr']}&_ss=r")
        return f"http://{HOST}{path}" + ("?" + "&".join(params) if params else "")

    # -- what a page is --

    def identity(self, page: Page) -> tuple[object, ...]:
        """The real page behind a URL: differences that matter for it count."""
        s = page.section
        kept = []
        for name, value in page.variant:
            share = s.matters.get(name, 0.0)
            if share and (_h(s.name, page.ident, name) % 1000) < share * 1000:
                kept.append((name, value))
        if s.kind == "forum" and page.ident.startswith("f"):
            kept = [kv for kv in kept if kv[0] != "f"]  # the forum id is the ident
        return (s.name, page.ident, tuple(sorted(kept)))

    def html(self, page: Page, rng_links: random.Random) -> tuple[str, list[str]]:
        identity = self.identity(page)
        links = [self.url(p) for p in self._links(page, rng_links)]
        body = _text(identity)
        anchors = "".join(f'<a href="{u}">x</a>' for u in links)
        return f"<html><body><nav>{anchors}</nav><main>{body}</main></body></html>", links

    def _links(self, page: Page, rng: random.Random) -> list[Page]:
        out = []
        sections = self.sections
        for _ in range(self.fanout):
            s = rng.choice(sections)
            target = Page(s, rng.choice(s.ids))
            if rng.random() < self.link_share:
                target = self._vary(target, rng, page)
            out.append(target)
        return out

    def _vary(self, target: Page, rng: random.Random, source: Page) -> Page:
        s = target.section
        name = rng.choice(list(s.matters))
        # A session id per linking page (five in all: the site stays finite).
        session = f"{_h(source.section.name, source.ident) % 5 + 0xA1:x}"
        value = {
            "sid": session,
            "attr": str(rng.randint(1, 9)) + session,
            "oldid": str(rng.randint(100, 104)),
            "variant": str(rng.randint(1, 3)),
            "sort": rng.choice(("asc", "desc")),
            "view": "print",
            "suffix": rng.choice(("amp", "print")),
            "mobile": "1",
            "cat": rng.choice(("tools", "garden", "sale")),
            "case": target.ident.capitalize(),
            "f": str(rng.randint(1, 6)),
        }[name]
        if name == "case" and value == target.ident:
            return target
        return Page(s, target.ident, ((name, value),))

    def home(self) -> tuple[str, list[str]]:
        rng = random.Random(_h("home"))
        links = []
        for s in self.sections:
            for ident in s.ids:
                links.append(self.url(Page(s, ident)) if rng.random() < 0.3 else None)
                if self.hub:
                    links += [self.url(self._vary(Page(s, ident), rng, Page(s, "home")))]
        found = [u for u in links if u]
        anchors = "".join(f'<a href="{u}">x</a>' for u in found)
        return (
            f"<html><body><nav>{anchors}</nav><main>{_text(('home',))}</main></body></html>",
            found,
        )


def _shop(rng: random.Random, name: str) -> Section:
    ids = [f"p{n}" if rng.random() < 0.5 else f"blue-thing-{n}" for n in range(rng.randint(8, 30))]
    return Section(
        "shop",
        name,
        ids,
        {"attr": 0.0, "cat": 0.0, "variant": rng.choice((0.0, 0.05, 0.1, 1.0)), "sid": 0.0},
    )


def _blog(rng: random.Random, name: str) -> Section:
    ids = [f"2024-post-{n}" for n in range(rng.randint(8, 30))]
    # Sometimes the print view is another page (a "printable summary").
    return Section(
        "blog",
        name,
        ids,
        {"suffix": rng.choice((0.0, 0.0, 1.0)), "sid": 0.0, "mobile": 0.0, "view": 0.0},
    )


def _wiki(rng: random.Random, name: str) -> Section:
    ids = [f"page{n}" for n in range(rng.randint(8, 30))]
    # Case-sensitive names (MediaWiki) or not; ?oldid names a revision, which
    # is the current text for most pages (one revision) and not for the rest.
    return Section(
        "wiki", name, ids, {"case": rng.choice((0.0, 1.0)), "oldid": rng.choice((0.1, 0.3, 1.0))}
    )


def _forum(rng: random.Random, name: str) -> Section:
    topics = [f"{n}" for n in range(rng.randint(8, 30))]
    forums = [f"f{n}" for n in range(1, rng.randint(3, 7))]
    return Section("forum", name, topics + forums, {"f": 0.0, "sid": 0.0})


def _tracker(rng: random.Random, name: str) -> Section:
    ids = [f"{n}" for n in range(rng.randint(8, 30))]
    # ?sort: the listing's order is its text for the report pages (a share).
    return Section("tracker", name, ids, {"sort": rng.choice((0.1, 0.5, 1.0)), "sid": 0.0})


_SHAPES: dict[str, Callable[[random.Random, str], Section]] = {
    "shop": _shop,
    "blog": _blog,
    "wiki": _wiki,
    "forum": _forum,
    "tracker": _tracker,
}


class Served:
    """The site as a server: URL -> (real page, HTML, links), memoized."""

    def __init__(self, site: RandomSite) -> None:
        self.site = site
        self.by_url: dict[str, Page] = {}
        self.cache: dict[str, tuple[tuple[object, ...], str, list[str]]] = {}

    def get(self, url: str) -> tuple[tuple[object, ...], str, list[str]]:
        found = self.cache.get(url)
        if found is None:
            if url == f"http://{HOST}/":
                html, links = self.site.home()
                found = (("home",), html, links)
            else:
                page = self.by_url[url]
                # Links are the page's, whatever URL it was reached by (a
                # copy links what its page links).
                html, links = self.site.html(page, self._rng(page))
                found = (self.site.identity(page), html, links)
            self.cache[url] = found
        return found

    def index(self) -> None:
        for s in self.site.sections:
            for ident in s.ids:
                self._add(Page(s, ident))

    def _add(self, page: Page) -> None:
        self.by_url.setdefault(self.site.url(page), page)

    def learn_links(self, url: str) -> None:
        """Record the pages behind a page's links (they are drawn, not parsed)."""
        page = self.by_url.get(url)
        if page is None:  # the home page
            rng = random.Random(_h("home"))
            for s in self.site.sections:
                for ident in s.ids:
                    rng.random()
                    self._add(Page(s, ident))
                    if self.site.hub:
                        self._add(self.site._vary(Page(s, ident), rng, Page(s, "home")))
            return
        for target in self.site._links(page, self._rng(page)):
            self._add(target)

    def _rng(self, page: Page) -> random.Random:
        return random.Random(_h(self.site.identity(page)))


def reachable(served: Served) -> tuple[set[tuple[object, ...]], int]:
    """The real pages a plain crawl reaches, and its fetches (one per canonical URL)."""
    canon = URLCanonicalizer()
    start = f"http://{HOST}/"
    seen, queue, pages = {canon.canonicalize(start)}, [start], set()
    while queue:
        url = queue.pop()
        served.learn_links(url)
        identity, _, links = served.get(url)
        pages.add(identity)
        for link in links:
            key = canon.canonicalize(link)
            if key not in seen:
                seen.add(key)
                queue.append(link)
    return pages, len(seen)


def crawl(
    served: Served, rng: random.Random, in_flight: int, defer: bool = True
) -> tuple[set[object], int]:
    """A learning crawl: the real pages it fetched, and its fetches. As the
    Scrapy glue does: a new request is checked when it is scheduled and
    again when it leaves the queue (LearnedRulesMiddleware); one handed back
    (a failed rule, a decided wait, the end) is fetched without a check."""
    canon = URLCanonicalizer()
    learner = Learner(min_support=3, sample=0.05, defer=defer)
    start = f"http://{HOST}/"
    seen = {canon.canonicalize(start)}
    queue: list[tuple[str, bool]] = [(start, False)]
    flying: list[str] = []
    fetched: set[object] = set()
    fetches = 0
    checking: set[str] = set()  # fetched to check a rule, or as evidence: not checked again

    def skipped(url: str) -> bool:
        key = canon.canonicalize(url)
        if url in checking:
            return False
        skip = learner.check(key)
        if skip is not None:
            if skip.sample:
                checking.add(url)
                return False
            learner.keep(skip, url)
            return True
        waited = learner.wait(key, url)
        if waited is True:
            checking.add(url)
        return waited not in (None, True)

    def schedule(url: str, again: bool = False) -> None:
        if not again:
            key = canon.canonicalize(url)
            if key in seen:
                return
            seen.add(key)
            if skipped(url):
                return
        queue.append((url, not again))

    while True:
        while queue and len(flying) < in_flight:
            url, check = queue.pop(rng.randrange(len(queue)) if rng.random() < 0.5 else -1)
            if not (check and skipped(url)):
                flying.append(url)
        if not flying:
            if queue:
                continue
            queue += [(u, False) for u in learner.undefer()]
            if not queue:
                queue += [(u, False) for u in learner.audit()]
            if not queue:
                break
            continue
        url = flying.pop(rng.randrange(len(flying)))
        fetches += 1
        served.learn_links(url)
        identity, html, links = served.get(url)
        fetched.add(identity)
        for again in learner.observe(canon.canonicalize(url), *page_digest(html)):
            schedule(again, again=True)
        for again in learner.fetch_held():
            schedule(again, again=True)
        for link in links:
            schedule(link)
    return fetched, fetches


DEFER = True


def run(seed: int) -> tuple[int, int, int, int, list[str], int]:
    """(real pages, plain fetches, learning fetches, pages lost, what was
    lost, requests in flight)."""
    rng = random.Random(seed)
    site = RandomSite(rng)
    served = Served(site)
    served.index()
    real, plain = reachable(served)
    in_flight = rng.choice((1, 8, 16))
    fetched, fetches = crawl(served, rng, in_flight, DEFER)
    lost = sorted(str(p) for p in real - fetched)
    return len(real), plain, fetches, len(lost), lost, in_flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10_000)
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, help="one seed only (with -v: what it lost)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("-v", action="store_true")
    parser.add_argument("--no-defer", action="store_true", help="requests never wait")
    args = parser.parse_args()
    global DEFER
    DEFER = not args.no_defer
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    begun = time.perf_counter()
    if args.jobs > 1 and len(seeds) > 1:
        with Pool(args.jobs) as pool:
            results = pool.map(run, seeds, chunksize=50)
    else:
        results = [run(seed) for seed in seeds]
    real = sum(r[0] for r in results)
    plain = sum(r[1] for r in results)
    learned = sum(r[2] for r in results)
    losing = [(seed, r) for seed, r in zip(seeds, results, strict=True) if r[3]]
    print(
        f"{len(results):,} seeds in {time.perf_counter() - begun:.0f} s; {real:,} real pages; "
        f"fetches per real page: {plain / real:.2f} plain (add-on URL stage), "
        f"{learned / real:.2f} learning ({learned / plain:.3f}x)"
    )
    print(
        f"seeds that lost a page: {len(losing)} ({len(losing) / len(results):.3%}); "
        f"pages lost: {sum(r[3] for _, r in losing)} of {real:,}"
    )
    # Issue 24: "never more fetches than the add-on without learning".
    worse = [r[2] - r[1] for r in results if r[2] > r[1]]
    print(
        f"seeds where learning fetched more than without: {len(worse)} "
        f"({len(worse) / len(results):.2%}), by {sum(worse)} fetches in all, "
        f"at most {max(worse, default=0)}"
    )
    for in_flight in (1, 8, 16):
        some = [r for r in results if r[5] == in_flight]
        real_some = sum(r[0] for r in some) or 1
        print(
            f"  {in_flight:2d} in flight: {len(some):,} seeds, fetches per real page "
            f"{sum(r[1] for r in some) / real_some:.2f} plain, "
            f"{sum(r[2] for r in some) / real_some:.2f} learning; "
            f"pages lost {sum(r[3] for r in some)}"
        )
    for seed, r in losing[:10]:
        print(f"  seed {seed}: lost {r[3]} of {r[0]}" + (f": {r[4][:5]}" if args.v else ""))


if __name__ == "__main__":
    main()
