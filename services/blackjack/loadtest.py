"""``blackjack loadtest``: the command handler under load on a real broker, and a proof that
nothing was lost or done twice.

One run, in its own fresh topics (a random prefix, deleted at the end):

1. **ours** -- a real ``CommandHandler`` (in this process) and ``--tables`` single-player
   tables played concurrently, ``--rounds`` rounds each, with the variant's basic strategy,
   through one shared ``BlackjackClient``. Each table is one player: it sends a command, waits
   for its result, waits until it has read the command's events (the table as the player sees
   it, folded with the real ``evolve``) and only then picks its next move, so at most one
   command per table is in flight, as from a real client. The tables' set-up (open, sit,
   deposit) is played first and not measured.
2. **baseline** -- the floor the same broker allows: a bare aiokafka transactional
   consume->produce loop (``read_committed`` consumer in a group, transactional producer, one
   transaction per fetched batch with ``send_offsets_to_transaction``, no decision) that
   answers every command with a message of the same size on a results topic, shaped as a
   ``CommandResult`` so the same client reads it. The same number of concurrent clients send
   exactly the commands each table sent in (1), one at a time, through the same client code.
3. **proof** -- read back from offset 0 (``read_committed``): the commands topic holds each
   command sent exactly once; the results topic holds exactly one result per command and none
   for any other id; no command was rejected; each table's events have sequences 1..n with
   unique ids, each accepted result's range is exactly the events its command caused, and
   folding them with ``evolve`` gives the state the handler holds in memory at the end (and
   the state the player saw); money is conserved per table: deposits = balance + what the
   house won, with the house result counted twice, from the stakes and payouts and from the
   rounds' settlements.

Speed is reported as the ratio ours/baseline measured in the same run (commands per second,
and the p50 command->result latency), since an absolute figure on a shared machine says
little. Every line printed is one JSON object with a ``kind``: ``setup``, ``run``,
``baseline``, ``proof``, ``summary``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client import REGISTRY

from blackjack.bus.settings import DEFAULT_BOOTSTRAP, TRANSACTION_RETRY_BACKOFF_MS, KafkaSettings
from blackjack.bus.topics import Topics, delete_topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.options import turn_options
from blackjack.domain.evolve import evolve
from blackjack.domain.rules import PRESETS, Rules, preset
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode, from_wire
from blackjack.projections.rebuild import read_topic as read_committed
from blackjack.projections.writer import Record
from blackjack.strategy import compute_strategy

Emit = Callable[[dict[str, Any]], None]

SINGLE_PLAYER_PRESETS = sorted(name for name, rules in PRESETS.items() if rules.seats == 1)
MAX_BATCH = 100  # records per fetch at most, as the handler's default BLACKJACK_MAX_BATCH
POLL_MS = 200
READ_TIMEOUT_S = 60.0
DELETE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LoadConfig:
    bootstrap: str = DEFAULT_BOOTSTRAP
    tables: int = 40
    rounds: int = 50
    variant: str = "mini-h17"
    bet: int | None = None
    """Minor units per round; the variant's minimum bet when not given."""
    partitions: int = 6
    baseline: bool = True
    timeout_s: float = 30.0
    """How long one command may wait for its result before the run fails."""
    keep_topics: bool = False

    def rules(self) -> Rules:
        return preset(self.variant)

    def stake(self) -> int:
        return self.bet if self.bet is not None else self.rules().min_bet


# ---- figures -------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in (0, 1]); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Phase:
    """What one phase measured: commands sent in the measured part, their latencies (s)."""

    commands: int = 0
    rounds: int = 0
    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    transactions: float = 0.0
    transaction_s: float = 0.0

    def figures(self) -> dict[str, Any]:
        wall = self.wall_s or math.nan
        return {
            "commands": self.commands,
            "rounds": self.rounds,
            "seconds": round(self.wall_s, 3),
            "cpu_seconds": round(self.cpu_s, 3),
            "commands_per_second": round(self.commands / wall, 1),
            "rounds_per_second": round(self.rounds / wall, 2),
            "latency_ms": {
                name: round(1000 * percentile(self.latencies, q), 2)
                for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
            },
            "transactions": int(self.transactions),
            "commands_per_transaction": round(self.commands / (self.transactions or math.nan), 1),
            "mean_transaction_ms": round(
                1000 * self.transaction_s / (self.transactions or math.nan), 2
            ),
        }


