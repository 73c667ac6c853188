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
    {"aiokafka", "asyncio", "faststream", "importlib", "logging", "os", "pathlib"}
    | {"prometheus_client", "random", "secrets", "socket", "sqlalchemy", "structlog"}
    | {"subprocess", "threading", "time", "uuid"}
)
"""What the rules engine must not reach for: I/O, a clock, randomness (``uuid4`` too),
logging, modules loaded by name."""


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module name ``path`` imports, made absolute, with the line: ``import x``,
    ``from x import y`` (``from blackjack import client_cli`` names ``blackjack.client_cli``),
    relative imports, and ``importlib.import_module`` of a written name."""
    here = ["blackjack", *path.relative_to(PACKAGE).with_suffix("").parts]
    package = here[:-1]  # a module's package; an ``__init__``'s is its own folder
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, node.lineno
            yield from ((f"{module}.{alias.name}", node.lineno) for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


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
                where = f"{path.relative_to(PACKAGE)}:{line}"
                if where not in edges[(part, names[1])]:  # ``from m import a, b``: m's once
                    edges[(part, names[1])].append(where)
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
    modules = sorted((PACKAGE / "domain").rglob("*.py"))
    assert len(modules) > 10, "the rules engine moved?"
    found = [
        f"{path.relative_to(PACKAGE)}:{line} {module}"
        for path in modules
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
    parts = {_part(path) for path in PACKAGE.rglob("*.py")}
    assert {part, *callers} <= parts, f"not in the package: { ({part, *callers} - parts) }"
    found = [
        f"{source} -> {target}: {', '.join(where)}"
        for (source, target), where in sorted(_edges().items())
        if source == part and target in callers
    ]
    assert not found, "\n".join(found)
