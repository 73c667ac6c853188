"""``blackjack send STREAM_ID COMMAND``: one command from the command line, and its result.

What a platform's integration does, for a person at a terminal: the command (JSON, as in
``schemas/commands/``) goes to ``blackjack.commands`` in an envelope keyed by the stream, and
the result from ``blackjack.command-results`` is printed as a JSON line, then each event the
command wrote on a line of its own (sequence, type, fields; the last ``TurnStarted`` lists the
player's buttons). The broker, topic
prefix and security settings are the service's (``BLACKJACK_KAFKA_*``,
``BLACKJACK_TOPIC_PREFIX``). Exit 0 accepted, 1 rejected, 2 not a command or no answer.

A command that acts in a round (a bet, an insurance decision, a move) is sent naming the round
it is meant for: ``--round``, else the one the command's JSON names, else the table's as read
first (from the read model's query API, ``--api``, or the table's partition), so that a retry
sent after its id left the idempotency window is refused ``stale_command`` rather than taken in
a later round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import uuid
from datetime import UTC, datetime

from aiokafka.errors import KafkaError
from pydantic import AwareDatetime, TypeAdapter, ValidationError

from blackjack.arguments import wait_seconds
from blackjack.client import BlackjackClient, SendTimedOut, UnreadableResult
from blackjack.domain.commands import ROUND_COMMANDS, TableCommand, naming_round
from blackjack.domain.rejections import in_one_line
from blackjack.domain.wallet import AnyWalletCommand
from blackjack.error_text import error_text
from blackjack.messages import strict_json
from blackjack.messages.envelope import (
    UNPARSED_ID_REFUSAL,
    CommandEnvelope,
    CommandResult,
    StreamCommand,
    unparsed_id,
)
from blackjack.messages.wire import WireEnvelope
from blackjack.projections.views import ProjectionError

_COMMAND: TypeAdapter[TableCommand | AnyWalletCommand] = TypeAdapter(StreamCommand)
_SENT_AT: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)


def _send(args: argparse.Namespace) -> int:
    client = BlackjackClient.from_env()  # connects when started, below
    prepared = _prepared(args)
    if isinstance(prepared, str):
        print(f"blackjack send: {prepared}", file=sys.stderr)
        return 2
    sending = _Sending(args, client, *prepared)
    # aiokafka logs an error on every metadata retry; one line below says what went wrong
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    try:
        result, events = asyncio.run(sending.run())
    except (RoundNotRead, TimeoutError, UnreadableResult, KafkaError) as error:
        print(f"blackjack send: {sending.failed(error)}", file=sys.stderr)
        return 2
    return _printed(result, events)


def _prepared(
    args: argparse.Namespace,
) -> tuple[TableCommand | AnyWalletCommand, str, datetime] | str:
    """The command line's command, its id and its time, or why there is none to send."""
    try:
        # as the handler reads it: a key named twice is refused; and a number that is not
        # finite, which the command sent would carry as null (1e400 in a rules override turned
        # the option off, where the handler refuses the text as typed: invalid_rules)
        strict_json.finite_loads(args.command)
    except (strict_json.KeyNamedTwice, strict_json.NotFinite) as error:
        return f"not a command: {error}"
    except ValueError:
        pass  # not JSON at all: said below, as before
    try:
        command = _COMMAND.validate_json(args.command)
    except ValidationError as error:
        return f"not a command: {in_one_line(error)}"
    # Chosen here, so that a send whose answer does not come can be retried under the same id
    # (a retry is answered with the first result and does nothing again).
    command_id = args.command_id or str(uuid.uuid4())
    # Likewise its time: a money command's copy is told by it once its id is let go.
    sent_at = args.sent_at or datetime.now(UTC)
    try:  # the ids as the service checks them: a bad one is this command line's fault
        CommandEnvelope(command_id=command_id, stream_id=args.stream_id, command=command)
    except ValidationError as error:
        return f"not a valid id: {in_one_line(error)}"
    if unparsed_id(command_id):
        return f"not a valid id: {UNPARSED_ID_REFUSAL}"
    return command, command_id, sent_at


