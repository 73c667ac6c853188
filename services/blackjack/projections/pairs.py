"""Reading the rows whose two-column key is one of a list of pairs.

``(a, b) IN ((?, ?), (?, ?))`` is the obvious statement, and PostgreSQL answers it with one
lookup of the primary key a pair. SQLite scans the whole table for it once the list holds two
pairs or more: a projection batch that loaded two rounds read every round the store ever held
(58 ms at 100,000 rounds, and growing with the history). On SQLite the pairs go as one JSON
parameter, joined through ``json_each``: one lookup a pair, and one statement however many
pairs (a ``VALUES`` list of 500 pairs took SQLAlchemy 22 ms to compile, every batch).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, Select, String, and_, bindparam, func, tuple_

from blackjack.projections.store import nul_replaced


def one_of(
    query: Select[Any],
    first: Column[Any],
    second: Column[Any],
    pairs: Sequence[tuple[str, str | int]],
    dialect: str,
) -> Select[Any]:
    """``query`` narrowed to the rows whose ``(first, second)`` is one of ``pairs`` (one at
    least), each row once, as ``dialect`` (``Connection.dialect.name``) reads it fastest."""
    if not pairs:
        raise ValueError("one_of needs a pair at least")
    if dialect != "sqlite":
        return query.where(tuple_(first, second).in_(pairs))
    # As the statement's own parameters would be (``store._text_without_nul``): SQLite's
    # json_extract ends a text at an escaped NUL, and would match the id before it. Each pair
    # once: a pair listed twice is joined twice (the IN answers a row once).
    distinct = dict.fromkeys((nul_replaced(key), nul_replaced(other)) for key, other in pairs)
    listed = json.dumps(list(distinct), ensure_ascii=False)
    wanted = (
        func.json_each(bindparam("pairs", listed, type_=String, unique=True))
        .table_valued("value")
        .alias("wanted")
    )
    return query.join_from(
        wanted,
        first.table,
        and_(
            first == func.json_extract(wanted.c.value, "$[0]"),
            second == func.json_extract(wanted.c.value, "$[1]"),
        ),
    )
