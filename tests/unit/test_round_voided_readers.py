"""A round voided for a malfunction as its readers see it. The read model: the round's record
says voided, every account is as it was before the round (lifetime sums included: nothing the
round paid stands), the player's line adds up, and the game report counts it apart from the
money. The audit: a void the rules allow, of the round in play, returning exactly the wagers
less what the round paid, passes; anything else is a finding; the recall tells it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from blackjack.api.contract import openapi_document
from blackjack.audit.conservation import conservation
from blackjack.audit.recall import render, replay_round
from blackjack.audit.replay import replay_stream
from blackjack.command_handler import snapshots
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import Stream
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve
from blackjack.domain.state import TableState
from blackjack.messages.wire import WireEnvelope, decode, encode, to_wire
from blackjack.projections import schema
from blackjack.projections.dump import _recall_as_read
from blackjack.projections.metrics import ROUNDS_CLOSED
from blackjack.projections.projector import StreamProjection
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import RoundRecord
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import Script, placed
from tests.unit.test_replay_engine import SEAL, messages, tamper, wires, won_round

BEFORE = 10_000


def folded(script: Script) -> StreamProjection:
    projection = StreamProjection.new("table-1")
    for envelope in (e for e in script.envelopes if e.stream_id == "table-1"):
        projection.apply(to_wire(envelope, SEAL))
    return projection


def folded_stream(script: Script) -> StreamProjection:
    projection = StreamProjection.new(script.stream_id)
    for envelope in (e for e in script.envelopes if e.stream_id == script.stream_id):
        projection.apply(to_wire(envelope, SEAL))
    return projection


def void(script: Script, round: int = 1) -> None:
    script.do(cmd.VoidRound(round=round, operator="ops-1", reason="the shoe reader jammed"))


def voided_split() -> Script:
    """ann's 8,8 against the dealer's 6 split, the first hand doubled, then voided."""
    script = Script("mini-h17", [["8S", "6H", "8D", "TD", "3C", "2C", "9D"]], {"ann": BEFORE})
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.Deal(player_id="ann"),
        cmd.Split(player_id="ann", box=0),
        cmd.Double(player_id="ann", box=0),
    )
    void(script)
    return script


def test_a_voided_split_and_double_leaves_the_account_as_before_the_round() -> None:
    p = folded(voided_split())
    record = p.rounds[1]
    assert record.status == "voided" and record.closed_at is not None
    assert record.dealer.cards == ["6H", "TD"]  # the hole card shown before the void
    assert record.log[-1].event == "RoundVoided"
    account = p.accounts["ann"]
    assert (account.available, account.in_play) == (BEFORE, 0)
    assert (account.wagered, account.won, account.lost, account.rounds) == (0, 0, 0, 0)
    line = p.players[(1, "ann")]
    assert (line.wagered, line.paid, line.net) == (3_000, 3_000, 0)
    assert line.balance_before + line.net + line.deposited - line.withdrawn == line.balance_after
    assert line.balance_after == BEFORE
    (day,) = p.days.values()
    assert (day.voided, day.rounds, day.cancelled, day.wagered, day.paid) == (1, 0, 0, 0, 0)
    assert not p.view.round_open and p.view.phase == "betting"


def blackjack_paid_at_once() -> Script:
    """surrender with the operator's term: box 0 a blackjack paid at once (1,000 + 1,500),
    box 1 a 15 still to play against the dealer's 6."""
    script = Script(
        "surrender",
        [["AS", "TC", "6H", "KS", "5C", "TD"]],
        {"ann": BEFORE},
        overrides={"void_on_malfunction": True},
    )
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.PlaceBet(player_id="ann", box=1, amount=1_000),
        cmd.Deal(player_id="ann"),
    )
    return script


