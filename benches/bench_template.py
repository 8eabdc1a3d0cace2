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

Usage: python benches/bench_template.py [--url http://127.0.0.1:8800] [--items FILE]
(``--items``: a JSONL of a plain crawl to reuse; written there when missing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy.exceptions import DropItem  # noqa: E402
from scrapy.utils.misc import build_from_crawler  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from benches.bench_real_app import SPIDER, crawl, normalize, shingles  # noqa: E402
from scrapy_dedup.pipeline import ContentDedupPipeline  # noqa: E402

COMMON_SHINGLE = 5  # a shingle on this many distinct texts is the site's, not a page's own


def plain_items(url: str, cache: Path | None) -> list[dict[str, Any]]:
    if cache is not None and cache.exists():
        return [json.loads(line) for line in cache.read_text().splitlines() if line]
    with tempfile.TemporaryDirectory() as tmp:
        spider = Path(tmp) / "trac_spider.py"
        spider.write_text(SPIDER)
        settings = {"CONCURRENT_REQUESTS": 8, "DEPTH_LIMIT": 3, "ROBOTSTXT_OBEY": False,
                    "TELNETCONSOLE_ENABLED": False}
        items: list[dict[str, Any]] = crawl(spider, url, settings)["items"]
    if cache is not None:
        cache.write_text("".join(json.dumps(i) + "\n" for i in items))
    return items


async def run(items: list[dict[str, Any]], template: bool) -> list[dict[str, Any]]:
    crawler = get_crawler(
        settings_dict={
            "DEDUP_ON_DUPLICATE": "mark",
            "DEDUP_NEAR_TEMPLATE": template,
            "DEDUP_TEXT_FIELD": "text",
        }
    )
    pipeline = build_from_crawler(ContentDedupPipeline, crawler)
    pipeline.open_spider()
    out = []
    for item in items:
        try:
            out.append(await pipeline.process_item(dict(item)))
        except DropItem:  # pragma: no cover - mark mode
            pass
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
        if not any(
            len(shingles(text) & o) >= 0.8 * len(shingles(text) | o) for o in pool
        )
    )
    lost = len(site - kept_shingles) / len(site)
    print(
        f"{name:28} kept {len(kept):4}  exact {kinds['exact']:4}  near {kinds['near']:4}  "
        f"distinct pages merged {wrong:3}  site shingles lost {100 * lost:.2f}%  "
        f"texts with no near-same kept {no_near}"
    )
    return merges


async def amain(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8800")
    parser.add_argument("--items", type=Path, default=None)
    args = parser.parse_args(argv)
    items = plain_items(args.url, args.items)
    texts = {normalize(i["text"]) for i in items}
    counts = Counter(s for t in texts for s in shingles(t))
    common = {s for s, n in counts.items() if n >= COMMON_SHINGLE}
    site = set(counts)
    print(
        f"Trac at {args.url}: {len(items)} items, {len(texts)} distinct texts, "
        f"{len(site)} 3-word shingles ({len(common)} on >= {COMMON_SHINGLE} texts)"
    )
    before = report("DEDUP_NEAR_TEMPLATE=False", await run(items, False), site, common)
    after = report("DEDUP_NEAR_TEMPLATE=True", await run(items, True), site, common)
    print("\nnear merges with DEDUP_NEAR_TEMPLATE=True (true whole J, own part shared):")
    for url, (first, whole, share) in sorted(after.items(), key=lambda x: x[1][2]):
        print(f"  {whole:.2f} {share:.2f}  {url}  ->  {first}")
    print("\nnear merges undone by DEDUP_NEAR_TEMPLATE (whole J, own part shared):")
    for url, (first, whole, share) in sorted(before.items(), key=lambda x: x[1][2]):
        if url not in after:
            print(f"  {whole:.2f} {share:.2f}  {url}  ->  {first}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(amain()))
