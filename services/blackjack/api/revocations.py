"""Cutting a player's tokens off before their ``exp``: an operator revokes every token of the
player issued before now (``POST /v1/players/{player_id}/token-revocation`` with an operator's
token, or ``blackjack projections revoke-tokens PLAYER_ID`` with the database's URL), and each
query API process refuses them from then on (401, ``tokens.REVOKED``).

Kept in the store's ``token_revocations`` table, one row per player: every query API process
reads the same store (a worker's, or ``serve``'s), so the revocation holds on all of them as
soon as its answer is sent, and after a restart; no process keeps a copy to fall out of date
(each request of a player's token reads its player's row by primary key). It is not a command
on the bus: that would be folded into the store by the projection workers, a lag after the
operator's answer, and it would need the player's wallet stream, which not every player id can
make. It is not an event either: a token is no part of the game's record.

Bounded: a row is needed only while a token it refuses may still be unexpired, that is up to
``exp - iat`` plus the leeway after its ``not_before``. Each revocation drops the rows past
that by the longest lifetime and leeway any process may be configured with (``KEPT_S``), not
by its own settings: the process that revokes (a ``revoke-tokens`` run from a shell without
the API's settings, an API with another ``BLACKJACK_API_JWT_MAX_LIFETIME_S``) would otherwise
drop a row another process over the store still needs, and that process would take the
revoked tokens again.

The clock leeway is the checking process's: a token is refused when its ``iat`` is before the
row's ``not_before`` or before the revocation's instant (``revoked_at``) plus the checking
process's own leeway, counted from the next whole second (``refused_before``). The leeway is
how far ahead of this service's clock the platform's may run, so a token it signed a moment
before the revocation may carry an ``iat`` up to that far after it: that window stays shut,
whichever process revoked. A revocation whose process has no player keys (the command line
without them, an API with operator tokens only) counts no leeway into ``not_before``: before,
it counted the longest one (300 s), and a player's new tokens were refused for 270 s by an
API allowing the default 30 s.

Not derived from the events, so a read model rebuilt into a new store cannot fold them: the
rebuild copies the live store's that may still refuse a token (``copy_revocations``, from
``blackjack projections rebuild --revocations-from`` and ``copy-revocations``).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, not_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.api.tokens import MAX_LEEWAY_S, MAX_MAX_LIFETIME_S, PlayerKeys
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore

MAX_PLAYER_ID_CHARS = 128

KEPT_S = MAX_MAX_LIFETIME_S + 2 * MAX_LEEWAY_S
"""How long after its ``not_before`` a revocation is kept: the longest ``exp - iat`` and
leeway any query API process may be configured with, and that leeway again for the clocks of
the process that drops the row and of one that checks a token (7 days and 10 minutes). A row
is kept that long after the later of its ``not_before`` and its ``revoked_at`` plus the
longest leeway (a process checking adds its own leeway to ``revoked_at``: ``refused_from``)."""


def not_before_of(now: datetime, leeway_s: int) -> int:
    """The ``iat`` from which a player's tokens are good again: the next whole second, and
    the clock leeway later, since the platform's clock may run that far ahead of this one (a
    token it signed a moment before, stolen, could carry an ``iat`` up to the leeway ahead)."""
    return math.floor(now.timestamp()) + 1 + leeway_s


async def revoke(
    connection: AsyncConnection, player_id: str, not_before: int, now: datetime, keep_s: int
) -> int:
    """Refuses the player's tokens issued before ``not_before`` (a later one already set
    stays), drops the rows that refuse no token any longer (every token issued before their
    ``not_before`` has expired: ``keep_s`` past it), and answers the player's ``not_before``."""
    t = schema.token_revocations
    await _merge(
        connection, [{"player_id": player_id, "not_before": not_before, "revoked_at": now}]
    )
    await connection.execute(delete(t).where(*_dropped(now, keep_s)))
    found = await revoked_before(connection, player_id)
    assert found is not None
    return found