def test_a_blackjack_paid_at_once_and_an_insurance_leave_the_lifetime_sums() -> None:
    script = blackjack_paid_at_once()
    assert folded(script).accounts["ann"].won == 1_500
    void(script)
    p = folded(script)
    account = p.accounts["ann"]
    assert (account.available, account.in_play, account.wagered, account.won) == (BEFORE, 0, 0, 0)
    line = p.players[(1, "ann")]
    assert (line.wagered, line.paid, line.net, line.balance_after) == (2_000, 2_000, 0, BEFORE)


def test_a_payout_settled_before_the_void_is_kept_and_marked_voided() -> None:
    """The record keeps what the blackjack paid at once was paid then (the recall shows every
    payout), and says the void took it back: every hand of the round is voided, and a record
    stored before hands said so reads the same."""
    script = blackjack_paid_at_once()
    void(script)
    record = folded(script).rounds[1]
    paid, open_hand = (box.hands[0] for box in record.boxes)
    assert (paid.outcome, paid.payout, paid.voided) == ("blackjack", 2_500, True)
    assert (open_hand.outcome, open_hand.payout, open_hand.voided) == (None, None, True)
    stored = record.model_dump(mode="json")
    for box in stored["boxes"]:
        for hand in box["hands"]:
            del hand["voided"]
    assert RoundRecord.model_validate(stored) == record


def test_an_insurance_lost_at_the_peek_is_no_loss_once_voided() -> None:
    script = Script("mini-h17", [["TS", "AH", "9S", "7D"]], {"ann": BEFORE})
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.Deal(player_id="ann"),
        cmd.TakeInsurance(player_id="ann", box=0),
    )
    assert folded(script).accounts["ann"].lost == 500
    void(script)
    p = folded(script)
    account = p.accounts["ann"]
    assert (account.available, account.in_play, account.wagered, account.lost) == (BEFORE, 0, 0, 0)
    insurance = p.rounds[1].boxes[0].insurance
    assert insurance is not None
    assert (insurance.status, insurance.payout, insurance.voided) == ("settled", 0, True)
    text = render(replay_round(wires(script), 1, SEAL, "table-1"))
    assert "insurance (ann): stake 5.00: lost, pays 0.00, voided: stake back  [ok]" in text


def paid_taken_out_and_voided() -> Script:
    """``blackjack_paid_at_once``, then ann takes out all but 2.00 of her 105.00 and the
    round is voided."""
    script = blackjack_paid_at_once()
    script.do(cmd.Withdraw(player_id="ann", amount=BEFORE + 300))
    void(script)
    return script


async def test_a_payment_not_recovered_is_the_players_win_and_the_money_adds_up(
    tmp_path: Path,
) -> None:
    """surrender with the void term: box 0's blackjack is paid at once (1,000 + 1,500), ann
    takes out all but 2.00 of her 105.00 and the round is voided: 2.00 comes back, 3.00 is
    not recovered. It stays with her as money the house lost, so her account still adds up
    (deposits - withdrawals = balance + in play + losses - wins) and the audit's conservation
    check of the live store finds nothing."""
    script = paid_taken_out_and_voided()
    [voided] = [e.data for e in script.envelopes if isinstance(e.data, ev.RoundVoided)]
    assert [(r.returned, r.not_recovered) for r in voided.returns] == [(-200, 300)]
    a = folded(script).accounts["ann"]
    assert (a.available, a.in_play, a.wagered, a.won, a.lost) == (0, 0, 0, 300, 0)
    assert a.deposited - a.withdrawn - a.cashed_out == a.available + a.in_play + a.lost - a.won
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'projections.db'}")
    await store.migrate()
    try:
        table = (e for e in script.envelopes if e.stream_id == "table-1")
        records = [
            Record("blackjack.events", 0, offset, encode(to_wire(envelope, SEAL)))
            for offset, envelope in enumerate(table)
        ]
        await ProjectionWriter(store).apply(records)
        async with store.reading() as connection:
            violations, [totals] = await conservation(connection)
    finally:
        await store.close()
    assert violations == [] and totals.balanced and totals.house_result == -300


