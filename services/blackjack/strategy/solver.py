"""Expected values of every player decision on a finite shoe, and the strategy they imply.

One ``GameSolution`` per distinct set of game rules (see ``GameKey``); ``solve`` caches them.

Method (all expected values per unit of initial bet):

* **Finite shoe, by composition.** Every probability is drawn without replacement from
  ``rules.decks`` decks minus the upcard and the cards already seen. Player hands are tracked by
  the multiset of cards removed from the shoe (their own, and for split hands the other pair
  cards) up to ``depth`` removed cards (default 6); beyond that the shoe is frozen: later cards
  of the same hand are drawn from, and the dealer plays out of, the shoe as it was after the
  first ``depth`` removed cards. The dealer's outcome probabilities for a removed multiset are
  walked exactly up to ``dealer_depth`` cards (default 3) and extrapolated to second order
  beyond (``dealer.dealer_outcomes``). Against walking every hand exactly to the last card
  (``depth=14, dealer_depth=14``, about 7 s per game) the defaults move the 8-deck house edge
  by about 1e-5 percentage points and take under a second.
* **Peek.** When the dealer peeks at her upcard (``peek_on_ace``/``peek_on_ten``), her blackjack
  ends the round before the player acts, losing only the initial bet. Values are kept
  *unnormalised*: a decision's value is E[payoff x 1{dealer has no blackjack}], with the hole card
  treated as drawn after the player's cards (exchangeability), which conditions the player's draws
  on the dealer having no blackjack exactly. Comparing unnormalised values for one hand is the
  same as comparing conditional ones (they share the factor P(no blackjack)). Without a peek on an
  ace/ten upcard the dealer's blackjack beats every bet on the table including doubles and splits
  (the European no-hole-card rule), except a surrender: it comes before she turns her hole
  card over and gets half the bet back whatever the card (as the engine settles it,
  ``settlement.hand_result``, and the rules sheet tells the player; before, the solver lost
  the whole bet to a blackjack there, and the RTP of such a table was 0.37 points low).
* **The strategy is total-dependent** (a chart). For each upcard the rows are decided in an order
  in which every later total a hit can reach is already known: hard 21..11, soft 21..12,
  hard 10..4. A row's decision ranks stand, hit, double and surrender by their value summed over
  the row's two-card hands, each weighted by its probability of being dealt (pairs are left to
  the pair rows unless a total has no other two-card hand: hard 4 = 2-2, hard 20 = T-T,
  soft 12 = A-A). Hands of three or more cards follow the row's better of hit and stand. Pairs
  rank all five actions for that pair. Hands left unsplit (max splits reached, or split not
  chosen) use the pair row without ``split``.
* **Splits.** The second cards dealt to the split hands, read in the order they are dealt, are
  distributed exactly like the first cards off the shoe (optional skipping for exchangeable
  sequences), so the number of final hands and how many are left as an unsplittable pair
  follow exactly from a hypergeometric walk. Each final hand's value is then computed as a single
  hand from the shoe minus the two original pair cards and minus the pair cards used by
  resplits; the cards of the *other* split hands are not removed (their second cards being
  non-pairs is not conditioned on). With no resplitting this is exact; with resplits it is the
  usual close approximation. The strategy after a split is the chart (doubling if
  ``double_after_split`` and ``double_on`` allow it; no surrender after a split).
  Split aces are never resplit (``Rules`` has no flag for it; the seeded pages all forbid it)
  and with ``split_aces_one_card`` each gets exactly one card. A 21 after a split is not a
  blackjack.
* **Splitting by rank**: only ten-value pairs differ; a two-ten hand is splittable with the
  probability that both cards share a rank. The split value of a ten pair itself (never the best
  play) is computed as if split by value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from blackjack.domain.events import TurnAction
from blackjack.domain.rules import Rules, doubles_on_total
from blackjack.strategy.dealer import (
    ACE,
    BITS,
    CARD_VALUES,
    DEFAULT_EXACT_REMOVED,
    MASK,
    MAX_REMOVED,
    OUTCOME_BLACKJACK,
    OUTCOME_BUST,
    TEN,
    add_card,
    dealer_outcomes,
    forget_part_dealt,
    full_shoe,
)

Action = TurnAction  # the moves a TurnStarted may offer
HIT: Action = "hit"
STAND: Action = "stand"
DOUBLE: Action = "double"
SPLIT: Action = "split"
SURRENDER: Action = "surrender"
HAND_ACTIONS: tuple[Action, ...] = (STAND, HIT, DOUBLE, SURRENDER)

DEFAULT_DEPTH = 6

RowKey = tuple[bool, int]  # (soft, best total)


class GameKey(NamedTuple):
    """The rule fields that change the player's expected values or decisions."""

    decks: int
    hits_soft_17: bool
    peek_on_ace: bool
    peek_on_ten: bool
    late_surrender: bool
    double_any_two: bool
    double_totals: frozenset[int]
    double_totals_ace_low: bool
    double_after_split: bool
    max_splits: int
    split_by_rank: bool
    split_aces_one_card: bool

    @classmethod
    def of(cls, rules: Rules) -> GameKey:
        return cls(
            decks=rules.decks,
            hits_soft_17=rules.dealer_hits_soft_17,
            peek_on_ace=rules.peeks_on_ace_uninsured,
            peek_on_ten=rules.peek_on_ten,
            late_surrender=rules.late_surrender,
            double_any_two=rules.double_on == "any_two",
            double_totals=frozenset(rules.double_totals),
            double_totals_ace_low=rules.double_totals_ace_low,
            double_after_split=rules.double_after_split,
            max_splits=rules.max_splits,
            split_by_rank=rules.split_by == "rank",
            split_aces_one_card=rules.split_aces_one_card,
        )

    def may_double(self, best_total: int, soft: bool) -> bool:
        totals = None if self.double_any_two else self.double_totals
        return doubles_on_total(totals, self.double_totals_ace_low, best_total, soft)


