"""Reading the rows whose two-column key is one of a list of pairs.

``(a, b) IN ((?, ?), (?, ?))`` is the obvious statement, and PostgreSQL answers it with one
lookup of the primary key a pair. SQLite scans the whole table for it once the list holds two
pairs or more: a projection batch that loaded two rounds read every round the store ever held
(58 ms at 100,000 rounds, and growing with the history). On SQLite the pairs are joined as a
``VALUES`` list instead, one lookup a pair; PostgreSQL took twice as long over that join as over
the ``IN`` (25.6 against 52.6 ms for 1,000 pairs among 500,000 rounds), so it keeps the ``IN``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, Select, and_, column, tuple_, values


def one_of(
    query: Select[Any],
    first: Column[Any],
    second: Column[Any],
    pairs: Sequence[tuple[Any, Any]],
    dialect: str,
) -> Select[Any]:
    """``query`` narrowed to the rows whose ``(first, second)`` is one of ``pairs`` (distinct
    pairs, one at least), as ``dialect`` (``Connection.dialect.name``) reads it fastest."""
    if not pairs:
        raise ValueError("one_of needs a pair at least")
    if dialect != "sqlite":
        return query.where(tuple_(first, second).in_(pairs))
    # A common table expression: SQLite names no columns of a VALUES in FROM.
    wanted = (
        values(column("first", first.type), column("second", second.type), name="wanted")
        .data(list(pairs))
        .cte()
    )
    return query.join_from(
        wanted, first.table, and_(first == wanted.c.first, second == wanted.c.second)
    )
