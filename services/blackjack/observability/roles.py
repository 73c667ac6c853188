"""Which parts of the service a process runs, for the alerts that notice one missing.

A handler-only pod and a projection worker import different metric modules, but a family that
both happened to import would be exported by both; the absence alerts therefore look for this
gauge, which only a process that really runs that part sets.
"""

from __future__ import annotations

from typing import Literal

from prometheus_client import Gauge

Role = Literal["handler", "projections"]

ROLE = Gauge(
    "blackjack_process_role",
    "1 for each part of the service this process runs: handler, projections",
    ["role"],
)


def declare_role(role: Role) -> None:
    ROLE.labels(role).set(1)
