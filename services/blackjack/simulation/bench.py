"""``blackjack bench``: simulated rounds per second on ONE core through the real decider.

Each measurement is one process (this one) playing rounds with ``simulation.player.play`` --
``table.apply`` -> ``domain.decide`` with the computed basic strategy, the same path as
``blackjack simulate`` -- for about ``--seconds`` of CPU time; ``--repeats`` measurements per
variant, and the median is reported. The strategy is computed (and cached) before the clock starts.
The rate is rounds per CPU-second of this process (``time.process_time``), i.e. per busy core: on a
shared machine the time the process spends waiting for a core is not counted against it (the wall
clock rate is printed too).

On a shared machine an absolute figure still says little, so ``--baseline-cmd`` takes a shell
command that prints a rounds-per-second figure as its last line (e.g. a wrapper around another
simulator that counts CPU time the same way; ``{seconds}`` and ``{variant}`` in it are replaced
by ``--seconds`` and the preset's name, so the wrapper can set the other simulator up alike);
each repeat then runs the baseline and ours back to back, alternating which goes first, and the
median of the per-repeat ratios ours/baseline is reported. ``--profile`` adds the top cProfile
entries (by own time) of our loop.

Every line printed is one JSON object with a ``kind``: ``setup``, ``run``, ``summary``,
``profile``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from blackjack.domain.rules import PRESETS, Rules, preset
from blackjack.simulation.digest import compiled_modules

CHUNK_ROUNDS = 500  # rounds per ``play`` call; each call opens a fresh table with a fresh shoe
PROFILE_TOP = 15
_Number = TypeVar("_Number", int, float)


@dataclass(frozen=True)
class Run:
    rounds: int
    cpu_seconds: float
    wall_seconds: float

    @property
    def rate(self) -> float:
        """Rounds per CPU-second: what one core does when it is ours."""
        return self.rounds / self.cpu_seconds

    @property
    def wall_rate(self) -> float:
        return self.rounds / self.wall_seconds


Player = Callable[[int, int], int]
"""``(rounds, seed) -> rounds played``: one call of the real simulator loop."""


def _player_for(rules: Rules) -> Player:
    from blackjack.simulation.player import play
    from blackjack.strategy import compute_strategy

    strategy = compute_strategy(rules)  # before any clock starts

    def run(rounds: int, seed: int) -> int:
        return play(rules, strategy, rounds, rules.min_bet, seed).rounds

    run(50, 0)  # warm-up: imports, caches, the first shoe
    return run


def measure(player: Player, seconds: float, seed: int) -> Run:
    """Play chunks of rounds until ``seconds`` of CPU time have passed; every round counts."""
    rounds = 0
    chunk = 0
    wall = time.perf_counter()
    cpu = time.process_time()
    while True:
        rounds += player(CHUNK_ROUNDS, seed * 1_000_003 + chunk)
        chunk += 1
        used = time.process_time() - cpu
        if used >= seconds:
            return Run(rounds=rounds, cpu_seconds=used, wall_seconds=time.perf_counter() - wall)


def run_baseline(command: str, seconds: float, variant: str) -> float:
    """Run the baseline's shell command; its last non-empty output line is its rounds/s."""
    shell_command = command.replace("{seconds}", f"{seconds:g}").replace("{variant}", variant)
    done = subprocess.run(shell_command, shell=True, capture_output=True, text=True, check=False)
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"baseline command failed (exit {done.returncode}): {shell_command}\n{done.stderr}"
        )
    try:
        return float(lines[-1].replace(",", ""))
    except ValueError:
        raise SystemExit(f"baseline's last line is not a number: {lines[-1]!r}") from None


