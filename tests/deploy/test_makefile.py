"""The Makefile's targets that start the local broker point their process at that broker.

``make run`` and ``make load`` both start the broker of ``deploy/kafka/kafka.sh`` on
``KAFKA_PORT``; the process they then start must talk to that broker unless
``BLACKJACK_KAFKA_BOOTSTRAP`` names another. The recipe is printed by ``make -n`` (nothing
runs) against a stub virtualenv, and its line for the process is run with a stub
``blackjack`` that prints the bootstrap it was given."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
STUB = '#!/usr/bin/env bash\necho "bootstrap=${BLACKJACK_KAFKA_BOOTSTRAP:-}"\n'


def _stub_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    blackjack = venv / "bin" / "blackjack"
    blackjack.write_text(STUB)
    blackjack.chmod(0o755)
    (venv / ".installed").touch()  # newer than pyproject.toml: make installs nothing
    return venv


def _recipe(target: str, env: dict[str, str], *assignments: str) -> str:
    """What ``make -n`` prints of ``target`` (nothing runs)."""
    return subprocess.run(
        ["make", "-n", "-s", target, *assignments],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _bootstrap_given(target: str, subcommand: str, env: dict[str, str], venv: Path) -> str:
    recipe = _recipe(target, env, f"VENV={venv}")
    # a line continued with a backslash is one command
    commands = recipe.replace("\\\n", " ").splitlines()
    [command] = [line for line in commands if f"bin/blackjack {subcommand}" in line]
    ran = subprocess.run(
        ["bash", "-c", command], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip()


@pytest.mark.parametrize(("target", "subcommand"), [("run", "serve"), ("load", "loadtest")])
def test_the_process_talks_to_the_broker_the_target_started(
    tmp_path: Path, target: str, subcommand: str
) -> None:
    venv = _stub_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.endswith("KAFKA_BOOTSTRAP")}
    env["KAFKA_PORT"] = "29192"
    assert _bootstrap_given(target, subcommand, env, venv) == "bootstrap=127.0.0.1:29192"
    env["BLACKJACK_KAFKA_BOOTSTRAP"] = "kafka.example:9092"
    assert _bootstrap_given(target, subcommand, env, venv) == "bootstrap=kafka.example:9092"


@pytest.mark.parametrize(
    ("bootstrap", "started"),
    [
        (None, True),
        ("127.0.0.1:29192", True),
        ("localhost:29192", True),  # before: taken for another broker, none started
        ("127.0.0.1:29999", False),
        ("kafka.example:9092", False),
    ],
)
@pytest.mark.parametrize("target", ["run", "load"])
def test_the_local_broker_is_started_unless_the_bootstrap_names_another(
    tmp_path: Path, target: str, bootstrap: str | None, started: bool
) -> None:
    """``make load`` started the local broker whatever ``BLACKJACK_KAFKA_BOOTSTRAP`` named."""
    venv = _stub_venv(tmp_path)
    kafka_sh = tmp_path / "kafka.sh"
    kafka_sh.write_text(f'#!/usr/bin/env bash\necho "$1" >> {tmp_path}/broker\n')
    kafka_sh.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.endswith("KAFKA_BOOTSTRAP")}
    env["KAFKA_PORT"] = "29192"
    if bootstrap is not None:
        env["BLACKJACK_KAFKA_BOOTSTRAP"] = bootstrap
    recipe = _recipe(target, env, f"VENV={venv}", f"KAFKA_SH={kafka_sh}")
    [command] = [line for line in recipe.splitlines() if str(kafka_sh) in line]
    ran = subprocess.run(
        ["bash", "-c", command], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    broker = tmp_path / "broker"
    assert (broker.read_text() if broker.exists() else "") == ("up\n" if started else "")
    assert ("no local broker started" in ran.stderr) is not started