# ---- the players -----------------------------------------------------------------------------


def table_event(envelope: EventEnvelope) -> ev.Event:
    """The event of a table stream (a wallet's event here is a bug of the run)."""
    event = envelope.data
    if not isinstance(event, ev.Event):
        raise RuntimeError(f"{envelope.stream_id}: {envelope.type} is not a table event")
    return event


class TableView:
    """A table as its player sees it: its events folded with the real ``evolve``."""

    def __init__(self) -> None:
        self.state: TableState = INITIAL_STATE
        self.sequence = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def fold(self, envelope: EventEnvelope) -> None:
        if envelope.sequence != self.sequence + 1:
            raise RuntimeError(
                f"{envelope.stream_id}: event {envelope.sequence} after {self.sequence}"
            )
        self.state = evolve(self.state, table_event(envelope))
        self.sequence = envelope.sequence
        still = []
        for sequence, future in self._waiters:
            if sequence <= self.sequence:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((sequence, future))
        self._waiters = still

    async def reach(self, sequence: int, timeout: float) -> TableState:
        """The state once the events up to ``sequence`` are folded."""
        if self.sequence < sequence:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((sequence, future))
            await asyncio.wait_for(future, timeout)
        return self.state


class EventFollower:
    """Follows the events topic (``read_committed``) from offset 0 and folds every table."""

    def __init__(self, bootstrap: str, topics: Topics, partitions: int, seal: ShoeSeal) -> None:
        self._bootstrap = bootstrap
        self._topics = topics
        self._partitions = partitions
        self._seal = seal
        self.views: defaultdict[str, TableView] = defaultdict(TableView)
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=None,
            client_id="loadtest-events",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await self._consumer.start()
        tps = [TopicPartition(self._topics.events, p) for p in range(self._partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_beginning(*tps)
        self._task = asyncio.create_task(self._run(), name="loadtest-events")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()

    async def _run(self) -> None:
        assert self._consumer is not None
        try:
            while True:
                batches = await self._consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    for record in records:
                        envelope = from_wire(decode(record.value or b""), self._seal)
                        self.views[envelope.stream_id].fold(envelope)
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self.failure = error
            raise


@dataclass
class Sent:
    """One command a player sent: its stream, id and the bytes of its envelope."""

    stream_id: str
    command_id: str
    command: cmd.TableCommand


class Player:
    """One table's player: basic strategy, one command in flight at a time."""

    def __init__(
        self,
        index: int,
        rules: Rules,
        *,
        client: BlackjackClient,
        follower: EventFollower,
        log: list[Sent],
        timeout: float,
    ) -> None:
        self.stream_id = f"load-{index:04d}"
        self.player_id = f"player-{index:04d}"
        self.rules = rules
        self.strategy = compute_strategy(rules)
        self.client = client
        self.follower = follower
        self.log = log
        self.timeout = timeout
        self.latencies: list[float] = []
        self.rejections: list[tuple[str, str, str]] = []
        self.rounds = 0

    async def execute(self, command: cmd.TableCommand, *, measure: bool) -> TableState:
        """Send, await the result, then the table as of the command's last event."""
        started = time.perf_counter()
        command_id = await self.client.send(self.stream_id, command)
        self.log.append(Sent(self.stream_id, command_id, command))
        result = await self.client.result(command_id, self.timeout)
        if measure:
            self.latencies.append(time.perf_counter() - started)
        view = self.follower.views[self.stream_id]
        if result.status != "accepted":
            assert result.rejection is not None
            kind = type(command).__name__
            self.rejections.append((command_id, kind, result.rejection.code))
            raise RuntimeError(
                f"{self.stream_id}: {kind} rejected: {result.rejection.code} "
                f"({result.rejection.message})"
            )
        return await view.reach(result.last_sequence or view.sequence, self.timeout)

    async def set_up(self, deposit: int) -> None:
        for command in (
            cmd.OpenTable(variant=self.rules.name),
            cmd.SitDown(player_id=self.player_id),
            cmd.Deposit(player_id=self.player_id, amount=deposit),
        ):
            await self.execute(command, measure=False)

    async def play(self, rounds: int, bet: int) -> None:
        for _ in range(rounds):
            await self.execute(
                cmd.PlaceBet(player_id=self.player_id, box=0, amount=bet), measure=True
            )
            state = await self.execute(cmd.Deal(player_id=self.player_id), measure=True)
            while state.round_open:
                state = await self.execute(self.next_move(state), measure=True)
            self.rounds += 1

    def next_move(self, state: TableState) -> cmd.TableCommand:
        """The basic-strategy move for the hand whose turn it is (never insurance)."""
        if state.phase == "insurance":
            return cmd.DeclineInsurance(player_id=self.player_id, box=0)
        if state.active is None or state.upcard is None:
            raise RuntimeError(f"{self.stream_id}: round open with no hand to play ({state.phase})")
        box, hand_index = state.active
        hand = state.boxes[box].hands[hand_index]
        options = turn_options(state)
        action: str = self.strategy.decide(
            hand.cards,
            state.upcard,
            "double" in options,
            "split" in options,
            "surrender" in options,
        )
        if action not in options:
            action = "hit" if "hit" in options else "stand"
        kind = _HAND_COMMANDS[action]
        return kind(player_id=self.player_id, box=box, hand=hand_index)


_HAND_COMMANDS: dict[str, type[cmd.Hit | cmd.Stand | cmd.Double | cmd.Split | cmd.Surrender]] = {
    "hit": cmd.Hit,
    "stand": cmd.Stand,
    "double": cmd.Double,
    "split": cmd.Split,
    "surrender": cmd.Surrender,
}


async def _timed(phase: Phase, work: Awaitable[Any]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        await work
    finally:
        phase.wall_s = time.perf_counter() - wall
        phase.cpu_s = time.process_time() - cpu


async def _gather_all(tasks: Iterable[Awaitable[None]]) -> None:
    """Run every task; the first failure cancels the rest and is raised."""
    running = [asyncio.ensure_future(task) for task in tasks]
    try:
        await asyncio.gather(*running)
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


# ---- ours: the real handler --------------------------------------------------------------


@dataclass
class OursOutcome:
    phase: Phase
    sent: list[Sent]
    handler_states: dict[str, tuple[int, TableState]]
    views: dict[str, tuple[int, TableState]]
    deposit: int
    rejections: list[tuple[str, str, str]]


def _transaction_totals() -> tuple[float, float]:
    """The in-process handler's committed transactions so far, and their seconds in all
    (its own Prometheus metrics: begin to commit)."""
    committed = REGISTRY.get_sample_value("blackjack_transactions_total", {"outcome": "committed"})
    seconds = REGISTRY.get_sample_value("blackjack_transaction_seconds_sum")
    return committed or 0.0, seconds or 0.0


def _handler_states(handler: CommandHandler) -> dict[str, tuple[int, TableState]]:
    """The sequence and state of every table the in-process handler holds in memory."""
    return {
        stream_id: (sequence, state)
        for stream_id, (sequence, state) in handler.streams().items()
        if isinstance(state, TableState)
    }


async def run_ours(config: LoadConfig, settings: KafkaSettings, shoe_key: str) -> OursOutcome:
    topics = Topics(settings.topic_prefix)
    rules = config.rules()
    bet = config.stake()
    deposit = 4 * bet * (config.rounds + 1)  # a split and two doubles every round stay covered
    handler = CommandHandler(
        HandlerConfig(
            shoe_key_hex=shoe_key,
            kafka=settings,
            instance_id=f"loadtest-{os.getpid()}",
        )
    )
    follower = EventFollower(
        settings.bootstrap, topics, settings.partitions, ShoeSeal.from_hex(shoe_key)
    )
    client = BlackjackClient(settings.bootstrap, topics, client_id=f"{settings.topic_prefix}client")
    sent: list[Sent] = []
    phase = Phase()
    await handler.start()
    try:
        await handler.wait_ready(config.timeout_s)
        await follower.start()
        await client.start()
        try:
            players = [
                Player(
                    i, rules, client=client, follower=follower, log=sent, timeout=config.timeout_s
                )
                for i in range(config.tables)
            ]
            await _gather_all(player.set_up(deposit) for player in players)
            measured_from = len(sent)
            before = _transaction_totals()
            await _timed(phase, _gather_all(p.play(config.rounds, bet) for p in players))
            after = _transaction_totals()
            phase.transactions = after[0] - before[0]
            phase.transaction_s = after[1] - before[1]
            if follower.failure is not None:
                raise RuntimeError("following the events failed") from follower.failure
            phase.commands = len(sent) - measured_from
            phase.rounds = sum(p.rounds for p in players)
            phase.latencies = [latency for p in players for latency in p.latencies]
            handler_states = _handler_states(handler)
            views = {sid: (view.sequence, view.state) for sid, view in follower.views.items()}
            rejections = [r for p in players for r in p.rejections]
        finally:
            await client.stop()
            await follower.stop()
    finally:
        await handler.stop()
    if handler.failure is not None:
        raise RuntimeError("the handler failed") from handler.failure
    return OursOutcome(phase, sent, handler_states, views, deposit, rejections)


# ---- the baseline: a bare transactional echo ---------------------------------------------


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            self.event.set()


def echo_value(record: ConsumerRecord[bytes, bytes]) -> bytes:
    """A ``CommandResult``-shaped answer, padded with JSON whitespace to the size of the
    command it answers: the same client code reads it, and nothing is decided."""
    headers = dict(record.headers or ())
    body = json.dumps(
        {
            "command_id": headers.get("ce_id", b"").decode(),
            "stream_id": (record.key or b"").decode(),
            "status": "accepted",
            "first_sequence": 1,
            "last_sequence": 1,
            "handled_at": datetime.now(UTC).isoformat(),
        }
    ).encode()
    return body.ljust(len(record.value or b""))


class EchoServer:
    """read_committed consumer -> one transaction per fetched batch -> results + offsets."""

    def __init__(self, bootstrap: str, topics: Topics, group_id: str) -> None:
        self.topics = topics
        self.group_id = group_id
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            client_id="loadtest-echo",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id="loadtest-echo",
            transactional_id=f"{group_id}.echo",
            enable_idempotence=True,
            acks="all",
            retry_backoff_ms=TRANSACTION_RETRY_BACKOFF_MS,  # as the handler's: a fair floor
        )
        self.assigned = asyncio.Event()
        self.transactions = 0
        self.transaction_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        await self.producer.start()
        await self.consumer.start()
        self.consumer.subscribe([self.topics.commands], listener=_Assigned(self.assigned))
        self._task = asyncio.create_task(self._run(), name="loadtest-echo")
        await asyncio.wait_for(self.assigned.wait(), timeout)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()
        await self.producer.stop()

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_BATCH)
            batches = {tp: records for tp, records in batches.items() if records}
            if not batches:
                continue
            started = time.perf_counter()
            await self.producer.begin_transaction()
            for records in batches.values():
                for record in records:
                    await self.producer.send(
                        self.topics.results,
                        echo_value(record),
                        key=record.key,
                        partition=record.partition,
                    )
            await self.producer.send_offsets_to_transaction(
                {tp: records[-1].offset + 1 for tp, records in batches.items()}, self.group_id
            )
            await self.producer.commit_transaction()
            self.transactions += 1
            self.transaction_s += time.perf_counter() - started


async def run_baseline(
    config: LoadConfig, settings: KafkaSettings, sent: Sequence[Sent], measured_from: int
) -> tuple[Phase, dict[str, int]]:
    """The same clients send each table's own commands again, one at a time, to the echo."""
    topics = Topics(settings.topic_prefix)
    server = EchoServer(settings.bootstrap, topics, f"{settings.topic_prefix}echo")
    client = BlackjackClient(settings.bootstrap, topics, client_id=f"{settings.topic_prefix}client")
    warmup: defaultdict[str, list[cmd.TableCommand]] = defaultdict(list)
    measured: defaultdict[str, list[cmd.TableCommand]] = defaultdict(list)
    for number, one in enumerate(sent):
        (measured if number >= measured_from else warmup)[one.stream_id].append(one.command)
    latencies: list[float] = []
    ids: list[str] = []
    phase = Phase(commands=len(sent) - measured_from, rounds=config.tables * config.rounds)

    async def replay(stream_id: str, commands: list[cmd.TableCommand], measure: bool) -> None:
        for command in commands:
            started = time.perf_counter()
            command_id = await client.send(stream_id, command)
            ids.append(command_id)
            result = await client.result(command_id, config.timeout_s)
            if result.command_id != command_id:
                raise RuntimeError(f"echo answered {result.command_id} for {command_id}")
            if measure:
                latencies.append(time.perf_counter() - started)

    await server.start(config.timeout_s)
    try:
        await client.start()
        try:
            await _gather_all(replay(s, c, False) for s, c in warmup.items())
            before = (server.transactions, server.transaction_s)
            await _timed(phase, _gather_all(replay(s, c, True) for s, c in measured.items()))
            phase.transactions = server.transactions - before[0]
            phase.transaction_s = server.transaction_s - before[1]
        finally:
            await client.stop()
    finally:
        await server.stop()
    phase.latencies = latencies
    counts = Counter(
        CommandResult.model_validate_json(record.value or b"").command_id
        for record in await read_topic(settings.bootstrap, topics.results)
    )
    check = {
        "sent": len(ids),
        "answered_once": sum(1 for i in ids if counts[i] == 1),
    }
    return phase, check


# ---- the proof ---------------------------------------------------------------------------


async def read_topic(bootstrap: str, topic: str) -> list[Record]:
    """Every committed record of a topic, from offset 0 to its end offsets as of now."""
    records: list[Record] = []
    await read_committed(bootstrap, topic, records.extend, timeout=READ_TIMEOUT_S)
    return records


@dataclass
class Proof:
    commands_sent: int = 0
    commands_in_topic_once: int = 0
    results: int = 0
    missing_results: list[str] = field(default_factory=list)
    duplicated_results: list[str] = field(default_factory=list)
    results_for_unknown_ids: list[str] = field(default_factory=list)
    rejections: dict[str, int] = field(default_factory=dict)
    tables: int = 0
    events: int = 0
    fold_equal: int = 0
    conserved: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and not self.missing_results
            and not self.duplicated_results
            and not self.results_for_unknown_ids
            and not self.rejections
            and self.commands_in_topic_once == self.commands_sent
            and self.fold_equal == self.tables
            and self.conserved == self.tables
        )

    def line(self) -> dict[str, Any]:
        return {
            "kind": "proof",
            "ok": self.ok,
            "commands_sent": self.commands_sent,
            "commands_in_topic_once": self.commands_in_topic_once,
            "results": self.results,
            "missing_results": len(self.missing_results),
            "duplicated_results": len(self.duplicated_results),
            "results_for_unknown_ids": len(self.results_for_unknown_ids),
            "rejections": self.rejections,
            "tables": self.tables,
            "events": self.events,
            "tables_fold_equal": self.fold_equal,
            "tables_money_conserved": self.conserved,
            "problems": self.problems[:20],
        }


