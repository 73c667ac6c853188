"""``blackjack loadtest`` in two settings, interleaved in pairs on one broker (docs/load.md):
what TLS and SASL cost, what larger producer batches change, or what a change of the code
cost.

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_loadtest_pairs tls \\
        [--pairs 4] [-- LOADTEST OPTIONS]
    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_loadtest_pairs batch \\
        --batch-bytes 1000000 [--linger-ms 0] [--pairs 4] [-- LOADTEST OPTIONS]
    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_loadtest_pairs build \\
        --a-services /tmp/old/services [--pairs 4] [-- LOADTEST OPTIONS]

``tls``: A = the broker's PLAINTEXT listener, B = its SASL_SSL one (the service's
``BLACKJACK_KAFKA_*`` settings, kafka.sh's dev user and CA). ``batch``: A = aiokafka's 16 KiB
batches and no linger, B = the given ones, on the clients' and the echo's producers alike.
``build``: A = the package in ``--a-services`` (the ``services`` folder of another checkout,
e.g. ``git worktree add /tmp/old COMMIT``), B = this checkout's; the same interpreter and
dependencies run both.
Each run is ``python -m blackjack.cli loadtest`` in a process of its own (as ``make load``);
the order alternates (A B, B A, A B, ...) so that a drift of the shared machine's load falls
on both. Printed: a JSON line per run, then per pair and as the median of the pairs, B / A of
ours' and the echo's commands per second and latency percentiles, and each side's ours / echo.
The broker is the tests' one (``tests/integration/infra.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.integration.infra import kafka_bootstrap, kafka_sasl

Run = dict[str, dict[str, Any]]
"""One run's JSON lines by kind (setup, run, baseline, proof, summary)."""


def settings(args: argparse.Namespace) -> tuple[tuple[str, dict[str, str], list[str]], ...]:
    """(name, environment, loadtest options) of A and B."""
    plain = kafka_bootstrap()
    if args.compare == "tls":
        listener = kafka_sasl()
        # the bootstrap goes by --bootstrap, as the PLAINTEXT run's
        secure = listener.service_env()
        del secure["BLACKJACK_KAFKA_BOOTSTRAP"]
        return (
            ("PLAINTEXT", {}, ["--bootstrap", plain]),
            ("SASL_SSL", secure, ["--bootstrap", listener.bootstrap]),
        )
    if args.compare == "build":
        here = str(Path(__file__).resolve().parents[2] / "services")
        return (
            (f"build {args.a_services}", {"PYTHONPATH": args.a_services}, ["--bootstrap", plain]),
            (f"build {here}", {"PYTHONPATH": here}, ["--bootstrap", plain]),
        )
    batch = ["--batch-bytes", str(args.batch_bytes), "--linger-ms", str(args.linger_ms)]
    return (
        ("16 KiB, linger 0", {}, ["--bootstrap", plain]),
        (f"{args.batch_bytes} B, linger {args.linger_ms}", {}, ["--bootstrap", plain, *batch]),
    )


def run_once(env: Mapping[str, str], options: Sequence[str]) -> Run:
    # only the security settings given: none of the caller's BLACKJACK_KAFKA_* leak into A
    base = {k: v for k, v in os.environ.items() if not k.startswith("BLACKJACK_KAFKA_")}
    done = subprocess.run(
        [sys.executable, "-m", "blackjack.cli", "loadtest", *options],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    lines = {one["kind"]: one for one in map(json.loads, done.stdout.splitlines())}
    if done.returncode != 0 or not lines.get("summary", {}).get("ok"):
        raise SystemExit(f"a run failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return lines


def figures(run: Run) -> dict[str, float]:
    ours, echo = run["run"], run["baseline"]
    return {
        "ours commands/s": ours["commands_per_second"],
        **{f"ours {p} ms": ours["latency_ms"][p] for p in ("p50", "p95", "p99")},
        "echo commands/s": echo["commands_per_second"],
        **{f"echo {p} ms": echo["latency_ms"][p] for p in ("p50", "p95", "p99")},
        "ours / echo, commands/s": run["summary"]["ratio_commands_per_second"],
        "ours cpu ms / command": 1000 * ours["cpu_seconds"] / ours["commands"],
    }


def report(names: tuple[str, str], pairs: Sequence[tuple[Run, Run]]) -> list[str]:
    """A table: per figure, A and B of each pair, B / A of each pair and its median."""
    rows = [f"| figure | {' | '.join(f'pair {i + 1}' for i in range(len(pairs)))} | median |"]
    rows.append("|---|" + "---:|" * (len(pairs) + 1))
    for key in figures(pairs[0][0]):
        a = [figures(one)[key] for one, _ in pairs]
        b = [figures(other)[key] for _, other in pairs]
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        for name, values in ((names[0], a), (names[1], b)):
            cells = " | ".join(f"{v:,.4g}" for v in values)
            rows.append(f"| {name}: {key} | {cells} | {statistics.median(values):,.4g} |")
        cells = " | ".join(f"x{r:.3f}" for r in ratios)
        rows.append(f"| **B / A**: {key} | {cells} | **x{statistics.median(ratios):.3f}** |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compare", choices=("tls", "batch", "build"))
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--batch-bytes", type=int, default=1_000_000)
    parser.add_argument("--linger-ms", type=int, default=0)
    parser.add_argument("--a-services", help="build: the services folder A runs")
    # after --: every run's options
    argv = sys.argv[1:]
    ours, loadtest = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    args = parser.parse_args(ours)
    if args.compare == "build" and not args.a_services:
        parser.error("build needs --a-services")
    (a_name, a_env, a_opts), (b_name, b_env, b_opts) = settings(args)
    pairs: list[tuple[Run, Run]] = []
    for number in range(args.pairs):
        order = [("A", a_env, a_opts), ("B", b_env, b_opts)]
        done: dict[str, Run] = {}
        for side, env, options in order if number % 2 == 0 else order[::-1]:
            done[side] = run_once(env, [*options, *loadtest])
            setup = done[side]["setup"]
            line = {"pair": number + 1, "side": side}
            line |= {k: setup[k] for k in ("bootstrap", "security", "batch_bytes", "linger_ms")}
            print(json.dumps({**line, **figures(done[side])}), flush=True)
        pairs.append((done["A"], done["B"]))
    print(f"A = {a_name}, B = {b_name}")
    print("\n".join(report((a_name, b_name), pairs)))


if __name__ == "__main__":
    main()
