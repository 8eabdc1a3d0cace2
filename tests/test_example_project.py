"""``scrapy crawl site`` on example_project, run exactly as a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

PROJECT = Path(__file__).resolve().parent.parent / "example_project"

# Every real page of the demo site (path?query), each reachable under many URLs.
EXPECTED = {
    "/",
    "/pricing/",  # linked as /pricing, which answers 301 to /pricing/
    "/about",
    "/contact",
    "/changelog",
    "/blog/",
    "/blog/?page=2&sort=new",  # also linked as ?sort=new&page=2
    "/blog/how-we-cut-build-times",
    "/blog/hello-world",
    "/docs/",
    "/docs/getting-started",
    "/docs/installation",
    "/docs/api",
    "/docs/faq",
}


# Pages whose text repeats: one item per group comes out, whichever was crawled first.
SAME_TEXT = {
    "/blog/launching-acme-widgets-2": "launch post",
    "/blog/launching-acme-widgets-2/print": "launch post",  # word for word, and rel=canonical
    "/press/berlin": "press release",
    "/press/lisbon": "press release",  # another city name: near
}


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def _stat(log: str, name: str, default: int | None = None) -> int:
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    if match is None and default is not None:
        return default
    assert match, f"{name} missing from the stats dump"
    return int(match.group(1))


def _crawl_site(output: Path, *args: str) -> str:
    """``scrapy crawl site -O output *args`` in example_project: its log."""
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SCRAPY_")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "site", "-O", str(output), *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def test_demo_crawl_fetches_each_page_once_and_keeps_each_text_once(tmp_path: Path) -> None:
    output = tmp_path / "items.jsonl"
    log = _crawl_site(output)
    assert "Traceback" not in log, log[-3000:]

    items = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    paths = Counter(_path(item["url"]) for item in items)
    assert [p for p, n in paths.items() if n > 1] == []
    assert set(paths) - set(SAME_TEXT) == EXPECTED
    assert sorted(SAME_TEXT[p] for p in paths if p in SAME_TEXT) == [
        "launch post",
        "press release",
    ]
    assert len(items) == len(EXPECTED) + 2
    pricing = next(item for item in items if _path(item["url"]) == "/pricing/")
    assert pricing["title"] == "Pricing | Acme Widgets"
    assert pricing["text"].startswith("Pricing Every plan includes unlimited viewers")

    assert _stat(log, "dedup/url/filtered") > 0
    assert _stat(log, "dedup/url/redirect_allowed") == 1
    assert _stat(log, "item_scraped_count") == len(EXPECTED) + 2
    assert _stat(log, "dedup/canonical/applied") == 1
    dropped_launch = _stat(log, "dedup/items/exact", 0) + _stat(log, "dedup/items/canonical", 0)
    assert dropped_launch in (0, 1)  # 0: the post was never fetched, its print view stood in
    assert _stat(log, "dedup/items/near") == 1
    assert _stat(log, "dedup/items/unique") == len(EXPECTED) + 2


def test_the_demo_says_what_the_readme_says_and_never_claims_more_than_it_saved(
    tmp_path: Path,
) -> None:
    """The README's demo paragraph names numbers a user will look for; the
    summary's "fetches saved" is at most what plain Scrapy (the same command
    with DEDUP_ENABLED=0) fetches more, and short of it by the one fetch
    docs/report.md names (a skipped copy's redirect)."""
    readme = (PROJECT.parent / "README.md").read_text(encoding="utf-8")
    said = re.search(r"links not followed: (\d+)", readme)
    saved_said = re.search(r'summary line\'s "(\d+) fetches saved"', readme)
    assert said and saved_said
    log = _crawl_site(tmp_path / "items.jsonl")
    plain = _crawl_site(tmp_path / "plain.jsonl", "-s", "DEDUP_ENABLED=0")
    assert _stat(log, "dedup/url/filtered") == int(said.group(1))
    summary = re.search(r"scrapy-dedup summary: (\d+) fetch(?:es)? saved", log)
    assert summary, log[-3000:]
    assert int(summary.group(1)) == int(saved_said.group(1))
    # The print view's text and the post's: one of them dropped (the post is
    # fetched, its host not trusted); the two press releases: one near.
    assert _stat(log, "dedup/items/canonical", 0) + _stat(log, "dedup/items/exact", 0) == 1
    assert _stat(log, "dedup/items/near") == 1
    more = _stat(plain, "downloader/request_count") - _stat(log, "downloader/request_count")
    assert more - 1 <= int(summary.group(1)) <= more
