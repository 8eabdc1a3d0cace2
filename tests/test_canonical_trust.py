"""CanonicalTrust (scrapy_dedup.learn.trust): a host's rel=canonical
declarations are trusted to skip the declared page only once declared pages,
fetched, had the declaring page's text and no link it lacks."""

from __future__ import annotations

from typing import Any

from scrapy_dedup.learn import CanonicalTrust, links_filter, page_links

NAV = {"https://shop.test/", "https://shop.test/cart"}


def _verify(trust: CanonicalTrust, n: int, target_links: set[str], page_links: set[str]) -> None:
    target = f"https://shop.test/p/{n}"
    trust.declare(target, 100 + n, f"{target}?utm_source=x", links=links_filter(page_links))
    within = trust.links_within(target, target_links)
    assert trust.observe(target, 100 + n, within) == []


def test_a_host_is_trusted_once_declared_pages_have_the_text_and_links() -> None:
    trust = CanonicalTrust(min_support=3, sample=0.0)
    for n in range(3):
        assert not trust.trusted("shop.test")
        _verify(trust, n, NAV, NAV | {"https://shop.test/extra"})
    assert trust.trusted("shop.test")
    assert trust.declare("https://shop.test/p/9", 1, "https://shop.test/p/9?x", links=0)


def test_a_declared_page_with_a_link_the_declaring_page_lacks_ends_the_trust() -> None:
    trust = CanonicalTrust(min_support=3, sample=0.0)
    for n in range(3):
        _verify(trust, n, NAV, NAV)
    assert trust.declare("https://shop.test/p/7", 107, "https://shop.test/p/7/print", links=0)
    # A print view (no links) declared /p/8, skipped on trust too; /p/8,
    # fetched all the same (linked from elsewhere), has its text and a link.
    assert trust.declare("https://shop.test/p/8", 108, "https://shop.test/p/8/print", links=0)
    within = trust.links_within("https://shop.test/p/8", {"https://shop.test/p/9"})
    assert within is False
    skipped = trust.observe("https://shop.test/p/8", 108, within)
    assert skipped == ["https://shop.test/p/7", "https://shop.test/p/8"]
    assert not trust.trusted("shop.test")


def test_links_not_known_verify_nothing_and_another_text_still_revokes() -> None:
    trust = CanonicalTrust(min_support=1, sample=0.0)
    trust.declare("https://shop.test/p/1", 1, "https://shop.test/p/1?x")  # links not known
    assert trust.links_within("https://shop.test/p/1", NAV) is None
    trust.observe("https://shop.test/p/1", 1, None)
    assert not trust.trusted("shop.test")
    trust.declare("https://shop.test/p/2", 2, "https://shop.test/p/2?x")
    trust.observe("https://shop.test/p/2", 3, None)
    assert not trust.trusted("shop.test")
    assert trust.hosts["shop.test"].revoked


def test_page_links_resolve_and_drop_fragments() -> None:
    html = (
        "<a href='/a#top'>a</a><area shape=rect HREF=b.html>"
        '<a class="x" href="https://other.test/?q=1&amp;r=2">o</a><a name="no-href">n</a>'
    )
    assert page_links(html, "https://shop.test/dir/page") == {
        "https://shop.test/a",
        "https://shop.test/dir/b.html",
        "https://other.test/?q=1&r=2",
    }


def test_what_an_earlier_run_skipped_is_due_when_the_trust_ends_unless_it_was_fetched() -> None:
    trust = CanonicalTrust(min_support=3, sample=0.0)
    for n in range(3):
        _verify(trust, n, NAV, NAV)
    # Replayed from the store's log: an earlier run skipped /p/20-/p/22 on
    # trust; /p/22 was fetched all the same later (a fetch of it is known).
    for n in (20, 21, 22):
        trust.skipped_earlier(f"https://shop.test/p/{n}", f"https://shop.test/p/{n}?ref=a")
    trust.observe("https://shop.test/p/22", 5)
    assert trust.take_due() == []  # trusted still: nothing is due
    # This run skips /p/8 on trust; fetched all the same, it has another
    # text: the trust ends, and observe() gives back this run's own skips.
    assert trust.declare("https://shop.test/p/8", 108, "https://shop.test/p/8/print", links=0)
    assert trust.observe("https://shop.test/p/8", 999, False) == ["https://shop.test/p/8"]
    # An earlier skip read after the trust ended is due as well; a fetch of
    # /p/21 before it is taken means it is not owed any more.
    trust.skipped_earlier("https://shop.test/p/30", "https://shop.test/p/30")
    trust.observe("https://shop.test/p/21", 5)
    assert trust.take_due() == ["https://shop.test/p/20?ref=a", "https://shop.test/p/30"]
    assert trust.take_due() == []


