"""Open a page in a real headless browser: Debian's ``chromium`` package.

``.ci/run`` installs it (and sets ``DEDUP_TEST_BROWSER=required``, so that a
missing browser fails the run there instead of skipping the test).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# Chromium's log line for a console message or an uncaught error of the page.
_CONSOLE = re.compile(r":(?:INFO|WARNING|ERROR|VERBOSE\d*):CONSOLE[:(]\d+\)?\] (.*)")


@dataclass
class Rendered:
    dom: str  # the DOM after the page ran, serialized
    console: list[str]  # every console message and uncaught error


def chromium() -> str:
    """The browser's path; skips the test where there is none (fails in CI)."""
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    message = "no chromium here (apt-get install chromium; .ci/run installs it)"
    if os.environ.get("DEDUP_TEST_BROWSER") == "required":
        pytest.fail(message)
    pytest.skip(message)


def render(page: Path, *, timeout: float = 90) -> Rendered:
    """``page`` as headless Chromium renders it, with no network: every
    request other than to the file itself goes to a proxy that is not there."""
    proc = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--proxy-server=127.0.0.1:9",  # the discard port: nothing is fetched
            "--proxy-bypass-list=<-loopback>",
            f"--user-data-dir={page.parent / '.chromium-profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [m.group(1) for m in map(_CONSOLE.search, proc.stderr.splitlines()) if m]
    return Rendered(dom=proc.stdout, console=console)
