"""The payouts of tables a wallet funds that the wallet has not received yet are money in
transit too (``projections/transit.py``, direction ``to_wallet``), table by table, with the
table's last payout to the player as the time it has waited at least since; migration 0012
fills what it adds from the events already folded, as a fold from the start would. On SQLite
(PostgreSQL through the broker: tests/integration/test_money_in_transit.py).

Before, only buy-ins were counted: a ``CashOut`` a wallet refused (signed under a key its
handler does not accept) left the money between a table and the wallet, and after
``BlackjackMoneyStepRefused`` cleared only the one-off audit said so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from blackjack.domain import commands as cmd
from blackjack.domain import wallet as wl
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.dump import dump
from blackjack.projections.ids import utc
from blackjack.projections.store import ProjectionStore
from blackjack.projections.transit import TO_TABLE, TO_WALLET, InTransit, money_in_transit
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import Script, event_records
from tests.unit.migrations import migrate

TOPIC = "blackjack.events"
SEAL = ShoeSeal(bytes(range(32)))


def played() -> list[EventEnvelope]:
    """Two shared tables: ann takes money out twice, bob leaves with his balance, dee leaves
    the other table, a minute apart; then ann sends a buy-in no table answers, and pays money
    into her wallet a minute later."""
    tables = []
    for stream_id, players in (("m-1", {"ann": 10_000, "bob": 5_000}), ("m-2", {"dee": 700})):
        tables.append(Script("atlantic-city-multi", [], players, stream_id=stream_id))
    m1, m2 = tables
    for table, command in (
        (m1, cmd.Withdraw(player_id="ann", amount=1_000)),
        (m2, cmd.LeaveTable(player_id="dee")),
        (m1, cmd.LeaveTable(player_id="bob")),
        (m1, cmd.Withdraw(player_id="ann", amount=250)),
    ):
        table.tick(60)
        table.do(command)
    m1.tick(60)
    assert m1.wallet(wl.BuyIn(player_id="ann", table_id="m-9", amount=300))  # no table answers
    m1.tick(60)
    assert m1.wallet(wl.WalletDeposit(player_id="ann", amount=100))  # the wallet used since
    return sorted(
        m1.envelopes + m2.envelopes, key=lambda e: (e.occurred_at, e.stream_id, e.sequence)
    )


LOG = played()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'projections.db'}")
    await store.migrate()
    yield store
    await store.close()


async def fold(store: ProjectionStore, envelopes: list[EventEnvelope], offset: int = 0) -> None:
    records = event_records(envelopes, SEAL, TOPIC)
    await ProjectionWriter(store).apply([replace(r, offset=r.offset + offset) for r in records])


async def read(store: ProjectionStore) -> dict[str, InTransit]:
    async with store.reading() as connection:
        found = await money_in_transit(connection)
    assert {t.direction for t in found} == {TO_TABLE, TO_WALLET}
    return {t.direction: t for t in found if t.currency == "USD"}


def unanswered_buy_in() -> EventEnvelope:
    return next(e for e in LOG if isinstance(e.data, wl.BuyInSent) and e.data.table_id == "m-9")


def last_cash_out() -> tuple[int, EventEnvelope]:
    """Bob's cash-out as he left, the last event of his wallet."""
    for index in range(len(LOG) - 1, -1, -1):
        envelope = LOG[index]
        if isinstance(envelope.data, wl.CashOutReceived) and envelope.data.player_id == "bob":
            later = LOG[index + 1 :]
            if all(e.stream_id != envelope.stream_id for e in later):
                return index, envelope
    raise AssertionError("no wallet's last event is a cash-out")


async def test_a_payout_the_wallet_has_not_received_is_in_transit_until_it_arrives(
    store: ProjectionStore,
) -> None:
    index, received = last_cash_out()
    cash_out = received.data
    assert isinstance(cash_out, wl.CashOutReceived)
    paid = next(
        e for e in LOG if e.stream_id == cash_out.table_id and e.sequence == cash_out.table_sequence
    )
    await fold(store, [e for i, e in enumerate(LOG) if i != index])
    found = await read(store)
    assert (found[TO_WALLET].amount, found[TO_WALLET].wallets) == (5_000, 1)
    assert found[TO_WALLET].oldest == utc(paid.occurred_at)  # the table's payout, not later
    assert (found[TO_TABLE].amount, found[TO_TABLE].wallets) == (300, 1)
    assert found[TO_TABLE].oldest == utc(
        unanswered_buy_in().occurred_at
    )  # not the deposit's, a minute on

    await fold(store, [received], offset=len(LOG))
    found = await read(store)
    assert (found[TO_WALLET].amount, found[TO_WALLET].wallets) == (0, 0)
    assert found[TO_WALLET].oldest is None


