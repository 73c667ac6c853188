"""``blackjack play``'s command line: a session that ends while a line is awaited (Ctrl-C,
the table's follower failed) ends the process at once (a thread of asyncio's default executor
blocked in ``input()`` held the exit, ``asyncio.run`` and then the interpreter join it, until
the player pressed Enter); what goes wrong is one line, not a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.text import Text

from blackjack.cli import build_parser
from blackjack.play import cli
from blackjack.play.help import HELP
from blackjack.projections.projector import StreamProjection
from blackjack.projections.views import ProjectionError

SERVICES = str(Path(__file__).resolve().parents[2] / "services")

SESSION_THAT_FAILS_WHILE_READING = textwrap.dedent(
    """
    import asyncio

    from rich.console import Console

    from blackjack.play import cli


    class Follower:
        sequence = 0
        failure = None

        class table:
            class view:
                deadline = None

        async def changed(self, timeout):
            await asyncio.sleep(0.2)
            self.failure = RuntimeError("the table's follower failed")
            return True


    class Session:
        follower = Follower()
        wallet = None


    asyncio.run(cli._next_line(Session(), Console()))
    """
)


def test_a_session_that_ends_while_a_line_is_awaited_exits_at_once(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": SERVICES}
    errors = tmp_path / "stderr"
    started = time.monotonic()
    with (
        errors.open("wb") as stderr,
        subprocess.Popen(
            [sys.executable, "-c", SESSION_THAT_FAILS_WHILE_READING],
            stdin=subprocess.PIPE,  # held open, nothing typed
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
        ) as process,
    ):
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError("the process waited for a line after its session ended") from None
        finally:
            assert process.stdin is not None
            process.stdin.close()
    assert process.returncode == 1, errors.read_text()
    assert "the table's follower failed" in errors.read_text()
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    "argv",
    [
        ["play", "my table", "--player", "alice"],  # a pydantic traceback at the first command
        ["play", "t" * 129, "--player", "alice"],
        ["play", "wallet:alice", "--player", "alice"],  # a wallet's events, folded as a table's
        ["play", "my-table", "--player", ""],
        ["play", "my-table", "--player", "a" * 129],
        # the commands refuse them (test_unprintable_text): the table was opened, then a
        # pydantic error
        ["play", "my-table", "--player", "a\x1b[2Jb", "--open", "mini-h17"],
        ["play", "my-table", "--player", "\u202eecila"],
    ],
)
def test_a_wrong_table_or_player_is_refused_before_connecting(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    assert "blackjack play: error: argument" in capsys.readouterr().err


def test_a_failure_during_the_session_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def failing(*_: object) -> int:
        raise ProjectionError("my-table: event 7 follows 5")

    monkeypatch.setattr(cli, "_session", failing)
    args = build_parser().parse_args(["play", "my-table", "--player", "alice"])
    assert cli._play(args) == 1
    err = capsys.readouterr().err
    assert err == "blackjack play: ProjectionError: my-table: event 7 follows 5\n"


class RecordingSession:
    """A play session for ``_prepare`` that records what it is sent (buy-ins too) and answers
    accepted, or rejected with the code ``refused`` gives the command's type."""

    def __init__(self, table: StreamProjection, refused: dict[type, str] | None = None) -> None:
        self.follower = SimpleNamespace(table=table)
        self.refused = refused or {}
        self.sent: list[object] = []

    async def send(self, command: object) -> SimpleNamespace:
        self.sent.append(command)
        code = self.refused.get(type(command))
        if code is not None:
            rejection = SimpleNamespace(code=code, message="")
            return SimpleNamespace(status="rejected", rejection=rejection)
        return SimpleNamespace(status="accepted", rejection=None)

    async def buy_in(self, command: object) -> list[str]:
        self.sent.append(command)
        return []


async def test_a_wrong_deposit_is_refused_before_anything_is_sent() -> None:
    """``--open mini-h17 --deposit 5.555``: the table was opened and the player seated before
    the amount was read and refused."""
    from blackjack.play.moves import NotAMove

    session = RecordingSession(StreamProjection.new("my-table"))
    args = build_parser().parse_args(
        ["play", "my-table", "--player", "alice", "--open", "mini-h17", "--deposit", "5.555"]
    )
    with pytest.raises(NotAMove, match="more than 2 decimals"):
        await cli._prepare(args, session, Console())  # type: ignore[arg-type]
    assert session.sent == []


def shared_table(players: dict[str, int]) -> StreamProjection:
    """An atlantic-city-multi table with these players seated, as a follower folds it."""
    from blackjack.messages.sealing import ShoeSeal
    from blackjack.messages.wire import to_wire
    from tests.integration.conftest_projections import Script

    script = Script("atlantic-city-multi", [], players=players)
    table = StreamProjection.new(script.stream_id)
    seal = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    for envelope in script.envelopes:
        table.apply(to_wire(envelope, seal))
    return table