def test_the_round_after_a_void_is_played_and_counted_as_usual() -> None:
    script = Script("mini-h17", [["TS", "6H", "5S", "TD"]], {"ann": BEFORE})
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    void(script)
    # the same shoe deals on: a fifth of it is not used yet
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    script.do(cmd.Stand(player_id="ann", box=0))
    p = folded(script)
    assert [p.rounds[n].status for n in (1, 2)] == ["voided", "settled"]
    paid = p.players[(2, "ann")].paid
    (day,) = p.days.values()
    assert (day.voided, day.rounds, day.wagered, day.paid) == (1, 1, 1_000, paid)
    assert p.accounts["ann"].available == BEFORE - 1_000 + paid
    assert p.accounts["ann"].rounds == 1


def test_the_report_and_the_counter_say_what_voided_counts() -> None:
    line = openapi_document()["components"]["schemas"]["GameLine"]["properties"]
    for said in (line["voided"]["description"], ROUNDS_CLOSED._documentation):
        assert "malfunction" in said and "voided" in said, said
    assert ROUNDS_CLOSED.labels("mini-h17", "USD", "voided")._value.get() >= 0


# ---- the audit ----------------------------------------------------------------------------


def test_the_audit_passes_a_void_and_the_recall_tells_it() -> None:
    log = wires(voided_split())
    replay = replay_stream(log, SEAL)
    assert replay.findings == [] and replay.stopped is None
    assert replay.rounds[1].status == "voided"
    text = render(replay_round(log, 1, SEAL, "table-1"))
    assert "ops-1 voids the round for a malfunction (the shoe reader jammed)" in text
    assert "ann 30.00 back (balance 100.00)" in text


def test_the_recall_tells_a_payment_taken_back_as_taken_back() -> None:
    """surrender with the void term: a blackjack paid at once (25.00 for 10.00), 103.00 taken
    out of the table, the round voided: 2.00 is taken back, 3.00 not recovered, told so (not
    as "-2.00 back")."""
    script = paid_taken_out_and_voided()
    text = render(replay_round(wires(script), 1, SEAL, "table-1"))
    assert "blackjack, pays 25.00, voided: payout taken back  [ok]" in text
    assert "every wager back, nothing paid stands: ann 2.00 taken back (balance 0.00), " in text
    assert "3.00 not recovered" in text and "-2.00" not in text


def test_the_audit_finds_a_void_that_returns_other_money_or_is_not_allowed() -> None:
    log = wires(voided_split())

    def returns(**change: int) -> list[str]:
        def forged(e: ev.RoundVoided) -> dict[str, object]:
            back = e.returns[0].model_copy(update=change)
            return {"returns": (back,)}

        return messages(tamper(log, ev.RoundVoided, forged), SEAL)

    more = returns(returned=3_500, balance_after=BEFORE + 500)
    assert any("ann's return: recorded 3500, the rules give 3000" in m for m in more)
    assert any("ann's wager in the voided round" in m for m in returns(wagered=2_000))
    assert any("not recovered" in m for m in returns(not_recovered=100))

    def twice(e: ev.RoundVoided) -> dict[str, object]:
        """ann listed twice: a first entry the audit's last-one-kept reading skipped, which
        the fold still applies (9,000 more out of play: in_play -9,000)."""
        back = e.returns[0]
        first = back.model_copy(update={"wagered": 9_000, "returned": 9_000})
        return {"returns": (first.model_copy(update={"balance_after": 16_000}), back)}

    doubled = messages(tamper(log, ev.RoundVoided, twice), SEAL)
    assert any("the players in the void's returns" in m for m in doubled), doubled
    silent = Script("atlantic-city", [["TS", "6H", "5S", "TD"]], {"ann": BEFORE})
    silent.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    allowed = Script(
        "atlantic-city",
        [["TS", "6H", "5S", "TD"]],
        {"ann": BEFORE},
        overrides={"void_on_malfunction": True},
    )
    allowed.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    void(allowed)
    # the same void in the log of a table whose rules are silent: the opening's rules forged
    forged_rules = tamper(
        wires(allowed),
        ev.TableOpened,
        lambda e: {"rules": e.rules.model_copy(update={"void_on_malfunction": False})},
    )
    assert any("let no one void one" in m for m in messages(forged_rules, SEAL))


