"""Commands at streams that do not exist (a ``SitDown`` at a table no one opened, refused
``table_not_open``): each made a stream of its own, kept for good with its answer, so a client
sending a million of them cost a gigabyte of snapshots and more than a minute added to every
takeover of the partition (``python -m tests.integration.measure_stray_commands``). Their
answers are now kept per partition, ``BLACKJACK_DEDUP_WINDOW`` of them, live and rebuilt alike;
a stream made later takes its own (tests/integration/test_handler_snapshots.py covers the
checkpoint on the broker)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import cast

from aiokafka import AIOKafkaConsumer

from blackjack.command_handler.processor import Handled
from blackjack.command_handler.replay import rebuild
from blackjack.command_handler.snapshots import (
    CheckpointSigner,
    SnapshotCodec,
)
from blackjack.command_handler.streams import PartitionStore, StrayAnswers, Stream, strays_key
from blackjack.domain import commands as cmd
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import INITIAL_STATE
from blackjack.messages.envelope import CommandResult
from tests.unit.committed_log import CODEC, checkpointed
from tests.unit.processor_harness import TOPICS
from tests.unit.test_handler_windows import T0, Handler


def _answer_bytes(handled: Handled) -> tuple[bytes, object]:
    [record] = [r for r in handled.outgoing if r.topic.endswith("command-results")]
    return record.value, record.headers


async def test_junk_commands_make_no_stream_and_keep_a_bounded_window() -> None:
    handler = Handler(window=4)
    sent = {
        f"junk-{n}": handler.send(f"nowhere-{n}", cmd.SitDown(player_id="p"), f"junk-{n}", T0)
        for n in range(10)
    }
    for handled in sent.values():
        assert handled.result.rejection is not None
        assert handled.result.rejection.code == "table_not_open"
    later = T0 + timedelta(minutes=1)
    # a stream's command id is its own: the same id at another stream is decided
    other = handler.send("nowhere-8", cmd.SitDown(player_id="p"), "junk-9", later)
    assert not other.duplicate and other.result.handled_at == later
    live = handler.store
    assert live.count() == 0 and len(live.strays) == 4  # not ten streams: four answers
    for takeover in (False, True):
        if takeover:
            await handler.take_over()
            assert handler.store.count() == 0 and handler.store.strays == live.strays
        # inside the window: the original answer, the same bytes and headers
        again = handler.send("nowhere-9", cmd.SitDown(player_id="p"), "junk-9", later)
        assert again.duplicate and _answer_bytes(again) == _answer_bytes(sent["junk-9"])
        again = handler.send("nowhere-8", cmd.SitDown(player_id="p"), "junk-9", T0)
        assert again.duplicate and _answer_bytes(again) == _answer_bytes(other)
    # let go of (the oldest): decided again, refused again
    old = handler.send("nowhere-0", cmd.SitDown(player_id="p"), "junk-0", later)
    assert not old.duplicate and old.result.rejection is not None
    assert handler.store.count() == 0


async def test_a_table_opened_where_junk_was_answered_is_an_ordinary_table() -> None:
    handler = Handler(window=4)
    refused = handler.send("later", cmd.SitDown(player_id="ann"), "early", T0)
    assert refused.result.rejection is not None
    handler.send("elsewhere", cmd.SitDown(player_id="ann"), "junk", T0)
    opened = handler.send("later", cmd.OpenTable(variant="mini-h17"), "open", T0)
    assert opened.result.status == "accepted" and opened.events
    seated = handler.send("later", cmd.SitDown(player_id="ann"), "sit", T0)
    assert seated.result.status == "accepted" and seated.events
    live = handler.store
    assert live.count() == 1
    # the table keeps its answers from before it was opened, oldest first
    assert list(live.streams["later"].results) == ["early", "open", "sit"]
    assert ("elsewhere", "junk") in live.strays and len(live.strays) == 1
    windows = {s.stream_id: list(s.results) for s in live.all_streams()}
    for takeover in (False, True):
        if takeover:
            await handler.take_over()
            rebuilt = handler.store
            assert {s.stream_id: list(s.results) for s in rebuilt.all_streams()} == windows
            assert rebuilt.strays == live.strays
        again = handler.send("later", cmd.SitDown(player_id="ann"), "early", T0)
        assert again.duplicate and _answer_bytes(again) == _answer_bytes(refused)
    paid = handler.send("later", cmd.Deposit(player_id="ann", amount=500), "pay", T0)
    assert paid.result.status == "accepted" and paid.events


async def test_a_rebuild_keeps_the_same_stray_answers_as_the_live_handler() -> None:
    """Junk at a few ids, some of them opened later, with resends, in a window of 3: the
    partition's stray answers and each stream's window are the live ones after a rebuild,
    evictions before a stream was made included."""
    rng = random.Random(7)
    handler = Handler(window=3)
    ids = [f"t{n}" for n in range(8)]
    used: list[tuple[str, str]] = []
    for step in range(120):
        stream = rng.choice(ids)
        roll = rng.random()
        if roll < 0.04:
            handler.send(stream, cmd.OpenTable(variant="mini-h17"), f"open-{step}", T0)
        elif roll < 0.3 and used:
            again_stream, again_id = rng.choice(used)
            handler.send(again_stream, cmd.SitDown(player_id="ann"), again_id, T0)
        else:
            handler.send(stream, cmd.SitDown(player_id=f"p{step}"), f"c-{step}", T0)
            used.append((stream, f"c-{step}"))
    live = handler.store
    windows = {s.stream_id: list(s.results) for s in live.all_streams()}
    assert 0 < len(windows) < len(ids) and len(live.strays) == 3
    await handler.take_over()
    assert {s.stream_id: list(s.results) for s in handler.store.all_streams()} == windows
    assert handler.store.strays == live.strays


def test_stray_answers_seal_as_an_empty_table_the_release_before_reads() -> None:
    codec = SnapshotCodec(b"s" * 32)
    strays = StrayAnswers()
    for stream_id in ("a", "b"):  # one command id at two streams: two answers
        result = CommandResult(
            command_id="same", stream_id=stream_id, status="rejected", handled_at=T0
        )
        strays.remember(result, 10)
    key = strays_key(3)
    raw = codec.encode_answers(key, strays.stored())
    assert codec.decode_answers(key, raw) == strays.stored()
    # The release before reads any record not a checkpoint's as a stream's snapshot.
    stream = codec.decode(raw)
    assert (stream.stream_id, stream.sequence, stream.state) == (key, 0, INITIAL_STATE)


def made_for_junk_by_the_release_before() -> tuple[Stream, CommandResult]:
    """The stream the release before made (no event) for a SitDown at a table not open, and
    the answer it remembers."""
    old = Stream("old", INITIAL_STATE)
    refused = CommandResult(
        command_id="old-1",
        stream_id="old",
        status="rejected",
        rejection=Rejection(code="table_not_open", message="no table"),
        handled_at=T0,
    )
    old.remember(refused, 4)
    return old, refused


async def test_a_stream_the_release_before_made_for_a_junk_command_stays_a_stream() -> None:
    """The release before made a stream (no event) for each command at a stream that did not
    exist; its snapshot is in the checkpoint. A junk command there, then the table opened: the
    live handler keeps both answers in the stream's window (it exists), and so does a rebuild
    from that checkpoint, which must not take the answer before the opening for a stray one
    because the stream's first event comes after the checkpoint."""
    handler = Handler(window=4)
    old, _ = made_for_junk_by_the_release_before()
    checkpointed(handler.log, old, results_from=0)
    await handler.take_over()
    assert handler.store.holds("old") and "old-1" in handler.store.get("old").results
    handler.send("old", cmd.SitDown(player_id="ann"), "old-2", T0)
    for number in range(4):  # a window's worth of answers at streams that do not exist
        handler.send(f"nowhere-{number}", cmd.SitDown(player_id="ann"), f"junk-{number}", T0)
    opened = handler.send("old", cmd.OpenTable(variant="mini-h17"), "open", T0)
    assert opened.result.status == "accepted"
    live = handler.store
    assert list(live.get("old").results) == ["old-1", "old-2", "open"] and len(live.strays) == 4
    await handler.take_over()
    assert list(handler.store.get("old").results) == ["old-1", "old-2", "open"]
    assert handler.store.strays == live.strays


