"""Presence at a disconnection-policy table (``surrender``): the clock's ``Disconnect`` names
the last-seen time it acted on, so a command from the player handled after it was due (one
queued behind a takeover) makes it stale; and only seated players are remembered."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from blackjack.command_handler.clock import due_commands
from blackjack.command_handler.processor import Handled
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandEnvelope
from blackjack.scenario import build_shoe
from tests.unit.committed_log import CommittedLog
from tests.unit.processor_harness import new_processor
from tests.unit.test_handler_signed_replay import PLAYER, bought_in, results
from tests.unit.test_handler_signed_replay import TABLE as TABLE_MULTI

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TIMEOUT = timedelta(seconds=30)
TABLE = "presence"


class Table:
    def __init__(self) -> None:
        self.processor = new_processor()
        self.store = PartitionStore(0)
        self.offset = 0
        self.sent: list[Handled] = []
        """What each command sent was answered, in order."""

    def send(
        self, command: cmd.TableCommand, now: datetime, command_id: str | None = None
    ) -> Handled:
        self.offset += 1
        envelope = CommandEnvelope(
            command_id=command_id or f"c-{self.offset}", stream_id=TABLE, command=command
        )
        inbound = Inbound(TABLE.encode(), envelope.model_dump_json().encode(), [], 0, self.offset)
        handled = self.processor.handle(self.store, inbound, now)
        self.sent.append(handled)
        return handled

    def due(self, now: datetime) -> list[CommandEnvelope]:
        return list(due_commands(self.store, now, TIMEOUT))


def bet_at_surrender() -> Table:
    table = Table()
    for command in (
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="sam", seat=0),
        cmd.Deposit(player_id="sam", amount=2_000),
        cmd.PlaceBet(player_id="sam", box=0, amount=700),
    ):
        assert table.send(command, T0).result.status == "accepted"
    return table


def test_a_disconnect_overtaken_by_the_player_is_refused_and_changes_nothing() -> None:
    # given sam silent since T0: the clock (a new owner's first tick, say) finds him due
    table = bet_at_surrender()
    [due] = table.due(T0 + timedelta(seconds=45))
    assert isinstance(due.command, cmd.Disconnect)
    # when his heartbeat, queued before it, is handled first
    assert table.send(cmd.Reconnect(player_id="sam"), T0 + timedelta(seconds=46)).result.status
    state = table.store.streams[TABLE].state
    handled = table.send(due.command, T0 + timedelta(seconds=46), due.command_id)
    # then the stale Disconnect is refused: no refund, sam still connected
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "player_present"
    assert handled.events == [] and table.store.streams[TABLE].state == state


def test_a_disconnect_still_due_is_taken() -> None:
    table = bet_at_surrender()
    [due] = table.due(T0 + timedelta(seconds=45))
    assert isinstance(due.command, cmd.Disconnect)
    handled = table.send(due.command, T0 + timedelta(seconds=46), due.command_id)
    assert handled.result.status == "accepted"
    assert [type(e.data).__name__ for e in handled.events] == [
        "PlayerDisconnected",
        "BetRefunded",
        "RoundCancelled",  # no bet left, no betting clock: the game cycle ends
    ]


def test_a_platforms_own_disconnect_is_not_checked_against_the_clock() -> None:
    table = bet_at_surrender()
    handled = table.send(cmd.Disconnect(player_id="sam"), T0 + timedelta(seconds=1))
    assert handled.result.status == "accepted"


def test_only_seated_players_are_remembered_and_snapshotted() -> None:
    table = bet_at_surrender()
    for i in range(50):  # strangers naming themselves: refused, and not remembered
        result = table.send(cmd.Reconnect(player_id=f"ghost-{i}"), T0).result
        assert result.rejection is not None and result.rejection.code == "not_seated"
    stream = table.store.streams[TABLE]
    assert set(stream.last_seen) == {"sam"}
    codec = SnapshotCodec(os.urandom(32))
    assert codec.decode(codec.encode(stream)).last_seen == {"sam": T0}
    # a player who leaves is forgotten
    assert table.send(cmd.ClearBets(player_id="sam"), T0).result.status == "accepted"
    assert table.send(cmd.LeaveTable(player_id="sam"), T0).result.status == "accepted"
    assert stream.last_seen == {}


def test_the_services_signed_steps_do_not_count_as_presence() -> None:
    h, deposit, _ = bought_in()  # the wallet's signed Deposit credited the table
    [credited] = results(h.forward(deposit))  # a copy: the original result again
    assert credited.status == "accepted" and credited.player_id is None
    player_sent = h.send(TABLE_MULTI, cmd.Reconnect(player_id=PLAYER))
    assert results(player_sent)[0].player_id == PLAYER


def dealt_at_surrender(cards: list[str | int]) -> Table:
    """sam's 700 dealt at T0 from a shoe starting with ``cards`` (his card, the upcard, his
    card, the hole card, then the next ones); the hand waits for his decision."""
    table = Table()
    shoe = build_shoe(4, cards)
    table.processor = new_processor(
        shuffler=lambda rules: cmd.ShuffleShoe(order=shoe, salt="presence-salt-0001")
    )
    for command in (
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="sam", seat=0),
        cmd.Deposit(player_id="sam", amount=2_000),
        cmd.PlaceBet(player_id="sam", box=0, amount=700),
        cmd.Deal(player_id="sam"),
    ):
        assert table.send(command, T0).result.status == "accepted"
    return table


def test_a_player_the_clock_disconnected_who_plays_on_is_watched_again() -> None:
    """The multi-seat review: a slow player the clock disconnected during a hand played on
    without a Reconnect; he stayed disconnected, the clock skipped him for good, and a bet he
    left before a real drop the next round was never returned."""
    # 9-2 against the dealer's 7 (no peek, no blackjack): the hand waits for sam's decision
    table = dealt_at_surrender(["9S", "7S", "2S", "TS", "9H"])
    [due] = table.due(T0 + timedelta(seconds=31))
    assert isinstance(due.command, cmd.Disconnect)
    assert table.send(due.command, T0 + timedelta(seconds=31), due.command_id).events
    assert not _connected(table, "sam")
    # he stands without a Reconnect: he is back
    played = table.send(cmd.Stand(player_id="sam", box=0), T0 + timedelta(seconds=40))
    assert [type(e.data).__name__ for e in played.events][:2] == [
        "PlayerReconnected",
        "PlayerStood",
    ]
    assert _connected(table, "sam")
    # the next round: a bet, then silence; the clock disconnects him again and the bet returns
    bet = cmd.PlaceBet(player_id="sam", box=0, amount=400)
    assert table.send(bet, T0 + timedelta(seconds=50)).result.status == "accepted"
    [due] = table.due(T0 + timedelta(seconds=81))
    assert isinstance(due.command, cmd.Disconnect)
    handled = table.send(due.command, T0 + timedelta(seconds=81), due.command_id)
    assert [type(e.data).__name__ for e in handled.events] == [
        "PlayerDisconnected",
        "BetRefunded",
        "RoundCancelled",  # no bet left, no betting clock: the game cycle ends
    ]


def _connected(table: Table, player_id: str) -> bool:
    state = table.store.streams[TABLE].state
    assert isinstance(state, TableState)
    return state.players[player_id].connected


def test_a_command_under_the_clocks_disconnect_id_does_not_keep_the_player_connected() -> None:
    """The clock's ``Disconnect`` id is derived from the stream, the player and when they were
    last seen (the ``handled_at`` of their last answer, on the results topic): another command
    sent under it first (an ``OpenTable`` refused, a ``Disconnect`` naming someone not seated)
    had its answer remembered, so the clock's own command was answered as its duplicate on
    every tick and sam, silent with a bet out, was never disconnected nor his bet returned (a
    live run: no event 45 s after a 30 s timeout, the duplicate answer written again every
    few seconds). Only a ``Disconnect`` may take a ``disconnect-`` id, and only one that was
    taken is remembered under it, as only an ``ExpireTimers`` that acted is under ``expire-``."""
    taken: tuple[cmd.TableCommand, ...] = (
        cmd.OpenTable(variant="surrender"),
        cmd.Disconnect(player_id="zoe"),
    )
    for taken_first in taken:
        table = bet_at_surrender()
        [due] = table.due(T0 + timedelta(seconds=45))
        assert isinstance(due.command, cmd.Disconnect)
        early = table.send(taken_first, T0 + timedelta(seconds=1), due.command_id)
        assert early.result.status == "rejected" and early.events == []
        handled = table.send(due.command, T0 + timedelta(seconds=46), due.command_id)
        assert [type(e.data).__name__ for e in handled.events] == [
            "PlayerDisconnected",
            "BetRefunded",
            "RoundCancelled",
        ], taken_first
        assert not _connected(table, "sam")


def test_the_platforms_disconnect_under_the_clocks_id_is_the_clocks() -> None:
    """A platform may send ``Disconnect``: under the clock's id for that player it acts, is
    remembered, and the clock's own command is then its duplicate (one disconnection)."""
    table = bet_at_surrender()
    [due] = table.due(T0 + timedelta(seconds=45))
    assert isinstance(due.command, cmd.Disconnect)
    early = table.send(cmd.Disconnect(player_id="sam"), T0 + timedelta(seconds=1), due.command_id)
    assert early.result.status == "accepted" and early.events
    handled = table.send(due.command, T0 + timedelta(seconds=46), due.command_id)
    assert handled.result == early.result and handled.events == []


