"""One whole run, in fresh topics: ours, the baseline, the proof, and the summary."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import platform
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from blackjack.bus.settings import KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics, delete_topics, ensure_topics
from blackjack.loadtest.config import DELETE_TIMEOUT_S, SINGLE_PLAYER_PRESETS, Emit, LoadConfig
from blackjack.loadtest.echo import run_baseline
from blackjack.loadtest.figures import Phase
from blackjack.loadtest.ours import run_ours
from blackjack.loadtest.proof import prove, read_back
from blackjack.messages.sealing import ShoeSeal
from blackjack.strategy import compute_strategy


async def run_loadtest(config: LoadConfig, emit: Emit) -> dict[str, Any]:
    """One run: ours, the baseline, the proof; returns the summary line (also emitted)."""
    if config.variant not in SINGLE_PLAYER_PRESETS:
        raise ValueError(f"{config.variant}: the load test plays single-player tables only")
    prefix = f"load{uuid.uuid4().hex[:10]}."
    ours_settings = KafkaSettings(
        bootstrap=config.bootstrap,
        topic_prefix=prefix,
        partitions=config.partitions,
        replication_factor=config.replication_factor,
        min_insync_replicas=config.min_insync_replicas,
        security=config.security,
    )
    base_settings = dataclasses.replace(ours_settings, topic_prefix=f"{prefix}base.")
    shoe_key = ShoeSeal.new_key_hex()
    emit(_setup_line(config, prefix))
    compute_strategy(config.rules())  # before any clock starts
    created = [ours_settings]
    proven = False
    try:
        await ensure_topics(ours_settings, Topics(prefix))
        ours = await run_ours(config, ours_settings, shoe_key)
        figures = {**ours.phase.figures(), "tables_stopped": len(ours.stopped)}
        emit({"kind": "run", "variant": config.variant, **figures})
        measured_from = len(ours.sent) - ours.phase.commands
        baseline: Phase | None = None
        if config.baseline:
            created.append(base_settings)
            await ensure_topics(base_settings, Topics(base_settings.topic_prefix))
            baseline, echo_check = await run_baseline(
                config, base_settings, ours.sent, measured_from
            )
            emit({"kind": "baseline", **baseline.figures(), "echo": echo_check})
        back = await read_back(ours_settings, shoe_key)
        proof = prove(
            ours.sent,
            command_records=back.commands,
            results=back.results,
            events=back.events,
            handler_states=ours.handler_states,
            views=ours.views,
            rounds=config.rounds,
            answers_per_record=back.answers_per_record,
        )
        proof.problems[:0] = ours.stopped
        emit(proof.line())
        proven = proof.ok
    finally:
        # A run that did not prove its log keeps it (named in the setup line) for a look.
        if proven and not config.keep_topics:
            await remove_topics(created)
        elif not proven:
            print(f"blackjack loadtest: the run's topics are kept: {prefix}*", file=sys.stderr)
    summary = _summary(config, ours.phase, baseline, ok=proof.ok)
    summary["topics_kept"] = None if proven and not config.keep_topics else prefix
    emit(summary)
    return summary


def _setup_line(config: LoadConfig, prefix: str) -> dict[str, Any]:
    """What the run is: its line before any figure."""
    return {
        "kind": "setup",
        "variant": config.variant,
        "tables": config.tables,
        "rounds": config.rounds,
        "bet": config.stake(),
        "in_flight_per_table": 1,
        "partitions": config.partitions,
        "replication_factor": config.replication_factor,
        "min_insync_replicas": config.min_insync_replicas,
        "bootstrap": config.bootstrap,
        "security": _security(config.security),
        "batch_bytes": config.batch_bytes,
        "linger_ms": config.linger_ms,
        "topic_prefix": prefix,
        "handler": "in-process CommandHandler",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }


def _summary(
    config: LoadConfig, ours: Phase, baseline: Phase | None, *, ok: bool
) -> dict[str, Any]:
    """The run's last line: our figures, the baseline's and the ratios, and the proof's verdict."""
    figures = ours.figures()
    summary: dict[str, Any] = {
        "kind": "summary",
        "variant": config.variant,
        "tables": config.tables,
        "rounds": config.rounds,
        "ok": ok,
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
    return summary


async def remove_topics(spaces: Sequence[KafkaSettings]) -> None:
    """Delete the run's topics (all on one cluster, reached the same way) and wait until the
    broker no longer lists them (a deletion reaches the metadata a moment after it is
    accepted; Kafka has nothing to await)."""
    names: set[str] = set()
    for settings in spaces:
        topics = Topics(settings.topic_prefix)
        names.update(topics.all())
        with contextlib.suppress(Exception):
            await delete_topics(settings, topics)
    admin = AIOKafkaAdminClient(**spaces[0].client_options(), client_id="loadtest-admin")
    await admin.start()
    try:
        deadline = time.monotonic() + DELETE_TIMEOUT_S
        while names & set(await admin.list_topics()) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def _security(security: KafkaSecurity) -> str:
    """How the run connected, for its setup line: the protocol (and SASL mechanism)."""
    if security.sasl:
        return f"{security.protocol} {security.sasl_mechanism}"
    return security.protocol


def _ratio(ours: float, baseline: float) -> float:
    return round(ours / baseline, 3) if baseline else math.nan
