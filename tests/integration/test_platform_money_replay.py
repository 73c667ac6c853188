"""A platform's ``WalletDeposit`` sent again, byte for byte, once its wallet has handled more
than the idempotency window of other commands (a platform retrying after its own outage, an
outbox replayed): refused ``already_applied`` and never credited twice, by the live
handler and by a handler that rebuilt the partition (from a checkpoint's snapshots or from
the events alone) in between. One issued longer ago than the retention is refused
``transfer_expired`` (``domain.platform_money``). A ``WalletWithdraw`` the wallet refused,
replayed after the window and after a deposit that covers it, gets its first refusal again
and is never debited, before and after a rebuild."""

from __future__ import annotations

import base64
import json
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from prometheus_client import REGISTRY

from blackjack.command_handler.keys import derive_key
from blackjack.command_handler.snapshots import SealedSnapshot, checkpoint_key
from blackjack.domain.wallet import WalletDeposit, WalletWithdraw, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.integration.conftest import KafkaSpace, read_topic, running_handler, stream_events

pytestmark = pytest.mark.integration

WINDOW = 5
PLAYER, WALLET = "ula", wallet_stream("ula")


def record(
    command_id: str, amount: int, sent_at: datetime, *, withdraw: bool = False
) -> tuple[bytes, bytes]:
    """The key and value of a platform's ``WalletDeposit`` (or ``WalletWithdraw``), as its
    outbox keeps them."""
    command = (
        WalletWithdraw(player_id=PLAYER, amount=amount)
        if withdraw
        else WalletDeposit(player_id=PLAYER, amount=amount)
    )
    envelope = CommandEnvelope(
        command_id=command_id, stream_id=WALLET, sent_at=sent_at, command=command
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
    """Answers of each kind the window keeps apart (streams.py), past the window: refusals,
    and a cent paid in and out (accepted, the balance as it was)."""
    async with space.client() as client:
        for _ in range(WINDOW + 3):
            refused = await client.execute(
                WALLET, WalletWithdraw(player_id=PLAYER, amount=1_000_000)
            )
            assert refused.rejection is not None  # refused, and remembered all the same
        for _ in range(WINDOW // 2 + 2):
            for paid in (WalletDeposit, WalletWithdraw):
                taken = await client.execute(WALLET, paid(player_id=PLAYER, amount=1))
                assert taken.status == "accepted", taken.rejection


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


@pytest.mark.parametrize("snapshot_every", [4, 100_000], ids=["from-snapshot", "from-events"])
async def test_a_refused_withdrawal_replayed_after_the_window_and_a_deposit_is_not_debited(
    kafka_space: Any, snapshot_every: int
) -> None:
    """The platform's ``WalletWithdraw`` of 300 refused ``insufficient_funds`` (booked as
    failed by the platform); a deposit of 1,000 follows; the outbox replays the withdrawal
    after the window, once on the live handler and once after another handler rebuilt the
    partition (from a checkpoint's snapshots or from the events). Before: the replay was
    decided again and debited (1,100 -> 800). Now: refused again, as first, nothing moves."""
    space: KafkaSpace = await kafka_space(partitions=2)
    pay_key, pay_value = record("platform-pay-1", 100, datetime.now(UTC))
    out_key, out_value = record("platform-out-1", 300, datetime.now(UTC), withdraw=True)
    async with running_handler(space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)):
        assert (await send(space, pay_key, pay_value)).status == "accepted"
        first = await send(space, out_key, out_value)
        assert refused(first, "insufficient_funds"), first
        more_key, more_value = record("platform-pay-2", 1_000, datetime.now(UTC))
        assert (await send(space, more_key, more_value)).status == "accepted"
        await push_past_the_window(space)
        events = await stream_events(space, WALLET)
        assert balance(events) == 1_100
        copy = await send(space, out_key, out_value)
        assert refused(copy, "insufficient_funds"), copy
        assert await stream_events(space, WALLET) == events

    async with running_handler(space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)):
        await push_past_the_window(space)
        events = await stream_events(space, WALLET)
        copy = await send(space, out_key, out_value)
        assert refused(copy, "insufficient_funds"), copy
        assert copy.rejection is not None and "not decided again" in copy.rejection.message
        assert await stream_events(space, WALLET) == events and balance(events) == 1_100


