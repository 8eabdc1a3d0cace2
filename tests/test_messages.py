"""What scrapy-dedup says must be true, checked as a user meets it: ``scrapy
crawl`` and ``scrapy dedup ...`` run as subprocesses in a fresh project, on
SQLite files and real ``redis-server`` processes (one with a password that is
not percent-encoded). Each test reads the output a user reads."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.redis_servers import start_redis
from tests.site import Site
from tests.test_commands import SETTINGS, SPIDER, _routes, _run

PASSWORD = "p@ss:w/rd?x"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh ``scrapy startproject shop`` with the add-on and an SQLite store."""
    _run("startproject", "shop", cwd=tmp_path)
    root = tmp_path / "shop"
    (root / "shop" / "spiders" / "links.py").write_text(SPIDER, encoding="utf-8")
    with (root / "shop" / "settings.py").open("a", encoding="utf-8") as settings:
        settings.write(SETTINGS)
    return root


@pytest.fixture
def secret_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A redis-server asking for ``PASSWORD``: (its URL without a password,
    the URI with the password as a user may write it, not percent-encoded)."""
    url, proc = start_redis(tmp_path)
    client = redis.Redis.from_url(url)
    client.config_set("requirepass", PASSWORD)
    client.close()
    hostport = url.split("://", 1)[1].split("/", 1)[0]
    yield url, f"redis://:{PASSWORD}@{hostport}/0"
    proc.kill()
    proc.wait()


def _fragments(secret: str, size: int = 3) -> set[str]:
    """Every ``size``-character piece of ``secret``, but those the site's own
    pages show (the contact page's ``help@shop.example`` holds ``p@s``)."""
    pieces = {secret[i : i + size] for i in range(len(secret) - size + 1)}
    return {piece for piece in pieces if piece not in "mailto:help@shop.example"}


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "ERROR" in line]