async def test_a_rebuild_from_the_whole_log_keeps_a_stream_the_release_before_made() -> None:
    """As above, but the next rebuild cannot trust the checkpoint and reads the whole log
    (here a checkpoint signed with another key, as a forged one is): the stream's snapshot on
    the topic, written by the release before before its first event (sequence 0), says it
    existed then, as the checkpoint did. Before, the rebuild took its answers before the
    opening for stray ones; a window's worth of junk elsewhere let them go, and a resend of
    the SitDown refused at the table not yet open was decided again and seated the player."""
    handler = Handler(window=4)
    old, refused = made_for_junk_by_the_release_before()
    # the release before's answer, still on the results topic, and its snapshot and checkpoint
    handler.log.put(TOPICS.results, b"old", refused.model_dump_json().encode())
    checkpointed(handler.log, old, results_from=handler.log.end(TOPICS.results))
    await handler.take_over()
    first = handler.send("old", cmd.SitDown(player_id="ann"), "old-2", T0)
    assert first.result.rejection is not None
    for number in range(4):  # a window's worth of answers at streams that do not exist
        handler.send(f"nowhere-{number}", cmd.SitDown(player_id="ann"), f"junk-{number}", T0)
    opened = handler.send("old", cmd.OpenTable(variant="mini-h17"), "open", T0)
    assert opened.result.status == "accepted"
    live = handler.store
    assert list(live.get("old").results) == ["old-1", "old-2", "open"]
    store, stats = await rebuild(
        cast(AIOKafkaConsumer, handler.log),
        TOPICS,
        0,
        codec=CODEC,
        checkpoints=CheckpointSigner(b"k" * 32, TOPICS.snapshots),
        seal=handler.processor.seal,
        dedup_window=4,
        now=T0,
        timeout=5.0,
    )
    assert stats.distrusted == "forged"
    assert list(store.get("old").results) == ["old-1", "old-2", "open"]
    assert store.strays == live.strays
    handler.store = store
    again = handler.send("old", cmd.SitDown(player_id="ann"), "old-2", T0)
    assert again.duplicate and _answer_bytes(again) == _answer_bytes(first)


def test_one_question_answers_a_held_stream_s_window_else_the_partition_s_strays() -> None:
    """``PartitionStore.answered``: the processor and ``answers.handled_before`` both ask it
    (the held stream's answer, else the partition's answers kept for a stream that does not
    exist), the processor for the stream too."""
    store = PartitionStore(0, codec=CODEC)
    held = Stream("held", INITIAL_STATE, sequence=1)
    kept = CommandResult(command_id="c", stream_id="held", status="accepted", handled_at=T0)
    held.remember(kept, 4)
    store.streams["held"] = held
    stray = kept.model_copy(update={"stream_id": "nowhere", "status": "rejected"})
    store.remember_stray(stray, 4)
    assert store.answered("held", "c") == (held, kept)
    assert store.answered("held", "other") == (held, None)
    assert store.answered("nowhere", "c") == (None, stray)
    assert store.answered("nowhere", "other") == (None, None)
    assert store.count() == 1  # asking made no stream
    assert store.freeze("held", 0.0, lambda _: False)  # cold: thawed to answer
    stream, answer = store.answered("held", "c")
    assert stream is store.streams["held"] and answer == kept
