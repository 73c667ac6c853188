"""What a rebuild of a partition (``replay.rebuild``) leaves for the handler to go on from:
the offsets it read to, the commands answered, the snapshots' sizes and digest marks, the
streams hot or cold, and the figures of its log line; and the checkpoints it refuses or fails
on that test_checkpoint_auth does not forge. Without Kafka (``CommittedLog``)."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition
from pydantic import ValidationError

from blackjack.bus.headers import COMMAND_OFFSET_HEADER, COMMANDS_TO_HEADER
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.replay import RebuildStats
from blackjack.command_handler.snapshots import (
    CHECKPOINT_AUTH_HEADER,
    Checkpoint,
    SnapshotError,
    checkpoint_key,
)
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandResult
from tests.unit.processor_harness import TOPICS
from tests.unit.test_checkpoint_auth import (
    SIGNER,
    bet,
    checkpoint_record,
    commit,
    folded,
    state_of,
    take_over,
    unsigned_checkpoint,
    write_checkpoint,
)
from tests.unit.test_handler_signed_replay import resealed, sealed_body
from tests.unit.test_handler_windows import T0
from tests.unit.test_round_resumed import LATER, SOLO, Table, seated


async def ends(table: Table) -> tuple[int, int]:
    """The end offsets of the table's events and results."""
    tps = [TopicPartition(TOPICS.events, 0), TopicPartition(TOPICS.results, 0)]
    found = await table.log.end_offsets(tps)
    return found[tps[0]], found[tps[1]]


def snapshot_of(records: list[Outgoing]) -> bytes:
    [record] = [r for r in records if r.key == SOLO.encode()]
    return record.value


def stats_of(stats: RebuildStats) -> dict[str, object]:
    return {k: v for k, v in vars(stats).items() if k != "seconds"}


async def test_a_rebuild_from_a_trusted_checkpoint_goes_on_where_the_handler_was() -> None:
    table = seated()
    bet(table, 500)
    # The commands answered: set by the transactions, which this processor does not make.
    table.store.answered_to = 41
    records = await write_checkpoint(table)
    snapshot = snapshot_of(records)
    store, stats = await take_over(table)
    assert stats_of(stats) == {
        "partition": 0,
        "checkpoint": True,
        "snapshots": 1,
        "events": 0,
        "results": 0,
        "foreign": (),
        "unreadable": (),
        "unopened": (),
        "distrusted": None,
        "unsigned": False,
        "older_key": False,
        "resealed": 0,
    }
    assert (store.events_next, store.results_next) == await ends(table)
    assert store.answered_to == 41  # the checkpoint's bj_commands_to
    assert store.since_checkpoint == 0 and not store.dirty and not store.checkpoint_due
    assert store.snapshot_bytes == {SOLO: len(snapshot)}
    assert store.snapshot_marks == {SOLO: SIGNER.element(SOLO, snapshot)}
    assert SOLO in store.cold and not store.streams  # no clock can wake the table

    # Then the events and the answers after the checkpoint: a deal, and an answer given
    # again (a duplicate's) for a command read at offset 57.
    dealt = table.do(cmd.Deal(player_id="ann"), LATER)
    [answer] = [r for r in dealt.outgoing if r.topic == TOPICS.results]
    again = Outgoing(answer.topic, answer.key, answer.value, [(COMMAND_OFFSET_HEADER, b"57")], 0)
    commit(table, [again])
    store, stats = await take_over(table)
    assert stats_of(stats) == {
        "partition": 0,
        "checkpoint": True,
        "snapshots": 1,
        "events": len(dealt.events),
        "results": 2,
        "foreign": (),
        "unreadable": (),
        "unopened": (),
        "distrusted": None,
        "unsigned": False,
        "older_key": False,
        "resealed": 0,
    }
    assert (store.events_next, store.results_next) == await ends(table)
    assert store.answered_to == 58 and store.since_checkpoint == 2 and store.dirty == {SOLO}
    # written again at the clock's next tick: a snapshot over the topic's limit (none was
    # written) is found at once, not at the next checkpoint an hour on
    assert store.checkpoint_due
    assert state_of(store) == folded(table)


