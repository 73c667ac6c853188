"""The service's projection writer against the one of 6ea4ece (a statement a row, each table,
wallet and round read as the fold reached it; ``former_writer``, a copy of it): the same event
log folded by each, in the same batches, must leave the same read model (``projections.dump``,
byte for byte), and a log one refuses the other refuses too. Used by
``test_projection_fold_equivalence`` (a few splittings, seconds) and
``measure_fold_equivalence`` (many, bigger logs)."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.dump import dump
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration import former_writer
from tests.integration.conftest_projections import Script, event_records, play_tables

SEAL = ShoeSeal.from_hex("5a" * 32)
LONG_TABLE = "T" * 120
"""a long stream id (its event ids, "{id}-{sequence}", up to 128 characters)"""
ODD_PLAYERS = ("al\x00ice", "al\ufffdice", "ünïcødé-玩家-🂡", "p" * 127 + "é")


def writer_before() -> type[ProjectionWriter]:
    """The ``ProjectionWriter`` of 6ea4ece (``former_writer``: a copy kept in the tree)."""
    # not a subclass of today's: the same interface (``load``, ``fold``, ``flush``, ``write``)
    return cast("type[ProjectionWriter]", former_writer.ProjectionWriter)


def _odd_table(stream_id: str, first: str, second: str) -> Script:
    """A single-player table where ``first`` plays a round voided after a split, then a round
    of their own; ``second`` takes the seat after them. Ids as an older handler took them
    (``model_construct``: unchecked); refusals of platform money written down."""
    script = Script(
        "mini-h17", [["8S", "6H", "8D", "TD", "3C", "2C", "9D"]], {"bob": 100}, stream_id
    )
    script.do(
        cmd.LeaveTable(player_id="bob"),
        cmd.SitDown.model_construct(player_id=first, seat=0),
        cmd.Deposit.model_construct(player_id=first, amount=10_000),
        cmd.PlaceBet.model_construct(player_id=first, box=0, amount=1_000),
        cmd.Deal.model_construct(player_id=first),
        cmd.Split.model_construct(player_id=first, box=0, hand=0),
        cmd.VoidRound(round=1, operator="ops-1", reason="card reader fault"),
    )
    refused = ev.MoneyCommandRefused(
        player_id=first,
        command="Withdraw",
        amount=99_999,
        reason_code="insufficient_funds",
        message="balance 10000 < 99999",
    )
    script._record(stream_id, refused)
    for command in (
        cmd.PlaceBet.model_construct(player_id=first, box=0, amount=500),
        cmd.Deal.model_construct(player_id=first),
        cmd.Stand.model_construct(player_id=first, box=0, hand=0),
        cmd.Stand.model_construct(player_id=first, box=0, hand=1),
    ):
        script.tick()
        script.submit(command)
    while script.state.round_open:  # whatever the shoe dealt: stood to the end
        script.tick()
        moves: list[cmd.Command] = [
            cmd.Stand.model_construct(player_id=first, box=0, hand=h) for h in (0, 1)
        ]
        moves.append(cmd.DeclineInsurance.model_construct(player_id=first, box=0))
        if not any(script.submit(move) for move in moves):
            break
    script.tick()
    script.do(
        cmd.LeaveTable.model_construct(player_id=first),
        cmd.SitDown.model_construct(player_id=second, seat=0),
        cmd.Deposit.model_construct(player_id=second, amount=5_000),
        cmd.PlaceBet.model_construct(player_id=second, box=0, amount=100),
        cmd.ClearBets.model_construct(player_id=second),
    )
    return script


def _wallet_refusals(envelopes: list[EventEnvelope]) -> list[EventEnvelope]:
    """A refused WalletWithdraw written down after each wallet's last event."""
    last: dict[str, EventEnvelope] = {}
    for envelope in envelopes:
        if wl.is_wallet_stream(envelope.stream_id):
            last[envelope.stream_id] = envelope
    added = []
    for stream_id, envelope in sorted(last.items()):
        data = envelope.data
        refused = wl.WalletCommandRefused(
            player_id=getattr(data, "player_id"),  # noqa: B009
            command="WalletWithdraw",
            amount=10**9,
            reason_code="insufficient_funds",
            message="not enough in the wallet",
        )
        sequence = envelope.sequence + 1
        added.append(
            envelope.model_copy(
                update={
                    "event_id": f"{stream_id}-{sequence}",
                    "sequence": sequence,
                    "occurred_at": envelope.occurred_at + timedelta(seconds=1),
                    "type": refused.type,
                    "schema_version": refused.version,
                    "data": refused,
                }
            )
        )
    return added


