"""The packages of ``services/blackjack`` as layers: the rules engine imports nothing of the
shell, the read model nothing of who serves it, and no package imports another that imports
it back (each import, at a module's top or inside a function, read from the source)."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "blackjack"

SHELL_MODULES = frozenset(
    {"aiokafka", "asyncio", "faststream", "logging", "os", "prometheus_client", "random"}
    | {"secrets", "socket", "sqlalchemy", "structlog", "subprocess", "threading", "time"}
)
"""What the rules engine must not reach for: I/O, a clock, randomness, logging."""


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every absolute module name ``path`` imports, with the line."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "blackjack":  # ``from blackjack import client_cli``
                yield from ((f"blackjack.{alias.name}", node.lineno) for alias in node.names)
            else:
                yield node.module, node.lineno


def _part(path: Path) -> str:
    """The package (or top-level module) of ``blackjack`` that ``path`` belongs to."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) part of ``blackjack`` -> where, as ``file:line``."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        part = _part(path)
        for module, line in _imports(path):
            names = module.split(".")
            if names[0] == "blackjack" and len(names) > 1 and names[1] != part:
                edges[(part, names[1])].append(f"{path.relative_to(PACKAGE)}:{line}")
    return edges


def _cycles(edges: dict[tuple[str, str], list[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one part (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(part: str) -> None:
        index[part] = low[part] = len(index)
        stack.append(part)
        for other in sorted(graph[part]):
            if other not in index:
                visit(other)
                low[part] = min(low[part], low[other])
            elif other in stack:
                low[part] = min(low[part], index[other])
        if low[part] == index[part]:
            group = set()
            while (member := stack.pop()) != part:
                group.add(member)
            group.add(part)
            if len(group) > 1:
                groups.append(group)

    for part in sorted(graph):
        if part not in index:
            visit(part)
    return groups


def test_no_package_imports_one_that_imports_it_back() -> None:
    edges = _edges()
    assert edges, "no import read: the package moved?"
    found = [
        f"{source} -> {target}: {', '.join(where[:3])}"
        for group in _cycles(edges)
        for (source, target), where in sorted(edges.items())
        if source in group and target in group
    ]
    assert not found, "packages importing one another:\n" + "\n".join(found)


def test_the_cycle_check_finds_a_cycle() -> None:
    edges = {("a", "b"): ["a.py:1"], ("b", "c"): ["b.py:1"], ("c", "a"): ["c.py:1"]}
    assert _cycles(edges | {("c", "d"): ["c.py:2"]}) == [{"a", "b", "c"}]
    assert _cycles({("a", "b"): ["a.py:1"], ("b", "c"): ["b.py:1"]}) == []


def test_the_rules_engine_imports_nothing_of_the_shell() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{line} {module}"
        for path in sorted((PACKAGE / "domain").rglob("*.py"))
        for module, line in _imports(path)
        if module.split(".")[0] in SHELL_MODULES
        or (module.startswith("blackjack.") and module.split(".")[1] != "domain")
    ]
    assert not found, "the rules engine reaches out:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("part", "callers"),
    [
        ("projections", {"api", "projection_worker", "app", "cli", "command_handler"}),
        ("api", {"projection_worker", "app", "cli"}),
        ("command_handler", {"app", "service_cli", "cli"}),
    ],
)
def test_a_layer_imports_nothing_of_what_runs_it(part: str, callers: set[str]) -> None:
    found = [
        f"{source} -> {target}: {', '.join(where)}"
        for (source, target), where in sorted(_edges().items())
        if source == part and target in callers
    ]
    assert not found, "\n".join(found)
