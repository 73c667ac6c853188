"""``blackjack outage`` at a small size on a broker of the test's own: two handlers in one
group, players playing without pause, the broker killed (SIGKILL: a crash, with transactions
open) and started again. Every command is answered, the same each time it was sent; every
table's log folds to what the handlers and the players hold, money conserved; every table is
answered again once the broker is back; a projection worker's read model, folded through the
crash, equals one rebuilt from offset 0.

No timing threshold (the figures depend on the machine): only that they are measured."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blackjack.cli import build_parser, main
from blackjack.loadtest.outage import BrokerCommandFailed, OutageConfig, run_outage
from tests.integration.drill_checks import assert_nothing_lost_nor_done_twice, line_of
from tests.integration.infra import PrivateBroker

pytestmark = pytest.mark.integration


async def test_a_broker_crash_under_load_loses_nothing_and_does_nothing_twice(
    private_broker: PrivateBroker,
) -> None:
    lines: list[dict[str, Any]] = []
    config = OutageConfig(
        bootstrap=private_broker.bootstrap,
        stop_broker=private_broker.kill_command(),
        start_broker=private_broker.command("up"),
        tables=4,
        partitions=2,
        down_s=2.0,
        settle_s=2.0,
        resend_after_s=5.0,
        timeout_s=120.0,
    )
    summary = await run_outage(config, lines.append)
    assert_nothing_lost_nor_done_twice(lines, summary, tables=4)
    outage = line_of(lines, "outage")
    assert 0 <= outage["first_answer_after_up_s"] <= outage["all_answered_after_up_s"]
    assert summary["latency_ms"]["max"] >= 1000 * config.down_s  # a command waited it out


async def test_a_broker_command_that_fails_ends_the_drill_with_its_error(
    private_broker: PrivateBroker,
) -> None:
    config = OutageConfig(
        bootstrap=private_broker.bootstrap,
        stop_broker="echo no such broker >&2; exit 3",
        start_broker=private_broker.command("up"),
        tables=1,
        partitions=1,
        settle_s=0.5,
    )
    with pytest.raises(BrokerCommandFailed, match="exited 3: no such broker"):
        await run_outage(config, lambda _: None)


def test_the_default_commands_stop_only_the_local_broker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The review: with the defaults, ``--bootstrap`` naming another broker would have
    stopped the local one while measuring the other."""
    monkeypatch.setenv("KAFKA_PORT", "9092")
    assert main(["outage", "--bootstrap", "kafka.example:9092"]) == 2
    assert "give --stop-broker and --start-broker" in capsys.readouterr().err


def test_a_broker_command_that_fails_is_one_line_and_exit_2_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    logging_left_as_it_was: None,  # the command line configures the logs into capsys's stream
) -> None:
    """A newcomer's --stop-broker naming a pid file that is not there (KAFKA_CACHE_DIR
    moved) ended in a traceback; the drill's error is the answer, not its stack."""

    async def stop_fails(config: OutageConfig, emit: Any) -> dict[str, Any]:
        raise BrokerCommandFailed("'kill -9 $(cat x/kafka.pid)' exited 2: cat: no such file")

    monkeypatch.setattr("blackjack.loadtest.outage.run_outage", stop_fails)
    # Both commands given: the check that the default ones name the broker tested does not
    # apply, whichever broker the environment names (CI's is on another port).
    command = ["outage", "--stop-broker", "kill -9 $(cat x/kafka.pid)", "--start-broker", "true"]
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("blackjack outage: 'kill -9 $(cat x/kafka.pid)' exited 2: cat:")
    assert "Traceback" not in err


def test_the_command_line_takes_the_drills_options() -> None:
    args = build_parser().parse_args(
        ["outage", "--tables", "3", "--down", "5", "--stop-broker", "systemctl stop kafka"]
    )
    assert (args.tables, args.down, args.partitions) == (3, 5.0, 3)
    assert args.stop_broker == "systemctl stop kafka"
    assert args.start_broker.endswith("deploy/kafka/kafka.sh up")


@pytest.mark.parametrize("command", ["loadtest", "takeover", "outage"])
def test_the_runs_take_their_topics_replicas_and_refuse_more_in_sync_than_replicas(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On deploy/kafka/cluster.sh's three nodes: 3 replicas, 2 in sync at least. More in
    sync than replicas is refused before any topic is made."""
    args = build_parser().parse_args(
        [command, "--replication-factor", "3", "--min-insync-replicas", "2"]
    )
    assert (args.replication_factor, args.min_insync_replicas) == (3, 2)
    defaults = build_parser().parse_args([command])
    assert (defaults.replication_factor, defaults.min_insync_replicas) == (1, 1)
    both = ["--stop-broker", "true", "--start-broker", "true"] if command == "outage" else []
    assert main([command, "--min-insync-replicas", "2", *both]) == 2
    assert f"blackjack {command}: --min-insync-replicas is at most" in capsys.readouterr().err


def test_over_sasl_ssl_as_the_service_connects_the_proof_holds(
    private_broker: PrivateBroker,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    logging_left_as_it_was: None,  # the command line configures the logs into capsys's stream
) -> None:
    """As ``blackjack loadtest`` and ``takeover``: the handlers, players, proof and projection
    worker connect with the service's BLACKJACK_KAFKA_* settings, here the SASL_SSL listener
    of the test's own broker, the only one the drill stops and starts (``outage`` spoke
    PLAINTEXT only, whatever the settings said)."""
    listener = private_broker.sasl()
    for name, value in listener.service_env().items():
        monkeypatch.setenv(name, value)
    command = ["outage", "--tables", "2", "--partitions", "2", "--down", "2", "--settle", "1"]
    brokers = [
        ("--stop-broker", private_broker.kill_command()),
        ("--start-broker", private_broker.command("up")),
    ]
    assert main([*command, *(part for option in brokers for part in option)]) == 0
    lines = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    [setup] = [one for one in lines if one["kind"] == "setup"]
    assert (setup["bootstrap"], setup["security"]) == (listener.bootstrap, "SASL_SSL")
    assert setup["stop_broker"] == private_broker.kill_command()
    [proof] = [one for one in lines if one["kind"] == "proof"]
    assert proof["ok"], proof["problems"]
    assert proof["tables_fold_equal"] == proof["tables_money_conserved"] == 2
    [folded] = [one for one in lines if one["kind"] == "read_model"]
    assert folded["equal_to_rebuild"] and folded["money_conserved"], folded
    [outage] = [one for one in lines if one["kind"] == "outage"]
    assert outage["all_answered_after_up_s"] >= 0


def test_the_default_commands_take_the_local_broker_s_sasl_listener_as_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default commands stop the local broker: over SASL_SSL, ``--bootstrap`` names its
    SASL_SSL listener (KAFKA_SASL_PORT, KAFKA_PORT + 2 by default), the same broker."""
    from blackjack.loadtest.cli import local_listeners  # (here: new with the check)

    monkeypatch.setenv("KAFKA_PORT", "9092")
    monkeypatch.delenv("KAFKA_SASL_PORT", raising=False)
    assert local_listeners() == ("127.0.0.1:9092", "127.0.0.1:9094")
    monkeypatch.setenv("KAFKA_SASL_PORT", "9300")
    assert local_listeners() == ("127.0.0.1:9092", "127.0.0.1:9300")
