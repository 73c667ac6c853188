"""GLI-19 interrupted games: a handler that rebuilt a table from the log (a takeover, a restart,
a transaction that did not commit) writes ``RoundResumed`` once, first among the events of the
first command that writes any, when a round is in play; never at a table between rounds, never
when the instance simply goes on. The audit reads it and checks where it sits. Without Kafka
(``CommittedLog``); tests/integration/test_round_resumed.py kills a real handler."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

from aiokafka import AIOKafkaConsumer, TopicPartition
from rich.console import Console

from blackjack.audit.replay import replay_stream
from blackjack.command_handler.clock import may_come_due
from blackjack.command_handler.processor import Handled
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.replay import rebuild
from blackjack.command_handler.snapshots import (
    Checkpoint,
    CheckpointSigner,
    SnapshotCodec,
    checkpoint_key,
)
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve
from blackjack.domain.state import TableState
from blackjack.domain.wallet import WalletDeposit, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from blackjack.messages.wire import WireEnvelope, to_wire
from blackjack.play.screen import history_screen, table_screen
from blackjack.projections.projector import StreamProjection
from blackjack.projections.queries import round_seen_by
from tests.integration.conftest_projections import placed
from tests.unit.processor_harness import TOPICS
from tests.unit.test_handler_windows import (
    T0,
    TABLE,
    Handler,
    _betting_round_with_a_silent_player,
)

SOLO = "solo-1"
LATER = T0 + timedelta(minutes=5)


class Table(Handler):
    """One partition's handler with every event it committed, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[EventEnvelope] = []
        self.sent = 0

    def do(self, command: cmd.TableCommand, now: datetime = T0) -> Handled:
        self.sent += 1
        handled = self.send(SOLO, command, f"c-{self.sent}", now)
        self.events += handled.events
        return handled

    def uncommitted(self, command: cmd.TableCommand, now: datetime = LATER) -> Handled:
        """``command`` handled in a transaction that then aborts: nothing reaches the log."""
        self.sent += 1
        envelope = CommandEnvelope(command_id=f"c-{self.sent}", stream_id=SOLO, command=command)
        self.offset += 1
        raw = envelope.model_dump_json().encode()
        inbound = Inbound(SOLO.encode(), raw, [], 0, self.offset)
        return self.processor.handle(self.store, inbound, now)

    def markers(self) -> list[ev.RoundResumed]:
        return [e.data for e in self.events if isinstance(e.data, ev.RoundResumed)]

    def wires(self) -> list[WireEnvelope]:
        return [to_wire(e, self.processor.seal) for e in self.events if e.stream_id == SOLO]


def seated(variant: str = "mini-h17") -> Table:
    table = Table()
    for command in (
        cmd.OpenTable(variant=variant),
        cmd.SitDown(player_id="ann", seat=0),
        cmd.Deposit(player_id="ann", amount=10_000),
    ):
        assert table.do(command).result.status == "accepted"
    return table


def betting() -> Table:
    """ann's bet is on the layout: a round in play, nothing dealt."""
    table = seated()
    assert table.do(cmd.PlaceBet(player_id="ann", box=0, amount=500)).result.status == "accepted"
    return table


def types(handled: Handled) -> list[str]:
    return [e.type for e in handled.events]


async def test_a_rebuilt_table_writes_one_marker_first_with_its_next_command() -> None:
    table = betting()
    bet_at = table.events[-1].occurred_at
    await table.take_over()
    more = table.do(cmd.PlaceBet(player_id="ann", box=0, amount=100), LATER)
    assert types(more) == ["RoundResumed", "BetPlaced"]
    marker = more.events[0]
    assert marker.data == ev.RoundResumed(round=1, last_event_at=bet_at)
    assert marker.causation_id == more.result.command_id and marker.occurred_at == LATER
    assert more.result.first_sequence == marker.sequence  # the command's transaction wrote it
    assert "RoundResumed" not in types(table.do(cmd.Deal(player_id="ann"), LATER))
    assert len(table.markers()) == 1