async def test_a_seated_player_started_with_another_seat_moves_there() -> None:
    """``--seat 3`` for a player seated at seat 1 was ignored without a word."""
    from blackjack.domain import commands as cmd

    table = shared_table({"bob": 0, "alice": 0})
    for seat, expected in ((["--seat", "3"], [cmd.MoveSeat(player_id="alice", seat=3)]), ([], [])):
        session = RecordingSession(table)
        args = build_parser().parse_args(["play", "table-1", "--player", "alice", *seat])
        await cli._prepare(args, session, Console())  # type: ignore[arg-type]
        assert session.sent == expected


async def test_the_wallet_follower_is_stopped_when_catching_up_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a shared table the session follows the player's wallet too. It was started before
    the ``try`` that stops it: a wallet that did not catch up in time (TimeoutError), or a
    Ctrl-C meanwhile, left its consumer connected and its task running."""
    import blackjack.client
    import blackjack.play.follow

    table = StreamProjection.new("table-1")
    table.view.opened = True  # a table never opened ends the session before the wallet's turn
    table.view.rules = {"seats": 7}  # funded from the wallet
    stopped: list[str] = []

    class Client:
        def __init__(self, *_: object, **__: object) -> None:
            pass

        async def __aenter__(self) -> Client:
            return self

        async def __aexit__(self, *_: object) -> None:
            pass

    class Follower(Client):
        sequence = 0
        failure = None
        from_start = False  # joined from a read model: nothing to say

        def __init__(self, *_: object, **__: object) -> None:
            self.table = table

        async def caught_up(self) -> None:
            pass

    class Wallet(Follower):
        async def start(self) -> None:
            pass

        async def caught_up(self) -> None:
            raise TimeoutError

        async def stop(self) -> None:
            stopped.append("wallet")

    async def prepare(*_: object) -> None:
        pass

    monkeypatch.setattr(blackjack.client, "BlackjackClient", Client)
    monkeypatch.setattr(blackjack.play.follow, "TableFollower", Follower)
    monkeypatch.setattr(blackjack.play.follow, "WalletFollower", Wallet)
    monkeypatch.setattr(cli, "_prepare", prepare)
    args = build_parser().parse_args(["play", "table-1", "--player", "alice"])
    settings = SimpleNamespace(topic_prefix="", bootstrap="-", security=None)
    with pytest.raises(TimeoutError):
        await cli._session(args, settings, Console())  # type: ignore[arg-type]
    assert stopped == ["wallet"]


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "", "thirty"])
def test_a_presence_timeout_that_is_no_number_of_seconds_beats_every_10_s(text: str) -> None:
    """``BLACKJACK_PRESENCE_TIMEOUT_S=nan`` gave a nan interval: the heartbeat never slept
    and sent a Reconnect as fast as the table answered; ``inf`` never sent one."""
    assert cli.heartbeat_every({"BLACKJACK_PRESENCE_TIMEOUT_S": text}) == 10.0


async def test_the_clock_s_reminder_is_said_once_a_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A player told the 5 s reminder who then typed a line that is not a move (help,
    history, a typo) was told it again at each line, the same deadline: the deadlines
    reminded of were forgotten with each line read."""
    import asyncio
    from datetime import UTC, datetime, timedelta

    import blackjack.play.screen

    deadline = datetime.now(UTC) + timedelta(seconds=3)

    class Follower:
        sequence = 0
        failure = None

        class table:  # noqa: N801
            class view:  # noqa: N801
                pass

        async def changed(self, timeout: float) -> bool:
            await asyncio.sleep(timeout)
            return False

    Follower.table.view.deadline = deadline  # type: ignore[attr-defined]

    class Session:
        follower = Follower()
        wallet = None
        player_id = "ann"
        reminded: set[datetime] = set()

    async def a_line() -> str:
        await asyncio.sleep(0.05)
        return "help"

    monkeypatch.setattr(cli, "_line_aside", a_line)
    monkeypatch.setattr(blackjack.play.screen, "clock_reminder", lambda *_: "5 s left")
    console = Console(record=True, width=200)
    session = Session()
    for _ in range(3):
        assert await cli._next_line(session, console) == "help"  # type: ignore[arg-type]
    assert console.export_text().count("5 s left") == 1


