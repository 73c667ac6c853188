"""A copy of a command an older release handled, sent again under its id after the upgrade,
is given the original answer, even where the new release refuses such a command ``malformed``
(a player id with a control or bidirectional character, a key named twice).

Found in an upgrade drill: a platform's retry of a ``SitDown`` the older release had accepted
(the player's id held an ESC) was answered ``malformed``: two answers to one command id, the
second saying the player was not seated. A ``Deposit`` retried so would tell the platform the
money never reached the table (it did), which may then pay it back into the wallet."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandResult
from blackjack.rng import csprng_shuffle
from blackjack.table import apply
from tests.unit.test_unprintable_text import NOW, TABLE, UNPRINTABLE, opened

WINDOW = 1000


def send(processor: Processor, store: PartitionStore, value: bytes, offset: int) -> Handled:
    return processor.handle(store, Inbound(TABLE.encode(), value, [], 0, offset), NOW)


def handled_by_an_older_release(
    processor: Processor, store: PartitionStore, command_id: str, command: Any
) -> CommandResult:
    """``command`` decided and remembered under ``command_id`` as a release before the
    stricter commands did (the events of such a log fold as any other)."""
    stream = store.get(TABLE)
    assert isinstance(stream.state, TableState)
    applied = apply(stream.state, command, NOW, csprng_shuffle)
    assert not hasattr(applied, "code"), applied
    first = stream.sequence + 1
    stream.state = applied.state
    stream.sequence += len(applied.events)
    result = CommandResult(
        command_id=command_id,
        stream_id=TABLE,
        status="accepted",
        first_sequence=first,
        last_sequence=stream.sequence,
        handled_at=NOW,
        player_id=getattr(command, "player_id", None),
    )
    stream.remember(result, WINDOW)
    return result


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_a_copy_of_a_sit_down_an_older_release_took_gets_its_answer(text: str) -> None:
    processor, store = opened()
    player = f"a{text}b"
    original = handled_by_an_older_release(
        processor, store, "sit-1", cmd.SitDown.model_construct(player_id=player, seat=0)
    )
    sequence = store.get(TABLE).sequence
    body = {"type": "SitDown", "player_id": player, "seat": 0}
    copy = json.dumps({"command_id": "sit-1", "stream_id": TABLE, "command": body}).encode()
    answer = send(processor, store, copy, 10)
    assert answer.result == original and answer.duplicate
    assert answer.events == [] and store.get(TABLE).sequence == sequence
    # a new command under such an id is still refused, and so is another player's under the
    # handled id
    fresh = json.dumps({"command_id": "sit-2", "stream_id": TABLE, "command": body}).encode()
    refused = send(processor, store, fresh, 11)
    assert refused.result.rejection is not None and refused.result.rejection.code == "malformed"
    other = {"type": "SitDown", "player_id": f"z{text}", "seat": 1}
    theirs = json.dumps({"command_id": "sit-1", "stream_id": TABLE, "command": other}).encode()
    refused = send(processor, store, theirs, 12)
    assert refused.result.rejection is not None and refused.result.rejection.code == "malformed"
    assert store.get(TABLE).sequence == sequence


def test_a_copy_of_a_deposit_naming_its_amount_twice_gets_its_answer() -> None:
    """An older release read ``"amount": 100, "amount": 100000`` as 100000 (the last)."""
    processor, store = opened()
    sat = send(
        processor,
        store,
        json.dumps(
            {
                "command_id": "s",
                "stream_id": TABLE,
                "command": {"type": "SitDown", "player_id": "ann"},
            }
        ).encode(),
        1,
    )
    assert sat.result.status == "accepted"
    original = handled_by_an_older_release(
        processor, store, "dep-1", cmd.Deposit(player_id="ann", amount=100_000)
    )
    copy = (
        b'{"command_id": "dep-1", "stream_id": "table-1", "command": '
        b'{"type": "Deposit", "player_id": "ann", "amount": 100, "amount": 100000}}'
    )
    answer = send(processor, store, copy, 10)
    assert answer.result == original and answer.duplicate and answer.events == []


def test_a_malformed_message_for_a_stream_never_seen_adds_no_stream() -> None:
    processor, store = opened()
    body = {"type": "SitDown", "player_id": "a\x1bb"}
    value = json.dumps({"command_id": "x", "stream_id": "table-9", "command": body}).encode()
    answer = processor.handle(store, Inbound(b"table-9", value, [], 0, 5), NOW)
    assert answer.result.rejection is not None and answer.result.rejection.code == "malformed"
    assert "table-9" not in store.streams