@dataclass(frozen=True)
class Money:
    """A table's money, from its events alone (minor units)."""

    deposits: int
    withdrawals: int
    staked: int
    paid_back: int
    settled_net: int
    rounds_settled: int

    @property
    def house_result(self) -> int:
        """What the house won (negative: lost), from the stakes and what was paid back."""
        return self.staked - self.paid_back


def money_of(events: Iterable[ev.Event]) -> Money:
    deposits = withdrawals = staked = paid = net = rounds = 0
    for event in events:
        if isinstance(event, ev.FundsDeposited):
            deposits += event.amount
        elif isinstance(event, ev.FundsWithdrawn):
            withdrawals += event.amount
        elif isinstance(event, ev.BetPlaced | ev.HandDoubled | ev.HandSplit | ev.InsuranceTaken):
            staked += event.amount
        elif isinstance(event, ev.BetRefunded):
            paid += event.amount
        elif isinstance(event, ev.HandSettled | ev.InsuranceSettled):
            paid += event.payout
        elif isinstance(event, ev.RoundSettled):
            net += sum(result.net for result in event.results)
            rounds += 1
    return Money(deposits, withdrawals, staked, paid, net, rounds)


def prove(
    sent: Sequence[Sent],
    *,
    command_records: Iterable[CommandEnvelope],
    results: Iterable[CommandResult],
    events: Iterable[EventEnvelope],
    handler_states: dict[str, tuple[int, TableState]],
    views: dict[str, tuple[int, TableState]],
    rounds: int,
) -> Proof:
    """Check, from what was read back from Kafka, that nothing was lost or done twice."""
    proof = Proof(commands_sent=len(sent))
    sent_ids = {one.command_id for one in sent}
    if len(sent_ids) != len(sent):
        proof.problems.append("a command id was sent twice")
    in_topic = Counter(envelope.command_id for envelope in command_records)
    proof.commands_in_topic_once = sum(1 for i in sent_ids if in_topic[i] == 1)
    by_id: defaultdict[str, list[CommandResult]] = defaultdict(list)
    for result in results:
        by_id[result.command_id].append(result)
        proof.results += 1
    proof.missing_results = [i for i in sent_ids if not by_id.get(i)]
    proof.duplicated_results = [i for i in sent_ids if len(by_id.get(i, ())) > 1]
    proof.results_for_unknown_ids = sorted(set(by_id) - sent_ids)
    codes = Counter(
        r.rejection.code if r.rejection else "rejected"
        for answers in by_id.values()
        for r in answers
        if r.status != "accepted"
    )
    proof.rejections = dict(codes)

    streams: defaultdict[str, list[EventEnvelope]] = defaultdict(list)
    for envelope in events:
        streams[envelope.stream_id].append(envelope)
    tables = sorted({one.stream_id for one in sent})
    proof.tables = len(tables)
    for stream_id in sorted(set(streams) - set(tables)):
        proof.problems.append(f"events of a stream nobody played: {stream_id}")
    for stream_id in tables:
        envelopes = sorted(streams.get(stream_id, []), key=lambda e: e.sequence)
        proof.events += len(envelopes)
        problems = _check_table(
            stream_id,
            envelopes,
            sent=sent,
            by_id=by_id,
            handler_states=handler_states,
            views=views,
            rounds=rounds,
        )
        if not problems.get("fold"):
            proof.fold_equal += 1
        if not problems.get("money"):
            proof.conserved += 1
        proof.problems += problems.get("fold", []) + problems.get("money", [])
    return proof


