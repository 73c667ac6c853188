"""The figures of a phase: commands, latencies and their percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in (0, 1]); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Phase:
    """What one phase measured: commands sent in the measured part, their latencies (s)."""

    commands: int = 0
    rounds: int = 0
    latencies: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    transactions: float = 0.0
    transaction_s: float = 0.0

    def figures(self) -> dict[str, Any]:
        wall = self.wall_s or math.nan
        return {
            "commands": self.commands,
            "rounds": self.rounds,
            "seconds": round(self.wall_s, 3),
            "cpu_seconds": round(self.cpu_s, 3),
            "commands_per_second": round(self.commands / wall, 1),
            "rounds_per_second": round(self.rounds / wall, 2),
            "latency_ms": {
                name: round(1000 * percentile(self.latencies, q), 2)
                for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
            },
            "transactions": int(self.transactions),
            "commands_per_transaction": round(self.commands / (self.transactions or math.nan), 1),
            "mean_transaction_ms": round(
                1000 * self.transaction_s / (self.transactions or math.nan), 2
            ),
        }
