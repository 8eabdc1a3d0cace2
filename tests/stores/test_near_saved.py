"""The SQLite store saves its near-duplicate index beside the file at close,
so that the next open reads it instead of indexing every stored fingerprint
again; a saved index that no longer matches the stored rows is never used."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

import scrapy_dedup.stores.sqlite as sqlite_store
from scrapy_dedup.stores.sqlite import SqliteStore
from scrapy_dedup.text.near import MinHashMethod
from tests.conftest import crawl
from tests.crawl_worker import NewsSpider
from tests.site import Site, article, page

ROOT = Path(__file__).resolve().parents[2]
METHOD = MinHashMethod()
RNG = np.random.default_rng(5)
TEXTS = [" ".join(f"w{x}" for x in RNG.integers(0, 20000, 80)) for _ in range(300)]


def _edited(text: str) -> str:
    words = text.split()
    words[40] = "changed"
    return " ".join(words)


def _saved(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}-near-*"))


@pytest.fixture(autouse=True)
def save_small_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "_SAVE_MIN", 10)


def _fill(path: Path, texts: range) -> None:
    store = SqliteStore(path, "shop")
    for i in texts:
        store.add_near(METHOD, METHOD.fingerprint(TEXTS[i]), f"https://shop.example/{i}")
    store.close()


def _matches(path: Path, texts: range) -> list[str | None]:
    store = SqliteStore(path, "shop")
    try:
        found = [store.match_near(METHOD, METHOD.fingerprint(_edited(TEXTS[i]))) for i in texts]
        return [match[0] if match else None for match in found]
    finally:
        store.close()


def test_a_reopened_store_reads_its_saved_index_and_the_texts_after_it(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    _fill(path, range(0, 200))
    assert [p.name for p in _saved(path)] == ["dedup.db-near-1-minhash2-016x004"]
    # A run killed with kill -9 after its texts were committed: no new save.
    code = (
        "import os, signal, sys; sys.path.insert(0, sys.argv[1])\n"
        "from tests.stores.test_near_saved import METHOD, TEXTS\n"
        "from scrapy_dedup.stores.sqlite import SqliteStore\n"
        "store = SqliteStore(sys.argv[2], 'shop')\n"
        "for i in range(200, 300):\n"
        "    store.add_near(METHOD, METHOD.fingerprint(TEXTS[i]), f'https://shop.example/{i}')\n"
        "store.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    saved_before = _saved(path)[0].stat().st_mtime_ns
    done = subprocess.run([sys.executable, "-c", code, str(ROOT), str(path)], check=False)
    assert done.returncode == -signal.SIGKILL
    assert _saved(path)[0].stat().st_mtime_ns == saved_before

    store = SqliteStore(path, "shop")
    store.match_near(METHOD, METHOD.fingerprint(TEXTS[0]))
    assert store._near_saved == {"minhash2": 200}  # read from the saved index
    store.close()  # 100 texts after it: saved again
    expected = [f"https://shop.example/{i}" for i in range(300)]
    assert _matches(path, range(300)) == expected
    assert _matches(path, range(300)) == expected


def test_a_saved_index_that_does_not_match_the_rows_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, other = tmp_path / "dedup.db", tmp_path / "other.db"
    _fill(path, range(0, 100))
    _fill(other, range(100, 200))  # as many texts, other ones
    os.replace(_saved(other)[0], _saved(path)[0])
    assert _matches(path, range(0, 200, 10)) == [
        f"https://shop.example/{i}" if i < 100 else None for i in range(0, 200, 10)
    ]

    # Cut short: a warning, and the stored rows indexed anew.
    _fill(path, range(100, 150))
    saved = _saved(path)[0]
    saved.write_bytes(saved.read_bytes()[:-100])
    with caplog.at_level(logging.WARNING):
        assert _matches(path, range(0, 150, 7)) == [
            f"https://shop.example/{i}" for i in range(0, 150, 7)
        ]
    assert "unreadable" in caplog.text and saved.name in caplog.text


def test_clear_removes_the_saved_index(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    _fill(path, range(0, 100))
    assert _saved(path)
    store = SqliteStore(path, "shop")
    store.clear()
    assert not _saved(path)
    store.add_near(METHOD, METHOD.fingerprint(TEXTS[150]), "https://shop.example/150")
    store.close()
    assert _matches(path, range(0, 100, 9)) == [None] * 12
    assert _matches(path, range(150, 151)) == ["https://shop.example/150"]


@deferred_f_from_coro_f
async def test_a_recrawl_drops_copies_of_texts_found_through_the_saved_index(
    fresh_site: Site, tmp_path: Path
) -> None:
    site = fresh_site
    links = [f"/a/{i}" for i in range(30)]
    site.routes["/"] = lambda q: page("home", *links)
    for i, link in enumerate(links):
        site.routes[link] = lambda q, i=i: article(f"Article {i}", TEXTS[i])
    settings = {
        "ADDONS": {"scrapy_dedup.DedupAddon": 100},
        "DEDUP_STORE": f"sqlite:///{tmp_path}/dedup.db",
    }
    first = await crawl(NewsSpider, settings, start=site.url("/"))
    assert len(first.items) == 30
    assert _saved(tmp_path / "dedup.db")

    # Next run: the site moved its articles and edited one word of each.
    moved = [f"/b/{i}" for i in range(30)]
    site.routes["/"] = lambda q: page("home", *moved)
    for i, link in enumerate(moved):
        site.routes[link] = lambda q, i=i: article(f"Article {i}", _edited(TEXTS[i]))
    site.routes["/b/new"] = lambda q: article("New", TEXTS[200])
    site.routes["/"] = lambda q: page("home", *moved, "/b/new")
    site.reset()
    second = await crawl(NewsSpider, settings, start=site.url("/"))
    assert sorted(site.fetched()) == sorted(["/", "/b/new", *moved])
    assert [item["url"] for item in second.items] == [site.url("/b/new")]
    assert second.stats["dedup/items/near"] == 30
