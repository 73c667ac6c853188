"""The Kubernetes manifests' processes, run for real: each workload's command line and
environment (deploy/k8s, as tests/deploy reads them), with only what points at the cluster
changed (the test broker in plaintext, a topic space of its own, a SQLite read model, a free
loopback port). tests/deploy checks the probe paths on the ASGI apps built in the test; here
they are asked over HTTP of the running process, within the manifests' own budgets: alive
for the startup probe, ready, its role and the brokers' answers on /metrics (what
BlackjackKafkaUnreachable watches), and stopped by SIGTERM within the grace period that is
left after the preStop wait."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.test_deploy_artifacts import container_env, http_port, the_container, workloads
from tests.integration.conftest import KafkaSpace
from tests.integration.infra import free_port

pytestmark = pytest.mark.integration

BLACKJACK = Path(sys.executable).parent / "blackjack"
ROLES = {"blackjack-handler": "handler", "blackjack-projections": "projections"}


def local_command(container: dict[str, Any], port: int) -> list[str]:
    """The container's command line, listening on the loopback ``port`` instead."""
    manifest_port = str(http_port(container))
    args = [str(a) for a in container["args"]]
    args = [
        "127.0.0.1"
        if a == "0.0.0.0"
        else a.replace(f"0.0.0.0:{manifest_port}", f"127.0.0.1:{port}")
        for a in args
    ]
    return [str(BLACKJACK), *(str(port) if a == manifest_port else a for a in args)]


def local_env(container: dict[str, Any], space: KafkaSpace, tmp_path: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in container_env(container).items()
        if not name.startswith(("BLACKJACK_KAFKA_", "BLACKJACK_API_"))  # open: no tokens
    }
    env.update(
        BLACKJACK_KAFKA_BOOTSTRAP=space.bootstrap,
        BLACKJACK_TOPIC_PREFIX=space.prefix,
        BLACKJACK_PARTITIONS=str(space.partitions),
        BLACKJACK_REPLICATION_FACTOR="1",
        BLACKJACK_MIN_INSYNC_REPLICAS="1",
        BLACKJACK_DB_URL=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
        SQLITE_TMPDIR=str(tmp_path),
    )
    if "BLACKJACK_SHOE_KEY" in env:
        env["BLACKJACK_SHOE_KEY"] = space.shoe_key
    return {**{k: v for k, v in os.environ.items() if not k.startswith("BLACKJACK_")}, **env}


async def until(http: httpx.AsyncClient, path: str, ok: Any, within: float) -> httpx.Response:
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        try:
            answer = await http.get(path)
            last = answer
            if ok(answer):
                return answer
        except httpx.TransportError as error:
            last = error
        await asyncio.sleep(0.5)
    raise AssertionError(f"{path} within {within} s: last {last!r}")


def budget(probe: dict[str, Any]) -> float:
    return float(probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3))


@pytest.mark.parametrize("name", sorted(ROLES))
async def test_each_manifests_process_answers_its_probes_and_stops_within_its_grace(
    name: str, kafka_space: Any, tmp_path: Path
) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    [workload] = [w for w in workloads() if w["metadata"]["name"] == name]
    container = the_container(workload)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *local_command(container, port),
        env=local_env(container, space, tmp_path),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            alive = await until(
                http, "/healthz", lambda r: r.status_code == 200, budget(container["startupProbe"])
            )
            assert alive.headers["content-type"] == "application/json"
            await until(http, "/readyz", lambda r: r.status_code == 200, 120)
            role = ROLES[name]
            metrics = (await http.get("/metrics")).text
            assert f'blackjack_process_role{{role="{role}"}} 1.0' in metrics
            answered = re.compile(
                rf'^blackjack_kafka_answered_timestamp_seconds{{role="{role}"}} (\S+)$', re.M
            )
            found = await until(http, "/metrics", lambda r: answered.search(r.text) is not None, 60)
            match = answered.search(found.text)
            assert match is not None and abs(time.time() - float(match.group(1))) < 60
        spec = workload["spec"]["template"]["spec"]
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {})
        waits = int(pre_stop["command"][1]) if pre_stop else 0
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        status = await asyncio.wait_for(
            process.wait(), spec["terminationGracePeriodSeconds"] - waits
        )
        assert status == 0
        assert time.monotonic() - signalled < spec["terminationGracePeriodSeconds"] - waits
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
