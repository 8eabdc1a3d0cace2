"""The SQLite store when its file misbehaves: a full disk, another program's
lock, a read-only file or directory, colliding namespace hashes, a kill -9
while the file is being made, two names (hard links, symlinks) for one file.

Real faults, not mocks: a small tmpfs filled to the last byte (or SQLite's
``max_page_count`` where mounting is not permitted), a second connection
holding the write lock, read-only bind mounts (chmod for a normal user).
Time is a fake clock in the store's module, never a measured duration.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import random
import re
import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy.utils.defer import deferred_f_from_coro_f

import scrapy_dedup.stores.sqlite as sqlite_module
from scrapy_dedup.stores import GuardedStore, SqliteStore, StoreError
from tests.conftest import crawl
from tests.crawl_worker import NewsSpider
from tests.site import Site, store_stage_routes

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses mount(8)")


class Clock:
    """Stands for the ``time`` module in the store's module: a monotonic
    clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return time.time()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(sqlite_module, "time", fake)
    return fake


class CountingDb:
    """The store's connection, counting the transactions it is asked to
    begin: how often the store tried to write its backlog."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.begins = 0

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "BEGIN":
            self.begins += 1
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    def __enter__(self) -> sqlite3.Connection:
        return self.db.__enter__()

    def __exit__(self, *exc_info: Any) -> Any:
        return self.db.__exit__(*exc_info)


def counting(store: SqliteStore) -> CountingDb:
    db = CountingDb(store._db)
    store._db = db  # type: ignore[assignment]
    return db


def _mount(*args: str | Path) -> bool:
    return subprocess.run(["mount", *map(str, args)], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=True)


class Disk:
    """A directory whose disk can be filled and freed again."""

    def __init__(self, root: Path, kind: str) -> None:
        self.root = root
        self.kind = kind

    def fill(self, store: SqliteStore) -> None:
        if self.kind == "max_page_count":  # the same SQLITE_FULL as a full disk
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count = {pages}")
            return
        fd = os.open(self.root / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 65536):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)

    def free(self, store: SqliteStore) -> None:
        if self.kind == "max_page_count":
            store._db.execute("PRAGMA max_page_count = 1073741823")
        else:
            (self.root / "filler").unlink()


@pytest.fixture(params=["tmpfs", "max_page_count"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Disk]:
    """A 16 MB tmpfs of its own; and SQLite's ``max_page_count``, what is
    left where mounting is not permitted."""
    root = tmp_path / "disk"
    root.mkdir()
    if request.param == "max_page_count":
        yield Disk(root, "max_page_count")
        return
    if not sys.platform.startswith("linux") or not _mount(
        "-t", "tmpfs", "-o", "size=16m", "tmpfs", root
    ):
        pytest.skip("mounting a tmpfs is not permitted here (needs root on Linux)")
    try:
        yield Disk(root, "tmpfs")
    finally:
        _umount(root)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a file or a directory) made read-only for real: by chmod for
    a normal user; as root, whom chmod does not stop, by a read-only bind
    mount of it over itself."""
    if not sys.platform.startswith("linux"):
        pytest.skip("read-only bind mounts and root's bypass of chmod are Linux things")
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if not _mount("--bind", path, path):
        pytest.skip("running as root, whom chmod does not stop, and mount --bind is not permitted")
    try:
        if not _mount("-o", "remount,ro,bind", path):
            pytest.skip(
                "running as root, whom chmod does not stop, and a read-only remount failed"
            )
        yield
    finally:
        _umount(path)


def _digest(i: int) -> bytes:
    return i.to_bytes(16, "big")


def _url(i: int) -> str:
    return f"https://shop.test/{'p' * 300}/{i}"  # about 12 records a page


# -- a full disk ---------------------------------------------------------------


