"""Host template discounting (``DEDUP_NEAR_TEMPLATE``) on a real application's pages.

Crawls Trac once with plain Scrapy (the spider of ``bench_real_app.py``: the text of
each page's ``#content``), then feeds its items, in the order they arrived, through
the real ``ContentDedupPipeline`` (memory store, ``DEDUP_ON_DUPLICATE="mark"``) with
``DEDUP_NEAR_TEMPLATE`` off (before) and on (after), in the same run.

Printed per configuration: items marked exact / near duplicates; near merges of
*distinct* pages, judged on the true texts: a merge is wrong when less than half of
the dropped text's own 3-word shingles (those on fewer than 5 of the site's distinct
texts) are in the text it was merged into; the site's 3-word shingles in no kept
item (% lost); texts with no kept text of 3-word Jaccard >= 0.8 (``bench_real_app``'s
"lost"). Then every near merge of the "after" run, and those that "before" had and
"after" no longer has.

Then the quality checks, through the same pipeline, off and on:

- the labelled pairs of ``tests/text/neardup_corpus.py`` (as ``bench_quality.py``: a fresh
  pipeline per pair, so a cold template): recall per edit kind, false drops per negative kind;
- templated sites (``tests/text/test_templated.py``: 300 template words, 100 of their own,
  real English), ``--pages`` pages per site (a warm template): false drops among them, then
  edited copies of 60 of them per edit kind (swap 0.5/1/2% of the words, insert/delete 2%):
  the share caught (recall);
- the CPU per item (``process_time``) on a duplicate-free stream of real documents of one
  host, off and on, best of ``--rounds`` interleaved rounds.

Usage: python benches/bench_template.py [--url http://127.0.0.1:8800] [--items FILE]
[--depth 3] [--versions]
[--per-kind N] [--sites N] [--pages N] [--rounds N] [--skip trac,pairs,templated,cost]
(``--items``: a JSONL of a plain crawl to reuse; written there when missing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from benches.bench_real_app import SPIDER, crawl, normalize, shingles
from scrapy_dedup.pipeline import ContentDedupPipeline
from tests.text.neardup_corpus import (
    KINDS_NEGATIVE,
    KINDS_POSITIVE,
    insert_delete,
    labelled_pairs,
    shingle_jaccard,
    swap_words,
    vocabulary,
    words_of,
)
from tests.text.test_templated import english_site

COMMON_SHINGLE = 5  # a shingle on this many distinct texts is the site's, not a page's own


def plain_items(
    url: str, cache: Path | None, depth: int = 3, versions: bool = False
) -> list[dict[str, Any]]:
    if cache is not None and cache.exists():
        return [json.loads(line) for line in cache.read_text().splitlines() if line]
    with tempfile.TemporaryDirectory() as tmp:
        spider = Path(tmp) / "trac_spider.py"
        # --versions: the wiki's ?version=N views too (short old versions of pages).
        spider.write_text(SPIDER.replace("version=|", "") if versions else SPIDER)
        settings = {
            "CONCURRENT_REQUESTS": 8,
            "DEPTH_LIMIT": depth,
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
        }
        items: list[dict[str, Any]] = crawl(spider, url, settings)["items"]
    if cache is not None:
        cache.write_text("".join(json.dumps(i) + "\n" for i in items))
    return items


def new_pipeline(template: bool) -> ContentDedupPipeline:
    crawler = get_crawler(
        settings_dict={
            "DEDUP_ON_DUPLICATE": "mark",
            "DEDUP_NEAR_TEMPLATE": template,
            "DEDUP_TEXT_FIELD": "text",
        }
    )
    pipeline = build_from_crawler(ContentDedupPipeline, crawler)
    pipeline.open_spider()
    return pipeline


async def run(items: list[dict[str, Any]], template: bool) -> list[dict[str, Any]]:
    pipeline = new_pipeline(template)
    out = []
    for item in items:
        out.append(await pipeline.process_item(dict(item)))  # marked, never dropped
    pipeline.close_spider()
    return out


def own_shingles(text: str, common: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    return shingles(text) - common


def report(
    name: str, marked: list[dict[str, Any]], site: set[tuple[str, ...]], common: set[Any]
) -> dict[str, tuple[str, float, float]]:
    kept = [i for i in marked if not i.get("duplicate_of")]
    kinds = Counter(i.get("duplicate_kind") for i in marked if i.get("duplicate_of"))
    by_url = {i["url"]: normalize(i["text"]) for i in kept}
    merges: dict[str, tuple[str, float, float]] = {}
    wrong = 0
    for item in marked:
        if item.get("duplicate_kind") != "near":
            continue
        mine = normalize(item["text"])
        theirs = by_url.get(item["duplicate_of"], "")
        a, b = shingles(mine), shingles(theirs)
        whole = len(a & b) / len(a | b)
        own = own_shingles(mine, common)
        share = len(own & b) / len(own) if own else 1.0
        merges[item["url"]] = (item["duplicate_of"], whole, share)
        wrong += share < 0.5
    kept_shingles = set().union(*(shingles(t) for t in by_url.values()))
    pool = [shingles(t) for t in set(by_url.values())]
    no_near = sum(
        1
        for text in {normalize(i["text"]) for i in marked} - set(by_url.values())
        if not any(len(shingles(text) & o) >= 0.8 * len(shingles(text) | o) for o in pool)
    )
    lost = len(site - kept_shingles) / len(site)
    print(
        f"{name:28} kept {len(kept):4}  exact {kinds['exact']:4}  near {kinds['near']:4}  "
        f"distinct pages merged {wrong:3}  site shingles lost {100 * lost:.2f}%  "
        f"texts with no near-same kept {no_near}"
    )
    return merges


async def duplicate_of(pipeline: ContentDedupPipeline, url: str, text: str) -> str | None:
    item = await pipeline.process_item({"url": url, "text": text})
    return item.get("duplicate_of")


async def part_pairs(per_kind: int) -> None:
    pairs = labelled_pairs(per_kind=per_kind)
    print(f"\n== Labelled pairs ({per_kind} per kind, a fresh pipeline each: cold template)")
    print(f"{'kind':22} {'template off':>13} {'template on':>12}")
    for kind in (*KINDS_POSITIVE, *KINDS_NEGATIVE):
        row = []
        for template in (False, True):
            hits = 0
            chosen = [p for p in pairs if p.kind == kind]
            for pair in chosen:
                pipeline = new_pipeline(template)
                await duplicate_of(pipeline, "https://site.test/a", pair.a)
                hits += await duplicate_of(pipeline, "https://site.test/b", pair.b) is not None
            row.append(hits / len(chosen))
        what = "recall" if kind in KINDS_POSITIVE else "dropped"
        print(f"{kind:22} {row[0]:13.3f} {row[1]:12.3f}  ({what})")


EDITS = {
    "word_swap_0.5pct": lambda t, r, v: swap_words(t, max(1, len(words_of(t)) // 200), r, v),
    "word_swap_1pct": lambda t, r, v: swap_words(t, max(1, len(words_of(t)) // 100), r, v),
    "word_swap_2pct": lambda t, r, v: swap_words(t, max(1, len(words_of(t)) // 50), r, v),
    "insert_delete_2pct": lambda t, r, v: insert_delete(t, max(2, len(words_of(t)) // 50), r, v),
}


async def part_templated(sites: int, pages: int) -> None:
    print(
        f"\n== Templated sites: {sites} x {pages} pages (300 template words + 100 own), "
        "then 60 edited copies per kind"
    )
    vocab = vocabulary()
    print(f"{'':14} {'false drops':>12} " + " ".join(f"{k:>18}" for k in EDITS))
    for template in (False, True):
        false = 0
        caught: Counter[str] = Counter()
        for seed in range(sites):
            site = english_site(seed, pages)
            pipeline = new_pipeline(template)
            kept: dict[str, str] = {}
            for n, page in enumerate(site):
                url = f"https://site{seed}.test/{n}"
                first = await duplicate_of(pipeline, url, page)
                if first is None:
                    kept[url] = page
                elif shingle_jaccard(page, kept[first]) < 0.75:
                    false += 1
            rng = random.Random(seed)
            for kind, edit in EDITS.items():
                for n in rng.sample(range(pages), 60):
                    copy = edit(site[n], rng, vocab)
                    url = f"https://site{seed}.test/{n}/copy-{kind}"
                    caught[kind] += await duplicate_of(pipeline, url, copy) is not None
        recall = " ".join(f"{caught[k] / (60 * sites):18.3f}" for k in EDITS)
        print(f"{'template ' + ('on' if template else 'off'):14} {false:12} {recall}")


async def part_cost(rounds: int) -> None:
    """CPU per item (process_time, best of ``rounds`` interleaved rounds) on a
    duplicate-free stream of real documents of one host: learning from every page."""
    import time

    from tests.text.neardup_corpus import documents

    docs = documents()
    best = {False: float("inf"), True: float("inf")}
    for _ in range(rounds):
        for template in (False, True):
            pipeline = new_pipeline(template)
            started = time.process_time()
            for n, doc in enumerate(docs):
                await pipeline.process_item({"url": f"https://site.test/{n}", "text": doc})
            best[template] = min(best[template], time.process_time() - started)
    off, on = (best[t] / len(docs) * 1e6 for t in (False, True))
    print(
        f"\n== CPU per item, {len(docs)} distinct documents (300-1500 words) of one host, "
        f"best of {rounds}: template off {off:.0f} us, on {on:.0f} us ({on / off:.2f}x)"
    )


async def amain(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8800")
    parser.add_argument("--items", type=Path, default=None)
    parser.add_argument("--depth", type=int, default=3, help="DEPTH_LIMIT of the crawl")
    parser.add_argument("--versions", action="store_true", help="follow ?version= links too")
    parser.add_argument("--per-kind", type=int, default=60)
    parser.add_argument("--sites", type=int, default=3)
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the CPU part")
    parser.add_argument("--skip", default="", help="parts to skip: trac,pairs,templated,cost")
    args = parser.parse_args(argv)
    skip = set(args.skip.split(","))
    if "trac" not in skip:
        await part_trac(args.url, args.items, args.depth, args.versions)
    if "pairs" not in skip:
        await part_pairs(args.per_kind)
    if "templated" not in skip:
        await part_templated(args.sites, args.pages)
    if "cost" not in skip:
        await part_cost(args.rounds)
    return 0


async def part_trac(url: str, cache: Path | None, depth: int, versions: bool) -> None:
    items = plain_items(url, cache, depth, versions)
    texts = {normalize(i["text"]) for i in items}
    counts = Counter(s for t in texts for s in shingles(t))
    common = {s for s, n in counts.items() if n >= COMMON_SHINGLE}
    site = set(counts)
    print(
        f"Trac at {url}: {len(items)} items, {len(texts)} distinct texts, "
        f"{len(site)} 3-word shingles ({len(common)} on >= {COMMON_SHINGLE} texts)"
    )
    before = report("DEDUP_NEAR_TEMPLATE=False", await run(items, False), site, common)
    after = report("DEDUP_NEAR_TEMPLATE=True", await run(items, True), site, common)
    print("\nnear merges with DEDUP_NEAR_TEMPLATE=True (true whole J, own part shared):")
    for page, (first, whole, share) in sorted(after.items(), key=lambda x: x[1][2]):
        print(f"  {whole:.2f} {share:.2f}  {page}  ->  {first}")
    print("\nnear merges undone by DEDUP_NEAR_TEMPLATE (whole J, own part shared):")
    for page, (first, whole, share) in sorted(before.items(), key=lambda x: x[1][2]):
        if page not in after:
            print(f"  {whole:.2f} {share:.2f}  {page}  ->  {first}")


if __name__ == "__main__":
    sys.exit(asyncio.run(amain()))
