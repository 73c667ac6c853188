"""The measured run: a real ``CommandHandler`` in this process, and the players against it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

from prometheus_client import REGISTRY

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.domain.state import TableState
from blackjack.loadtest.config import LoadConfig
from blackjack.loadtest.figures import Phase
from blackjack.loadtest.players import EventFollower, Player, Sent, gather_all, timed
from blackjack.messages.sealing import ShoeSeal


@dataclass
class OursOutcome:
    phase: Phase
    sent: list[Sent]
    handler_states: dict[str, tuple[int, TableState]]
    views: dict[str, tuple[int, TableState]]
    deposit: int
    rejections: list[tuple[str, str, str]]
    stopped: list[str]
    """Why each table that stopped before its last round did (a refusal, a missing result)."""


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
        settings.bootstrap,
        topics,
        settings.partitions,
        ShoeSeal.from_hex(shoe_key),
        settings.security,
    )
    client = config.players_client(settings)
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
            await gather_all(p.until_stopped(partial(p.set_up, deposit)) for p in players)
            measured_from = len(sent)
            before = _transaction_totals()
            playing = (p.until_stopped(partial(p.play, config.rounds, bet)) for p in players)
            await timed(phase, gather_all(playing))
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
            stopped = [p.stopped for p in players if p.stopped is not None]
        finally:
            await client.stop()
            await follower.stop()
    finally:
        await handler.stop()
    if handler.failure is not None:
        raise RuntimeError("the handler failed") from handler.failure
    return OursOutcome(phase, sent, handler_states, views, deposit, rejections, stopped)
