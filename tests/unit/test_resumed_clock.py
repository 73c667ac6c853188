"""GLI-19 interrupted games at a table of one seat on a clock (``turn_seconds`` as an override):
a single-player round resumes as it was, so the ``RoundResumed`` a rebuild owes starts the
round's clock again, a whole turn from the marker, and the clock sends its command at once to
write it. Before, the deadline ran on through the outage and the clock stood the hand (or
dealt the bet) the moment a handler took the table over. A shared table keeps its deadline:
the others wait on it. Without Kafka (``CommittedLog``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from rich.console import Console

from blackjack.audit.replay import replay_stream
from blackjack.command_handler.clock import due_commands
from blackjack.command_handler.processor import Handled
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.rules import Rules
from blackjack.domain.state import TableState
from blackjack.messages.wire import WireEnvelope, decode
from blackjack.play.screen import history_screen, server_decisions
from blackjack.projections.projector import StreamProjection
from blackjack.scenario import build_shoe
from tests.unit.processor_harness import TOPICS, new_processor
from tests.unit.test_handler_windows import (
    T0,
    TABLE,
    Handler,
    _betting_round_with_a_silent_player,
)
from tests.unit.test_round_resumed import LATER, SOLO, Table, types

TURN = timedelta(seconds=15)
PRESENCE = timedelta(seconds=30)


class ClockedTable(Table):
    """ann alone at a mini-h17 table opened with a 15-second clock."""

    def __init__(self, cards: Sequence[str] = ()) -> None:
        super().__init__()
        if cards:

            def stacked(rules: Rules) -> cmd.ShuffleShoe:
                order = build_shoe(rules.decks, list(cards))
                return cmd.ShuffleShoe(order=order, salt="stacked-salt-0000")

            self.processor = new_processor(shuffler=stacked)
        for command in (
            cmd.OpenTable(variant="mini-h17", overrides={"turn_seconds": 15}),
            cmd.SitDown(player_id="ann", seat=0),
            cmd.Deposit(player_id="ann", amount=10_000),
        ):
            assert self.do(command).result.status == "accepted"

    def state(self) -> TableState:
        state = self.store.streams[SOLO].state
        assert isinstance(state, TableState)
        return state

    def due(self, now: datetime) -> list[cmd.ExpireTimers]:
        return [
            e.command
            for e in due_commands(self.store, now, PRESENCE)
            if isinstance(e.command, cmd.ExpireTimers)
        ]

    def tick(self, now: datetime) -> Handled:
        """The clock's one command due at ``now``, handled."""
        [timer] = [e for e in due_commands(self.store, now, PRESENCE) if e.stream_id == SOLO]
        handled = self.deliver(timer, now)
        self.events += handled.events
        return handled

    def audit_findings(self) -> list[str]:
        replay = replay_stream(self.wires(), self.processor.seal)
        assert replay.stopped is None
        return [finding.message for finding in replay.findings]


def bet_on_the_clock() -> ClockedTable:
    table = ClockedTable()
    assert table.do(cmd.PlaceBet(player_id="ann", box=0, amount=500)).result.status == "accepted"
    assert table.state().deadline == T0 + TURN
    return table


async def test_the_clock_starts_again_at_once_and_the_bet_is_not_dealt_in() -> None:
    table = bet_on_the_clock()
    await table.take_over()
    restarted = table.tick(LATER)  # long after the old deadline
    assert restarted.result.status == "accepted"
    assert [e.data for e in restarted.events] == [
        ev.RoundResumed(round=1, last_event_at=T0, deadline=LATER + TURN)
    ]
    state = table.state()
    assert state.deadline == LATER + TURN and state.phase == "betting"
    assert state.boxes[0].bet == 500 and not state.boxes[0].hands
    assert table.due(LATER + TURN - timedelta(seconds=1)) == []
    dealt_in = table.tick(LATER + TURN)  # the new deadline: the clock acts as it always does
    assert types(dealt_in)[:2] == ["PlayerTimedOut", "DealRequested"]
    assert table.audit_findings() == []


async def test_a_takeover_before_the_old_deadline_restarts_it_too() -> None:
    table = bet_on_the_clock()
    await table.take_over()
    soon = T0 + timedelta(seconds=5)
    assert len(table.due(soon)) == 1  # not waiting for the old deadline
    table.tick(soon)
    assert table.state().deadline == soon + TURN
    assert table.due(T0 + TURN) == []  # the old deadline acts no more
    assert table.markers() == [ev.RoundResumed(round=1, last_event_at=T0, deadline=soon + TURN)]


async def test_the_player_s_move_after_the_old_deadline_is_decided_on_the_resumed_round() -> None:
    # ann's 16 against the dealer's 9: no peek, no insurance, her turn on the clock
    table = ClockedTable(cards=["10", "9", "6", "7"])
    table.do(cmd.PlaceBet(player_id="ann", box=0, amount=500))
    table.do(cmd.Deal(player_id="ann"))
    assert table.state().phase == "playing" and table.state().deadline == T0 + TURN
    await table.take_over()
    hit = table.do(cmd.Hit(player_id="ann", box=0), LATER)
    assert hit.result.status == "accepted", hit.result.rejection
    assert types(hit)[:3] == ["RoundResumed", "PlayerHit", "CardDealt"]
    assert hit.events[0].data == ev.RoundResumed(round=1, last_event_at=T0, deadline=LATER + TURN)
    assert "PlayerTimedOut" not in [e.type for e in table.events]
    assert table.audit_findings() == []