class _Sending:
    """One command line's command sent and answered, and what to say when that fails."""

    def __init__(
        self,
        args: argparse.Namespace,
        client: BlackjackClient,
        command: TableCommand | AnyWalletCommand,
        command_id: str,
        sent_at: datetime,
    ) -> None:
        self.args, self.client = args, client
        self.command, self.command_id, self.sent_at = command, command_id, sent_at
        self.named: list[int] = []  # the round the command was sent naming, for the retry
        self.gone_out = False  # set once the command may have gone out

    async def run(self) -> tuple[CommandResult, list[WireEnvelope]]:
        args, client = self.args, self.client
        async with client:
            if _needs_round(self.command):
                try:
                    known = (args.round, True) if args.round else await _table_round(args, client)
                except TimeoutError as error:
                    raise RoundNotRead from error
                except ProjectionError as error:  # a log the handler did not write
                    raise RoundNotRead(error_text(error)) from error
                self.command = naming_round(self.command, *known)
                self.named.append(getattr(self.command, "round", 0))
            self.gone_out = True
            result = await client.execute(
                args.stream_id,
                self.command,
                command_id=self.command_id,
                timeout=args.timeout,
                sent_at=self.sent_at,
            )
            if not args.events:
                return result, []
            try:
                return result, await client.events(result, timeout=args.timeout)
            except (TimeoutError, KafkaError, ValueError) as error:
                # the result stands: printed below, whatever became of reading its events
                # (a broker error, or an event this version cannot read: ValueError)
                print(
                    f"blackjack send: its events were not read: {error_text(error)}",
                    file=sys.stderr,
                )
                return result, []

    def again(self) -> str:
        """Whatever failed once the command may have gone out, its ids are said: a resend
        under them is answered once, where a new command line makes a new id."""
        rounds = "".join(f" --round {n}" for n in self.named)
        return (
            f"send it again with --command-id {self.command_id} "
            f"--sent-at {self.sent_at.isoformat()}{rounds}"
        )

    def failed(self, error: BaseException) -> str:
        """What to tell of a sending that got no result it could print."""
        command_id, timeout = self.command_id, self.args.timeout
        if isinstance(error, RoundNotRead):
            if error.args:
                return (
                    f"the table's round could not be read from its events ({error.args[0]}; "
                    "nothing was sent): name it with --round N"
                )
            return (
                f"the table's round was not read within {timeout} s "
                "(nothing was sent): name it with --round N, or give --api"
            )
        if isinstance(error, TimeoutError | SendTimedOut):  # (SendTimedOut: a KafkaError)
            waited = (
                f"the broker did not take it within {self.client.send_timeout_s} s"
                if isinstance(error, SendTimedOut)
                else f"no result within {timeout} s"
            )
            return (
                f"{waited} for command {command_id}; it may still be handled: {self.again()}; "
                "a money command resent without the first --sent-at later than the retention "
                "(7 days) is taken again"
            )
        if isinstance(error, UnreadableResult):
            return (
                f"the answer to command {command_id} cannot be read ({error}): what it did "
                "is not known; read the table's events or the query API before sending "
                f"anything new (to ask again: {self.again()})"
            )
        # before the send (the client's start, the table's round read): nothing went out, and
        # the first thing to check is where the broker is, not how to send it again
        after = (
            f"if command {command_id} went out: {self.again()}"
            if self.gone_out
            else "nothing was sent (the broker is read from BLACKJACK_KAFKA_BOOTSTRAP)"
        )
        return (
            f"Kafka at {self.client.bootstrap}: {error_text(error)} "
            f"(the service's topics under the prefix {self.client.topics.prefix!r}, and the "
            f"BLACKJACK_KAFKA_* security settings, must match the service's); {after}"
        )