def ben_sits_out_to_round_2(*, suspended: bool) -> Script:
    """atlantic-city-multi freeing a seat after 2 rounds sat out, with the void term: ben
    sits out round 1 (the clock leaves him out), then round 2 is dealt to ann alone (while
    the table is suspended, with ``suspended``)."""
    script = Script(
        "atlantic-city-multi",
        [["TS", "7S", "9S", "TD", "TH", "7H", "9H", "TC", "TS", "7S", "9S", "TD"]],
        {"ann": BEFORE, "ben": BEFORE},
        overrides={"seat_released_after_rounds_sat_out": 2, "void_on_malfunction": True},
    )
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    assert script.state.deadline is not None
    script.now = script.state.deadline
    script.do(cmd.ExpireTimers())
    script.tick()
    script.do(cmd.Stand(player_id="ann", box=0))
    script.tick()
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000))
    if suspended:
        script.do(cmd.SuspendTable(operator="ops-1", reason="the shoe reader jammed"))
    script.do(cmd.Deal(player_id="ann"))
    return script


def ben_sits_out_then_a_void(*, suspend_before_the_deal: bool = False) -> Script:
    """``ben_sits_out_to_round_2``, round 2 voided by the operator (dealt while the table is
    suspended, with ``suspend_before_the_deal``)."""
    script = ben_sits_out_to_round_2(suspended=suspend_before_the_deal)
    if not suspend_before_the_deal:
        script.do(cmd.SuspendTable(operator="ops-1", reason="the shoe reader jammed"))
    void(script, round=2)
    script.do(cmd.ResumeTable(operator="ops-1"))
    return script


def test_a_voided_round_is_no_round_sat_out_for_the_decider_the_read_model_and_the_audit() -> None:
    """Page 000's void takes every play back: a voided round is no round sat out, as one
    dealt while the table is suspended is not. Ben's count is 1 after the void (2 had stood
    him up: before, the decider stood him up after the void), in the decider and the read
    model alike, and round 3, sat out and settled, stands him up after 2. The audit passes
    it and finds a stand-up written after the void."""
    script = ben_sits_out_then_a_void()
    assert script.state.players["ben"].rounds_sat_out == 1
    assert not any(isinstance(e.data, ev.SeatLeft) for e in script.envelopes)
    assert folded(script).accounts["ben"].rounds_sat_out == 1
    log = wires(script)
    assert messages(log, SEAL) == []
    # a SeatLeft after the void, as the decider wrote before: found
    [void_at] = [i for i, w in enumerate(log) if isinstance(w.data, ev.RoundVoided)]
    stood_up = placed(
        log[void_at],
        log[void_at].sequence + 1,
        data=ev.SeatLeft(
            player_id="ben", seat=1, balance_returned=BEFORE, reason="sat_out", rounds_sat_out=2
        ),
    )
    forged = [*log[: void_at + 1], stood_up]
    assert any("rounds ben sat out" in m for m in messages(forged, SEAL)), messages(forged, SEAL)
    script.tick()
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=1_000), cmd.Deal(player_id="ann"))
    script.do(cmd.Stand(player_id="ann", box=0))
    [left] = [e.data for e in script.envelopes if isinstance(e.data, ev.SeatLeft)]
    assert (left.player_id, left.reason, left.rounds_sat_out) == ("ben", "sat_out", 2)
    assert messages(wires(script), SEAL) == []