@pytest.mark.parametrize("snapshot_every", [4, 100_000], ids=["from-snapshot", "from-events"])
async def test_another_withdrawal_under_a_kept_id_is_refused_live_and_after_a_rebuild(
    kafka_space: Any, snapshot_every: int
) -> None:
    """A platform reuses the id of its ``WalletWithdraw`` of 50 for one of 60, after the
    window: refused ``malformed`` (nothing moves, not remembered), live and once another
    handler rebuilt the partition; the first withdrawal's own copy is still
    ``already_applied``. Before: ``already_applied`` for both, and the platform booked 60."""
    space: KafkaSpace = await kafka_space(partitions=2)
    sent_at = datetime.now(UTC)
    pay_key, pay_value = record("platform-pay-1", 1_000, sent_at)
    out_key, out_value = record("platform-out-1", 50, sent_at, withdraw=True)
    other_key, other_value = record("platform-out-1", 60, sent_at, withdraw=True)
    for _ in range(2):  # live, then after a rebuild
        async with running_handler(
            space.config(dedup_window=WINDOW, snapshot_every=snapshot_every)
        ):
            if not await stream_events(space, WALLET):
                assert (await send(space, pay_key, pay_value)).status == "accepted"
                assert (await send(space, out_key, out_value)).status == "accepted"
            await push_past_the_window(space)
            events = await stream_events(space, WALLET)
            other = await send(space, other_key, other_value)
            assert refused(other, "malformed"), other
            assert other.rejection is not None and "another command" in other.rejection.message
            copy = await send(space, out_key, out_value)
            assert refused(copy, "already_applied"), copy
            assert await stream_events(space, WALLET) == events and balance(events) == 950


def without_money(raw: bytes, key: bytes) -> bytes:
    """A stream's sealed snapshot as the releases before wrote it: no ``money`` (nor
    ``money_refused``)."""
    record = SealedSnapshot.model_validate_json(raw)
    aad = f"snapshot/{record.stream_id}/{record.sequence}".encode()
    blob = base64.b64decode(record.sealed)
    nonce, aead = blob[:12], AESGCM(key)
    body = json.loads(zlib.decompress(aead.decrypt(nonce, blob[12:], aad)))
    del body["money"]
    del body["money_refused"]
    plain = zlib.compress(json.dumps(body).encode())
    sealed = base64.b64encode(nonce + aead.encrypt(nonce, plain, aad)).decode()
    return record.model_copy(update={"sealed": sealed}).model_dump_json().encode()


async def as_the_release_before_left_it(space: KafkaSpace, group_id: str) -> None:
    """The wallet's newest snapshot without ``money`` and partition 0's checkpoint unsigned,
    with the committed offset without metadata, as the release before wrote them."""
    records = await read_topic(space, space.topics.snapshots)
    snapshot = [r for r in records if r.key == WALLET.encode()][-1]
    checkpoint = [r for r in records if r.key == checkpoint_key(0).encode()][-1]
    key = derive_key(space.shoe_key, "blackjack/snapshots/v1")
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            space.topics.snapshots,
            without_money(snapshot.value, key),
            key=snapshot.key,
            partition=0,
        )
        headers = [(n, v) for n, v in checkpoint.headers if n == "bj_commands_to"]
        await producer.send_and_wait(
            space.topics.snapshots,
            checkpoint.value,
            key=checkpoint.key,
            partition=0,
            headers=headers,
        )
    finally:
        await producer.stop()
    tp = TopicPartition(space.topics.commands, 0)
    older = AIOKafkaConsumer(
        bootstrap_servers=space.bootstrap, group_id=group_id, enable_auto_commit=False
    )
    await older.start()
    try:
        older.assign([tp])
        await older.commit({tp: await older.committed(tp) or 0})
    finally:
        await older.stop()


def rebuilds(kind: str) -> float:
    return REGISTRY.get_sample_value("blackjack_rebuilds_total", {"kind": kind}) or 0.0


async def test_a_snapshot_of_the_release_before_gets_its_ids_from_the_events(
    kafka_space: Any,
) -> None:
    """The upgrade: the wallet's snapshot kept no ids (the release before wrote it) and the
    rebuild trusts that release's checkpoint; it reads the ids from the events before it, so
    a copy sent after the window is still refused."""
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(dedup_window=WINDOW, snapshot_every=3)
    key, value = record("platform-pay-1", 100, datetime.now(UTC))
    async with running_handler(config):
        assert (await send(space, key, value)).status == "accepted"
        await push_past_the_window(space)
    await as_the_release_before_left_it(space, config.group_id)
    from_checkpoint = rebuilds("checkpoint")
    async with running_handler(config):
        assert rebuilds("checkpoint") == from_checkpoint + 1
        events = await stream_events(space, WALLET)
        copy = await send(space, key, value)
        assert refused(copy, "already_applied"), copy
        assert await stream_events(space, WALLET) == events and balance(events) == 100
