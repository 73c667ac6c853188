"""``blackjack takeover`` at a small size on the real broker: two handlers in one group,
players playing without pause, each handler stopped and replaced in turn. Every command has
exactly one result, every table's log folds to what the handlers and the players hold, and
after each restart the two share the partitions again.

No timing threshold (the figures depend on the machine): only that they are measured."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from blackjack.cli import build_parser, main
from blackjack.loadtest.drill import Drill
from blackjack.loadtest.takeover import TakeoverConfig, run_takeover
from tests.integration.infra import kafka_sasl

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


async def test_restarts_under_load_lose_nothing_and_do_nothing_twice(bootstrap: str) -> None:
    lines: list[dict[str, Any]] = []
    config = TakeoverConfig(bootstrap=bootstrap, tables=4, partitions=3, restarts=2, settle_s=1.0)
    summary = await run_takeover(config, lines.append)
    [proof] = [one for one in lines if one["kind"] == "proof"]
    assert proof["ok"], proof["problems"]
    assert proof["missing_results"] == proof["duplicated_results"] == 0
    assert proof["results"] == proof["commands_sent"] == summary["commands"]
    assert proof["tables_fold_equal"] == proof["tables_money_conserved"] == 4
    restarts = [one for one in lines if one["kind"] == "restart"]
    assert [r["stopped"] for r in restarts] == ["a", "b"]
    assert all(r["other_serves_all_s"] > 0 and r["shared_again_s"] > 0 for r in restarts)
    assert summary["ok"] and summary["rounds"] > 0 and summary["latency_ms"]["max"] > 0


def test_over_sasl_ssl_as_the_service_connects_the_proof_holds(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    logging_left_as_it_was: None,  # the command line configures the logs into capsys's stream
) -> None:
    """As ``blackjack loadtest``: the handlers, players and proof connect with the service's
    BLACKJACK_KAFKA_* settings, here the local broker's SASL_SSL listener."""
    listener = kafka_sasl()
    for name, value in listener.service_env().items():
        monkeypatch.setenv(name, value)
    command = ["takeover", "--tables", "3", "--partitions", "2", "--restarts", "1"]
    assert main([*command, "--settle", "1"]) == 0
    lines = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    [setup] = [one for one in lines if one["kind"] == "setup"]
    [proof] = [one for one in lines if one["kind"] == "proof"]
    assert (setup["bootstrap"], setup["security"]) == (listener.bootstrap, "SASL_SSL")
    assert proof["ok"], proof["problems"]
    assert proof["tables_fold_equal"] == proof["tables_money_conserved"] == 3


def test_the_command_line_takes_the_drills_options() -> None:
    args = build_parser().parse_args(["takeover", "--tables", "3", "--restarts", "1"])
    assert (args.tables, args.restarts, args.partitions) == (3, 1, 6)


async def test_a_drill_that_fails_deletes_its_topics(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drills run against shared clusters: one that fails after creating its topics (here its
    players fail to start) deletes them all the same, and its caller sees its own error."""

    async def players_fail(self: Drill) -> None:
        raise RuntimeError("the players could not start")

    monkeypatch.setattr(Drill, "play", players_fail)
    lines: list[dict[str, Any]] = []
    config = TakeoverConfig(bootstrap=bootstrap, tables=1, partitions=2, restarts=1)
    with pytest.raises(RuntimeError, match="the players could not start"):
        await run_takeover(config, lines.append)
    [setup] = [one for one in lines if one["kind"] == "setup"]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        left = [
            name for name in await admin.list_topics() if name.startswith(setup["topic_prefix"])
        ]
    finally:
        await admin.close()
    assert left == []
