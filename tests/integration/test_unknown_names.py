"""Commands that name a table no one opened or a player no one seated, end to end on the real
broker: each gets a typed answer on ``blackjack.command-results``, no money moves or is lost
(a buy-in to such a table comes back to the wallet), and the read model shows no table and no
player that was never there."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from blackjack.api.routes import query_api
from blackjack.audit.audit import run_audit
from blackjack.bus.topics import partition_for
from blackjack.client import BlackjackClient
from blackjack.command_handler.ids import declines_stream
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import (
    BuyIn,
    BuyInRefunded,
    CashOut,
    WalletDeposit,
    WalletWithdraw,
    wallet_stream,
)
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    accept,
    read_topic,
    stream_events,
    verify_stream,
    wait_for_events,
)
from tests.integration.conftest_projections import STORE_KINDS, store_factory

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    factory = store_factory(request, tmp_path)
    yield await factory.store()
    await factory.close()


def caused(result: CommandResult, events: list[EventEnvelope]) -> bool:
    return any(e.causation_id == result.command_id for e in events)


def refused(result: CommandResult, code: str) -> None:
    assert result.status == "rejected" and result.rejection is not None, result
    assert result.rejection.code == code, result.rejection
    assert result.first_sequence is None and result.last_sequence is None


async def api_get(store: ProjectionStore, path: str, status: int) -> Any:
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        answer = await api.get(path)
    assert answer.status_code == status, answer.text
    return answer.json()


async def test_commands_naming_a_table_never_opened_are_refused_and_move_no_money(
    space: KafkaSpace,
    handler: CommandHandler,
    client: BlackjackClient,
    store: ProjectionStore,
    tmp_path: Path,
) -> None:
    run = os.urandom(3).hex()
    nowhere, player = f"nowhere-{run}", f"zed-{run}"
    wallet = wallet_stream(player)
    await accept(client, wallet, WalletDeposit(player_id=player, amount=1_000))
    # The platform's money commands are refused and written down (the refusal is the id's
    # first event, so a late copy is refused the same once a table is opened under the id:
    # domain.platform_money), here at an id of their own; the others are answered without
    # making a stream.
    unopened = f"unopened-{run}"
    money = [
        await client.execute(unopened, command)
        for command in (
            cmd.Deposit(player_id=player, amount=100),
            cmd.Withdraw(player_id=player, amount=100),
        )
    ]
    for number, result in enumerate(money, start=1):
        assert result.rejection is not None and result.rejection.code == "table_not_open"
        assert (result.first_sequence, result.last_sequence) == (number, number)
    for command in (cmd.LeaveTable(player_id=player), cmd.SitDown(player_id=player)):
        refused(await client.execute(nowhere, command), "table_not_open")
    # A cash-out is the service's own step: a platform's, naming any table, is refused.
    cash_out = CashOut(player_id=player, table_id=nowhere, amount=500, table_sequence=1)
    refused(await client.execute(wallet, cash_out), "unauthorized")
    # A buy-in cannot be refused by the wallet (it does not know the tables): the table
    # declines it in its own log and the money comes back.
    [sent] = await accept(client, wallet, BuyIn(player_id=player, table_id=nowhere, amount=300))
    events = await wait_for_events(
        space, wallet, lambda es: any(isinstance(e.data, BuyInRefunded) for e in es)
    )
    [refund] = [e.data for e in events if isinstance(e.data, BuyInRefunded)]
    assert (refund.reason, refund.balance_after) == ("table_not_open", 1_000)
    # No stream for the id: the decline is an event of its partition's stream of declines
    declines = declines_stream(partition_for(nowhere, space.partitions), space.partitions)
    assert await stream_events(space, nowhere) == []
    written = [type(e.data) for e in await stream_events(space, unopened)]
    assert written == [ev.MoneyCommandRefused, ev.MoneyCommandRefused]
    [declined] = [
        e.data
        for e in await stream_events(space, declines)
        if isinstance(e.data, ev.TransferDeclined) and e.data.player_id == player
    ]
    assert declined.reason_code == "table_not_open"
    for stream in (declines, wallet, unopened):
        await verify_stream(space, stream)
    check = await verify_stream(space, wallet)
    assert check.state.balance == 1_000 and check.state.pending == ()
    # The read model: no table, the wallet whole, no account at a table that is not one
    await rebuild(ProjectionWriter(store), space.bootstrap, space.topics.events)
    for never_opened in (nowhere, unopened):
        missing = await api_get(store, f"/v1/tables/{never_opened}", 404)
        assert missing["error"]["code"] == "unknown_table"
    money = await api_get(store, f"/v1/players/{player}/wallet", 200)
    assert money["wallet"]["balance"] == 1_000 and money["tables"] == []
    assert sent.status == "accepted"
    # The audit finds nothing: the declined transfer reconciles with the wallet's refund
    scratch = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'scratch.db'}")
    await scratch.migrate()
    try:
        report = await run_audit(store, scratch, space.bootstrap, space.topics.events, space.seal())
    finally:
        await scratch.close()
    assert report.ok, report.render()


async def test_commands_naming_a_player_no_one_seated_are_refused_and_move_no_money(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient, store: ProjectionStore
) -> None:
    run = os.urandom(3).hex()
    table, shared, amy, ghost = f"single-{run}", f"shared-{run}", f"amy-{run}", f"ghost-{run}"
    await accept(
        client,
        table,
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id=amy),
        cmd.Deposit(player_id=amy, amount=500),
    )
    await accept(client, shared, cmd.OpenTable(variant="atlantic-city-multi"))
    # The platform's money commands: refused, and the refusal written down (no money moves;
    # the table keeps the id, so a late copy is refused the same: domain.platform_money)
    for stream, money in (
        (table, cmd.Deposit(player_id=ghost, amount=100)),
        (table, cmd.Withdraw(player_id=ghost, amount=100)),
        (shared, cmd.Withdraw(player_id=ghost, amount=1)),
    ):
        written = await client.execute(stream, money)
        assert written.status == "rejected" and written.rejection is not None, written
        assert written.rejection.code == "not_seated", written.rejection
        seen = await wait_for_events(space, stream, functools.partial(caused, written))
        [event] = [e for e in seen if e.causation_id == written.command_id]
        assert isinstance(event.data, ev.MoneyCommandRefused) and event.data.amount == money.amount
    refused(await client.execute(table, cmd.LeaveTable(player_id=ghost)), "not_seated")
    # A player who never had a wallet: nothing to take from it
    ghost_wallet = wallet_stream(ghost)
    ghost_money: list[WalletWithdraw | BuyIn] = [
        WalletWithdraw(player_id=ghost, amount=100),
        BuyIn(player_id=ghost, table_id=shared, amount=100),
    ]
    for number, ghost_command in enumerate(ghost_money, start=1):
        answer = await client.execute(ghost_wallet, ghost_command)
        assert answer.rejection is not None and answer.rejection.code == "insufficient_funds"
        assert "holds 0" in answer.rejection.message
        # written down, the wallet's first event: a late copy is never decided again
        assert answer.first_sequence == number
    recorded = [e.data for e in await stream_events(space, ghost_wallet)]
    assert [(e.type, getattr(e, "command", None)) for e in recorded] == [
        ("WalletCommandRefused", "WalletWithdraw"),
        ("WalletCommandRefused", "BuyIn"),
    ]
    check = await verify_stream(space, table)
    assert check.state.players[amy].balance == 500 and ghost not in check.state.players
    await verify_stream(space, shared)
    await rebuild(ProjectionWriter(store), space.bootstrap, space.topics.events)
    # the wallet the platform's refused withdrawal was sent to: nothing in it, nothing moved
    shown = await api_get(store, f"/v1/players/{ghost}/wallet", 200)
    assert shown["wallet"]["balance"] == 0 and shown["wallet"]["withdrawn"] == 0
    assert shown["tables"] == []
    seen = await api_get(store, f"/v1/tables/{table}", 200)
    assert [(p["player_id"], p["available"]) for p in seen["players"]] == [(amy, 500)]


async def test_a_signed_cash_out_altered_to_name_another_table_is_refused(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    """The only cash-out a wallet takes is one the service signed for the table event that
    paid it: the signature covers the table named, so a copy altered to name a table that does
    not exist (or any other) is refused, and the wallet's balance does not move."""
    run = os.urandom(3).hex()
    table, player = f"paid-{run}", f"yan-{run}"
    wallet = wallet_stream(player)
    await accept(client, table, cmd.OpenTable(variant="atlantic-city-multi"))
    await accept(client, table, cmd.SitDown(player_id=player))
    await accept(client, wallet, WalletDeposit(player_id=player, amount=800))
    await accept(client, wallet, BuyIn(player_id=player, table_id=table, amount=800))
    await wait_for_events(space, table, lambda es: any(e.type == "FundsDeposited" for e in es))
    await accept(client, table, cmd.LeaveTable(player_id=player))
    await wait_for_events(space, wallet, lambda es: any(e.type == "CashOutReceived" for e in es))
    [record] = [
        r
        for r in await read_topic(space, space.topics.commands)
        if r.key == wallet.encode() and b'"CashOut"' in r.value
    ]
    envelope = CommandEnvelope.model_validate_json(record.value)
    assert isinstance(envelope.command, CashOut)
    forged = envelope.model_copy(
        update={
            "command_id": f"forged-{run}",
            "command": envelope.command.model_copy(update={"table_id": f"nowhere-{run}"}),
        }
    )
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            space.topics.commands,
            key=record.key,
            value=forged.model_dump_json().encode(),
            headers=list(record.headers),
        )
    finally:
        await producer.stop()
    refused(await client.result(f"forged-{run}", timeout=WAIT_S), "unauthorized")
    check = await verify_stream(space, wallet)
    assert check.state.balance == 800
