"""`scrapy crawl -o items.jsonl`, killed with kill -9 several times and run
again to the end: every real page gives exactly one item across the feeds of
all runs. A page counts as kept for later runs only once its items are on
disk in every feed (scrapy_dedup.durable)."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

from tests.conftest import crawl
from tests.crawl_worker import NewsSpider
from tests.site import Site, article, store_stage_routes
from tests.test_persistence import HOME_TEXT, FeedWatch, _kill_after, _written_again
from tests.test_store_crawls import ROOT, _path

GZIP = "scrapy.extensions.postprocessing.GzipPlugin"
SETTINGS = """
SPIDER_MODULES = ["tests.crawl_worker"]
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
RETRY_ENABLED = False
LOG_LEVEL = "INFO"
CONCURRENT_REQUESTS = 2
ADDONS = {{"scrapy_dedup.DedupAddon": 100}}
DEDUP_STORE = "sqlite:///{db}"
"""


def _project(tmp_path: Path, **extra: Any) -> Path:
    """A Scrapy project whose spider is tests.crawl_worker.NewsSpider."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "scrapy.cfg").write_text("[settings]\ndefault = feedproj\n")
    text = SETTINGS.format(db=tmp_path / "dedup.db")
    text += "".join(f"{name} = {value!r}\n" for name, value in extra.items())
    (project / "feedproj.py").write_text(text)
    return project


