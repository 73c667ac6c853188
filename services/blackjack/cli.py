"""The ``blackjack`` command line: thin entry points over the library."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from blackjack.stopping import hold_stop_signals

EXIT_BROKEN_PIPE = 128 + 13  # as a shell reports a process that SIGPIPE ended
DESCRIPTION = (
    "The blackjack game server (serve) and its tools: send commands, play at the terminal, "
    "replay and audit, the read model, the math of each variant. `blackjack COMMAND --help` "
    "for each; README.md and docs/ for the rest."
)


WRITE_HELP = "write them from the code (without it: check them, exit 1 when one is out of date)"


def _scenario(args: argparse.Namespace) -> int:
    import yaml
    from pydantic import ValidationError

    from blackjack.domain.rejections import in_one_line
    from blackjack.scenario import ScenarioError, load, run

    try:
        scenario = load(Path(args.file))
    except OSError as error:
        print(f"blackjack scenario: {args.file}: {error.strerror}", file=sys.stderr)
        return 2
    except (ValueError, ValidationError, yaml.YAMLError) as error:
        said = in_one_line(error, "scenario") if isinstance(error, ValidationError) else str(error)
        print(f"blackjack scenario: {args.file} is not a scenario: {said}", file=sys.stderr)
        return 2
    try:
        summary = run(scenario)
    except ScenarioError as error:
        print(f"blackjack scenario: {args.file} cannot be played: {error}", file=sys.stderr)
        return 2
    return 1 if summary["failures"] else 0


def _schemas(args: argparse.Namespace) -> int:
    from blackjack.messages.schemas import drift, write

    root = Path(args.dir)
    if args.write:
        for path in write(root):
            print(path)
        return 0
    problems = drift(root)
    for problem in problems:
        print(f"out of date: {problem}")
    if not problems:
        print(f"{root}: every schema is up to date")
    return 1 if problems else 0


def _openapi(args: argparse.Namespace) -> int:
    from blackjack.api.contract import drifted, write
    from blackjack.documents import check_or_write

    return check_or_write(Path(args.path), args.write, drifted, write)


def build_parser() -> argparse.ArgumentParser:
    # imported here, not with this module: ``main`` holds the stop signals before them
    from blackjack import client_cli
    from blackjack.audit import cli as audit_cli
    from blackjack.loadtest.cli import register as register_loadtest
    from blackjack.play.cli import register as register_play
    from blackjack.projection_worker import cli as projections_cli
    from blackjack.service_cli import register as register_service
    from blackjack.simulation.commands import register as register_math

    parser = argparse.ArgumentParser(prog="blackjack", description=DESCRIPTION)
    # COMMAND, not the choices: their list was one line of 174 columns (listed below it)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    scenario = sub.add_parser("scenario", help="play a scripted round file through the decider")
    scenario.add_argument("file", help="a scenario's YAML file, e.g. from tests/scenarios/")
    scenario.set_defaults(handler=_scenario)
    schemas = sub.add_parser("schemas", help="check (or --write) the JSON Schemas in schemas/")
    schemas.add_argument("--write", action="store_true", help=WRITE_HELP)
    schemas.add_argument("--dir", default="schemas", help="where they are (default: schemas)")
    schemas.set_defaults(handler=_schemas)
    openapi = sub.add_parser(
        "openapi", help="check (or --write) the query API's schemas/query-api.openapi.json"
    )
    openapi.add_argument("--write", action="store_true", help=WRITE_HELP)
    openapi.add_argument(
        "--path", default="schemas/query-api.openapi.json", help="default: %(default)s"
    )
    openapi.set_defaults(handler=_openapi)
    projections_cli.register(sub)
    audit_cli.register(sub)
    client_cli.register(sub)
    register_math(sub)
    register_service(sub)
    register_loadtest(sub)
    register_play(sub)
    return parser


SERVICES = {("serve",), ("handler",), ("projections", "run")}
"""The long-running commands: they take the stop signals held while importing (and stop
cleanly), and log JSON lines on stdout (a one-shot command's stdout is its answer)."""


def log_fatal(error: Exception) -> None:
    """A service that cannot start or go on (``serve``, ``handler``, ``projections run``) says
    why in its log too, a JSON line on stdout as all its others, for the log pipeline that
    reads them and alerts on ``critical``: the line on stderr alone was plain text. Not for
    an error the service has logged so already (a projection worker's store of another log)."""
    if getattr(error, "logged", False):
        return
    import structlog

    from blackjack.configuration import ConfigurationError
    from blackjack.observability.logging import configure_logging

    try:
        configure_logging(os.environ.get("BLACKJACK_LOG_LEVEL", "INFO"))
    except ConfigurationError:  # the level refused (what this says, perhaps): the default
        configure_logging()
    code = getattr(error, "exit_code", 1)
    structlog.get_logger().critical("cannot go on", error=str(error), exit_code=code)


def main(argv: Sequence[str] | None = None) -> int:
    # First: the imports of a command take seconds, and a SIGTERM meanwhile ended Python
    # itself (status 143); ``serve``, ``handler`` and ``projections run`` take it and stop
    # cleanly, any other command as before (blackjack/stopping.py).
    release = hold_stop_signals()
    from blackjack.configuration import ConfigurationError
    from blackjack.observability.logging import log_to_stderr

    log_to_stderr()  # stdout is the command's answer; `serve` and the workers log JSON there

    words = [word for word in (sys.argv[1:] if argv is None else argv) if word[:1] != "-"]
    service = tuple(words[:1]) in SERVICES or tuple(words[:2]) in SERVICES
    try:  # the parser's defaults read settings too
        args = build_parser().parse_args(argv)
        if not service:
            release()
        code: int = args.handler(args)
    except ConfigurationError as error:
        print(f"blackjack: {error}", file=sys.stderr)
        if service:
            log_fatal(error)
        return error.exit_code
    except BrokenPipeError:
        # `blackjack scenario FILE | head`: the reader stopped reading. Exit as a program that
        # SIGPIPE ended does (128 + 13), not with a traceback and 1, which for scenario, replay
        # and audit means that something failed; stdout goes to /dev/null so the
        # interpreter's last flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    finally:
        release()
    return code


if __name__ == "__main__":
    sys.exit(main())
