"""What the alerts need to know about a process: which parts of the service it runs, and the
memory it may use.

A handler-only pod and a projection worker import different metric modules, but a family that
both happened to import would be exported by both; the absence alerts therefore look for the
role gauge, which only a process that really runs that part sets. The memory limit (the
container's cgroup limit, read once at start) lets an alert compare prometheus-client's
``process_resident_memory_bytes`` with it without kube-state-metrics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from prometheus_client import Gauge

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
# no series until the first answer. While the brokers are away nothing else shows it: a
# handler keeps its partitions ready and its backlog at the last figure it measured.
KAFKA_ANSWERED = Gauge(
    "blackjack_kafka_answered_timestamp_seconds",
    "When Kafka last answered this process's periodic request (Unix time), by the part that "
    "asked: a handler measuring its backlog, a projection worker reading its group's offsets",
    ["role"],
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
