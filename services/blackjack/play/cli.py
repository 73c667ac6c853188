"""``blackjack play TABLE --player ID``: play a table of the running service at a terminal.

    blackjack play my-table --player alice --open mini-h17 --deposit 100
    blackjack play mt-1 --player bob --seat 1      # a shared table, funded by BuyIn

The broker, topic prefix and security settings are the service's (``BLACKJACK_KAFKA_*``,
``BLACKJACK_TOPIC_PREFIX``). Lines are read from standard input, so a script can play too.
The table's history comes from the read model's query API (``--api``, ``BLACKJACK_API_URL``;
``BLACKJACK_API_TOKEN`` when it has tokens), then from the topic; without one, from the start
of the table's partition of ``blackjack.events`` (every table hashed to it), which it says.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import re
import sys
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from blackjack.arguments import wait_seconds

if TYPE_CHECKING:  # imported when a game starts: every other command starts without them
    from rich.console import Console

    from blackjack.bus.settings import KafkaSettings
    from blackjack.play.session import PlaySession

VARIANTS = ("atlantic-city", "atlantic-city-multi", "mini-h17", "mini-s17", "surrender")
"""The presets' names (``domain.rules.PRESETS``, which building the rules would import for
every command of the command line; ``tests/unit/test_play.py`` holds them equal)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from blackjack.play.help import HELP

    summary = "play a table of the running service at the terminal"
    play = sub.add_parser(
        "play",
        help=summary,
        description=f"{summary}: blackjack play my-table --player alice --open mini-h17 "
        "--deposit 100; or a shared table, funded from the player's wallet: blackjack play "
        "mt-1 --player bob --seat 1. Lines are read from standard input, so a script can "
        "play too.",
        # the moves' columns as they are (argparse refills a paragraph to the width)
        epilog=f"what you type, once at the table:\n{HELP}",
        formatter_class=_Formatter,
    )
    play.add_argument("table", type=table_id, help="the table's stream id")
    play.add_argument("--player", type=player_id, required=True, help="your player id")
    play.add_argument("--open", metavar="VARIANT", choices=VARIANTS, help="open it first")
    play.add_argument(
        "--seat", type=int, help="the seat to sit at (default 0), or to move to if seated"
    )
    play.add_argument("--deposit", metavar="AMOUNT", help="deposit this much first (e.g. 100)")
    play.add_argument(
        "--timeout", type=wait_seconds, default=10.0, help="seconds to wait for a result"
    )
    play.add_argument(
        "--api",
        metavar="URL",
        default=os.environ.get("BLACKJACK_API_URL", "").strip() or None,
        help="the read model's query API (default BLACKJACK_API_URL), where the table's "
        "history is read first; without it, from the start of the table's partition",
    )
    play.set_defaults(handler=_play)