async def test_a_checkpoint_not_trusted_leaves_every_stream_to_the_log() -> None:
    """Its snapshots are not used (none counted) and every event is folded again; what the
    service did not write on the events topic is stepped over and counted."""
    table = seated()
    bet(table, 500)
    await write_checkpoint(table)
    junk = Outgoing(TOPICS.events, SOLO.encode(), b"not an event", [], 0)
    commit(table, [junk])
    junk_at = (await ends(table))[0] - 2  # the record, then its commit marker
    commit(table, [Outgoing(TOPICS.snapshots, checkpoint_key(0).encode(), b"junk", [], 0)])
    store, stats = await take_over(table)
    assert stats_of(stats) == {
        "partition": 0,
        "checkpoint": False,
        "snapshots": 0,
        "events": len(table.events),
        "results": 4,
        "foreign": (f"{TOPICS.events}@{junk_at}",),
        "unreadable": (),
        "unopened": (),
        "distrusted": "unreadable",
        "unsigned": False,
        "older_key": False,
        "resealed": 0,
    }
    assert (store.events_next, store.results_next) == await ends(table)
    assert store.dirty == {SOLO} and store.checkpoint_due
    assert state_of(store) == folded(table)


async def test_records_on_the_results_topic_the_service_did_not_write_are_stepped_over() -> None:
    """No ``ce_type`` header and no command result (an empty value, a tombstone, another
    producer's JSON): no command's answer, stepped over and counted as on the events topic,
    the answers around them remembered. Before, each failed every takeover of the partition."""
    table = seated()
    log = table.log
    junk = [b'{"hello": "a test producer"}', b"", None, b"\xff not json"]
    for value in junk:
        log.put(TOPICS.results, SOLO.encode(), value)
    junk_at = [log.end(TOPICS.results) - 2 * n for n in range(len(junk), 0, -1)]
    bet(table, 500)
    store, stats = await take_over(table)
    assert stats.foreign == tuple(f"{TOPICS.results}@{at}" for at in junk_at)
    assert store.results_next == log.end(TOPICS.results)
    assert state_of(store) == folded(table)
    assert store.get(SOLO).results.get(f"c-{table.sent}") is not None  # an answer after them

    # An answer with the service's header that this release cannot read is a newer
    # release's (no rolling back past a new rejection code): not stepped over.
    newer = b'{"command_id": "c-9", "stream_id": "%s", "status": "paused"}' % SOLO.encode()
    log.put(TOPICS.results, SOLO.encode(), newer, (("ce_type", b"blackjack.CommandResult.v1"),))
    with pytest.raises(ValidationError):
        await take_over(table)


async def test_a_table_a_clock_may_wake_is_rebuilt_hot_with_its_players_seen() -> None:
    """A bet out at a table that refunds the bets of a player who disconnects: the clock must
    watch the player from the start, so the table is not left cold; its seated players count
    as seen when the snapshot and the log after it say nothing of them (their answers
    expired), and as the snapshot says otherwise."""
    table = seated("surrender")
    bet(table, 500)
    table.store.get(SOLO).last_seen = {}  # ann's answers expired before the snapshot
    await write_checkpoint(table)
    store, _ = await take_over(table)
    assert SOLO in store.streams and SOLO not in store.cold
    assert store.get(SOLO).last_seen == {"ann": LATER}  # the rebuild's time
    table.store.get(SOLO).last_seen = {"ann": T0, "gone": T0}
    table.store.dirty.add(SOLO)  # snapshotted again
    await write_checkpoint(table)
    store, _ = await take_over(table)
    assert store.get(SOLO).last_seen == {"ann": T0}  # only the players seated


async def test_another_partition_s_checkpoint_on_the_topic_is_no_snapshot() -> None:
    table = seated()
    bet(table, 500)
    records = await write_checkpoint(table)
    other = checkpoint_record(records)
    commit(table, [Outgoing(other.topic, checkpoint_key(1).encode(), other.value, [], 0)])
    store, stats = await take_over(table)
    assert stats.checkpoint and stats.distrusted is None and stats.snapshots == 1
    assert set(store.snapshot_marks) == {SOLO}


async def test_an_unsigned_checkpoint_copied_from_another_partition_is_not_trusted() -> None:
    table = seated()
    bet(table, 500)
    real = checkpoint_record(await write_checkpoint(table))
    elsewhere = Checkpoint.model_validate_json(real.value).model_copy(update={"partition": 1})
    headers = [h for h in real.headers if h[0] != CHECKPOINT_AUTH_HEADER]
    commit(table, [Outgoing(real.topic, real.key, elsewhere.encode(), headers, 0)])
    store, stats = await take_over(table, "accept")
    assert stats.distrusted == "forged" and not stats.checkpoint
    assert state_of(store) == folded(table)


