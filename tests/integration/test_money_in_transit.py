"""The money in transit between wallets and tables, exported by the projection workers from the
read model (``projections/transit.py``), on SQLite and PostgreSQL, through the real broker: a
buy-in no table has answered shows, by currency, with the wallet's last change as the time it
has waited since; once it is confirmed the amount is 0 and the time is gone. A payout of a
table a wallet funds that the wallet has not received shows the other way (``to_wallet``),
with the table's payout as the time; migration 0012 fills that time on PostgreSQL as the fold
does.

A two-instance review found that ``BlackjackMoneyStepRefused`` clears after 15 minutes while
the money it stranded stays in transit, and nothing else said so until an audit ran."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from blackjack.command_handler.ids import event_id
from blackjack.domain import wallet as wl
from blackjack.messages.envelope import EventEnvelope, type_name
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.dump import dump
from blackjack.projections.transit import TO_TABLE, TO_WALLET
from tests.integration.conftest_projections import (
    EventsTopic,
    StoreFactory,
    projection_worker,
    publish,
    to_wire,
    wait_until,
)
from tests.unit.migrations import migrate
from tests.unit.test_cash_outs_in_transit import LOG, last_cash_out

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

SENT_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class _Wallets:
    """Wallet streams decided as the handler decides them, one command a second."""

    def __init__(self) -> None:
        self.states: dict[str, wl.WalletState] = {}
        self.envelopes: list[EventEnvelope] = []
        self.sequences: dict[str, int] = {}
        self.now = SENT_AT

    def run(self, command: wl.WalletCommand) -> None:
        stream = wl.wallet_stream(command.player_id)
        state = self.states.get(stream, wl.INITIAL_WALLET)
        decided = wl.decide_wallet(state, command)
        assert isinstance(decided, list), decided
        for event in decided:
            state = wl.evolve_wallet(state, event)
            sequence = self.sequences[stream] = self.sequences.get(stream, 0) + 1
            self.envelopes.append(
                EventEnvelope(
                    event_id=event_id(stream, sequence),
                    type=type_name(type(event)),
                    schema_version=event.version,
                    stream_id=stream,
                    sequence=sequence,
                    occurred_at=self.now,
                    data=event,
                )
            )
        self.states[stream] = state
        self.now += timedelta(seconds=1)


def gauge(name: str, currency: str, direction: str = TO_TABLE) -> float | None:
    return REGISTRY.get_sample_value(name, {"direction": direction, "currency": currency})


async def exported(
    name: str, currency: str, value: float | None, direction: str = TO_TABLE
) -> None:
    async def shown() -> bool:
        return gauge(name, currency, direction) == value

    await wait_until(shown, f"{name}{{{direction}, {currency}}} == {value}")


async def test_a_buy_in_no_table_answered_shows_as_money_in_transit_until_confirmed(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, stores: StoreFactory
) -> None:
    wallets = _Wallets()
    for player, currency in (("ann", "USD"), ("bob", "USD"), ("eve", "EUR")):
        wallets.run(wl.WalletDeposit(player_id=player, amount=10_000, currency=currency))
    wallets.run(wl.BuyIn(player_id="ann", table_id="t-1", amount=2_500))  # at 12:00:03
    wallets.run(wl.BuyIn(player_id="bob", table_id="t-1", amount=1_000))  # at 12:00:04
    wallets.run(wl.BuyIn(player_id="eve", table_id="t-2", amount=700))  # at 12:00:05
    wallets.run(wl.ConfirmBuyIn(player_id="eve", transfer=1))  # eve's arrived
    store = await stores.store()
    fast: dict[str, Any] = {"watch_every_s": 0.05}
    async with projection_worker(events_topic.bootstrap, events_topic.prefix, store, **fast):
        await publish(events_topic, to_wire(wallets.envelopes, shoe_seal))
        await exported("blackjack_money_in_transit_minor_units", "USD", 3_500)
        assert gauge("blackjack_money_in_transit_wallets", "USD") == 2
        oldest = gauge("blackjack_money_in_transit_since_timestamp_seconds", "USD")
        assert oldest == (SENT_AT + timedelta(seconds=3)).timestamp()  # ann's, the earlier
        await exported("blackjack_money_in_transit_minor_units", "EUR", 0)  # eve's arrived
        assert gauge("blackjack_money_in_transit_wallets", "EUR") == 0
        assert gauge("blackjack_money_in_transit_since_timestamp_seconds", "EUR") is None

        wallets.envelopes.clear()
        wallets.run(wl.ConfirmBuyIn(player_id="ann", transfer=1))
        wallets.run(wl.WalletDeposit(player_id="bob", amount=100))  # bob's wallet used since
        await publish(events_topic, to_wire(wallets.envelopes, shoe_seal))
        await exported("blackjack_money_in_transit_minor_units", "USD", 1_000)
        assert gauge("blackjack_money_in_transit_wallets", "USD") == 1
        oldest = gauge("blackjack_money_in_transit_since_timestamp_seconds", "USD")
        # bob's buy-in now, as sent: before, his wallet's last change, which the deposit moved
        # on (a runbook drill: the alert cleared while the money was still stuck)
        assert oldest == (SENT_AT + timedelta(seconds=4)).timestamp()

        async with store.reading() as connection:
            folded = (await dump(connection)).text()
        async with store.writing() as connection:
            await connection.run_sync(migrate, "0011", True)
        await store.migrate()  # 0012 fills bob's buy-in's sending from the events folded
        async with store.reading() as connection:
            assert (await dump(connection)).text() == folded

        wallets.envelopes.clear()
        wallets.run(wl.RefundBuyIn(player_id="bob", transfer=1, reason="table_not_open"))
        await publish(events_topic, to_wire(wallets.envelopes, shoe_seal))
        await exported("blackjack_money_in_transit_minor_units", "USD", 0)
        assert gauge("blackjack_money_in_transit_wallets", "USD") == 0
        assert gauge("blackjack_money_in_transit_since_timestamp_seconds", "USD") is None


async def test_a_payout_no_wallet_received_shows_as_money_in_transit_until_it_arrives(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, stores: StoreFactory
) -> None:
    index, received = last_cash_out()  # bob's 50.00 as he left m-1
    left = next(e for e in LOG if e.stream_id == "m-1" and e.type == "SeatLeft")
    store = await stores.store()
    fast: dict[str, Any] = {"watch_every_s": 0.05}
    async with projection_worker(events_topic.bootstrap, events_topic.prefix, store, **fast):
        await publish(
            events_topic, to_wire([e for i, e in enumerate(LOG) if i != index], shoe_seal)
        )
        await exported("blackjack_money_in_transit_minor_units", "USD", 5_000, TO_WALLET)
        assert gauge("blackjack_money_in_transit_wallets", "USD", TO_WALLET) == 1
        since = gauge("blackjack_money_in_transit_since_timestamp_seconds", "USD", TO_WALLET)
        assert since == left.occurred_at.timestamp()
        assert gauge("blackjack_money_in_transit_minor_units", "USD", TO_TABLE) == 300  # ann's

        await publish(events_topic, to_wire([received], shoe_seal))
        await exported("blackjack_money_in_transit_minor_units", "USD", 0, TO_WALLET)
        assert gauge("blackjack_money_in_transit_wallets", "USD", TO_WALLET) == 0
        assert gauge("blackjack_money_in_transit_since_timestamp_seconds", "USD", TO_WALLET) is None
    async with store.reading() as connection:
        folded = (await dump(connection)).text()
    async with store.writing() as connection:
        await connection.run_sync(migrate, "0011", True)
    await store.migrate()  # 0012 fills the payouts' times from the events folded
    async with store.reading() as connection:
        assert (await dump(connection)).text() == folded
