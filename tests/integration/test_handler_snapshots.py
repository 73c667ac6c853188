"""Snapshots: a rebuild starts from the newest checkpoint instead of offset 0, a round in flight
survives in a snapshot, the idempotency window travels in it, and nothing in the snapshot
topic shows a card. A topic with another partition count stops the handler from starting."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client import REGISTRY

from blackjack.bus.topics import TopicMismatch, partition_for
from blackjack.command_handler import service
from blackjack.command_handler.key_check import NotTheDeploymentsKey
from blackjack.command_handler.keys import derive_key
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.snapshots import (
    CHECKPOINT_AUTH_HEADER,
    Checkpoint,
    SealedSnapshot,
    SnapshotCodec,
    SnapshotError,
    checkpoint_key,
)
from blackjack.domain import commands as cmd
from blackjack.domain.evolve import fold
from blackjack.domain.state import TableState
from blackjack.messages.sealing import ShoeSeal
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    following,
    read_topic,
    running_handler,
    stream_events,
    table_events,
    verify_stream,
)

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


def rebuilds(kind: str) -> float:
    return REGISTRY.get_sample_value("blackjack_rebuilds_total", {"kind": kind}) or 0.0


def replayed_events() -> float:
    return REGISTRY.get_sample_value("blackjack_rebuild_events_total") or 0.0


def cold_streams() -> float:
    return REGISTRY.get_sample_value("blackjack_streams_cold") or 0.0


async def test_a_restart_resumes_from_the_checkpoint_with_a_round_in_flight(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(snapshot_every=10)
    tables = ["snap-a", "snap-b"]
    shuffler = QueuedShuffler()
    shuffler.queue(["TS", "9S", "6S", "7H"])  # snap-a: T 6 against 9 up, no blackjack anywhere
    async with running_handler(config, shuffler=shuffler), space.client() as client:
        for table in tables:
            for setup in (
                cmd.OpenTable(variant="mini-h17"),
                cmd.SitDown(player_id="p"),
                cmd.Deposit(player_id="p", amount=50_000),
            ):
                assert (await client.execute(table, setup)).status == "accepted"
        refused = await client.execute(
            "snap-a", cmd.Withdraw(player_id="p", amount=10**9), command_id="too-much"
        )
        assert refused.rejection is not None
        # snap-a: a round dealt and left in flight; snap-b: enough traffic for checkpoints.
        for step in (cmd.PlaceBet(player_id="p", box=0, amount=1_000), cmd.Deal(player_id="p")):
            assert (await client.execute("snap-a", step)).status == "accepted"
        for i in range(30):
            traffic = (
                cmd.PlaceBet(player_id="p", box=0, amount=100)
                if i % 2 == 0
                else cmd.ClearBets(player_id="p")
            )
            await client.execute("snap-b", traffic)

    records = await read_topic(space, space.topics.snapshots)
    keys = [r.key.decode() for r in records]
    assert checkpoint_key(0) in keys and set(tables) <= set(keys)
    checkpoints = [Checkpoint.decode(r.value) for r in records if r.key == b"#checkpoint/0"]
    assert len(checkpoints) >= 3 and checkpoints[-1].events_from > 0
    # A snapshot is its stream id, sequence and a sealed body: no state, no card, in clear.
    codec = SnapshotCodec(derive_key(space.shoe_key, "blackjack/snapshots/v1"))
    stranger = SnapshotCodec(derive_key(ShoeSeal.new_key_hex(), "blackjack/snapshots/v1"))
    newest_a = [r.value for r in records if r.key == b"snap-a"][-1]
    sealed = SealedSnapshot.model_validate_json(newest_a)  # extra fields are forbidden
    assert sealed.stream_id == "snap-a"
    with pytest.raises(SnapshotError):
        stranger.decode(newest_a)
    restored = codec.decode(newest_a)
    events = await stream_events(space, "snap-a")
    assert restored.state == fold(table_events(events[: sealed.sequence]))

    kept, replayed = rebuilds("checkpoint"), replayed_events()
    async with running_handler(config) as handler, space.client() as client:
        assert rebuilds("checkpoint") == kept + 1
        # The replay reader is left with nothing to fetch: a partition it read to the end
        # and left resumed kept a fetch waiting on the broker, which delayed the next
        # takeover's reads and end offsets by up to fetch_max_wait_ms each.
        reader = handler._reader
        assert reader is not None and reader.paused() == reader.assignment()
        # snap-a (no timer can wake it) is read back cold; snap-b's answers after the last
        # checkpoint (its last 9 commands) bring it back into memory
        assert cold_streams() == 1
        assert replayed_events() - replayed < len(await stream_events(space))
        # The rejected id is remembered from before the checkpoint, through the snapshot,
        # with its command's digest: a copy gets the answer, another command is refused.
        again = await client.execute(
            "snap-a", cmd.Withdraw(player_id="p", amount=10**9), command_id="too-much"
        )
        assert again == refused
        other = await client.execute(
            "snap-a", cmd.Deposit(player_id="p", amount=1), command_id="too-much"
        )
        assert other.rejection is not None and "its fields differ" in other.rejection.message
        # The round dealt before the restart is played to its end.
        state = fold(table_events(await stream_events(space, "snap-a")))
        assert state.boxes_in_play() == [0]
        while state.boxes_in_play():
            if state.boxes[0].insurance == "offered":
                move: cmd.DeclineInsurance | cmd.Stand = cmd.DeclineInsurance(player_id="p", box=0)
            else:
                move = cmd.Stand(player_id="p", box=0)
            assert (await client.execute("snap-a", move)).status == "accepted"
            state = fold(table_events(await stream_events(space, "snap-a")))
        assert handler.owned_partitions() == {0}
    await verify_stream(space, "snap-a", resent=["too-much"])
    await verify_stream(space, "snap-b")
    assert partition_for("snap-a", 1) == 0


def _stream_on(partition: int, partitions: int, prefix: str) -> str:
    return next(
        f"{prefix}-{n}"
        for n in range(100)
        if partition_for(f"{prefix}-{n}", partitions) == partition
    )


async def test_a_handler_with_another_shoe_key_does_not_start(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key file's mount missing (a new key made) or another deployment's key: the handler
    held the partitions with shoes ``failed``, but served those with none and sealed their
    new shoes under its key; with the right key back, those tables stopped for good, their
    money in play (an upgrade drill). Now it reads the end of the log first and does not
    start, the command line in one line, exit 2. The deployment's own key still starts over
    a log that holds a wrong key's shoes too (such an incident before this check)."""
    space: KafkaSpace = await kafka_space(partitions=2)
    keyed, empty = _stream_on(0, 2, "keyed"), _stream_on(1, 2, "empty")
    async with running_handler(space.config()), space.client() as client:
        opened = await client.execute(keyed, cmd.OpenTable(variant="mini-h17"))
        assert opened.status == "accepted"
    stranger_key = ShoeSeal.new_key_hex()
    stranger = CommandHandler(space.config(shoe_key_hex=stranger_key))
    own_id = ShoeSeal.from_hex(space.config().shoe_key_hex).key_id
    try:
        with pytest.raises(NotTheDeploymentsKey, match=f"sealed under key id {own_id} "):
            await stranger.start()
        assert stranger.owned_partitions() == set()
    finally:
        await stranger.stop()
    env = {**os.environ, **space.env(BLACKJACK_SHOE_KEY=stranger_key)}
    ran = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blackjack.cli", "handler", env=env, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        _, err = await ran.communicate()
    assert ran.returncode == 2, err.decode()
    [said] = err.decode().strip().splitlines()
    assert said.startswith("blackjack: the shoe key is not this deployment's"), said

    # The incident as it was before the check: the stranger serves the empty partition and
    # seals a shoe there under its key. The deployment's handler starts all the same.
    monkeypatch.setattr(service, "check_the_key_against_the_log", _no_check)
    wrong = CommandHandler(space.config(shoe_key_hex=stranger_key))
    await wrong.start()
    try:
        await wrong.wait_until(lambda: wrong.partition_states() == {0: "failed", 1: "ready"}, 30)
        async with space.client() as client:
            assert (await client.execute(empty, cmd.OpenTable(variant="mini-h17"))).status == (
                "accepted"
            )
    finally:
        await wrong.stop()
    monkeypatch.undo()
    # Not refused: the log's shoes under its key (the wrong key's shoe holds its partition
    # failed: what the check now prevents).
    await _serves(space, CommandHandler(space.config()), {0: "ready", 1: "failed"}, keyed)
    # The remedy, where the wrong key is known: on the key list, retired (it opens the shoes
    # it sealed and verifies nothing), every partition serves again.
    mended = CommandHandler(space.config(retired_shoe_keys_hex=(stranger_key,)))
    await _serves(space, mended, {0: "ready", 1: "ready"}, empty)


