"""The package's layers: pure algorithms below, Scrapy components on top, no cycles.

- ``url/``, ``html/``, ``text/``, ``stores/``, ``learn/`` and ``keys.py`` import nothing
  from Scrapy and nothing from the components;
- ``url/``, ``text/`` and ``learn/`` import no other part of the package;
- no module imports another that imports it back (module-level imports and
  imports inside functions alike; ``TYPE_CHECKING`` blocks do not count).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import scrapy_dedup

PACKAGE = Path(scrapy_dedup.__file__).resolve().parent
PURE = ("url", "html", "text", "stores", "keys", "report", "learn")
ALLOWED = {  # which parts of the package a pure part may import
    "url": {"url"},
    "text": {"text"},
    "html": {"html", "url"},
    "keys": {"keys", "url"},
    "stores": {"stores", "keys", "url", "text"},
    "report": {"report"},
    "learn": {"learn", "url"},  # url.plain: which of two URLs of a page is plainer
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path) -> set[str]:
    """Modules ``path`` imports at run time (``TYPE_CHECKING`` blocks left out)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.add(child.module)
                found.update(f"{child.module}.{alias.name}" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text("utf-8")))
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {
    name: {m for m in imports(path) if m in MODULES and m != name}
    for name, path in MODULES.items()
}


def part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_pure_parts_import_no_scrapy_and_no_component() -> None:
    for name, path in MODULES.items():
        if part(name) not in PURE:
            continue
        for imported in imports(path):
            assert imported != "scrapy" and not imported.startswith("scrapy."), (name, imported)
            if imported.startswith("scrapy_dedup."):
                assert part(imported) in ALLOWED[part(name)], (name, imported)


def test_no_import_cycle() -> None:
    # The package itself imports its components lazily (PEP 562), so it is
    # left out: every module "imports" it as its parent package.
    graph = {n: {m for m in deps if m != "scrapy_dedup"} for n, deps in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_importing_the_pure_parts_loads_no_scrapy() -> None:
    code = (
        "import sys\n"
        "import scrapy_dedup.url, scrapy_dedup.html, scrapy_dedup.text, scrapy_dedup.stores\n"
        "import scrapy_dedup.stores.redis, scrapy_dedup.keys, scrapy_dedup.report\n"
        "import scrapy_dedup.learn\n"
        "from scrapy_dedup import canonicalize_url\n"
        "loaded = sorted(m for m in sys.modules if m == 'scrapy' or m.startswith('scrapy.'))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_public_names_are_importable() -> None:
    for name in scrapy_dedup.__all__:
        assert getattr(scrapy_dedup, name) is not None
    from scrapy.utils.misc import load_object

    assert load_object("scrapy_dedup.CanonicalDupeFilter") is scrapy_dedup.CanonicalDupeFilter