def _check_table(
    stream_id: str,
    envelopes: list[EventEnvelope],
    *,
    sent: Sequence[Sent],
    by_id: dict[str, list[CommandResult]],
    handler_states: dict[str, tuple[int, TableState]],
    views: dict[str, tuple[int, TableState]],
    rounds: int,
) -> dict[str, list[str]]:
    fold: list[str] = []
    sequences = [e.sequence for e in envelopes]
    if sequences != list(range(1, len(envelopes) + 1)):
        fold.append(f"{stream_id}: sequences are not 1..{len(envelopes)} (gap or duplicate)")
    if len({e.event_id for e in envelopes}) != len(envelopes):
        fold.append(f"{stream_id}: an event id appears twice")
    caused: defaultdict[str, list[int]] = defaultdict(list)
    for envelope in envelopes:
        caused[envelope.causation_id or ""].append(envelope.sequence)
    last_reported = 0
    for one in (s for s in sent if s.stream_id == stream_id):
        answers = by_id.get(one.command_id, [])
        if not answers or answers[0].status != "accepted":
            continue
        first, last = answers[0].first_sequence, answers[0].last_sequence
        expected = list(range(first, last + 1)) if first is not None and last is not None else []
        if caused.pop(one.command_id, []) != expected:
            fold.append(f"{stream_id}: the events of {one.command_id} are not {first}..{last}")
        last_reported = max(last_reported, last or 0)
    if caused:
        fold.append(f"{stream_id}: {sum(map(len, caused.values()))} events with no command sent")
    state: TableState = INITIAL_STATE
    for envelope in envelopes:
        state = evolve(state, table_event(envelope))
    folded = (len(envelopes), state)
    if last_reported != len(envelopes):
        fold.append(f"{stream_id}: results reach sequence {last_reported}, events {len(envelopes)}")
    if handler_states.get(stream_id) != folded:
        fold.append(f"{stream_id}: the fold differs from the handler's state")
    if views.get(stream_id) != folded:
        fold.append(f"{stream_id}: the fold differs from the state the player saw")

    money: list[str] = []
    counted = money_of(table_event(e) for e in envelopes)
    balance = sum(player.balance for player in state.players.values())
    if state.round_open:
        money.append(f"{stream_id}: a round is still open")
    if counted.rounds_settled != rounds:
        money.append(f"{stream_id}: {counted.rounds_settled} rounds settled, not {rounds}")
    if counted.house_result != -counted.settled_net:
        money.append(
            f"{stream_id}: stakes - payouts = {counted.house_result}, "
            f"the settlements say {-counted.settled_net}"
        )
    if counted.deposits - counted.withdrawals != balance + counted.house_result:
        money.append(
            f"{stream_id}: deposits {counted.deposits} - withdrawals {counted.withdrawals} != "
            f"balance {balance} + house {counted.house_result}"
        )
    return {"fold": fold, "money": money}


