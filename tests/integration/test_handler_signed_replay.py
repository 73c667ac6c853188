"""A signed money step copied from ``blackjack.commands`` and sent again, byte for byte, once
the idempotency window has moved on: the table or wallet refuses it
(``transfer_already_handled``: it keeps the last buy-in number per wallet, the last paying
table event per table) and no balance moves, also after a restart that rebuilds the partition from a
checkpoint's snapshots or from the events alone. The same holds for a buy-in's deposit the
table declined (the player was not seated) and refunded, sent again once the player sits."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from blackjack.client import BlackjackClient
from blackjack.command_handler.ids import declines_stream, event_id, step_id
from blackjack.command_handler.signing import SIGNATURE_HEADER
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletWithdraw, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.integration.conftest import (
    KafkaSpace,
    accept,
    read_topic,
    running_handler,
    stream_events,
    verify_stream,
    wait_for_events,
)

pytestmark = pytest.mark.integration

WINDOW = 5
PLAYER, TABLE, WALLET = "zoe", "signed-replay", wallet_stream("zoe")


async def signed_record(space: KafkaSpace, stream: str, kind: str) -> Any:
    """The one signed record of type ``kind`` the handler wrote for ``stream``."""
    [record] = [
        r
        for r in await read_topic(space, space.topics.commands)
        if r.key == stream.encode()
        and CommandEnvelope.model_validate_json(r.value).command.type == kind
        and SIGNATURE_HEADER in dict(r.headers)
    ]
    return record


async def resend(space: KafkaSpace, record: Any) -> CommandResult:
    """The same key, value and headers again; the answer to this copy."""
    command_id = CommandEnvelope.model_validate_json(record.value).command_id
    async with space.client() as client:
        await client.send_raw(record.key, record.value, list(record.headers))
        answer: CommandResult = await client.result(command_id, timeout=30)
        return answer


async def push_past_the_window(space: KafkaSpace) -> None:
    """Answers of each kind the windows keep apart (streams.py), past the window, at the table
    and the wallet: refusals, and accepted commands that wrote events but moved no money."""
    async with space.client() as client:
        for _ in range(WINDOW + 3):
            withdraw = cmd.Withdraw(player_id=PLAYER, amount=1_000_000)
            assert (await client.execute(TABLE, withdraw)).rejection is not None
            refused = await client.execute(
                WALLET, WalletWithdraw(player_id=PLAYER, amount=1_000_000)
            )
            assert refused.rejection is not None  # refused, and remembered all the same
        await away_and_back(client, TABLE)
        for _ in range(WINDOW // 2 + 2):  # a cent paid in and out
            await accept(client, WALLET, WalletDeposit(player_id=PLAYER, amount=1))
            await accept(client, WALLET, WalletWithdraw(player_id=PLAYER, amount=1))


async def away_and_back(client: BlackjackClient, table: str) -> None:
    """The player away and back, past the window: accepted, each writing an event."""
    for _ in range(WINDOW // 2 + 2):
        await accept(client, table, cmd.Disconnect(player_id=PLAYER))
        await accept(client, table, cmd.Reconnect(player_id=PLAYER))


def balances(table_events: list[Any], wallet_events: list[Any]) -> tuple[int, int]:
    seat = [e.data.balance_after for e in table_events if e.type.startswith("Funds")]
    wallet = [e.data.balance_after for e in wallet_events if hasattr(e.data, "balance_after")]
    return seat[-1], wallet[-1]


def refused_as_replay(result: CommandResult) -> bool:
    return (
        result.status == "rejected"
        and result.rejection is not None
        and result.rejection.code == "transfer_already_handled"
    )


@pytest.mark.parametrize("snapshot_every", [4, 100_000], ids=["from-snapshot", "from-events"])
async def test_a_signed_deposit_or_cash_out_sent_again_after_the_window_changes_nothing(
    kafka_space: Any, snapshot_every: int
) -> None:
    space: KafkaSpace = await kafka_space(partitions=3)
    config = space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)
    async with running_handler(config), space.client() as client:
        await accept(client, TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
        await accept(client, TABLE, cmd.SitDown(player_id=PLAYER))
        await accept(client, WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
        await accept(client, WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300))
        await wait_for_events(space, WALLET, lambda es: any(e.type == "BuyInCompleted" for e in es))
        await accept(client, TABLE, cmd.Withdraw(player_id=PLAYER, amount=100))
        await wait_for_events(
            space, WALLET, lambda es: any(e.type == "CashOutReceived" for e in es)
        )
        await verify_stream(space, TABLE)
        await verify_stream(space, WALLET)
        deposit = await signed_record(space, TABLE, "Deposit")
        cash_out = await signed_record(space, WALLET, "CashOut")
        await push_past_the_window(space)
        table_events = await stream_events(space, TABLE)
        wallet_events = await stream_events(space, WALLET)
        assert balances(table_events, wallet_events) == (200, 800)

        for record in (deposit, cash_out):
            result = await resend(space, record)
            assert refused_as_replay(result), result
        assert await stream_events(space, TABLE) == table_events
        assert await stream_events(space, WALLET) == wallet_events

    # A new handler rebuilds the partitions (from the checkpoint's snapshots, or from the
    # events alone) and still refuses both copies.
    async with running_handler(space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)):
        for record in (deposit, cash_out):
            result = await resend(space, record)
            # The rebuilt window may hold the original answer again; either way nothing moves.
            assert refused_as_replay(result) or result.status == "accepted", result
        await push_past_the_window(space)
        table_events = await stream_events(space, TABLE)
        wallet_events = await stream_events(space, WALLET)
        for record in (deposit, cash_out):
            result = await resend(space, record)
            assert refused_as_replay(result), result
        assert await stream_events(space, TABLE) == table_events
        assert await stream_events(space, WALLET) == wallet_events
        assert balances(table_events, wallet_events) == (200, 800)
        # One confirmation of the buy-in, ever; a checkpoint was written when asked for.
        commands = await read_topic(space, space.topics.commands)
        confirms = [r for r in commands if b".deposit.confirm" in r.value]
        assert len(confirms) == 1
        snapshots = await read_topic(space, space.topics.snapshots)
        assert bool(snapshots) == (snapshot_every < 100_000)
        if snapshots:  # the gauge shows the size of one of the snapshots written, sealed
            largest = REGISTRY.get_sample_value("blackjack_snapshot_largest_bytes")
            assert largest in {len(record.value) for record in snapshots}
            assert REGISTRY.get_sample_value("blackjack_snapshot_limit_bytes") == 4 * 1024**2


@pytest.mark.parametrize("snapshot_every", [4, 100_000], ids=["from-snapshot", "from-events"])
async def test_a_declined_signed_deposit_sent_again_after_the_window_credits_nothing(
    kafka_space: Any, snapshot_every: int
) -> None:
    space: KafkaSpace = await kafka_space(partitions=3)
    config = space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)
    async with running_handler(config), space.client() as client:
        await accept(client, TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
        await accept(client, WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
        await accept(client, WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300))
        await wait_for_events(space, WALLET, lambda es: any(e.type == "BuyInRefunded" for e in es))
        deposit = await signed_record(space, TABLE, "Deposit")
        table_events = await stream_events(space, TABLE)
        assert [e.type for e in table_events][-1] == "TransferDeclined"
        # The player sits down now; the refused deposit's copy must still credit nothing.
        await accept(client, TABLE, cmd.SitDown(player_id=PLAYER))
        await push_past_the_window(space)
        await verify_stream(space, TABLE)
        await verify_stream(space, WALLET)
        table_events = await stream_events(space, TABLE)
        wallet_events = await stream_events(space, WALLET)
        result = await resend(space, deposit)
        assert refused_as_replay(result), result
        assert await stream_events(space, TABLE) == table_events
        assert await stream_events(space, WALLET) == wallet_events

    async with running_handler(space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)):
        await push_past_the_window(space)
        table_events = await stream_events(space, TABLE)
        wallet_events = await stream_events(space, WALLET)
        result = await resend(space, deposit)
        assert refused_as_replay(result), result
        assert await stream_events(space, TABLE) == table_events
        assert await stream_events(space, WALLET) == wallet_events
        assert not any(e.type == "FundsDeposited" for e in table_events)
        wallet_balances = [
            e.data.balance_after for e in wallet_events if hasattr(e.data, "balance_after")
        ]
        assert wallet_balances[-1] == 1_000
        commands = await read_topic(space, space.topics.commands)
        assert not [r for r in commands if b".deposit.confirm" in r.value]
        assert len([r for r in commands if b".deposit.refund" in r.value]) == 1
        snapshots = await read_topic(space, space.topics.snapshots)
        assert bool(snapshots) == (snapshot_every < 100_000)


@pytest.mark.parametrize("snapshot_every", [2, 100_000], ids=["from-snapshot", "from-events"])
async def test_an_unsigned_command_cannot_take_a_step_id_even_across_a_restart(
    kafka_space: Any, snapshot_every: int
) -> None:
    """Step ids can be predicted (the id of the wallet's next event, then ``.deposit``): an
    unsigned command that takes one first is refused and not remembered, by the handler nor
    by the rebuild of a new one, so the real signed step still goes through."""
    space: KafkaSpace = await kafka_space(partitions=3)
    predicted = step_id(event_id(WALLET, 2), "deposit")  # WalletDeposited is 1, BuyInSent 2
    config = space.config(snapshot_every=snapshot_every)
    async with running_handler(config), space.client() as client:
        await accept(client, TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
        await accept(client, TABLE, cmd.SitDown(player_id=PLAYER))
        await accept(client, WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
        squat = await client.execute(
            TABLE, cmd.PlaceBet(player_id=PLAYER, box=0, amount=100), command_id=predicted
        )
        assert squat.rejection is not None and squat.rejection.code == "unauthorized"
    async with running_handler(space.config(snapshot_every=snapshot_every)):
        async with space.client() as client:
            await accept(client, WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300))
        await wait_for_events(space, WALLET, lambda es: any(e.type == "BuyInCompleted" for e in es))
        deposited = [
            (e.causation_id, e.data.amount)
            for e in await stream_events(space, TABLE)
            if isinstance(e.data, ev.FundsDeposited)
        ]
        assert deposited == [(predicted, 300)]
        await verify_stream(space, TABLE)
        await verify_stream(space, WALLET)


@pytest.mark.parametrize("snapshot_every", [2, 100_000], ids=["from-snapshot", "from-events"])
async def test_a_buy_in_declined_where_no_table_was_opened_is_never_taken_after_a_restart(
    kafka_space: Any, snapshot_every: int
) -> None:
    """A buy-in to an id no table was opened under is declined in the partition's stream of
    such declines and refunded once. After a restart (from a checkpoint, and from the whole
    log), the table opened since under that id and the player seated there, a copy of the
    deposit sent once its answer is out of the table's window credits nothing and is not
    refunded again."""
    space: KafkaSpace = await kafka_space(partitions=1)
    nowhere = "signed-replay-nowhere"
    config = space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)
    async with running_handler(config), space.client() as client:
        await accept(client, WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
        await accept(client, WALLET, BuyIn(player_id=PLAYER, table_id=nowhere, amount=300))
        await wait_for_events(space, WALLET, lambda es: any(e.type == "BuyInRefunded" for e in es))
        deposit = await signed_record(space, nowhere, "Deposit")
        assert await stream_events(space, nowhere) == []
    async with running_handler(config), space.client() as client:
        await accept(client, nowhere, cmd.OpenTable(variant="atlantic-city-multi"))
        await accept(client, nowhere, cmd.SitDown(player_id=PLAYER))
        # the deposit's answer, a stray one the table took into its window when opened:
        # pushed out of it by answers remembered since
        for _ in range(WINDOW + 3):
            withdraw = cmd.Withdraw(player_id=PLAYER, amount=1_000_000)
            assert (await client.execute(nowhere, withdraw)).rejection is not None
        await away_and_back(client, nowhere)
        # (not ``verify_stream``: it replays the declined deposit at the id, not at the
        # partition's declines stream, which ``verify_declines`` checks)
        await verify_stream(space, declines_stream(0, 1))
        table_events = await stream_events(space, nowhere)
        result = await resend(space, deposit)
        assert refused_as_replay(result), result.rejection
        await verify_stream(space, WALLET)
    assert await stream_events(space, nowhere) == table_events
    assert not any(e.type == "FundsDeposited" for e in table_events)
    commands = await read_topic(space, space.topics.commands)
    assert len([r for r in commands if b".deposit.refund" in r.value]) == 1
    wallet_events = await stream_events(space, WALLET)
    wallet = [e.data.balance_after for e in wallet_events if hasattr(e.data, "balance_after")]
    assert wallet[-1] == 1_000
    snapshots = await read_topic(space, space.topics.snapshots)
    assert bool(snapshots) == (snapshot_every < 100_000)