async def _no_check(*args: Any) -> None:
    """The handler before the key check."""


async def _serves(
    space: KafkaSpace, handler: CommandHandler, states: dict[int, str], table: str
) -> None:
    """``handler`` started holds its partitions in ``states``, and seats a player at
    ``table``; stopped after."""
    await handler.start()
    try:
        await handler.wait_until(lambda: handler.partition_states() == states, 30)
        async with space.client() as client:
            sat = await client.execute(table, cmd.SitDown(player_id="p", seat=0))
            assert sat.status == "accepted"
    finally:
        await handler.stop()


async def test_the_handler_refuses_topics_with_another_partition_count(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    settings = space.settings
    wrong = space.config(
        kafka=type(settings)(
            bootstrap=settings.bootstrap, topic_prefix=settings.topic_prefix, partitions=3
        )
    )
    handler = CommandHandler(wrong)
    with pytest.raises(TopicMismatch, match="has 2 partitions, the service is configured for 3"):
        await handler.start()
    # The command line says it in one line, exit 2, as for any setting it cannot use (the
    # runbook drill: a 32-line trace and exit 1).
    env = {**os.environ, **space.env(BLACKJACK_PARTITIONS="3")}
    ran = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "blackjack.cli",
        "handler",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        _, err = await ran.communicate()
    assert ran.returncode == 2, err.decode()
    [said] = err.decode().strip().splitlines()
    assert said.startswith("blackjack: ") and "has 2 partitions" in said, said


async def test_a_quiet_partition_checkpoints_after_checkpoint_after_s(kafka_space: Any) -> None:
    """Far fewer commands than ``snapshot_every``: the partition still checkpoints once
    ``checkpoint_after_s`` has passed, so a rebuild never needs an answer older than the
    results topic keeps, and a rejection stays in the window a rebuild reads."""
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(snapshot_every=100_000, checkpoint_after_s=0.5)
    async with running_handler(config), space.client() as client:
        assert (await client.execute("quiet", cmd.OpenTable(variant="mini-h17"))).status == (
            "accepted"
        )
        refused = await client.execute(
            "quiet", cmd.Withdraw(player_id="p", amount=5), command_id="refused-once"
        )
        assert refused.rejection is not None and refused.rejection.code == "not_seated"
        # (bounded: no checkpoint after the refusal fails the test)
        checkpoint = await _checkpoint_holding(space, 0, "quiet", "refused-once")
    assert checkpoint.events_from > 0 and checkpoint.results_from > 0


async def _checkpoint_holding(
    space: KafkaSpace, partition: int, stream_id: str, command_id: str
) -> Checkpoint:
    """The partition's first checkpoint whose snapshot of ``stream_id`` holds the answer to
    ``command_id`` in its window, so that a rebuild needs no answer of the results topic
    (bounded). One taken earlier holds it not: a machine slow between two commands lets
    ``checkpoint_after_s`` pass (a checkpoint's snapshots come before it, in its transaction)."""
    codec = SnapshotCodec(derive_key(space.shoe_key, "blackjack/snapshots/v1"))
    key, stream = checkpoint_key(partition).encode(), stream_id.encode()
    holds = False
    async with following(space, space.topics.snapshots) as consumer, asyncio.timeout(30):
        while True:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    if record.key == stream and record.value:
                        holds = command_id in codec.decode(record.value).results
                    elif record.key == key and record.value and holds:
                        return Checkpoint.decode(record.value)


async def test_an_idle_table_goes_cold_and_the_next_command_thaws_it(kafka_space: Any) -> None:
    """A soak test: a handler kept every table it ever had in memory, about 100 KiB each. An
    idle one is now kept as its sealed snapshot until a command needs it."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with (
        running_handler(space.config(cold_after_s=0.2)) as handler,
        space.client() as client,
    ):
        for setup in (
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id="p"),
        ):
            assert (await client.execute("sleepy", setup)).status == "accepted"
        paid = await client.execute(
            "sleepy", cmd.Deposit(player_id="p", amount=5_000), command_id="pay-once"
        )
        await handler.wait_until(lambda: cold_streams() == 1, 30)
        # a resend finds its answer in the cold stream; a new command is decided as ever
        again = await client.execute(
            "sleepy", cmd.Deposit(player_id="p", amount=5_000), command_id="pay-once"
        )
        assert again == paid
        bet = await client.execute("sleepy", cmd.PlaceBet(player_id="p", box=0, amount=500))
        assert bet.status == "accepted"
        (_, state) = handler.streams()["sleepy"]
        assert isinstance(state, TableState) and state.players["p"].balance == 4_500
    await verify_stream(space, "sleepy", resent=["pay-once"])


@pytest.mark.parametrize("topic", ["events", "results"])
async def test_a_record_that_is_not_the_service_s_does_not_stop_a_takeover(
    kafka_space: Any, topic: str
) -> None:
    """Junk on the events topic (no ``ce_*`` headers, not an envelope: docs/operations.md, "A
    stuck projection worker", which ACLs should prevent) made every rebuild of its partition
    fail ("taking the partition failed; will retry" for ever: a drill's wallet on that
    partition could no longer be played once its handler was killed). The rebuild steps over
    it: it is no event of any stream, whose sequences still show a gap. So did junk on the
    results topic (no ``ce_*`` headers, not a command result, an empty value): no answer."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with running_handler(space.config()), space.client() as client:
        for setup in (
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id="p"),
            cmd.Deposit(player_id="p", amount=5_000),
        ):
            assert (await client.execute("junked", setup)).status == "accepted"
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    try:
        for value in (b"not an envelope", b""):
            await producer.send_and_wait(getattr(space.topics, topic), value, partition=0)
    finally:
        await producer.stop()
    taker = CommandHandler(space.config())
    await taker.start()
    try:
        await taker.wait_until(lambda: taker.partition_states() == {0: "ready"}, 30)
        async with space.client() as client:
            bet = await client.execute("junked", cmd.PlaceBet(player_id="p", box=0, amount=500))
        assert bet.status == "accepted" and bet.first_sequence == 5  # after the deposit
    finally:
        await taker.stop()


def no_blackjack() -> QueuedShuffler:
    """A shoe whose first round stays in play after the deal: T 6 against 9 up."""
    shuffler = QueuedShuffler()
    shuffler.queue(["TS", "9S", "6S", "7H"])
    return shuffler


def distrusted(reason: str) -> float:
    return (
        REGISTRY.get_sample_value("blackjack_checkpoints_distrusted_total", {"reason": reason})
        or 0.0
    )


async def _put_checkpoint(space: KafkaSpace, value: bytes, headers: list[Any]) -> int:
    """Write partition 0's checkpoint as someone other than the handlers; its offset."""
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    try:
        sent = await producer.send_and_wait(
            space.topics.snapshots,
            value,
            key=checkpoint_key(0).encode(),
            partition=0,
            headers=headers,
        )
    finally:
        await producer.stop()
    return int(sent.offset)


async def _signed_checkpoint_after(space: KafkaSpace, offset: int) -> None:
    """Follow the snapshots topic until a signed checkpoint of partition 0 after ``offset``
    is committed (bounded)."""
    tp = TopicPartition(space.topics.snapshots, 0)
    reader = AIOKafkaConsumer(bootstrap_servers=space.bootstrap, isolation_level="read_committed")
    await reader.start()
    try:
        reader.assign([tp])
        reader.seek(tp, offset + 1)
        async with asyncio.timeout(30):
            while True:
                for record in (await reader.getmany(tp, timeout_ms=500)).get(tp, []):
                    if record.key == checkpoint_key(0).encode() and CHECKPOINT_AUTH_HEADER in dict(
                        record.headers
                    ):
                        return
    finally:
        await reader.stop()


async def _newest_checkpoint(space: KafkaSpace) -> Any:
    records = await read_topic(space, space.topics.snapshots)
    return [r for r in records if r.key == checkpoint_key(0).encode()][-1]


async def test_a_forged_or_copied_checkpoint_loses_or_doubles_nothing(kafka_space: Any) -> None:
    """Whoever can write the snapshots topic put a checkpoint there that skips the events and
    results after the real one (its authentication copied from the real one), then one copied
    from another deployment's topics (same shoe key, another prefix). Trusted, the first made
    the handler forget the bet after the checkpoint and place it again when its command was
    sent again (two events of sequence 5). Each is refused, and the partition rebuilt from the
    start of its log: the resend is answered as before, nothing is lost or written twice."""
    space: KafkaSpace = await kafka_space(partitions=1)
    elsewhere: KafkaSpace = await kafka_space(partitions=1)
    elsewhere.shoe_key = space.shoe_key
    config = space.config(snapshot_every=3)
    setup = (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="p"),
        cmd.Deposit(player_id="p", amount=50_000),
    )
    async with running_handler(config, shuffler=no_blackjack()), space.client() as client:
        for command in setup:
            assert (await client.execute("forged", command)).status == "accepted"
        bet = await client.execute(
            "forged", cmd.PlaceBet(player_id="p", box=0, amount=1_000), command_id="the-bet"
        )
        assert bet.status == "accepted"
    real = await _newest_checkpoint(space)
    skipping = Checkpoint.decode(real.value).model_copy(
        update={"events_from": 10**6, "results_from": 10**6}
    )
    forged_at = await _put_checkpoint(space, skipping.encode(), list(real.headers))

    forged = distrusted("forged")
    async with running_handler(config), space.client() as client:
        assert distrusted("forged") == forged + 1
        again = await client.execute(
            "forged", cmd.PlaceBet(player_id="p", box=0, amount=1_000), command_id="the-bet"
        )
        assert again == bet
        await _signed_checkpoint_after(space, forged_at)  # the handler's own, at once

    # A checkpoint of another deployment with the same key (another prefix), copied here.
    async with running_handler(elsewhere.config(snapshot_every=3)), elsewhere.client() as client:
        for step in (*setup, cmd.PlaceBet(player_id="p", box=0, amount=100)):
            assert (await client.execute("forged", step)).status == "accepted"
    copied = await _newest_checkpoint(elsewhere)
    await _put_checkpoint(space, copied.value, list(copied.headers))
    async with running_handler(config), space.client() as client:
        assert distrusted("forged") == forged + 2
        assert (await client.execute("forged", cmd.Deal(player_id="p"))).status == "accepted"
    check = await verify_stream(space, "forged", resent=["the-bet"])
    assert isinstance(check.state, TableState) and check.state.round_in_play
    assert check.state.boxes[0].bet == 1_000  # the bet dealt: the one placed once


