"""The crawl state when components are used outside a running crawl (scripts, tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from scrapy import Request
from scrapy.utils.defer import deferred_f_from_coro_f
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from scrapy_dedup import CanonicalDupeFilter, ContentDedupPipeline
from scrapy_dedup.state import CrawlState

TEXT = " ".join(f"word{i} of a text long enough to be fingerprinted" for i in range(20))


def count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as db:
        found = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    db.close()
    return int(found)


def test_a_due_batch_is_committed_at_once_outside_a_crawl(tmp_path: Path) -> None:
    crawler = get_crawler(settings_dict={"JOBDIR": str(tmp_path)})
    df = build_from_crawler(CanonicalDupeFilter, crawler)
    for i in range(2500):
        assert not df.request_seen(Request(f"https://example.com/p{i}"))
    # No reactor turn will come: the batch of 2,000 was written when it was due.
    assert count(tmp_path / "dedup.sqlite3", "urls") >= 2000
    df.close("finished")
    assert count(tmp_path / "dedup.sqlite3", "urls") == 2500


@deferred_f_from_coro_f
async def test_the_last_component_to_leave_closes_the_store(tmp_path: Path) -> None:
    db = tmp_path / "dedup.db"
    crawler = get_crawler(settings_dict={"DEDUP_STORE": f"sqlite:///{db}"})
    df = build_from_crawler(CanonicalDupeFilter, crawler)
    pipeline = build_from_crawler(ContentDedupPipeline, crawler)
    pipeline.open_spider()
    df.close("finished")  # the pipeline still uses the store
    item = {"url": "https://example.com/a", "text": TEXT}
    assert await pipeline.process_item(item) is item
    pipeline._item_done(item)  # as at item_scraped: its text may now be written
    state = CrawlState.of(crawler)
    assert not state.closed
    pipeline.close_spider()
    assert state.closed
    assert count(db, "content") == 1
    # The namespace is free again: a later run in this process can open it.
    again = build_from_crawler(
        CanonicalDupeFilter, get_crawler(settings_dict={"DEDUP_STORE": f"sqlite:///{db}"})
    )
    again.close("finished")
