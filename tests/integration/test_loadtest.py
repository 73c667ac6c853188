"""``blackjack loadtest`` at a small size on the real broker: the proof holds, the figures are
there, the topics are gone; and the proof's checks catch a lost, a doubled and a wrong event.

No timing threshold: the figures depend on the machine; only that they are measured is tested.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.cli import build_parser, main
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve
from blackjack.domain.rules import preset
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.loadtest.config import LoadConfig
from blackjack.loadtest.drill import stop_all
from blackjack.loadtest.echo import echo_value
from blackjack.loadtest.figures import percentile
from blackjack.loadtest.players import Sent
from blackjack.loadtest.proof import money_of, prove
from blackjack.loadtest.run import remove_topics, run_loadtest
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from tests.integration.infra import kafka_sasl

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


@pytest.fixture(scope="module")
async def small_run(bootstrap: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    config = LoadConfig(bootstrap=bootstrap, tables=4, rounds=3, partitions=3)
    await run_loadtest(config, lines.append)
    return lines


def line(lines: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [one for one in lines if one["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} lines"
    return found[0]


async def test_every_command_has_exactly_one_result_and_every_table_adds_up(
    small_run: list[dict[str, Any]],
) -> None:
    proof = line(small_run, "proof")
    assert proof["ok"], proof["problems"]
    assert proof["commands_sent"] > 4 * 3 * 2  # set-up, then at least a bet and a deal a round
    assert proof["commands_in_topic_once"] == proof["commands_sent"]
    assert proof["results"] == proof["commands_sent"]
    assert proof["missing_results"] == proof["duplicated_results"] == 0
    assert proof["results_for_unknown_ids"] == 0
    assert proof["rejections"] == {}
    assert proof["tables"] == 4
    assert proof["tables_fold_equal"] == proof["tables_money_conserved"] == 4
    assert proof["events"] > proof["commands_sent"]


async def test_the_summary_reports_positive_figures_and_the_ratio(
    small_run: list[dict[str, Any]],
) -> None:
    assert [one["kind"] for one in small_run] == ["setup", "run", "baseline", "proof", "summary"]
    run, baseline = line(small_run, "run"), line(small_run, "baseline")
    assert run["rounds"] == baseline["rounds"] == 4 * 3
    assert run["commands"] == baseline["commands"]  # the baseline replays the same commands
    assert baseline["echo"]["answered_once"] == baseline["echo"]["sent"] > run["commands"]
    summary = line(small_run, "summary")
    assert summary["ok"] is True
    for key in (
        "commands_per_second",
        "rounds_per_second",
        "baseline_commands_per_second",
        "ratio_commands_per_second",
        "ratio_p50_latency",
    ):
        assert summary[key] > 0, key
    for figures in (summary["latency_ms"], summary["baseline_latency_ms"]):
        assert 0 < figures["p50"] <= figures["p95"] <= figures["p99"]


async def test_the_run_deletes_its_topics(small_run: list[dict[str, Any]], bootstrap: str) -> None:
    prefix = line(small_run, "setup")["topic_prefix"]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        left = [name for name in await admin.list_topics() if name.startswith(prefix)]
    finally:
        await admin.close()
    assert left == []
    assert line(small_run, "summary")["topics_kept"] is None


async def test_a_refused_command_reaches_the_proof_which_fails_and_keeps_the_topics(
    bootstrap: str,
) -> None:
    """A table whose command is refused stops; the others play on, and the proof, read from
    the topics, names the refusals and fails: the run's log is kept for a look."""
    lines: list[dict[str, Any]] = []
    above_the_maximum = preset("mini-h17").max_bet + 100
    config = LoadConfig(
        bootstrap=bootstrap, tables=2, rounds=2, partitions=1, bet=above_the_maximum, baseline=False
    )
    summary = await run_loadtest(config, lines.append)
    prefix = line(lines, "setup")["topic_prefix"]
    try:
        assert [one["kind"] for one in lines] == ["setup", "run", "proof", "summary"]
        assert line(lines, "run")["tables_stopped"] == 2
        proof = line(lines, "proof")
        assert proof["ok"] is False
        assert proof["rejections"] == {"bet_above_maximum": 2}
        assert proof["results"] == proof["commands_sent"] == 2 * 4  # set up, then the bet
        assert proof["missing_results"] == 0
        assert any("PlaceBet" in text and "bet_above_maximum" in text for text in proof["problems"])
        assert (summary["ok"], summary["topics_kept"]) == (False, prefix)
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            kept = [name for name in await admin.list_topics() if name.startswith(prefix)]
        finally:
            await admin.close()
        assert sorted(kept) == sorted(Topics(prefix).all())
    finally:
        await remove_topics([KafkaSettings(bootstrap=bootstrap, topic_prefix=prefix)])


