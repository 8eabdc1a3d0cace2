"""Run every benchmark in benches/ in a quick mode and print one table of results.

Run from the repository root::

    python benches/run_all.py                    # every bench, quick sizes: ~10 min on 2 cores
    python benches/run_all.py --list             # the benches, their quick options and Redis use
    python benches/run_all.py --only url_stage,overhead
    python benches/run_all.py --redis redis://127.0.0.1:6379/0 --out /tmp/bench-results

Each bench runs as its own process (``python benches/bench_<name>.py <quick
options> --json <out>/bench_<name>.json``); its output goes to
``<out>/bench_<name>.txt`` (``-v``: also to the terminal) and its results
are read from the JSON it writes. The final table gives, per metric, our
figure, the anchor's (measured in the same run: Scrapy's ``RFPDupeFilter``
for the URL stage, the recipe's SimHash for near duplicates, plain Scrapy
for crawls, the previous code for rewrites), ours / anchor, the project's
target where it states one, and whether it is met. A bench that fails
(non-zero exit, timeout, no JSON) gets a FAILED row and the others still
run; the exit status is 1 if any failed (a missed target is reported, not
a failure).

Redis: ``--redis URI``, else the ``DEDUP_BENCH_REDIS`` environment variable,
else ``redis://127.0.0.1:6379/0``. It is pinged first; the benches with Redis
rows get it only if it answers, else they run without those rows and a line
says so (``--no-redis`` forces that). ``bench_store_faults`` starts a
``redis-server`` of its own and is skipped without one on ``PATH``.

Quick modes are small: the figures are noisy on a shared machine. Run a
bench alone with its defaults before trusting a ratio near a target.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Bench:
    """A bench in benches/: its quick options and how it uses Redis."""

    name: str  # bench_<name>.py
    quick: tuple[str, ...]
    about: str
    seconds: int  # rough time of the quick mode on the 2-core VM
    # Options added when Redis answers (the URI is appended to "--redis").
    with_redis: tuple[str, ...] = ()
    # Options used instead of ``quick``'s ``--only`` value when Redis answers.
    needs: Callable[[], str | None] = field(default=lambda: None, compare=False)


def _redis_server() -> str | None:
    return None if shutil.which("redis-server") else "no redis-server on PATH"


BENCHES = [
    Bench(
        "url_stage",
        ("--n", "30000", "--mem-n", "100000", "--canon-n", "20000", "--repeat", "3"),
        "CanonicalDupeFilter vs RFPDupeFilter: time, memory",
        40,
    ),
    Bench(
        "latency",
        ("--sizes", "1000000"),
        "CompactMap per-call latency vs RFPDupeFilter's set",
        20,
    ),
    Bench(
        "stores",
        ("--quick", "--no-cluster", "--big-n", "1000000"),
        "memory/SQLite/Redis stores vs RFPDupeFilter",
        50,
        with_redis=("--redis",),
    ),
    Bench("sqlite_open", ("--n", "300000"), "opening an SQLite store", 15),
    Bench("restore", ("--n", "100000"), "resuming a 100k-request frontier vs plain", 60),
    Bench(
        "simhash",
        ("--sizes", "10000", "100000", "1000000", "--queries", "5000", "--repeat", "5"),
        "SimHash vs the recipe's; SimhashIndex vs a numpy scan",
        25,
    ),
    Bench(
        "quality",
        ("--per-kind", "60", "--thresholds", "0.75"),
        "near-dup recall and false drops vs the recipe's SimHash",
        10,
    ),
    Bench(
        "near",
        ("--skip", "scale", "--templates", "2", "--pages", "1000", "--reps", "2"),
        "MinHash vs datasketch and rensa",
        20,
    ),
    Bench("text", ("--quick", "--repeat", "3"), "text steps vs the previous code", 20),
    Bench("pipeline", ("--rounds", "3"), "ContentDedupPipeline per item vs commit 1ec33b8", 40),
    Bench("head", ("--repeat", "5"), "the rel=canonical head reader vs lxml", 10),
    Bench(
        "hostile",
        ("--count", "10", "--pages", "10", "--repeat", "3"),
        "hostile pages; their crawl vs plain Scrapy",
        30,
    ),
    Bench(
        "store_faults",
        ("--seconds", "5", "--warmup", "2"),
        "crawl rate with a frozen Redis (own redis-server)",
        30,
        needs=_redis_server,
    ),
    Bench(
        "canonical_trust",
        ("--hosts", "2", "--articles", "60"),
        "rel=canonical verified before trusted: fetches vs always and plain Scrapy",
        40,
    ),
    Bench(
        "learn",
        ("--products", "500", "--orders", "2"),
        "learned URL rules, simulated crawl",
        15,
    ),
    Bench(
        "learn_crawl",
        ("--products", "150"),
        "learned URL rules in real crawls vs plain Scrapy",
        75,
        with_redis=("--redis",),
    ),
    Bench(
        "frontier",
        ("--pages", "1000", "--rounds", "1", "--dup-free", "--only", "plain,memory,sqlite"),
        "the frontier's cost per request in real crawls",
        60,
        with_redis=("--only", "plain,memory,sqlite,redis", "--redis"),
    ),
    Bench(
        "overhead",
        ("--pages", "3000", "--repeat", "3"),
        "the add-on's overhead on a duplicate-free site vs plain Scrapy",
        270,
    ),
]


def bench_files() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def redis_answers(uri: str) -> str | None:
    """None if the Redis at ``uri`` answers a PING, else why not."""
    try:
        import redis

        client = redis.Redis.from_url(uri, socket_timeout=2)
        client.ping()
        client.close()
    except Exception as exc:  # any failure: no Redis
        return f"{type(exc).__name__}: {exc}"
    return None


def command(bench: Bench, redis_uri: str | None, json_path: Path) -> list[str]:
    args = list(bench.quick)
    if redis_uri and bench.with_redis:
        extra = list(bench.with_redis)
        if "--only" in extra and "--only" in args:  # the Redis list replaces the quick one
            at = args.index("--only")
            del args[at : at + 2]
        args += [*extra, redis_uri]
    return [sys.executable, str(HERE / f"bench_{bench.name}.py"), *args, "--json", str(json_path)]


@dataclass
class Outcome:
    bench: str
    status: str  # "ok", "FAILED ...", "skipped ..."
    wall: float = 0.0
    cpu: float = 0.0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def run_bench(
    bench: Bench, redis_uri: str | None, out: Path, timeout: float, echo: bool
) -> Outcome:
    json_path = out / f"bench_{bench.name}.json"
    log_path = out / f"bench_{bench.name}.txt"
    json_path.unlink(missing_ok=True)
    argv = command(bench, redis_uri, json_path)
    shown = " ".join(a if a != sys.executable else "python" for a in argv)
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    status = "ok"
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {shown}\n")
        log.flush()
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # its lines as they come
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        assert proc.stdout is not None
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the bench and the crawls it started

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()  # the file can be followed while the bench runs
                if echo:
                    print(f"  | {line}", end="", flush=True)
            proc.wait()
        finally:
            timer.cancel()
        if timed_out.is_set():
            status = f"FAILED: timed out after {timeout:.0f} s"
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcome = Outcome(
        bench.name,
        status,
        wall=time.perf_counter() - started,
        cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    )
    if status == "ok" and proc.returncode:
        tail = [line for line in log_path.read_text().splitlines() if line.strip()][-1:]
        outcome.status = f"FAILED: exit status {proc.returncode}"
        outcome.note = tail[0][:150] if tail else ""
    if json_path.exists():
        outcome.metrics = json.loads(json_path.read_text())["metrics"]
    elif outcome.status == "ok":
        outcome.status = "FAILED: no JSON results written"
    return outcome


# --- The table -----------------------------------------------------------------------


def number(value: float | None, unit: str = "") -> str:
    """``value`` with its unit, to about three significant digits (counts whole)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if isinstance(value, int):
        text = f"{value:,}"
    elif not unit and magnitude < 10:
        text = f"{value:.3f}"
    elif magnitude >= 100:
        text = f"{value:,.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit else text