async def read_back(
    settings: KafkaSettings, shoe_key: str
) -> tuple[list[CommandEnvelope], list[CommandResult], list[EventEnvelope]]:
    topics = Topics(settings.topic_prefix)
    seal = ShoeSeal.from_hex(shoe_key)
    bootstrap = settings.bootstrap
    commands = [
        CommandEnvelope.model_validate_json(r.value)
        for r in await read_topic(bootstrap, topics.commands)
    ]
    results = [
        CommandResult.model_validate_json(r.value)
        for r in await read_topic(bootstrap, topics.results)
    ]
    events = [from_wire(decode(r.value), seal) for r in await read_topic(bootstrap, topics.events)]
    return commands, results, events


# ---- the run -----------------------------------------------------------------------------


async def run_loadtest(config: LoadConfig, emit: Emit) -> dict[str, Any]:
    """One run: ours, the baseline, the proof; returns the summary line (also emitted)."""
    if config.variant not in SINGLE_PLAYER_PRESETS:
        raise ValueError(f"{config.variant}: the load test plays single-player tables only")
    prefix = f"load{uuid.uuid4().hex[:10]}."
    ours_settings = KafkaSettings(
        bootstrap=config.bootstrap, topic_prefix=prefix, partitions=config.partitions
    )
    base_settings = KafkaSettings(
        bootstrap=config.bootstrap, topic_prefix=f"{prefix}base.", partitions=config.partitions
    )
    shoe_key = ShoeSeal.new_key_hex()
    emit(
        {
            "kind": "setup",
            "variant": config.variant,
            "tables": config.tables,
            "rounds": config.rounds,
            "bet": config.stake(),
            "in_flight_per_table": 1,
            "partitions": config.partitions,
            "bootstrap": config.bootstrap,
            "topic_prefix": prefix,
            "handler": "in-process CommandHandler",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
        }
    )
    compute_strategy(config.rules())  # before any clock starts
    created = [ours_settings]
    try:
        await ensure_topics(ours_settings, Topics(prefix))
        ours = await run_ours(config, ours_settings, shoe_key)
        emit({"kind": "run", "variant": config.variant, **ours.phase.figures()})
        measured_from = len(ours.sent) - ours.phase.commands
        baseline: Phase | None = None
        if config.baseline:
            created.append(base_settings)
            await ensure_topics(base_settings, Topics(base_settings.topic_prefix))
            baseline, echo_check = await run_baseline(
                config, base_settings, ours.sent, measured_from
            )
            emit({"kind": "baseline", **baseline.figures(), "echo": echo_check})
        commands, results, events = await read_back(ours_settings, shoe_key)
        proof = prove(
            ours.sent,
            command_records=commands,
            results=results,
            events=events,
            handler_states=ours.handler_states,
            views=ours.views,
            rounds=config.rounds,
        )
        emit(proof.line())
    finally:
        if not config.keep_topics:
            await remove_topics(config.bootstrap, created)
    figures = ours.phase.figures()
    summary: dict[str, Any] = {
        "kind": "summary",
        "variant": config.variant,
        "tables": config.tables,
        "rounds": config.rounds,
        "ok": proof.ok,
        "commands_per_second": figures["commands_per_second"],
        "rounds_per_second": figures["rounds_per_second"],
        "latency_ms": figures["latency_ms"],
    }
    if baseline is not None:
        base = baseline.figures()
        summary["baseline_commands_per_second"] = base["commands_per_second"]
        summary["baseline_latency_ms"] = base["latency_ms"]
        summary["ratio_commands_per_second"] = _ratio(
            figures["commands_per_second"], base["commands_per_second"]
        )
        summary["ratio_p50_latency"] = _ratio(
            figures["latency_ms"]["p50"], base["latency_ms"]["p50"]
        )
    emit(summary)
    return summary