async def test_a_takeover_sees_the_player_where_the_live_handler_did() -> None:
    """A command the window does not keep (refused ``malformed``: a game command without its
    round where the service requires one) counted as presence live, but a rebuild reads
    presence from the kept answers only: after a takeover sam was last seen 40 s earlier,
    and the new owner disconnected him, his bet refunded, where the old one kept him
    (review of the rebuild, session 34). The same rule now on both sides."""
    table, log = Table(), CommittedLog()
    table.processor.round_required = True
    for command in (
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="sam", seat=0),
        cmd.Deposit(player_id="sam", amount=2_000),
        cmd.PlaceBet(player_id="sam", box=0, amount=700, round=1),
    ):
        assert log.commit(table.send(command, T0)).result.status == "accepted"
    refused = log.commit(table.send(cmd.ClearBets(player_id="sam"), T0 + timedelta(seconds=40)))
    assert refused.result.rejection is not None
    assert refused.result.rejection.code == "malformed"
    rebuilt = await log.rebuild(table.processor, 100)
    assert rebuilt.get(TABLE).last_seen == table.store.get(TABLE).last_seen
    later = T0 + timedelta(seconds=50)
    due = [d.model_dump() for d in due_commands(table.store, later, TIMEOUT)]
    assert due == [d.model_dump() for d in due_commands(rebuilt, later, TIMEOUT)]
