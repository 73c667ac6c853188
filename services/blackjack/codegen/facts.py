"""Writes ``blackjack/domain/facts.py``: one typed constructor per event the decider builds,
generated from the pydantic models so that the models stay the only definition.

Each constructor takes the model's fields as keyword arguments, annotated as the model
declares them (mypy checks every call's names and types), and builds the model without
validating it again (``blackjack.domain.fact.made``): the decider has checked the values.
``type`` and ``version`` are fixed to the model's defaults: the decider writes events at
their current version only. ``tests/unit/test_facts.py`` fails when the file differs from
what the models generate; ``make facts`` (``python -m blackjack.codegen.facts --write``)
rewrites it.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev

TARGET = Path(__file__).parents[1] / "domain" / "facts.py"
FIXED = ("version", "type")  # always the model's default
_MODULE_ALIASES = {ev: "ev", cmd: "cmd"}
_BUILTINS = {"int", "str", "bool", "float", "bytes", "tuple", "None"}


WRITTEN_BY_THE_SHELL: tuple[type[BaseModel], ...] = (ev.RoundResumed, ev.MoneyCommandRefused)
"""Events the decider never builds: built validated where they are made (the marker of a
round resumed, ``command_handler.streams``; the record of a platform money command refused,
``domain.platform_money.refusal``)."""


def built_models() -> tuple[type[BaseModel], ...]:
    """Every event the decider builds, the values nested in them, and the simulator's shuffle
    command."""
    decided = (t for t in ev.EVENT_TYPES if t not in WRITTEN_BY_THE_SHELL)
    return (*decided, ev.PlayerRoundResult, ev.BoxMessage, ev.VoidedWagers, cmd.ShuffleShoe)


def function_name(model: type[BaseModel]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", model.__name__).lower()


class _Names:
    """Where each name an annotation uses comes from, read from its module's imports."""

    def __init__(self) -> None:
        self.imports: dict[str, str] = {}  # name -> module it is imported from

    def qualify(self, annotation: str, module: ModuleType) -> str:
        tree = ast.parse(annotation, mode="eval")
        origins = _imported_names(module)
        spans: list[tuple[int, int, str]] = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Name) or node.id in _BUILTINS:
                continue
            if node.id in origins:
                self.imports[node.id] = origins[node.id]
                continue
            if node.id not in vars(module):
                raise TypeError(f"cannot resolve {node.id!r} in {module.__name__}")
            qualified = f"{_MODULE_ALIASES[module]}.{node.id}"
            spans.append((node.col_offset, node.end_col_offset or node.col_offset, qualified))
        for start, end, text in sorted(spans, reverse=True):
            annotation = annotation[:start] + text + annotation[end:]
        return annotation.replace("'", '"')  # postponed annotations are unparsed with ' quotes


def _imported_names(module: ModuleType) -> dict[str, str]:
    tree = ast.parse(inspect.getsource(module))
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__"
        for alias in node.names
    }


def _declared_annotation(model: type[BaseModel], field: str) -> tuple[str, ModuleType]:
    """The annotation as written in the class that declares the field, and its module."""
    for klass in model.__mro__:
        annotation = vars(klass).get("__annotations__", {}).get(field)
        if annotation is not None:
            if not isinstance(annotation, str):
                raise TypeError(f"{klass.__name__}.{field}: expected a postponed annotation")
            return annotation, sys.modules[klass.__module__]
    raise TypeError(f"{model.__name__}.{field} has no annotation")


def _literal(value: object) -> str:
    """The default as source: strings in double quotes, as ruff format writes them."""
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    parsed = ast.literal_eval(text)
    if parsed != value or type(parsed) is not type(value):
        raise TypeError(f"default {value!r} cannot be written as a literal")
    return text


def _constructor(model: type[BaseModel], names: _Names) -> tuple[str, str]:
    """The constant holding the model's field names, and the constructor. Its parameters are
    keyword-only, so they can follow the fields' order with defaults before required ones."""
    module_alias = _MODULE_ALIASES[sys.modules[model.__module__]]
    qualified = f"{module_alias}.{model.__name__}"
    constant = f"_{function_name(model).upper()}"
    parameters: list[str] = []
    values: list[str] = []
    for field_name, field in model.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"{model.__name__}.{field_name}: default factories are not generated")
        if field_name in FIXED:
            values.append(f'"{field_name}": {_literal(field.default)},')
            continue
        annotation, module = _declared_annotation(model, field_name)
        parameter = f"{field_name}: {names.qualify(annotation, module)}"
        if field.default is not PydanticUndefined:
            parameter += f" = {_literal(field.default)}"
        parameters.append(parameter)
        values.append(f'"{field_name}": {field_name},')
    field_set = ", ".join(f'"{name}"' for name in model.model_fields)
    constant_line = f"{constant}: Final = {{{field_set}}}"
    if len(constant_line) > 100:
        inner = "".join(f'\n    "{name}",' for name in model.model_fields)
        constant_line = f"{constant}: Final = {{{inner}\n}}"
    signature = "".join(f"\n    {parameter}," for parameter in parameters)
    body = "".join(f"\n            {value}" for value in values)
    function = (
        f"def {function_name(model)}(\n    *,{signature}\n) -> {qualified}:\n"
        f"    return made(\n"
        f"        {qualified},\n"
        f"        {{{body}\n        }},\n"
        f"        {constant},\n"
        f"    )\n"
    )
    return constant_line, function


HEADER = '''"""GENERATED by ``make facts`` (``python -m blackjack.codegen.facts --write``)
from the models in ``blackjack.domain.events`` and ``ShuffleShoe``: do not edit.

One constructor per model the decider builds, named after it, keyword arguments named,
typed and defaulted like its fields. Each builds the model without validating it
(``blackjack.domain.fact.made``): the decider has checked the values already. The sets below
are every field of a model, shared as each instance's ``model_fields_set``.
"""
'''


def render() -> str:
    names = _Names()
    pieces = [_constructor(model, names) for model in built_models()]
    by_module: dict[str, set[str]] = {"typing": {"Final"}, "blackjack.domain.fact": {"made"}}
    for name, module in names.imports.items():
        by_module.setdefault(module, set()).add(name)
    imports = {
        module: f"from {module} import {', '.join(sorted(by_module[module]))}"
        for module in by_module
    }
    standard = [
        line for module, line in sorted(imports.items()) if not module.startswith("blackjack")
    ]
    ours = [line for module, line in imports.items() if module.startswith("blackjack")]
    ours += [
        "from blackjack.domain import commands as cmd",
        "from blackjack.domain import events as ev",
    ]
    lines = [
        HEADER,
        "from __future__ import annotations\n",
        *standard,
        "",
        *sorted(ours, key=_isort_key),
        "",
        *(constant for constant, _ in pieces),
        "",
        *("\n" + function for _, function in pieces),
    ]
    return "\n".join(lines)


def _isort_key(line: str) -> tuple[str, str]:
    """isort's order for ``from X import Y`` lines: by the module, then the names."""
    module, _, names = line.removeprefix("from ").partition(" import ")
    return module, names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the file")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        TARGET.write_text(text)
        print(f"wrote {TARGET}")
        return 0
    if TARGET.read_text() != text:
        print(f"{TARGET} differs from the models: run make facts", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
