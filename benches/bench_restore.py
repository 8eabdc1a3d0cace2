"""Benchmark how soon a crawl that resumes a large frontier sends its first request.

Run from the repository root::

    python benches/bench_restore.py                 # 100,000 pending requests: ~1 min
    python benches/bench_restore.py --n 20000       # quick look
    python benches/bench_restore.py --code /tmp/old # another checkout's scrapy_dedup

An SQLite store is filled with ``--n`` pending requests (the frontier an
interrupted run leaves: ``add_pending`` rows of real requests as JSON), then
a crawl with ``ADDONS = {"scrapy_dedup.DedupAddon": 0}`` and that store starts
in a fresh subprocess. Measured, in that process: the seconds from
``process.crawl()`` (the store is opened and its frontier read after it) to
the first ``request_reached_downloader`` (the first request out), and the
longest the reactor went without a turn during the first 20 seconds (a
``LoopingCall`` every 10 ms records its lateness). The anchor, in the same
run: plain Scrapy whose ``start()`` yields the same ``--n`` requests. The
pages are served by a local site that answers every path at once; the
crawl stops (``CLOSESPIDER_TIMEOUT``) after 20 seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benches"))

from _results import Results  # noqa: E402

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess

spec = json.loads(sys.argv[2])
times = {}


class Bench(scrapy.Spider):
    name = "bench"

    async def start(self):
        for i in range(spec["plain"]):
            yield scrapy.Request(spec["site"] + f"/p/{i}")

    def parse(self, response):
        pass


def started():
    from twisted.internet import reactor
    from twisted.internet.task import LoopingCall

    times["start"] = time.monotonic()
    times["stall"] = 0.0
    last = [time.monotonic()]

    def tick():
        now = time.monotonic()
        if now - times["start"] < 20:
            times["stall"] = max(times["stall"], now - last[0] - 0.01)
        last[0] = now

    LoopingCall(tick).start(0.01)


def reached(request):
    times.setdefault("first", time.monotonic())


process = CrawlerProcess(spec["settings"])
crawler = process.create_crawler(Bench)
crawler.signals.connect(started, signal=signals.engine_started)
crawler.signals.connect(reached, signal=signals.request_reached_downloader)
times["crawl"] = time.monotonic()
process.crawl(crawler)
process.start()
print(json.dumps({
    "first": times.get("first", 0) - times["crawl"],
    "stall": times["stall"],
    "restored": crawler.stats.get_value("dedup/frontier/restored", 0),
}))
"""


class _Quick(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body><p>page</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def fill(db: Path, site: str, n: int, code: Path) -> None:
    """``n`` pending requests in namespace ``bench``, as an interrupted run leaves them."""
    script = r"""
import sys
sys.path.insert(0, sys.argv[1])
from scrapy import Request, Spider
from scrapy.settings import Settings
from scrapy_dedup.config import DedupConfig
from scrapy_dedup.keys import RequestKeys
from scrapy_dedup.serialize import request_to_json
from scrapy_dedup.stores import open_store

class Bench(Spider):
    name = "bench"
    def parse(self, response):
        pass

spider = Bench()
keys = RequestKeys(DedupConfig.from_settings(Settings({})).canonicalizer())
store = open_store("sqlite:///" + sys.argv[2], "bench")
for i in range(int(sys.argv[4])):
    request = Request(sys.argv[3] + f"/p/{i}", callback=spider.parse)
    store.add_pending(keys.compute(request).key, request_to_json(request, spider)[0])
store.flush()
store.close()
"""
    subprocess.run([sys.executable, "-c", script, str(code), str(db), site, str(n)], check=True)


def run(code: Path, site: str, settings: dict[str, Any], plain: int) -> dict[str, float]:
    spec = {"site": site, "settings": settings, "plain": plain}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(code), json.dumps(spec)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="pending requests")
    parser.add_argument("--code", type=Path, default=ROOT, help="where scrapy_dedup is")
    parser.add_argument("--json", help="write the results here (for run_all.py)")
    args = parser.parse_args(argv)

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quick)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_address[1]}"
    common = {"LOG_LEVEL": "ERROR", "CLOSESPIDER_TIMEOUT": 20, "TELNETCONSOLE_ENABLED": False}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "d.db"
        fill(db, site, args.n, args.code)
        ours = run(
            args.code,
            site,
            {
                **common,
                "ADDONS": {"scrapy_dedup.DedupAddon": 0},
                "DEDUP_STORE": f"sqlite:///{db}",
            },
            plain=0,
        )
        plain = run(args.code, site, common, plain=args.n)
    server.shutdown()

    print(f"{args.n:,} pending requests ({args.code})")
    print(f"{'':28} {'add-on':>10} {'plain':>10} {'ratio':>7}")
    for name, label in (
        ("first", "first request out (s)"),
        ("stall", "longest reactor stall (s)"),
    ):
        ratio = ours[name] / plain[name] if plain[name] else float("nan")
        print(f"{label:28} {ours[name]:10.3f} {plain[name]:10.3f} {ratio:7.2f}")
    print(f"restored: {ours['restored']:,}")
    if args.json:
        results = Results("bench_restore", sys.argv[1:] if argv is None else argv)
        results.add(
            "first request out, s",
            ours["first"],
            plain["first"],
            unit="s",
            target="ours <= 1",
            note=f"{args.n:,} pending requests; anchor: plain Scrapy, as many start requests",
        )
        results.add("longest reactor stall, s", ours["stall"], plain["stall"], unit="s")
        results.write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
