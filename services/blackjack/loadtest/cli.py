"""``blackjack loadtest`` on the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TextIO

from blackjack.arguments import wait_seconds
from blackjack.bus.settings import BOOTSTRAP_HELP, KafkaSecurity, KafkaSettings
from blackjack.client import PRODUCER_BATCH_BYTES
from blackjack.domain.rules import preset
from blackjack.loadtest.config import SINGLE_PLAYER_PRESETS, Emit, LoadConfig
from blackjack.loadtest.run import run_loadtest
from blackjack.simulation.commands import bet_outside_limits, money

LOCAL_BROKER = shlex.quote(
    str(Path(__file__).resolve().parents[3] / "deploy" / "kafka" / "kafka.sh")
)
"""The script that runs the local broker (KAFKA_PORT and the rest from the environment)."""


def _emit_line(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def quiet_logs(sink: TextIO) -> None:
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


def _replicas_refused(args: argparse.Namespace, command: str) -> bool:
    """Whether the replicas asked for cannot be (said on stderr): refused before any topic."""
    if args.min_insync_replicas <= args.replication_factor:
        return False
    print(
        f"blackjack {command}: --min-insync-replicas is at most --replication-factor",
        file=sys.stderr,
    )
    return True


def _loadtest(args: argparse.Namespace) -> int:
    if _replicas_refused(args, "loadtest"):
        return 2
    refusal = None if args.bet is None else bet_outside_limits(preset(args.variant), args.bet)
    if refusal is not None:  # every table's first bet would be refused: nothing to measure
        print(f"blackjack loadtest: --bet: {refusal}", file=sys.stderr)
        return 2
    config = LoadConfig(
        bootstrap=args.bootstrap,
        tables=args.tables,
        rounds=args.rounds,
        variant=args.variant,
        bet=args.bet,
        partitions=args.partitions,
        baseline=not args.no_baseline,
        timeout_s=args.timeout,
        keep_topics=args.keep_topics,
        # as the service and every other client command: from BLACKJACK_KAFKA_SECURITY_PROTOCOL
        # and the rest, never a flag (a password on a command line is in ps and the history)
        security=KafkaSecurity.from_env(),
        batch_bytes=args.batch_bytes,
        linger_ms=args.linger_ms,
        replication_factor=args.replication_factor,
        min_insync_replicas=args.min_insync_replicas,
    )
    return _reported(args, lambda emit: run_loadtest(config, emit))


def _reported(
    args: argparse.Namespace, run: Callable[[Emit], Coroutine[Any, Any, dict[str, Any]]]
) -> int:
    """Run with the handlers' log in ``--handler-log`` and the JSON lines on stdout; 0 when
    the summary is ok."""
    with open(args.handler_log or os.devnull, "a") as sink:
        quiet_logs(sink)
        summary = asyncio.run(run(_emit_line))
    return 0 if summary["ok"] else 1


def _takeover(args: argparse.Namespace) -> int:
    from blackjack.loadtest.takeover import TakeoverConfig, run_takeover

    if _replicas_refused(args, "takeover"):
        return 2
    config = TakeoverConfig(
        bootstrap=args.bootstrap,
        tables=args.tables,
        partitions=args.partitions,
        restarts=args.restarts,
        settle_s=args.settle,
        keep_topics=args.keep_topics,
        security=KafkaSecurity.from_env(),  # as the load test's
        replication_factor=args.replication_factor,
        min_insync_replicas=args.min_insync_replicas,
    )
    return _reported(args, lambda emit: run_takeover(config, emit))


def local_listeners() -> tuple[str, str]:
    """The local broker's listeners, as ``deploy/kafka/kafka.sh`` opens them: PLAINTEXT on
    KAFKA_PORT (9092) and SASL_SSL on KAFKA_SASL_PORT (KAFKA_PORT + 2)."""
    port = os.environ.get("KAFKA_PORT", "9092")
    sasl = os.environ.get("KAFKA_SASL_PORT", "") or str(int(port) + 2)
    return f"127.0.0.1:{port}", f"127.0.0.1:{sasl}"


def _outage(args: argparse.Namespace) -> int:
    from blackjack.loadtest import outage

    local = local_listeners()
    defaults = args.stop_broker.startswith(LOCAL_BROKER) or args.start_broker.startswith(
        LOCAL_BROKER
    )
    if defaults and args.bootstrap not in local:
        print(
            f"blackjack outage: --bootstrap {args.bootstrap} is not the local broker "
            f"({' or '.join(local)}, KAFKA_PORT or KAFKA_SASL_PORT), which the default commands "
            "stop and start: give --stop-broker and --start-broker for it",
            file=sys.stderr,
        )
        return 2
    if _replicas_refused(args, "outage"):
        return 2
    config = outage.OutageConfig(
        bootstrap=args.bootstrap,
        stop_broker=args.stop_broker,
        start_broker=args.start_broker,
        tables=args.tables,
        partitions=args.partitions,
        outages=args.outages,
        down_s=args.down,
        settle_s=args.settle,
        keep_topics=args.keep_topics,
        security=KafkaSecurity.from_env(),  # as the load test's
        replication_factor=args.replication_factor,
        min_insync_replicas=args.min_insync_replicas,
    )
    try:
        return _reported(args, lambda emit: outage.run_outage(config, emit))
    except outage.BrokerCommandFailed as failed:  # the operator's command, not our code
        print(f"blackjack outage: {failed}", file=sys.stderr)
        return 2


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    load = sub.add_parser(
        "loadtest",
        help="the command handler under load on a real broker, against a bare transactional "
        "echo, and a proof that nothing was lost or done twice",
        description="Every client of the run (handler, players, echo) connects as the service "
        "does: TLS and SASL from BLACKJACK_KAFKA_SECURITY_PROTOCOL, BLACKJACK_KAFKA_SASL_* and "
        "BLACKJACK_KAFKA_SSL_* (PLAINTEXT when unset); see docs/load.md.",
    )
    load.add_argument("--tables", type=_positive, default=40, help="concurrent tables")
    load.add_argument("--rounds", type=_positive, default=50, help="rounds per table")
    load.add_argument(
        "--variant",
        choices=SINGLE_PLAYER_PRESETS,
        default="mini-h17",
        metavar="VARIANT",  # not the choices: a usage line of 81 columns
        help=f"a single-player preset: {', '.join(SINGLE_PLAYER_PRESETS)} (default mini-h17)",
    )
    load.add_argument(
        "--bet", type=money, default=None, help="bet per round, e.g. 5.00 (default: minimum)"
    )
    load.add_argument(
        "--timeout", type=wait_seconds, default=30.0, help="seconds to wait for a result"
    )
    load.add_argument("--no-baseline", action="store_true", help="skip the transactional echo")
    load.add_argument(
        "--batch-bytes",
        type=_positive,
        default=PRODUCER_BATCH_BYTES,
        help="max_batch_size of the clients' and the echo's producers (default: aiokafka's)",
    )
    load.add_argument(
        "--linger-ms",
        type=_not_negative,
        default=0,
        help="linger_ms of the clients' and the echo's producers (default 0)",
    )
    _on_a_broker(load)
    load.set_defaults(handler=_loadtest)
    takeover = sub.add_parser(
        "takeover",
        help="a rolling restart of two handlers under load: how long tables wait while one "
        "leaves and comes back, and a proof that nothing was lost or done twice",
    )
    takeover.add_argument("--tables", type=_positive, default=24, help="tables played at once")
    takeover.add_argument("--restarts", type=_positive, default=4, help="handler restarts")
    takeover.add_argument(
        "--settle", type=float, default=5.0, help="seconds played before and between restarts"
    )
    _on_a_broker(takeover)
    takeover.set_defaults(handler=_takeover)
    outage = sub.add_parser(
        "outage",
        help="the broker stopped and started again under load: how long tables wait, and a "
        "proof that nothing was lost or done twice (on a broker the given commands control)",
        description="Every client of the run (handlers, players, projection worker) connects "
        "as the service does: TLS and SASL from BLACKJACK_KAFKA_SECURITY_PROTOCOL, "
        "BLACKJACK_KAFKA_SASL_* and BLACKJACK_KAFKA_SSL_* (PLAINTEXT when unset); see "
        "docs/load.md.",
    )
    outage.add_argument("--tables", type=_positive, default=12, help="tables played at once")
    outage.add_argument("--outages", type=_positive, default=1, help="broker stops")
    outage.add_argument("--down", type=float, default=15.0, help="seconds the broker stays down")
    outage.add_argument(
        "--settle", type=float, default=5.0, help="seconds played before and after each outage"
    )
    outage.add_argument(
        "--stop-broker",
        default=f"{LOCAL_BROKER} down",
        help="shell command that stops the broker at --bootstrap (default: the local one)",
    )
    outage.add_argument(
        "--start-broker",
        default=f"{LOCAL_BROKER} up",
        help="shell command that starts it again and returns once it serves",
    )
    _on_a_broker(outage, partitions=3)
    outage.set_defaults(handler=_outage)


def _on_a_broker(parser: argparse.ArgumentParser, partitions: int = 6) -> None:
    """The options of a run in fresh topics of a real broker."""
    parser.add_argument(
        "--bootstrap",
        default=KafkaSettings.from_env().bootstrap,
        help=BOOTSTRAP_HELP,
    )
    parser.add_argument(
        "--partitions", type=_positive, default=partitions, help="partitions per topic"
    )
    parser.add_argument(
        "--replication-factor",
        type=_positive,
        default=1,
        help="replicas of the run's topics (3 on deploy/kafka/cluster.sh's three nodes)",
    )
    parser.add_argument(
        "--min-insync-replicas",
        type=_positive,
        default=1,
        help="the topics' min.insync.replicas (2 on those nodes: one may be down)",
    )
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the topics")
    parser.add_argument(
        "--handler-log", default=None, help="file for the handlers' JSON log (default: discarded)"
    )
