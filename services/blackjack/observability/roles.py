"""What the alerts need to know about a process: which parts of the service it runs, and the
memory it may use.

Every metric lives in prometheus-client's one global registry, and a process imports more
modules than the parts it runs (a projection worker imports the handler's metrics through the
modules they share), so each part's families are claimed by its role (``claim``) and a
process's ``/metrics`` serves only the families of the roles it runs (``RoleView``), with the
shared ones (the role gauge, the memory limit, when Kafka last answered, the start step
waited on) and prometheus-client's process and Python collectors. (Before, a projection
worker exported the handler's families at 0.) The absence alerts look for the role gauge,
which only a process that really runs that part sets. The memory limit (the container's
cgroup limit, read once at start) lets an alert compare prometheus-client's
``process_resident_memory_bytes`` with it without kube-state-metrics.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Literal, Protocol

from prometheus_client import REGISTRY, Gauge
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

Role = Literal["handler", "projections"]

ROLE = Gauge(
    "blackjack_process_role",
    "1 for each part of the service this process runs: handler, projections",
    ["role"],
)
# Labelled by where the figure comes from, so that a process without a limit exports no
# series at all (an unlabelled gauge would export 0, and RSS / 0 is an alert).
MEMORY_LIMIT = Gauge(
    "blackjack_memory_limit_bytes",
    "The memory this process's container may use (its cgroup limit); absent when unlimited",
    ["source"],
)

# Set at each answer of the brokers to a request the process makes every 15 s whatever its
# traffic (a handler's backlog measurement, a worker's read of its group's offsets), by role:
# no series until the first answer (not at the start: a worker waits for its database before
# it asks the brokers anything, and a gauge set at the start aged into a Kafka alert while the
# database was what was down). While the brokers are away nothing else shows it: a handler
# keeps its partitions ready and its backlog at the last figure it measured.
KAFKA_ANSWERED = Gauge(
    "blackjack_kafka_answered_timestamp_seconds",
    "When Kafka last answered this process's periodic request (Unix time), by the part that "
    "asked: a handler measuring its backlog, a projection worker reading its group's offsets",
    ["role"],
)

# Set as a start step begins and removed when it ends, however it ends: a series only while a
# process waits on it (the brokers, the database, ...), so that one that never gets past its
# start, which has no Kafka-answered series yet, is seen and alerted on by the step it waits on.
START_WAITING = Gauge(
    "blackjack_start_waiting_since_timestamp_seconds",
    "When this process's start began the step it waits on (Unix time), by step: kafka, topics, "
    "read model, app broker, handler, projections; no series once started",
    ["step"],
)

# cgroup v2, then v1; v1 reports "no limit" as a number near 2^63
CGROUP_LIMITS = {
    "cgroup2": Path("/sys/fs/cgroup/memory.max"),
    "cgroup1": Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
}
UNLIMITED_FROM = 2**60


def declare_role(role: Role) -> None:
    ROLE.labels(role).set(1)
    found = memory_limit()
    if found is not None:
        source, limit = found
        MEMORY_LIMIT.labels(source).set(limit)


def kafka_answered(role: Role) -> None:
    """The brokers answered ``role``'s periodic request just now."""
    KAFKA_ANSWERED.labels(role).set(time.time())


@contextlib.contextmanager
def waiting_on(step: str) -> Iterator[None]:
    """The process's start waits on ``step`` within the block (a failure or a stop ends the
    wait as much as the step's end)."""
    START_WAITING.labels(step).set(time.time())
    try:
        yield
    finally:
        START_WAITING.remove(step)


def memory_limit(files: dict[str, Path] = CGROUP_LIMITS) -> tuple[str, int] | None:
    """Where the cgroup memory limit was read and its bytes, or None when there is none."""
    for source, file in files.items():
        try:
            text = file.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < UNLIMITED_FROM:
            return source, int(text)
        return None  # "max", or v1's unlimited
    return None


OWNERS: dict[str, Role] = {}
"""Each claimed metric family's name (as ``collect()`` names it: a counter without
``_total``) and the role that exports it."""


def claim(role: Role, namespace: Mapping[str, object]) -> None:
    """The metrics among ``namespace``'s values (a module's ``globals()``) are ``role``'s:
    served only by a process that runs it."""
    for value in namespace.values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                OWNERS[family.name] = role


class _Collecting(Protocol):
    def collect(self) -> Iterable[Metric]: ...


class RoleView:
    """What a process running ``roles`` exports of ``registry``: every family but those
    claimed by another role. Served with prometheus-client's ``generate_latest`` or
    ``make_asgi_app``, as a registry."""

    def __init__(self, roles: Collection[Role], registry: _Collecting = REGISTRY) -> None:
        self.roles = frozenset(roles)
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        for family in self.registry.collect():
            owner = OWNERS.get(family.name)
            if owner is None or owner in self.roles:
                yield family

    def restricted_registry(self, names: Collection[str]) -> RoleView:
        """``/metrics?name[]=...`` (``make_asgi_app``): only those samples, of the same view."""
        return RoleView(self.roles, REGISTRY.restricted_registry(names))