async def test_an_unsigned_checkpoint_is_refused_where_this_release_has_committed(
    kafka_space: Any,
) -> None:
    """Unsigned, as the release before wrote them, a forged checkpoint needs no key; it is
    refused on a partition whose offsets this release committed (their metadata), so only the
    rolling upgrade itself trusts one."""
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(snapshot_every=3)
    await _bet_placed(space, config, "unsigned")
    real = await _newest_checkpoint(space)
    skipping = Checkpoint.decode(real.value).model_copy(update={"events_from": 10**6})
    headers = [(name, value) for name, value in real.headers if name == "bj_commands_to"]
    await _put_checkpoint(space, skipping.encode(), headers)
    refused = distrusted("unsigned")
    async with running_handler(config), space.client() as client:
        assert distrusted("unsigned") == refused + 1
        assert (await client.execute("unsigned", cmd.Deal(player_id="p"))).status == "accepted"
    check = await verify_stream(space, "unsigned")
    assert isinstance(check.state, TableState) and check.state.round_in_play
    assert check.state.boxes[0].bet == 1_000


async def test_a_checkpoint_of_the_release_before_is_trusted_during_the_upgrade(
    kafka_space: Any,
) -> None:
    """The rolling upgrade: the partition's checkpoint is as the release before wrote it (no
    ``bj_checkpoint_auth``) and so are its committed offsets (no metadata). A handler of this
    release rebuilds from it, not from the log's start, and writes a signed checkpoint at
    once, which the next takeover trusts."""
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(snapshot_every=3)
    unsigned_at = await _as_the_release_before_left_it(space, config, "upgraded")

    kept, unsigned = rebuilds("checkpoint"), _unsigned()
    async with running_handler(config), space.client() as client:
        assert rebuilds("checkpoint") == kept + 1 and _unsigned() == unsigned + 1
        await _signed_checkpoint_after(space, unsigned_at)  # at once, not after an hour
        assert (await client.execute("upgraded", cmd.Deal(player_id="p"))).status == "accepted"
    async with running_handler(config):
        assert rebuilds("checkpoint") == kept + 2 and _unsigned() == unsigned + 1
    check = await verify_stream(space, "upgraded")
    assert isinstance(check.state, TableState) and check.state.round_in_play
    assert check.state.boxes[0].bet == 1_000