@dataclass
class RowResult:
    """Values of one chart cell, summed over its two-card hands (weights: P(dealt))."""

    order: tuple[Action, ...]
    value: dict[Action, float]  # sum of weight x unnormalised value
    weight: float  # sum of weight x P(dealer has no blackjack), to normalise ``value``


@dataclass
class UpcardResult:
    rows: dict[RowKey, RowResult]
    pairs: dict[int, RowResult]  # by value index
    # E[payoff x 1{player has no blackjack} | upcard], except the half bet lost by surrenders
    non_blackjack_value: float
    blackjack_win_probability: float  # P(player blackjack and dealer none | upcard)
    surrender_probability: float  # P(player surrenders | upcard)
    blackjack_probability: float  # P(player blackjack | upcard)


@dataclass
class GameSolution:
    key: GameKey
    depth: int
    dealer_depth: int
    upcards: dict[int, UpcardResult] = field(default_factory=dict)
    upcard_probability: dict[int, float] = field(default_factory=dict)

    def expected_value(
        self, blackjack_ratio: Fraction | float, surrender_loss: Fraction | float = 0.5
    ) -> float:
        """E[net win] per unit of initial bet.

        A blackjack wins ``blackjack_ratio`` of the bet and a surrender loses
        ``surrender_loss`` of it (both per unit, after any rounding of the bet's payment).
        """
        bj = float(blackjack_ratio)
        sur = float(surrender_loss)
        return sum(
            self.upcard_probability[up]
            * (
                res.non_blackjack_value
                + res.blackjack_win_probability * bj
                - res.surrender_probability * sur
            )
            for up, res in self.upcards.items()
        )

    def probability(self, field_name: str) -> float:
        """An ``UpcardResult`` probability field averaged over the upcards."""
        return sum(
            self.upcard_probability[up] * float(getattr(res, field_name))
            for up, res in self.upcards.items()
        )


def _add_table() -> dict[tuple[int, bool, int], tuple[int, bool]]:
    """(best total, soft, card index) -> (best total, soft) after taking the card."""
    table: dict[tuple[int, bool, int], tuple[int, bool]] = {}
    for total in range(2, 22):
        for soft in (False, True):
            for card in range(10):
                value = CARD_VALUES[card]
                if soft:
                    t2 = total + value
                    table[total, soft, card] = (t2 - 10, False) if t2 > 21 else (t2, True)
                elif card == ACE and total + 11 <= 21:
                    table[total, soft, card] = (total + 11, True)
                else:
                    table[total, soft, card] = (total + value, False)
    return table