def as_version_1(void: WireEnvelope) -> WireEnvelope:
    """A ``RoundVoided`` as the release before wrote it (version 1, no
    ``counts_as_round_sat_out``), read back through the upcasters."""
    document = json.loads(encode(void))
    document["data"].pop("counts_as_round_sat_out", None)
    document["data"]["version"] = document["schema_version"] = 1
    return decode(json.dumps(document).encode())


def test_a_log_of_the_release_before_folds_and_audits_as_its_handler_decided_it() -> None:
    """That release's handler counted a voided round as sat out and stood ben up right after
    its (version 1) ``RoundVoided``, ``rounds_sat_out`` 2: the decider's fold, the read model
    and the audit read that log as it was decided (no count taken back, the stand-up due), as
    that handler's snapshots have it; the same stand-up after a version 2 void is found."""
    script = ben_sits_out_then_a_void()
    log = wires(script)
    [void_at] = [i for i, w in enumerate(log) if isinstance(w.data, ev.RoundVoided)]
    old_void = as_version_1(log[void_at])
    stood_up = placed(
        log[void_at],
        log[void_at].sequence + 1,
        type="SeatLeft",
        schema_version=2,
        data=ev.SeatLeft(
            player_id="ben", seat=1, balance_returned=BEFORE, reason="sat_out", rounds_sat_out=2
        ),
    )
    old_log = [*log[:void_at], old_void, stood_up]
    assert messages(old_log, SEAL) == []
    assert isinstance(old_void.data, ev.RoundVoided) and old_void.data.counts_as_round_sat_out
    projection = StreamProjection.new("table-1")
    for wire in old_log[: void_at + 1]:
        projection.apply(wire)
    state = TableState()
    table = [e.data for e in script.envelopes if e.stream_id == "table-1"]
    for event in [*table[:void_at], old_void.data]:
        assert isinstance(event, ev.Event)
        state = evolve(state, event)
    assert state.players["ben"].rounds_sat_out == 2
    assert projection.accounts["ben"].rounds_sat_out == 2
    # without the stand-up that release's handler owed: found missing
    assert any("ben" in m for m in messages(old_log[: void_at + 1], SEAL))
    new_log = [*log[: void_at + 1], stood_up]
    assert any("rounds ben sat out" in m for m in messages(new_log, SEAL))


def test_a_void_of_a_round_dealt_while_suspended_takes_back_no_count() -> None:
    """Round 2 dealt while the table is suspended counted no round sat out: its void takes
    none back (ben stays at 1), in the decider and the read model alike."""
    script = ben_sits_out_then_a_void(suspend_before_the_deal=True)
    assert script.state.players["ben"].rounds_sat_out == 1
    assert folded(script).accounts["ben"].rounds_sat_out == 1
    assert messages(wires(script), SEAL) == []


def test_what_the_deal_counted_is_kept_by_a_snapshot() -> None:
    """A handler rebuilt from a snapshot taken between round 2's deal and its void takes back
    the count as one that folded the log: the snapshot keeps ``sat_out_counted``, which one of
    the release before (without it) leaves unknown."""
    script = ben_sits_out_then_a_void()
    before_void = next(
        i for i, e in enumerate(script.envelopes) if isinstance(e.data, ev.TableSuspended)
    )
    state = TableState()
    for envelope in script.envelopes[:before_void]:
        if envelope.stream_id == "table-1" and isinstance(envelope.data, ev.Event):
            state = evolve(state, envelope.data)
    assert state.sat_out_counted and state.players["ben"].rounds_sat_out == 2
    doc = state.to_doc()
    assert TableState.from_doc(doc) == state
    doc.pop("sat_out_counted")  # an older snapshot's: it cannot tell (the test below)
    assert TableState.from_doc(doc).sat_out_counted is None


