"""``blackjack send`` with the Kafka client stood in for: an accepted command whose events
cannot be read is still reported accepted (its result line printed, exit 0), never as a
failure that invites sending it again."""

from __future__ import annotations

import argparse
import io
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError

from blackjack import client_cli
from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient, SendTimedOut, UnreadableResult
from blackjack.domain.commands import OpenTable
from blackjack.domain.wallet import WalletDeposit
from blackjack.messages import strict_json
from blackjack.messages.envelope import CommandResult
from blackjack.projections.views import ProjectionError

DEPOSIT = '{"type": "Deposit", "player_id": "ann", "amount": 500}'


def send_args(**fields: Any) -> argparse.Namespace:
    """``blackjack send``'s arguments: a deposit to t-1 under an id the command line makes,
    waiting 2 s for its answer and not for its events, but for ``fields``."""
    defaults: dict[str, Any] = {
        "stream_id": "t-1",
        "command": DEPOSIT,
        "command_id": None,
        "sent_at": None,
        "timeout": 2.0,
        "events": False,
    }
    return argparse.Namespace(**(defaults | fields))


async def nothing(self: BlackjackClient, *args: Any, **kwargs: Any) -> None:
    return None


async def accepted(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> CommandResult:
    return CommandResult(
        command_id=kw["command_id"],
        stream_id=stream_id,
        status="accepted",
        first_sequence=7,
        last_sequence=9,
        handled_at=datetime.now(UTC),
    )


async def unreadable(self: BlackjackClient, result: CommandResult, timeout: float = 10.0) -> Any:
    raise KafkaTimeoutError("offsets_for_times timed out")


def test_an_accepted_command_whose_events_cannot_be_read_is_still_accepted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, stand_in in (
        ("start", nothing),
        ("stop", nothing),
        ("execute", accepted),
        ("events", unreadable),
    ):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    args = send_args(command_id="deposit-1", events=True)
    assert client_cli._send(args) == 0
    out, err = capsys.readouterr()
    assert '"command_id":"deposit-1"' in out and '"status":"accepted"' in out
    assert "its events were not read: KafkaTimeoutError" in err


async def no_events(self: BlackjackClient, result: CommandResult, timeout: float = 10.0) -> Any:
    return []


class ClosedPipe(io.StringIO):
    """The stdout of `blackjack send ... | head -1` once head has exited."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self.fd

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd


def test_a_closed_output_pipe_leaves_the_exit_code_saying_accepted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """`send ... | head -1` once printed a traceback and exited 1, which means rejected."""
    for name, stand_in in (
        ("start", nothing),
        ("stop", nothing),
        ("execute", accepted),
        ("events", no_events),
    ):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    with open(tmp_path / "stdout", "w") as stand_in_fd:  # dup2 lands on this, not the real one
        monkeypatch.setattr(sys, "stdout", ClosedPipe(stand_in_fd.fileno()))
        args = send_args(command_id="deposit-2", events=True)
        assert client_cli._send(args) == 0


def test_a_sealed_shoe_is_shown_by_its_start_and_length() -> None:
    sealed = "u" * 3440
    assert client_cli._short(sealed) == "uuuuuuuuuuuuuuuuuuuuuuuu... (3440 characters)"
    assert client_cli._short("2260ce69" * 8) == "2260ce69" * 8  # a commitment stays whole
    assert client_cli._short(416) == 416


@pytest.mark.parametrize(
    ("stream_id", "command_id", "named"),
    [("table 1", None, "stream_id"), ("", None, "stream_id"), ("t-1", "bad id", "command_id")],
)
def test_an_id_the_service_would_refuse_is_a_one_line_error_before_sending(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stream_id: str,
    command_id: str | None,
    named: str,
) -> None:
    """Exit 2 (the command line's fault), not a traceback with exit 1 (which says rejected)."""
    monkeypatch.setattr(BlackjackClient, "start", _never)
    args = send_args(
        stream_id=stream_id,
        command='{"type": "OpenTable", "variant": "mini-h17"}',
        command_id=command_id,
    )
    assert client_cli._send(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"blackjack send: not a valid id: {named}: ")
    assert err.count("\n") == 1


def test_an_id_of_the_answers_to_unreadable_records_is_refused_before_sending(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The handler answers such an id under its own record's offset: sent, the command line
    waited 10 s, then said to send it again under the same id, whose answer never comes."""
    monkeypatch.setattr(BlackjackClient, "start", _never)
    args = send_args(
        stream_id="t-1",
        command='{"type": "OpenTable", "variant": "mini-h17"}',
        command_id="unparsed-1-3",
    )
    assert client_cli._send(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "blackjack send: not a valid id: command ids unparsed-<partition>-<offset> name the "
        "answers to unreadable records\n"
    )


async def test_the_client_refuses_to_send_under_an_id_of_the_answers_to_unreadable_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(BlackjackClient, "start", _never)
    monkeypatch.setattr(BlackjackClient, "_started", _never)
    client = BlackjackClient("127.0.0.1:1", Topics())
    with pytest.raises(ValueError, match="unparsed-<partition>-<offset>"):
        await client.send("t-1", OpenTable(variant="mini-h17"), command_id="unparsed-0-12")


async def _never(self: BlackjackClient) -> None:
    raise AssertionError("nothing may be sent")


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ('{"type": "OpenTable", "variant": "mini-h17", "variant": "surrender"}', "variant"),
        ('{"type": "Deposit", "type": "Withdraw", "player_id": "ann", "amount": 100}', "type"),
        (
            '{"type": "OpenTable", "variant": "mini-h17", "overrides": {"seats": 1, "seats": 7}}',
            "seats",
        ),
    ],
)
def test_a_command_naming_a_key_twice_is_refused_before_sending(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, key: str
) -> None:
    """The handler refuses such JSON (test_duplicate_keys); ``send`` read it keeping the last
    value and sent that command, which the service then accepted."""
    monkeypatch.setattr(BlackjackClient, "start", _never)
    args = send_args(command=command)
    assert client_cli._send(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"blackjack send: not a command: the key {key!r} is named twice\n"


@pytest.mark.parametrize(
    ("number", "said"),
    [("1e400", "1e400"), ("-1e400", "-1e400"), ("NaN", "NaN"), ("Infinity", "Infinity")],
)
def test_a_command_with_a_number_that_is_not_finite_is_refused_before_sending(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], number: str, said: str
) -> None:
    """``send`` read ``1e400`` (and the non-JSON ``NaN``) in a rules override as a float and
    sent the command with ``null`` there, which opened a surrender table without closing
    interrupted rounds; the handler refuses the text as typed (``invalid_rules``)."""
    monkeypatch.setattr(BlackjackClient, "start", _never)
    overrides = f'{{"interrupted_round_days": {number}}}'
    command = f'{{"type": "OpenTable", "variant": "surrender", "overrides": {overrides}}}'
    assert client_cli._send(send_args(command=command)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"blackjack send: not a command: {said} is not a finite number\n"
    # a finite number, written with a fraction or an exponent, is read as before
    finite = '{"type": "OpenTable", "variant": "surrender", "overrides": {"max_bet": 1e3}}'
    assert strict_json.finite_loads(finite)["overrides"]["max_bet"] == 1000.0


@pytest.mark.parametrize("argv", [["send"], ["play", "--player", "ann"], ["loadtest"]])
@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf", "1e309", "soon"])
def test_a_timeout_that_is_no_time_to_wait_is_refused_before_sending(
    argv: list[str], timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``send --timeout -1`` sent the command, then said no result came within -1.0 s and that
    it may still be handled (send it again); ``nan`` and ``inf`` waited for ever."""
    from blackjack.cli import build_parser

    where = ["t-1", '{"type": "Deal", "player_id": "ann"}'] if argv == ["send"] else []
    if argv[0] == "play":
        where = ["t-1"]
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*argv, *where, f"--timeout={timeout}"])
    assert exit_.value.code == 2
    assert "argument --timeout: " in capsys.readouterr().err
    parsed = build_parser().parse_args([*argv, *where, "--timeout=2.5"])
    assert parsed.timeout == 2.5


def test_a_retry_is_sent_with_the_first_sending_s_sent_at(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform money command's copy is told by its ``sent_at`` once its id is let go
    (``domain.platform_money``): the retry ``blackjack send`` asks for, after a timeout,
    carries the first sending's (before: a new one, so a WalletDeposit retried more than
    the retention after it was taken was credited again)."""
    sent: list[dict[str, Any]] = []

    async def timed_out(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> Any:
        sent.append(kw)
        raise TimeoutError

    for name, stand_in in (("start", nothing), ("stop", nothing), ("execute", timed_out)):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    parser = argparse.ArgumentParser()
    client_cli.register(parser.add_subparsers())
    deposit = '{"type": "WalletDeposit", "player_id": "ann", "amount": 500}'
    args = parser.parse_args(["send", "wallet:ann", deposit, "--timeout", "1"])
    assert client_cli._send(args) == 2
    first = sent[0]["sent_at"]
    assert first is not None and first.tzinfo is not None
    err = capsys.readouterr().err
    retry = err.split("send it again with ")[1].split(";")[0].split()
    assert retry == ["--command-id", sent[0]["command_id"], "--sent-at", first.isoformat()]
    args = parser.parse_args(["send", "wallet:ann", deposit, *retry])
    assert client_cli._send(args) == 2
    assert sent[1]["command_id"] == sent[0]["command_id"] and sent[1]["sent_at"] == first
    bad = ["send", "wallet:ann", deposit, "--sent-at", "2026-12-03T14:35"]  # no offset
    with pytest.raises(SystemExit):
        parser.parse_args(bad)


async def test_the_client_sends_the_sent_at_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    envelopes: list[Any] = []

    async def keep(self: BlackjackClient, envelope: Any) -> None:
        envelopes.append(envelope)

    monkeypatch.setattr(BlackjackClient, "send_envelope", keep)
    client = BlackjackClient("127.0.0.1:1")
    first = datetime(2026, 12, 3, 14, 35, tzinfo=UTC)
    command = WalletDeposit(player_id="ann", amount=500)
    await client.send("wallet:ann", command, command_id="pay-1", sent_at=first)
    await client.send("wallet:ann", command, command_id="pay-2")
    assert envelopes[0].sent_at == first and envelopes[1].sent_at > first


def test_a_bet_or_a_move_is_sent_naming_the_table_s_round(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy of a bet sent after its id left the idempotency window is refused
    ``stale_command`` only if it names its round: ``blackjack send`` names the table's (read
    first), or ``--round``'s, or the JSON's, and the retry it suggests names the same."""
    sent: list[Any] = []

    async def timed_out(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> Any:
        sent.append(command)
        raise TimeoutError

    async def round_five_settled(args: argparse.Namespace, client: BlackjackClient) -> Any:
        return 5, False

    for name, stand_in in (("start", nothing), ("stop", nothing), ("execute", timed_out)):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    monkeypatch.setattr(client_cli, "_table_round", round_five_settled)
    parser = argparse.ArgumentParser()
    client_cli.register(parser.add_subparsers())
    bet = '{"type": "PlaceBet", "player_id": "ann", "box": 0, "amount": 500}'
    assert client_cli._send(parser.parse_args(["send", "t-1", bet])) == 2
    assert "--round 6;" in capsys.readouterr().err
    assert client_cli._send(parser.parse_args(["send", "t-1", bet, "--round", "3"])) == 2
    named = bet.replace("}", ', "round": 2}')
    assert client_cli._send(parser.parse_args(["send", "t-1", named])) == 2
    sit = '{"type": "SitDown", "player_id": "ann"}'
    assert client_cli._send(parser.parse_args(["send", "t-1", sit])) == 2
    assert [getattr(c, "round", None) for c in sent] == [6, 3, 2, None]
    with pytest.raises(SystemExit):
        parser.parse_args(["send", "t-1", bet, "--round", "0"])


def test_a_round_not_read_in_time_sends_nothing_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent: list[Any] = []

    async def keep(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> Any:
        sent.append(command)

    async def too_slow(args: argparse.Namespace, client: BlackjackClient) -> Any:
        raise TimeoutError

    for name, stand_in in (("start", nothing), ("stop", nothing), ("execute", keep)):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    monkeypatch.setattr(client_cli, "_table_round", too_slow)
    parser = argparse.ArgumentParser()
    client_cli.register(parser.add_subparsers())
    hit = '{"type": "Hit", "player_id": "ann", "box": 0}'
    assert client_cli._send(parser.parse_args(["send", "t-1", hit])) == 2
    assert "nothing was sent" in capsys.readouterr().err and sent == []

    async def out_of_order(args: argparse.Namespace, client: BlackjackClient) -> Any:
        raise ProjectionError("t-1: event 44 follows 42")

    # a log the handler did not write: before, a traceback and exit 1 (which says rejected)
    monkeypatch.setattr(client_cli, "_table_round", out_of_order)
    assert client_cli._send(parser.parse_args(["send", "t-1", hit])) == 2
    assert capsys.readouterr().err == (
        "blackjack send: the table's round could not be read from its events (ProjectionError: "
        "t-1: event 44 follows 42; nothing was sent): name it with --round N\n"
    )
    assert sent == []


def test_a_warning_on_the_way_goes_to_stderr_leaving_stdout_the_answer(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    logging_left_as_it_was: None,
) -> None:
    """`blackjack send ... | jq` reads one JSON line: a warning the client logged on the way (a
    results reader reset, a producer replaced) was printed into it, on stdout."""
    import json

    import structlog

    from blackjack.cli import main

    async def warned(self: BlackjackClient, *args: Any, **kw: Any) -> CommandResult:
        structlog.get_logger().warning("producer replaced", error="KafkaConnectionError")
        return await accepted(self, *args, **kw)

    for name, stand_in in (("start", nothing), ("stop", nothing), ("execute", warned)):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    command = '{"type": "Deposit", "player_id": "ann", "amount": 500}'
    assert main(["send", "t-1", command, "--command-id", "deposit-2", "--no-events"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "accepted"  # nothing else on stdout
    assert "producer replaced" in err


async def broker_away(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> Any:
    raise SendTimedOut("the broker did not take the command within 2.0 s")


async def answer_unreadable(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> Any:
    raise UnreadableResult(kw["command_id"], stream_id, 3, 41, "a status this release lacks")


async def reader_failed(self: BlackjackClient, stream_id: str, command: Any, **kw: Any) -> Any:
    raise KafkaConnectionError("the results reader lost the broker")


@pytest.mark.parametrize(
    ("execute", "said"),
    [
        (broker_away, "the broker did not take it within 30.0 s for command "),
        (answer_unreadable, "cannot be read (the answer to "),
        (reader_failed, "Kafka at "),
    ],
    ids=["send timed out", "answer unreadable", "a Kafka error"],
)
def test_a_command_that_may_have_gone_out_is_told_with_the_ids_to_resend_it_under(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    execute: Any,
    said: str,
) -> None:
    """The command line makes the command's id and time: a send the broker did not take in
    time (``SendTimedOut``, a KafkaError and no TimeoutError) was told as a configuration
    error without them, and an unreadable answer ended in a traceback (exit 1, "rejected").
    Run again, the same command line made a new id, and a deposit could be taken twice
    (review of the client, session 34)."""
    for name, stand_in in (("start", nothing), ("stop", nothing), ("execute", execute)):
        monkeypatch.setattr(BlackjackClient, name, stand_in)
    args = send_args()
    assert client_cli._send(args) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    resend = err.split("send it again with --command-id ")[1].split()
    uuid.UUID(resend[0])  # the id the command line made
    assert resend[1] == "--sent-at" and datetime.fromisoformat(resend[2].rstrip(");,"))


async def no_broker(self: BlackjackClient) -> None:
    raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 9092)]")


def test_a_broker_not_reached_before_the_send_says_nothing_was_sent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The client's start fails (no broker where ``BLACKJACK_KAFKA_BOOTSTRAP`` says): the
    command never went out, so the line says so and names the setting, instead of the ids to
    send it again with (a newcomer walkthrough's finding: advice for a send that never was)."""
    monkeypatch.setattr(BlackjackClient, "start", no_broker)
    monkeypatch.setattr(BlackjackClient, "execute", _never)
    assert client_cli._send(send_args()) == 2
    err = capsys.readouterr().err
    assert "Kafka at " in err and "KafkaConnectionError" in err
    assert err.count("KafkaConnectionError") == 1, err  # once: aiokafka's text starts with it
    assert "nothing was sent (the broker is read from BLACKJACK_KAFKA_BOOTSTRAP)" in err
    assert "send it again" not in err and "Traceback" not in err