def test_a_bet_outside_the_variant_s_limits_is_refused_before_any_topic(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["loadtest", "--bootstrap", "127.0.0.1:1", "--bet", "500.01"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "--bet: mini-h17 takes bets of 1.00-500.00 USD, not 500.01 USD" in captured.err


def test_over_sasl_ssl_as_the_service_connects_the_proof_holds(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    logging_left_as_it_was: None,  # the command line configures the logs into capsys's stream
) -> None:
    """Production brokers take TLS and SASL only: the whole run (handler, players, echo and
    the proof's readers) connects with the service's BLACKJACK_KAFKA_* settings, here to the
    local broker's SASL_SSL listener, where a plaintext client gets nothing."""
    listener = kafka_sasl()
    for name, value in listener.service_env().items():
        monkeypatch.setenv(name, value)
    code = main(["loadtest", "--tables", "4", "--rounds", "3", "--partitions", "3"])
    lines = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    setup, proof = line(lines, "setup"), line(lines, "proof")
    assert (setup["bootstrap"], setup["security"]) == (listener.bootstrap, "SASL_SSL PLAIN")
    assert proof["ok"], proof["problems"]
    assert proof["results"] == proof["commands_sent"] > 4 * 3 * 2
    assert proof["tables_fold_equal"] == proof["tables_money_conserved"] == 4
    baseline = line(lines, "baseline")  # the echo over SASL_SSL too: the ratio stays fair
    assert baseline["echo"]["answered_once"] == baseline["echo"]["sent"] > 0
    assert code == 0 and line(lines, "summary")["ratio_commands_per_second"] > 0


def test_the_command_is_registered() -> None:
    args = build_parser().parse_args(["loadtest", "--tables", "2", "--variant", "surrender"])
    assert (args.tables, args.rounds, args.variant) == (2, 50, "surrender")
    assert (args.batch_bytes, args.linger_ms) == (16_384, 0)  # aiokafka's, unless measured
    args = build_parser().parse_args(["loadtest", "--batch-bytes", "65536", "--linger-ms", "2"])
    assert (args.batch_bytes, args.linger_ms) == (65_536, 2)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["loadtest", "--variant", "atlantic-city-multi"])


# ---- the proof's checks fail when they should ----------------------------------------------


def _table(
    stream: str = "t1",
) -> tuple[list[Sent], list[CommandResult], list[EventEnvelope], TableState]:
    """One command that caused two events: a deposit of 500 at an open table."""
    opened = ev.TableOpened(rules=INITIAL_STATE.rules)
    deposit = cmd.Deposit(player_id="p", amount=500)
    sent = [Sent(stream, "c1", cmd.OpenTable(variant="mini-h17")), Sent(stream, "c2", deposit)]
    results = [
        CommandResult(
            command_id="c1",
            stream_id=stream,
            status="accepted",
            first_sequence=1,
            last_sequence=2,
            handled_at="2026-01-01T00:00:00Z",
        ),
        CommandResult(
            command_id="c2",
            stream_id=stream,
            status="accepted",
            first_sequence=3,
            last_sequence=3,
            handled_at="2026-01-01T00:00:00Z",
        ),
    ]
    data: list[tuple[str, ev.Event]] = [
        ("c1", opened),
        ("c1", ev.SeatTaken(player_id="p", seat=0)),
        ("c2", ev.FundsDeposited(player_id="p", amount=500, balance_after=500)),
    ]
    events = [
        EventEnvelope(
            event_id=f"e{n}",
            type=type(event).__name__,
            schema_version=event.version,
            stream_id=stream,
            sequence=n,
            occurred_at="2026-01-01T00:00:00Z",
            causation_id=cause,
            data=event,
        )
        for n, (cause, event) in enumerate(data, 1)
    ]
    state = INITIAL_STATE
    for _, event in data:
        state = evolve(state, event)
    return sent, results, events, state


def _prove(
    sent: list[Sent],
    results: list[CommandResult],
    events: list[EventEnvelope],
    state: TableState,
    **changes: Any,
) -> Any:
    arguments: dict[str, Any] = {
        "command_records": [],
        "results": results,
        "events": events,
        "handler_states": {"t1": (len(events), state)},
        "views": {"t1": (len(events), state)},
        "rounds": 0,
    }
    arguments.update(changes)
    return prove(sent, **arguments)


def test_a_consistent_log_passes_the_proof() -> None:
    sent, results, events, state = _table()
    proof = _prove(sent, results, events, state)
    assert proof.problems == [] and proof.missing_results == []
    assert proof.fold_equal == proof.conserved == 1


def test_a_lost_or_doubled_result_or_event_fails_the_proof() -> None:
    sent, results, events, state = _table()
    assert _prove(sent, results[:1], events, state).missing_results == ["c2"]
    assert _prove(sent, [*results, results[1]], events, state).duplicated_results == ["c2"]
    assert not _prove(sent, results, [*events, events[2]], state).ok  # an event twice
    assert not _prove(sent, results, events[:2], state).ok  # an event lost
    other = events[2].model_copy(update={"causation_id": "nobody"})
    assert not _prove(sent, results, [*events[:2], other], state).ok


def test_a_command_sent_again_through_an_outage_passes_only_if_answered_the_same() -> None:
    """A player sends a command again under its id when no result came (the broker was
    away): the copy may be in the topic and is answered again, with the same result, and its
    events are written once. A copy nobody sent, or answered otherwise, fails the proof."""
    sent, results, events, state = _table()
    records = [
        CommandEnvelope(command_id=one.command_id, stream_id="t1", command=one.command)
        for one in (*sent, sent[1])
    ]
    twice = [*results, results[1]]
    again = _prove(sent, twice, events, state, command_records=records, resent={"c2": 1})
    assert again.ok, again.line()
    assert (again.resent_in_topic, again.copies_in_topic) == (1, 1)
    nobody = _prove(sent, twice, events, state, command_records=records)
    assert nobody.copies_nobody_sent == ["c2"] and not nobody.ok
    # the review: another command's resend made room for c2's copy
    other = _prove(sent, twice, events, state, command_records=records, resent={"c1": 1})
    assert other.copies_nobody_sent == ["c2"] and not other.ok
    unanswered = _prove(sent, results, events, state, command_records=records, resent={"c2": 1})
    assert unanswered.copies_unanswered == ["c2"] and not unanswered.ok
    otherwise = results[1].model_copy(update={"last_sequence": 4})
    assert _prove(
        sent, [*results, otherwise], events, state, command_records=records, resent={"c2": 1}
    ).duplicated_results == ["c2"]


def test_every_command_record_is_answered_exactly_once() -> None:
    """The second review: counted per command id, a copy answered twice plus a copy never
    answered looked like two copies answered once each, and a record nobody sent nor
    answered went unseen. Each record (partition, offset) must have one result."""
    sent, results, events, state = _table()
    records = [
        CommandEnvelope(command_id=one.command_id, stream_id="t1", command=one.command)
        for one in (*sent, sent[1])
    ]
    twice = [*results, results[1]]

    def proved(answers: dict[tuple[int, int], int]) -> Any:
        return _prove(
            sent,
            twice,
            events,
            state,
            command_records=records,
            resent={"c2": 1},
            answers_per_record=answers,
        )

    assert proved({(0, 0): 1, (0, 1): 1, (0, 2): 1}).ok
    doubled_and_lost = proved({(0, 0): 1, (0, 1): 2, (0, 2): 0})
    assert doubled_and_lost.records_not_answered_once == [(0, 1), (0, 2)]
    assert not doubled_and_lost.ok
    phantom = proved({(0, 0): 1, (0, 1): 1, (0, 2): 1, (0, 3): 0})
    assert phantom.records_not_answered_once == [(0, 3)] and not phantom.ok


def test_a_state_other_than_the_fold_fails_the_proof() -> None:
    sent, results, events, state = _table()
    stale = (2, INITIAL_STATE)
    assert _prove(sent, results, events, state, handler_states={"t1": stale}).fold_equal == 0
    assert _prove(sent, results, events, state, views={"t1": stale}).fold_equal == 0


def test_money_is_counted_from_the_stakes_and_payouts() -> None:
    money = money_of(
        [
            ev.FundsDeposited(player_id="p", amount=1000, balance_after=1000),
            ev.BetPlaced(
                round=1, player_id="p", box=0, amount=100, box_total=100, balance_after=900
            ),
            ev.HandDoubled(round=1, player_id="p", box=0, hand=0, amount=100, balance_after=800),
            ev.HandSettled(
                round=1,
                player_id="p",
                box=0,
                hand=0,
                outcome="win",
                total=20,
                stake=200,
                payout=400,
                balance_after=1200,
            ),
        ]
    )
    assert (money.deposits, money.staked, money.paid_back, money.house_result) == (
        1000,
        200,
        400,
        -200,
    )


def test_the_echo_is_a_result_of_the_command_size() -> None:
    class Record:
        key = b"t1"
        value = b"x" * 400
        headers = [("ce_id", b"c9")]

    echoed = echo_value(Record())
    assert len(echoed) == 400
    assert CommandResult.model_validate_json(echoed).command_id == "c9"


def test_percentiles_are_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.95), percentile(values, 0.99)) == (
        50.0,
        95.0,
        99.0,
    )


async def test_a_drill_stops_every_part_whatever_one_raises() -> None:
    """The second review: the events' follower raises the error it died of (a doubled or
    lost event among them) when stopped, and that left every handler of the drill running."""
    stopped: list[str] = []

    async def follower() -> None:
        stopped.append("follower")
        raise RuntimeError("load-0001: event 5 after 3")

    async def handler() -> None:
        stopped.append("handler")

    with pytest.raises(RuntimeError, match="event 5 after 3"):
        await stop_all([follower, handler, handler])
    assert stopped == ["follower", "handler", "handler"]