_ADD = _add_table()
# _NEXT[soft][total] lists (best total, soft) after each card index, for the inner loops.
_NEXT: tuple[list[list[tuple[int, bool]]], ...] = tuple(
    [[_ADD[t, soft, c] for c in range(10)] if t >= 2 else [] for t in range(22)]
    for soft in (False, True)
)

# Standing values depend only on the shoe, the dealer's soft-17 rule and whether a blackjack
# found at the end takes the bet: shared by every rule set (key: decks, H17, upcard, removed,
# dealer depth, loses-all-to-blackjack). Part-dealt shoes keep theirs in their own solver.
_STAND_CACHE: dict[tuple[int, bool, int, int, int, bool], list[float]] = {}


def two_card_total(a: int, b: int) -> tuple[int, bool]:
    if ACE in (a, b):
        hard = CARD_VALUES[a] + CARD_VALUES[b]
        return (hard + 10, True) if hard + 10 <= 21 else (hard, False)
    return CARD_VALUES[a] + CARD_VALUES[b], False


def _rows_in_solving_order() -> list[RowKey]:
    return (
        [(False, t) for t in range(21, 10, -1)]
        + [(True, t) for t in range(21, 11, -1)]
        + [(False, t) for t in range(10, 3, -1)]
    )


class _UpcardSolver:
    """All values for one upcard; ``removed`` arguments are packed multisets (see dealer.py)."""

    def __init__(
        self,
        key: GameKey,
        up: int,
        depth: int,
        dealer_depth: int,
        *,
        shoe: tuple[int, ...] | None = None,
        chart: UpcardResult | None = None,
    ) -> None:
        """``shoe``: a part-dealt shoe's cards by value index (default: ``key.decks`` fresh);
        ``chart``: play this upcard's rows and pairs as they are ordered there (a fixed
        strategy) instead of deciding them from this shoe's values."""
        self.key = key
        self.up = up
        self.depth = depth
        self.dealer_depth = dealer_depth
        self.chart = chart
        self.dealer_shoe: int | tuple[int, ...] = key.decks if shoe is None else shoe
        base = list(full_shoe(key.decks) if shoe is None else shoe)
        base[up] -= 1
        self.base = tuple(base)
        self.bj_card: int | None = TEN if up == ACE else ACE if up == TEN else None
        peeks = (up == ACE and key.peek_on_ace) or (up == TEN and key.peek_on_ten)
        self.peeks = peeks and self.bj_card is not None
        # Without a peek, a dealer blackjack found at the end takes every bet still in play.
        self.lose_all_to_bj = self.bj_card is not None and not peeks
        self.row_hits: dict[RowKey, bool] = {(False, 21): False, (True, 21): False}
        self.rows: dict[RowKey, RowResult] = {}
        self._shoe: dict[int, tuple[list[int], int]] = {}
        self._stand: dict[int, list[float]] = {}
        self._stand_key = (key.decks, key.hits_soft_17, up)
        self._play: dict[tuple[int, int, bool], float] = {}

    # --- the shoe -----------------------------------------------------------------------------

    def shoe(self, removed: int) -> tuple[list[int], int]:
        found = self._shoe.get(removed)
        if found is None:
            counts = [self.base[i] - ((removed >> (BITS * i)) & MASK) for i in range(10)]
            found = (counts, sum(counts))
            self._shoe[removed] = found
        return found

    def take(self, removed: int, size: int, card: int) -> tuple[int, int]:
        """Remove ``card`` unless the composition is already frozen at ``depth`` cards."""
        if size >= self.depth:
            return removed, size
        return add_card(removed, card), size + 1

    def p_blackjack(self, removed: int) -> float:
        if self.bj_card is None:
            return 0.0
        counts, total = self.shoe(removed)
        return counts[self.bj_card] / total

    # --- terminal values ----------------------------------------------------------------------

    def bust(self, removed: int) -> float:
        """A lost unit: -1 if the dealer has no blackjack (else the peek already settled it)."""
        if self.peeks:
            return self.p_blackjack(removed) - 1.0
        return -1.0

    def surrender(self, removed: int) -> float:
        if self.lose_all_to_bj:  # surrendered before the unchecked hole card counts
            return -0.5
        return -0.5 * (1.0 - self.p_blackjack(removed))

    def stand_values(self, removed: int) -> list[float]:
        """Unnormalised value of standing on each total 0..21 (index = total)."""
        found = self._stand.get(removed)
        if found is None and not isinstance(self.dealer_shoe, int):
            found = self._stand[removed] = self._stand_values(removed)
        if found is None:
            decks, h17, up = self._stand_key
            key = (decks, h17, up, removed, self.dealer_depth, self.lose_all_to_bj)
            found = _STAND_CACHE.get(key)
            if found is None:
                found = self._stand_values(removed)
                _STAND_CACHE[key] = found
            self._stand[removed] = found
        return found

    def _stand_values(self, removed: int) -> list[float]:
        d = dealer_outcomes(
            self.dealer_shoe, self.key.hits_soft_17, self.up, removed, self.dealer_depth
        )
        bj_loss = d[OUTCOME_BLACKJACK] if self.lose_all_to_bj else 0.0
        bust = d[OUTCOME_BUST]
        made = d[0] + d[1] + d[2] + d[3] + d[4]
        values = [bust - made - bj_loss] * 17
        below = 0.0  # P(dealer total < player total), among made hands
        for t in range(17, 22):
            i = t - 17
            above = made - below - d[i]
            values.append(bust + below - above - bj_loss)
            below += d[i]
        return values

    # --- playing on -----------------------------------------------------------------------------

    def play(self, removed: int, size: int, total: int, soft: bool) -> float:
        """Value of a hand that may only hit or stand, played by its row (3+ cards)."""
        memo_key = (removed, total, soft)
        found = self._play.get(memo_key)
        if found is None:
            if self.row_hits[soft, total]:
                found = self.hit(removed, size, total, soft)
            else:
                found = self.stand_values(removed)[total]
            self._play[memo_key] = found
        return found

    def hit(self, removed: int, size: int, total: int, soft: bool) -> float:
        counts, n = self.shoe(removed)
        nxt = _NEXT[soft][total]
        frozen = size >= self.depth
        size2 = size if frozen else size + 1
        play = self.play
        acc = 0.0
        for card in range(10):
            k = counts[card]
            if k <= 0:
                continue
            t2, s2 = nxt[card]
            r2 = removed if frozen else removed + (1 << (BITS * card))
            if t2 > 21:
                acc += k * self.bust(r2)
            else:
                acc += k * play(r2, size2, t2, s2)
        return acc / n

    def double(self, removed: int, size: int, total: int, soft: bool) -> float:
        counts, n = self.shoe(removed)
        acc = 0.0
        for card in range(10):
            k = counts[card]
            if k <= 0:
                continue
            t2, _ = _ADD[total, soft, card]
            r2, _ = self.take(removed, size, card)
            acc += k * (self.bust(r2) if t2 > 21 else self.stand_values(r2)[t2])
        return 2.0 * acc / n

    def value_of(self, action: Action, removed: int, size: int, total: int, soft: bool) -> float:
        if action == STAND:
            return self.stand_values(removed)[total]
        if action == HIT:
            return self.hit(removed, size, total, soft)
        if action == DOUBLE:
            return self.double(removed, size, total, soft)
        if action == SURRENDER:
            return self.surrender(removed)
        raise ValueError(action)

    def all_values(self, removed: int, size: int, total: int, soft: bool) -> dict[Action, float]:
        return {a: self.value_of(a, removed, size, total, soft) for a in HAND_ACTIONS}

    # --- the chart ----------------------------------------------------------------------------

    def two_card_hands(self) -> list[tuple[int, int, float]]:
        """(a, b, P(dealt a and b in either order)) for a <= b, blackjack included."""
        counts, n = self.shoe(0)
        out = []
        for a in range(10):
            for b in range(a, 10):
                w = counts[a] * (counts[a] - 1) if a == b else 2 * counts[a] * counts[b]
                if w > 0:
                    out.append((a, b, w / (n * (n - 1))))
        return out

    def solve_rows(self) -> None:
        if self.chart is not None:
            for row, result in self.chart.rows.items():
                self.rows[row] = RowResult(result.order, {}, 0.0)
                self.row_hits[row] = result.order.index(HIT) < result.order.index(STAND)
            return
        hands = self.two_card_hands()
        by_row: dict[RowKey, list[tuple[int, int, float]]] = defaultdict(list)
        pairs_by_row: dict[RowKey, list[tuple[int, int, float]]] = defaultdict(list)
        for a, b, w in hands:
            if {a, b} == {ACE, TEN}:
                continue
            total, soft = two_card_total(a, b)
            (pairs_by_row if a == b else by_row)[soft, total].append((a, b, w))
        for row in _rows_in_solving_order():
            members = by_row.get(row) or pairs_by_row.get(row)
            soft, total = row
            if not members:  # hard 21, soft 21: nothing to decide
                self.rows[row] = RowResult((STAND, HIT, DOUBLE, SURRENDER), {}, 0.0)
                self.row_hits[row] = False
                continue
            value = dict.fromkeys(HAND_ACTIONS, 0.0)
            weight = 0.0
            for a, b, w in members:
                removed = add_card(add_card(0, a), b)
                for action, v in self.all_values(removed, 2, total, soft).items():
                    value[action] += w * v
                weight += w * (1.0 - self.p_blackjack(removed) if self.peeks else 1.0)
            order = tuple(sorted(HAND_ACTIONS, key=lambda a: -value[a]))
            self.rows[row] = RowResult(order, value, weight)
            self.row_hits[row] = value[HIT] > value[STAND]

    # --- pairs --------------------------------------------------------------------------------

    def first_allowed(self, order: tuple[Action, ...], allowed: set[Action]) -> Action:
        return next(a for a in order if a in allowed)

    def post_split_hand(
        self,
        removed: int,
        size: int,
        total: int,
        soft: bool,
        *,
        order: tuple[Action, ...],
        one_card: bool,
    ) -> float:
        if one_card:
            return self.stand_values(removed)[total]
        action = self.first_allowed(order, self.post_split_allowed(total, soft))
        return self.value_of(action, removed, size, total, soft)

    def post_split_allowed(self, total: int, soft: bool) -> set[Action]:
        allowed: set[Action] = {STAND, HIT}
        if self.key.double_after_split and self.key.may_double(total, soft):
            allowed.add(DOUBLE)
        return allowed

    def resplits(self, p: int, pair_order: tuple[Action, ...]) -> bool:
        """Whether a pair dealt to a split hand is split again (when the cap allows)."""
        if p == ACE:
            return False  # no resplitting aces (Rules has no flag; every seeded page forbids it)
        total, soft = two_card_total(p, p)
        allowed = self.post_split_allowed(total, soft) | {SPLIT}
        return self.first_allowed(pair_order, allowed) == SPLIT

    def split(self, p: int, pair_order: tuple[Action, ...]) -> float:
        """Value of splitting p-p (both hands together), resplitting as the chart says."""
        one_card = p == ACE and self.key.split_aces_one_card
        max_hands = max(2, self.key.max_splits + 1) if self.resplits(p, pair_order) else 2
        pair_removed = add_card(add_card(0, p), p)
        counts, n = self.shoe(pair_removed)
        scenarios = split_scenarios(counts[p], n, max_hands)
        non_split_order = tuple(a for a in pair_order if a != SPLIT)
        total = 0.0
        for extra, (n_mixed, n_paired) in scenarios.items():
            removed, size = pair_removed, 2
            for _ in range(extra):
                removed, size = self.take(removed, size, p)
            counts0, n0 = self.shoe(removed)
            if n_mixed:
                others = n0 - counts0[p]
                acc = 0.0
                for x in range(10):
                    k = counts0[x]
                    if x == p or k <= 0:
                        continue
                    t, s = two_card_total(p, x)
                    r2, z2 = self.take(removed, size, x)
                    acc += k * self.post_split_hand(
                        r2, z2, t, s, order=self.rows[s, t].order, one_card=one_card
                    )
                total += n_mixed * acc / others
            if n_paired:
                t, s = two_card_total(p, p)
                r2, z2 = self.take(removed, size, p)
                total += n_paired * self.post_split_hand(
                    r2, z2, t, s, order=non_split_order, one_card=one_card
                )
        return total

    def solve_pairs(self) -> dict[int, RowResult]:
        pairs: dict[int, RowResult] = {}
        for p in range(10):
            removed = add_card(add_card(0, p), p)
            counts, _ = self.shoe(0)
            if counts[p] < 2:
                continue
            total, soft = two_card_total(p, p)
            value = self.all_values(removed, 2, total, soft)
            weight = 1.0 - self.p_blackjack(removed) if self.peeks else 1.0
            if self.chart is not None:
                # The order the fresh shoe's values gave, which also values the split as it was
                # valued there (the resplits and the pair left unsplit follow this order).
                order = self.chart.pairs[p].order
                value[SPLIT] = self.split(p, order)
                pairs[p] = RowResult(order, value, weight)
                continue
            non_split = tuple(sorted(HAND_ACTIONS, key=lambda a: -value[a]))
            # Value the split assuming resplits; if the resulting chart would not resplit (or
            # not split at all), value it again without them.
            value[SPLIT] = self.split(p, (SPLIT, *non_split))
            order = tuple(sorted((*HAND_ACTIONS, SPLIT), key=lambda a: -value[a]))
            if not self.resplits(p, order):
                value[SPLIT] = self.split(p, (*non_split, SPLIT))
                order = tuple(sorted((*HAND_ACTIONS, SPLIT), key=lambda a: -value[a]))
            pairs[p] = RowResult(order, value, weight)
        return pairs

    # --- the house edge -----------------------------------------------------------------------

    def solve(self) -> UpcardResult:
        self.solve_rows()
        pairs = self.solve_pairs()
        key = self.key
        non_bj = 0.0
        bj_win = 0.0
        surrendered = 0.0
        bj = 0.0
        for a, b, w in self.two_card_hands():
            removed = add_card(add_card(0, a), b)
            pbj = self.p_blackjack(removed)
            if {a, b} == {ACE, TEN}:
                bj_win += w * (1.0 - pbj)
                bj += w
                continue
            total, soft = two_card_total(a, b)
            allowed = {STAND, HIT}
            if key.may_double(total, soft):
                allowed.add(DOUBLE)
            if key.late_surrender:
                allowed.add(SURRENDER)
            peek_loss = pbj if self.peeks else 0.0
            # (probability, action, value) of the plays this two-card hand gets
            plays: list[tuple[float, Action, float]]
            if a == b:
                cell = pairs[a]
                no_split = self.first_allowed(cell.order, allowed)
                plays = [(1.0, no_split, cell.value[no_split])]
                if key.max_splits >= 1:
                    splittable = same_rank_probability(self.base, a) if key.split_by_rank else 1.0
                    with_split = self.first_allowed(cell.order, allowed | {SPLIT})
                    plays = [
                        (splittable, with_split, cell.value[with_split]),
                        (1.0 - splittable, no_split, cell.value[no_split]),
                    ]
            else:
                action = self.first_allowed(self.rows[soft, total].order, allowed)
                plays = [(1.0, action, self.value_of(action, removed, 2, total, soft))]
            v = 0.0
            for share, action, value in plays:
                v += share * value
                if action == SURRENDER:
                    # The half bet is kept apart so that the refund's rounding can be applied
                    # per bet (``GameSolution.expected_value``); under an upcard she checked,
                    # only where she had no blackjack (the peek ended the round before).
                    refunded = 1.0 - pbj if self.peeks else 1.0
                    surrendered += w * share * refunded
                    v += share * 0.5 * refunded
            non_bj += w * (v - peek_loss)
        return UpcardResult(dict(self.rows), pairs, non_bj, bj_win, surrendered, bj)


