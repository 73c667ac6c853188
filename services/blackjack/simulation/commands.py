"""``blackjack rules|strategy|rtp|anchors|simulate``: a variant's rules and math from the
command line."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

from blackjack.domain.currencies import money as money_of
from blackjack.domain.rules import PRESETS, Rules, preset
from blackjack.domain.table_rules import RulesRefused as NotForATable
from blackjack.domain.table_rules import table_rules
from blackjack.play.help import HELP_WIDTH as SHEET_WIDTH
from blackjack.projection_worker.cli import add_store_options


def money(text: str) -> int:
    """``5.00`` -> 500 minor units; refuses fractions of a cent, amounts not above 0, and
    what is no amount (``inf``, ``nan``: ``int`` of one raised; ``1e309`` or thousands of
    digits: an OverflowError or ValueError later), as ``blackjack play`` reads amounts."""
    from blackjack.play.moves import NotAMove, amount_in_minor_units

    try:
        return amount_in_minor_units(text, "USD")
    except NotAMove as error:
        raise argparse.ArgumentTypeError(f"not a positive amount such as 5.00: {error}") from None


def whole_positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value


EXACT_SHOES = 80
"""``rtp --as-dealt``'s shoes with one round valued exactly, unless ``--exact`` says (at most
the shoes dealt)."""

MAX_ROUNDS = 10**12
"""The most rounds a simulation plays (some 1.5 years of one core at 20,000 a second): its
chunks are listed up front, and 10^22 rounds ended in a MemoryError's traceback."""


def sample_size(text: str) -> int:
    """A count of sampled rounds or shoes: at least 2, which an interval needs (one round
    gave a 95 % interval of zero width, a figure with no uncertainty), at most
    ``MAX_ROUNDS``."""
    value = whole_positive(text)
    if not 2 <= value <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"from 2 (for an interval) to {MAX_ROUNDS}, not {text}")
    return value


def overrides(text: str) -> dict[str, object]:
    """``--overrides '{"double_after_split": false}'``: the same JSON object of `Rules` fields
    as an ``OpenTable``'s ``overrides``, so a what-if (the surrender page without double after
    split, say) is a command, not a script."""
    try:
        found = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(found, dict):
        raise argparse.ArgumentTypeError("a JSON object of rule fields, e.g. '{\"decks\": 6}'")
    return found  # (refused as OpenTable refuses it: ``_rules``)


class RulesRefused(Exception):
    """Overrides the rules refuse, or a bet no table of them takes: named in one line with
    its ``option``, exit 2."""

    def __init__(self, message: str, option: str = "--overrides") -> None:
        super().__init__(message)
        self.option = option


def _rules(args: argparse.Namespace) -> Rules:
    """The rules of a table opened with the variant and ``--overrides``, refused as the table
    would refuse them."""
    try:
        return table_rules(args.variant, preset(args.variant), getattr(args, "overrides", {}) or {})
    except NotForATable as refusal:
        raise RulesRefused(str(refusal)) from None


def _bet(args: argparse.Namespace, rules: Rules) -> int | None:
    """``--bet 5.00`` in the minor units of the rules' currency (500 in USD; 5.50 is refused
    in JPY); a bet outside the table's limits is refused too: it has no return to report."""
    from blackjack.play.moves import NotAMove, amount_in_minor_units

    text = args.bet
    if text is None:
        return None
    try:
        bet = amount_in_minor_units(text, rules.currency)
    except NotAMove as error:
        raise RulesRefused(str(error), "--bet") from None
    refusal = bet_outside_limits(rules, bet)
    if refusal is not None:
        raise RulesRefused(refusal, "--bet")
    return bet


def bet_outside_limits(rules: Rules, bet: int) -> str | None:
    """Why a table of ``rules`` refuses a bet of ``bet`` minor units, or None: within limits."""
    if rules.min_bet <= bet <= rules.max_bet:
        return None
    cur = rules.currency
    limits = f"{money_of(rules.min_bet, cur)}-{money_of(rules.max_bet, cur)} {cur}"
    return f"{rules.name} takes bets of {limits}, not {money_of(bet, cur)} {cur}"


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    """``--overrides JSON``: the rules of a table opened with the variant and these overrides
    (``OpenTable``'s), for the math commands."""
    parser.add_argument(
        "--overrides",
        type=overrides,
        default=None,
        metavar="JSON",
        help="rule fields changed from the preset, as OpenTable's overrides "
        "(e.g. '{\"double_after_split\": false}')",
    )