def _scrapy_crawl(project: Path, start: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPY_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-m", "scrapy", "crawl", "news", "-a", f"start={start}", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _complete_lines(path: Path) -> list[dict[str, Any]]:
    """The items of a JSON lines feed; after kill -9 its last line may be cut."""
    items = []
    for line in path.read_bytes().split(b"\n"):
        try:
            items.append(json.loads(line))
        except ValueError:
            assert line == path.read_bytes().split(b"\n")[-1], f"a broken line inside {path}"
    return items


def _news(site: Site, delay: float) -> tuple[Site, dict[str, str]]:
    routes, content = store_stage_routes(delay=delay)
    site.routes.update(routes)
    site.routes["/"] = lambda q: article(
        "Home", HOME_TEXT, "/list/1", "/list/1?utm_medium=home", "/article/chain-1"
    )
    content["/"] = "home"
    return site, content


@pytest.fixture
def slow_news(fresh_site: Site) -> tuple[Site, dict[str, str]]:
    """:func:`news`, each page taking 0.08 s: ~3 s of crawl, several checkpoints."""
    return _news(fresh_site, 0.08)


@pytest.fixture
def slower_news(fresh_site: Site) -> tuple[Site, dict[str, str]]:
    """:func:`news`, each page taking 0.14 s: batch files of 4 items come about
    0.45 s apart (0.08 s gave 0.26 s on a loaded machine: never 0.3 s of quiet
    to kill in, and the run ended first)."""
    return _news(fresh_site, 0.14)


@pytest.fixture
def news(fresh_site: Site) -> tuple[Site, dict[str, str]]:
    """About 60 pages; every article (and the home page) has a text of its own."""
    return _news(fresh_site, 0.03)


def _kill_runs_then_finish(
    site: Site,
    project: Path,
    feed: str,
    kills: list[int],
    *,
    may_finish: bool = False,
    writes: int = 0,
    wait: float = 0.0,
) -> tuple[list[Path], str, list[FeedWatch]]:
    """Runs the same command with a new feed each run: killed (kill -9) after
    ``kills[i]`` fetches (and, with ``writes``, once the feed file was written
    at that many checkpoints, ``wait`` seconds later), then once to the end.
    Returns the feeds' folder contents, the last run's log and what was seen
    of each killed run's feed file. With ``may_finish``, a run that has fewer
    fetches left than its kill point ends on its own (fuzzed kills)."""
    start = site.url("/", host="127.0.0.1")
    watches = []
    for run, fetched in enumerate(kills, 1):
        site.reset()
        path = feed % {"run": run}
        crawl = _scrapy_crawl(project, start, "-o", path)
        watches.append(
            _kill_after(
                crawl,
                site,
                fetched,
                may_finish=may_finish,
                feed=project / path if "%" not in path else None,
                writes=writes,
                wait=wait,
            )
        )
    site.reset()
    last = _scrapy_crawl(project, start, "-o", feed % {"run": len(kills) + 1})
    log, _ = last.communicate(timeout=180)
    assert last.returncode == 0, log
    return sorted(project.glob("run*.jsonl")), log, watches


def _names_per_feed(feeds: list[Path], content: dict[str, str]) -> Counter[str]:
    return Counter(content[_path(item["url"])] for f in feeds for item in _complete_lines(f))


def test_scrapy_crawl_o_killed_three_times_loses_no_item(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """Killed early (before the first checkpoint, 1 s, wrote the feed):
    nothing is lost. Kills after checkpoints: the tests below."""
    site, content = news
    project = _project(tmp_path)
    feeds, log, _ = _kill_runs_then_finish(site, project, "run%(run)d.jsonl", [12, 10, 8])
    names = _names_per_feed(feeds, content)
    # Every real content came out, in a feed file on disk...
    assert set(names) == set(content.values()), (sorted(set(content.values()) - set(names)), log)
    # ...once: nothing of a killed run's feed was on disk, nor recorded.
    assert [name for name, n in names.items() if n > 1] == [], log
    assert "dedup/frontier/restored" in log


def test_scrapy_crawl_o_killed_between_checkpoints_writes_no_item_twice(
    slow_news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """Killed three times, each a while after a checkpoint wrote the feed
    (the second of its run, so the pages of the first were recorded), and
    well before the next: the feeds of all runs hold each real page's item
    exactly once, and the killed runs' feeds hold items."""
    site, content = slow_news
    project = _project(tmp_path, DEDUP_FEED_CHECKPOINT=0.5)
    feeds, log, watches = _kill_runs_then_finish(
        site, project, "run%(run)d.jsonl", [1, 1, 1], writes=2, wait=0.25
    )
    runs: list[tuple[FeedWatch | None, Path]] = [
        (w, project / f"run{n}.jsonl") for n, w in enumerate(watches, 1)
    ]
    runs.append((None, project / f"run{len(watches) + 1}.jsonl"))
    for watch, path in runs[:-1]:
        assert watch is not None and watch.killed_at is not None
        _, whole = watch.last_write()
        # The kill came after two checkpoints, 0.25 s after the last one's write.
        assert len(watch.seen) >= 2 and whole is not None, (watch.seen, log)
        assert watch.killed_at - whole > 0.2, (watch.seen, watch.killed_at)
        assert len(_complete_lines(path)) >= 2, path.read_text()
    names = _names_per_feed(feeds, content)
    missing = sorted(set(content.values()) - set(names))
    assert missing == [], (missing, log)
    again, problems = _written_again(runs, content)
    assert (again, problems) == ([], []), log
    assert [name for name, n in names.items() if n > 1] == [], log


def test_scrapy_crawl_o_killed_at_random_moments_loses_no_item(
    slow_news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """The fuzzed form: five kills at random points of the crawl (a new seed
    each run of the suite, printed on failure; DEDUP_TEST_SEED repeats one),
    checkpoints every 0.4 s so that kills come after some, most of them
    longer than SYNC_MARGIN after the last."""
    seed = int(os.environ.get("DEDUP_TEST_SEED") or random.randrange(1 << 32))
    rng = random.Random(seed)
    site, content = slow_news
    project = _project(tmp_path, DEDUP_FEED_CHECKPOINT=0.4)
    kills = [rng.randint(1, 40) for _ in range(5)]
    feeds, log, watches = _kill_runs_then_finish(
        site, project, "run%(run)d.jsonl", kills, may_finish=True
    )
    names = _names_per_feed(feeds, content)
    missing = sorted(set(content.values()) - set(names))
    assert missing == [], (f"DEDUP_TEST_SEED={seed}", kills, missing, log)
    # Written again: only the items of a killed run's last checkpoint, and
    # only when the kill came right after that checkpoint wrote the file.
    runs: list[tuple[FeedWatch | None, Path]] = [
        (w, project / f"run{n}.jsonl") for n, w in enumerate(watches, 1)
    ]
    runs.append((None, project / f"run{len(watches) + 1}.jsonl"))
    again, problems = _written_again(runs, content)
    assert problems == [], (f"DEDUP_TEST_SEED={seed}", kills, again, log)
    doubled = [name for name, n in names.items() if n > 1]
    assert sorted(doubled) == sorted(set(again)), (f"DEDUP_TEST_SEED={seed}", kills, log)


@pytest.mark.parametrize(
    "uri", ["run%(run)d-%%(batch_id)d.jsonl", "run%(run)d-%%(batch_time)s.jsonl"]
)
def test_batches_of_a_feed_killed_loses_no_item(
    news: tuple[Site, dict[str, str]], tmp_path: Path, uri: str
) -> None:
    site, content = news
    project = _project(tmp_path, FEED_EXPORT_BATCH_ITEM_COUNT=4)
    kills = [12, 10, 8, 8]
    feeds, log, _ = _kill_runs_then_finish(site, project, uri, kills)
    assert len(feeds) > 10  # batches of 4 items, in files of their own
    names = _names_per_feed(feeds, content)
    assert set(names) == set(content.values()), (sorted(set(content.values()) - set(names)), log)
    # A batch reaches its file when it is full, and its pages are recorded
    # right after it is synced: a kill -9 in between (the kill comes just
    # after an item here, when a batch closes) writes that batch again.
    doubled = [name for name, n in names.items() if n > 1]
    assert len(doubled) <= 4 * len(kills), (doubled, log)


def _kill_after_batches(proc: subprocess.Popen[str], folder: Path, run: int) -> float:
    """Kills the run (kill -9) 0.3 s after the second (or a later) of its
    batch files was written, with no other written meanwhile. Returns how
    long after the last batch file was written the kill came."""
    written: dict[Path, float] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for path in folder.glob(f"run{run}-*.jsonl"):
            if path not in written and path.stat().st_size:
                written[path] = time.monotonic()
        if len(written) >= 2 and time.monotonic() > max(written.values()) + 0.3:
            break
        time.sleep(0.002)
    if proc.poll() is not None:
        proc.communicate(timeout=30)  # closes its pipes: no ResourceWarning in a later test
        raise AssertionError(f"the crawl ended before it could be killed: {written}")
    killed_at = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return killed_at - max(written.values())


@pytest.mark.parametrize(
    "reactor", ["asyncio", "twisted.internet.epollreactor.EPollReactor"], ids=["asyncio", "epoll"]
)
def test_a_stored_batch_records_all_its_pages_at_once(
    slower_news: tuple[Site, dict[str, str]], tmp_path: Path, reactor: str
) -> None:
    """A batch file is stored when full, and its pages (the last item's page
    included) are recorded right after, not at the next timed checkpoint
    (60 s here): a kill a while after a batch was stored writes none of its
    items again. With a reactor other than asyncio's, Scrapy stores the
    batch inside the ``item_scraped`` of its last item."""
    site, content = slower_news
    extra: dict[str, Any] = {"FEED_EXPORT_BATCH_ITEM_COUNT": 4, "DEDUP_FEED_CHECKPOINT": 60.0}
    if reactor != "asyncio":
        extra["TWISTED_REACTOR"] = reactor
    project = _project(tmp_path, **extra)
    start = site.url("/", host="127.0.0.1")
    _lines = _complete_lines
    kills = 3
    for run in range(1, kills + 1):
        site.reset()
        crawl = _scrapy_crawl(project, start, "-o", f"run{run}-%(batch_id)d.jsonl")
        assert _kill_after_batches(crawl, project, run) > 0.25
    site.reset()
    last = _scrapy_crawl(project, start, "-o", f"run{kills + 1}-%(batch_id)d.jsonl")
    log, _ = last.communicate(timeout=180)
    assert last.returncode == 0, log
    per_run = [
        [content[_path(i["url"])] for f in project.glob(f"run{n}-*.jsonl") for i in _lines(f)]
        for n in range(1, kills + 2)
    ]
    assert all(per_run[:kills]), per_run
    names = Counter(name for run in per_run for name in run)
    assert set(names) == set(content.values()), (sorted(set(content.values()) - set(names)), log)

    def names_after(n: int) -> set[str]:
        return {name for run in per_run[n + 1 :] for name in run}

    again = [name for n, run in enumerate(per_run) for name in run if name in names_after(n)]
    assert again == [], (per_run, log)


def test_kill_9_leaves_whole_lines_and_the_next_run_appends_after_them(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """The usual `-o items.jsonl` (append), the same file every run."""
    site, content = news
    project = _project(tmp_path)
    feeds, log, _ = _kill_runs_then_finish(site, project, "run.jsonl", [12, 10])
    assert len(feeds) == 1
    lines = feeds[0].read_bytes().split(b"\n")
    assert lines[-1] == b""  # the last run closed its feed
    items = [json.loads(line) for line in lines[:-1]]  # every line whole
    names = Counter(content[_path(item["url"])] for item in items)
    assert set(names) == set(content.values()), log


def _gunzip_what_is_there(path: Path) -> bytes:
    """A gzip file a kill -9 cut short: what can be read of it."""
    reader = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return reader.decompress(path.read_bytes())
    except zlib.error:
        return b""


def test_a_feed_stored_when_it_closes_leaves_the_killed_runs_pages_to_the_next(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """A gzip feed is complete only when it closes (as S3, GCS and FTP feeds
    are stored only then): the killed run records none of the pages that gave
    items (a page whose items were all duplicates is recorded at once: the
    page that gave the text is fetched again), and the next run's feed has them."""
    site, content = news
    project = _project(tmp_path)
    start = site.url("/", host="127.0.0.1")

    def gzip_feed(run: int) -> str:
        options = {"format": "jsonlines", "postprocessing": [GZIP]}
        return "FEEDS=" + json.dumps({f"run{run}.jsonl.gz": options})

    site.reset()
    _kill_after(_scrapy_crawl(project, start, "-s", gzip_feed(1)), site, 30)
    site.reset()
    last = _scrapy_crawl(project, start, "-s", gzip_feed(2))
    log, _ = last.communicate(timeout=180)
    assert last.returncode == 0, log
    names: Counter[str] = Counter()
    for run in (1, 2):
        path = project / f"run{run}.jsonl.gz"
        data = _gunzip_what_is_there(path) if path.exists() else b""
        lines = data.split(b"\n")
        names.update(content[_path(json.loads(line)["url"])] for line in lines[:-1])
    assert set(names) == set(content.values()), (sorted(set(content.values()) - set(names)), log)


def test_runs_killed_before_their_feed_was_stored_do_not_use_up_the_retries(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    """A page fetched and processed whose record waits for its feed (a gzip
    feed, stored only when it closes; a batch not full yet; a checkpoint) did
    not fail: a kill -9 then must not count as one of its DEDUP_FRONTIER_RETRIES.
    Killed four times (more than the 3 retries), the next run still fetches
    every page the killed runs fetched, and its feed has them all."""
    site, content = news
    project = _project(tmp_path)
    start = site.url("/", host="127.0.0.1")

    def gzip_feed(run: int) -> str:
        options = {"format": "jsonlines", "postprocessing": [GZIP]}
        return "FEEDS=" + json.dumps({f"run{run}.jsonl.gz": options})

    runs = 5
    for run in range(1, runs):
        site.reset()
        _kill_after(_scrapy_crawl(project, start, "-s", gzip_feed(run)), site, 12)
    site.reset()
    last = _scrapy_crawl(project, start, "-s", gzip_feed(runs))
    log, _ = last.communicate(timeout=180)
    assert last.returncode == 0, log
    assert "dedup/frontier/restored" in log and "dedup/frontier/given_up" not in log, log
    data = _gunzip_what_is_there(project / f"run{runs}.jsonl.gz")
    names = {content[_path(json.loads(line)["url"])] for line in data.split(b"\n")[:-1]}
    assert names == set(content.values()), (sorted(set(content.values()) - names), log)


@deferred_f_from_coro_f
async def test_every_format_is_written_whole_through_the_checkpoints(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    site, content = news
    feeds = {
        str(tmp_path / "items.csv"): {"format": "csv"},
        str(tmp_path / "items.xml"): {"format": "xml"},
        str(tmp_path / "items.json"): {"format": "json"},
        f"file://{tmp_path}/items-%(batch_id)d.jsonl": {
            "format": "jsonlines",
            "batch_item_count": 7,
        },
    }
    settings = {
        "ADDONS": {"scrapy_dedup.DedupAddon": 100},
        "DEDUP_STORE": f"sqlite:///{tmp_path}/d.db",
        "FEEDS": feeds,
        "DEDUP_FEED_CHECKPOINT": 0.05,
    }
    result = await crawl(NewsSpider, settings, start=site.url("/"))
    urls = sorted(item["url"] for item in result.items)
    assert len(urls) == len(set(content.values()))
    with (tmp_path / "items.csv").open(newline="") as f:
        assert sorted(row["url"] for row in csv.DictReader(f)) == urls
    tree = ElementTree.parse(tmp_path / "items.xml")
    assert sorted(e.text or "" for e in tree.iter("url")) == urls
    assert sorted(i["url"] for i in json.loads((tmp_path / "items.json").read_text())) == urls
    batches = [i for f in tmp_path.glob("items-*.jsonl") for i in _complete_lines(f)]
    assert sorted(i["url"] for i in batches) == urls
    assert result.stats["dedup/feeds/checkpoints"] >= 1
    assert result.stats["dedup/feeds/held"] >= len(urls)
    assert "dedup/feeds/unrecorded" not in result.stats
    # What the run kept, the next one skips.
    site.reset()
    again = await crawl(NewsSpider, settings, start=site.url("/"))
    assert again.items == []
    assert [p for p in site.fetched() if p.startswith("/article/")] == []