@pytest.mark.parametrize("owner", ["alone", "crawl"])
def test_a_full_disk_costs_one_try_per_backoff_and_loses_nothing(
    disk: Disk, clock: Clock, owner: str
) -> None:
    path = disk.root / "dedup.db"
    store = SqliteStore(path, "shop", batch=50, interval=3600)
    errors: Counter[str] = Counter()
    guarded = GuardedStore(
        store, "sqlite:///dedup.db", "continue", count=lambda key: errors.update([key]), stop=list
    )
    due: list[int] = []
    if owner == "crawl":  # the owner flushes on the next reactor turn, when told
        store.flush_due = lambda: due.append(1)
    db = counting(store)

    def write(i: int) -> None:
        assert guarded.add_content(_digest(i), _url(i)) is None  # new, answered from memory
        if due:
            due.clear()
            guarded.flush()  # as the crawl's owner does

    for i in range(50):
        write(i)
    assert errors == Counter() and db.begins >= 1
    disk.fill(store)
    start = 50
    while not errors:  # the last page may still have had room for a few records
        write(start)
        start += 1
    before, end = db.begins, start + 5000
    for i in range(start, end):  # 50 s of writes, 100 a second
        clock.now += 0.01
        write(i)
        assert guarded.add_content(_digest(i), "https://shop.test/copy") == _url(i)
    # Tries at 1, 3, 7, 15 and 31 s (backoffs of 1, 2, 4, 8, 16, then 30 s),
    # not one for each of the 5000 records.
    assert db.begins - before == 5 and errors["dedup/store/errors"] == 6
    assert store._pending_count >= 5000
    guarded.flush()  # within the backoff: the database is not touched
    assert db.begins - before == 5

    disk.free(store)
    clock.now += 30
    write(end)  # the backoff is over: the whole backlog goes in one transaction
    assert db.begins - before == 6 and errors["dedup/store/errors"] == 6
    assert store._pending_count == 0
    guarded.close()

    with contextlib.closing(sqlite3.connect(path)) as reader:
        assert reader.execute("SELECT COUNT(*) FROM content").fetchone()[0] == end + 1
    again = SqliteStore(path, "shop")
    assert all(again.get_content(_digest(i)) == _url(i) for i in range(end + 1))
    again.close()


def test_close_tries_once_more_whatever_the_backoff(disk: Disk, clock: Clock) -> None:
    path = disk.root / "dedup.db"
    store = SqliteStore(path, "shop", batch=10, interval=3600)
    failures: list[StoreError] = []
    store.on_write_error = failures.append
    store.add_content(_digest(0), _url(0))
    store.flush()
    disk.fill(store)
    written = 1
    while not failures:  # the last page may have had room for a few records
        store.add_content(_digest(written), _url(written))
        written += 1
    for key in range(written, written + 30):  # within the backoff: they wait
        store.add_content(_digest(key), _url(key))
    written += 30
    assert len(failures) == 1 and store._pending_count >= 30
    assert re.search(
        r"disk is full; \d+ records wait in memory, next try in 1 s", str(failures[0])
    )
    disk.free(store)
    store.close()  # within the backoff, but the last chance to write
    again = SqliteStore(path, "shop")
    assert all(again.get_content(_digest(i)) == _url(i) for i in range(written))
    again.close()


# -- another program's lock ------------------------------------------------------


def test_a_write_lock_held_elsewhere_fails_fast_into_the_backoff(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "dedup.db"
    default = SqliteStore(tmp_path / "default.db", "shop")
    assert default._db.execute("PRAGMA busy_timeout").fetchone()[0] == 250  # not sqlite3's 5 s
    default.close()
    store = SqliteStore(path, "shop", batch=10, interval=3600, timeout=0.05)
    assert store._db.execute("PRAGMA busy_timeout").fetchone()[0] == 50
    failures: list[StoreError] = []
    store.on_write_error = failures.append
    db = counting(store)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as shell:
        shell.execute("BEGIN IMMEDIATE")  # a sqlite3 shell in a transaction
        for i in range(100):
            assert store.add_content(_digest(i), _url(i)) is None
            clock.now += 0.005
        store.flush()  # within the backoff: returns at once
        assert len(failures) == 1 and db.begins == 1
        assert "database is locked" in str(failures[0])
        assert store.get_content(_digest(99)) == _url(99)
        shell.execute("ROLLBACK")
    clock.now += 1
    store.add_content(_digest(100), _url(100))
    assert len(failures) == 1 and db.begins == 2
    with contextlib.closing(sqlite3.connect(path)) as reader:
        assert reader.execute("SELECT COUNT(*) FROM content").fetchone()[0] == 101
    store.close()


def test_opening_a_file_locked_elsewhere_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    SqliteStore("dedup.db", "shop").close()
    with contextlib.closing(sqlite3.connect("dedup.db", isolation_level=None)) as shell:
        shell.execute("BEGIN EXCLUSIVE")
        shell.execute("INSERT INTO runs VALUES (99, 0)")
        with pytest.raises(StoreError) as info:
            SqliteStore("dedup.db", "shop", timeout=0.05)
        shell.execute("ROLLBACK")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'dedup.db'} is locked by another program")
    assert "close it and run again" in message and "move" not in message
    SqliteStore("dedup.db", "shop").close()  # the failed open let its namespace go


