"""Idle streams kept cold (as their sealed snapshot) change nothing a handler decides: the
same commands give the same answers and events whether every idle stream is frozen after
each command or all stay in memory; the clock never owes a cold stream anything; a resent
command finds its answer in a cold stream; a checkpoint writes a cold stream as it is kept.
(A soak test: a handler kept 100 KiB per table for every table it ever had.)"""

from __future__ import annotations

import gc
import itertools
import os
import random
import tracemalloc
from collections.abc import MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from blackjack.command_handler.clock import due_commands, may_come_due
from blackjack.command_handler.processor import Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.snapshots import CheckpointSigner, SnapshotCodec
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import PartitionStore, Stream, StreamCodec
from blackjack.domain import commands as cmd
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.errors import CorruptLog
from blackjack.domain.rules import Rules
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandEnvelope
from tests.unit.processor_harness import new_processor

T0 = datetime(2026, 5, 1, tzinfo=UTC)
PRESENCE = timedelta(seconds=30)
# "timed": a single-player table with the shared tables' clock (a shared table's money comes
# through the wallets' signed steps, which this processor-only test does not carry)
TABLES = {"solo": "mini-h17", "boxes": "surrender", "timed": "atlantic-city"}
PLAYERS = {"solo": ["ann"], "boxes": ["bo"], "timed": ["cy"]}
CLOCKED = {"turn_seconds": 15}
MOVES = ["Hit", "Stand", "Double", "Split", "Surrender", "TakeInsurance", "DeclineInsurance"]


def seeded_shuffler(seed: int) -> Any:
    draw, salts = random.Random(seed), itertools.count()

    def shuffle(rules: Rules) -> cmd.ShuffleShoe:
        order = list(fresh_shoe(rules.decks))
        draw.shuffle(order)
        return cmd.ShuffleShoe(order=tuple(order), salt=f"cold-salt-{next(salts):08d}")

    return shuffle


def script(seed: int, length: int) -> list[tuple[str, cmd.Command | None]]:
    """Commands for three tables, moves chosen at random whether offered or not (a refusal
    must be the same too), with pauses (``None``) in which only the clock acts, and resends
    of earlier command ids."""
    draw = random.Random(seed)
    steps: list[tuple[str, cmd.Command | None]] = []
    for table, variant in TABLES.items():
        overrides = CLOCKED if table == "timed" else {}
        steps.append((table, cmd.OpenTable(variant=variant, overrides=overrides)))
        for seat, player in enumerate(PLAYERS[table]):
            steps += [
                (table, cmd.SitDown(player_id=player, seat=seat)),
                (table, cmd.Deposit(player_id=player, amount=50_000)),
            ]
    for _ in range(length):
        table = draw.choice(list(TABLES))
        player = draw.choice(PLAYERS[table])
        kind = draw.choice(["PlaceBet", "Deal", *MOVES, *MOVES, "pause"])
        if kind == "pause":
            steps.append((table, None))
        elif kind == "PlaceBet":
            steps.append((table, cmd.PlaceBet(player_id=player, box=0, amount=500)))
        elif kind == "Deal":
            steps.append((table, cmd.Deal(player_id=player)))
        else:
            steps.append((table, getattr(cmd, kind)(player_id=player, box=0)))
    return steps


class Handler:
    """A processor and one partition's store, driven like the service: the clock's due
    commands first at each step, then the step's command."""

    def __init__(self, seed: int, freeze: bool, spill: bool = True) -> None:
        self.processor: Processor = new_processor(shuffler=seeded_shuffler(seed))
        codec = SnapshotCodec(os.urandom(32))
        cold: MutableMapping[str, bytes] = SpilledStreams() if spill else {}  # live: on disk
        self.store = PartitionStore(0, codec=codec, cold=cold)
        self.freeze = freeze
        self.offset = 0
        self.frozen = 0

    def send(self, table: str, command: BaseModel, now: datetime, cid: str) -> Any:
        self.offset += 1
        envelope = CommandEnvelope(command_id=cid, stream_id=table, command=command)
        inbound = Inbound(table.encode(), envelope.model_dump_json().encode(), [], 0, self.offset)
        handled = self.processor.handle(self.store, inbound, now)
        if self.freeze:  # every stream no timer can wake, however briefly idle
            self.frozen += self.store.freeze_idle(0, may_come_due)
        events = [(e.stream_id, e.sequence, e.data.model_dump()) for e in handled.events]
        return handled.result.model_dump(exclude={"handled_at"}), events

    def run(self, steps: list[tuple[str, cmd.Command | None]]) -> list[Any]:
        seen, now = [], T0
        for number, (table, command) in enumerate(steps):
            now += timedelta(seconds=7)
            for due in list(due_commands(self.store, now, PRESENCE)):
                seen.append(self.send(due.stream_id, due.command, now, due.command_id))
            if command is not None:
                resend = number % 17 == 0 and number > 0
                cid = f"c-{number - 1 if resend else number}"
                seen.append(self.send(table, command, now, cid))
        return seen


