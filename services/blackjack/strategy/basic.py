"""Basic strategy as data: one ``Cell`` per (hand row, dealer upcard), computed from the rules.

``compute_strategy(rules)`` derives every cell from exact finite-shoe expected values (see
``blackjack.strategy.solver`` for the method); nothing here is typed in from a published chart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from blackjack.domain.rules import Rules
from blackjack.strategy.dealer import ACE, CARD_VALUES, DEFAULT_EXACT_REMOVED, TEN
from blackjack.strategy.solver import (
    DEFAULT_DEPTH,
    DOUBLE,
    HIT,
    SPLIT,
    STAND,
    SURRENDER,
    Action,
    RowResult,
    solve,
)

UPCARDS: tuple[str, ...] = ("2", "3", "4", "5", "6", "7", "8", "9", "T", "A")
"""Upcard (and pair) labels by value; ``T`` stands for every ten-value card."""

HARD_TOTALS = range(4, 22)
SOFT_TOTALS = range(12, 22)

_LABEL_OF_INDEX = {i: UPCARDS[i - 1] if i else "A" for i in range(10)}
_TEN_RANKS = "TJQK"


def _rank(card: str) -> str:
    """The rank letter of a card code (``8S``), a bare rank (``8``, ``K``) or ``10``/``10H``."""
    text = card.strip().upper()
    if text.startswith("10"):
        return "T"
    if not text or text[0] not in "A23456789TJQK":
        raise ValueError(f"not a card: {card!r}")
    return text[0]


def _index(card: str) -> int:
    rank = _rank(card)
    if rank == "A":
        return ACE
    if rank in _TEN_RANKS:
        return TEN
    return int(rank) - 1


def value_index(card: str) -> int:
    """The solver's value index of a card code: 0 the ace, 1..8 the twos to nines, 9 a ten."""
    return _index(card)


def upcard_label(card: str) -> str:
    return _LABEL_OF_INDEX[_index(card)]


def hand_total(indices: Sequence[int]) -> tuple[int, bool]:
    hard = sum(CARD_VALUES[i] for i in indices)
    if ACE in indices and hard + 10 <= 21:
        return hard + 10, True
    return hard, False


@dataclass(frozen=True)
class Cell:
    """One chart cell: the actions from best to worst and their expected values.

    ``ev`` is per unit of initial bet, averaged over the two-card hands of the row (weighted by
    how often each is dealt) and, when the dealer peeks at this upcard, conditioned on her not
    having blackjack. Rows that have nothing to decide (hard and soft 21) have an empty ``ev``.
    """

    order: tuple[Action, ...]
    ev: Mapping[Action, float]

    def first(self, allowed: set[Action] | frozenset[Action]) -> Action:
        """The best action among ``allowed`` (stand is always allowed)."""
        for action in self.order:
            if action in allowed:
                return action
        return STAND


def _cell(result: RowResult) -> Cell:
    ev = {a: v / result.weight for a, v in result.value.items()} if result.weight > 0 else {}
    return Cell(order=result.order, ev=ev)


@dataclass(frozen=True)
class Strategy:
    """The computed basic strategy of one rule set (plain data: picklable, treat as read-only).

    ``hard[total][upcard]``, ``soft[total][upcard]`` and ``pairs[pair][upcard]`` hold the cells;
    totals are best totals (hard 4..21, soft 12..21), labels are ``2``..``9``, ``T``, ``A``.
    Use ``decide`` to play.
    """

    rules: Rules
    hard: Mapping[int, Mapping[str, Cell]]
    soft: Mapping[int, Mapping[str, Cell]]
    pairs: Mapping[str, Mapping[str, Cell]]

    def cell_for(self, player_cards: Sequence[str], upcard: str) -> Cell:
        """The cell that governs this hand: its pair row if it is a pair, else its total's row.

        A pair is two cards of one value (``split_by="value"``) or of one rank
        (``split_by="rank"``: T-K is then a hard 20, not a pair).
        """
        if len(player_cards) < 2:
            raise ValueError("a hand to decide on has at least two cards")
        indices = [_index(c) for c in player_cards]
        up = upcard_label(upcard)
        if len(indices) == 2 and indices[0] == indices[1]:
            same_rank = _rank(player_cards[0]) == _rank(player_cards[1])
            if self.rules.split_by == "value" or same_rank:
                return self.pairs[_LABEL_OF_INDEX[indices[0]]][up]
        total, soft = hand_total(indices)
        if total > 21:
            raise ValueError(f"{list(player_cards)} is bust; there is nothing to decide")
        return (self.soft if soft else self.hard)[total][up]

    def decide(
        self,
        player_cards: Sequence[str],
        upcard: str,
        can_double: bool,
        can_split: bool,
        can_surrender: bool,
    ) -> Action:
        """The basic-strategy play for any legal state, falling back along the cell's order.

        Double-else-hit, double-else-stand, surrender-else-hit/stand/split, split-else-(the pair
        played on its total) all come from the cell's ranking of the actions: the best one the
        caller allows is returned. Hands of three or more cards (and split hands) use the same
        rows, so a caller passes ``can_double``/``can_surrender``/``can_split`` as the table
        allows at that moment. A two-card 21 stands.
        """
        cell = self.cell_for(player_cards, upcard)
        allowed: set[Action] = {STAND, HIT}
        if can_double:
            allowed.add(DOUBLE)
        if can_surrender:
            allowed.add(SURRENDER)
        if can_split and SPLIT in cell.order:
            allowed.add(SPLIT)
        return cell.first(allowed)


_STRATEGIES: dict[tuple[Rules, int, int], Strategy] = {}


def compute_strategy(
    rules: Rules, *, depth: int = DEFAULT_DEPTH, dealer_depth: int = DEFAULT_EXACT_REMOVED
) -> Strategy:
    """Basic strategy for ``rules`` from finite-shoe expected values (cached per rules).

    ``depth``/``dealer_depth`` trade precision for time (see ``blackjack.strategy.solver``);
    the defaults are within about 1e-5 of the fully exact values.
    """
    found = _STRATEGIES.get((rules, depth, dealer_depth))
    if found is not None:
        return found
    solution = solve(rules, depth, dealer_depth)
    hard: dict[int, dict[str, Cell]] = {t: {} for t in HARD_TOTALS}
    soft: dict[int, dict[str, Cell]] = {t: {} for t in SOFT_TOTALS}
    pairs: dict[str, dict[str, Cell]] = {_LABEL_OF_INDEX[p]: {} for p in range(10)}
    for up, result in solution.upcards.items():
        label = _LABEL_OF_INDEX[up]
        for (is_soft, total), row in result.rows.items():
            (soft if is_soft else hard)[total][label] = _cell(row)
        for p, row in result.pairs.items():
            pairs[_LABEL_OF_INDEX[p]][label] = _cell(row)
    found = Strategy(
        rules=rules,
        hard={t: _in_order(r) for t, r in hard.items()},
        soft={t: _in_order(r) for t, r in soft.items()},
        pairs={p: _in_order(pairs[p]) for p in UPCARDS},
    )
    _STRATEGIES[rules, depth, dealer_depth] = found
    return found


def clear_cache() -> None:
    _STRATEGIES.clear()


def _in_order(row: dict[str, Cell]) -> dict[str, Cell]:
    return {up: row[up] for up in UPCARDS if up in row}