async def test_a_signed_checkpoint_that_cannot_be_read_keeps_the_partition_out() -> None:
    """Authenticated, so written by a handler of this deployment: unreadable, that is a bug,
    not something to step over."""
    table = seated()
    bet(table, 500)
    real = checkpoint_record(await write_checkpoint(table))
    commands_to = dict(real.headers)[COMMANDS_TO_HEADER]
    digest = int(dict(real.headers)[CHECKPOINT_AUTH_HEADER].split(b".")[1], 16)
    headers = [
        (COMMANDS_TO_HEADER, commands_to),
        (CHECKPOINT_AUTH_HEADER, SIGNER.header(0, b"junk", commands_to, digest)),
    ]
    commit(table, [Outgoing(real.topic, real.key, b"junk", headers, 0)])
    with pytest.raises(SnapshotError):
        await take_over(table)


async def test_a_snapshot_under_another_stream_s_key_keeps_the_partition_out() -> None:
    table = seated()
    bet(table, 500)
    await unsigned_checkpoint(table)
    written = table.log._records[TopicPartition(TOPICS.snapshots, 0)]
    snapshot = [r for r in written if r.key == SOLO.encode()][-1]
    assert snapshot.value is not None
    commit(table, [Outgoing(TOPICS.snapshots, b"solo-2", snapshot.value, [], 0)])
    with pytest.raises(SnapshotError, match="the snapshot of solo-1 is keyed solo-2"):
        await take_over(table, "accept")


async def test_a_snapshot_of_an_older_handler_is_completed_from_the_events_before_it() -> None:
    """Written before snapshots carried the signed step ids kept by id: the stream is kept hot
    and its ids are read from the events before the checkpoint (what the service did not
    write among them stepped over), then it is snapshotted again."""
    table = seated()
    commit(table, [Outgoing(TOPICS.events, SOLO.encode(), b"not an event", [], 0)])
    bet(table, 500)
    records = await write_checkpoint(table)
    record, body = sealed_body(snapshot_of(records))
    del body["signed"]
    legacy = Outgoing(TOPICS.snapshots, SOLO.encode(), resealed(record, body), [], 0)
    unsigned = checkpoint_record(records)
    headers = [h for h in unsigned.headers if h[0] != CHECKPOINT_AUTH_HEADER]
    commit(table, [legacy, Outgoing(unsigned.topic, unsigned.key, unsigned.value, headers, 0)])
    store, stats = await take_over(table, "accept")
    assert stats.checkpoint and stats.unsigned and stats.snapshots == 1
    assert SOLO in store.streams and SOLO not in store.cold
    stream = store.get(SOLO)
    assert not stream.signed_incomplete and SOLO in store.dirty
    assert state_of(store) == folded(table)


async def test_a_command_whose_answer_expired_is_remembered_from_its_events() -> None:
    """Past the results topic's retention an accepted command's answer is gone, its events
    are not (kept forever): the rebuild remembers it from them, spanning its events, older
    than the answers still held, so that a copy sent again is not decided again."""
    table = seated()
    bet(table, 500)
    dealt = table.do(cmd.Deal(player_id="ann"), LATER)
    assert len(dealt.events) > 1
    answers = table.log._records[TopicPartition(TOPICS.results, 0)]
    del answers[:-1]  # the retention deleted every answer but the deal's
    store, stats = await take_over(table)
    assert stats.results == 1
    window = store.get(SOLO).results
    assert list(window) == [*(f"c-{n}" for n in range(1, 5)), dealt.result.command_id]
    placed = [e for e in table.events if e.causation_id == "c-4"]  # the round opened, the bet
    assert len(placed) > 1
    assert window.get("c-4") == CommandResult(
        command_id="c-4",
        stream_id=SOLO,
        correlation_id=placed[-1].correlation_id,
        status="accepted",
        first_sequence=placed[0].sequence,
        last_sequence=placed[-1].sequence,
        handled_at=placed[-1].occurred_at,
    )
    assert window.get(dealt.result.command_id) == dealt.result