async def test_the_table_drawn_again_while_a_line_is_awaited_starts_on_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a shared table the screen is drawn again when another player moves, while the
    prompt "> " waits for a line: the panel was printed after it, its top border at column 2,
    82 columns on an 80-column terminal (wrapped, the frame broken). So was the clock's
    reminder ("> 5 s left ...")."""
    import asyncio

    from rich.panel import Panel

    drawn = asyncio.Event()

    class Follower:
        sequence = 0
        failure = None

        class table:  # noqa: N801
            class view:  # noqa: N801
                deadline = None

        async def changed(self, timeout: float) -> bool:
            if self.sequence:  # nothing more moves
                await asyncio.Event().wait()
            self.sequence += 1  # another player moved, while the prompt waits
            return True

    class Session:
        follower = Follower()
        wallet = None
        player_id = "ann"
        reminded: set[object] = set()

        def screen(self) -> Panel:
            drawn.set()
            return Panel("Box 1 (bob)  bet 5.00", title="mt-1")

    async def a_line() -> str:
        await drawn.wait()  # the line comes once the table has been drawn again (not a race)
        return "s"

    monkeypatch.setattr(cli, "_line_aside", a_line)
    console = Console(record=True, width=80, color_system=None)
    assert await cli._next_line(Session(), console) == "s"  # type: ignore[arg-type]
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80, lines
    assert any(line.startswith("╭") and " mt-1 " in line for line in lines), lines


async def test_a_player_refused_a_seat_sends_no_deposit() -> None:
    """``--deposit 50`` at a shared table whose seat is taken: the seat was refused, and the
    cashier's deposit and a buy-in the table then declined went out anyway (refunded: money
    moved out and back for nothing)."""
    from blackjack.domain import commands as cmd

    session = RecordingSession(shared_table({"bob": 0}), refused={cmd.SitDown: "seat_taken"})
    args = build_parser().parse_args(
        ["play", "table-1", "--player", "alice", "--seat", "0", "--deposit", "50"]
    )
    console = Console(record=True, width=120)
    await cli._prepare(args, session, console)  # type: ignore[arg-type]
    assert session.sent == [cmd.SitDown(player_id="alice", seat=0)]
    assert "--deposit not made: you have no seat at this table" in console.export_text()


def test_the_session_prints_through_the_console_that_keeps_control_characters_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from blackjack.play.screen import ScreenConsole

    consoles: list[object] = []

    async def session(args: object, settings: object, console: object) -> int:
        consoles.append(console)
        return 0

    monkeypatch.setattr(cli, "_session", session)
    assert cli._play(build_parser().parse_args(["play", "my-table", "--player", "alice"])) == 0
    [console] = consoles
    assert isinstance(console, ScreenConsole)


def _help_lines(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    return lines


def test_play_help_fits_80_columns_piped() -> None:
    """``blackjack play --help`` through a pipe (no terminal: argparse takes 80 columns) fits
    them and lists the moves in their columns; ``blackjack --help`` too (its subcommands'
    names were one line of 174 columns)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = SERVICES
    said = {}
    for args in (("play", "--help"), ("--help",)):
        done = subprocess.run(
            [sys.executable, "-m", "blackjack.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        said[args] = _help_lines(done.stdout)
    for line in HELP.splitlines():  # the moves' table as it is, not refilled
        assert line in said["play", "--help"], (line, said["play", "--help"])


_EVERY_HELP = """
import argparse, contextlib, io, sys
from blackjack.cli import build_parser

def walk(parser, path):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, [*path, name])

for path in walk(build_parser(), []):
    out = io.StringIO()
    # what `blackjack *path --help` prints (main() parses first), to a pipe's width
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args([*path, "--help"])
    print("\\x00" + " ".join(path) + "\\n" + out.getvalue(), end="")
"""


def test_every_subcommands_help_fits_80_columns_piped() -> None:
    """Every ``blackjack ... --help`` (each subcommand, the projections' too) fits 80 columns
    through a pipe without COLUMNS: the variants' lists made rules, strategy, rtp, simulate,
    bench and loadtest print lines of 81 to 98 columns."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = SERVICES
    done = subprocess.run(
        [sys.executable, "-c", _EVERY_HELP],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    helps = dict(part.split("\n", 1) for part in done.stdout.split("\x00")[1:])
    assert {"", "play", "rules", "projections", "projections report"} <= set(helps)
    wide = {
        command: [line for line in text.splitlines() if len(line) > 80]
        for command, text in helps.items()
    }
    assert not {command: lines for command, lines in wide.items() if lines}


def test_play_help_fits_an_80_column_terminal() -> None:
    """The same on a terminal of 80 columns (a pseudo-terminal whose size says so)."""
    import fcntl
    import pty
    import struct
    import termios

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = SERVICES
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "blackjack.cli", "play", "--help"],
            env=env,
            stdout=follower,
            stderr=subprocess.PIPE,
            check=True,
            timeout=60,
        )
        os.close(follower)
        follower = -1
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end closed, all read
                break
            if not chunk:
                break
            out += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    lines = _help_lines(out.decode().replace("\r\n", "\n"))
    for line in HELP.splitlines():
        assert line in lines, (line, out.decode())


def test_the_moves_shown_in_the_game_fit_80_columns_as_they_are() -> None:
    """``?`` and the session's start print the moves with rich, 80 columns without a terminal:
    lines of up to 95 columns were wrapped at column 0 in the middle of the table."""
    from blackjack.play.help import HELP_WIDTH
    from blackjack.play.moves import Help
    from blackjack.play.screen import ScreenConsole

    console = ScreenConsole(file=io.StringIO(), width=80, highlight=False, color_system=None)
    console.print(Text(Help().text))
    assert console.file.getvalue().splitlines() == HELP.splitlines()  # type: ignore[attr-defined]
    assert max(len(line) for line in HELP.splitlines()) <= HELP_WIDTH
    assert "bet 5 [box N]" in HELP
