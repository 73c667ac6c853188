"""What reads the log understands a player the server stood up after rounds sat out
(``SeatLeft`` reason ``sat_out``): the read model frees the seat, pays the account out and
keeps the stand-up in the recall of the round it ended; the engine replay finds a stand-up
the rules do not allow or one that is missing; the money went back to the wallet once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from blackjack.audit.recall import replay_round
from blackjack.audit.replay import replay_stream
from blackjack.audit.transfers import reconcile
from blackjack.audit.words import describe
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WireEnvelope, encode, to_wire
from blackjack.play.screen import table_screen
from blackjack.projections.dump import dump
from blackjack.projections.projector import StreamProjection
from blackjack.projections.queries import round_detail, table_state
from blackjack.projections.store import ProjectionStore
from blackjack.projections.wallets import WalletProjection
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import Script, placed

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
OPTION = "seat_released_after_rounds_sat_out"
TABLE, BEN_WALLET = "table-1", wl.wallet_stream("ben")


def stood_up() -> Script:
    """atlantic-city-multi freeing a seat after 2 rounds sat out: ann (100.00) plays two
    rounds, winning 10.00 in each; ben (100.00 bought in from his wallet) does nothing and is
    stood up as the second one ends."""
    script = Script(
        "atlantic-city-multi",
        [["TS", "7S", "9S", "TD", "TH", "7H", "9H", "TC"]],
        players={"ann": 10_000, "ben": 10_000},
        overrides={OPTION: 2},
    )
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert script.state.deadline is not None
    script.now = script.state.deadline
    script.do(cmd.ExpireTimers())
    script.tick()
    script.do(cmd.Stand(player_id="ann", box=0))
    script.tick()
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
    )
    assert "ben" not in script.state.players
    return script


def logs(script: Script) -> dict[str, list[WireEnvelope]]:
    out: dict[str, list[WireEnvelope]] = {}
    for envelope in script.envelopes:
        out.setdefault(envelope.stream_id, []).append(to_wire(envelope, SEAL))
    return out


def test_the_read_model_frees_the_seat_pays_the_account_out_and_recalls_the_stand_up() -> None:
    folded: dict[str, Any] = {}
    for wire in logs(stood_up())[TABLE] + logs(stood_up())[BEN_WALLET]:
        kind = WalletProjection if wire.stream_id == BEN_WALLET else StreamProjection
        folded.setdefault(wire.stream_id, kind.new(wire.stream_id)).apply(wire)
    table = folded[TABLE]
    ben = table.accounts["ben"]
    assert (ben.seated, ben.seat, ben.available, ben.cashed_out) == (False, None, 0, 10_000)
    assert table.accounts["ann"].seated
    # The stand-up is in the recall of round 2, the round it ended, after its settlement.
    round_2 = table.rounds[2]
    assert [e.event for e in round_2.log[-2:]] == ["RoundSettled", "SeatLeft"]
    assert round_2.log[-1].data["reason"] == "sat_out"
    assert round_2.log[-1].data["rounds_sat_out"] == 2
    assert round_2.status == "settled"
    assert all(e.event != "SeatLeft" for e in table.rounds[1].log)
    # ben's wallet has his 100.00 back.
    assert folded[BEN_WALLET].view.balance == 10_000


def test_the_honest_log_replays_and_reconciles_without_a_finding() -> None:
    played = logs(stood_up())
    replayed = replay_stream(played[TABLE], SEAL)
    assert replayed.findings == []
    lines = [line.text for line in replayed.rounds[2].lines]
    assert lines[-1] == (
        "ben stood up by the server after 2 rounds sat out, 100.00 paid out"
        "  [decided by the server]"
    )
    assert reconcile(played).findings == []
    cash_outs = [w.data for w in played[BEN_WALLET] if isinstance(w.data, wl.CashOutReceived)]
    assert [c.amount for c in cash_outs] == [10_000]


def _forged(change: Callable[[list[WireEnvelope]], list[WireEnvelope]]) -> list[str]:
    return [f.message for f in replay_stream(change(logs(stood_up())[TABLE]), SEAL).findings]


def _changed_seat_left(**update: object) -> Callable[[list[WireEnvelope]], list[WireEnvelope]]:
    def change(log: list[WireEnvelope]) -> list[WireEnvelope]:
        index = next(i for i, w in enumerate(log) if isinstance(w.data, ev.SeatLeft))
        data = log[index].data.model_copy(update=update)
        return [*log[:index], log[index].model_copy(update={"data": data}), *log[index + 1 :]]

    return change


def _without_the_option(log: list[WireEnvelope]) -> list[WireEnvelope]:
    opened = log[0].data
    assert isinstance(opened, ev.TableOpened)
    rules = opened.rules.model_copy(update={OPTION: None})
    return [
        log[0].model_copy(update={"data": opened.model_copy(update={"rules": rules})}),
        *log[1:],
    ]


def _cut_after_the_settlement(log: list[WireEnvelope]) -> list[WireEnvelope]:
    return [w for w in log if not isinstance(w.data, ev.SeatLeft)]


FORGERIES: dict[str, tuple[Callable[[list[WireEnvelope]], list[WireEnvelope]], str]] = {
    "a count that is not the log's": (
        _changed_seat_left(rounds_sat_out=3),
        "rounds ben sat out: recorded 3, the rules give 2",
    ),
    "a stand-up at a table whose rules free no seat": (
        _without_the_option,
        "ben stood up by the server at a table whose rules free no seat",
    ),
    "a stand-up recorded as the player's own leaving": (
        _changed_seat_left(reason="left", rounds_sat_out=None),
        "ben sat out 2 rounds in a row and was not stood up at the end of round 2",
    ),
    "a stand-up left out of the log": (
        _cut_after_the_settlement,
        "ben sat out 2 rounds in a row and was not stood up at the end of round 2",
    ),
    "money kept back": (
        _changed_seat_left(balance_returned=9_999),
        "ben's money paid out: recorded 9999, the rules give 10000",
    ),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_stand_up_is_found(name: str) -> None:
    change, message = FORGERIES[name]
    assert message in _forged(change)


def test_the_money_is_returned_exactly_once() -> None:
    played = logs(stood_up())
    wallet = played[BEN_WALLET]
    received = next(w for w in wallet if isinstance(w.data, wl.CashOutReceived))
    twice = [*wallet, placed(received, wallet[-1].sequence + 1)]
    findings = reconcile({**played, BEN_WALLET: twice}).findings
    assert any("received again" in f.message for f in findings)
    more = received.data.model_copy(update={"amount": 10_001})
    forged = [w.model_copy(update={"data": more}) if w is received else w for w in wallet]
    assert reconcile({**played, BEN_WALLET: forged}).findings


async def test_the_store_recalls_the_stand_up_in_its_round_when_a_batch_ends_before_it(
    tmp_path: Path,
) -> None:
    """A batch that ends with the round's settlement: the next one loads the round's record
    from the store to add the stand-up to it, and the read model is the one-batch fold's."""
    envelopes = stood_up().envelopes
    records = [
        Record("blackjack.events", 0, offset, encode(to_wire(envelope, SEAL)))
        for offset, envelope in enumerate(envelopes)
    ]
    cut = next(i for i, e in enumerate(envelopes) if isinstance(e.data, ev.SeatLeft))
    dumps = []
    for batches in ([records], [records[:cut], records[cut:]]):
        store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / f'{len(batches)}.db'}")
        await store.migrate()
        try:
            writer = ProjectionWriter(store)
            for batch in batches:
                await writer.apply(batch)
            async with store.reading() as connection:
                dumps.append((await dump(connection)).text())
                recalled = await round_detail(connection, TABLE, 2)
                shown = await table_state(connection, TABLE)
        finally:
            await store.close()
        assert recalled is not None
        assert [e["event"] for e in recalled["log"][-2:]] == ["RoundSettled", "SeatLeft"]
        # GLI-19 recall: the stand-up is the server's decision for ben, the settlement none
        assert [e["decided_by"] for e in recalled["log"][-2:]] == [None, "server"]
        # the query API's table: ben's seat is free, ann plays on
        assert shown is not None
        assert [(p["player_id"], p["seat"]) for p in shown["players"]] == [("ann", 0)]
    assert dumps[0] == dumps[1]