def target_text(target: str | None, unit: str, note: str = "") -> str:
    if not target:
        return ""
    subject, op, limit = target.split()
    sign = {"<=": "≤", ">=": "≥", "==": "="}[op]
    value: float = float(limit)
    if value.is_integer():
        value = int(value)
    text = f"{sign} {value:.3g}x" if subject == "ratio" else f"{sign} {number(value, unit)}"
    return f"{text} ({note})" if note else text


def verdict(metric: dict[str, Any]) -> str:
    if metric.get("passed") is None:
        return ""
    return "met" if metric["passed"] else "MISSED"


def table(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| benchmark | metric | ours | anchor | ratio | target | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for outcome in outcomes:
        if outcome.status != "ok":
            why = outcome.status + (f" ({outcome.note})" if outcome.note else "")
            lines.append(f"| {outcome.bench} | **{why}** | | | | | |")
        for m in outcome.metrics:
            ratio = f"{m['ratio']:.3f}x" if m.get("ratio") is not None else ""
            unit = m.get("unit", "")
            lines.append(
                f"| {outcome.bench} | {m['metric']} | {number(m['ours'], unit)} "
                f"| {number(m.get('anchor'), unit)} | {ratio} "
                f"| {target_text(m.get('target'), unit, m.get('note', ''))} | {verdict(m)} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="benches to run, comma-separated (url_stage,overhead)")
    parser.add_argument("--list", action="store_true", help="list the benches and exit")
    parser.add_argument(
        "--redis",
        default=os.environ.get("DEDUP_BENCH_REDIS", "redis://127.0.0.1:6379/0"),
        help="Redis for the benches with Redis rows (default: $DEDUP_BENCH_REDIS, "
        "else redis://127.0.0.1:6379/0)",
    )
    parser.add_argument("--no-redis", action="store_true", help="run without any Redis rows")
    parser.add_argument("--out", help="directory for each bench's output and JSON (a new tmp dir)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per bench (900)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also print every output")
    args = parser.parse_args(argv)

    known = {b.name: b for b in BENCHES}
    unlisted = [name for name in bench_files() if name not in known]
    if args.list:
        total = 0
        for b in BENCHES:
            total += b.seconds
            redis_use = " + Redis rows" if b.with_redis else ""
            needs = " (own redis-server)" if b.name == "store_faults" else ""
            print(f"  {b.name:12s} ~{b.seconds:3d} s  {b.about}{redis_use}{needs}")
            print(f"  {'':12s}        quick: {' '.join(b.quick)}")
        for name in unlisted:
            print(f"  {name:12s} (not in run_all's list: not run)")
        print(f"  about {total / 60:.0f} min in all on the 2-core VM")
        return 0
    selected = list(BENCHES)
    if args.only:
        wanted = [w.strip().removeprefix("bench_") for w in args.only.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in known]
        if unknown:
            parser.error(f"unknown bench(es) {unknown}; known: {', '.join(known)}")
        selected = [known[w] for w in dict.fromkeys(wanted)]

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-results-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    print("scrapy-dedup: every benchmark, quick mode")
    print(f"  date      {datetime.datetime.now().isoformat(timespec='minutes')}")
    print(f"  python    {platform.python_implementation()} {platform.python_version()}")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"  machine   {os.cpu_count()} cpus ({platform.machine()}), load avg {load}")
    print(f"  output    {out}")
    redis_uri: str | None = None
    if args.no_redis:
        print("  redis     --no-redis: the benches run without their Redis rows")
    elif any(b.with_redis for b in selected):
        why = redis_answers(args.redis)
        if why is None:
            redis_uri = args.redis
            print(f"  redis     {redis_uri} answers: the Redis rows run")
        else:
            print(f"  redis     {args.redis} does not answer ({why}): Redis rows skipped")
    for name in unlisted:
        print(f"  skipped   bench_{name}.py: not in run_all's list of quick modes")
    print()

    outcomes: list[Outcome] = []
    for bench in selected:
        skip = bench.needs()
        if skip:
            print(f"  {bench.name:12s} SKIPPED: {skip}", flush=True)
            outcomes.append(Outcome(bench.name, f"skipped: {skip}"))
            continue
        if bench.with_redis and redis_uri is None:
            print(f"  {bench.name:12s} (without its Redis rows: no Redis)", flush=True)
        print(f"  {bench.name:12s} running (~{bench.seconds} s) ...", end="", flush=True)
        if args.verbose:
            print()
        outcome = run_bench(bench, redis_uri, out, args.timeout, args.verbose)
        outcomes.append(outcome)
        print(
            f"{'' if args.verbose else ' '}{outcome.status} in {outcome.wall:.0f} s "
            f"(CPU {outcome.cpu:.0f} s), {len(outcome.metrics)} metrics; "
            f"output in {out / f'bench_{bench.name}.txt'}",
            flush=True,
        )

    failed = [o for o in outcomes if o.status.startswith("FAILED")]
    missed = [m for o in outcomes for m in o.metrics if m.get("passed") is False]
    print(
        f"\nResults ({datetime.date.today().isoformat()}, {os.cpu_count()} cpus, quick mode; "
        f"ratio = ours / anchor, measured in the same run)\n"
    )
    print(table(outcomes))
    print(
        f"\n{len(outcomes)} benches in {time.perf_counter() - started:.0f} s: "
        f"{len(failed)} failed, {len(missed)} targets missed; load avg at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    for o in failed:
        print(f"  {o.bench}: {o.status}; see {out / f'bench_{o.bench}.txt'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
