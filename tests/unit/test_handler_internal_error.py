"""A decider that fails on a command, or writing down what it decided (a bug, the same on
every retry), does not stop the partition: that command is rejected as ``internal_error``,
with no event, and nothing changes; the table plays on. A failure of the machine
(``OSError``, e.g. the CSPRNG) still aborts the transaction, to be tried again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import blackjack.command_handler.decision as decision_module
import blackjack.command_handler.records as records_module
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.rules import Rules
from blackjack.messages import wire
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from blackjack.scenario import build_shoe
from blackjack.table import apply as real_apply
from tests.unit.processor_harness import TOPICS, new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
TABLE = "table-1"


def scripted_shoe(rules: Rules) -> cmd.ShuffleShoe:
    # player 7, dealer 7, player 5, dealer 9: a hard 12 against a 7, the player's turn
    return cmd.ShuffleShoe(order=build_shoe(rules.decks, ["7S", "7H", "5D", "9C"]), salt="s" * 16)


class Table:
    def __init__(self) -> None:
        self.processor = new_processor(shuffler=scripted_shoe)
        self.store = PartitionStore(0)
        self.offset = 0

    def send(self, command: object) -> list[Outgoing]:
        self.offset += 1
        envelope = CommandEnvelope(command_id=f"c-{self.offset}", stream_id=TABLE, command=command)
        inbound = Inbound(TABLE.encode(), envelope.model_dump_json().encode(), [], 0, self.offset)
        return self.processor.handle(self.store, inbound, NOW).outgoing


def result_of(records: list[Outgoing]) -> CommandResult:
    [record] = [r for r in records if r.topic == TOPICS.results]
    return CommandResult.model_validate_json(record.value)


def events_in(records: list[Outgoing]) -> list[Outgoing]:
    return [r for r in records if r.topic == TOPICS.events]


@pytest.fixture
def table() -> Table:
    t = Table()
    for command in (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann"),
        cmd.Deposit(player_id="ann", amount=10_000),
        cmd.PlaceBet(player_id="ann", box=0, amount=500),
        cmd.Deal(player_id="ann"),
    ):
        assert result_of(t.send(command)).status == "accepted", command
    return t


def fail_on_hit(error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    def apply(state: Any, command: Any, *args: Any) -> Any:
        if isinstance(command, cmd.Hit):
            raise error
        return real_apply(state, command, *args)

    monkeypatch.setattr(decision_module, "apply", apply)


def test_a_failing_decision_is_answered_and_changes_nothing(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = table.store.get(TABLE)
    state, sequence = stream.state, stream.sequence
    fail_on_hit(ZeroDivisionError("a bug"), monkeypatch)

    records = table.send(cmd.Hit(player_id="ann", box=0))

    result = result_of(records)
    assert result.status == "rejected" and result.rejection is not None
    assert result.rejection.code == "internal_error"
    assert "Hit" in result.rejection.message and "ZeroDivisionError" in result.rejection.message
    assert events_in(records) == [] and result.first_sequence is None
    assert stream.state is state and stream.sequence == sequence
    # The same table goes on: the player's next command is decided as usual.
    monkeypatch.undo()
    records = table.send(cmd.Hit(player_id="ann", box=0))
    assert result_of(records).status == "accepted"
    assert len(events_in(records)) >= 2  # PlayerHit, CardDealt...
    assert table.store.get(TABLE).sequence > sequence


def test_a_failing_machine_still_aborts_the_transaction(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_on_hit(OSError("no entropy"), monkeypatch)
    with pytest.raises(OSError):
        table.send(cmd.Hit(player_id="ann", box=0))


def test_a_failure_writing_the_decided_events_is_answered_and_changes_nothing(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events decided, then writing them down fails (a bug the same on every retry): the
    stream keeps its state and its last sequence, no record of the events goes out."""
    stream = table.store.get(TABLE)
    state, sequence = stream.state, stream.sequence

    def encode_event(envelope: Any, seal: Any) -> bytes:
        if envelope.type == "CardDealt":  # the Hit's second event
            raise ValueError("an event that cannot be serialized")
        return wire.encode_event(envelope, seal)

    monkeypatch.setattr(records_module, "encode_event", encode_event)
    records = table.send(cmd.Hit(player_id="ann", box=0))
    result = result_of(records)
    assert result.rejection is not None and result.rejection.code == "internal_error"
    assert events_in(records) == [] and result.first_sequence is None
    assert stream.state is state and stream.sequence == sequence
    monkeypatch.undo()
    records = table.send(cmd.Hit(player_id="ann", box=0))
    assert result_of(records).status == "accepted"
    sequences = [wire.decode(r.value).sequence for r in events_in(records)]
    assert len(sequences) >= 2  # PlayerHit, CardDealt, then a TurnStarted if still open
    assert sequences == list(range(sequence + 1, sequence + 1 + len(sequences)))
