"""Player ids, operators' names and reasons are read by people and stored by the read models:
a control, line-breaking or bidirectional formatting character in one is ``malformed``.

Found by sending such commands to a running service on PostgreSQL: a ``SitDown`` whose
player id held a NUL, and a ``SuspendTable`` whose reason held one, were accepted; PostgreSQL
refuses a NUL in text and in JSONB, so the projection worker retried the event for ever and
every later event of both partitions stayed out of the read models (wallets, recall). An ESC
in a reason reached the terminal of ``blackjack play`` as it came."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema
import pytest

from blackjack.command_handler.clock import due_commands
from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandEnvelope
from blackjack.projections.store import nul_replaced
from blackjack.rng import csprng_shuffle
from blackjack.table import apply
from tests.unit.processor_harness import new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
TABLE = "table-1"
UNPRINTABLE = {
    "NUL": "\x00",
    "ESC": "\x1b[2J",
    "DEL": "\x7f",
    "a C1 control": "\x9b",
    "a line feed": "\n",
    "a line separator": "\u2028",
    "a right-to-left override": "\u202e",
    "a first-strong isolate": "\u2068",
    "an Arabic letter mark": "\u061c",
    # the read model's NUL: al\ufffdice and an older log's al\x00ice were one account's key
    "the replacement character": "\ufffd",
}
COMMAND_IDS = itertools.count(1)
PRINTABLE = ["ann", "Zoë Ångström", "玩家 7", "🂡 ace", "O'Brien & co"]


def handle(processor: Processor, store: PartitionStore, command: dict[str, Any]) -> Handled:
    value = json.dumps(
        {
            # its own id: one made of id(command) was reused by the next dict, which was
            # then answered as a copy of the command before it
            "command_id": f"c-{next(COMMAND_IDS)}",
            "stream_id": TABLE,
            "command": command,
        }
    ).encode()
    return processor.handle(store, Inbound(TABLE.encode(), value, [], 0, 1), NOW)


def opened(variant: str = "mini-h17") -> tuple[Processor, PartitionStore]:
    processor, store = new_processor(), PartitionStore(0)
    answer = handle(processor, store, {"type": "OpenTable", "variant": variant})
    assert answer.result.status == "accepted"
    return processor, store


def commands_with(text: str) -> dict[str, dict[str, Any]]:
    return {
        "SitDown.player_id": {"type": "SitDown", "player_id": f"a{text}b", "seat": 0},
        "SuspendTable.reason": {"type": "SuspendTable", "operator": "ops-1", "reason": f"a{text}b"},
        "SuspendTable.operator": {"type": "SuspendTable", "operator": f"o{text}p", "reason": "x"},
        "ResumeTable.operator": {"type": "ResumeTable", "operator": f"o{text}p"},
        "StandUpPlayer.reason": {
            "type": "StandUpPlayer",
            "player_id": "ann",
            "operator": "ops-1",
            "reason": f"a{text}",
        },
        "CloseInterruptedRound.operator": {"type": "CloseInterruptedRound", "operator": f"{text}"},
    }


@pytest.mark.parametrize("field", list(commands_with("")))
@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_an_unprintable_character_is_malformed_and_changes_nothing(field: str, text: str) -> None:
    processor, store = opened()
    before = store.get(TABLE).sequence
    answer = handle(processor, store, commands_with(text)[field])
    assert answer.result.status == "rejected" and answer.result.rejection is not None
    assert answer.result.rejection.code == "malformed", answer.result.rejection
    assert f"U+{ord(text[0]):04X}" in answer.result.rejection.message
    assert answer.events == [] and store.get(TABLE).sequence == before
    assert [record.topic for record in answer.outgoing] == [processor.topics.results]


@pytest.mark.parametrize("name", PRINTABLE)
def test_letters_of_any_script_spaces_and_symbols_are_taken(name: str) -> None:
    processor, store = opened()
    answer = handle(processor, store, {"type": "SitDown", "player_id": name, "seat": 0})
    assert answer.result.status == "accepted", answer.result.rejection
    suspended = handle(processor, store, {"type": "SuspendTable", "operator": name, "reason": name})
    assert suspended.result.status == "accepted", suspended.result.rejection


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_the_schema_says_so_as_the_model_does(text: str) -> None:
    """A platform validating against ``schemas/commands/`` refuses what the handler refuses."""
    schema = cmd.SitDown.model_json_schema()
    jsonschema.validate({"type": "SitDown", "player_id": "ann"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"type": "SitDown", "player_id": f"a{text}"}, schema)
    envelope = CommandEnvelope(command_id="x", stream_id=TABLE, command=cmd.SitDown(player_id="a"))
    assert envelope.command.type == "SitDown"


# ---- players seated under an older release ------------------------------------------------


def seated_under_an_older_release(player_id: str) -> tuple[Processor, PartitionStore]:
    """A surrender table (bets returned on a disconnection) where ``player_id`` sat down,
    paid in and bet before the commands refused such ids: the decider as that release ran
    it (the events of such a log fold as any other)."""
    processor, store = opened("surrender")
    stream = store.get(TABLE)
    for command in (
        cmd.SitDown.model_construct(player_id=player_id, seat=0),
        cmd.Deposit.model_construct(player_id=player_id, amount=10_000, currency=None),
        cmd.PlaceBet.model_construct(player_id=player_id, box=0, amount=500),
    ):
        assert isinstance(stream.state, TableState)
        applied = apply(stream.state, command, NOW, csprng_shuffle)
        assert not isinstance(applied, Rejection), applied
        stream.state = applied.state
        stream.sequence += len(applied.events)
    stream.last_seen[player_id] = NOW
    return processor, store


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_the_clock_disconnects_a_silent_player_seated_under_such_an_id(text: str) -> None:
    """The clock names the player in its ``Disconnect``: a refusal raised while building it
    ended the handler's clock task, so the process (exit 1), at every restart once the
    player had been silent for the presence timeout, and their bet never came back."""
    player = f"a{text}b"
    processor, store = seated_under_an_older_release(player)
    later = NOW + timedelta(seconds=60)
    [due] = due_commands(store, later, timedelta(seconds=30))
    assert isinstance(due.command, cmd.Disconnect) and due.command.player_id == player
    value = due.model_dump_json().encode()
    answer = processor.handle(store, Inbound(TABLE.encode(), value, [], 0, 2), later)
    assert answer.result.status == "accepted", answer.result.rejection
    refunded = [e.data for e in answer.events if isinstance(e.data, ev.BetRefunded)]
    assert [(e.player_id, e.amount) for e in refunded] == [(player, 500)]


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_the_operator_stands_such_a_player_up_and_pays_their_money_out(text: str) -> None:
    player = f"a{text}b"
    processor, store = seated_under_an_older_release(player)
    stand_up = {"type": "StandUpPlayer", "player_id": player, "operator": "ops", "reason": "x"}
    answer = handle(processor, store, stand_up)
    assert answer.result.status == "accepted", answer.result.rejection
    [left] = [e.data for e in answer.events if isinstance(e.data, ev.SeatLeft)]
    assert (left.player_id, left.balance_returned) == (player, 10_000)
    # a stranger under such an id is refused as any stranger is, and no id enters the log
    stranger = handle(processor, store, {**stand_up, "player_id": f"z{text}"})
    assert stranger.result.rejection is not None
    assert stranger.result.rejection.code == "not_seated" and stranger.events == []
    sit_down = handle(processor, store, {"type": "SitDown", "player_id": player, "seat": 0})
    assert sit_down.result.rejection is not None
    assert sit_down.result.rejection.code == "malformed"


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_a_withdrawal_for_no_one_seated_under_such_an_id_writes_nothing(text: str) -> None:
    """A refused platform money command is written down (``MoneyCommandRefused``), and a
    ``Withdraw`` takes such an id for a player an older release seated: one for no one wrote
    the id into the log, at a stream that did not exist made that stream, and echoed an ESC
    or a bidirectional override in its answer (review of the handler's edges, session 34)."""
    withdraw = {"type": "Withdraw", "player_id": f"\x1b]0;x\x07{text}", "amount": 100}
    processor, store = opened()
    before = store.get(TABLE).sequence
    answer = handle(processor, store, withdraw)
    assert answer.result.rejection is not None
    assert answer.result.rejection.code == "not_seated" and answer.events == []
    assert store.get(TABLE).sequence == before
    assert cmd.unprintable(answer.result.rejection.message) is None
    assert answer.result.rejection.message.startswith("'\\x1b]0;x\\x07")  # its escapes
    nowhere = PartitionStore(0)  # no table opened: no stream is made for it
    answer = handle(new_processor(), nowhere, withdraw)
    assert answer.result.rejection is not None and answer.events == []
    assert not nowhere.holds(TABLE)


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_such_a_player_s_withdrawal_refused_for_its_amount_is_written_down(text: str) -> None:
    """Refused for what it asks (more than the balance), it is kept as any refusal is: a copy
    sent once the balance would allow it is refused as a copy, not paid (the session's diff
    review: only a refusal for no one seated writes nothing)."""
    player = f"a{text}b"
    processor, store = seated_under_an_older_release(player)
    too_much = {"type": "Withdraw", "player_id": player, "amount": 10**9}
    answer = handle(processor, store, too_much)
    assert answer.result.rejection is not None
    assert answer.result.rejection.code == "insufficient_funds"
    [refused] = [e.data for e in answer.events]
    assert isinstance(refused, ev.MoneyCommandRefused) and refused.player_id == player


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_such_a_player_takes_their_money_out_and_leaves(text: str) -> None:
    player = f"a{text}b"
    processor, store = seated_under_an_older_release(player)
    withdrawn = handle(processor, store, {"type": "Withdraw", "player_id": player, "amount": 100})
    assert withdrawn.result.status == "accepted", withdrawn.result.rejection
    left = handle(processor, store, {"type": "LeaveTable", "player_id": player})
    assert left.result.status == "accepted", left.result.rejection
    [seat_left] = [e.data for e in left.events if isinstance(e.data, ev.SeatLeft)]
    assert seat_left.balance_returned == 10_000 - 100  # the bet came back first


@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_such_a_player_plays_out_the_round_they_bet_in(text: str) -> None:
    """A round dealt (or a bet placed) by an older release for such a player finishes on the
    new one: Deal, the insurance decision and the hand commands take any id a seat holds
    (refused malformed, the round was left in play with its money for good: at a
    single-player table nothing else ends it, and LeaveTable is refused round_in_progress)."""
    player = f"a{text}b"
    processor, store = seated_under_an_older_release(player)
    dealt = handle(processor, store, {"type": "Deal", "player_id": player})
    assert dealt.result.status == "accepted", dealt.result.rejection
    written = list(dealt.events)
    for _ in range(10):
        state = store.get(TABLE).state
        assert isinstance(state, TableState)
        if not state.round_open:
            break
        if state.phase == "insurance":
            move: dict[str, Any] = {"type": "DeclineInsurance", "player_id": player, "box": 0}
        else:
            move = {"type": "Stand", "player_id": player, "box": 0}
        # a stranger under such an id is refused as any stranger is, and no id enters the log
        stranger = handle(processor, store, {**move, "player_id": f"z{text}"})
        assert stranger.result.rejection is not None
        assert stranger.result.rejection.code == "not_seated" and stranger.events == []
        answer = handle(processor, store, move)
        assert answer.result.status == "accepted", answer.result.rejection
        written += answer.events
    [settled] = [e.data for e in written if isinstance(e.data, ev.RoundSettled)]
    assert [result.player_id for result in settled.results] == [player]
    # a new wager under such an id is still refused
    bet = handle(
        processor, store, {"type": "PlaceBet", "player_id": player, "box": 0, "amount": 500}
    )
    assert bet.result.rejection is not None and bet.result.rejection.code == "malformed"


@pytest.mark.parametrize("command", ["ClearBets", "RemoveBet"])
@pytest.mark.parametrize("text", UNPRINTABLE.values(), ids=UNPRINTABLE.keys())
def test_such_a_player_takes_back_the_bet_an_older_release_took(text: str, command: str) -> None:
    player = f"a{text}b"
    processor, store = seated_under_an_older_release(player)
    box = {"box": 0} if command == "RemoveBet" else {}
    taken_back = handle(processor, store, {"type": command, "player_id": player, **box})
    assert taken_back.result.status == "accepted", taken_back.result.rejection
    refunded = [e.data for e in taken_back.events if isinstance(e.data, ev.BetRefunded)]
    assert [(e.player_id, e.amount) for e in refunded] == [(player, 500)]


def test_the_operator_names_a_player_as_the_read_model_shows_a_nul() -> None:
    """A NUL an older release took in a player id is stored by the read model as U+FFFD, and
    the query API refuses an id with a NUL: the id the operator reads in ``GET
    /v1/tables/{table}`` (``a\\ufffdb``) named no seat, ``StandUpPlayer`` was refused
    ``not_seated``, and a player who never came back kept their money at the table. The
    operator's ``StandUpPlayer`` now finds the seat by that form too; the seat's own id is
    written (``SeatLeft``), and no id enters the log."""
    player = "a\x00b"
    shown = nul_replaced(player)
    assert shown == "a\ufffdb"
    processor, store = seated_under_an_older_release(player)
    stand_up = {"type": "StandUpPlayer", "player_id": shown, "operator": "ops", "reason": "x"}
    # the player's own commands still name their seat exactly: their client holds the id
    leave = handle(processor, store, {"type": "LeaveTable", "player_id": shown})
    assert leave.result.rejection is not None and leave.result.rejection.code == "not_seated"
    answer = handle(processor, store, stand_up)
    assert answer.result.status == "accepted", answer.result.rejection
    refunded = [e.data for e in answer.events if isinstance(e.data, ev.BetRefunded)]
    [left] = [e.data for e in answer.events if isinstance(e.data, ev.SeatLeft)]
    assert [(e.player_id, e.amount) for e in refunded] == [(player, 500)]
    assert (left.player_id, left.balance_returned, left.reason) == (player, 10_000, "operator")
    state = store.get(TABLE).state
    assert isinstance(state, TableState) and state.players == {}
    again = handle(processor, store, stand_up)
    assert again.result.rejection is not None and again.result.rejection.code == "not_seated"


def test_the_read_model_s_form_names_one_seat_or_none() -> None:
    """Exactly as the log holds it first (an older release may have seated ``a\\ufffdb``
    itself); a form two seated ids read as names neither; a form no seated id reads as, and
    a NUL id's own form for anyone but the operator, stay ``not_seated``."""
    processor, store = opened("atlantic-city-multi")
    stream = store.get(TABLE)
    # seated by a release before SitDown refused an id no wallet stream can name (no money
    # reached them, but the seat is held)
    for seat, player in enumerate(["a\x00\ufffd", "a\ufffd\x00", "b\ufffd", "b\x00"]):
        assert isinstance(stream.state, TableState)
        stream.state = evolve(stream.state, ev.SeatTaken(player_id=player, seat=seat))
        stream.sequence += 1

    def stand_up(shown: str) -> Handled:
        return handle(
            processor,
            store,
            {"type": "StandUpPlayer", "player_id": shown, "operator": "ops", "reason": "x"},
        )

    ambiguous = stand_up("a\ufffd\ufffd")
    assert ambiguous.result.rejection is not None and ambiguous.events == []
    assert ambiguous.result.rejection.code == "not_seated"
    assert "2 seated players" in ambiguous.result.rejection.message
    nobody = stand_up("c\ufffd")
    assert nobody.result.rejection is not None and nobody.result.rejection.code == "not_seated"
    exact = stand_up("b\ufffd")  # the seat of that very id, not b\x00's
    [left] = [e.data for e in exact.events if isinstance(e.data, ev.SeatLeft)]
    assert left.player_id == "b\ufffd"
    then = stand_up("b\ufffd")  # now b\x00's, the one seated id that reads so
    [left] = [e.data for e in then.events if isinstance(e.data, ev.SeatLeft)]
    assert left.player_id == "b\x00"
