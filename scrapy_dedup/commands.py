"""``scrapy dedup``: look after a project's dedup state from the command line."""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from scrapy import Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from scrapy_dedup.forget import forget
from scrapy_dedup.stores import StoreError

__all__ = ["DedupCommand"]


class DedupCommand(ScrapyCommand):
    """``scrapy dedup forget NAMESPACE URL... [--prefix PREFIX]``"""

    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return "forget NAMESPACE [URL ...] [--prefix PREFIX]"

    def short_desc(self) -> str:
        return "Forget pages in the dedup store, so the next crawl fetches them again"

    def long_desc(self) -> str:
        return (
            "forget: the next run of the spider (NAMESPACE is its name, or DEDUP_NAMESPACE) "
            "fetches the given URLs again, and every kept page whose URL starts with "
            "--prefix. The store is the project's DEDUP_STORE (or -s DEDUP_STORE=...)."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--prefix", help="forget every kept page whose URL starts with this")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) < 2 or args[0] != "forget":
            raise UsageError("usage: scrapy dedup forget NAMESPACE [URL ...] [--prefix PREFIX]")
        namespace, urls = args[1], args[2:]
        if not urls and not opts.prefix:
            raise UsageError("name the URLs to forget, or --prefix")
        assert self.settings is not None
        try:
            forgotten = forget(
                urls,
                opts.prefix,
                namespace=namespace,
                settings=self.settings,
                spidercls=self._spider(namespace),
            )
        except (StoreError, ValueError) as exc:
            print(f"scrapy dedup forget: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        for url in forgotten:
            print(f"forgotten: {url}")
        print(f"{len(forgotten)} pages forgotten in namespace {namespace!r}")

    def _spider(self, namespace: str) -> type[Spider] | None:
        """The project's spider named ``namespace`` (its settings key its
        pages), or ``None`` outside a project or for a namespace of its own."""
        assert self.settings is not None
        try:
            loader = get_spider_loader(self.settings)
            return loader.load(namespace)
        except Exception:  # no project, or no such spider
            return None
