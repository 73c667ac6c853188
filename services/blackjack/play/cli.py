"""``blackjack play TABLE --player ID``: play a table of the running service at a terminal.

    blackjack play my-table --player alice --open mini-h17 --deposit 100
    blackjack play mt-1 --player bob --seat 1      # a shared table, funded by BuyIn

The broker, topic prefix and security settings are the service's (``BLACKJACK_KAFKA_*``,
``BLACKJACK_TOPIC_PREFIX``). Lines are read from standard input, so a script can play too.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a game starts: every other command starts without them
    from rich.console import Console

    from blackjack.bus.settings import KafkaSettings
    from blackjack.play.session import PlaySession

VARIANTS = ("atlantic-city", "atlantic-city-multi", "mini-h17", "mini-s17", "surrender")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    play = sub.add_parser("play", help="play a table of the running service at the terminal")
    play.add_argument("table", help="the table's stream id")
    play.add_argument("--player", required=True, help="your player id")
    play.add_argument("--open", metavar="VARIANT", choices=VARIANTS, help="open it first")
    play.add_argument("--seat", type=int, default=0, help="the seat to sit at (default 0)")
    play.add_argument("--deposit", metavar="AMOUNT", help="deposit this much first (e.g. 100)")
    play.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a result")
    play.set_defaults(handler=_play)


def _play(args: argparse.Namespace) -> int:
    from aiokafka.errors import KafkaError
    from rich.console import Console

    from blackjack.bus.settings import KafkaSettings

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # one line below says what failed
    console = Console(highlight=False)
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
        print(f"blackjack play: {type(error).__name__} {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


async def _session(args: argparse.Namespace, settings: KafkaSettings, console: Console) -> int:
    from blackjack.bus.topics import Topics
    from blackjack.client import BlackjackClient
    from blackjack.play.follow import TableFollower
    from blackjack.play.moves import HELP, NotAMove
    from blackjack.play.session import PlaySession

    topics = Topics(settings.topic_prefix)
    name = f"blackjack-play-{uuid.uuid4().hex[:8]}"
    client = BlackjackClient(settings.bootstrap, topics, security=settings.security, client_id=name)
    follower = TableFollower(
        settings.bootstrap, args.table, topics, security=settings.security, client_id=name
    )
    async with client, follower:
        await follower.caught_up()
        session = PlaySession(client, follower, args.player, timeout=args.timeout)
        try:
            await _prepare(args, session, console)
        except NotAMove as error:
            print(f"blackjack play: --deposit: {error}", file=sys.stderr)
            return 2
        console.print(session.screen())
        console.print(HELP, style="dim")
        keyboard = Keyboard.reading()
        while not session.over:
            line = await _next_line(session, console, keyboard)
            if line is None:
                break
            for shown in await session.handle(line):
                console.print(shown)
    return 0


async def _next_line(session: PlaySession, console: Console, keyboard: Keyboard) -> str | None:
    """The player's next line; meanwhile the table is drawn again whenever someone else
    changes it (another player, the service's clock), so a turn that comes is seen."""
    console.print("> ", end="")
    reading = asyncio.ensure_future(keyboard.lines.get())
    follower = session.follower
    shown = follower.sequence
    while not reading.done():
        changed = asyncio.ensure_future(follower.changed(timeout=60))
        await asyncio.wait({reading, changed}, return_when=asyncio.FIRST_COMPLETED)
        changed.cancel()
        if follower.failure is not None:
            raise follower.failure
        if follower.sequence > shown and not reading.done():
            shown = follower.sequence
            console.print(session.screen())
            console.print("> ", end="")  # the prompt the screen pushed up
    return reading.result()


async def _prepare(args: argparse.Namespace, session: PlaySession, console: Console) -> None:
    """Open the table, sit down and deposit, as asked and as needed, one after the other."""
    from blackjack.domain import commands as cmd
    from blackjack.domain import wallet as wl
    from blackjack.play.moves import amount_in_minor_units
    from blackjack.play.screen import result_line

    table = session.follower.table

    async def send(command: cmd.TableCommand | wl.AnyWalletCommand) -> None:
        result = await session.send(command)
        console.print(result_line(type(command).__name__, result))

    if args.open and not table.view.opened:
        await send(cmd.OpenTable(variant=args.open))
    account = table.accounts.get(args.player)
    if account is None or not account.seated:
        await send(cmd.SitDown(player_id=args.player, seat=args.seat))
    if args.deposit:
        currency = table.view.currency or "USD"
        amount = amount_in_minor_units(args.deposit, currency)
        rules = table.view.rules or {}
        if int(rules.get("seats", 1)) > 1:  # funded by the wallet: the cashier, then a buy-in
            await send(wl.WalletDeposit(player_id=args.player, amount=amount, currency=currency))
            before = session.available()
            await send(wl.BuyIn(player_id=args.player, table_id=args.table, amount=amount))
            if not await session.funded(before):
                console.print("the table has not credited the buy-in yet", style="yellow")
        else:
            await send(cmd.Deposit(player_id=args.player, amount=amount))


class Keyboard:
    """Standard input's lines, read by a daemon thread: a thread blocked reading a terminal
    must not keep the process alive after Ctrl-C (asyncio's own worker threads are joined at
    exit, so ``asyncio.to_thread(input)`` waited for one more Enter). ``None`` ends them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop = loop

    @classmethod
    def reading(cls) -> Keyboard:
        keyboard = cls(asyncio.get_running_loop())
        threading.Thread(target=keyboard._read, name="keyboard", daemon=True).start()
        return keyboard

    def _read(self) -> None:
        while True:
            line = sys.stdin.readline()
            typed = line.rstrip("\n") if line else None  # "" is the end of input
            try:
                self._loop.call_soon_threadsafe(self.lines.put_nowait, typed)
            except RuntimeError:  # the loop has closed: the session is over
                return
            if not line:
                return
