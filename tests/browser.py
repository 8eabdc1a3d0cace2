"""Open a page in a real headless browser: Debian's ``chromium`` package.

``.ci/run`` installs it (and sets ``DEDUP_TEST_BROWSER=required``, so that a
missing browser fails the run there instead of skipping the test).
"""

from __future__ import annotations

import os
import re
import shutil
import socketserver
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# Chromium's own requests (updates, time, accounts), whatever page it opens.
_CHROMIUM_OWN = re.compile(r"[ /](?:[\w.-]+\.)?(?:google\.com|googleapis\.com|gvt1\.com)[:/ ]")
# Chromium's log line for a console message or an uncaught error of the page.
_CONSOLE = re.compile(r":(?:INFO|WARNING|ERROR|VERBOSE\d*):CONSOLE[:(]\d+\)?\] (.*)")


@dataclass
class Rendered:
    dom: str  # the DOM after the page ran, serialized
    console: list[str]  # every console message and uncaught error
    fetched: list[str]  # every request the page made beyond itself (through the proxy)


class _Recorder(socketserver.ThreadingTCPServer):
    """A proxy that answers nothing and records the first line of each request."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.requests: list[str] = []
        recorder = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(4096).decode("latin-1").strip()
                if line:
                    recorder.requests.append(line)
                self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)


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
    """``page`` as headless Chromium renders it. Every request beyond the
    file itself goes to a local proxy that records it and answers 502, so
    nothing reaches a network and every fetch attempt shows in ``fetched``."""
    proxy = _Recorder()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        proc = subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",  # CI runs as root
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",  # the browser's own requests
                "--disable-component-update",
                "--enable-logging=stderr",
                "--v=0",
                f"--proxy-server=http://127.0.0.1:{proxy.server_address[1]}",
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
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [m.group(1) for m in map(_CONSOLE.search, proc.stderr.splitlines()) if m]
    fetched = [line for line in proxy.requests if not _CHROMIUM_OWN.search(line)]
    return Rendered(dom=proc.stdout, console=console, fetched=fetched)
