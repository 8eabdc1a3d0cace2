"""Requests that wait for a learned rule to be decided (scrapy_dedup.learn.defer,
no Scrapy): a page's variants linked before any evidence wait while a few of
them are fetched as evidence; adopted, the rest are skipped; refuted, they
are fetched; what still waits at the end is fetched, plainest first."""

from __future__ import annotations

from scrapy_dedup.learn import Held, Learner, page_digest
from scrapy_dedup.learn.defer import PROBES

TEXT = "a page of text long enough to count as evidence for a learned rule " * 5


def _digest(name: str) -> tuple[int, int]:
    return page_digest(f"<main>{name} {TEXT}</main>")


class Crawl:
    """The learner driven as the Scrapy glue does: every link is scheduled
    (checked, then waits or is queued), the queue is fetched in order."""

    def __init__(self, texts: dict[str, str], **kwargs: object) -> None:
        self.learner = Learner(sample=0.0, **kwargs)  # type: ignore[arg-type]
        self.texts = texts  # URL -> the name of its real page's text
        self.queue: list[str] = []
        self.fetched: list[str] = []
        self.held: list[str] = []

    def schedule(self, *urls: str) -> None:
        for url in urls:
            skip = self.learner.check(url)
            if skip is not None and not skip.sample:
                self.learner.keep(skip, url)
                continue
            waited = self.learner.wait(url, url) if skip is None else None
            if isinstance(waited, Held):
                self.held.append(url)
            else:
                self.queue.append(url)

    def run(self) -> None:
        while True:
            while self.queue:
                url = self.queue.pop(0)
                self.fetched.append(url)
                self.queue += self.learner.observe(url, *_digest(self.texts[url]))
                self.queue += self.learner.fetch_held()
            self.queue += self.learner.undefer() or self.learner.audit()
            if not self.queue:
                return


def _shop(pages: int, sid_matters: bool = False) -> tuple[list[str], dict[str, str]]:
    """Every product and its ?sid variant, all linked from the first page."""
    links, texts = [], {}
    for n in range(pages):
        plain, variant = f"https://s.test/p/{n}", f"https://s.test/p/{n}?sid=ab{n}"
        links += [plain, variant]
        texts[plain] = f"product {n}"
        texts[variant] = f"product {n} for session" if sid_matters else f"product {n}"
    return links, texts


def test_variants_linked_before_any_evidence_wait_and_are_then_skipped() -> None:
    links, texts = _shop(100)
    crawl = Crawl(texts)
    crawl.schedule(*links)
    # Every variant waits; once its page is fetched, a few are fetched as
    # the evidence (after their page: its item, the plain one, comes first).
    assert len(crawl.held) == crawl.learner.held == 100
    crawl.run()
    for n in range(PROBES):
        assert crawl.fetched.index(f"https://s.test/p/{n}?sid=ab{n}") > crawl.fetched.index(
            f"https://s.test/p/{n}"
        )
    fetched = set(crawl.fetched)
    assert {f"https://s.test/p/{n}" for n in range(100)} <= fetched  # every real page
    variants = [url for url in crawl.fetched if "sid" in url]
    # The probes, and the audit's one per page up to 59 pages: never all 100.
    assert len(variants) <= PROBES + 59
    rule = next(r for r in crawl.learner.rules() if r.spec == "?sid does not matter")
    assert rule.state == "adopted" and rule.skipped >= 100 - PROBES - 59


def test_a_refuted_rule_fetches_everything_that_waited_for_it() -> None:
    links, texts = _shop(30, sid_matters=True)
    crawl = Crawl(texts)
    crawl.schedule(*links)
    assert crawl.held
    crawl.run()
    assert sorted(crawl.fetched) == sorted(links)  # each exactly once: nothing lost
    assert crawl.learner.held == 0 and crawl.learner.kept == 0


def test_a_variant_queued_after_its_plain_url_waits_for_it() -> None:
    links, texts = _shop(10)
    texts |= {
        "https://s.test/p/x?sid=1": "x",
        "https://s.test/p/x": "x",
        "https://s.test/p/x?sid=2": "x",
    }
    crawl = Crawl(texts)
    crawl.schedule(*links)
    crawl.run()  # ?sid is adopted
    crawl.held.clear()
    # Queued before its plain URL, a variant is fetched (it may be the only
    # URL of its page); queued after it, it waits for that page, then is skipped.
    crawl.schedule("https://s.test/p/x?sid=1", "https://s.test/p/x", "https://s.test/p/x?sid=2")
    assert crawl.held == ["https://s.test/p/x?sid=2"]
    crawl.run()
    assert "https://s.test/p/x" in crawl.fetched
    assert "https://s.test/p/x?sid=2" not in crawl.fetched
    assert crawl.learner.held == 0


def test_a_different_page_under_a_longer_url_is_not_held_for_long() -> None:
    # /list?page=N is another page than /list: the first probe refutes the
    # candidate, and every page that waited is fetched before the end.
    texts = {"https://s.test/list": "page 1"}
    texts |= {f"https://s.test/list?page={n}": f"page {n}" for n in range(2, 20)}
    crawl = Crawl(texts)
    crawl.schedule(*texts)
    crawl.run()
    assert sorted(crawl.fetched) == sorted(texts)
    assert not [r for r in crawl.learner.rules() if r.state == "adopted"]


def test_without_defer_nothing_waits() -> None:
    links, texts = _shop(20)
    crawl = Crawl(texts, defer=False)
    crawl.schedule(*links)
    assert crawl.held == [] and len(crawl.queue) == 40
