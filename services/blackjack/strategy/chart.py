"""The familiar basic-strategy chart as text."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from blackjack.strategy.basic import UPCARDS, Cell, Strategy
from blackjack.strategy.solver import DOUBLE, HIT, SPLIT, STAND, SURRENDER, Action, GameKey

LEGEND = (
    "H hit   S stand   D double, else hit   Ds double, else stand   P split\n"
    "Rh surrender, else hit   Rs surrender, else stand   Rp surrender, else split\n"
    "Cells are for the first two cards; with three or more cards (or when the option is not\n"
    "offered) play the part after 'else'. Where a pair's cell is neither P nor Rp, play the\n"
    "pair as its total (2,2 as a hard 4, A,A as a soft 12): the hard and soft rows start\n"
    "above those totals."
)

_LETTER = {HIT: "h", STAND: "s", DOUBLE: "d", SPLIT: "p", SURRENDER: "r"}


def cell_code(cell: Cell, allowed: set[Action]) -> str:
    """Chart code of a cell for a first-two-cards hand with the ``allowed`` options."""
    first = cell.first(allowed)
    if first == DOUBLE:
        return "D" if cell.first({HIT, STAND}) == HIT else "Ds"
    if first == SURRENDER:
        return "R" + _LETTER[cell.first(allowed - {SURRENDER})]
    if first == SPLIT:
        return "P"
    return "H" if first == HIT else "S"


def describe_rules(strategy: Strategy) -> str:
    r = strategy.rules
    if r.double_on == "any_two":
        double = "double on any two cards"
    else:
        double = "double on " + ", ".join(str(t) for t in sorted(r.double_totals))
        if r.double_totals_ace_low:
            double += " (a soft hand's ace counted one too)"
    pays = Fraction(r.blackjack_pays)
    parts = [
        f"{r.decks} deck{'s' if r.decks > 1 else ''}",
        "dealer hits soft 17" if r.dealer_hits_soft_17 else "dealer stands on soft 17",
        double,
        "double after split" if r.double_after_split else "no double after split",
        f"split to {r.max_splits + 1} hands" if r.max_splits else "no splitting",
        f"split by {r.split_by}",
        "one card to split aces" if r.split_aces_one_card else "split aces play on",
        "late surrender" if r.late_surrender else "no surrender",
        _peek(r.peeks_on_ace_uninsured, r.peek_on_ten),
        f"blackjack pays {pays.numerator}:{pays.denominator}",
    ]
    return ", ".join(parts)


def _peek(ace: bool, ten: bool) -> str:
    if ace and ten:
        return "dealer peeks"
    if ace or ten:
        return f"dealer peeks on {'ace' if ace else 'ten'} only"
    return "no peek"


def render_chart(strategy: Strategy) -> str:
    """Hard, soft and pair rows against upcards 2..A, with a legend."""
    key = GameKey.of(strategy.rules)
    lines = [f"Basic strategy: {strategy.rules.name}", describe_rules(strategy), ""]
    header = "          " + " ".join(f"{u:>3}" for u in UPCARDS)

    def allowed(total: int, soft: bool, pair: bool) -> set[Action]:
        out: set[Action] = {HIT, STAND}
        if key.may_double(total, soft):
            out.add(DOUBLE)
        if key.late_surrender:
            out.add(SURRENDER)
        if pair and key.max_splits >= 1:
            out.add(SPLIT)
        return out

    def row(label: str, cells: Mapping[str, Cell], options: set[Action]) -> str:
        codes = [cell_code(cells[u], options) for u in UPCARDS]
        return f"{label:<9} " + " ".join(f"{c:>3}" for c in codes)

    lines += ["Hard" + header[4:]]
    for total in range(5, 22):
        lines.append(row(f"{total}", strategy.hard[total], allowed(total, False, False)))
    lines += ["", "Soft" + header[4:]]
    for total in range(13, 22):
        label = f"A,{total - 11} {total}" if total < 21 else "21"
        lines.append(row(label, strategy.soft[total], allowed(total, True, False)))
    lines += ["", "Pairs" + header[5:]]
    for pair in ("2", "3", "4", "5", "6", "7", "8", "9", "T", "A"):
        total = 12 if pair == "A" else 2 * (10 if pair == "T" else int(pair))
        lines.append(row(f"{pair},{pair}", strategy.pairs[pair], allowed(total, pair == "A", True)))
    lines += ["", LEGEND]
    return "\n".join(lines)