async def test_a_heartbeat_or_a_refusal_keeps_neither_the_marker_nor_its_clock() -> None:
    table = bet_on_the_clock()
    await table.take_over()
    heartbeat = table.do(cmd.Reconnect(player_id="ann"), LATER)
    refused = table.do(cmd.Hit(player_id="ann", box=0), LATER)
    assert heartbeat.result.status == "accepted" and heartbeat.events == []
    assert refused.result.status == "rejected" and refused.events == []
    assert table.state().deadline == T0 + TURN  # what the log says, until the marker
    assert SOLO in table.store.resuming
    later = LATER + timedelta(minutes=1)
    table.tick(later)
    assert table.markers() == [ev.RoundResumed(round=1, last_event_at=T0, deadline=later + TURN)]


async def test_a_shared_table_keeps_its_deadline() -> None:
    handler = Handler()
    deadline = _betting_round_with_a_silent_player(handler)
    await handler.take_over()
    assert [e for e in due_commands(handler.store, T0, PRESENCE) if e.stream_id == TABLE] == []
    [timer] = [e for e in due_commands(handler.store, deadline, PRESENCE) if e.stream_id == TABLE]
    expired = handler.deliver(timer, deadline)
    marker = expired.events[0].data
    assert isinstance(marker, ev.RoundResumed) and marker.deadline is None
    assert [e.type for e in expired.events][1] == "PlayerTimedOut"


async def _ben_left_out(interrupted: bool) -> str:
    """What the recall says the server did for ben, silent through the betting deadline of a
    shared table, with the service interrupted (a takeover) while the clock ran, or not."""
    handler = Handler()
    deadline = _betting_round_with_a_silent_player(handler)
    if interrupted:
        await handler.take_over()
    [timer] = [e for e in due_commands(handler.store, deadline, PRESENCE) if e.stream_id == TABLE]
    handler.deliver(timer, deadline)
    folded = StreamProjection.new(TABLE)
    for key, value in handler.log.records(TOPICS.events):
        if key == TABLE.encode():
            folded.apply(decode(value))
    return server_decisions(folded.rounds[1])[("ben", None, None)]


async def test_the_recall_says_the_service_was_interrupted_while_a_shared_clock_ran() -> None:
    """The recall review: at a shared table the service stopped during a player's 15 s and the
    deadline it keeps passed meanwhile; the recall said only "no bet or pass in time", as if
    the player had let it run out. It says the service was interrupted while the time ran."""
    assert await _ben_left_out(interrupted=True) == (
        "left out of the round by the server: no bet or pass in time (the service was "
        "interrupted while the time ran)"
    )
    assert (await _ben_left_out(interrupted=False)).endswith("no bet or pass in time")


def _forged(log: list[WireEnvelope], deadline: datetime) -> list[WireEnvelope]:
    return [
        w.model_copy(update={"data": w.data.model_copy(update={"deadline": deadline})})
        if isinstance(w.data, ev.RoundResumed)
        else w
        for w in log
    ]


async def test_the_audit_checks_the_restarted_deadline() -> None:
    table = bet_on_the_clock()
    await table.take_over()
    table.tick(LATER)
    longer = _forged(table.wires(), LATER + TURN * 2)
    found = [f.message for f in replay_stream(longer, table.processor.seal).findings]
    assert any(m.startswith("the restarted clock's deadline: recorded") for m in found), found


async def test_the_audit_finds_a_clock_restarted_where_none_restarts() -> None:
    table = bet_on_the_clock()
    await table.take_over()
    table.tick(LATER)
    shared = [
        w.model_copy(
            update={"data": w.data.model_copy(update={"rules": w.data.rules.model_copy(
                update={"seats": 2})})}
        )
        if isinstance(w.data, ev.TableOpened)
        else w
        for w in table.wires()
    ]  # fmt: skip
    found = [f.message for f in replay_stream(shared, table.processor.seal).findings]
    assert any("with its clock restarted where none restarts" in m for m in found), found


async def test_the_table_view_and_the_recall_show_the_new_deadline() -> None:
    table = bet_on_the_clock()
    await table.take_over()
    table.tick(LATER)
    folded = StreamProjection.new(SOLO)
    for wire in table.wires():
        folded.apply(wire)
    assert folded.view.deadline == LATER + TURN
    assert folded.rounds[1].betting_deadline == LATER + TURN  # not the one run out
    console = Console(width=400, record=True, color_system=None)
    console.print(history_screen(folded, "ann", 10))
    text = " ".join(console.export_text().split())
    assert f"its clock started again (to {LATER + TURN:%H:%M:%S})" in text
    replay = replay_stream(table.wires(), table.processor.seal)
    lines = [line.text for line in replay.rounds[1].lines]
    assert any("its clock started again" in line for line in lines), lines


async def test_a_second_takeover_restarts_it_again_and_the_audit_follows() -> None:
    """The lone marker is the table's last event: the next one names its time, and the audit
    reads it so."""
    table = bet_on_the_clock()
    await table.take_over()
    table.tick(LATER)
    await table.take_over()
    again = LATER + timedelta(minutes=1)
    assert table.due(again)  # at once, not at the first restart's deadline
    table.tick(again)
    assert table.markers() == [
        ev.RoundResumed(round=1, last_event_at=T0, deadline=LATER + TURN),
        ev.RoundResumed(round=1, last_event_at=LATER, deadline=again + TURN),
    ]
    assert table.state().deadline == again + TURN
    assert table.audit_findings() == []
