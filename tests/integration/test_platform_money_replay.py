"""A platform's ``WalletDeposit`` sent again, byte for byte, once its wallet has handled more
than the idempotency window of other commands (a platform retrying after its own outage, an
outbox replayed): refused ``already_applied`` and never credited twice, by the live
handler and by a handler that rebuilt the partition (from a checkpoint's snapshots or from
the events alone) in between. One issued longer ago than the retention is refused
``transfer_expired`` (``domain.platform_money``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from blackjack.domain.wallet import WalletDeposit, WalletWithdraw, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.integration.conftest import KafkaSpace, running_handler, stream_events

pytestmark = pytest.mark.integration

WINDOW = 5
PLAYER, WALLET = "ula", wallet_stream("ula")


def record(command_id: str, amount: int, sent_at: datetime) -> tuple[bytes, bytes]:
    """The key and value of a platform's ``WalletDeposit``, as its outbox keeps them."""
    envelope = CommandEnvelope(
        command_id=command_id,
        stream_id=WALLET,
        sent_at=sent_at,
        command=WalletDeposit(player_id=PLAYER, amount=amount),
    )
    return WALLET.encode(), envelope.model_dump_json().encode()


async def send(space: KafkaSpace, key: bytes, value: bytes) -> CommandResult:
    """The record sent (again); the answer to this copy."""
    command_id = CommandEnvelope.model_validate_json(value).command_id
    async with space.client() as client:
        await client.send_raw(key, value)
        answer: CommandResult = await client.result(command_id, timeout=30)
        return answer


async def push_past_the_window(space: KafkaSpace) -> None:
    async with space.client() as client:
        for _ in range(WINDOW + 3):
            refused = await client.execute(
                WALLET, WalletWithdraw(player_id=PLAYER, amount=1_000_000)
            )
            assert refused.rejection is not None  # refused, and remembered all the same


def balance(events: list[Any]) -> int:
    return int([e.data.balance_after for e in events if hasattr(e.data, "balance_after")][-1])


def refused(result: CommandResult, code: str) -> bool:
    return result.rejection is not None and result.rejection.code == code


@pytest.mark.parametrize("snapshot_every", [4, 100_000], ids=["from-snapshot", "from-events"])
async def test_a_wallet_deposit_resent_after_the_window_is_not_credited_twice(
    kafka_space: Any, snapshot_every: int
) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    config = space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)
    key, value = record("platform-pay-1", 100, datetime.now(UTC))
    async with running_handler(config):
        first = await send(space, key, value)
        assert first.status == "accepted", first
        # Within the window: its first answer again, exactly.
        assert await send(space, key, value) == first
        await push_past_the_window(space)
        events = await stream_events(space, WALLET)
        assert balance(events) == 100
        copy = await send(space, key, value)
        assert refused(copy, "already_applied"), copy
        assert await stream_events(space, WALLET) == events

    # A new handler rebuilds the partition in between (from the checkpoint's snapshots, or
    # from the events alone), and the platform's outbox sends the record once more.
    async with running_handler(space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)):
        await push_past_the_window(space)
        events = await stream_events(space, WALLET)
        copy = await send(space, key, value)
        assert refused(copy, "already_applied"), copy
        # issued longer ago than the retention: refused, whether or not it was ever taken
        old_key, old_value = record("platform-pay-0", 50, datetime.now(UTC) - timedelta(days=8))
        assert refused(await send(space, old_key, old_value), "transfer_expired")
        assert await stream_events(space, WALLET) == events
        assert balance(events) == 100