def _unsigned() -> float:
    return REGISTRY.get_sample_value("blackjack_checkpoints_unsigned_total") or 0.0


async def _bet_placed(space: KafkaSpace, config: Any, table: str) -> None:
    """A table opened and a player's bet of 1,000 placed at it, its round still to deal (a
    checkpoint written meanwhile: ``snapshot_every`` 3)."""
    async with running_handler(config, shuffler=no_blackjack()), space.client() as client:
        for command in (
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id="p"),
            cmd.Deposit(player_id="p", amount=50_000),
            cmd.PlaceBet(player_id="p", box=0, amount=1_000),
        ):
            assert (await client.execute(table, command)).status == "accepted"


async def _as_the_release_before_left_it(space: KafkaSpace, config: Any, table: str) -> int:
    """A bet placed on ``table``; partition 0's checkpoint and committed offsets then made as
    the release before wrote them (no ``bj_checkpoint_auth``, no metadata). The checkpoint's
    offset."""
    await _bet_placed(space, config, table)
    real = await _newest_checkpoint(space)
    headers = [(name, value) for name, value in real.headers if name == "bj_commands_to"]
    unsigned_at = await _put_checkpoint(space, real.value, headers)
    # the older release's commit: the same offset, without the metadata
    tp = TopicPartition(space.topics.commands, 0)
    older = AIOKafkaConsumer(
        bootstrap_servers=space.bootstrap, group_id=config.group_id, enable_auto_commit=False
    )
    await older.start()
    try:
        older.assign([tp])
        await older.commit({tp: await older.committed(tp) or 0})
    finally:
        await older.stop()
    return unsigned_at