@pytest.mark.parametrize("spill", [True, False], ids=["on disk", "in memory"])
def test_freezing_idle_streams_changes_no_answer_and_no_event(spill: bool) -> None:
    for seed in range(6):
        steps = script(seed, 400)
        hot, cold = Handler(seed, freeze=False), Handler(seed, freeze=True, spill=spill)
        assert cold.run(steps) == hot.run(steps), seed
        assert cold.frozen > 100  # streams went cold and came back many times
        assert hot.store.cold == {}
        states = {s.stream_id: s.state for s in cold.store.all_streams()}
        assert states == {s.stream_id: s.state for s in hot.store.all_streams()}


def test_only_a_stream_no_timer_can_wake_goes_cold() -> None:
    handler = Handler(1, freeze=False)
    for command in (
        cmd.OpenTable(variant="atlantic-city", overrides=CLOCKED),
        cmd.SitDown(player_id="cy", seat=0),
        cmd.Deposit(player_id="cy", amount=5_000),
        cmd.PlaceBet(player_id="cy", box=0, amount=500),
        cmd.Deal(player_id="cy"),  # the turn clock runs
    ):
        handler.send("timed", command, T0, f"c-{handler.offset}")
    state = handler.store.streams["timed"].state
    assert isinstance(state, TableState) and state.deadline is not None
    assert handler.store.freeze_idle(0, may_come_due) == 0
    # a connected player with a bet out where the disconnection policy holds: the presence
    # clock may owe the table a Disconnect
    for command in (
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="bo", seat=0),
        cmd.Deposit(player_id="bo", amount=5_000),
        cmd.PlaceBet(player_id="bo", box=0, amount=500),
    ):
        handler.send("boxes", command, T0, f"c-{handler.offset}")
    assert handler.store.freeze_idle(0, may_come_due) == 0
    handler.send("solo", cmd.OpenTable(variant="mini-h17"), T0, "solo-1")
    # idle for less than asked: stays hot
    assert handler.store.freeze_idle(3600, may_come_due) == 0
    assert handler.store.freeze_idle(0, may_come_due) == 1
    assert set(handler.store.cold) == {"solo"} and handler.store.count() == 3
    # a checkpoint writes the cold stream as it is kept
    assert handler.store.sealed("solo") == handler.store.cold["solo"]
    # the clock looks at hot streams only, and owes the cold one nothing
    later = T0 + timedelta(minutes=5)
    due = {d.stream_id for d in due_commands(handler.store, later, PRESENCE)}
    assert due == {"timed", "boxes"}


def test_a_resent_command_gets_its_answer_from_a_cold_stream() -> None:
    handler = Handler(2, freeze=False)
    first = handler.send("solo", cmd.OpenTable(variant="mini-h17"), T0, "open-1")
    assert handler.store.freeze_idle(0, may_come_due) == 1
    again = handler.send("solo", cmd.OpenTable(variant="mini-h17"), T0, "open-1")
    assert again == (first[0], [])  # the original answer, no event written again
    assert "solo" in handler.store.streams and handler.store.cold == {}