def test_a_declaration_read_after_its_target_was_fetched_checks_its_text() -> None:
    trust = CanonicalTrust(min_support=3, sample=0.0)
    for n in range(3):
        _verify(trust, n, NAV, NAV)
    # /p/8 was fetched before any page declared it; then its teaser declares
    # it, with another text: the host is not trusted any more, and what was
    # skipped on its trust is due.
    assert trust.declare("https://shop.test/p/7", 107, "https://shop.test/p/7/teaser", links=0)
    trust.observe("https://shop.test/p/8", 108, None)
    assert trust.trusted("shop.test")
    assert not trust.declare("https://shop.test/p/8", 1, "https://shop.test/p/8/teaser", links=0)
    assert not trust.trusted("shop.test")
    assert trust.take_due() == ["https://shop.test/p/7"]
    # The same text verifies nothing (its links were not compared).
    other = CanonicalTrust(min_support=1, sample=0.0)
    other.observe("https://shop.test/p/8", 108, None)
    other.record("https://shop.test/p/8", 108, "https://shop.test/p/8?x", links=0)
    assert not other.trusted("shop.test") and not other.hosts["shop.test"].revoked


def test_workers_of_one_log_count_their_own_declarations_in_its_order() -> None:
    # Worker B fetched /p/8 (its record is in the shared log) before worker A
    # declared /p/8 from a teaser, and before A read that record. Each worker
    # applies the log in its order, its own declarations included, so both
    # find the teaser wrong: neither keeps trusting the host alone.
    log: list[tuple[str, tuple[Any, ...]]] = []
    workers = [CanonicalTrust(min_support=3, sample=0.0) for _ in range(2)]
    a, b = workers
    for n in range(3):
        target = f"https://shop.test/p/{n}"
        log.append(("c", (target, 100 + n, f"{target}?x", links_filter(NAV))))
        log.append(("o", (target, 100 + n, True)))
    read = [0, 0]

    def catch_up(i: int) -> None:
        for kind, args in log[read[i] :]:
            if kind == "c":
                workers[i].record(*args)
            else:
                workers[i].observe(*args)
        read[i] = len(log)

    catch_up(0)
    catch_up(1)
    assert a.trusted("shop.test") and b.trusted("shop.test")
    log.append(("o", ("https://shop.test/p/8", 108, None)))  # B's fetch
    catch_up(1)
    teaser = ("https://shop.test/p/8", 1, "https://shop.test/p/8/teaser", "", 0)
    a.declare(*teaser, record=False)  # A has not read B's fetch yet
    log.append(("c", (*teaser[:3], 0)))
    catch_up(0)
    catch_up(1)
    assert not a.trusted("shop.test") and not b.trusted("shop.test")
    assert a.hosts["shop.test"].revoked and b.hosts["shop.test"].revoked


def test_a_page_to_fetch_again_that_scrapy_refuses_does_not_stop_the_others(caplog: Any) -> None:
    # A target skipped on trust by a run whose w3lib took its URL (2.5 took
    # "https://exa mple.com/", 2.6 refuses it): when the trust ends, the
    # others are still fetched again, and the refused one is said and
    # counted. A URL without a scheme stands for it: every version refuses it.
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.state import CrawlState
    from scrapy_dedup.trust import CanonicalTrustCheck

    crawler = get_crawler(settings_dict={"DEDUP_STORE": "memory"})
    check = CanonicalTrustCheck(crawler, CrawlState.of(crawler))
    targets = ["https://shop.test/p/1", "shop.test/p/2", "https://shop.test/p/3"]
    with caplog.at_level("WARNING", logger="scrapy_dedup.trust"):
        requests = check._requests(targets)
    check._stats.flush()
    assert [r.url for r in requests] == [targets[0], targets[2]]
    assert crawler.stats.get_value("dedup/canonical/refetch_refused") == 1
    assert "Cannot fetch shop.test/p/2 again" in caplog.text