async def test_a_quiet_partition_refuses_unsigned_checkpoints_once_upgraded(
    kafka_space: Any,
) -> None:
    """Taken over from the release before's checkpoint, a partition no command came to kept
    that release's committed offsets (no metadata): a forged unsigned checkpoint put there
    any time later was trusted. The signed checkpoint written at once commits the offsets
    with the mark, so the next takeover refuses it."""
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(snapshot_every=3)
    unsigned_at = await _as_the_release_before_left_it(space, config, "quiet")
    async with running_handler(config):
        await _signed_checkpoint_after(space, unsigned_at)  # no command after it
    real = await _newest_checkpoint(space)
    skipping = Checkpoint.decode(real.value).model_copy(update={"events_from": 10**6})
    headers = [(name, value) for name, value in real.headers if name == "bj_commands_to"]
    await _put_checkpoint(space, skipping.encode(), headers)
    refused, unsigned = distrusted("unsigned"), _unsigned()
    async with running_handler(config), space.client() as client:
        assert distrusted("unsigned") == refused + 1 and _unsigned() == unsigned
        assert (await client.execute("quiet", cmd.Deal(player_id="p"))).status == "accepted"
    check = await verify_stream(space, "quiet")
    assert isinstance(check.state, TableState) and check.state.round_in_play
    assert check.state.boxes[0].bet == 1_000


