"""A command id the stream has handled for one player, sent again with another player's
command, is ``malformed``: it was answered with the first player's result, so the second
player's client read "accepted" for a bet, a deposit or a move that was never made (a platform
numbering commands per session, "cmd-1", "cmd-2", hands two players the same ids). The first
player's own copy still gets the original result, and nothing changes either way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from blackjack.bus.headers import COMMAND_DIGEST_HEADER
from blackjack.command_handler.answers import another_command
from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import AnswerWindow, PartitionStore, Stream
from blackjack.domain.state import INITIAL_STATE
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


def test_another_command_under_a_handled_id_is_malformed_and_changes_nothing() -> None:
    """A platform that changed a withdrawal's amount on its retry read "accepted" for 60 where
    50 had left the table (a certification review: the original answer came back "however
    different the body"); a payment API refuses an idempotency key reused with other
    parameters. The same player's copy still gets the original result."""
    processor, store = new_processor(), PartitionStore(0)
    send(processor, store, "open", {"type": "OpenTable", "variant": "mini-h17"})
    send(processor, store, "sit", {"type": "SitDown", "player_id": "ann"})
    send(processor, store, "in", {"type": "Deposit", "player_id": "ann", "amount": 500})
    first = send(processor, store, "out", {"type": "Withdraw", "player_id": "ann", "amount": 50})
    assert first.result.status == "accepted"
    sequence = store.get(TABLE).sequence

    for other in (
        {"type": "Withdraw", "player_id": "ann", "amount": 60},
        {"type": "Deposit", "player_id": "ann", "amount": 50},
        {"type": "Withdraw", "player_id": "ann", "amount": 5},
    ):
        refused = send(processor, store, "out", other)
        assert refused.result.rejection is not None, other
        assert refused.result.rejection.code == "malformed"
        assert "its fields differ" in refused.result.rejection.message
        assert refused.events == [] and store.get(TABLE).sequence == sequence
        assert not refused.duplicate
        assert not any(name == COMMAND_DIGEST_HEADER for name, _ in refused.outgoing[0].headers)

    # a copy: the same fields, in any order
    for copy in (
        {"type": "Withdraw", "player_id": "ann", "amount": 50},
        {"amount": 50, "player_id": "ann", "type": "Withdraw"},
    ):
        again = send(processor, store, "out", copy)
        assert again.duplicate and again.result == first.result, copy
    assert store.get(TABLE).results.get("out") == first.result  # no refusal remembered


def test_the_answer_s_record_carries_its_command_s_digest_and_a_snapshot_keeps_it() -> None:
    """A rebuild keeps the window the live handler had: from the results topic (the answer's
    ``bj_command_digest`` header) or from the stream's snapshot."""
    processor, store = new_processor(), PartitionStore(0)
    send(processor, store, "open", {"type": "OpenTable", "variant": "mini-h17"})
    sit = send(processor, store, "sit", {"type": "SitDown", "player_id": "ann"})
    [header] = [value for name, value in sit.outgoing[-1].headers if name == COMMAND_DIGEST_HEADER]
    stream = store.get(TABLE)
    assert header.decode() == stream.results.digest("sit")
    assert stream.results.digest("sit") != stream.results.digest("open")

    codec = SnapshotCodec(b"s" * 32)
    decoded = codec.decode(codec.encode(stream))
    assert decoded.results.stored_digests() == stream.results.stored_digests()
    assert None not in decoded.results.stored_digests()

    # a snapshot of a release before digests: every copy is answered as one, as then
    body = json.loads(json.dumps(decoded.results.stored()))
    older = AnswerWindow()
    for answer in body:
        older.add_stored(answer)
    assert older.stored_digests() == [None, None]
    assert not another_command(_with(older), "sit", "0" * 16)


def test_a_digest_leaves_the_window_with_its_answer() -> None:
    processor, store = new_processor(dedup_window=2), PartitionStore(0)
    send(processor, store, "open", {"type": "OpenTable", "variant": "mini-h17"})
    for number in range(5):
        send(processor, store, f"sit-{number}", {"type": "SitDown", "player_id": f"p{number}"})
    results = store.get(TABLE).results
    # two of each kind: the refusals (a seat taken), then those that wrote events
    assert list(results) == ["sit-3", "sit-4", "open", "sit-0"]
    assert None not in results.stored_digests()
    assert results._digests.keys() == set(results)  # sit-1, sit-2 let go with theirs


def _with(window: AnswerWindow) -> Stream:
    stream = Stream(TABLE, INITIAL_STATE)
    stream.results = window
    return stream


def test_a_default_written_out_or_left_out_or_another_round_is_the_same_command() -> None:
    """A release that adds an option with a default reads a copy sent before it (without the
    option) as the command it answered: defaults are left out of the digest. So is the round a
    bet or move names, which ``BlackjackClient`` fills in from what it knows when it sends (a
    platform process restarted since names none, one that saw the round end names the next:
    a review found the client's own resends refused)."""
    processor, store = new_processor(), PartitionStore(0)
    send(processor, store, "open", {"type": "OpenTable", "variant": "mini-h17"})
    send(processor, store, "sit", {"type": "SitDown", "player_id": "ann"})
    send(processor, store, "in", {"type": "Deposit", "player_id": "ann", "amount": 500})
    bet = {"type": "PlaceBet", "player_id": "ann", "box": 0, "amount": 100}
    first = send(processor, store, "bet", bet)
    assert first.result.status == "accepted"
    for copy in ({**bet, "round": None}, {**bet, "round": 1}, {**bet, "round": 2}):
        again = send(processor, store, "bet", copy)
        assert again.duplicate and again.result == first.result, copy
    other_box = send(processor, store, "bet", {**bet, "box": 1})
    assert other_box.result.rejection is not None
    assert other_box.result.rejection.code == "malformed"