def test_a_snapshot_of_a_round_dealt_while_suspended_then_resumed_keeps_it_uncounted() -> None:
    """Round 2 dealt while the table is suspended (ben's count stays 1), the table resumed,
    then a snapshot: restored, it still says the deal counted no one (an older snapshot's
    reading would say it did, the table being no longer suspended), so a void after it
    leaves ben at 1, as the log folds."""
    script = ben_sits_out_to_round_2(suspended=True)
    script.do(cmd.ResumeTable(operator="ops-1"))
    state = script.state
    assert not state.sat_out_counted and state.players["ben"].rounds_sat_out == 1
    restored = TableState.from_doc(state.to_doc())
    assert restored == state
    void(script, round=2)
    [voided] = [e.data for e in script.envelopes if isinstance(e.data, ev.RoundVoided)]
    assert evolve(restored, voided).players["ben"].rounds_sat_out == 1
    assert script.state.players["ben"].rounds_sat_out == 1


def restored_from_the_release_before(script: Script) -> None:
    """The handler restores the table from a snapshot the release before wrote now: the same
    document without ``sat_out_counted``, which that release did not keep."""
    doc = script.state.to_doc()
    doc.pop("sat_out_counted", None)
    script.state = TableState.from_doc(doc)


def test_a_void_after_an_older_snapshot_folds_as_the_handler_decided_it() -> None:
    """A snapshot of the release before, taken between round 2's deal and its void, cannot
    tell whether the deal counted ben's round sat out: dealt before the table was suspended
    (it did), dealt while suspended (it did not), or so and resumed since (it did not). The
    handler restored from it voids as that release did (the count kept, ben stood up at the
    limit, ``counts_as_round_sat_out`` true), and the read model and the audit, folding the
    log, have each count as the handler has it. Before, the handler guessed from the
    suspension now: ben 2 in the handler against 1 in the read model (suspended after the
    deal), 0 against 1 (dealt suspended, resumed)."""
    after = ben_sits_out_to_round_2(suspended=False)
    after.do(cmd.SuspendTable(operator="ops-1", reason="the shoe reader jammed"))
    before = ben_sits_out_to_round_2(suspended=True)
    resumed = ben_sits_out_to_round_2(suspended=True)
    resumed.do(cmd.ResumeTable(operator="ops-1"))
    for script in (after, before, resumed):
        restored_from_the_release_before(script)
        void(script, round=2)
        accounts = folded(script).accounts
        for player_id in ("ann", "ben"):
            player = script.state.players.get(player_id)
            account = accounts[player_id]
            assert account.seated == (player is not None), player_id
            if player is not None:
                assert account.rounds_sat_out == player.rounds_sat_out, player_id
        assert messages(wires(script), SEAL) == []
        [voided] = [e.data for e in script.envelopes if isinstance(e.data, ev.RoundVoided)]
        assert voided.counts_as_round_sat_out
    # the deal counted ben's second round sat out: stood up after the void, as before
    [left] = [e.data for e in after.envelopes if isinstance(e.data, ev.SeatLeft)]
    assert (left.player_id, left.reason, left.rounds_sat_out) == ("ben", "sat_out", 2)
    for script in (before, resumed):  # it counted none: ben stays, at 1
        assert script.state.players["ben"].rounds_sat_out == 1


