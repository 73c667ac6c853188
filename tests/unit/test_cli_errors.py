"""A wrong setting or input file gets one line naming it and exit 2, not a traceback."""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from blackjack.audit import cli as audit_cli
from blackjack.cli import EXIT_BROKEN_PIPE, build_parser, main
from blackjack.messages.sealing import ShoeSeal

KEY = "ab" * 32


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"BLACKJACK_SHOE_KEY": "abc"}, "BLACKJACK_SHOE_KEY is not a 64-digit hex key"),
        ({"BLACKJACK_SHOE_KEY": ""}, "set BLACKJACK_SHOE_KEY"),
        ({"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_PARTITIONS": "six"}, "BLACKJACK_PARTITIONS"),
        ({"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_SNAPSHOT_EVERY": "0"}, "must be positive"),
        (
            {"BLACKJACK_SHOE_KEY": KEY, "BLACKJACK_MIN_INSYNC_REPLICAS": "2"},
            "BLACKJACK_MIN_INSYNC_REPLICAS",
        ),
        (
            {"BLACKJACK_SHOE_KEY": "", "BLACKJACK_SHOE_KEY_FILE": "/proc/no/such/dir/shoe.key"},
            "BLACKJACK_SHOE_KEY_FILE /proc/no/such/dir/shoe.key cannot be read or made",
        ),
    ],
)
def test_a_bad_setting_is_named_in_one_line(
    env: dict[str, str],
    named: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("BLACKJACK_SHOE_KEY_FILE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["handler"]) == 2
    said = capsys.readouterr()
    error = said.err
    assert named in error and "Traceback" not in error
    assert error.count("\n") == 1
    # and in the service's log, a JSON line as all its others (the SRE review: plain text
    # on stderr was all a log pipeline alerting on ``critical`` had of a handler that exits)
    [line] = said.out.splitlines()
    logged = json.loads(line)
    assert (logged["level"], logged["event"]) == ("critical", "cannot go on")
    assert logged["exit_code"] == 2
    assert logged["error"] == error.removeprefix("blackjack: ").rstrip("\n")


@pytest.mark.parametrize("command", [["handler"], ["audit-key"], ["redrive"]])
def test_a_key_file_of_raw_bytes_is_named_in_one_line(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """32 random bytes (``openssl rand 32 > shoe.key``): a ``UnicodeDecodeError`` traceback
    (audit, audit-key, redrive), or one line naming neither the file nor the variable."""
    key_file = tmp_path / "shoe.key"
    key_file.write_bytes(bytes(range(200, 232)))
    monkeypatch.delenv("BLACKJACK_SHOE_KEY", raising=False)
    monkeypatch.setenv("BLACKJACK_SHOE_KEY_FILE", str(key_file))
    monkeypatch.setenv("BLACKJACK_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    assert main(command) == 2
    error = capsys.readouterr().err
    assert f"BLACKJACK_SHOE_KEY_FILE {key_file} is not text" in error
    assert "Traceback" not in error and error.count("\n") == 1


@pytest.mark.parametrize("command", [["serve"], ["handler"], ["projections", "run"]])
def test_a_log_level_not_known_is_a_setting_named_in_one_line(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """BLACKJACK_LOG_LEVEL=LOUD ended each long-running command in a ValueError traceback and
    exit 1, which the runbook reads as a handler's loop that died (an operations review)."""
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", KEY)
    monkeypatch.setenv("BLACKJACK_LOG_LEVEL", "LOUD")
    monkeypatch.setenv("BLACKJACK_DB_URL", f"sqlite+aiosqlite:///{tmp_path}/read.db")
    assert main(command) == 2
    said = capsys.readouterr()
    assert said.err == (
        "blackjack: BLACKJACK_LOG_LEVEL (or --log-level) cannot be 'LOUD': one of DEBUG, INFO, "
        "WARNING, ERROR, CRITICAL\n"
    )
    [line] = said.out.splitlines()  # logged at the default level, the one asked for refused
    assert json.loads(line)["error"].startswith("BLACKJACK_LOG_LEVEL (or --log-level) cannot")


def test_a_one_shot_command_s_bad_setting_is_not_logged_on_its_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A one-shot command's stdout is its answer: the refusal is the stderr line alone."""
    monkeypatch.setenv("BLACKJACK_AUDIT_KEY", "abc")
    assert main(["replay", "table-1:1"]) == 2
    said = capsys.readouterr()
    assert said.out == "" and "BLACKJACK_AUDIT_KEY" in said.err


@pytest.mark.parametrize("port", ["abc", "0", "70000"])
def test_a_wrong_http_port_stops_only_serve_in_one_line(
    port: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newcomer review: BLACKJACK_HTTP_PORT=abc made every command, `blackjack strategy`
    and `audit-key` included, end in a ValueError traceback (exit 1) while building the
    parser; now `serve` alone refuses it, naming it."""
    monkeypatch.setenv("BLACKJACK_HTTP_PORT", port)
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", KEY)
    assert main(["audit-key"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["serve"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"{port!r} is not a TCP port" in error and "BLACKJACK_HTTP_PORT" in error
    assert "Traceback" not in error


def test_the_http_port_comes_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BLACKJACK_HTTP_PORT", "28080")
    assert build_parser().parse_args(["serve"]).port == 28080
    assert build_parser().parse_args(["serve", "--port", "28081"]).port == 28081
    monkeypatch.setenv("BLACKJACK_HTTP_PORT", "")  # set but blank: the default
    assert build_parser().parse_args(["serve"]).port == 8080


class ClosedPipe(io.StringIO):
    """The stdout of `blackjack ... | head -1` once head has exited."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self.fd


def test_a_closed_output_pipe_is_no_traceback_and_no_failure_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newcomer review: `blackjack scenario FILE | head -1` printed a BrokenPipeError
    traceback and exited 1, which says that an expectation failed."""
    scenario = Path(__file__).parents[1] / "scenarios" / "mini-h17-surrender-after-peek.yaml"
    with open(tmp_path / "stdout", "w") as stand_in:  # dup2 lands on this, not the real one
        monkeypatch.setattr(sys, "stdout", ClosedPipe(stand_in.fileno()))
        assert main(["scenario", str(scenario)]) == EXIT_BROKEN_PIPE == 141


def test_a_scenario_file_that_is_missing_or_not_a_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scenario", str(tmp_path / "missing.yaml")]) == 2
    assert "No such file" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("commands: [\n")
    assert main(["scenario", str(broken)]) == 2
    assert "is not a scenario" in capsys.readouterr().err
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("variant: mini-h17\n")
    assert main(["scenario", str(wrong)]) == 2
    assert "is not a scenario" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("variant: nosuch\ncommands: []\n", "cannot be played: its set-up refused: unknown_var"),
        (
            "variant: mini-h17\nrules: {decks: 0}\ncommands: []\n",
            "cannot be played: its set-up refused: invalid_rules: decks:",
        ),
        (
            "variant: mini-h17\nbalance: 99999999999999999999\ncommands: []\n",
            "cannot be played: player 'player': amount:",
        ),
        (
            "variant: mini-h17\nplayers: [{id: a}, {id: a, seat: 0}]\ncommands: []\n",
            "cannot be played: its set-up refused: already_seated",
        ),
        ("variant: mini-h17\ncommands: [{box: 0}]\n", "is not a scenario: commands: Value error"),
        ("variant: mini-h17\ncommands: [{do: [PlaceBet]}]\n", "names its command in do:"),
        ("variant: mini-h17\ncommands: [{do: Deal, at: abc}]\n", "Deal: at: seconds from 0"),
        ("variant: mini-h17\ncommands: [{do: Deal, at: 1.0e300}]\n", "Deal: at: seconds"),
        ("variant: mini-h17\ncommands: [{do: Deal, offered: 5}]\n", "offered: a list of"),
        (
            "variant: mini-h17\nbalance: 1000\nshoe: [Z]\ncommands: [{do: PlaceBet, box: 0,"
            " amount: 100}, Deal]\n",
            "cannot be played: the shoe: not a card code: 'Z'",
        ),
        (
            "variant: surrender\nbalance: 1000\nshoe: [A, A, A, A, A, A, A, A, A, A, A, A, A, A,"
            " A, A, A]\ncommands: [{do: PlaceBet, box: 0, amount: 100}, Deal]\n",
            "cannot be played: the shoe of 4 deck(s) has no A left",
        ),
    ],
)
def test_a_scenario_the_runner_cannot_play_is_one_line_and_exit_2(
    text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each was a traceback and exit 1, which the README gives to a failed expectation: a CI
    job read a broken file as a rule the engine breaks (a math review)."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    assert main(["scenario", str(scenario)]) == 2
    error = capsys.readouterr().err
    assert said in error and "Traceback" not in error and error.count("\n") == 1, error


@pytest.mark.parametrize(
    "command",
    [["rules", "--table", "t"], ["projections", "dump"], ["audit"], ["projections", "run"]],
)
@pytest.mark.parametrize(
    ("url", "said"),
    [("bogus://x", "runs on SQLite or PostgreSQL"), ("notaurl", "not a database URL")],
)
def test_a_store_url_no_store_has_is_named_in_one_line(
    command: list[str],
    url: str,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A ValueError's (or SQLAlchemy's ArgumentError's) traceback, exit 1 (a math review)."""
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", KEY)
    monkeypatch.setenv("BLACKJACK_DB_URL", url)
    assert main(command) == 2
    error = capsys.readouterr().err
    assert said in error and "BLACKJACK_DB_URL" in error and "Traceback" not in error


_IN_YEN = '{"currency": "JPY", "min_bet": 100, "max_bet": 50000}'


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["simulate", "mini-h17", "--rounds", "-5"], "argument --rounds: must be positive: -5"),
        (["simulate", "mini-h17", "--rounds", "0"], "argument --rounds: must be positive: 0"),
        (["simulate", "mini-h17", "--workers", "0"], "argument --workers: must be positive: 0"),
        (
            ["simulate", "mini-h17", "--bet", "0.50"],
            "--bet: mini-h17 takes bets of 1.00-500.00 USD, not 0.50 USD",
        ),
        (["rtp", "atlantic-city", "--bet", "600"], "takes bets of 1.00-500.00 USD, not 600.00 USD"),
        # an OverflowError's traceback (a float of the bet), and int("inf")'s
        (["rtp", "mini-h17", "--bet", "1e309"], "--bet: '1e309' is not an amount"),
        (["rtp", "mini-h17", "--bet", "9" * 5000], "--bet: 99999999999999999999..."),
        (["simulate", "mini-h17", "--bet", "inf"], "--bet: 'inf' is not an amount"),
        (["simulate", "mini-h17", "--bet", "nan"], "--bet: 'nan' is not an amount"),
        (["rtp", "mini-h17", "--bet", "5.001"], "--bet: 5.001 USD has more than 2 decimals"),
        # the bet is read in the currency of the rules the overrides make
        (
            ["rtp", "mini-h17", "--bet", "5.50", "--overrides", _IN_YEN],
            "--bet: 5.50 JPY has more than 0 decimals",
        ),
        (
            ["rtp", "atlantic-city", "--overrides", '{"currency": "JPY"}'],
            "--overrides: currency: JPY has 0 decimals and atlantic-city's USD 2: state "
            "min_bet, max_bet, blackjack_win_rounded_down_to in JPY's minor units",
        ),
        # an interval of zero width (one round), a MemoryError (10^22 rounds), --exact cut
        (["simulate", "mini-h17", "--rounds", "1"], "--rounds: from 2 (for an interval) to"),
        (["simulate", "mini-h17", "--rounds", "1" + "0" * 22], "--rounds: from 2"),
        (["rtp", "mini-h17", "--as-dealt", "--shoes", "1"], "--shoes: from 2"),
        (
            ["rtp", "mini-h17", "--as-dealt", "--shoes", "20", "--exact", "40"],
            "--exact 40: at most the shoes dealt, --shoes 20",
        ),
        # what OpenTable refuses besides the rules' own checks (a math review: a return was
        # printed for each, and simulate's engine refused the first in a traceback)
        (
            ["rtp", "mini-h17", "--overrides", '{"max_bet": 2000000000000}'],
            "--overrides: max_bet: at most 1000000000000 minor units",
        ),
        (["strategy", "mini-h17", "--overrides", '{"seats": 3}'], "--overrides: turn_seconds:"),
        (
            ["simulate", "mini-h17", "--overrides", '{"max_bet": 2000000000000}'],
            "--overrides: max_bet: at most",
        ),
        (
            ["rtp", "mini-h17", "--overrides", '{"seat_released_after_rounds_sat_out": 2}'],
            "--overrides: seat_released_after_rounds_sat_out: only a table of several seats",
        ),
        # read after parsing, its ArgumentTypeError was a traceback; 5,000 digits a ValueError's
        (["loadtest", "--bet", "nan"], "such as 5.00: 'nan' is not an amount"),
        (["loadtest", "--bet", "9" * 5000], "such as 5.00: 99999999999999999999..."),
    ],
)
def test_the_math_commands_refuse_what_no_table_plays(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A negative round count once played 19,995 rounds, zero divided by zero, and a bet the
    table refuses crashed a simulation or got a return reported for it (newcomer review)."""
    try:
        code = main(args)
    except SystemExit as exit:  # argparse's own refusal
        code = int(str(exit.code))
    assert code == 2
    error = capsys.readouterr().err
    assert named in error and "Traceback" not in error


def test_the_auditor_s_key_is_printed_from_the_master_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("BLACKJACK_SHOE_KEY_FILE", raising=False)
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", KEY)
    assert main(["audit-key"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == ShoeSeal.from_hex(KEY).audit_key_hex() and printed != KEY
    monkeypatch.delenv("BLACKJACK_SHOE_KEY")
    assert main(["audit-key"]) == 2
    assert "set BLACKJACK_SHOE_KEY" in capsys.readouterr().err
    # with both keys set the master key opens every shoe, older ones too (diff review: the
    # auditor's key won, and a shoe sealed before it stayed unverified)
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", KEY)
    monkeypatch.setenv("BLACKJACK_AUDIT_KEY", printed)
    key_id = ShoeSeal.from_hex(KEY).key_id
    assert repr(audit_cli._seal()) == f"ShoeSeal(writes=2, master=True, keys=['{key_id}'])"
    monkeypatch.delenv("BLACKJACK_SHOE_KEY")
    assert repr(audit_cli._seal()) == f"ShoeSeal(writes=2, master=False, keys=['{key_id}'])"
    # a malformed auditor's key is named in one line by the commands that read it
    monkeypatch.setenv("BLACKJACK_AUDIT_KEY", "abc")
    assert main(["replay", "table-1:1"]) == 2
    assert "BLACKJACK_AUDIT_KEY is not 64-digit hex keys" in capsys.readouterr().err


def test_the_auditor_gets_a_key_for_every_key_of_a_rotation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rotation's older keys sealed shoes the log still holds: the auditor needs their keys
    too, the current one's first, and opens with them what each sealed."""
    new, old, older = ShoeSeal.new_key_hex(), KEY, ShoeSeal.new_key_hex()
    monkeypatch.delenv("BLACKJACK_SHOE_KEY_FILE", raising=False)
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", f"{new}\n{old}  # the one before\nretired:{older}")
    assert main(["audit-key"]) == 0
    printed = capsys.readouterr().out.split()
    expected = [ShoeSeal.from_hex(key).audit_key_hex() for key in (new, old, older)]
    assert printed == expected
    monkeypatch.delenv("BLACKJACK_SHOE_KEY")
    monkeypatch.setenv("BLACKJACK_AUDIT_KEY", ",".join(printed))
    auditor = audit_cli._seal()
    assert auditor is not None
    for key in (new, old, older):
        sealed = ShoeSeal.from_hex(key).seal("table-1", 3, ("AS", "KD"), "salt")
        assert auditor.unseal("table-1", 3, sealed) == (("AS", "KD"), "salt")
    monkeypatch.setenv("BLACKJACK_AUDIT_KEY", f"{printed[0]},{printed[0]}")
    assert main(["replay", "table-1:1"]) == 2
    assert "BLACKJACK_AUDIT_KEY is not 64-digit hex keys, each given once" in (
        capsys.readouterr().err
    )


@pytest.fixture(autouse=True)
def _logging_restored(logging_left_as_it_was: None) -> None:
    """Every command here may get as far as configuring the logs."""


READERS = [
    ["projections", "dump", "--digest"],
    ["projections", "report"],
    ["projections", "interrupted"],
    ["projections", "revoke-tokens", "ann"],
    ["rules", "--table", "table-1", "--no-return"],
    ["replay", "table-1:1"],
    ["audit"],
    ["randomness", "--source", "store"],
]


@pytest.mark.parametrize("args", READERS, ids=lambda args: " ".join(args[:2]))
@pytest.mark.parametrize("made", [False, True], ids=["no file", "an empty database"])
def test_a_tool_pointed_at_no_read_model_says_so_and_makes_none(
    args: list[str],
    made: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The newcomer review: every tool that reads the read model, pointed at a store no worker
    folded into (a mistyped --db-url, or the default relative var/projections.db from another
    directory), ended in a SQLAlchemy traceback ("no such table") with exit 1, which for
    `replay` and `audit` means a mismatch found, and left an empty file and its folders
    behind. Now one line naming the store (its password hidden), exit 2, nothing made."""
    for name in ("BLACKJACK_SHOE_KEY", "BLACKJACK_SHOE_KEY_FILE", "BLACKJACK_AUDIT_KEY"):
        monkeypatch.delenv(name, raising=False)
    database = tmp_path / "nowhere" / "projections.db"
    if made:
        database.parent.mkdir()
        sqlite3.connect(database).close()  # a file, with no table in it
    url = f"sqlite+aiosqlite:///{database}"
    assert main([*args, "--db-url", url]) == 2
    error = capsys.readouterr().err
    assert f"no read model in {url}" in error and "Traceback" not in error
    assert error.count("\n") == 1
    assert database.parent.exists() == made and (database.exists() == made)
    if made:
        assert not sqlite3.connect(database).execute("SELECT name FROM sqlite_master").fetchall()


def test_a_copy_s_missing_source_names_the_option_that_gave_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store a revocation copy reads is named by ``--from``: the refusal said
    ``--db-url or BLACKJACK_DB_URL``, the target's settings, which were right."""
    target = f"sqlite+aiosqlite:///{tmp_path / 'target.db'}"
    assert main(["projections", "migrate", "--db-url", target]) == 0
    capsys.readouterr()
    source = f"sqlite+aiosqlite:///{tmp_path / 'no-such-live.db'}"
    assert main(["projections", "copy-revocations", "--from", source, "--db-url", target]) == 2
    error = capsys.readouterr().err
    assert f"no read model in {source}" in error and "Traceback" not in error
    assert "--from names the store to copy from" in error and "BLACKJACK_DB_URL" not in error
    assert not (tmp_path / "no-such-live.db").exists()


def test_a_store_named_with_a_password_is_named_without_it() -> None:
    from blackjack.projections.store import NoReadModel

    message = str(NoReadModel("postgresql+asyncpg://bj:s3cret@db.internal:5432/blackjack"))
    assert "postgresql+asyncpg://bj:***@db.internal:5432/blackjack" in message
    assert "s3cret" not in message
    default = str(NoReadModel("sqlite+aiosqlite:///var/projections.db"))
    assert "the default store, relative to the current directory" in default


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, (*path, name))
    return found


def test_every_option_of_every_command_says_what_it_is() -> None:
    """The newcomer review: `blackjack --help` opened with the docstring's ``blackjack``, and
    `--rounds`, `--seed`, `--write`, `--dir`, `--path`, `--log-level`, `--idle-days`,
    `--limit` and scenario's `file` had no word of help (the defaults of `simulate` were
    nowhere but the code); `--db-url` named BLACKJACK_DB_URL without the default store."""
    parser = build_parser()
    assert "``" not in (parser.description or "")
    bare = [
        f"blackjack {' '.join(path)} {action.dest}"
        for path, command in _commands(parser)
        for action in command._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]
    assert bare == []
    dump = dict(_commands(parser))[("projections", "dump")].format_help()
    assert "sqlite+aiosqlite:///var/projections.db" in " ".join(dump.split())


def test_a_wrong_http_address_of_the_worker_is_named_as_its_command_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``projections run --http nope`` printed its error without the command's name, which
    every other command's error line starts with."""
    assert main(["projections", "run", "--http", "nope"]) == 2
    error = capsys.readouterr().err
    assert error == "blackjack projections run: --http wants HOST:PORT, not 'nope'\n"


def test_the_report_counts_one_round_in_the_singular() -> None:
    from blackjack.projection_worker.cli import _report_line
    from blackjack.rules_sheet import Returns

    line = {
        "variant": "mini-h17",
        "currency": "USD",
        "tables_with_own_rules": 0,
        "rounds": 1,
        "cancelled": 0,
        "tables": 1,
        "player_rounds": 1,
        "initial_bets": 100,
        "wagered": 100,
        "paid": 0,
        "hold": 100,
        "rtp_percent": "0.0000",
        "return_per_initial_bet_percent": "0.0000",
    }
    said = _report_line(line, theoretical=False)
    assert "1 round settled and 0 cancelled at 1 table(s), 1 player round;" in said
    many = _report_line({**line, "rounds": 2, "player_rounds": 3}, theoretical=False)
    assert "2 rounds settled and 0 cancelled at 1 table(s), 3 player rounds;" in many
    # a line of a rule set of its own: its own return, or why there is none
    own = {**line, "own_rules": True, "rules": "f1", "rules_table": "t-1"}
    returns = Returns(rtp_percent=99.5, lowest_percent=96.25, lowest_at_bet=133)
    said = _report_line(own, theoretical=True, own_returns={"f1": returns})
    assert "(theoretical 99.5000 % under basic strategy and these rules, 96.2500 % at the " in said
    assert "lowest, at a bet of 133) (their rules: blackjack rules --table t-1)" in said
    unread = _report_line(own, theoretical=True, own_returns={"f1": None})
    assert "(theoretical: these rules cannot be read)" in unread
    assert "theoretical" not in _report_line(own, theoretical=False, own_returns={"f1": returns})


def test_every_bootstrap_option_says_where_its_default_comes_from_in_order() -> None:
    """The broker falls back to KAFKA_BOOTSTRAP before the local default (``KafkaSettings``),
    which the help of ``--bootstrap`` left out."""
    helps = {
        " ".join(path): " ".join(action.help.split())
        for path, command in _commands(build_parser())
        for action in command._actions
        if "--bootstrap" in action.option_strings and action.help
    }
    assert len(helps) >= 6  # the commands that read the broker: test below
    order = "default: BLACKJACK_KAFKA_BOOTSTRAP, else KAFKA_BOOTSTRAP, else 127.0.0.1:9092"
    assert {path: order in said for path, said in helps.items()} == dict.fromkeys(helps, True)


def test_only_the_commands_that_read_the_broker_offer_its_options() -> None:
    """The newcomer review: every command over the read model offered ``--bootstrap`` and
    ``--topic-prefix`` in its ``--help``, ``revoke-tokens``, ``dump``, ``report`` and the
    others that never read the broker included, and took them without a word."""
    broker_options = {"--bootstrap", "--topic-prefix"}
    store_commands = {
        " ".join(path): broker_options & set(command._option_string_actions)
        for path, command in _commands(build_parser())
        if "--db-url" in command._option_string_actions
    }
    reading = {path for path, options in store_commands.items() if options}
    assert reading == {
        "projections run",
        "projections rebuild",
        "audit",
        "replay",
        "randomness",
    }, reading
    assert all(store_commands[path] == broker_options for path in reading)
    assert {path for path in store_commands if path not in reading} == {
        "projections migrate",
        "projections copy-revocations",
        "projections dump",
        "projections interrupted",
        "projections report",
        "projections revoke-tokens",
        "rules",
    }
    for line in ("projections revoke-tokens alice", "projections dump", "rules"):
        build_parser().parse_args(line.split())  # a whole command line, without the option
        with pytest.raises(SystemExit) as refused:  # which the command would not use
            build_parser().parse_args([*line.split(), "--bootstrap", "h:9092"])
        assert refused.value.code == 2


@pytest.mark.parametrize(
    "command",
    [["audit"], ["replay", "t:1", "--source", "kafka"], ["projections", "rebuild"]],
)
def test_a_broker_not_reached_is_one_line_and_exit_2_not_a_finding(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A broker away, a rotated password, a missing CA: a traceback and exit 1, which for the
    audit means a finding (a security review: the audit Job reported a config error as a
    failed audit, and a failed audit could not be told from one that never ran)."""
    url = f"sqlite+aiosqlite:///{tmp_path}/live.db"
    assert main(["projections", "migrate", "--db-url", url]) == 0
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", KEY)
    monkeypatch.setenv("BLACKJACK_DB_URL", url)
    monkeypatch.setenv("BLACKJACK_KAFKA_BOOTSTRAP", "127.0.0.1:1")  # nothing listens there
    capsys.readouterr()
    assert main(command) == 2
    error = capsys.readouterr().err
    assert "Kafka at 127.0.0.1:1: KafkaConnectionError" in error, error
    assert "Traceback" not in error and "Unclosed" not in error
    # (a rebuild into a new store notes first that no revocation was carried over)
    assert len([line for line in error.splitlines() if not line.startswith("note: ")]) == 1


def test_a_projection_worker_its_acls_refuse_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without Read on its group (a security review, on a broker with ACLs): a
    ``GroupAuthorizationFailedError`` traceback and exit 1, which reads as a bug."""
    from aiokafka.errors import GroupAuthorizationFailedError

    from blackjack.projection_worker import worker

    async def refused(*args: object) -> None:
        raise GroupAuthorizationFailedError("blackjack-projections")

    monkeypatch.setattr(worker, "run_worker", refused)
    monkeypatch.setenv("BLACKJACK_DB_URL", f"sqlite+aiosqlite:///{tmp_path}/read.db")
    assert main(["projections", "run"]) == 2
    error = capsys.readouterr().err
    assert "refused the projection worker: GroupAuthorizationFailedError" in error
    assert "Read on the group blackjack-projections" in error and error.count("\n") == 1


def test_as_dealt_with_fewer_shoes_than_the_default_exact_ones_values_each_exactly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--shoes 20`` alone was refused "--exact 80: at most the shoes dealt" (a diff
    review): the default is as many as the shoes dealt at most."""
    assert main(["rtp", "mini-h17", "--as-dealt", "--shoes", "2", "--workers", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["as_dealt"]["rounds_valued_exactly"] == 2