def _with_rules(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except RulesRefused as error:
            print(f"blackjack {args.command}: {error.option}: {error}", file=sys.stderr)
            return 2

    return run


def _rules_sheet(args: argparse.Namespace) -> int:
    from blackjack.domain.rules import fingerprint
    from blackjack.rules_sheet import rules_sheet, table_returns

    if (args.variant is None) == (args.table is None):
        print("blackjack rules: name a variant or a --table, one of them", file=sys.stderr)
        return 2
    if args.table is None:
        rules, title = _rules(args), args.variant
    else:
        found = _table_rules(args)
        if found is None:
            print(f"blackjack rules: no table {args.table!r} in the read model", file=sys.stderr)
            return 2
        rules = found
        own = "" if rules == PRESETS.get(rules.name) else ", with its own rules"
        title = f"{args.table} ({rules.name}{own})"
    returns = None if args.no_return else table_returns(rules)
    print(f"{title}: the rules")
    for line in rules_sheet(rules, returns):  # the lines ran to 300 columns
        print(
            textwrap.fill(
                line,
                SHEET_WIDTH,
                initial_indent="- ",
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    print(f"Fingerprint (the game report's rules=apart lines): {fingerprint(rules)}")
    return 0


def _table_rules(args: argparse.Namespace) -> Rules | None:
    """The rules a table was opened with (overrides included), as the read model has them."""
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import AsyncConnection

    from blackjack.domain.rules import stored_rules
    from blackjack.projection_worker.cli import read_store
    from blackjack.projections import schema

    async def read(connection: AsyncConnection) -> Any:
        t = schema.table_views
        query = select(t.c.view["rules"]).where(t.c.stream_id == args.table)
        return (await connection.execute(query)).scalar_one_or_none()

    found = read_store(args, read, "blackjack rules --table")
    if not isinstance(found, dict):  # no such stream, or one no table was opened under
        return None
    return stored_rules(found)


def _strategy(args: argparse.Namespace) -> int:
    from blackjack.strategy import compute_strategy, render_chart

    print(render_chart(compute_strategy(_rules(args))))
    return 0


def _rtp(args: argparse.Namespace) -> int:
    from blackjack.strategy import compute_rtp

    rules = _rules(args)
    bet = _bet(args, rules)
    started = time.perf_counter()
    report = compute_rtp(rules, bet)
    line: dict[str, Any] = {
        "variant": rules.name,
        **({"overrides": args.overrides} if args.overrides else {}),
        "bet": bet,
        "rtp_percent": round(report.rtp_percent, 4),
        "house_edge_percent": round(report.house_edge_percent, 4),
        "blackjack_pays_per_unit": str(report.blackjack_win_ratio),
    }
    if args.all_bets:
        # A regulator checks the lowest return at any bet level the table accepts: searched
        # up to a proven bound, not every bet to the maximum (rules_sheet.table_returns).
        from blackjack.rules_sheet import table_returns

        returns = table_returns(rules)
        line["lowest_rtp_percent"] = round(returns.lowest_percent, 4)
        line["lowest_rtp_at_bet"] = returns.lowest_at_bet
    if args.as_dealt:
        if args.boxes > rules.boxes:
            print(
                f"blackjack rtp: {rules.name} has {rules.boxes} boxes, not {args.boxes}",
                file=sys.stderr,
            )
            return 2
        if args.exact is None:  # the default, as many as the shoes dealt at most
            args.exact = min(EXACT_SHOES, args.shoes)
        if args.exact > args.shoes:  # (it was cut to --shoes, said nowhere)
            print(
                f"blackjack rtp: --exact {args.exact}: at most the shoes dealt, --shoes "
                f"{args.shoes}",
                file=sys.stderr,
            )
            return 2
        line["as_dealt"] = _as_dealt(args, rules, bet)
    line["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(line))
    return 0


def _as_dealt(args: argparse.Namespace, rules: Rules, bet: int | None) -> dict[str, Any]:
    """The RTP as dealt to the reshuffle point (``blackjack.simulation.dealt``)."""
    from blackjack.simulation.dealt import compute_as_dealt

    found = compute_as_dealt(
        rules,
        bet,
        boxes=args.boxes,
        shoes=args.shoes,
        exact_shoes=args.exact,
        seed=args.seed,
        workers=args.workers,
    )
    if found.reshuffles_every_round:
        return {
            "rtp_percent": round(found.rtp_percent, 4),
            "cut_card_effect_points": 0.0,
            "method": "reshuffled before every round: every round is off a fresh shoe, "
            "so the figure is the fresh one exactly (no sampling)",
        }
    return {
        "rtp_percent": round(found.rtp_percent, 4),
        "ci95_percent": [round(end, 4) for end in found.ci95_percent],
        "cut_card_effect_points": round(found.effect, 4),
        "standard_error_points": round(found.effect_se, 4),
        "boxes": found.boxes,
        "seed": args.seed,
        "shoes": found.shoes,
        "rounds_per_shoe": round(found.rounds_per_shoe, 3),
        "linear_part_points": round(found.linear_effect, 5),
        "linear_part_se_points": round(found.linear_se, 5),
        "residual_points": round(found.residual_effect, 5),
        "residual_se_points": round(found.residual_se, 5),
        "rounds_valued_exactly": found.exact_rounds,
        "effects_of_removal_points": {
            label: round(eor, 5)
            for label, eor in zip(_VALUE_LABELS, found.eor_percent, strict=True)
        },
        "method": "renewal-reward: --shoes shoes dealt by the real engine with the fixed "
        "fresh-shoe chart to its reshuffle point at --boxes boxes; each round valued by its "
        "expectation from the shoe left: to first order by the effects of removal (control "
        "variate of mean 0), the rest measured on one round valued exactly in each of --exact "
        "shoes",
        "approximations": "sampling (the standard error above, both parts); the solver's "
        "own, as in the fresh figure (removed cards tracked to 6, dealer's to 3, split hands "
        "apart, no insurance)",
    }


_VALUE_LABELS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "T")  # by value index


def _anchors(args: argparse.Namespace) -> int:
    """Each published house edge against the computed one; exit 1 if one is off by more than
    the tolerance."""
    from blackjack.strategy import compute_rtp
    from blackjack.strategy.anchors import TOLERANCE, WIZARD_OF_ODDS
    from blackjack.strategy.dealer import DEFAULT_EXACT_REMOVED
    from blackjack.strategy.solver import DEFAULT_DEPTH

    worst = 0.0
    for anchor in WIZARD_OF_ODDS:
        computed = compute_rtp(anchor.rules).house_edge_percent
        gap = computed - anchor.house_edge_percent
        worst = max(worst, abs(gap))
        print(
            f"{anchor.change:<26} published {anchor.house_edge_percent:.3f} %  "
            f"computed {computed:.4f} %  gap {gap:+.4f}"
        )
    print(f"largest gap {worst:.4f} percentage points (tolerance {TOLERANCE})")
    # The solver's depths (removed cards tracked exactly, for the player and the dealer)
    # against two more of each: how much its truncation moves the base figure.
    base = WIZARD_OF_ODDS[0].rules
    deeper = compute_rtp(base, depth=DEFAULT_DEPTH + 2, dealer_depth=DEFAULT_EXACT_REMOVED + 2)
    moved = compute_rtp(base).house_edge_percent - deeper.house_edge_percent
    depths = f"depths {DEFAULT_DEPTH}/{DEFAULT_EXACT_REMOVED} against "
    depths += f"{DEFAULT_DEPTH + 2}/{DEFAULT_EXACT_REMOVED + 2}"
    print(f"{depths} on the base: {moved:+.1e} points")
    if args.presets:  # the same check on every preset's own rules (a few seconds each)
        for name, rules in sorted(PRESETS.items()):
            deeper = compute_rtp(
                rules, depth=DEFAULT_DEPTH + 2, dealer_depth=DEFAULT_EXACT_REMOVED + 2
            )
            moved = compute_rtp(rules).house_edge_percent - deeper.house_edge_percent
            print(f"{depths} on {name}: {moved:+.1e} points")
    return 0 if worst <= TOLERANCE else 1


def _simulate(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from blackjack.simulation.run import simulate
    from blackjack.strategy import compute_rtp, compute_strategy

    rules = _rules(args)
    bet = _bet(args, rules)
    started = time.perf_counter()
    columns = (*Progress.get_default_columns()[:1], BarColumn(), MofNCompleteColumn())
    # on stderr: stdout is the JSON line alone (a bar on stdout left an empty line before it,
    # breaking a reader of the first line)
    bar = Console(stderr=True)
    with Progress(*columns, TimeRemainingColumn(), transient=True, console=bar) as progress:
        task = progress.add_task(f"simulating {rules.name}", total=args.rounds)
        report = simulate(
            rules,
            compute_strategy,
            args.rounds,
            bet=bet,
            seed=args.seed,
            workers=args.workers,
            on_progress=lambda done: progress.advance(task, done),
        )
    elapsed = time.perf_counter() - started
    exact = compute_rtp(rules, report.bet).rtp_percent
    low, high = 100 * (report.rtp - report.half_width), 100 * (report.rtp + report.half_width)
    print(
        json.dumps(
            {
                "variant": rules.name,
                **({"overrides": args.overrides} if args.overrides else {}),
                "rounds": report.tally.rounds,
                "bet": report.bet,
                "seed": args.seed,
                "rtp_percent": round(100 * report.rtp, 4),
                "ci95_percent": [round(low, 4), round(high, 4)],
                "exact_rtp_percent": round(exact, 4),
                "exact_within_ci": low <= exact <= high,
                "hand_outcomes": {k: round(v, 5) for k, v in report.outcome_shares().items()},
                "rounds_per_second": round(report.tally.rounds / elapsed),
            }
        )
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    variants = sorted(PRESETS)
    # VARIANT, not the choices: their list made usage lines of up to 89 columns
    one_of = f"a preset: {', '.join(variants)}"
    rules = sub.add_parser(
        "rules", help="a variant's rules in a player's words, with its theoretical return"
    )
    rules.add_argument("variant", nargs="?", choices=variants, metavar="VARIANT", help=one_of)
    rules.add_argument(
        "--table",
        metavar="STREAM_ID",
        help="instead of a variant, the rules a table was opened with, overrides included "
        "(from the read model: --db-url or BLACKJACK_DB_URL)",
    )
    rules.add_argument(
        "--no-return", action="store_true", help="leave out the return (computed: seconds)"
    )
    add_store_options(rules, reads_the_broker=False)
    rules.set_defaults(handler=_rules_sheet)

    strategy = sub.add_parser("strategy", help="the computed basic strategy chart of a variant")
    strategy.add_argument("variant", choices=variants, metavar="VARIANT", help=one_of)
    _add_overrides(strategy)
    strategy.set_defaults(handler=_with_rules(_strategy))

    rtp = sub.add_parser("rtp", help="exact house edge and RTP of a variant under basic strategy")
    rtp.add_argument("variant", choices=variants, metavar="VARIANT", help=one_of)
    rtp.add_argument("--bet", default=None, help="bet level, e.g. 5.00")
    rtp.add_argument("--all-bets", action="store_true", help="also the lowest RTP at any bet")
    rtp.add_argument(
        "--as-dealt",
        action="store_true",
        help="also the RTP as dealt to the reshuffle point (the cut-card effect; sampled)",
    )
    rtp.add_argument(
        "--boxes", type=whole_positive, default=1, help="with --as-dealt: boxes in play (1)"
    )
    rtp.add_argument(
        "--shoes", type=sample_size, default=2000, help="with --as-dealt: shoes dealt (2000)"
    )
    rtp.add_argument(
        "--exact",
        type=sample_size,
        default=None,
        metavar="SHOES",
        help="with --as-dealt: shoes with one round valued exactly (80, at most --shoes)",
    )
    rtp.add_argument("--seed", type=int, default=1, help="with --as-dealt: the shoes' seed")
    rtp.add_argument(
        "--workers",
        type=whole_positive,
        default=None,
        help="with --as-dealt: processes (default: all cores)",
    )
    _add_overrides(rtp)
    rtp.set_defaults(handler=_with_rules(_rtp))

    anchors = sub.add_parser(
        "anchors", help="the exact house edge against the published Wizard of Odds figures"
    )
    anchors.add_argument(
        "--presets",
        action="store_true",
        help="also how far two more removed cards move each preset's figure",
    )
    anchors.set_defaults(handler=_anchors)

    sim = sub.add_parser("simulate", help="play the real engine with basic strategy")
    sim.add_argument("variant", choices=variants, metavar="VARIANT", help=one_of)
    sim.add_argument(
        "--rounds", type=sample_size, default=200_000, help="rounds played (default 200000)"
    )
    sim.add_argument("--bet", default=None, help="bet level (default: min bet)")
    sim.add_argument("--seed", type=int, default=1, help="default 1")
    sim.add_argument(
        "--workers", type=whole_positive, default=None, help="processes (default: all cores)"
    )
    _add_overrides(sim)
    sim.set_defaults(handler=_with_rules(_simulate))

    from blackjack.simulation.bench import register as register_bench

    register_bench(sub)