async def remove_topics(bootstrap: str, spaces: Sequence[KafkaSettings]) -> None:
    """Delete the run's topics and wait until the broker no longer lists them (a deletion
    reaches the metadata a moment after it is accepted; Kafka has nothing to await)."""
    names: set[str] = set()
    for settings in spaces:
        topics = Topics(settings.topic_prefix)
        names.update(topics.all())
        with contextlib.suppress(Exception):
            await delete_topics(settings, topics)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="loadtest-admin")
    await admin.start()
    try:
        deadline = time.monotonic() + DELETE_TIMEOUT_S
        while names & set(await admin.list_topics()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def _ratio(ours: float, baseline: float) -> float:
    return round(ours / baseline, 3) if baseline else math.nan


# ---- the command line ----------------------------------------------------------------------


def _emit_line(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def _quiet_logs(sink: TextIO) -> None:
    """The handler logs each command as it does in service (INFO, JSON), into ``sink``
    rather than among the JSON lines of the report; library warnings go to stderr."""
    import logging

    import structlog

    from blackjack.observability.logging import configure_logging

    configure_logging("INFO")
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sink))
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sys.stderr)
    root.setLevel(logging.WARNING)


def _loadtest(args: argparse.Namespace) -> int:
    from blackjack.simulation.commands import money

    config = LoadConfig(
        bootstrap=args.bootstrap,
        tables=args.tables,
        rounds=args.rounds,
        variant=args.variant,
        bet=money(args.bet) if args.bet else None,
        partitions=args.partitions,
        baseline=not args.no_baseline,
        timeout_s=args.timeout,
        keep_topics=args.keep_topics,
    )
    with open(args.handler_log or os.devnull, "a") as sink:
        _quiet_logs(sink)
        summary = asyncio.run(run_loadtest(config, _emit_line))
    return 0 if summary["ok"] else 1


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    load = sub.add_parser(
        "loadtest",
        help="the command handler under load on a real broker, against a bare transactional "
        "echo, and a proof that nothing was lost or done twice",
    )
    load.add_argument(
        "--bootstrap",
        default=KafkaSettings.from_env().bootstrap,
        help="Kafka bootstrap servers (default: BLACKJACK_KAFKA_BOOTSTRAP or 127.0.0.1:9092)",
    )
    load.add_argument("--tables", type=_positive, default=40, help="concurrent tables")
    load.add_argument("--rounds", type=_positive, default=50, help="rounds per table")
    load.add_argument("--variant", choices=SINGLE_PLAYER_PRESETS, default="mini-h17")
    load.add_argument("--bet", default=None, help="bet per round, e.g. 5.00 (default: minimum)")
    load.add_argument("--partitions", type=_positive, default=6, help="partitions per topic")
    load.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for a result")
    load.add_argument("--no-baseline", action="store_true", help="skip the transactional echo")
    load.add_argument("--keep-topics", action="store_true", help="do not delete the topics")
    load.add_argument(
        "--handler-log", default=None, help="file for the handler's JSON log (default: discarded)"
    )
    load.set_defaults(handler=_loadtest)