def _after_error(output: str) -> list[str]:
    """The lines from the first ERROR on: what a user reads when a crawl refuses."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if "ERROR" in line)
    return lines[first:]


# -- 1. tools on Redis -------------------------------------------------------


def test_tools_on_redis_refuse_a_namespace_that_does_not_exist(
    fresh_site: Site, project: Path, redis_url: str, redis_prefix: str
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    store = ["-s", f"DEDUP_STORE={redis_url}", "-s", f"DEDUP_REDIS_PREFIX={redis_prefix}"]
    _run("crawl", "links", "-a", f"start={base}/", *store, cwd=project)
    tracked = f"{base}/pricing?utm_source=newsletter"

    for command in (
        ["stats", "linkz"],
        ["forget", "linkz", tracked],
        ["explain", "linkz", tracked],  # the namespace first, as the other commands
        ["explain", tracked, "-s", "DEDUP_NAMESPACE=linkz"],  # as before
        ["reset", "linkz"],
    ):
        typo = _run("dedup", *command, *store, cwd=project, check=False)
        assert typo.returncode == 1, (command, typo.stdout, typo.stderr)
        assert "has no namespace 'linkz' (it has: 'links')" in typo.stderr, command
        assert "0 pages forgotten" not in typo.stdout and "not seen" not in typo.stdout

    stats = _run("dedup", "stats", "links", *store, cwd=project).stdout
    assert int(next(line for line in stats.splitlines() if "URL keys" in line).split()[-1]) > 0
    # A kept page that is no start URL is skipped, with no word about start URLs.
    explained = _run("dedup", "explain", "links", tracked, *store, cwd=project).stdout
    assert "store: kept by an earlier run: the next run skips it\n" in explained
    assert "start" not in explained

    # reset without --yes: the command it suggests is the one to run, -s options included.
    asked = _run("dedup", "reset", "links", *store, cwd=project, check=False)
    assert asked.returncode == 1
    suggested = asked.stdout.rsplit("Run: ", 1)[1].strip()
    words = shlex.split(suggested)
    assert words[:2] == ["scrapy", "dedup"] and f"DEDUP_STORE={redis_url}" in words
    done = _run(*words[1:], cwd=project)
    assert f"{redis_url}, namespace 'links': reset" in done.stdout
    after = _run("dedup", "stats", "links", *store, cwd=project).stdout
    assert int(next(line for line in after.splitlines() if "URL keys" in line).split()[-1]) == 0


def test_reset_of_the_memory_store_says_there_is_nothing_to_reset(project: Path) -> None:
    for extra in ([], ["--yes"]):
        reset = _run(
            "dedup", "reset", "links", "-s", "DEDUP_STORE=memory", *extra, cwd=project, check=False
        )
        assert reset.returncode == 1
        assert "keeps nothing between runs: there is nothing to reset" in reset.stderr
        assert "starts from nothing" not in reset.stdout


def test_explain_says_a_start_url_is_fetched_again_only_for_start_urls(
    fresh_site: Site, project: Path
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    spider = project / "shop" / "spiders" / "home.py"
    spider.write_text(
        SPIDER.replace('name = "links"', 'name = "home"').replace(
            "class LinksSpider(scrapy.Spider):",
            f"class HomeSpider(scrapy.Spider):\n    start_urls = [{base + '/'!r}]",
        ),
        encoding="utf-8",
    )
    _run("crawl", "home", "-a", f"start={base}/", cwd=project)
    out = _run("dedup", "explain", "home", f"{base}/", f"{base}/pricing/", cwd=project).stdout
    home, pricing = out.split(f"\n{base}/pricing/\n")
    assert "one of the spider's start_urls, which the next run fetches again" in home
    assert "store: kept by an earlier run (as" in pricing and "start" not in pricing


# -- 2. secrets ----------------------------------------------------------------


def test_a_password_that_is_not_percent_encoded_is_never_shown(
    fresh_site: Site, project: Path, secret_server: tuple[str, str]
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    _, uri = secret_server
    store = ["-s", f"DEDUP_STORE={uri}", "-s", "LOG_LEVEL=DEBUG"]
    crawl = _run("crawl", "links", "-a", f"start={base}/", *store, cwd=project, check=False)
    tools = [
        _run("dedup", *command, *store, cwd=project, check=False)
        for command in (["stats", "links"], ["reset", "links"], ["explain", "links", base])
    ]
    # redis-py would read the host from inside the password: refused, saying why.
    assert crawl.returncode == 1
    assert "must percent-encode" in crawl.stderr
    for proc in (crawl, *tools):
        shown = proc.stdout + proc.stderr
        leaked = sorted(f for f in _fragments(PASSWORD) if f in shown)
        assert not leaked, (leaked, shown[-3000:])
    assert ":***@127.0.0.1" in crawl.stderr  # the store is still named


def test_a_percent_encoded_password_works_and_is_never_shown(
    fresh_site: Site, project: Path, secret_server: tuple[str, str]
) -> None:
    from urllib.parse import quote

    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    _, uri = secret_server
    encoded = uri.replace(PASSWORD, quote(PASSWORD, safe=""))
    store = ["-s", f"DEDUP_STORE={encoded}"]
    crawl = _run("crawl", "links", "-a", f"start={base}/", *store, cwd=project)
    stats = _run("dedup", "stats", "links", *store, cwd=project)
    asked = _run("dedup", "reset", "links", *store, cwd=project, check=False)
    assert "pages" in stats.stdout or "URL keys" in stats.stdout
    assert "with your password in place of ***" in asked.stdout
    for proc in (crawl, stats, asked):
        shown = proc.stdout + proc.stderr
        secret = _fragments(PASSWORD) | _fragments(quote(PASSWORD, safe=""), 4)
        leaked = sorted(f for f in secret if f in shown)
        assert not leaked, (leaked, shown[-3000:])


# -- 3. messages -------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        (["DEDUP_STORE=sqlite:////proc/x.db"], "cannot create or open the dedup store /proc/x.db"),
        (["DEDUP_NEAR_THRESHOLD=1.5"], "DEDUP_NEAR_THRESHOLD must be between 0.5 and 1.0"),
        (["DEDUP_NEAR_THRESHOLD=0.3"], "DEDUP_NEAR_THRESHOLD must be between 0.5 and 1.0"),
        (["DEDUP_STORE=redis://127.0.0.1:1/abc"], "DEDUP_STORE='redis://127.0.0.1:1/abc': the"),
        (["DEDUP_ENABLED=maybe"], "DEDUP_ENABLED must be a boolean"),
    ],
)
def test_a_refusal_at_start_is_one_error_line_and_exit_1(
    project: Path, settings: list[str], says: str
) -> None:
    args = [word for setting in settings for word in ("-s", setting)]
    crawl = _run(
        "crawl", "links", "-a", "start=http://127.0.0.1:1/", *args, cwd=project, check=False
    )
    assert crawl.returncode == 1
    errors = _error_lines(crawl.stderr)
    assert len(errors) == 1 and says in errors[0], crawl.stderr[-3000:]
    assert "in use by another process" not in crawl.stderr
    assert "Traceback" not in crawl.stderr and "never retrieved" not in crawl.stderr
    assert len(_after_error(crawl.stderr)) < 10


def test_a_redis_database_out_of_range_is_named(project: Path, redis_url: str) -> None:
    uri = redis_url.rsplit("/", 1)[0] + "/99"
    crawl = _run(
        "crawl",
        "links",
        "-a",
        "start=http://127.0.0.1:1/",
        "-s",
        f"DEDUP_STORE={uri}",
        cwd=project,
        check=False,
    )
    assert crawl.returncode == 1
    (error,) = _error_lines(crawl.stderr)
    assert f"DEDUP_STORE='{uri}': database 99 does not exist on this server" in error
    assert "cannot reach" not in error


# -- 4. settings that said nothing -------------------------------------------


def test_dedup_debug_logs_at_the_level_the_docs_name(fresh_site: Site, project: Path) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    docs = (Path(__file__).parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    section = docs.split("### `DEDUP_DEBUG`", 1)[1].split("###", 1)[0]
    (level,) = re.findall(r"\bat (DEBUG|INFO)\b", section)
    crawl = _run("crawl", "links", "-a", f"start={base}/", "-s", "DEDUP_DEBUG=1", cwd=project)
    filtered = [line for line in crawl.stderr.splitlines() if "Filtered duplicate request" in line]
    assert filtered and all(f"] {level}: " in line for line in filtered)


def test_an_empty_store_setting_is_the_memory_store_as_documented(
    fresh_site: Site, project: Path
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    docs = (Path(__file__).parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    section = docs.split("### `DEDUP_STORE`", 1)[1].split("###", 1)[0]
    assert '`""`' in section and "memory" in section
    crawl = _run("crawl", "links", "-a", f"start={base}/", "-s", "DEDUP_STORE=", cwd=project)
    assert "store: memory (this crawl only)" in crawl.stderr


# -- 5. what users of scrapy-redis, deltafetch and Scrapy expect ---------------


def test_dedup_store_redis_uses_redis_url(
    fresh_site: Site, project: Path, redis_url: str, redis_prefix: str
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    store = ["-s", "DEDUP_STORE=redis", "-s", f"REDIS_URL={redis_url}"]
    store += ["-s", f"DEDUP_REDIS_PREFIX={redis_prefix}"]
    crawl = _run("crawl", "links", "-a", f"start={base}/", *store, cwd=project)
    assert f"store: {redis_url}, namespace 'links'" in crawl.stderr
    client = redis.Redis.from_url(redis_url)
    assert client.exists(f"{redis_prefix}:links:run")
    client.close()


def test_dedup_enabled_false_is_scrapy_without_the_bundle(fresh_site: Site, project: Path) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    crawl = _run(
        "crawl", "links", "-a", f"start={base}/", "-s", "DEDUP_ENABLED=False", cwd=project
    )
    assert "scrapy-dedup on:" not in crawl.stderr and "dedup/" not in crawl.stderr
    assert "DEDUP_ENABLED is False" in crawl.stderr
    assert not (project / ".scrapy" / "dedup.db").exists()
    # Scrapy's own filter: /pricing?utm_source=... is fetched as a page of its own.
    assert "/pricing?utm_source=newsletter&utm_medium=email" in fresh_site.fetched()
    # And a DUPEFILTER_CLASS set by hand behaves as Scrapy's.
    fresh_site.reset()
    _run(
        "crawl",
        "links",
        "-a",
        f"start={base}/",
        "-s",
        "DEDUP_ENABLED=0",
        "-s",
        "DUPEFILTER_CLASS=scrapy_dedup.CanonicalDupeFilter",
        "-s",
        "ADDONS={}",
        cwd=project,
    )
    assert "/pricing?utm_source=newsletter&utm_medium=email" in fresh_site.fetched()


def test_a_spider_argument_resets_as_deltafetch_reset_does(
    fresh_site: Site, project: Path
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    _run("crawl", "links", "-a", f"start={base}/", cwd=project)
    fresh_site.reset()
    again = _run("crawl", "links", "-a", f"start={base}/", "-a", "dedup_reset=1", cwd=project)
    assert "-a dedup_reset is set: forgetting namespace 'links'" in again.stderr
    assert "/pricing/" in fresh_site.fetched()  # kept by the first run, fetched again


def test_the_log_names_components_and_says_when_the_url_stage_is_left_out(
    fresh_site: Site, project: Path
) -> None:
    fresh_site.routes.update(_routes())
    base = fresh_site.url("/", host="127.0.0.1").rstrip("/")
    crawl = _run("crawl", "links", "-a", f"start={base}/", cwd=project)
    assert "<class " not in crawl.stderr and " object at 0x" not in crawl.stderr
    assert "'scrapy_dedup.ContentDedupPipeline'" in crawl.stderr
    own = _run(
        "crawl",
        "links",
        "-a",
        f"start={base}/",
        "-s",
        "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter",
        cwd=project,
    )
    said = [line for line in own.stderr.splitlines() if "leaves out its URL stage" in line]
    assert (
        len(said) == 1 and "] INFO: DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter" in said[0]
    )


def test_the_docs_say_where_relative_sqlite_files_and_lock_files_go() -> None:
    root = Path(__file__).parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    enable = readme.split("## Enable it", 1)[1].split("\n## ", 1)[0]
    assert ".scrapy/" in enable
    stores = (root / "docs" / "stores.md").read_text(encoding="utf-8")
    assert ".lock" in stores and "dedup.db.<" in stores