async def test_an_instance_that_simply_goes_on_writes_none() -> None:
    table = betting()
    table.do(cmd.PlaceBet(player_id="ann", box=0, amount=100), LATER)
    table.do(cmd.Deal(player_id="ann"), LATER)
    assert table.markers() == []


async def test_a_table_with_no_round_in_play_writes_none() -> None:
    table = seated()
    await table.take_over()
    assert types(table.do(cmd.PlaceBet(player_id="ann", box=0, amount=500))) == [
        "RoundOpened",
        "BetPlaced",
    ]
    # every bet taken back: the game cycle ends there (no betting clock at one seat)
    assert types(table.do(cmd.ClearBets(player_id="ann")))[-1] == "RoundCancelled"
    await table.take_over()
    assert "RoundResumed" not in types(table.do(cmd.PlaceBet(player_id="ann", box=0, amount=5)))
    assert table.markers() == []


async def test_a_round_open_with_every_bet_taken_back_owes_none() -> None:
    """At a table with a betting clock the round stays open to its deadline once every bet
    is taken back: nothing is in play there, so a rebuild owes no marker."""
    handler = Handler()
    _betting_round_with_a_silent_player(handler)
    cleared = handler.send(TABLE, cmd.ClearBets(player_id="ann"), "clear", T0)
    assert cleared.result.status == "accepted"
    assert handler.table().round_open and not handler.table().round_in_play
    await handler.take_over()
    assert TABLE not in handler.store.resuming
    again = handler.send(TABLE, cmd.PlaceBet(player_id="ann", box=0, amount=100), "again", T0)
    assert [e.type for e in again.events] == ["BetPlaced"]


async def test_a_refused_first_command_leaves_the_marker_owed() -> None:
    table = betting()
    await table.take_over()
    refused = table.do(cmd.Hit(player_id="ann", box=0), LATER)
    assert refused.result.status == "rejected" and refused.events == []
    assert types(table.do(cmd.Deal(player_id="ann"), LATER))[0] == "RoundResumed"
    assert len(table.markers()) == 1


async def test_an_aborted_transaction_keeps_the_marker_pending_and_never_doubles_it() -> None:
    table = betting()
    await table.take_over()
    lost = table.uncommitted(cmd.Deal(player_id="ann"))
    assert types(lost)[0] == "RoundResumed"  # written, then aborted with its command
    await table.take_over()  # the handler drops the partition's memory and rebuilds it
    dealt = table.do(cmd.Deal(player_id="ann"), LATER)
    assert types(dealt)[0] == "RoundResumed"
    assert dealt.events[0].sequence == lost.events[0].sequence
    assert len(table.markers()) == 1


async def test_a_second_takeover_before_the_first_command_still_writes_one() -> None:
    table = betting()
    await table.take_over()
    await table.take_over()
    table.do(cmd.Deal(player_id="ann"), LATER)
    assert len(table.markers()) == 1


async def test_each_takeover_during_a_round_writes_its_own() -> None:
    table = betting()
    await table.take_over()
    table.do(cmd.PlaceBet(player_id="ann", box=0, amount=100), LATER)
    await table.take_over()
    table.do(cmd.Deal(player_id="ann"), LATER + timedelta(minutes=1))
    assert [m.round for m in table.markers()] == [1, 1]


async def test_a_stream_kept_cold_owes_its_marker_when_it_thaws() -> None:
    table = betting()
    await table.take_over()
    assert table.store.freeze(SOLO, 0.0, may_come_due, now=float("inf"))
    assert SOLO in table.store.cold
    assert types(table.do(cmd.Deal(player_id="ann"), LATER))[0] == "RoundResumed"


