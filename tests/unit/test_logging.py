"""FastStream's brokers log through the service's JSON handler, without the warning that
would send an operator looking for topics the service creates itself."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import structlog

from blackjack.observability.logging import (
    ExplainedRetries,
    LibraryRepeats,
    RoutineRebalanceCommits,
    configure_logging,
    faststream_logger,
)
from blackjack.projection_worker import worker
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter


def test_the_projection_broker_logs_through_the_service_logger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    given: dict[str, Any] = {}

    class Recording(worker._FoldBroker):
        def __init__(self, *args: Any, **options: Any) -> None:
            given.update(options)
            super().__init__(*args, **options)

    monkeypatch.setattr(worker, "_FoldBroker", Recording)
    store = ProjectionStore("sqlite+aiosqlite://")
    worker.build_broker(ProjectionSettings(), ProjectionWriter(store))
    assert given["logger"] is faststream_logger()


def test_faststream_logs_are_json_lines_without_its_noise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("INFO")
    try:
        logger = faststream_logger()
        logger.warning("Auto create topics is disabled. Make sure the topics exist.")
        logger.info("callback for Task-111 is being executed...")  # a two-instance review
        logger.info("FastStream app started successfully! To exit, press CTRL+C")
        logger.info("subscriber started")
        lines = capsys.readouterr().out.splitlines()
    finally:  # configure_logging is global: leave the other tests as they were
        logging.getLogger().handlers[:] = handlers
        logging.getLogger().setLevel(level)
        structlog.reset_defaults()
    assert [json.loads(line)["event"] for line in lines] == ["subscriber started"]


def test_a_library_repeating_itself_is_let_through_once_every_ten_seconds() -> None:
    now = [0.0]
    repeats = LibraryRepeats(every=10.0, clock=lambda: now[0])

    def attempt(name: str = "aiokafka.conn", node: int = 1) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, "x", 1, "Unable connect to %r", (node,), None)

    assert repeats.filter(attempt())
    left_out = [repeats.filter(attempt(node=n % 3)) for n in range(350)]
    assert not any(left_out)  # every node's attempt is the same message
    assert repeats.filter(attempt("blackjack.handler"))  # the service's own: never held back
    now[0] = 10.0
    passed = attempt()
    assert repeats.filter(passed)
    assert passed.getMessage() == "Unable connect to 1 (350 more like it left out since the last)"
    assert not repeats.filter(attempt())


def test_a_transaction_verification_retry_says_it_is_not_lost_replicas() -> None:
    template = "Got error produce response on topic-partition %s, retrying. Error: %s"

    def retry(error: str) -> logging.LogRecord:
        args = ("TopicPartition(topic='blackjack.events', partition=2)", error)
        return logging.LogRecord(
            "aiokafka.producer.sender", logging.WARNING, "x", 1, template, args, None
        )

    explained = retry("<class 'aiokafka.errors.NotEnoughReplicasError'>")
    assert ExplainedRetries().filter(explained)
    assert "transaction verification" in explained.getMessage()
    assert "partition=2" in explained.getMessage()
    other = retry("<class 'aiokafka.errors.NotLeaderForPartitionError'>")
    assert ExplainedRetries().filter(other) and other.getMessage().endswith("Error'>")


def test_one_kind_of_produce_retry_does_not_hide_another() -> None:
    """The diff review: every produce retry shares aiokafka's template, so the steady
    verification retries used the one line let through every 10 s and real errors in
    between were only counted on that line (and explained as verification)."""
    from aiokafka.errors import NotEnoughReplicasError, NotLeaderForPartitionError

    now = [0.0]
    repeats = LibraryRepeats(every=10.0, clock=lambda: now[0])
    template = "Got error produce response on topic-partition %s, retrying. Error: %s"

    def retry(error: type) -> logging.LogRecord:
        return logging.LogRecord(
            "aiokafka.producer.sender", logging.WARNING, "x", 1, template, ("tp", error), None
        )

    assert repeats.filter(retry(NotEnoughReplicasError))
    assert repeats.filter(retry(NotLeaderForPartitionError))  # another kind: let through
    assert not repeats.filter(retry(NotLeaderForPartitionError))
    assert not repeats.filter(retry(NotEnoughReplicasError))


def test_errors_given_as_instances_or_messages_are_told_apart_too() -> None:
    """aiokafka names most errors by an instance, and a produce retry by the broker's message
    when it sends one (``global_error or error``)."""
    repeats = LibraryRepeats(every=10.0, clock=lambda: 0.0)

    def line(error: object) -> logging.LogRecord:
        return logging.LogRecord(
            "aiokafka.consumer", logging.ERROR, "x", 1, "Error: %s", (error,), None
        )

    assert repeats.filter(line(ConnectionError("down")))
    assert repeats.filter(line(TimeoutError("slow")))  # another kind
    assert not repeats.filter(line(TimeoutError("slower")))  # the same kind
    assert repeats.filter(line("Unable to verify the partition"))
    assert not repeats.filter(line("Unable to verify the partition"))


def test_uvicorn_refusing_requests_by_the_thousand_logs_once_every_ten_seconds() -> None:
    """uvicorn logs every request it cannot read (a client sending garbage in a loop)."""
    now = [0.0]
    repeats = LibraryRepeats(every=10.0, clock=lambda: now[0])

    def refused() -> logging.LogRecord:
        return logging.LogRecord(
            "uvicorn.error", logging.WARNING, "x", 1, "Invalid HTTP request received.", (), None
        )

    assert repeats.filter(refused())
    assert not any(repeats.filter(refused()) for _ in range(1000))
    now[0] = 10.0
    passed = refused()
    assert repeats.filter(passed)
    assert passed.getMessage().endswith("(1000 more like it left out since the last)")


def test_a_projection_workers_http_server_logs_through_the_json_handler(tmp_path: Path) -> None:
    """``projections run --http``: uvicorn's own text handlers (its default log_config)
    wrote its lines as text beside the JSON ones, as ``serve`` does not."""
    from blackjack.projections.health import FoldHealth
    from blackjack.projections.store import ProjectionStore

    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    server = worker._http_server(store, FoldHealth(), ProjectionSettings(), "127.0.0.1", 8080)
    assert server.config.log_config is None


def test_a_group_commit_a_rebalance_overtook_is_a_warning_not_an_error() -> None:
    template = "OffsetCommit failed for group %s due to group error (%s), will rejoin"

    def failed(error: str, msg: str = template) -> logging.LogRecord:
        return logging.LogRecord(
            "aiokafka.consumer.group_coordinator",
            logging.ERROR,
            "x",
            1,
            msg,
            ("p.blackjack-projections", error),
            None,
        )

    routine = failed("[Error 22] IllegalGenerationError: p.blackjack-projections")
    assert RoutineRebalanceCommits().filter(routine)
    assert (routine.levelno, routine.levelname) == (logging.WARNING, "WARNING")
    assert "routine at a rebalance" in routine.getMessage()
    refused = failed("GroupAuthorizationFailedError", "OffsetCommit failed for group %s - %s")
    assert RoutineRebalanceCommits().filter(refused) and refused.levelno == logging.ERROR
    # the error's own name decides, not a group id that happens to hold one
    named = logging.LogRecord(
        "aiokafka.consumer.group_coordinator",
        logging.ERROR,
        "x",
        1,
        "OffsetCommit failed for group %s on partition %s with offset %s: %s",
        ("IllegalGenerationError-tests", "tp", 7, "UnknownError"),
        None,
    )
    assert RoutineRebalanceCommits().filter(named) and named.levelno == logging.ERROR
