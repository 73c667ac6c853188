"""Closing an interrupted round (page 003: "After a 30 days period we reserve the right to
manage all interrupted games"): only after the table's ``interrupted_round_days`` since its
last event, and then the server finishes the round under the rules, recording each decision
it takes in the player's place; the idle time comes from the log, never from the command."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from pydantic import TypeAdapter

from blackjack.audit.recall import render, replay_round
from blackjack.audit.replay import replay_stream
from blackjack.audit.words import describe
from blackjack.command_handler.snapshots import SnapshotCodec, _touched_at
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import fold
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import TableState
from blackjack.messages import wire
from blackjack.messages.wire import WireEnvelope
from tests.integration.conftest_projections import Script, placed
from tests.unit.stacked_table import START, StackedTable
from tests.unit.test_presence import T0, TABLE, Table, dealt_at_surrender
from tests.unit.test_replay_engine import SEAL, messages, tamper, wires

DAYS_30 = timedelta(days=30)
EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)


def ann_at(
    variant: str, cards: list[str], *, bet: int = 1_000, **overrides: object
) -> StackedTable:
    t = StackedTable(variant, cards, overrides)
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=bet))
    return t


def close(t: StackedTable, waited: timedelta) -> list[ev.Event] | Rejection:
    """The operator's command as the service completes it: idle since the test's last event."""
    idle_since = t.now
    t.now = idle_since + waited
    return t.send(cmd.CloseInterruptedRound(operator="ops-1", idle_since=idle_since))


def kinds(events: list[ev.Event]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_hand_left_waiting_30_days_is_stood_and_the_round_settles() -> None:
    # ann's 15 (T, 5) against the dealer's 6 (hole T); the dealer's next card is a 9
    t = ann_at("surrender", ["TS", "6H", "5S", "TD", "9C"])
    t.do(cmd.Deal(player_id="ann"))
    assert t.state.phase == "playing"
    events = close(t, DAYS_30)
    assert not isinstance(events, Rejection)
    closed, timed_out, stood = events[:3]
    assert isinstance(closed, ev.InterruptedRoundClosed)
    assert (closed.operator, closed.idle_since, closed.after_days) == ("ops-1", START, 30)
    assert isinstance(timed_out, ev.PlayerTimedOut)
    assert (timed_out.phase, timed_out.action, timed_out.box, timed_out.hand) == (
        "playing",
        "stood",
        0,
        0,
    )
    assert isinstance(stood, ev.PlayerStood) and stood.total == 15
    [settled] = [e for e in events if isinstance(e, ev.HandSettled)]
    assert (settled.outcome, settled.payout) == ("win", 2_000)  # the dealer's 16 + 9 busts
    assert "RoundSettled" in kinds(events) and not t.state.round_open
    assert t.state.players["ann"].balance == 11_000


def test_insurance_is_declined_for_the_player_then_the_hand_is_stood() -> None:
    # ann's 19 against the dealer's ace (hole 7: no blackjack)
    t = ann_at("surrender", ["TS", "AH", "9S", "7D"])
    t.do(cmd.Deal(player_id="ann"))
    assert t.state.phase == "insurance"
    events = close(t, DAYS_30 + timedelta(hours=1))
    assert not isinstance(events, Rejection)
    decisions = [(e.phase, e.action) for e in events if isinstance(e, ev.PlayerTimedOut)]
    assert decisions == [("insurance", "declined_insurance"), ("playing", "stood")]
    assert "InsuranceDeclined" in kinds(events) and "DealerPeeked" in kinds(events)
    [settled] = [e for e in events if isinstance(e, ev.HandSettled)]
    assert settled.outcome == "win"  # 19 against the dealer's soft 18
    assert not t.state.round_open


def test_bets_not_dealt_go_back_and_the_round_is_cancelled() -> None:
    t = ann_at("surrender", ["TS", "6H", "5S", "TD"], bet=700)
    t.do(cmd.PlaceBet(player_id="ann", box=1, amount=300))
    assert t.state.round_open and t.state.players["ann"].balance == 9_000
    events = close(t, DAYS_30)
    assert not isinstance(events, Rejection)
    assert kinds(events) == [
        "InterruptedRoundClosed",
        "PlayerTimedOut",
        "BetRefunded",
        "BetRefunded",
        "RoundCancelled",
    ]
    refunds = [e for e in events if isinstance(e, ev.BetRefunded)]
    assert [(e.box, e.amount, e.reason) for e in refunds] == [
        (0, 700, "cancelled"),
        (1, 300, "cancelled"),
    ]
    assert t.state.players["ann"].balance == 10_000 and not t.state.round_open


def test_every_hand_left_is_stood_split_hands_and_other_boxes_included() -> None:
    # boxes 0, 1, 2 then the upcard; box 0 is a pair of 8s that ann splits, then leaves
    t = ann_at("surrender", ["8S", "TS", "9S", "6H", "8D", "2C", "9D", "TD", "3C", "4C", "5C"])
    t.do(
        cmd.PlaceBet(player_id="ann", box=1, amount=1_000),
        cmd.PlaceBet(player_id="ann", box=2, amount=1_000),
        cmd.Deal(player_id="ann"),
        cmd.Split(player_id="ann", box=0),
    )
    before = t.state.players["ann"].balance
    events = close(t, DAYS_30)
    assert not isinstance(events, Rejection)
    stood_for = [(e.box, e.hand) for e in events if isinstance(e, ev.PlayerTimedOut)]
    assert stood_for == [(0, 0), (0, 1), (1, 0), (2, 0)]
    settled = [e for e in events if isinstance(e, ev.HandSettled)]
    assert len(settled) == 4 and not t.state.round_open
    assert t.state.players["ann"].balance == before + sum(e.payout for e in settled)


def test_a_round_closed_shows_in_its_recall() -> None:
    t = ann_at("surrender", ["TS", "6H", "5S", "TD", "9C"])
    t.do(cmd.Deal(player_id="ann"))
    state = t.state
    events = close(t, DAYS_30)
    assert not isinstance(events, Rejection)
    assert describe(state, events[0]) == (
        "ops-1 closes the round: it waited on its players since 2026-01-01T00:00:00.000000+00:00 "
        "(the table's rules: 30 days)"
    )


@pytest.mark.parametrize(
    ("waited", "message"),
    [
        (
            DAYS_30 - timedelta(seconds=1),
            "round 1 has waited 29 days 23 hours since its last event "
            "(2026-01-01T00:00:00+00:00); the table's rules let it be closed after 30 days, "
            "from 2026-01-31T00:00:00+00:00",
        ),
        (timedelta(0), "round 1 has waited 0 days 0 hours"),
    ],
)
def test_a_round_that_has_not_waited_the_rules_days_is_not_closed(
    waited: timedelta, message: str
) -> None:
    t = ann_at("surrender", ["TS", "6H", "5S", "TD", "9C"])
    t.do(cmd.Deal(player_id="ann"))
    state = t.state
    refused = close(t, waited)
    assert isinstance(refused, Rejection) and refused.code == "round_not_interrupted"
    assert refused.message.startswith(message)
    assert t.state is state


def test_tables_whose_rules_say_nothing_of_it_refuse() -> None:
    t = ann_at("mini-h17", ["TS", "6H", "5S", "TD", "9C"])
    t.do(cmd.Deal(player_id="ann"))
    refused = close(t, timedelta(days=3650))
    assert isinstance(refused, Rejection) and refused.code == "closing_not_allowed"
    # an operator who writes the right into the table's terms sets the option
    t = ann_at("mini-h17", ["TS", "6H", "5S", "TD", "9C"], interrupted_round_days=7)
    t.do(cmd.Deal(player_id="ann"))
    assert isinstance(close(t, timedelta(days=6)), Rejection)
    assert not isinstance(close(t, timedelta(days=7)), Rejection)
    assert not t.state.round_open


def test_no_round_open_or_no_known_idle_time_is_refused() -> None:
    t = StackedTable("surrender", ["TS"])
    t.now += DAYS_30
    refused = t.send(cmd.CloseInterruptedRound(operator="ops-1", idle_since=START))
    assert isinstance(refused, Rejection) and refused.code == "round_not_interrupted"
    assert refused.message == "no round is open at this table"
    t = ann_at("surrender", ["TS"])
    refused = t.send(cmd.CloseInterruptedRound(operator="ops-1"))
    assert isinstance(refused, Rejection) and refused.code == "round_not_interrupted"


# ---- the handler: the idle time comes from the log ----------------------------------------


def interrupted_at_surrender() -> Table:
    return dealt_at_surrender(["TS", "6H", "5S", "TD", "9C"])  # sam's 15 against a 6


def test_the_handler_counts_the_wait_from_the_tables_last_event() -> None:
    table = interrupted_at_surrender()
    # a refused command is no event: the wait still counts from T0
    late = table.send(cmd.Hit(player_id="nobody", box=0), T0 + timedelta(days=10)).result
    assert late.status == "rejected"
    early = table.send(cmd.CloseInterruptedRound(operator="ops"), T0 + timedelta(days=29))
    assert early.result.rejection is not None
    assert early.result.rejection.code == "round_not_interrupted"
    handled = table.send(cmd.CloseInterruptedRound(operator="ops"), T0 + DAYS_30)
    assert handled.result.status == "accepted"
    closed = handled.events[0].data
    assert isinstance(closed, ev.InterruptedRoundClosed) and closed.idle_since == T0
    assert table.store.streams[TABLE].touched_at == T0 + DAYS_30


def test_an_idle_time_in_the_command_is_refused() -> None:
    table = interrupted_at_surrender()
    forged = cmd.CloseInterruptedRound(operator="ops", idle_since=T0 - timedelta(days=90))
    handled = table.send(forged, T0 + timedelta(days=1))
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "unauthorized"
    state = table.store.streams[TABLE].state
    assert handled.events == [] and isinstance(state, TableState) and state.round_open


def test_the_idle_time_survives_a_snapshot_and_older_snapshots_count_from_their_answers() -> None:
    table = interrupted_at_surrender()
    stream = table.store.streams[TABLE]
    codec = SnapshotCodec(os.urandom(32))
    assert codec.decode(codec.encode(stream)).touched_at == T0
    # a snapshot from before the field: from the newest answer it remembers (a refused
    # command two days later), so the round is never taken to have waited longer than it has
    table.send(cmd.Hit(player_id="nobody", box=0), T0 + timedelta(days=2))
    older_body: dict[str, Any] = {"results": [], "last_seen": {}}
    assert _touched_at(older_body, stream) == T0 + timedelta(days=2)


# ---- the audit ----------------------------------------------------------------------------


def closed_log(after: timedelta = DAYS_30) -> list[WireEnvelope]:
    script = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]])
    script.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000), cmd.Deal(player_id="alice"))
    idle_since = script.now
    script.now += after
    script.do(cmd.CloseInterruptedRound(operator="ops-1", idle_since=idle_since))
    return wires(script)


def test_the_audit_passes_a_round_closed_as_the_rules_allow() -> None:
    log = closed_log()
    assert messages(log, SEAL) == []
    replayed = replay_stream(log, SEAL)
    [round_replay] = replayed.rounds.values()
    assert any("ops-1 closes the round" in line.text for line in round_replay.lines)


def test_the_replay_dates_each_line_and_marks_the_servers_decisions() -> None:
    """The recall review: the replay showed times of day only (a closing 30 days later read
    as the same minute), and "alice stands" for the stand the server made in her place."""
    log = closed_log()
    text = render(replay_round(log, 1, SEAL, "table-1"))
    dealt = next(w for w in log if isinstance(w.data, ev.DealStarted)).occurred_at
    closed = next(w for w in log if isinstance(w.data, ev.InterruptedRoundClosed)).occurred_at
    assert f"  {dealt:%Y-%m-%d %H:%M:%S.%f}Z  #" in text
    assert f"  {closed:%Y-%m-%d %H:%M:%S.%f}Z  #" in text
    stood = [line for line in text.splitlines() if "alice stands" in line]
    assert len(stood) == 1 and stood[0].endswith("[decided by the server]")
    assert "REPLAY OK" in text


def test_the_replay_marks_only_the_decision_the_server_made() -> None:
    script = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]])
    script.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000), cmd.Deal(player_id="alice"))
    script.do(cmd.Stand(player_id="alice", box=0))
    text = render(replay_round(wires(script), 1, SEAL, "table-1"))
    assert "alice stands" in text and "decided by the server" not in text
    waiting = Script("surrender", [])
    waiting.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000))
    betting = render(replay_round(wires(waiting), 1, SEAL, "table-1"))
    assert "Dealer: no cards yet" in betting and "hole card" not in betting


def test_the_audit_finds_a_round_closed_before_its_time_or_against_the_rules() -> None:
    log = closed_log()
    closed_at = next(w for w in log if isinstance(w.data, ev.InterruptedRoundClosed))
    last_before = log[closed_at.sequence - 2].occurred_at
    # idle since before the table's last event: the wait made longer than it was
    earlier = tamper(
        log, ev.InterruptedRoundClosed, lambda e: {"idle_since": last_before - DAYS_30}
    )
    assert any("before the table's last event" in m for m in messages(earlier, SEAL))
    # idle since later than it was: closed after a day
    later = tamper(
        log,
        ev.InterruptedRoundClosed,
        lambda e: {"idle_since": closed_at.occurred_at - timedelta(days=1)},
    )
    assert any("after 1 day, 0:00:00 of waiting (30 days due)" in m for m in messages(later, SEAL))
    other_days = tamper(log, ev.InterruptedRoundClosed, lambda e: {"after_days": 1})
    assert any("the days a round may wait" in m for m in messages(other_days, SEAL))


# ---- tables an earlier release opened -----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "days"), [("surrender", 30), ("mini-h17", None), ("house-special", None)]
)
def test_a_table_opened_before_the_option_reads_with_its_presets_value(
    name: str, days: int | None
) -> None:
    """The diff review: surrender tables opened by the earlier release read the option as
    none, so the rounds waiting 30 days at the release (all on such tables) could never be
    closed. Page 003's term was there from the start: an older document reads with it, as an
    event and as a snapshot."""
    rules = PRESETS["surrender"].model_dump(mode="json")
    del rules["interrupted_round_days"]
    rules["name"] = name
    old_event = {"type": "TableOpened", "version": 1, "rules": rules}
    opened = EVENT.validate_python(wire.upcast(old_event))
    assert isinstance(opened, ev.TableOpened) and opened.version == 2
    assert opened.rules.interrupted_round_days == days
    snapshot = fold([opened]).to_doc()
    del snapshot["rules"]["interrupted_round_days"]
    assert TableState.from_doc(snapshot).rules.interrupted_round_days == days


def test_an_older_surrender_table_can_have_its_round_closed() -> None:
    rules = PRESETS["surrender"].model_dump(mode="json")
    del rules["interrupted_round_days"]
    opened = EVENT.validate_python(wire.upcast({"type": "TableOpened", "rules": rules}))
    t = ann_at("surrender", ["TS", "6H", "5S", "TD", "9C"])
    t.state = fold([opened])
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    assert not isinstance(close(t, DAYS_30), Rejection) and not t.state.round_open


# ---- what the audit refuses besides the closing's own event -------------------------------


def test_the_audit_finds_a_player_timed_out_with_no_clock_and_no_closing() -> None:
    """The diff review: without its InterruptedRoundClosed, a closing a minute after the deal
    passed the audit."""
    log = closed_log()
    index = next(i for i, w in enumerate(log) if isinstance(w.data, ev.InterruptedRoundClosed))
    deal_at = log[index - 1].occurred_at
    forged = [
        placed(w, w.sequence - 1, occurred_at=deal_at) if i > index else w
        for i, w in enumerate(log)
        if i != index
    ]
    found = messages(forged, SEAL)
    assert any("timed out (playing) with no deadline running" in m for m in found), found


def test_the_audit_finds_a_closing_that_plays_for_the_player() -> None:
    log = closed_log()
    hit = tamper(log, ev.PlayerStood, lambda e: {})  # the stand, unchanged: no finding
    assert messages(hit, SEAL) == []
    index = next(i for i, w in enumerate(log) if isinstance(w.data, ev.PlayerStood))
    stood = log[index]
    assert isinstance(stood.data, ev.PlayerStood)
    as_hit = ev.PlayerHit(round=stood.data.round, player_id="alice", box=0, hand=0)
    forged = [*log[:index], stood.model_copy(update={"data": as_hit}), *log[index + 1 :]]
    found = messages(forged, SEAL)
    assert any("PlayerHit while closing an interrupted round" in m for m in found), found


def test_the_refusal_names_the_moment_it_may_be_closed_to_the_microsecond() -> None:
    """Cut to the second, it named a moment at which the close was still refused (the
    interrupted rounds' list says the microseconds)."""
    t = ann_at("surrender", ["TS", "6H", "5S", "TD", "9C"])
    t.now += timedelta(microseconds=16_954)
    t.do(cmd.Deal(player_id="ann"))
    refused = close(t, DAYS_30 - timedelta(seconds=1))
    assert isinstance(refused, Rejection)
    assert refused.message.endswith("from 2026-01-31T00:00:00.016954+00:00")