# -- read-only files and directories ------------------------------------------


def test_a_read_only_file_is_a_permission_error_not_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    store = SqliteStore(path, "shop")
    store.keep_url(1, 10)
    store.close()
    data = path.read_bytes()
    with read_only(path), pytest.raises(StoreError) as info:
        SqliteStore(path, "shop")
    message = str(info.value)
    assert message.startswith(f"cannot write to {path} (read-only file or directory")
    assert "fix the permissions or point DEDUP_STORE elsewhere" in message
    assert "move" not in message
    assert path.read_bytes() == data


def test_a_read_only_directory_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    SqliteStore(folder / "dedup.db", "shop").close()
    with read_only(folder):
        for path in (
            folder / "dedup.db",  # its lock file cannot be written
            folder / "new.db",  # nor a new file created
            folder / "sub" / "new.db",  # nor a directory for it
        ):
            with pytest.raises(StoreError) as info:
                SqliteStore(path, "shop")
            message = str(info.value)
            assert message.startswith(f"cannot write to {path} (read-only file or directory")
            assert "fix the permissions" in message


# -- namespace locks -----------------------------------------------------------------


def test_namespaces_whose_crc32_collide_have_locks_of_their_own(tmp_path: Path) -> None:
    assert zlib.crc32(b"plumless") == zlib.crc32(b"buckeroo")
    path = tmp_path / "dedup.db"
    plumless = SqliteStore(path, "plumless")
    buckeroo = SqliteStore(path, "buckeroo")
    plumless.keep_url(1, 10)
    buckeroo.keep_url(2, 20)
    plumless.close()
    buckeroo.close()
    assert sorted(p.name for p in tmp_path.glob("*.lock")) == sorted(
        f"dedup.db.{hashlib.sha256(name).hexdigest()[:16]}.lock"
        for name in (b"plumless", b"buckeroo")
    )
    again = SqliteStore(path, "buckeroo")
    assert again.get_url(2) is not None and again.get_url(1) is None
    again.close()


