"""A command id the stream has handled for one player, sent again with another player's
command, is ``malformed``: it was answered with the first player's result, so the second
player's client read "accepted" for a bet, a deposit or a move that was never made (a platform
numbering commands per session, "cmd-1", "cmd-2", hands two players the same ids). The first
player's own copy still gets the original result, and nothing changes either way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from tests.unit.processor_harness import new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
TABLE = "table-1"


def send(
    processor: Processor, store: PartitionStore, command_id: str, command: dict[str, Any]
) -> Handled:
    value = json.dumps({"command_id": command_id, "stream_id": TABLE, "command": command})
    return processor.handle(store, Inbound(TABLE.encode(), value.encode(), [], 0, 1), NOW)


def test_another_player_s_command_under_a_handled_id_is_malformed_and_changes_nothing() -> None:
    processor, store = new_processor(), PartitionStore(0)
    send(processor, store, "open", {"type": "OpenTable", "variant": "mini-h17"})
    send(processor, store, "sit", {"type": "SitDown", "player_id": "ann"})
    first = send(processor, store, "cmd-1", {"type": "Deposit", "player_id": "ann", "amount": 500})
    assert first.result.status == "accepted" and first.result.player_id == "ann"
    sequence = store.get(TABLE).sequence

    other = send(processor, store, "cmd-1", {"type": "Deposit", "player_id": "bob", "amount": 900})
    assert other.result.status == "rejected" and other.result.rejection is not None
    assert other.result.rejection.code == "malformed"
    assert "cmd-1" in other.result.rejection.message
    assert "ann" not in other.result.rejection.message  # who used it is not the sender's to know
    assert other.events == [] and store.get(TABLE).sequence == sequence
    assert [record.topic for record in other.outgoing] == [processor.topics.results]

    again = send(processor, store, "cmd-1", {"type": "Deposit", "player_id": "ann", "amount": 500})
    assert again.duplicate and again.result == first.result  # the original, as before
    assert store.get(TABLE).results.get("cmd-1") == first.result  # the refusal is not remembered