def _emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def bench_variant(
    rules: Rules, seconds: float, repeats: int, seed: int, baseline: str | None
) -> dict[str, Any]:
    player = _player_for(rules)
    ours: list[float] = []
    theirs: list[float] = []
    ratios: list[float] = []
    for repeat in range(repeats):
        line: dict[str, Any] = {"kind": "run", "variant": rules.name, "repeat": repeat + 1}
        if baseline is None:
            run = measure(player, seconds, seed + repeat)
        elif repeat % 2 == 0:  # alternate the order so that a drifting load hits both sides
            other = run_baseline(baseline, seconds, rules.name)
            run = measure(player, seconds, seed + repeat)
        else:
            run = measure(player, seconds, seed + repeat)
            other = run_baseline(baseline, seconds, rules.name)
        ours.append(run.rate)
        line["rounds"] = run.rounds
        line["cpu_seconds"] = round(run.cpu_seconds, 3)
        line["rounds_per_second"] = round(run.rate)
        line["wall_rounds_per_second"] = round(run.wall_rate)
        if baseline is not None:
            theirs.append(other)
            ratios.append(run.rate / other)
            line["baseline_rounds_per_second"] = round(other)
            line["ratio"] = round(run.rate / other, 4)
        _emit(line)
    summary: dict[str, Any] = {
        "kind": "summary",
        "variant": rules.name,
        "repeats": repeats,
        "median_rounds_per_second": round(_median(ours)),
        "min_rounds_per_second": round(min(ours)),
        "max_rounds_per_second": round(max(ours)),
    }
    if baseline is not None:
        summary["median_baseline_rounds_per_second"] = round(_median(theirs))
        summary["median_ratio"] = round(_median(ratios), 4)
        summary["min_ratio"] = round(min(ratios), 4)
        summary["max_ratio"] = round(max(ratios), 4)
    _emit(summary)
    return summary


def _where(path: str) -> str:
    """A short name for a profiled function's file."""
    for marker in ("/services/", "/site-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return Path(path).name if path.startswith("/") else path


def profile_variant(rules: Rules, seconds: float, seed: int, top: int = PROFILE_TOP) -> None:
    player = _player_for(rules)
    profiler = cProfile.Profile()
    profiler.enable()
    run = measure(player, seconds, seed)
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    ranked = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for rank, ((path, line_no, name), (_, calls, own, cumulative, _)) in enumerate(ranked, 1):
        function = f"{_where(path)}:{line_no}({name})" if line_no else name
        _emit(
            {
                "kind": "profile",
                "variant": rules.name,
                "rank": rank,
                "function": function,
                "calls_per_round": round(calls / run.rounds, 3),
                "tottime_seconds": round(own, 4),
                "tottime_percent": round(100 * own / total, 2) if total else 0.0,
                "cumtime_seconds": round(cumulative, 4),
            }
        )


def _bench(args: argparse.Namespace) -> int:
    variants: list[str] = args.variant or list(PRESETS)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    _emit(
        {
            "kind": "setup",
            "variants": variants,
            "seconds": args.seconds,
            "repeats": args.repeats,
            "seed": args.seed,
            "baseline_cmd": args.baseline_cmd,
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in load] if load else None,
            "processes": 1,
            # A mypyc build (make bench-compiled) lists its C extension modules here.
            "compiled_modules": compiled_modules(),
        }
    )
    for name in variants:
        bench_variant(preset(name), args.seconds, args.repeats, args.seed, args.baseline_cmd)
    if args.profile:
        for name in variants:
            profile_variant(preset(name), args.seconds, args.seed)
    return 0


def _positive(kind: Callable[[str], _Number]) -> Callable[[str], _Number]:
    def parse(text: str) -> _Number:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text}")
        return value

    return parse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(
        "bench", help="simulated rounds per second on one core through the real decider"
    )
    bench.add_argument(
        "--variant",
        action="append",
        choices=sorted(PRESETS),
        metavar="VARIANT",  # not the choices: a usage line of 98 columns
        help=f"a preset to measure (repeatable; default: all of them): "
        f"{', '.join(sorted(PRESETS))}",
    )
    bench.add_argument(
        "--seconds", type=_positive(float), default=3.0, help="CPU seconds per measurement"
    )
    bench.add_argument("--repeats", type=_positive(int), default=5, help="measurements per variant")
    bench.add_argument("--seed", type=int, default=1, help="default 1")
    bench.add_argument(
        "--baseline-cmd",
        default=None,
        help="shell command printing rounds/s as its last line ({seconds} and {variant} are "
        "substituted); run interleaved with ours to report the ratio ours/baseline",
    )
    bench.add_argument(
        "--profile", action="store_true", help=f"also the top {PROFILE_TOP} cProfile entries"
    )
    bench.set_defaults(handler=_bench)