def mixed_log(rounds: int = 3, seed: int = 9, shared: int = 2) -> list[Record]:
    """Random play at single-player and shared tables (wallets, buy-ins, seat moves, leaves,
    disconnections, cancelled rounds) and a table with a 120-character id; tables whose
    players' ids hold a NUL, U+FFFD, other unicode, 128 characters, with a voided round and
    refused money commands: every stream's events in order, the streams interleaved by time."""
    tables = [("t-single", "mini-h17"), (LONG_TABLE, "mini-s17")]
    tables += [(f"t-shared-{n}", "atlantic-city-multi") for n in range(shared)]
    envelopes = list(play_tables(tables, rounds, seed=seed).envelopes)
    envelopes += _odd_table("t-odd-1", ODD_PLAYERS[0], ODD_PLAYERS[2]).envelopes
    envelopes += _odd_table("t-odd-2", ODD_PLAYERS[1], ODD_PLAYERS[3]).envelopes
    envelopes += _wallet_refusals(envelopes)
    envelopes.sort(key=lambda e: (e.occurred_at, e.stream_id, e.sequence))
    return event_records(envelopes, SEAL)


def redelivered(records: Sequence[Record], share: float, seed: int = 3) -> list[Record]:
    """``records`` with copies of earlier ones among them at later offsets (a producer's
    retry writes an event again): each a duplicate the writers step over."""
    rng = random.Random(seed)
    values = []
    for index, record in enumerate(records):
        values.append(record.value)
        if rng.random() < share:
            values.append(records[rng.randrange(index + 1)].value)
    return [Record(records[0].topic, 0, offset, value) for offset, value in enumerate(values)]


def partitioned(records: Sequence[Record], partitions: int) -> list[Record]:
    """``records`` spread over ``partitions`` partitions by stream, as the handler keys them,
    each partition's offsets from 0, in the same order."""
    offsets = [0] * partitions
    out = []
    for record in records:
        partition = zlib.crc32(wire.decode(record.value).stream_id.encode()) % partitions
        out.append(Record(record.topic, partition, offsets[partition], record.value))
        offsets[partition] += 1
    return out


def event_types(records: Sequence[Record]) -> Counter[str]:
    return Counter(wire.decode(record.value).type for record in records)


def batches(records: Sequence[Record], sizes: Sequence[int]) -> list[list[Record]]:
    """``records`` cut into batches of ``sizes``, taken in turn."""
    out: list[list[Record]] = []
    start, turn = 0, 0
    while start < len(records):
        size = max(1, sizes[turn % len(sizes)])
        out.append(list(records[start : start + size]))
        start += size
        turn += 1
    return out


async def fold(writer: ProjectionWriter, cut: Sequence[Sequence[Record]]) -> str | None:
    """Each batch applied in turn; the first refusal's type and message (None: none), the
    batches after it not applied."""
    for batch in cut:
        try:
            await writer.apply(batch)
        except Exception as error:  # compared with the other writer's
            return f"{type(error).__name__}: {error}"
    return None


async def dumped(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        return (await dump(connection)).text()


async def compare(
    old_store: ProjectionStore, new_store: ProjectionStore, cut: Sequence[Sequence[Record]]
) -> tuple[str | None, str | None, str, str]:
    """The batches folded by the former writer into one store, by the service's into the
    other: (each refusal, each dump)."""
    old_error = await fold(writer_before()(old_store), cut)
    new_error = await fold(ProjectionWriter(new_store), cut)
    return old_error, new_error, await dumped(old_store), await dumped(new_store)


def first_difference(a: str, b: str) -> Any:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False)):
        if x != y:
            return number, x, y
    return len(a.splitlines()), len(b.splitlines())
