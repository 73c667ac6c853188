"""Money on the real broker: one writer per balance, so concurrent commands cannot overspend;
a multi-seat table is funded from the player's wallet and pays back into it; a refused buy-in
is compensated; nobody but the handler can credit a seat or a wallet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from blackjack.bus.topics import partition_for
from blackjack.client import BlackjackClient
from blackjack.command_handler.ids import declines_stream, step_id
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import (
    BuyIn,
    BuyInRefunded,
    CashOutReceived,
    WalletDeposit,
    WalletWithdraw,
    WalletWithdrawn,
    wallet_stream,
)
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import (
    KafkaSpace,
    accept,
    running_handler,
    stream_events,
    verify_stream,
    wait_for_events,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def space(kafka_space: Any) -> KafkaSpace:
    made: KafkaSpace = await kafka_space(partitions=4)
    return made


@pytest.fixture(scope="module")
async def handlers(space: KafkaSpace) -> AsyncIterator[list[CommandHandler]]:
    """Two instances in one group: the wallet and the tables live on different partitions and
    often on different instances, as in production."""
    async with (
        running_handler(space.config()) as first,
        running_handler(space.config()) as second,
    ):
        await first.wait_ready(30)
        yield [first, second]


@pytest.fixture
async def client(
    space: KafkaSpace, handlers: list[CommandHandler]
) -> AsyncIterator[BlackjackClient]:
    async with space.client() as connected:
        yield connected


def codes(results: list[CommandResult]) -> list[str]:
    return sorted(r.rejection.code if r.rejection else "accepted" for r in results)


async def multi_table(client: BlackjackClient, table: str, *players: str) -> None:
    await accept(client, table, cmd.OpenTable(variant="atlantic-city-multi"))
    for seat, player in enumerate(players):
        await accept(client, table, cmd.SitDown(player_id=player, seat=seat))


async def test_concurrent_buy_ins_and_withdrawals_never_overspend_the_wallet(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    player, wallet = "olga", wallet_stream("olga")
    tables = ["spend-a", "spend-b"]
    for table in tables:
        await multi_table(client, table, player)
    await accept(client, wallet, WalletDeposit(player_id=player, amount=1_000))
    # Twelve commands at once, each wanting 300 of the 1000: three can be paid, no more.
    spend: list[BuyIn | WalletWithdraw] = [
        BuyIn(player_id=player, table_id=tables[i % 2], amount=300) for i in range(8)
    ]
    spend += [WalletWithdraw(player_id=player, amount=300) for _ in range(4)]
    ids = await asyncio.gather(*(client.send(wallet, command) for command in spend))
    results = await asyncio.gather(*(client.result(i, timeout=30) for i in ids))
    assert codes(results) == ["accepted"] * 3 + ["insufficient_funds"] * 9
    buy_ins = sum(
        1
        for c, r in zip(spend, results, strict=True)
        if isinstance(c, BuyIn) and r.rejection is None
    )
    # Every accepted buy-in arrives at its table and is confirmed back to the wallet.
    events = await wait_for_events(
        space, wallet, lambda es: sum(e.type == "BuyInCompleted" for e in es) == buy_ins
    )
    check = await verify_stream(space, wallet)
    assert check.state.balance == 100 and check.state.pending == ()
    at_tables = 0
    for table in tables:
        table_check = await verify_stream(space, table)
        at_tables += (
            table_check.state.players[player].balance
            if player in (table_check.state.players)
            else 0
        )
    withdrawn = sum(e.data.amount for e in events if isinstance(e.data, WalletWithdrawn))
    assert check.state.balance + at_tables + withdrawn == 1_000
    assert at_tables == 300 * buy_ins


async def test_concurrent_bets_never_take_a_table_balance_below_zero(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    table = "spend-single"
    await accept(client, table, cmd.OpenTable(variant="mini-h17"))
    await accept(client, table, cmd.SitDown(player_id="p"))
    await accept(client, table, cmd.Deposit(player_id="p", amount=1_000))
    commands: list[Any] = [cmd.PlaceBet(player_id="p", box=0, amount=300) for _ in range(6)]
    commands += [cmd.Withdraw(player_id="p", amount=300) for _ in range(3)]
    ids = await asyncio.gather(*(client.send(table, c) for c in commands))
    results = await asyncio.gather(*(client.result(i, timeout=30) for i in ids))
    assert codes(results) == ["accepted"] * 3 + ["insufficient_funds"] * 6
    check = await verify_stream(space, table)
    balances = [e.data.balance_after for e in check.events if hasattr(e.data, "balance_after")]
    assert min(balances) >= 0 and check.state.players["p"].balance == 100


async def test_a_buy_in_the_table_refuses_comes_back_to_the_wallet(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    player, wallet = "nina", wallet_stream("nina")
    await multi_table(client, "refuse-multi")  # nina never sits down here
    await accept(client, "refuse-single", cmd.OpenTable(variant="mini-h17"))
    await accept(client, "refuse-single", cmd.SitDown(player_id=player))
    await accept(client, wallet, WalletDeposit(player_id=player, amount=900))
    sent = []
    for table in ("refuse-multi", "refuse-nowhere", "refuse-single"):
        [result] = await accept(client, wallet, BuyIn(player_id=player, table_id=table, amount=300))
        sent.append(result)
    events = await wait_for_events(
        space, wallet, lambda es: sum(e.type == "BuyInRefunded" for e in es) == 3
    )
    refunds = [e.data for e in events if isinstance(e.data, BuyInRefunded)]
    assert [(r.table_id, r.reason) for r in refunds] == [
        ("refuse-multi", "not_seated"),
        ("refuse-nowhere", "table_not_open"),
        ("refuse-single", "unauthorized"),  # single-player tables are funded by the platform
    ]
    assert refunds[-1].balance_after == 900
    # Each step has an id derived from its cause: the deposit from the BuyInSent event, the
    # refund from the deposit. Each table declined its deposit in its own log (no money moved
    # there), so that no copy of it is ever taken; the id no table has declines it in its
    # partition's stream of such declines (``ids.declines_stream``), refused: no stream is
    # made for it.
    buy_in_events = [e for e in events if e.type == "BuyInSent"]
    tables = ("refuse-multi", "refuse-nowhere", "refuse-single")
    for event, table in zip(buy_in_events, tables, strict=True):
        deposit_id = step_id(event.event_id, "deposit")
        deposit = await client.result(deposit_id, timeout=30)
        log = table
        if table == "refuse-nowhere":
            assert deposit.rejection is not None and deposit.status == "rejected"
            assert deposit.rejection.code == "table_not_open"
            assert await stream_events(space, table) == []
            log = declines_stream(partition_for(table, space.partitions), space.partitions)
        else:
            assert deposit.status == "accepted"
        table_events = await stream_events(space, log)
        [declined] = [e for e in table_events if e.causation_id == deposit_id]
        assert isinstance(declined.data, ev.TransferDeclined) and declined.data.amount == 300
        assert not any(e.type == "FundsDeposited" for e in table_events)
        refund = await client.result(step_id(deposit_id, "refund"), timeout=30)
        assert refund.status == "accepted"
        await verify_stream(space, log)
    check = await verify_stream(space, wallet)
    assert check.state.balance == 900 and check.state.pending == ()
    assert len(sent) == 3


async def test_a_multi_seat_table_takes_money_only_from_the_wallet_and_pays_back_into_it(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    player, wallet, table = "omar", wallet_stream("omar"), "cashout-multi"
    await multi_table(client, table, player)
    forged = await client.execute(table, cmd.Deposit(player_id=player, amount=1_000_000))
    assert forged.rejection is not None and forged.rejection.code == "unauthorized"
    await accept(client, wallet, WalletDeposit(player_id=player, amount=2_000))
    await accept(client, wallet, BuyIn(player_id=player, table_id=table, amount=1_500))
    await wait_for_events(space, table, lambda es: any(e.type == "FundsDeposited" for e in es))
    await accept(client, table, cmd.Withdraw(player_id=player, amount=400))
    await accept(client, table, cmd.LeaveTable(player_id=player))
    events = await wait_for_events(
        space, wallet, lambda es: sum(e.type == "CashOutReceived" for e in es) == 2
    )
    assert [e.data.amount for e in events if isinstance(e.data, CashOutReceived)] == [400, 1_100]
    check = await verify_stream(space, wallet)
    assert check.state.balance == 2_000
    await verify_stream(space, table)