async def test_junk_commands_cost_a_bounded_snapshot_and_are_answered_alike_after_a_takeover(
    kafka_space: Any,
) -> None:
    """A client sending commands to tables no one opened (``table_not_open``): each made a
    stream with a snapshot of its own, kept for good on the compacted topic and opened by
    every takeover. Their answers are now one record of the partition's, ``dedup_window`` of
    them: the resend of one still in it gets its original answer from the new owner, one let
    go of is decided again, and a table opened at such an id keeps its answer."""
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(dedup_window=5, snapshot_every=10)
    async with running_handler(config), space.client() as client:
        first = await client.execute("nowhere-0", cmd.SitDown(player_id="p"), command_id="j-0")
        assert first.rejection is not None and first.rejection.code == "table_not_open"
        for number in range(1, 39):
            junk = cmd.SitDown(player_id="p")
            await client.execute(f"nowhere-{number}", junk, command_id=f"j-{number}")
        # the 40th command, so in the checkpoint's snapshot of the stray answers
        kept = await client.execute("opened-later", cmd.SitDown(player_id="p"), command_id="j-k")
        opened = await client.execute("opened-later", cmd.OpenTable(variant="mini-h17"))
        assert opened.status == "accepted"
        # after the last checkpoint: answers the takeover reads from the results topic
        last = [
            await client.execute(f"late-{n}", cmd.SitDown(player_id="p"), command_id=f"late-{n}")
            for n in range(3)
        ]

    records = await read_topic(space, space.topics.snapshots)
    keys = {r.key.decode() for r in records}
    # one record for all junk ids, not one each (the table, made after the last checkpoint,
    # has none yet)
    assert keys == {checkpoint_key(0), "#strays/0"}
    [strays] = [r.value for r in records if r.key == b"#strays/0"][-1:]
    assert len(strays) < 5_000  # five answers at most, however many came
    codec = SnapshotCodec(derive_key(space.shoe_key, "blackjack/snapshots/v1"))
    assert [a["command_id"] for a in codec.decode_answers("#strays/0", strays)][-1] == "j-k"

    from_checkpoint = rebuilds("checkpoint")
    async with running_handler(config) as handler, space.client() as client:
        assert rebuilds("checkpoint") == from_checkpoint + 1
        assert set(handler.streams()) == {"opened-later"}
        for result in (*last, kept):
            again = await client.execute(
                result.stream_id, cmd.SitDown(player_id="p"), command_id=result.command_id
            )
            assert again == result
        gone = await client.execute("nowhere-0", cmd.SitDown(player_id="p"), command_id="j-0")
        assert gone.rejection is not None and gone.handled_at > first.handled_at
        seated = await client.execute("opened-later", cmd.SitDown(player_id="p"))
        assert seated.status == "accepted"
        assert set(handler.streams()) == {"opened-later"}