def test_one_store_per_namespace_even_in_one_process(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    first = SqliteStore(path, "shop")
    with pytest.raises(StoreError, match=f"namespace 'shop' of {path} is in use"):
        SqliteStore(path, "shop")
    first.close()
    third = SqliteStore(path, "shop")
    closer = threading.Thread(target=third.close)  # closed on another thread than opened
    closer.start()
    closer.join()
    SqliteStore(path, "shop").close()


def test_the_namespace_lock_dies_with_the_process(tmp_path: Path) -> None:
    path = tmp_path / "dedup.db"
    code = (
        "import sys\nfrom scrapy_dedup.stores import SqliteStore\n"
        "store = SqliteStore(sys.argv[1], 'shop')\nprint('OPEN', flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "OPEN\n"
        with pytest.raises(StoreError, match="in use by another process"):
            SqliteStore(path, "shop")
    finally:
        child.kill()  # kill -9: no close, no cleanup
        child.communicate()
    SqliteStore(path, "shop").close()


# -- kill -9 while the file is being made ----------------------------------------

ROOT = Path(__file__).resolve().parents[2]
ADDON = {"ADDONS": {"scrapy_dedup.DedupAddon": 100}}

# Opens a store in a process of its own and SIGKILLs that process just before
# the store's connection runs its N-th statement (argv[3] a number), or the
# first statement containing argv[3]; "count" opens the store to the end and
# prints how many statements that took.
_KILL_AT = """
import os, sqlite3, sys

path, namespace, at = sys.argv[1:]
connect = sqlite3.connect
run = 0


def trace(statement):
    global run
    run += 1
    if run == int(at) if at.isdigit() else at != "count" and at in statement:
        os.kill(os.getpid(), 9)


def traced(*args, **kwargs):
    db = connect(*args, **kwargs)
    if str(args[0]) == path:
        db.set_trace_callback(trace)
    return db


sqlite3.connect = traced
from scrapy_dedup.stores import SqliteStore

SqliteStore(path, namespace).close()
print(run)
"""


def _open_and_kill(path: Path, at: str | int, namespace: str = "news") -> int | None:
    """Open a store at ``path`` in a child killed by SIGKILL at ``at``: None
    if it was killed, else the statements a whole open took."""
    child = subprocess.run(
        [sys.executable, "-c", _KILL_AT, str(path), namespace, str(at)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    if child.returncode == -9:
        return None
    assert child.returncode == 0, child.stderr
    return int(child.stdout)


def _half_made(path: Path, tables: int | None = None) -> None:
    """A file as scrapy-dedup up to this fix left it when killed while making
    it: WAL mode, then each statement of the schema committed on its own
    (``executescript``), and the application id after them. ``tables``: the
    number of statements that ran (default: all of them)."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        statements = [s for s in sqlite_module._SCHEMA.split(";") if s.strip()]
        for statement in statements[:tables]:
            db.execute(statement)


def _ours(path: Path) -> tuple[int, int, str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return (
            db.execute("PRAGMA application_id").fetchone()[0],
            db.execute("PRAGMA user_version").fetchone()[0],
            db.execute("PRAGMA integrity_check").fetchone()[0],
        )


@pytest.fixture
def news(fresh_site: Site) -> Iterator[tuple[Site, dict[str, str]]]:
    routes, content = store_stage_routes()
    fresh_site.routes.update(routes)
    yield fresh_site, content


def _kept_names(items: list[dict[str, Any]], content: dict[str, str]) -> list[str]:
    return sorted(content[urlsplit(item["url"]).path] for item in items)


@pytest.mark.parametrize("where", ["sqlite", "jobdir"])
@deferred_f_from_coro_f
async def test_a_kill_right_after_the_schema_leaves_a_file_the_next_crawl_uses(
    news: tuple[Site, dict[str, str]], tmp_path: Path, where: str
) -> None:
    site, content = news
    if where == "sqlite":
        path = tmp_path / "dedup.db"
        settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{path}"}
    else:  # the memory store keeps its state in JOBDIR/dedup.sqlite3
        path = tmp_path / "job" / "dedup.sqlite3"
        settings = {**ADDON, "JOBDIR": str(path.parent)}
    # Up to this fix, the schema's tables were committed one by one and the
    # application id that marks the file as ours after them: a kill there
    # left a file every later run refused as "something else".
    assert _open_and_kill(path, "application_id=") is None
    assert path.exists()
    first = await crawl(NewsSpider, settings, start=site.url("/"))
    assert first.stats["finish_reason"] == "finished"
    assert _kept_names(first.items, content) == sorted(set(content.values()))  # nothing lost
    assert _ours(path) == (sqlite_module._APPLICATION_ID, sqlite_module._SCHEMA_VERSION, "ok")
    if where == "sqlite":
        site.reset()
        second = await crawl(NewsSpider, settings, start=site.url("/"))
        assert second.items == []  # the first crawl's pages were kept in the file
        assert not [p for p in site.fetched() if p.startswith("/article/")]


@pytest.mark.parametrize(
    ("tables", "marked"),
    [(1, False), (4, False), (None, False), (None, True)],
    ids=["one-table", "four", "all", "all-and-the-id"],
)
def test_a_half_made_file_is_made_again_not_refused(
    tmp_path: Path, tables: int | None, marked: bool
) -> None:
    path = tmp_path / "dedup.db"
    _half_made(path, tables)
    if marked:  # killed after the application id, before the schema version
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(f"PRAGMA application_id={sqlite_module._APPLICATION_ID}")
    if not marked:
        data = path.read_bytes()
        with pytest.raises(StoreError, match="has no namespace 'shop'"):
            SqliteStore(path, "shop", join=False)  # a tool (explain, stats) changes nothing
        assert path.read_bytes() == data
    store = SqliteStore(path, "shop")
    store.keep_url(1, 10, "https://shop.test/1")
    store.add_content(_digest(1), "https://shop.test/1")
    store.close()
    assert _ours(path) == (sqlite_module._APPLICATION_ID, sqlite_module._SCHEMA_VERSION, "ok")
    again = SqliteStore(path, "shop")
    assert again.get_url(1) is not None and again.get_content(_digest(1)) == "https://shop.test/1"
    again.close()


@deferred_f_from_coro_f
async def test_dedup_reset_on_a_half_made_file_starts_over(
    news: tuple[Site, dict[str, str]], tmp_path: Path
) -> None:
    site, content = news
    path = tmp_path / "dedup.db"
    _half_made(path)
    settings = {**ADDON, "DEDUP_STORE": f"sqlite:///{path}", "DEDUP_RESET": True}
    result = await crawl(NewsSpider, settings, start=site.url("/"))
    assert result.stats["finish_reason"] == "finished"
    assert _kept_names(result.items, content) == sorted(set(content.values()))


@pytest.mark.parametrize(
    "kind", ["our tables with rows", "a foreign table among ours", "a column we lack", "a view"]
)
def test_a_file_of_something_else_is_still_refused_and_left_as_it_was(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "other.db"
    _half_made(path, 3)  # namespaces, urls, content
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as db:
        if kind == "our tables with rows":
            db.execute("INSERT INTO namespaces (name) VALUES ('theirs')")
        elif kind == "a foreign table among ours":
            db.execute("CREATE TABLE notes (body TEXT)")
        elif kind == "a column we lack":
            db.execute("DROP TABLE content")
            db.execute("CREATE TABLE content (ns, digest, url, price)")
        else:
            db.execute("CREATE VIEW everything AS SELECT * FROM urls")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()
    with pytest.raises(StoreError, match=r"is an SQLite database of something else \(tables: "):
        SqliteStore(path, "shop")
    assert path.read_bytes() == data


def test_kill_9_at_random_moments_of_making_the_file_never_bricks_it(tmp_path: Path) -> None:
    """Each statement is a moment where what is on disk changes (SQLite
    commits a statement or a transaction atomically; a kill within one is a
    kill before it), so killing before a random one of them, in 10 new
    files, covers the early moments of a crawl's first open."""
    whole = _open_and_kill(tmp_path / "whole.db", "count")
    assert whole is not None and whole > 10
    seed = random.randrange(1 << 32)
    moments = random.Random(seed).sample(range(1, whole + 1), 10)
    for trial, moment in enumerate(moments):
        path = tmp_path / f"dedup-{trial}.db"
        assert _open_and_kill(path, moment) is None, f"seed {seed}: not killed at {moment}"
        try:
            store = SqliteStore(path, "news")
        except StoreError as exc:
            pytest.fail(f"seed {seed}, killed before statement {moment} of {whole}: {exc}")
        store.keep_url(1, 10, "https://shop.test/1")
        store.close()
        assert _ours(path) == (sqlite_module._APPLICATION_ID, sqlite_module._SCHEMA_VERSION, "ok")
        again = SqliteStore(path, "news")
        assert again.get_url(1) is not None
        again.close()


# -- two names for one file ----------------------------------------------------------

# Opens a store, says OPEN (or the error), waits for a line on stdin, then
# writes texts of its own in many small transactions.
_WRITER = """
import sys
from scrapy_dedup.stores import SqliteStore, StoreError

path, tag = sys.argv[1:]
try:
    store = SqliteStore(path, "shop", batch=50)
except StoreError as exc:
    print("REFUSED", exc, flush=True)
    sys.exit(0)
print("OPEN", flush=True)
sys.stdin.readline()
for i in range(20000):
    store.add_content(tag.encode() + i.to_bytes(8, "big"), f"https://shop.test/{'p' * 200}/{i}")
store.close()
print("DONE", flush=True)
"""


def test_two_hard_links_never_let_two_processes_write_one_file(tmp_path: Path) -> None:
    first, second = tmp_path / "dedup.db", tmp_path / "other" / "dedup.db"
    store = SqliteStore(first, "shop")
    store.add_content(_digest(1), _url(1))
    store.close()
    second.parent.mkdir()
    os.link(first, second)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for path, tag in ((first, "a"), (second, "b"))
    ]
    said = []
    for child in children:  # both opened before either writes: at once
        assert child.stdout is not None
        said.append(child.stdout.readline())
    for child in children:
        child.communicate("go\n", timeout=300)
        assert child.returncode == 0
    assert [line.split()[0] for line in said].count("OPEN") <= 1, said
    for line in said:
        if line.startswith("REFUSED"):
            assert "has 2 hard links" in line and "Remove the other names" in line
    assert _ours(first)[2] == "ok"
    second.unlink()  # one name again: usable
    again = SqliteStore(first, "shop")
    assert again.get_content(_digest(1)) == _url(1)
    again.close()


def test_a_symlink_to_the_file_takes_the_same_namespace_lock(tmp_path: Path) -> None:
    real = tmp_path / "state" / "dedup.db"
    link = tmp_path / "dedup.db"
    real.parent.mkdir()
    link.symlink_to(real)
    store = SqliteStore(real, "shop")
    with pytest.raises(StoreError, match=r"namespace 'shop' of .* is in use"):
        SqliteStore(link, "shop")
    other = SqliteStore(link, "other")  # another namespace, through the link: fine
    other.keep_url(2, 20)
    other.close()
    store.close()
    assert _ours(real)[2] == "ok"
