"""An interrupted round's wait (``CloseInterruptedRound``, page 003's 30 days) counts from the
table's last event of play, not from a refusal: a platform money command the table refused
is written down (``MoneyCommandRefused``, docs/kafka.md "Idempotency") but is no activity of
the round. Before, each refusal restarted the wait, so a platform retrying refused
withdrawals under new ids kept an interrupted round from ever becoming closable. The handler
(live, from a snapshot, from the events), the audit and the read model's interrupted-rounds
list all count the same way."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from blackjack.audit.replay import replay_stream
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import Stream, initial_state
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.projections.queries import interrupted_rounds
from blackjack.projections.store import ProjectionStore
from tests.unit.test_interrupted_query import fold_envelopes
from tests.unit.test_presence import T0, TABLE, Table, dealt_at_surrender

DAYS_30 = timedelta(days=30)
SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


def refused_withdrawals(table: Table, *days: int) -> list[EventEnvelope]:
    """The platform asks, on each of ``days``, to withdraw more than sam has off the layout,
    each time under a new id: refused ``insufficient_funds``, written down."""
    written: list[EventEnvelope] = []
    for day in days:
        withdraw = cmd.Withdraw(player_id="sam", amount=50_000)
        handled = table.send(withdraw, T0 + timedelta(days=day), f"platform-w-{day}")
        assert handled.result.rejection is not None
        assert handled.result.rejection.code == "insufficient_funds"
        assert [type(e.data) for e in handled.events] == [ev.MoneyCommandRefused]
        written += handled.events
    return written


def interrupted_and_refused() -> tuple[Table, list[EventEnvelope]]:
    """sam's hand dealt at T0 and left waiting; refused withdrawals on days 10, 20 and 29."""
    table = dealt_at_surrender(["TS", "6H", "5S", "TD", "9C"])
    played = [e for h in table.sent for e in h.events]
    return table, [*played, *refused_withdrawals(table, 10, 20, 29)]


def test_refusals_do_not_restart_the_wait_the_round_closes_30_days_after_its_last_play() -> None:
    table, _ = interrupted_and_refused()
    stream = table.store.streams[TABLE]
    assert stream.touched_at == T0 + timedelta(days=29)  # the stream's last event
    assert stream.active_at == T0
    handled = table.send(cmd.CloseInterruptedRound(operator="ops"), T0 + DAYS_30)
    assert handled.result.status == "accepted", handled.result.rejection
    closed = handled.events[0].data
    assert isinstance(closed, ev.InterruptedRoundClosed) and closed.idle_since == T0


def test_an_accepted_command_still_restarts_the_wait() -> None:
    table, _ = interrupted_and_refused()
    deposited = table.send(cmd.Deposit(player_id="sam", amount=100), T0 + timedelta(days=5))
    assert deposited.result.status == "accepted"
    early = table.send(cmd.CloseInterruptedRound(operator="ops"), T0 + DAYS_30)
    assert early.result.rejection is not None
    assert early.result.rejection.code == "round_not_interrupted"


def test_the_wait_survives_a_snapshot_and_a_rebuild_from_the_events() -> None:
    table, log = interrupted_and_refused()
    live = table.store.streams[TABLE]
    codec = SnapshotCodec(os.urandom(32))
    assert codec.decode(codec.encode(live)).active_at == T0
    rebuilt = Stream(TABLE, initial_state(TABLE))
    for envelope in log:
        rebuilt.fold(envelope)
    assert (rebuilt.touched_at, rebuilt.active_at) == (live.touched_at, live.active_at)


def test_a_snapshot_of_the_release_before_counts_from_its_last_event() -> None:
    """A snapshot without ``active_at`` (the release before's): the wait counts from the
    stream's last event, as it did, never from earlier than it was."""
    table, _ = interrupted_and_refused()
    live = table.store.streams[TABLE]
    codec = SnapshotCodec(os.urandom(32))
    stream_id, sequence, body = codec._open(codec.encode(live))
    del body["active_at"]
    opened = codec.decode(codec._seal(stream_id, sequence, 1, body))
    assert opened.active_at == opened.touched_at == T0 + timedelta(days=29)


def test_the_audit_passes_a_round_closed_counting_past_refusals() -> None:
    table, log = interrupted_and_refused()
    handled = table.send(cmd.CloseInterruptedRound(operator="ops"), T0 + DAYS_30)
    assert handled.result.status == "accepted", handled.result.rejection
    wires = [to_wire(e, SEAL) for e in [*log, *handled.events]]
    found = [f.message for f in replay_stream(wires, SEAL).findings]
    # (the test's shuffler deals every shoe in one order, which the audit finds: not this)
    assert [m for m in found if "used again" not in m] == []
    # a closing idle since before the last play, or after too short a wait, is still found
    for forged in (T0 - timedelta(seconds=1), T0 + timedelta(days=1)):
        closed = handled.events[0].data
        assert isinstance(closed, ev.InterruptedRoundClosed)
        data = closed.model_copy(update={"idle_since": forged})
        tampered = [*log, handled.events[0].model_copy(update={"data": data})]
        tampered += handled.events[1:]
        messages = [f.message for f in replay_stream([to_wire(e, SEAL) for e in tampered]).findings]
        assert any("last event of play" in m or "of waiting" in m for m in messages), messages


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    yield store
    await store.close()


async def test_the_interrupted_rounds_list_counts_from_the_last_play(
    store: ProjectionStore,
) -> None:
    _, log = interrupted_and_refused()
    await fold_envelopes(store, log)
    async with store.reading() as connection:
        [found] = await interrupted_rounds(connection, T0, 10)
    assert found["idle_since"] == T0.isoformat().replace("+00:00", "Z")
    assert found["closable_from"] == (T0 + DAYS_30).isoformat().replace("+00:00", "Z")