async def test_a_payout_received_before_its_table_is_folded_is_not_in_transit(
    store: ProjectionStore,
) -> None:
    """The wallet's partition folded further than the table's: the wallet has more than the
    tables paid so far, which is no money in transit to it."""
    tables = {"m-1", "m-2"}
    await fold(store, [e for e in LOG if e.stream_id not in tables])
    found = await read(store)
    assert (found[TO_WALLET].amount, found[TO_WALLET].oldest) == (0, None)
    assert found[TO_TABLE].amount == 300  # ann's to m-9 (the wallets confirm the others)


async def test_migration_0012_fills_the_last_payouts_and_the_buy_ins_sent_as_the_fold_does(
    store: ProjectionStore,
) -> None:
    await fold(store, LOG)
    async with store.reading() as connection:
        expected = (await dump(connection)).text()
        accounts = schema.accounts
        timed = select(func.count()).where(accounts.c.paid_out_at.is_not(None))
        assert (await connection.execute(timed)).scalar_one() == 3  # ann, bob and dee
        pending = select(schema.wallets.c.pending).where(schema.wallets.c.in_transit > 0)
        [[ann_s]] = (await connection.execute(pending)).all()
        sent = utc(unanswered_buy_in().occurred_at)
        assert [t["sent_at"] for t in ann_s] == [sent.isoformat().replace("+00:00", "Z")]
    async with store.writing() as connection:
        await connection.run_sync(migrate, "0011", True)
    await store.migrate()  # as the newer release's worker does at start
    async with store.reading() as connection:
        assert (await dump(connection)).text() == expected


def stuck_then_elsewhere() -> list[EventEnvelope]:
    """Bob leaves m-1 and the wallet never receives his balance (a step refused); a minute
    later he sits at m-2, buys in from his wallet and takes some out, which arrives."""
    m1 = Script("atlantic-city-multi", [], {"bob": 5_000}, stream_id="m-1")
    m2 = Script("atlantic-city-multi", [], stream_id="m-2")
    m1.sequences["m-2"] = m2.sequences["m-2"]
    m2.wallets, m2.sequences = m1.wallets, m1.sequences  # one wallet, played at both
    m1.tick(60)
    m1.wallet = lambda command: False  # type: ignore[method-assign]  # the CashOut refused
    m1.do(cmd.LeaveTable(player_id="bob"))
    m2.now = m1.now + timedelta(seconds=60)
    m2.do(cmd.SitDown(player_id="bob", seat=1))  # (alice, the script's own, at 0)
    m2.fund("bob", 1_000)
    m2.tick(60)
    m2.do(cmd.Withdraw(player_id="bob", amount=300))
    return sorted(
        m1.envelopes + m2.envelopes, key=lambda e: (e.occurred_at, e.stream_id, e.sequence)
    )


async def test_a_payout_stuck_waits_since_it_was_made_while_the_player_plays_elsewhere(
    store: ProjectionStore,
) -> None:
    """A diff review: the time was the player's last payout at any table, so a player paid
    out at another table (their withdrawal there, received) moved it on and the alert's 15
    minutes began again; each table's payouts are now told from the others' by what the
    wallet received from it (``wallets.cashed_in_from``)."""
    log = stuck_then_elsewhere()
    await fold(store, log)
    found = await read(store)
    left = next(e for e in log if e.type == "SeatLeft")
    assert (found[TO_WALLET].amount, found[TO_WALLET].wallets) == (5_000, 1)
    assert found[TO_WALLET].oldest == utc(left.occurred_at)  # not the withdrawal's, 2 min on
    assert any(e.type == "CashOutReceived" and e.stream_id == "wallet:bob" for e in log)