class _Formatter(argparse.HelpFormatter):
    """A text of several lines (the moves' columns) kept as it is, a paragraph refilled to
    the width (argparse's default refilled the moves' table into one paragraph)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def table_id(text: str) -> str:
    """A table's stream id, as a command's envelope takes it (checked before connecting: a
    wrong one was a pydantic traceback at the first command)."""
    from blackjack.domain.wallet import MAX_STREAM_ID, STREAM_ID_PATTERN, is_wallet_stream

    if not (1 <= len(text) <= MAX_STREAM_ID and re.fullmatch(STREAM_ID_PATTERN, text)):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a stream id (1 to {MAX_STREAM_ID} of A-Z a-z 0-9 . _ : @ -)"
        )
    if is_wallet_stream(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a wallet, not a table")
    return text


def player_id(text: str) -> str:
    """A player id as the commands take it (checked before connecting: one the handler
    refuses was a pydantic error at the first command, after ``--open`` had opened the
    table)."""
    from blackjack.domain.commands import unprintable

    if not 1 <= len(text) <= 128:
        raise argparse.ArgumentTypeError("a player id has 1 to 128 characters")
    said = unprintable(text)
    if said is not None:
        raise argparse.ArgumentTypeError(f"a player id may not hold {said}")
    return text


def _play(args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaError

    from blackjack.bus.settings import KafkaSettings
    from blackjack.play.screen import ScreenConsole

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # one line below says what failed
    console = ScreenConsole(highlight=False)
    settings = KafkaSettings.from_env()
    try:
        return asyncio.run(_session(args, settings, console))
    except KafkaError as error:
        print(
            f"blackjack play: Kafka at {settings.bootstrap}: {type(error).__name__} {error}",
            file=sys.stderr,
        )
        return 2
    except (TimeoutError, LookupError) as error:
        said = str(error) or f"no answer from the service in {args.timeout:g} s"
        print(f"blackjack play: {type(error).__name__} {said}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a fold that fails, an answer that cannot be read: one line
        said = "; ".join(str(error).splitlines())
        print(f"blackjack play: {type(error).__name__}: {said}", file=sys.stderr)
        return 1


async def _session(args: argparse.Namespace, settings: KafkaSettings, console: Console) -> int:
    from rich.text import Text

    from blackjack.bus.topics import Topics
    from blackjack.client import BlackjackClient
    from blackjack.domain.wallet import has_wallet_stream
    from blackjack.play.follow import TableFollower, WalletFollower
    from blackjack.play.help import HELP
    from blackjack.play.moves import NotAMove
    from blackjack.play.read_model import ReadModelApi
    from blackjack.play.session import PlaySession
    from blackjack.play.table_rules import shared_table

    topics = Topics(settings.topic_prefix)
    name = f"blackjack-play-{uuid.uuid4().hex[:8]}"
    client = BlackjackClient(settings.bootstrap, topics, security=settings.security, client_id=name)
    read_model = None
    if args.api:
        read_model = ReadModelApi(
            args.api, os.environ.get("BLACKJACK_API_TOKEN", "").strip() or None
        )
    follower = TableFollower(
        settings.bootstrap,
        args.table,
        topics,
        security=settings.security,
        client_id=name,
        read_model=read_model,
    )
    async with client, follower:
        if follower.from_start:
            print(f"blackjack play: {follower.joined}", file=sys.stderr)
        await follower.caught_up()
        if not follower.table.view.opened and not args.open:  # nothing sent: every move refused
            print(
                f"blackjack play: table {args.table} has never been opened (none in "
                f"{topics.events}); nothing sent. --open VARIANT opens it "
                f"({', '.join(VARIANTS)}); or check the table's id and BLACKJACK_TOPIC_PREFIX",
                file=sys.stderr,
            )
            return 2
        variant = follower.table.view.variant
        if args.open and follower.table.view.opened and variant != args.open:
            # nothing sent: a --deposit went to a table of rules the player did not ask for
            print(
                f"blackjack play: table {args.table} is open as {variant}, not {args.open} "
                "(--open); nothing sent. Leave out --open to play it as it is, or open another "
                "table's id",
                file=sys.stderr,
            )
            return 2
        session = PlaySession(client, follower, args.player, timeout=args.timeout)
        try:
            await _prepare(args, session, console)
        except NotAMove as error:
            print(f"blackjack play: --deposit: {error}", file=sys.stderr)
            return 2
        present: asyncio.Task[None] | None = None
        try:  # the wallet's follower too is stopped on every way out (a failed catch-up, ^C)
            if shared_table(follower.table) and has_wallet_stream(args.player):  # by wallet
                session.wallet = WalletFollower(
                    settings.bootstrap,
                    args.player,
                    topics,
                    security=settings.security,
                    client_id=name,
                    read_model=read_model,
                )
                await session.wallet.start()
                if session.wallet.from_start and read_model is not None:  # said once above
                    print(f"blackjack play: {session.wallet.joined}", file=sys.stderr)
                await session.wallet.caught_up()
            console.print(session.screen())
            console.print(Text(HELP, style="dim"))  # text, not markup: "[box N]" shown
            present = asyncio.create_task(session.keep_present(heartbeat_every()))
            while not session.over:
                line = await _next_line(session, console)
                if line is None:  # the end of the input: said as on ``q``
                    for shown in await session.quit():
                        console.print(shown)
                    break
                for shown in await session.handle(line):
                    console.print(shown)
        finally:
            if present is not None:
                present.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await present
            if session.wallet is not None:
                await session.wallet.stop()
    return 0


def heartbeat_every(env: Mapping[str, str] = os.environ) -> float:
    """How often a session says its player is still here: a third of the service's presence
    timeout (``BLACKJACK_PRESENCE_TIMEOUT_S``, the service's own setting; 30 s by default)."""
    text = env.get("BLACKJACK_PRESENCE_TIMEOUT_S", "").strip()
    try:
        timeout = float(text) if text else 30.0
    except ValueError:
        timeout = 30.0
    if not math.isfinite(timeout):  # nan slept no time: a Reconnect as fast as answered
        timeout = 30.0
    return max(timeout, 0.3) / 3


REMIND_S = 5.0
"""Seconds before a deadline the clock waits on the player for, when they are reminded."""


async def _next_line(session: PlaySession, console: Console) -> str | None:
    """The player's next line; meanwhile the table is drawn again whenever someone else
    changes it (another player, the service's clock), so a turn that comes is seen, and a
    player the clock waits on is told when ``REMIND_S`` seconds are left."""
    from blackjack.play.screen import clock_reminder

    console.print("> ", end="")
    reading = asyncio.ensure_future(_line_aside())
    followers = [session.follower] + ([session.wallet] if session.wallet is not None else [])
    shown = [follower.sequence for follower in followers]
    try:
        while not reading.done():
            changes = {asyncio.ensure_future(f.changed(timeout=60)) for f in followers}
            wait = None
            deadline = session.follower.table.view.deadline
            if deadline is not None and deadline not in session.reminded:
                wait = max(0.0, (deadline - datetime.now(UTC)).total_seconds() - REMIND_S)
            await asyncio.wait(
                {reading, *changes}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
            for change in changes:
                change.cancel()
            now = datetime.now(UTC)
            due = deadline is not None and (deadline - now).total_seconds() <= REMIND_S
            if (
                deadline is not None
                and due
                and deadline not in session.reminded
                and not reading.done()
            ):
                session.reminded.add(deadline)
                said = clock_reminder(session.follower.table, session.player_id, now)
                if said is not None:
                    console.print()  # the prompt's line ends: what follows starts at column 0
                    console.print(said, style="bold yellow")
                    console.print("> ", end="")
            for follower in followers:
                if follower.failure is not None:
                    raise follower.failure
            folded = [follower.sequence for follower in followers]
            if folded != shown and not reading.done():
                shown = folded
                # after "> ": drawn from there, the panel's 80 columns took 82 and wrapped
                console.print()
                console.print(session.screen())
                console.print("> ", end="")  # the prompt the screen pushed up
    finally:
        reading.cancel()  # the thread reading stays blocked, a daemon: the process may end
    return reading.result()


async def _line_aside() -> str | None:
    """The next line of standard input, read by a daemon thread of its own.

    Not ``asyncio.to_thread(input)``: a thread of asyncio's executor blocked in ``input()``
    held the process's end (``asyncio.run`` and then the interpreter join it) until a line
    was typed, after Ctrl-C or a failure. ``os.read`` holds no lock of ``sys.stdin`` either,
    which the interpreter takes at exit."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str | None] = loop.create_future()

    def deliver(text: str | None, error: Exception | None) -> None:
        if line.done():
            return
        if error is not None:
            line.set_exception(error)
        else:
            line.set_result(text)

    def read() -> None:
        try:
            text, error = _read_line(), None
        except Exception as failed:  # an input that cannot be read: said as one line
            text, error = None, failed
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(deliver, text, error)

    threading.Thread(target=read, name="blackjack-play-input", daemon=True).start()
    return await line


async def _prepare(args: argparse.Namespace, session: PlaySession, console: Console) -> None:
    """Open the table, sit down and deposit, as asked and as needed, one after the other."""
    from rich.text import Text

    from blackjack.domain import commands as cmd
    from blackjack.domain import wallet as wl
    from blackjack.domain.rules import preset
    from blackjack.play.moves import amount_in_minor_units
    from blackjack.play.screen import result_line
    from blackjack.play.table_rules import shared_table

    table = session.follower.table

    async def send(command: cmd.TableCommand | wl.AnyWalletCommand) -> bool:
        result = await session.send(command)
        console.print(result_line(type(command).__name__, result, table.view.currency or "USD"))
        return result.status == "accepted"

    amount = None
    if args.deposit:  # read first: a wrong amount opens nothing and sits nobody down
        currency = table.view.currency
        if currency is None and args.open:
            currency = preset(args.open).currency
        amount = amount_in_minor_units(args.deposit, currency or "USD")
    if args.open and not table.view.opened:
        await send(cmd.OpenTable(variant=args.open))
    account = table.accounts.get(args.player)
    if account is None or not account.seated:
        seated = await send(cmd.SitDown(player_id=args.player, seat=args.seat or 0))
        if not seated and amount is not None:
            # No seat, no money to the table: at a shared table the cashier's deposit and a
            # buy-in the table declines would have gone out and come back for nothing.
            console.print(Text("--deposit not made: you have no seat at this table", style="red"))
            amount = None
    else:
        if not account.connected:  # back after a disconnection: the table sees it at once
            await send(cmd.Reconnect(player_id=args.player))
        if args.seat is not None and args.seat != account.seat:  # was ignored without a word
            await send(cmd.MoveSeat(player_id=args.player, seat=args.seat))
    if amount is not None:
        currency = table.view.currency or "USD"
        if shared_table(table):  # funded by the wallet: the cashier, then a buy-in
            await send(wl.WalletDeposit(player_id=args.player, amount=amount, currency=currency))
            buy_in = wl.BuyIn(player_id=args.player, table_id=args.table, amount=amount)
            for line in await session.buy_in(buy_in):
                console.print(line)
        else:
            await send(cmd.Deposit(player_id=args.player, amount=amount))


def _read_line(fd: int = 0) -> str | None:
    """One line of ``fd`` (standard input) without its end, ``None`` at its end: byte by byte,
    so that nothing past the line is read (a line at a time from a terminal anyway)."""
    data = bytearray()
    while (byte := os.read(fd, 1)) and byte != b"\n":
        data += byte
    if not byte and not data:
        return None
    return data.decode(errors="replace").rstrip("\r")
