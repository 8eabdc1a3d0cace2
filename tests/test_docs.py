"""The documentation: every stat is in docs/stats.md, the README renders on a
package index (no relative links), and links between docs pages resolve."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import scrapy_dedup
from scrapy_dedup.url import RULES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = Path(scrapy_dedup.__file__).resolve().parent
STAT = re.compile(r"dedup(/[a-z0-9_]+)+")

# Stat names built with f-strings ("{}" for each value put in), and how
# docs/stats.md names them: each form must be there. A new f-string stat fails
# the test until it is added here and documented.
PATTERNS: dict[str, list[str]] = {
    "dedup/url/filtered/{}": [  # rule names checked below
        "dedup/url/filtered/<rule>",
        *(f"dedup/url/filtered/{reason}" for reason in ("exact", "previous_run", "rel_canonical")),
    ],
    "dedup/canonical/ignored/{}": [
        "dedup/canonical/ignored/<reason>",
        *(
            f"dedup/canonical/ignored/{reason}"
            for reason in ("status", "scheme", "unparseable", "other_site", "offsite", "homepage")
        ),
    ],
    "dedup/items/{}": [
        f"dedup/items/{kind}" for kind in ("exact", "near", "canonical", "unchanged")
    ],
    "dedup/keep/released/{}": [
        f"dedup/keep/released/{why}" for why in ("arrived", "failed", "timeout")
    ],
    "dedup/learn/rule/{}/skipped": ["dedup/learn/rule/<host>: <rule>/skipped"],
    "dedup/url/saved/{}": [
        f"dedup/url/saved/{source}"
        for source in ("url_rules", "previous_run", "rel_canonical", "learned", "dont_filter")
    ],
}


def stats_in_code() -> tuple[set[str], set[str]]:
    """(stat names written out in the package, f-string patterns of stat names)."""
    literal: set[str] = set()
    patterns: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.JoinedStr):
                text = "".join(
                    str(part.value) if isinstance(part, ast.Constant) else "{}"
                    for part in node.values
                )
                if text.startswith("dedup/"):
                    patterns.add(text)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and STAT.fullmatch(node.value)
            ):
                literal.add(node.value)
    return literal, patterns


def test_every_stat_the_package_counts_is_in_the_stats_page() -> None:
    doc = (DOCS / "stats.md").read_text("utf-8")
    literal, patterns = stats_in_code()
    assert "dedup/url/seen" in literal and "dedup/items/{}" in patterns  # the scan works
    assert sorted(patterns - PATTERNS.keys()) == []  # document it, then add it to PATTERNS
    documented_forms = [form for pattern in patterns for form in PATTERNS[pattern]]
    missing = [name for name in sorted(literal) + documented_forms if f"`{name}`" not in doc]
    assert missing == []
    # dedup/url/filtered/<rule>: one counter per URL rule, each named on the page.
    assert [rule for rule in RULES if f"`{rule}`" not in doc] == []


def test_the_stats_page_names_no_stat_the_package_does_not_count() -> None:
    doc = (DOCS / "stats.md").read_text("utf-8")
    literal, patterns = stats_in_code()
    known = literal | {form for pattern in patterns for form in PATTERNS[pattern]}
    documented = set(re.findall(r"`(dedup/[^`]+)`", doc))
    assert sorted(documented - known) == []


def without_fences(markdown: str) -> str:
    """``markdown`` without fenced code blocks, where ``#`` starts no heading."""
    return re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)


def without_code(markdown: str) -> str:
    """``markdown`` without code blocks and inline code, where ``](`` is no link."""
    return re.sub(r"`[^`\n]*`", "", without_fences(markdown))


def link_targets(markdown: str) -> list[str]:
    """Targets of inline links and images, reference definitions and HTML links."""
    text = without_code(markdown)
    return (
        re.findall(r"\]\(\s*<?([^)\s>]*)", text)
        + re.findall(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)", text, flags=re.MULTILINE)
        + re.findall(r"""(?:href|src)\s*=\s*["']([^"']*)""", text)
    )


def test_the_readme_has_no_relative_links() -> None:
    # PyPI shows README.md as the package's page, where a link to docs/... or
    # to #a-heading of another page leads nowhere: name docs pages as text.
    targets = link_targets((ROOT / "README.md").read_text("utf-8"))
    assert [t for t in targets if not re.match(r"(https?://|mailto:)", t)] == []


def test_relative_links_are_found() -> None:
    text = "[a](docs/x.md) [b](#c) `[d](e.md)` [f]: g.md\n<a href='h.md'>i</a>\n```\n[j](k)\n```\n"
    assert link_targets(text) == ["docs/x.md", "#c", "h.md"]
    assert link_targets("[f]: g.md\n") == ["g.md"]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = without_fences(path.read_text("utf-8")).replace("`", "")
    return {slug(h) for h in re.findall(r"^#{1,6} +(.+)$", text, flags=re.MULTILINE)}


def test_links_between_docs_pages_resolve() -> None:
    broken = []
    for page in sorted(DOCS.glob("*.md")):
        for target in link_targets(page.read_text("utf-8")):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.exists() or (anchor and anchor not in anchors(linked)):
                broken.append(f"{page.name}: {target}")
    assert broken == []


def test_the_docs_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text("utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
    assert [name for name in pages if f"]({name})" not in index] == []
    readme = (ROOT / "README.md").read_text("utf-8")
    assert [name for name in pages if f"`docs/{name}`" not in readme] == []
