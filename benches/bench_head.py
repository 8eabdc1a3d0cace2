"""Benchmark reading a page's head for rel=canonical against lxml.html, on hostile and real shapes.

Run from the repository root::

    python benches/bench_head.py              # about 30 s on 2 cores
    python benches/bench_head.py --repeat 3   # quick look

Each body is read twice in the same run: by ``scrapy_dedup.html.read_head``
(with the default 1 MiB limit) and by the anchor, ``lxml.html.fromstring`` of
the same bytes and an XPath for the canonical link, which is what a spider
does without this package. The table gives the best time of ``--repeat``
calls of each (the cyclic GC off, as ``timeit`` does), the ratio ours / lxml,
and what each found.

The hostile bodies are 1 MiB each (the default limit): every shape that made a
Python loop iterate per byte or per character in a hand-written reader, or made
a regex backtrack. The target is that none costs more than about 50 ms. The
realistic bodies are generated: heads as real pages write them, with the
canonical link behind 300-580 KB of inline script or style (the pages the
1 MiB limit is for), after an inline SVG sprite, a hidden ``<iframe>`` or a PHP
warning printed before ``<html>`` (the ``after_head`` cases), and a 2 MB body.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence

import lxml
import lxml.html

from scrapy_dedup.html import read_head

MIB = 1024 * 1024
TARGET_MS = 50.0


def best_time(func: Callable[[], object], repeat: int) -> float:
    """Best wall time of *repeat* calls of *func*, with the cyclic GC off."""
    best = float("inf")
    for _ in range(repeat):
        gc.disable()
        try:
            start = time.perf_counter()
            func()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def lxml_canonical(body: bytes) -> str | None:
    """What a spider gets from lxml: the first ``<link>`` whose rel holds canonical."""
    try:
        doc = lxml.html.fromstring(body)
    except Exception:  # lxml refuses empty and some binary documents
        return "error"
    for link in doc.xpath("//link[@rel][@href]"):
        if "canonical" in link.get("rel", "").lower().split():
            return link.get("href").strip() or None
    return None


def hostile() -> dict[str, bytes]:
    n = MIB
    return {
        "'<' x 1 MiB": b"<" * n,
        "'<a' x N": b"<a" * (n // 2),
        "'<a>' x N": b"<a>" * (n // 3),
        "'<meta>' x N (in head)": b"<meta>" * (n // 6),
        "'<!--' unclosed": b"<!--" + b"x" * n,
        "'<!---->' x N": b"<!---->" * (n // 7),
        "'<link ' x N, no '>'": b"<link " * (n // 6),
        "'<link rel=canonical>' x N": b"<link rel=canonical>" * (n // 20),
        "href= + 1 MiB of '%'": b"<link rel=canonical href=" + b"%" * n,
        "href= + 1 MiB of 'a', then '>'": b"<link rel=canonical href=" + b"a" * (n - 30) + b">",
        "'&#' x N in an attribute": b'<link rel=canonical href="' + b"&#" * (n // 2 - 20) + b'">',
        "'<script>' unclosed": b"<script>" + b"x" * n,
        "'<script><!--<script>' x N": b"<script><!--" + b"<script></script>" * (n // 17),
        "'<style></style>' x N": b"<style></style>" * (n // 15),
        "'<template>' x N (nested)": b"<template>" * (n // 10),
        "'<link a a a ...>'": b"<link " + b"a " * (n // 2) + b">",
        "'<link a=b a=b ...>'": b"<link " + b"a=b " * (n // 4) + b">",
        "'<link rel=canonical a=\"x\" ...>'": b"<link rel=canonical "
        + b'a="x" ' * (n // 6)
        + b">",
        "'<svg>' + '<g>' x N": b"<svg>" + b"<g>" * (n // 3),
        "'<svg><title>' x N": b"<svg><title>" * (n // 12),
        "'<svg>' CDATA unclosed": b"<svg><![CDATA[" + b"]" * n,
        "null bytes": b"\x00" * n,
        "bytes 0-255 repeated": bytes(range(256)) * (n // 256),
        "UTF-16 without BOM": (
            "<html><head>"
            + "<meta name=x content=y>" * 20_000
            + "<link rel=canonical href=/a></head>"
        ).encode("utf-16-le")[:n],
    }


def _script(size: int, rng: random.Random) -> str:
    """Minified-looking JavaScript, with the "<" and "</" of real bundles."""
    parts = []
    total = 0
    while total < size:
        part = (
            f"var a{rng.randrange(10**6)}=function(b,c){{for(var d=0;d<b.length;d++)"
            f"if(b[d]<c)return'<div class=\"x\">'+b[d]+'<\\/div>';return null}};"
        )
        parts.append(part)
        total += len(part)
    return "".join(parts)


def _style(size: int, rng: random.Random) -> str:
    parts = []
    total = 0
    while total < size:
        part = (
            f".c{rng.randrange(10**6)}>a:hover{{color:#{rng.randrange(16**6):06x};margin:0 4px}}"
        )
        parts.append(part)
        total += len(part)
    return "".join(parts)


HEAD = (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    "<title>Blue running shoe &ndash; Example Shop</title>\n"
    '<meta name="description" content="A blue running shoe, sizes 38 to 46.">\n'
    + "".join(
        f'<link rel="alternate" hreflang="{lang}" href="https://example.com/{lang}/p/42">\n'
        for lang in ("de", "fr", "es", "it", "nl", "pl", "pt", "sv")
    )
    + '<link rel="preload" href="/fonts/a.woff2" as="font" crossorigin>\n'
    '<link rel="stylesheet" href="/css/site.css?v=3&amp;m=1">\n'
    '<script async src="https://www.googletagmanager.com/gtag/js?id=G-X"></script>\n'
    "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}"
    "</script>\n"
    "<!--[if lt IE 9]><script src=/html5shiv.js></script><![endif]-->\n"
)
CANONICAL = '<link rel="canonical" href="https://example.com/p/42?color=blue&amp;size=40">\n'
BODY = "</head>\n<body>\n" + '<div class="p"><a href="/p/{0}">Product {0}</a></div>\n'


def realistic() -> dict[str, bytes]:
    rng = random.Random(42)
    body = "".join(BODY.format(i) if i == 0 else BODY[15:].format(i) for i in range(2000))
    sprite = (
        '<svg xmlns="http://www.w3.org/2000/svg" style="display:none"><defs><style>'
        "<![CDATA[ .i{fill:currentColor} ]]></style></defs>"
        + "".join(
            f'<symbol id="i{i}" viewBox="0 0 24 24"><title>icon {i}</title>'
            f'<path d="M{i} 0L24 {i}z"/><g><circle cx="12" cy="12" r="{i % 9}"/></g></symbol>'
            for i in range(150)
        )
        + "</svg>\n"
    )
    php = (
        '<br />\n<b>Warning</b>:  Undefined array key "lang" in '
        "<b>/var/www/html/wp-content/themes/shop/header.php</b> on line <b>12</b><br />\n"
    )
    pages = {
        "typical head, 40 KB body": HEAD + CANONICAL + body[:40_000],
        "typical head, 2 MB body": HEAD + CANONICAL + body * 20,
        "300 KB inline <script>, then canonical": (
            HEAD + f"<script>{_script(300_000, rng)}</script>\n" + CANONICAL + body[:40_000]
        ),
        "580 KB inline <style>, then canonical": (
            HEAD + f"<style>{_style(580_000, rng)}</style>\n" + CANONICAL + body[:40_000]
        ),
        "SVG sprite in head, then canonical": HEAD + sprite + CANONICAL + body[:40_000],
        "hidden <iframe> in head, then canonical": (
            HEAD + '<iframe src="https://www.googletagmanager.com/ns.html?id=GTM-X" height="0" '
            'width="0" style="display:none"></iframe>\n' + CANONICAL + body[:40_000]
        ),
        "PHP warning before <html>": php * 3 + HEAD + CANONICAL + body[:40_000],
    }
    return {name: page.encode() for name, page in pages.items()}


def run(title: str, bodies: dict[str, bytes], repeat: int) -> list[tuple[float, float]]:
    """Prints the table; returns (ours, lxml) in ms for each body."""
    print(f"\n== {title}")
    print(
        f"| {'body':42} | {'size':>8} | {'ours ms':>8} | {'lxml ms':>8} | {'ours/lxml':>9} "
        f"| ours found | lxml found |"
    )
    print(f"|{'-' * 44}|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 11}|{'-' * 12}|{'-' * 12}|")
    ours_times = []
    for name, body in bodies.items():
        head = read_head(body)
        theirs = lxml_canonical(body)
        ours = best_time(lambda body=body: read_head(body), repeat)
        anchor = best_time(lambda body=body: lxml_canonical(body), repeat)
        ours_times.append((ours * 1000, anchor * 1000))
        found = (
            "none" if head.canonical is None else "after head" if head.after_head else "in head"
        )
        other = theirs if theirs in (None, "error") else "found"
        print(
            f"| {name:42} | {len(body) / 1024:6.0f} K | {ours * 1000:8.2f} | {anchor * 1000:8.2f} "
            f"| {ours / anchor:9.2f} | {found:10} | {other or 'none':10} |"
        )
    return ours_times


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="best of this many calls")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    print(
        f"Python {sys.version.split()[0]}, lxml {lxml.__version__}, {platform.machine()}, "
        f"{platform.processor() or platform.platform()}"
    )
    hostile_times = run("hostile bodies (1 MiB each)", hostile(), args.repeat)
    worst, worst_lxml = max(hostile_times)
    realistic_times = run("realistic pages", realistic(), args.repeat)
    verdict = "meets" if worst <= TARGET_MS else "MISSES"
    print(f"\nworst hostile body: {worst:.1f} ms ({verdict} the ~{TARGET_MS:.0f} ms target)")
    if args.json:
        from _results import Results

        results = Results("bench_head", sys.argv[1:] if argv is None else argv)
        results.add(
            "read_head, worst hostile 1 MiB body, vs lxml on that body",
            worst,
            worst_lxml,
            unit="ms",
            target=f"ours <= {TARGET_MS}",
        )
        results.add(
            "read_head, all realistic pages, vs lxml",
            sum(o for o, _ in realistic_times),
            sum(a for _, a in realistic_times),
            unit="ms",
        )
        results.write(args.json)


if __name__ == "__main__":
    main()