async def test_a_stream_cold_at_the_rebuild_owes_it_too() -> None:
    """A rebuild keeps the streams of the snapshots cold, unread (``replay.rebuild``)."""
    table = betting()
    await table.take_over()
    table.store.freeze(SOLO, 0.0, may_come_due, now=float("inf"))
    table.store.mark_resuming()  # as the rebuild does, with the stream cold
    assert table.store.resuming == {SOLO}
    assert types(table.do(cmd.Deal(player_id="ann"), LATER))[0] == "RoundResumed"


async def test_a_wallet_never_owes_one() -> None:
    table = betting()
    table.send(wallet_stream("ann"), WalletDeposit(player_id="ann", amount=100), "w-1", T0)
    await table.take_over()
    assert table.store.resuming == {SOLO}
    deposit = table.send(wallet_stream("ann"), WalletDeposit(player_id="ann", amount=1), "w-2", T0)
    assert [e.type for e in deposit.events] == ["WalletDeposited"]


def test_evolve_changes_nothing() -> None:
    table = betting()
    state = table.store.streams[SOLO].state
    assert isinstance(state, TableState)
    marker = ev.RoundResumed(round=state.round, last_event_at=T0)
    assert evolve(state, marker) == state


async def test_the_audit_passes_a_resumed_round_and_shows_it() -> None:
    table = betting()
    await table.take_over()
    table.do(cmd.Deal(player_id="ann"), LATER)
    replay = replay_stream(table.wires(), table.processor.seal)
    assert replay.findings == [] and replay.stopped is None
    lines = [line.text for line in replay.rounds[1].lines]
    assert any(text.startswith("the service was interrupted after") for text in lines)


def _moved(log: list[WireEnvelope], index: int, to: int) -> list[WireEnvelope]:
    """The log with the event at ``index`` moved to ``to``, renumbered in order."""
    events = [w for i, w in enumerate(log) if i != index]
    events.insert(to, log[index])
    return [placed(w, n) for n, w in enumerate(events, start=1)]


async def test_the_audit_finds_a_marker_out_of_a_round_or_apart_from_its_command() -> None:
    table = betting()
    await table.take_over()
    table.do(cmd.Deal(player_id="ann"), LATER)
    log = table.wires()
    at = next(i for i, w in enumerate(log) if isinstance(w.data, ev.RoundResumed))
    bet = next(i for i, w in enumerate(log) if isinstance(w.data, ev.BetPlaced))
    before_the_bet = _moved(log, at, bet)
    found = [f.message for f in replay_stream(before_the_bet, table.processor.seal).findings]
    assert any("no round was in play" in m for m in found), found
    last = _moved(log, at, len(log) - 1)
    found = [f.message for f in replay_stream(last, table.processor.seal).findings]
    assert any("ends with a RoundResumed" in m for m in found), found
    wrong_time = log[at].data.model_copy(update={"last_event_at": LATER})
    forged = [*log[:at], log[at].model_copy(update={"data": wrong_time}), *log[at + 1 :]]
    found = [f.message for f in replay_stream(forged, table.processor.seal).findings]
    assert any("table's last event was written at" in m for m in found), found


async def resumed_table() -> Table:
    """ann's bet, the handler killed, the round dealt by the next one."""
    table = betting()
    await table.take_over()
    table.do(cmd.Deal(player_id="ann"), LATER)
    return table


async def test_the_round_s_log_holds_it_and_every_player_sees_it() -> None:
    table = await resumed_table()
    folded = StreamProjection.new(SOLO)
    for wire in table.wires():
        folded.apply(wire)
    record = folded.rounds[1]
    [entry] = [e for e in record.log if e.event == "RoundResumed"]
    assert entry.at == LATER and entry.data["last_event_at"] is not None
    found = {"players": [], "log": [e.model_dump(mode="json") for e in record.log]}
    for player in ("ann", "someone-else"):
        seen = round_seen_by(player, found)["log"]
        assert [e["data"] for e in seen if e["event"] == "RoundResumed"] == [entry.data]


