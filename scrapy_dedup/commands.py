"""``scrapy dedup``: look after a project's dedup state from the command line.

- ``scrapy dedup explain [NAMESPACE] URL...``: each URL's key, the rules
  that made it, learned rules, what the store holds, and which of the URLs
  are one page;
- ``scrapy dedup stats NAMESPACE``: what the store holds;
- ``scrapy dedup forget NAMESPACE [URL...] [--prefix PREFIX]``: fetch again;
- ``scrapy dedup reset NAMESPACE --yes``: forget everything (``DEDUP_RESET``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, ClassVar

from scrapy import Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from scrapy_dedup.explain import (
    Project,
    close_store,
    explain,
    format_explain,
    format_stats,
    store_stats,
)
from scrapy_dedup.forget import forget
from scrapy_dedup.stores import StoreError, redact

__all__ = ["DedupCommand"]

_USAGE = (
    "explain [NAMESPACE] URL [URL ...] | stats NAMESPACE | "
    "forget NAMESPACE [URL ...] [--prefix PREFIX] | reset NAMESPACE --yes"
)


def _again(namespace: str, opts: argparse.Namespace) -> str:
    """``scrapy dedup reset NAMESPACE --yes`` with the ``-s`` options given
    (a password in them shown as ``***``, and said so)."""
    words = ["scrapy", "dedup", "reset", namespace, "--yes"]
    hidden = False
    for option in getattr(opts, "set", None) or []:
        shown = redact(option)
        hidden |= shown != option
        words += ["-s", shown]
    command = shlex.join(words)
    return command + ("  (with your password in place of ***)" if hidden else "")


class DedupCommand(ScrapyCommand):
    """``scrapy dedup explain|stats|forget|reset``"""

    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_LEVEL": "WARNING"}

    def syntax(self) -> str:
        return _USAGE

    def short_desc(self) -> str:
        return "Explain why a URL is (not) fetched; look after the dedup store"

    def long_desc(self) -> str:
        return (
            "explain: each URL's key, every rule that changed it (fixed or learned), which "
            "of the URLs are one page, and (with a store) whether the next run skips it "
            "in NAMESPACE (by default the project's one spider, --spider NAME or "
            "DEDUP_NAMESPACE).\n"
            "stats: what the store holds for a namespace (a spider's name, or "
            "DEDUP_NAMESPACE): pages, texts, frontier, top hosts, learned rules.\n"
            "forget: the next run fetches the given URLs again, and every kept page whose "
            "URL starts with --prefix.\n"
            "reset: forget everything of the namespace, as one run with DEDUP_RESET=1 does.\n"
            "The store is the project's DEDUP_STORE (or -s DEDUP_STORE=...)."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--prefix", help="forget: every kept page whose URL starts with this")
        parser.add_argument(
            "--spider", help="explain: the spider whose settings and namespace to use"
        )
        parser.add_argument("--yes", action="store_true", help="reset: yes, forget it all")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in ("explain", "stats", "forget", "reset"):
            raise UsageError(f"usage: scrapy dedup {_USAGE}")
        action, rest = args[0], args[1:]
        try:
            getattr(self, f"_{action}")(rest, opts)
        except (StoreError, ValueError) as exc:
            print(f"scrapy dedup {action}: {exc}", file=sys.stderr)
            self.exitcode = 1

    def _explain(self, args: list[str], opts: argparse.Namespace) -> None:
        # A NAMESPACE first, as the other commands take it (a URL has "://").
        given = args[0] if len(args) > 1 and "://" not in args[0] else None
        urls = args[1:] if given is not None else args
        if not urls:
            raise UsageError("name the URLs to explain")
        spider = opts.spider or given
        spidercls = self._spider(spider) if spider else self._only_spider()
        if opts.spider and spidercls is None:
            raise UsageError(f"no spider named {opts.spider!r} in this project")
        project = Project.load(self.settings, spidercls)
        namespace = given or project.config.namespace or (spidercls.name if spidercls else None)
        stored = project.config.store.strip().lower() != "memory"
        explained = explain(urls, project=project, namespace=namespace if stored else None)
        print(format_explain(explained, learning=project.config.learn))
        if not stored:
            print("\n(store: memory, which keeps nothing between runs)")
        elif namespace is None:
            print("\n(name the namespace first, scrapy dedup explain NAMESPACE URL ..., to see")
            print("what the store holds for these URLs)")
        else:
            print(f"\n(store: {project.describe_store(namespace)})")

    def _stats(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("usage: scrapy dedup stats NAMESPACE")
        project = Project.load(self.settings, self._spider(args[0]))
        print(format_stats(store_stats(project=project, namespace=args[0])))

    def _forget(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("usage: scrapy dedup forget NAMESPACE [URL ...] [--prefix PREFIX]")
        namespace, urls = args[0], args[1:]
        if not urls and not opts.prefix:
            raise UsageError("name the URLs to forget, or --prefix")
        forgotten = forget(
            urls,
            opts.prefix,
            namespace=namespace,
            settings=self.settings,
            spidercls=self._spider(namespace),
        )
        for url in forgotten:
            print(f"forgotten: {url}")
        print(f"{len(forgotten)} pages forgotten in namespace {namespace!r}")

    def _reset(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("usage: scrapy dedup reset NAMESPACE --yes")
        namespace = args[0]
        project = Project.load(self.settings, self._spider(namespace))
        if project.config.store.strip().lower() == "memory":
            raise StoreError(
                "DEDUP_STORE is 'memory', which keeps nothing between runs: there is nothing "
                "to reset (name the store: -s DEDUP_STORE=sqlite:///dedup.db or redis://...)"
            )
        if not opts.yes:
            print(format_stats(store_stats(project=project, namespace=namespace)))
            print(f"\nThis forgets all of the above. Run: {_again(namespace, opts)}")
            self.exitcode = 1
            return
        store = project.open_store(namespace)
        try:
            store.clear()
        finally:
            close_store(store)
        print(f"{project.describe_store(namespace)}: reset, the next run starts from nothing")

    def _spider(self, name: str) -> type[Spider] | None:
        """The project's spider named ``name`` (its settings key its pages),
        or ``None`` outside a project or for a namespace of its own."""
        assert self.settings is not None
        try:
            return get_spider_loader(self.settings).load(name)
        except Exception:  # no project, or no such spider
            return None

    def _only_spider(self) -> type[Spider] | None:
        """The project's one spider, if it has exactly one."""
        assert self.settings is not None
        try:
            loader = get_spider_loader(self.settings)
            names = loader.list()
            return loader.load(names[0]) if len(names) == 1 else None
        except Exception:
            return None
