"""End to end: players' commands through the real command handler, its events folded by the
projection worker, the result checked against the engine's own fold and by the audit."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from blackjack.audit.audit import run_audit
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import fold
from blackjack.domain.wallet import BuyIn, WalletDeposit, fold_wallet, wallet_stream
from blackjack.projections import schema
from tests.integration.conftest import (
    KafkaSpace,
    running_handler,
    stream_events,
    table_events,
    wait_for_events,
    wallet_events,
)
from tests.integration.conftest_projections import StoreFactory, data_ends, projection_worker

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WAIT_S = 60.0
NO_INSURANCE = {"insurance": False}  # the script below only bets, deals and stands


async def play(client: Any, table: str, player: str, box: int, rounds: int) -> None:
    for _ in range(rounds):
        bet = await client.execute(table, cmd.PlaceBet(player_id=player, box=box, amount=500))
        assert bet.status == "accepted", bet.rejection
        await client.execute(table, cmd.Deal(player_id=player))
        # refused when the deal settled the round already (a natural): that is fine
        await client.execute(table, cmd.Stand(player_id=player, box=box))


def has(event_type: str) -> Any:
    return lambda seen: any(e.type == event_type for e in seen)


async def test_the_projection_of_a_running_handler_adds_up_and_passes_the_audit(
    kafka_space: Any, stores: StoreFactory
) -> None:
    space: KafkaSpace = await kafka_space(partitions=3)
    store = await stores.store()
    async with (
        running_handler(space.config()),
        space.client() as client,
        projection_worker(space.bootstrap, space.prefix, store) as writer,
    ):
        solo = cmd.OpenTable(variant="atlantic-city", overrides=NO_INSURANCE)
        await client.execute("solo", solo)
        await client.execute("solo", cmd.SitDown(player_id="ann", seat=0))
        await client.execute("solo", cmd.Deposit(player_id="ann", amount=20_000))
        await play(client, "solo", "ann", box=0, rounds=4)

        # the longest clock a table may have: the script is slow on a busy machine
        shared_rules = {**NO_INSURANCE, "turn_seconds": 600}
        shared = cmd.OpenTable(variant="atlantic-city-multi", overrides=shared_rules)
        await client.execute("shared", shared)
        await client.execute("shared", cmd.SitDown(player_id="bob", seat=2))
        wallet = wallet_stream("bob")
        await client.execute(wallet, WalletDeposit(player_id="bob", amount=30_000))
        await client.execute(wallet, BuyIn(player_id="bob", table_id="shared", amount=10_000))
        await wait_for_events(space, wallet, has("BuyInCompleted"))
        await play(client, "shared", "bob", box=2, rounds=3)
        await client.execute("shared", cmd.LeaveTable(player_id="bob"))
        await wait_for_events(space, wallet, has("CashOutReceived"))
        await writer.wait_for(await data_ends(space.bootstrap, space.topics.events), WAIT_S)

    events = await stream_events(space)
    table = fold(table_events(e for e in events if e.stream_id == "solo"))
    bob = fold_wallet(wallet_events(e for e in events if e.stream_id == wallet))
    settled = sum(1 for e in events if isinstance(e.data, ev.RoundSettled))
    assert settled == 7
    a, w = schema.accounts, schema.wallets
    async with store.reading() as connection:
        accounts = {
            (row.stream_id, row.player_id): row
            for row in (await connection.execute(select(a))).all()
        }
        [wallet_row] = (await connection.execute(select(w))).all()
    assert accounts[("solo", "ann")].available == table.players["ann"].balance
    assert accounts[("shared", "bob")].available == 0
    assert accounts[("shared", "bob")].cashed_out == wallet_row.cashed_in
    assert wallet_row.balance == bob.balance and wallet_row.in_transit == 0

    scratch = await stores.store()
    report = await run_audit(store, scratch, space.bootstrap, space.topics.events, space.seal())
    assert report.ok, report.render()
    assert report.events == len(events)
    assert all(r.stopped is None for r in report.replays)  # with the key, every shoe opens