def same_rank_probability(base: tuple[int, ...], p: int) -> float:
    """P(two cards of value ``p`` share their rank); only ten-values have several ranks."""
    if p != TEN:
        return 1.0
    n = base[TEN]  # ten-value cards left; the ranks hold n // 4 each, one fewer if the upcard
    per_rank = [n // 4 + (1 if i < n % 4 else 0) for i in range(4)]
    same = sum(k * (k - 1) for k in per_rank)
    return same / (n * (n - 1))


def split_scenarios(n_pair: int, n: int, max_hands: int) -> dict[int, tuple[float, float]]:
    """Expected final hands after a split, by the number of resplits.

    ``n_pair`` cards of the pair's value are among the ``n`` left after the original pair and
    the upcard. Each hand's second card is drawn in turn; a pair card resplits while fewer than
    ``max_hands`` hands exist, else leaves an unsplittable pair. Returns, for each resplit count,
    (E[#hands with a non-pair second card], E[#hands left as a pair]), both restricted to that
    count's scenarios.
    """
    out: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    # state: (pending hands, hands, hands left paired, second cards drawn, pair cards drawn)
    states: dict[tuple[int, int, int, int, int], float] = {(2, 2, 0, 0, 0): 1.0}
    while states:
        new: dict[tuple[int, int, int, int, int], float] = defaultdict(float)
        for (pending, hands, paired, drawn, drawn_pair), pr in states.items():
            if pending == 0:
                slot = out[hands - 2]
                slot[0] += pr * (hands - paired)
                slot[1] += pr * paired
                continue
            left = n_pair - drawn_pair
            q = left / (n - drawn) if left > 0 else 0.0
            if q > 0.0:
                if hands < max_hands:
                    new[pending + 1, hands + 1, paired, drawn + 1, drawn_pair + 1] += pr * q
                else:
                    new[pending - 1, hands, paired + 1, drawn + 1, drawn_pair + 1] += pr * q
            if q < 1.0:
                new[pending - 1, hands, paired, drawn + 1, drawn_pair] += pr * (1.0 - q)
        states = new
    return {extra: (v[0], v[1]) for extra, v in sorted(out.items())}


_SOLUTIONS: dict[tuple[GameKey, int, int], GameSolution] = {}


def clear_caches() -> None:
    """Forget every cached solution and probability (a few MB per deck count and soft-17 rule)."""
    from blackjack.strategy import basic, dealer  # basic imports this module: import late

    _SOLUTIONS.clear()
    _STAND_CACHE.clear()
    dealer.clear_caches()
    basic.clear_cache()


def solve(
    rules: Rules, depth: int = DEFAULT_DEPTH, dealer_depth: int = DEFAULT_EXACT_REMOVED
) -> GameSolution:
    """Every upcard's chart and values for ``rules`` (cached per distinct ``GameKey``).

    ``depth``: removed cards tracked by composition for the player's draws and hands (beyond,
    the shoe is frozen); ``dealer_depth``: removed cards up to which the dealer's outcome
    probabilities are walked exactly (beyond, extrapolated to second order).
    """
    if not 2 <= depth <= MAX_REMOVED or not 0 <= dealer_depth <= MAX_REMOVED:
        raise ValueError(f"depths must be at most {MAX_REMOVED} removed cards")
    key = GameKey.of(rules)
    found = _SOLUTIONS.get((key, depth, dealer_depth))
    if found is None:
        found = GameSolution(key, depth, dealer_depth)
        full = full_shoe(key.decks)
        n = sum(full)
        for up in range(10):
            found.upcards[up] = _UpcardSolver(key, up, depth, dealer_depth).solve()
            found.upcard_probability[up] = full[up] / n
        _SOLUTIONS[key, depth, dealer_depth] = found
    return found


def value_shoe(
    rules: Rules,
    shoe: tuple[int, ...],
    depth: int = DEFAULT_DEPTH,
    dealer_depth: int = DEFAULT_EXACT_REMOVED,
) -> GameSolution:
    """The values of one round dealt from a part-dealt ``shoe`` (cards by value index) and
    played by the fresh shoe's chart, ``solve(rules)``: a fixed strategy, the one the simulator
    plays, not one adapted to this shoe. Same method and approximations as ``solve``; not
    cached (each part-dealt shoe is valued once). ``value_shoe(rules, full_shoe(decks))``
    equals ``solve(rules)``.
    """
    if len(shoe) != 10 or min(shoe) < 0 or max(shoe) > 16 * rules.decks:
        raise ValueError("a shoe is ten counts by value index, none negative")
    chart = solve(rules, depth, dealer_depth)
    found = GameSolution(chart.key, depth, dealer_depth)
    n = sum(shoe)
    try:
        for up in range(10):
            if shoe[up] == 0:
                continue
            solver = _UpcardSolver(
                chart.key, up, depth, dealer_depth, shoe=shoe, chart=chart.upcards[up]
            )
            found.upcards[up] = solver.solve()
            found.upcard_probability[up] = shoe[up] / n
    finally:
        forget_part_dealt()
    return found