async def _merge(connection: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """Each row written, or merged into the player's: the later ``not_before`` and the later
    ``revoked_at`` kept, so that a revocation never moves back, whichever came first."""
    t = schema.token_revocations
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(t)
    later = {
        name: case((t.c[name] > insert.excluded[name], t.c[name]), else_=insert.excluded[name])
        for name in ("not_before", "revoked_at")
    }
    await connection.execute(
        insert.on_conflict_do_update(index_elements=[t.c.player_id], set_=later), rows
    )


def _dropped(now: datetime, keep_s: int) -> tuple[ColumnElement[bool], ...]:
    """The rows that refuse no token any more: ``not_before`` more than ``keep_s`` ago, and
    ``revoked_at`` that and the longest leeway ago (each process checking refuses up to its
    own leeway past ``revoked_at``: ``refused_from``)."""
    t = schema.token_revocations
    cutoff = math.floor(now.timestamp()) - keep_s
    return (
        t.c.not_before < cutoff,
        t.c.revoked_at < datetime.fromtimestamp(cutoff - 1 - MAX_LEEWAY_S, UTC),
    )


async def copy_revocations(source: AsyncConnection, target: AsyncConnection) -> int:
    """Merges into ``target`` every revocation of ``source`` that may still refuse a token
    (``KEPT_S``): a read model rebuilt into a new store, or any copy of one, refuses what the
    store it replaces refused (``blackjack projections rebuild --revocations-from``,
    ``copy-revocations``). Idempotent, and the later revocation of a player wins, so it may be
    run again after the switch. Returns how many rows it read."""
    t = schema.token_revocations
    now = datetime.now(UTC)
    query = select(t.c.player_id, t.c.not_before, t.c.revoked_at).where(
        not_(and_(*_dropped(now, KEPT_S)))
    )
    rows = [
        {
            "player_id": row.player_id,
            "not_before": row.not_before,
            "revoked_at": _utc(row.revoked_at),
        }
        for row in await source.execute(query)
    ]
    if rows:
        await _merge(target, rows)
    return len(rows)


def _utc(moment: datetime) -> datetime:
    """SQLite's DATETIME keeps no zone: it was written in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def revoke_now(store: ProjectionStore, player_id: str, players: PlayerKeys | None) -> int:
    """``revoke`` the player's tokens issued until now, with the settings' leeway (none without
    player keys: each process that checks a token adds its own, ``refused_before``), the rows
    kept ``KEPT_S``: the answer's ``not_before``. The query API's POST and ``blackjack
    projections revoke-tokens`` both come here."""
    leeway = 0 if players is None else players.leeway_s
    now = datetime.now(UTC)
    async with store.writing() as connection:
        return await revoke(connection, player_id, not_before_of(now, leeway), now, KEPT_S)


async def revoked_before(connection: AsyncConnection, player_id: str) -> int | None:
    """The player's ``not_before`` (Unix seconds), or None: no token of theirs revoked."""
    t = schema.token_revocations
    query = select(t.c.not_before).where(t.c.player_id == player_id)
    found: int | None = (await connection.execute(query)).scalar_one_or_none()
    return found


def refused_from(not_before: int, revoked_at: datetime, leeway_s: int) -> int:
    """The ``iat`` from which a process with this clock leeway takes the player's tokens again:
    the row's ``not_before``, or the revocation's instant by that process's own leeway
    (``not_before_of``), whichever is later. A token with an ``iat`` before it may have been
    signed before the revocation by a platform whose clock runs up to the leeway ahead."""
    return max(not_before, not_before_of(_utc(revoked_at), leeway_s))


async def refused_before(connection: AsyncConnection, player_id: str, leeway_s: int) -> int | None:
    """``refused_from`` for the player's row, or None: no token of theirs revoked."""
    t = schema.token_revocations
    query = select(t.c.not_before, t.c.revoked_at).where(t.c.player_id == player_id)
    row = (await connection.execute(query)).one_or_none()
    return None if row is None else refused_from(row.not_before, row.revoked_at, leeway_s)