def _printed(result: CommandResult, events: list[WireEnvelope]) -> int:
    """The result's line, then a line per event; the exit code: 0 accepted, 1 rejected."""
    try:
        print(result.model_dump_json())
        for envelope in events:  # after the result line, so a script can read that one first
            data = envelope.data.model_dump(mode="json", exclude={"type", "version"})
            shown = {name: _short(value) for name, value in data.items()}
            line = json.dumps(shown, separators=(",", ":"))
            print(f"  {envelope.sequence} {envelope.type} {line}")
        sys.stdout.flush()
    except BrokenPipeError:
        # `blackjack send ... | head -1`: the reader has what it wanted. The command was
        # handled all the same, so the exit code still says how, not a traceback's 1
        # ("rejected"); stdout goes to /dev/null so the interpreter's last flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if result.status == "accepted" else 1


class RoundNotRead(Exception):
    """The table's events were not read in time, or could not be folded (its argument says
    why), to name the command's round: not sent."""


def _needs_round(command: TableCommand | AnyWalletCommand) -> bool:
    return type(command) in ROUND_COMMANDS and getattr(command, "round", None) is None


async def _table_round(args: argparse.Namespace, client: BlackjackClient) -> tuple[int, bool]:
    """The table's last round and whether it is open, as its public events say."""
    from blackjack.play.follow import TableFollower
    from blackjack.play.read_model import ReadModelApi

    token = os.environ.get("BLACKJACK_API_TOKEN", "").strip() or None
    follower = TableFollower(
        client.bootstrap,
        args.stream_id,
        client.topics,
        security=client.security,
        client_id=f"{client.client_id}-round",
        read_model=ReadModelApi(args.api, token) if args.api else None,
    )
    async with follower:
        await follower.caught_up(args.timeout)
        view = follower.table.view
        return view.round, view.round_open


def round_number(text: str) -> int:
    """``--round``: a round number, 1 or more."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a round number, 1 or more, not {text!r}")
    return number


LONGEST_SHOWN = 80


def _short(value: object) -> object:
    """A sealed shoe is a few thousand characters of ciphertext: shown by its start."""
    if isinstance(value, str) and len(value) > LONGEST_SHOWN:
        return f"{value[:24]}... ({len(value)} characters)"
    return value


def sent_at_time(text: str) -> datetime:
    """``--sent-at``: an RFC 3339 time with its offset, as the envelope's ``sent_at``."""
    try:
        return _SENT_AT.validate_python(text)
    except ValidationError as error:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an RFC 3339 time with its offset: {in_one_line(error)}"
        ) from error


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = sub.add_parser("send", help="send one command (JSON) to a stream, print its result")
    send.add_argument("stream_id", help="the table (or wallet:<player id>) it is for")
    send.add_argument(
        "command",
        help='the command as JSON, e.g. \'{"type": "Hit", "player_id": "ann", "box": 0}\'',
    )
    send.add_argument("--command-id", help="a retry: the id of the first sending (default: new)")
    send.add_argument(
        "--sent-at",
        type=sent_at_time,
        help="a retry: the sent_at of the first sending, RFC 3339 with its offset (default: "
        "now); a money command's copy is told by it once its id is let go",
    )
    send.add_argument(
        "--timeout", type=wait_seconds, default=10.0, help="seconds to wait for the result"
    )
    send.add_argument(
        "--round",
        type=round_number,
        help="the round a bet, an insurance decision or a move is meant for (default: the "
        "one its JSON names, else the table's, read first): refused stale_command once over",
    )
    send.add_argument(
        "--api",
        metavar="URL",
        default=os.environ.get("BLACKJACK_API_URL", "").strip() or None,
        help="the read model's query API (default BLACKJACK_API_URL), where the table's round "
        "is read; without it, from the start of the table's partition",
    )
    send.add_argument(
        "--no-events",
        dest="events",
        action="store_false",
        help="print only the result, not the events the command wrote",
    )
    send.set_defaults(handler=_send)