async def test_the_player_s_history_says_the_service_was_interrupted_and_resumed() -> None:
    table = await resumed_table()
    folded = StreamProjection.new(SOLO)
    for wire in table.wires():
        folded.apply(wire)
    console = Console(width=240, record=True, color_system=None)
    console.print(history_screen(folded, "ann", 10))
    text = " ".join(console.export_text().split())
    stopped = table.markers()[0].last_event_at
    assert stopped is not None
    assert f"the service was interrupted after {stopped:%Y-%m-%d %H:%M:%S} and resumed" in text
    assert f"with the next move, at {LATER:%Y-%m-%d %H:%M:%S}; the round continued as" in text


async def test_the_table_screen_says_so_while_the_round_plays() -> None:
    table = await resumed_table()
    folded = StreamProjection.new(SOLO)
    for wire in table.wires():
        folded.apply(wire)
    console = Console(width=240, record=True, color_system=None)
    console.print(table_screen(folded, "ann"))
    text = " ".join(console.export_text().split())
    assert f"Service the service was interrupted after {T0:%Y-%m-%d %H:%M:%S} and resumed" in text


async def test_a_round_closed_by_the_operator_after_a_restart_passes_the_audit() -> None:
    """The marker is written at the closing's own time: the wait the audit counts runs from
    the table's last event before it, not from the marker."""
    table = seated("surrender")
    table.do(cmd.PlaceBet(player_id="ann", box=0, amount=500))
    await table.take_over()
    closing = table.do(cmd.CloseInterruptedRound(operator="ops-1"), T0 + timedelta(days=30))
    assert types(closing)[:2] == ["RoundResumed", "InterruptedRoundClosed"]
    replay = replay_stream(table.wires(), table.processor.seal)
    assert replay.findings == [] and replay.stopped is None


async def checkpoint(table: Table) -> None:
    """A checkpoint as the handler writes one: the table's snapshot, then where the events and
    results after it start."""
    events, results = (TopicPartition(t, 0) for t in (TOPICS.events, TOPICS.results))
    ends = await table.log.end_offsets([events, results])
    snapshot = SnapshotCodec(b"s" * 32).encode(table.store.streams[SOLO])
    mark = Checkpoint(
        partition=0,
        events_from=ends[events],
        results_from=ends[results],
        written_at=T0,
        streams=1,
    )
    written = [(SOLO, snapshot), (checkpoint_key(0), mark.encode())]
    records = [Outgoing(TOPICS.snapshots, key.encode(), value, [], 0) for key, value in written]
    done = CommandResult(command_id="-", stream_id=SOLO, status="accepted", handled_at=T0)
    table.log.commit(Handled(result=done, command_type="-", outgoing=records))


async def test_a_table_rebuilt_cold_from_its_snapshot_owes_it_with_the_time_it_kept() -> None:
    table = betting()
    bet_at = table.events[-1].occurred_at
    await checkpoint(table)
    await table.take_over()
    assert SOLO in table.store.cold and table.store.resuming == {SOLO}
    dealt = table.do(cmd.Deal(player_id="ann"), LATER)
    assert dealt.events[0].data == ev.RoundResumed(round=1, last_event_at=bet_at)


async def test_the_rebuild_counts_every_snapshot_it_read() -> None:
    """``RebuildStats.snapshots`` (the "partition rebuilt" log line) is how many streams the
    checkpoint's snapshots gave, hot or cold: it counted only those still cold at the end
    (0 here, where the deal after the checkpoint thaws the table)."""
    table = betting()
    await checkpoint(table)
    table.do(cmd.Deal(player_id="ann"), LATER)
    store, stats = await rebuild(
        cast(AIOKafkaConsumer, table.log),
        TOPICS,
        0,
        codec=SnapshotCodec(b"s" * 32),
        checkpoints=CheckpointSigner(b"c" * 32, TOPICS.snapshots),
        seal=table.processor.seal,
        dedup_window=100,
        now=LATER,
        timeout=5.0,
    )
    assert SOLO in store.streams and not store.cold
    assert stats.checkpoint and stats.snapshots == 1