def test_blackjack_play_tells_the_player_and_the_others() -> None:
    table = StreamProjection.new(TABLE)
    for wire in logs(stood_up())[TABLE]:
        table.apply(wire)

    def shown(player_id: str) -> str:
        console = Console(width=160, record=True, color_system=None)
        console.print(table_screen(table, player_id))
        return " ".join(console.export_text().split())

    ben = shown("ben")
    assert (
        "You stood up by the server after 2 rounds sat out: seat 1 is free, 100.00 USD back "
        "in your wallet · sit N to play again" in ben
    )
    assert (
        "not seated: sit N to sit down · cashed out to your wallet at this table in all: 100.00 USD"
        in ben
    )
    ann = shown("ann")
    # ben's money is his alone, as in the query API's view of the round for ann
    assert "ben stood up by the server after 2 rounds sat out: seat 1 is free" in ann
    assert "100.00" not in ann


def test_a_player_seated_again_is_not_told_to_sit_down() -> None:
    """The QA session: ben stood up, then `blackjack play --seat 1` sat him again; the note
    of the stand-up still said "sit N to play again" to a seated player."""
    script = stood_up()
    script.do(cmd.SitDown(player_id="ben", seat=1))
    table = StreamProjection.new(TABLE)
    for wire in logs(script)[TABLE]:
        table.apply(wire)
    console = Console(width=160, record=True, color_system=None)
    console.print(table_screen(table, "ben"))
    shown = " ".join(console.export_text().split())
    assert "You stood up by the server after 2 rounds sat out" in shown
    assert "sit N" not in shown


def test_a_replay_from_a_store_that_stops_before_the_stand_up_finds_nothing_missing() -> None:
    """``blackjack replay --source store`` reads a read model that may lag the log, maybe
    folded up to the settlement and not the stand-up after it; from the log itself
    (``--source kafka``) a stand-up left out is a finding."""
    table = logs(stood_up())[TABLE]
    folded = [w for w in table if not isinstance(w.data, ev.SeatLeft)]
    assert replay_round(folded, 2, SEAL, TABLE, complete=False).findings == []
    assert replay_round(folded, 2, SEAL, TABLE).findings


def test_one_round_sat_out_is_one_round() -> None:
    """A table that frees a seat after a single round sat out: said "1 round", not "1 rounds",
    to the players and in the replay."""
    table = StreamProjection.new(TABLE)
    for wire in _changed_seat_left(rounds_sat_out=1)(logs(stood_up())[TABLE]):
        table.apply(wire)
    console = Console(width=160, record=True, color_system=None)
    console.print(table_screen(table, "ann"))
    text = " ".join(console.export_text().split())
    assert "ben stood up by the server after 1 round sat out: seat 1" in text
    left = ev.SeatLeft(
        player_id="ben", seat=1, balance_returned=0, reason="sat_out", rounds_sat_out=1
    )
    state = stood_up().state
    assert describe(state, left).startswith("ben stood up by the server after 1 round sat out,")