def test_the_handler_restores_an_older_sealed_snapshot_as_not_knowing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the snapshot topic's codec: a table suspended after round 2's deal, sealed as
    the release before sealed it (its state without ``sat_out_counted``), opens as not known,
    so the handler's void takes the release before's way; as this release seals it, as
    counted."""
    script = ben_sits_out_to_round_2(suspended=False)
    script.do(cmd.SuspendTable(operator="ops-1", reason="the shoe reader jammed"))
    codec = SnapshotCodec(b"s" * 32)
    stream = Stream(stream_id="table-1", state=script.state, sequence=len(script.envelopes))
    kept = codec.decode(codec.encode(stream)).state
    assert isinstance(kept, TableState) and kept.sat_out_counted is True
    this_release = snapshots._state_doc

    def the_release_before(state: Any) -> dict[str, object]:
        doc = this_release(state)
        doc.pop("sat_out_counted", None)
        return doc

    monkeypatch.setattr(snapshots, "_state_doc", the_release_before)
    restored = codec.decode(codec.encode(stream)).state
    assert isinstance(restored, TableState) and restored.sat_out_counted is None
    assert restored.players == script.state.players and restored.suspended


def test_an_older_snapshot_says_what_its_deal_counted_where_it_can() -> None:
    """Between rounds, or a round where the one who sits out has no round counted (a deal
    that counted gives each one), the release before's snapshot reads as it did: not
    counted, so a void there takes nothing back and stands no one up (version 2's false)."""
    script = ben_sits_out_to_round_2(suspended=False)
    doc = script.state.to_doc()
    doc.pop("sat_out_counted", None)
    doc["players"]["ben"].pop("rounds_sat_out")
    assert TableState.from_doc(doc).sat_out_counted is False
    settled = ben_sits_out_to_round_2(suspended=False)
    settled.do(cmd.Stand(player_id="ann", box=0))
    assert "sat_out_counted" not in settled.state.to_doc()
    assert TableState.from_doc(settled.state.to_doc()) == settled.state


async def stored_round(script: Script, path: Path) -> dict[str, Any]:
    """Round 1's record as a store folding the script's table keeps it."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{path}")
    await store.migrate()
    try:
        table = (e for e in script.envelopes if e.stream_id == script.stream_id)
        await ProjectionWriter(store).apply(
            [
                Record("blackjack.events", 0, offset, encode(to_wire(envelope, SEAL)))
                for offset, envelope in enumerate(table)
            ]
        )
        async with store.reading() as connection:
            rounds = schema.rounds
            query = select(rounds.c.record).where(rounds.c.round == 1)
            record: dict[str, Any] = (await connection.execute(query)).scalar_one()
    finally:
        await store.close()
    return record


async def test_the_store_keeps_voided_only_in_a_voided_round_s_record(tmp_path: Path) -> None:
    """The release before refuses a field it does not know: its workers and query API, still
    running in a rolling update, read every record of a round not voided (none says
    ``voided``); a voided one says it of every hand, and a record that release stored of a
    voided round (without the field) compares equal with a rebuild's."""
    settled = won_round()
    kept = await stored_round(settled, tmp_path / "settled.db")
    assert "voided" not in json.dumps(kept)
    assert RoundRecord.model_validate(kept) == folded_stream(settled).rounds[1]
    void_kept = await stored_round(voided_split(), tmp_path / "voided.db")
    hands = [hand for box in void_kept["boxes"] for hand in box["hands"]]
    assert hands and all(hand["voided"] is True for hand in hands)
    older = json.loads(json.dumps(void_kept).replace(', "voided": true', ""))
    assert "voided" not in json.dumps(older["boxes"])
    assert _recall_as_read(older) == _recall_as_read(void_kept)


async def test_the_audit_names_a_stored_voided_that_says_otherwise(tmp_path: Path) -> None:
    """The dump made every record say ``voided`` as a rebuild stores it, on the live side
    too: a settled round's hand stored ``voided: true`` (the recall tells the player nothing
    it paid stands) or a voided round's hand stored ``voided: false`` compared equal with the
    rebuild, and the audit passed. Only what an older release left out is filled in."""
    kept = await stored_round(won_round(), tmp_path / "settled.db")
    void_kept = await stored_round(voided_split(), tmp_path / "voided.db")
    for record, wrong in ((kept, True), (void_kept, False)):
        changed = copy.deepcopy(record)
        changed["boxes"][0]["hands"][0]["voided"] = wrong
        assert _recall_as_read(changed) != _recall_as_read(record), wrong
    default = copy.deepcopy(kept)
    default["boxes"][0]["hands"][0]["voided"] = False  # the default, said: the same record
    assert _recall_as_read(default) == _recall_as_read(kept)
