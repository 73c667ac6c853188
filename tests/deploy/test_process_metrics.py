"""What each kind of process exports from the moment it starts, as Prometheus first sees it.

A handler pod and a projection worker are separate processes: an alert that looks for one of
them must look for something only that one exports, and an alert that fires on the first
``increase()`` of a counter needs the series to exist at 0 before that first increment (a
series born at 1 has no increase). Each process is built here in a fresh interpreter, so that
what another test imported cannot hide a metric the real process lacks. The handler is
started against an address where no broker listens, so that the group never assigns it a
partition: its series must exist before any assignment (a handler that reaches Kafka but is
never given a partition is what BlackjackNoPartitionReady is for; one that cannot reach Kafka
at all waits at its start, exporting these series meanwhile).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from typing import Any

from blackjack.domain.commands import COMMAND_TYPES
from blackjack.domain.wallet import WALLET_COMMAND_TYPES
from blackjack.messages.envelope import type_name
from tests.deploy.test_deploy_artifacts import parse, rules

Sample = tuple[str, dict[str, str], float]

_EXPORTS = """
import asyncio, json, sys
import structlog
from prometheus_client import REGISTRY

structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout: the JSON

if sys.argv[1] == "handler":
    from blackjack.app import build_app
    from blackjack.command_handler.config import HandlerConfig

    env = {"BLACKJACK_SHOE_KEY": "ab" * 32, "BLACKJACK_KAFKA_BOOTSTRAP": "127.0.0.1:9",
           "BLACKJACK_PARTITIONS": "7"}
    handler = build_app(HandlerConfig.from_env(env)).handler  # `serve --no-projections`

    async def start() -> None:
        try:  # no broker there: the start waits for one, the metrics are there meanwhile
            await asyncio.wait_for(handler.start(), 1)
        except TimeoutError:
            print("waiting for a broker", file=sys.stderr)

    asyncio.run(start())
else:
    from blackjack.projections.health import FoldHealth
    from blackjack.projection_worker.settings import ProjectionSettings
    from blackjack.projections.store import ProjectionStore
    from blackjack.projection_worker.worker import build_broker, http_app
    from blackjack.projections.writer import ProjectionWriter

    store = ProjectionStore("sqlite+aiosqlite://")
    build_broker(ProjectionSettings(), ProjectionWriter(store))  # what `projections run` runs
    http_app(store, FoldHealth(10))  # and with --http
samples = [
    (s.name, s.labels, s.value)
    for family in REGISTRY.collect()
    for s in family.samples
    if s.name.startswith("blackjack_")
]
print(json.dumps(samples))
"""


def exports(role: str) -> list[Sample]:
    done = subprocess.run(
        [sys.executable, "-c", _EXPORTS, role],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [(name, labels, value) for name, labels, value in json.loads(done.stdout)]


def value_of(samples: list[Sample], name: str, **labels: str) -> float | None:
    for sample_name, sample_labels, value in samples:
        if sample_name == name and labels.items() <= sample_labels.items():
            return value
    return None


COMMAND_TYPE_NAMES = [type_name(kind) for kind in (*COMMAND_TYPES, *WALLET_COMMAND_TYPES)]
_INCREASE = re.compile(r"increase\(\s*([a-z_:]+_total(?:\{[^}]*\})?)")  # of a counter
_ALTERNATION = re.compile(r"[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*")


def first_increment_series(alert: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """Every series an alert on ``increase(...)`` must see at 0 to fire on its first
    increment: each combination of its matchers' alternatives, and each command type when it
    reports per type."""
    wanted = []
    by_type = any("type" in labels for keyword, labels in parse(alert["expr"]).grouping)
    for selector in _INCREASE.findall(alert["expr"]):
        [(metric, matchers)] = parse(selector).selectors
        choices: dict[str, list[str]] = {}
        for label, op, value in matchers:
            assert op in ("=", "=~") and _ALTERNATION.fullmatch(value), (alert["alert"], value)
            choices[label] = value.split("|")
        if by_type and "type" not in choices:
            choices["type"] = COMMAND_TYPE_NAMES
        for combination in itertools.product(*choices.values()):
            wanted.append((metric, dict(zip(choices, combination, strict=True))))
    return wanted


def handler_alerts() -> list[dict[str, Any]]:
    [group] = [g for g in rules()["groups"] if g["name"] == "blackjack.handler"]
    return [rule for rule in group["rules"] if "alert" in rule]


def test_a_handler_exports_its_role_and_every_series_its_alerts_read_before_kafka() -> None:
    samples = exports("handler")
    assert value_of(samples, "blackjack_process_role", role="handler") == 1
    assert value_of(samples, "blackjack_process_role", role="projections") is None
    # not the worker's metrics: a handler pod must not look like a projection worker
    assert not [s for s in samples if s[0].startswith("blackjack_projection_")]
    # nor the platforms' clients' (blackjack.client): the dashboard shows them from the
    # platforms' processes
    assert not [s for s in samples if s[0].startswith("blackjack_client_")]
    # the partition gauges exist before any assignment, so "none ready" is 0, not absent
    for status in ("pending", "ready", "failed", "fenced"):
        assert value_of(samples, "blackjack_partitions", status=status) == 0, status
    assert value_of(samples, "blackjack_command_partitions") == 7
    wanted = [series for alert in handler_alerts() for series in first_increment_series(alert)]
    assert len(wanted) > len(COMMAND_TYPE_NAMES)  # the checker found the alerts' series
    missing = [(name, labels) for name, labels in wanted if value_of(samples, name, **labels) != 0]
    assert missing == []


def test_the_first_increment_checker_expands_alternatives_and_types() -> None:
    alert = {
        "alert": "X",
        "expr": 'sum by (namespace, type) (increase(blackjack_commands_total{code=~"a|b"}[5m]))',
    }
    wanted = first_increment_series(alert)
    assert len(wanted) == 2 * len(COMMAND_TYPE_NAMES)
    assert ("blackjack_commands_total", {"code": "b", "type": "Hit"}) in wanted


def test_a_projection_worker_exports_its_role_and_not_the_handlers_metrics() -> None:
    samples = exports("projections")
    assert value_of(samples, "blackjack_process_role", role="projections") == 1
    assert value_of(samples, "blackjack_process_role", role="handler") is None
    # its own series, and the game performance it folds (docs/operations.md)
    games = ("blackjack_rounds_closed_", "blackjack_wagered_", "blackjack_paid_")
    foreign = [
        name
        for name, _, _ in samples
        if not name.startswith(("blackjack_projection_", "blackjack_process_role", *games))
    ]
    assert foreign == []
    assert value_of(samples, "blackjack_projection_failed_batches_total") == 0
    # each preset's game series at 0 before any round: a restart's first round is an increase
    labels = {"variant": "surrender", "currency": "USD"}
    assert value_of(samples, "blackjack_wagered_minor_units_total", **labels) == 0
    assert value_of(samples, "blackjack_rounds_closed_total", **labels, outcome="settled") == 0
    # BlackjackQueryApiFailing's first failure: an increase from 0, not a series born at 1
    for status in ("500", "503"):
        assert value_of(samples, "blackjack_projection_api_requests_total", status=status) == 0
