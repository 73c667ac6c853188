"""The load test's players: each plays one single-player table through the real client, one
command in flight at a time, and follows its table's events as a client would."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient, UnreadableResult
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.options import turn_options
from blackjack.domain.evolve import evolve
from blackjack.domain.rules import Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.error_text import error_text
from blackjack.loadtest.figures import Phase
from blackjack.messages.envelope import CommandResult, EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode, from_wire
from blackjack.strategy import compute_strategy


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
        self.wagered: Counter[str] = Counter()
        """per player, the stakes of every round it saw settled (its ``RoundSettled``)"""
        self.paid: Counter[str] = Counter()
        """per player, what those rounds paid back"""
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def fold(self, envelope: EventEnvelope) -> None:
        if envelope.sequence != self.sequence + 1:
            raise RuntimeError(
                f"{envelope.stream_id}: event {envelope.sequence} after {self.sequence}"
            )
        event = table_event(envelope)
        self.state = evolve(self.state, event)
        self.sequence = envelope.sequence
        if isinstance(event, ev.RoundSettled):
            for result in event.results:
                self.wagered[result.player_id] += result.wagered
                self.paid[result.player_id] += result.paid
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
    """Follows the events topic (``read_committed``) from offset 0 and folds every table.

    From offset 0, unlike a client joining a table of a live service (``play.follow``): a run's
    topics are its own (a fresh prefix, deleted at the end), so they hold only the tables the
    run opened, and each table is folded from its ``TableOpened`` with the real ``evolve``."""

    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        partitions: int,
        seal: ShoeSeal,
        security: KafkaSecurity = PLAINTEXT,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._topics = topics
        self._partitions = partitions
        self._seal = seal
        self.views: defaultdict[str, TableView] = defaultdict(TableView)
        self._consumer: ScopedConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    async def start(self) -> None:
        self._consumer = ScopedConsumer(  # reads a header name that is not UTF-8 (``_run``)
            bootstrap_servers=self._bootstrap,
            **self._security.client_options(),
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
                        if header_name_not_utf8(record.headers):
                            continue  # no handler's (``bus.header_names``)
                        envelope = from_wire(decode(record.value or b""), self._seal)
                        self.views[envelope.stream_id].fold(envelope)
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self.failure = error
            raise


class TableStopped(RuntimeError):
    """A command of the table was refused, or had no result in time: its player cannot go on."""


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
        resend_after: float | None = None,
    ) -> None:
        """``resend_after``: send a command again under its id when it has had no result for
        that long (or its sending failed), as a platform's client does through an outage;
        ``None``: never (a result missing after ``timeout`` fails the run)."""
        self.stream_id = f"load-{index:04d}"
        self.player_id = f"player-{index:04d}"
        self.rules = rules
        self.strategy = compute_strategy(rules)
        self.client = client
        self.follower = follower
        self.log = log
        self.timeout = timeout
        self.resend_after = resend_after
        self.latencies: list[float] = []
        self.answered_at: list[float] = []
        """``time.perf_counter()`` of each result, in order"""
        self.asked_at: list[float] = []
        """``time.perf_counter()`` when each of those commands was first sent"""
        self.resent: Counter[str] = Counter()
        """Copies sent again, per command id (tried: a copy whose sending failed may still
        have reached the topic)."""
        self.rejections: list[tuple[str, str, str]] = []
        self.rounds = 0
        self.stopped: str | None = None
        """Why the table stopped before its last round (``until_stopped``)."""

    async def until_stopped(self, work: Callable[[], Awaitable[None]]) -> None:
        """``work`` unless the table has stopped; a stop it meets is noted, not raised, so
        the other tables play on and the proof, read from the topics, says what is missing
        (a refusal, a result never written). Anything else fails the run."""
        if self.stopped is not None:
            return
        try:
            await work()
        except TableStopped as stop:
            self.stopped = str(stop)

    async def execute(self, command: cmd.TableCommand, *, measure: bool) -> TableState:
        """Send, await the result, then the table as of the command's last event."""
        started = time.perf_counter()
        command_id = str(uuid.uuid4())
        kind = type(command).__name__
        self.log.append(Sent(self.stream_id, command_id, command))
        try:
            result = await self._answer(command_id, command)
        except TimeoutError as error:  # AnswerLost too: its answer deleted unread
            raise TableStopped(
                f"{self.stream_id}: {kind} {command_id} had no result in {self.timeout:g} s "
                f"({error_text(error)})"
            ) from error
        except UnreadableResult as error:
            raise TableStopped(f"{self.stream_id}: {kind} {command_id}: {error}") from error
        self.answered_at.append(time.perf_counter())
        self.asked_at.append(started)
        if measure:
            self.latencies.append(self.answered_at[-1] - started)
        view = self.follower.views[self.stream_id]
        if result.status != "accepted":
            assert result.rejection is not None
            self.rejections.append((command_id, kind, result.rejection.code))
            raise TableStopped(
                f"{self.stream_id}: {kind} rejected: {result.rejection.code} "
                f"({result.rejection.message})"
            )
        try:
            return await view.reach(result.last_sequence or view.sequence, self.timeout)
        except TimeoutError as error:
            raise TableStopped(
                f"{self.stream_id}: {kind} {command_id}'s events up to "
                f"{result.last_sequence} not read in {self.timeout:g} s"
            ) from error

    async def _answer(self, command_id: str, command: cmd.TableCommand) -> CommandResult:
        """Send the command and await its result, sending it again under the same id every
        ``resend_after`` seconds without one (the handler answers a copy with the original
        result and writes its events once)."""
        if self.resend_after is None:
            await self.client.send(self.stream_id, command, command_id=command_id)
            return await self.client.result(command_id, self.timeout)
        deadline = time.monotonic() + self.timeout
        while True:
            with contextlib.suppress(KafkaError):  # the broker is away: try again
                await self.client.send(self.stream_id, command, command_id=command_id)
            wait = min(self.resend_after, deadline - time.monotonic())
            with contextlib.suppress(TimeoutError):
                return await self.client.result(command_id, max(wait, 0.0))
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self.stream_id}: no result for {command_id}")
            self.resent[command_id] += 1

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


async def timed(phase: Phase, work: Awaitable[Any]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        await work
    finally:
        phase.wall_s = time.perf_counter() - wall
        phase.cpu_s = time.process_time() - cpu


async def gather_all(tasks: Iterable[Awaitable[None]]) -> None:
    """Run every task; the first failure cancels the rest and is raised."""
    running = [asyncio.ensure_future(task) for task in tasks]
    try:
        await asyncio.gather(*running)
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
