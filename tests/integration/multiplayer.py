"""Helpers of the multi-player certification scenarios: a table's events followed once for
every player of a test, and players each with a client (a producer) of their own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import CommandResult, EventEnvelope
from blackjack.messages.wire import decode, from_wire
from tests.integration.conftest import WAIT_S, KafkaSpace, following


class TableWatch:
    """The committed events of one table, read by one consumer in the background; any task
    awaits a condition on them (``until``) without reading the topic again."""

    def __init__(self, space: KafkaSpace, table: str) -> None:
        self.space = space
        self.table = table
        self.events: list[EventEnvelope] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _follow(self) -> None:
        seal = self.space.seal()
        async with following(self.space, self.space.topics.events) as consumer:
            while True:
                batch = await consumer.getmany(timeout_ms=200)
                for records in batch.values():
                    for record in records:
                        if record.key != self.table.encode():
                            continue
                        self.events.append(from_wire(decode(record.value), seal))
                        self._changed.set()

    async def until(
        self, done: Callable[[list[EventEnvelope]], Any], timeout: float = WAIT_S
    ) -> Any:
        """``done(events)`` once it is true (its value), awaited on each new event."""
        async with asyncio.timeout(timeout):
            while not (found := done(self.events)):
                assert self._task is not None and not self._task.done(), "the watch stopped"
                self._changed.clear()
                await self._changed.wait()
        return found

    def of(self, kind: type[Any], since: int = 0) -> list[Any]:
        """The data of the events of this type, from the ``since``-th event on."""
        return [e.data for e in self.events[since:] if isinstance(e.data, kind)]


@contextlib.asynccontextmanager
async def watching(space: KafkaSpace, table: str) -> AsyncIterator[TableWatch]:
    watch = TableWatch(space, table)
    watch._task = asyncio.create_task(watch._follow())
    try:
        yield watch
    finally:
        watch._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch._task


@dataclass
class Player:
    """One player's client: a producer and a results reader of its own."""

    player_id: str
    table: str
    client: BlackjackClient

    async def do(self, command: Any, **kwargs: Any) -> CommandResult:
        return await self.client.execute(self.table, command, **kwargs)

    async def must(self, command: Any) -> CommandResult:
        result = await self.do(command)
        assert result.status == "accepted", (self.player_id, command, result.rejection)
        return result

    async def must_together(self, *commands: Any) -> list[CommandResult]:
        """Commands sent pipelined in one go (a bet and its Deal), each to be accepted: the
        broker receives them within milliseconds, so a short betting clock that the first one
        starts cannot run out before the last one is received, however slow the answers."""
        return await self.accepted(await self.send(*commands))

    async def send(self, *commands: Any) -> Sent:
        """Commands sent pipelined, in order, without waiting for the table's answers: on
        return the broker has them, so whatever any player sends next is after them in the
        table's log, however long the handler takes to answer (``accepted`` awaits them)."""
        ids = await self.client.send_all([(self.table, command) for command in commands])
        return Sent(list(zip(ids, commands, strict=True)))

    async def accepted(self, sent: Sent) -> list[CommandResult]:
        """The answers to commands ``send`` sent, each to be accepted."""
        results = await asyncio.gather(
            *(self.client.result(i, WAIT_S, stream_id=self.table) for i, _ in sent.commands)
        )
        for (_, command), result in zip(sent.commands, results, strict=True):
            assert result.status == "accepted", (self.player_id, command, result.rejection)
        return results


@dataclass
class Sent:
    """Commands sent and not answered yet: (command id, command)."""

    commands: list[tuple[str, Any]]


@contextlib.asynccontextmanager
async def players(space: KafkaSpace, table: str, *ids: str) -> AsyncIterator[list[Player]]:
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for player_id in ids:
            client = BlackjackClient(
                space.bootstrap, space.topics, client_id=f"{space.prefix}{player_id}"
            )
            await stack.enter_async_context(client)
            made.append(Player(player_id, table, client))
        yield made


def settled(round_no: int) -> Callable[[list[EventEnvelope]], bool]:
    def done(events: list[EventEnvelope]) -> bool:
        return any(
            isinstance(e.data, (ev.RoundSettled, ev.RoundCancelled)) and e.data.round == round_no
            for e in events
        )

    return done


async def stand_every_turn(player: Player, watch: TableWatch, round_no: int) -> list[str]:
    """Play the round as a player who stands on every hand and declines insurance, answering
    each decision as its event arrives; returns the rejection codes met (a decision the clock
    took first)."""
    answered: set[int] = set()
    refused: list[str] = []

    def mine(events: list[EventEnvelope]) -> EventEnvelope | bool:
        if settled(round_no)(events):
            return True
        for envelope in reversed(events):
            data = envelope.data
            if getattr(data, "round", round_no) != round_no:
                return False
            if isinstance(data, ev.TurnStarted):
                if data.player_id == player.player_id and envelope.sequence not in answered:
                    return envelope
                return False
            if isinstance(data, ev.InsuranceOffered):
                if envelope.sequence not in answered:
                    return envelope
                return False
        return False

    while True:
        found = await watch.until(mine)
        if found is True:
            return refused
        answered.add(found.sequence)
        data = found.data
        if isinstance(data, ev.TurnStarted):
            command: Any = cmd.Stand(player_id=player.player_id, box=data.box, hand=data.hand)
            result = await player.do(command)
        else:
            result = None
            for box in data.boxes:
                owner = _owner(watch, box, round_no)
                if owner == player.player_id:
                    decline = cmd.DeclineInsurance(player_id=player.player_id, box=box)
                    result = await player.do(decline)
        if result is not None and result.rejection is not None:
            refused.append(result.rejection.code)


def _owner(watch: TableWatch, box: int, round_no: int) -> str | None:
    for bet in watch.of(ev.BetPlaced):
        if bet.round == round_no and bet.box == box:
            return str(bet.player_id)
    return None
