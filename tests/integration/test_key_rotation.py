"""Rotating the shoe key on a real broker (docs/operations.md, "Rotating the shoe key"): the
handlers of the second rollout (the new key first, the old one accepted) resume a round dealt
from a shoe the old key sealed, and seal again under the new key the snapshots of the tables
nobody plays meanwhile; those of the last rollout (the old key retired) then start from the
checkpoint the new key signed and play on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import REGISTRY

from blackjack.command_handler.keys import ShoeKeys
from blackjack.command_handler.snapshots import SnapshotCodec, SnapshotError
from blackjack.domain import commands as cmd
from blackjack.domain.evolve import fold
from blackjack.messages.sealing import ShoeSeal
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    following,
    read_topic,
    running_handler,
    stream_events,
    table_events,
)

pytestmark = [pytest.mark.integration]

PLAYED, QUIET = "rotated-play", "rotated-quiet"


def codec_of(keys: ShoeKeys) -> SnapshotCodec:
    return SnapshotCodec(*keys.opening("blackjack/snapshots/v1"))


def rebuilds(kind: str) -> float:
    return REGISTRY.get_sample_value("blackjack_rebuilds_total", {"kind": kind}) or 0.0


def snapshots_resealed() -> float:
    return REGISTRY.get_sample_value("blackjack_snapshots_resealed_total") or 0.0


def keys_held() -> dict[str, str]:
    """``blackjack_shoe_keys``: each key id this process's handler holds, and its part."""
    [family] = [m for m in REGISTRY.collect() if m.name == "blackjack_shoe_keys"]
    return {s.labels["key_id"]: s.labels["role"] for s in family.samples if s.value == 1}


async def a_snapshot_under(space: KafkaSpace, stream_id: str, codec: SnapshotCodec) -> bytes:
    """The first snapshot of ``stream_id`` on the topic that ``codec`` opens (awaited while
    the handler writes it)."""
    async with following(space, space.topics.snapshots) as snapshots:
        async for record in snapshots:
            value: bytes | None = record.value
            if record.key == stream_id.encode() and value is not None:
                try:
                    codec.decode(value)
                except SnapshotError:
                    continue
                return value
    raise AssertionError("the topic ended")


async def test_a_rotation_resumes_the_round_in_flight_and_reseals_what_no_one_plays(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    old, new = space.shoe_key, ShoeSeal.new_key_hex()  # (the space's key reads its events)
    shuffler = QueuedShuffler()
    # QUIET opens first (any shoe), PLAYED second: T 6 against 9 up, no blackjack, no
    # insurance (a fresh-clone run dealt PLAYED a random shoe with the one queued for it
    # taken by QUIET, and its Stand was refused `not_your_turn`)
    shuffler.queue([], ["TS", "9S", "6S", "7H"])
    # a checkpoint after every command: QUIET's last snapshot holds it as it is left
    before = space.config(shoe_key_hex=old, snapshot_every=1)
    async with running_handler(before, shuffler=shuffler), space.client() as client:
        for table in (QUIET, PLAYED):
            for setup in (
                cmd.OpenTable(variant="mini-h17"),
                cmd.SitDown(player_id="p"),
                cmd.Deposit(player_id="p", amount=50_000),
            ):
                assert (await client.execute(table, setup)).status == "accepted"
        for step in (cmd.PlaceBet(player_id="p", box=0, amount=1_000), cmd.Deal(player_id="p")):
            assert (await client.execute(PLAYED, step)).status == "accepted"
    assert shuffler.drawn == 2  # each table's shoe as queued
    only_old, only_new = codec_of(ShoeKeys(old)), codec_of(ShoeKeys(new))
    quiet = fold(table_events(await stream_events(space, QUIET)))
    [*_, old_snapshot] = [
        r.value for r in await read_topic(space, space.topics.snapshots) if r.key == QUIET.encode()
    ]
    assert only_old.decode(old_snapshot).state == quiet

    # The second rollout: the new key seals and signs, the old one opens and verifies.
    during = space.config(shoe_key_hex=new, accepted_shoe_keys_hex=(old,))
    kept, sealed_again = rebuilds("checkpoint"), snapshots_resealed()
    old_id, new_id = (ShoeSeal.from_hex(key).key_id for key in (old, new))
    async with running_handler(during), space.client() as client:
        assert keys_held() == {new_id: "current", old_id: "accepted"}
        assert rebuilds("checkpoint") == kept + 1  # the old key's checkpoint, trusted
        assert snapshots_resealed() == sealed_again + 2  # both tables' snapshots
        stood = await client.execute(PLAYED, cmd.Stand(player_id="p", box=0))
        assert stood.status == "accepted"  # the dealer's hole card from the old key's shoe
        async with asyncio.timeout(60):  # written with the checkpoint due at once
            resealed = await a_snapshot_under(space, QUIET, only_new)
    assert only_new.decode(resealed).state == quiet
    with pytest.raises(SnapshotError):
        only_old.decode(resealed)

    # The last rollout: the old key retired (it opens the shoes it sealed, verifies nothing).
    after = space.config(shoe_key_hex=new, retired_shoe_keys_hex=(old,))
    kept, sealed_again = rebuilds("checkpoint"), snapshots_resealed()
    async with running_handler(after), space.client() as client:
        assert keys_held() == {new_id: "current", old_id: "retired"}
        assert rebuilds("checkpoint") == kept + 1  # the checkpoint the new key signed
        assert snapshots_resealed() == sealed_again  # nothing left under the old key
        for table in (PLAYED, QUIET):
            bet = await client.execute(table, cmd.PlaceBet(player_id="p", box=0, amount=500))
            assert bet.status == "accepted"
            assert (await client.execute(table, cmd.Deal(player_id="p"))).status == "accepted"