def test_an_idle_table_kept_cold_takes_a_quarter_of_its_memory_or_less(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Tables played as in the soak test (65 commands each: 12 rounds, then the player
    leaves), measured with tracemalloc hot and then cold; ``-s`` prints the figures (about
    49 KiB against 9.5 KiB a table; 106 KiB hot before the window kept its answers as
    documents. A full window of 1,000: about 720 KiB against 52 KiB, docs/operations.md)."""
    handler, tables, now = Handler(5, freeze=False, spill=False), 50, T0

    def send(table: str, command: BaseModel) -> None:
        nonlocal now
        now += timedelta(seconds=1)
        handler.send(table, command, now, f"c-{handler.offset}")

    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for number in range(tables):
            table = f"t{number}"
            send(table, cmd.OpenTable(variant="mini-h17"))
            send(table, cmd.SitDown(player_id="p", seat=0))
            send(table, cmd.Deposit(player_id="p", amount=100_000))
            for _ in range(12):  # whatever the cards: Stand ends a hand, a refusal is answered
                send(table, cmd.PlaceBet(player_id="p", box=0, amount=500))
                send(table, cmd.Deal(player_id="p"))
                send(table, cmd.DeclineInsurance(player_id="p", box=0))
                send(table, cmd.Stand(player_id="p", box=0))
                send(table, cmd.Stand(player_id="p", box=0))
            send(table, cmd.Withdraw(player_id="p", amount=1))
            send(table, cmd.LeaveTable(player_id="p"))
        hot = tracemalloc.get_traced_memory()[0] - start
        assert handler.store.freeze_idle(0, may_come_due) == tables
        cold = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    with capsys.disabled():
        print(
            f"\nper table: hot {hot / tables / 1024:.1f} KiB, cold {cold / tables / 1024:.1f} KiB"
        )
    assert cold * 4 < hot


def test_a_stream_used_since_the_sweep_found_it_idle_stays_hot() -> None:
    """The service seals a sweep's idle streams a few at a time, letting the event loop run
    between them (the review: thousands sealed in one go held it up for seconds): each is
    checked again when its turn comes."""
    handler = Handler(3, freeze=False)
    for table in ("a", "b", "c"):
        handler.send(table, cmd.OpenTable(variant="mini-h17"), T0, f"open-{table}")
        handler.store.streams[table].used_at = 0.0
    found = handler.store.idle(50, may_come_due, now=100.0)
    assert found == ["a", "b", "c"]
    handler.store.streams["b"].used_at = 90.0  # a command for it came meanwhile
    frozen = [s for s in found if handler.store.freeze(s, 50, may_come_due, now=100.0)]
    assert frozen == ["a", "c"] and set(handler.store.streams) == {"b"}


def full_window(window: int) -> tuple[Stream, StreamCodec]:
    """A table whose window holds ``window`` remembered answers (refusals apart), and the
    codec its snapshot is written with."""
    handler = Handler(5, freeze=False)
    handler.processor = new_processor(dedup_window=window, shuffler=seeded_shuffler(5))
    setup: list[BaseModel] = [cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id="p")]
    setup.append(cmd.Deposit(player_id="p", amount=10_000_000))
    rounds: list[BaseModel] = [cmd.PlaceBet(player_id="p", box=0, amount=500)]
    rounds += [cmd.Deal(player_id="p"), cmd.DeclineInsurance(player_id="p", box=0)]
    rounds.append(cmd.Stand(player_id="p", box=0))
    for number, command in enumerate(setup + rounds * 400):  # (refusals too: a full window)
        handler.send("t0", command, T0 + timedelta(seconds=number), f"c-{number}")
    stream = handler.store.streams["t0"]
    codec = handler.store.codec
    assert codec is not None and len(stream.results) >= window  # (refusals apart, more)
    return stream, codec


def test_a_thawed_streams_answers_are_read_only_when_asked_for() -> None:
    """A thaw or a rebuild read every remembered answer into a result though almost none is
    asked for again: they stay as stored, each read when a resend asks for it, and a
    snapshot of the thawed stream stores them as it found them (how long a full window's
    thaw takes: ``python -m tests.unit.measure_cold_thaw``, docs/kafka.md)."""
    window = 1_000  # the production window
    stream, codec = full_window(window)
    ids = list(stream.results)
    raw = codec.encode(stream)
    thawed = codec.decode(raw)
    assert thawed == stream and list(thawed.results) == ids
    assert thawed.results.get(ids[3]) == stream.results.get(ids[3])
    assert codec.decode(codec.encode(thawed)) == stream  # one read, the rest as stored
    # a stored answer no longer readable as a result fails its own lookup, not the thaw (a
    # snapshot from before touched_at reads them all, for the newest answer's time)
    docs = stream.results.stored()
    accepted = [d["command_id"] for d in docs if d["status"] == "accepted"]
    refused = [d["command_id"] for d in docs if d["status"] == "rejected"]
    assert ids == refused + accepted and len(accepted) == window  # (no heartbeat here)
    broken = codec.decode(raw)
    broken.results.add_stored({"command_id": accepted[0], "status": "maybe"})
    with pytest.raises(CorruptLog, match=f"answer to command {accepted[0]} cannot be read"):
        broken.results.get(accepted[0])
    assert broken.results.get(accepted[1]) == stream.results.get(accepted[1])
    # the window still lets the oldest go first, of its kind (the accepted, a full window)
    newest = stream.results.get(accepted[-1])
    assert newest is not None
    thawed.remember(newest.model_copy(update={"command_id": "new"}), window)
    assert list(thawed.results) == [*refused, *accepted[1:], "new"]


def test_cold_streams_on_disk_keep_only_their_ids_in_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A live handler keeps cold streams on local disk (``SpilledStreams``): the soak's
    52 KiB a table with a full window, kept for every table ever had, grew a handler without
    end. Python keeps their ids (tracemalloc; SQLite's page cache, 2 MiB at most, is C
    memory); the sealed snapshots read back byte for byte; ``-s`` prints the figures."""
    tables, sealed = 200, os.urandom(50 * 1024)
    spilled: MutableMapping[str, bytes] = SpilledStreams()
    in_memory: dict[str, bytes] = {}
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for number in range(tables):
            in_memory[f"table-{number:04}"] = sealed[number:] + sealed[:number]
        held = tracemalloc.get_traced_memory()[0] - start
        start = tracemalloc.get_traced_memory()[0]
        spilled.update(in_memory)
        on_disk = tracemalloc.get_traced_memory()[0] - start
        # what the partition keeps of each for its checkpoints' digest (``snapshot_marks``)
        signer = CheckpointSigner(os.urandom(32), "blackjack.snapshots")
        start = tracemalloc.get_traced_memory()[0]
        marks = {stream_id: signer.element(stream_id, raw) for stream_id, raw in in_memory.items()}
        marked = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    with capsys.disabled():
        print(
            f"\nper cold table: in memory {held / tables / 1024:.1f} KiB, "
            f"on disk {on_disk / tables:.0f} B, its share of the checkpoints' digest "
            f"{marked / tables:.0f} B"
        )
    assert held > tables * 48 * 1024 and on_disk < tables * 1024
    assert len(marks) == tables and marked < tables * 256
    assert len(spilled) == tables and spilled == in_memory
    assert spilled.pop("table-0007") == in_memory["table-0007"] and "table-0007" not in spilled
    spilled["table-0008"] = b"newer"
    assert spilled["table-0008"] == b"newer" and len(spilled) == tables - 1
    with pytest.raises(KeyError):
        spilled["table-0007"]
    with pytest.raises(KeyError):
        del spilled["table-0007"]
    spilled.clear()
    assert len(spilled) == 0 and list(spilled) == [] and "table-0008" not in spilled
    spilled["table-0008"] = b"again"
    assert dict(spilled) == {"table-0008": b"again"}


def test_the_spill_file_leaves_nothing_behind() -> None:
    """SQLite removes its temporary database from its directory as soon as it opens it, so
    a handler killed with -9 leaves no file behind; the space goes back when the store is
    collected (its file descriptor closed)."""

    def spill_files() -> list[str]:  # SQLite names its temporary files etilqs_...
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # the listing's own descriptor, closed by now
                continue
            if "etilqs_" in target:
                found.append(target)
        return found

    before = spill_files()
    spilled = SpilledStreams()
    spilled.update({f"t{n}": os.urandom(64 * 1024) for n in range(100)})  # past the cache
    opened = [f for f in spill_files() if f not in before]
    assert opened and all(f.endswith(" (deleted)") for f in opened), opened
    del spilled
    gc.collect()
    assert not [f for f in spill_files() if f in opened]
