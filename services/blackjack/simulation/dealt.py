"""The RTP as dealt to the reshuffle point: the exact fresh-shoe RTP plus the cut-card effect.

``compute_rtp`` values every round as the first off a fresh shoe. A table that deals several
rounds from a shoe until its reshuffle point returns a little less (the cut-card effect): a
shoe whose first rounds took few cards (its tens gone, its small cards left) lasts for an extra
round, dealt from a shoe bad for the player. Method:

* **Renewal-reward.** Shoes are independent cycles, so the long-run return per round is
  E[sum over a shoe's rounds of v(shoe left at the round's start)] / E[rounds per shoe], with
  v the round's expectation under the fixed chart (``solver.value_shoe``). Sampling shoes and
  valuing each round by its expectation, not its outcome, leaves only the spread of v between
  compositions (a few tenths of a point), not a round's (about 1.15 units).
* **The real engine deals.** Each shoe is played by the real decider (``table.apply``) with the
  computed strategy at ``boxes`` boxes, one bet each, until the engine's own ``needs_shuffle``
  (``Rules.reshuffle``) asks for a new shoe: how many rounds a shoe lasts is the engine's.
* **Linear part, exactly valued residual.** v(shoe) - v(fresh) is taken to first order in
  the cards gone: L(K) = (N - 1) / (N - K) * sum of the effects of removal (EoR, each the
  exact change of v when one card of that value is taken from the fresh shoe: ten valuations)
  of the K cards dealt. The rounds' L are averaged with a control variate: the mean of L over
  every depth up to the reshuffle point, whose expectation is exactly 0 (the EoR are centred:
  sum p_c EoR_c = 0, and a depth fixed in advance sees each card value in proportion), and
  which follows most of the shoe-to-shoe spread (correlation about 0.997). What the linear
  form leaves out (about a tenth of the change at the reshuffle point) is measured: in each of
  ``exact_shoes`` shoes one round after the first (whose residual is 0) is drawn and valued
  exactly, and the mean of its residual v - v(fresh) - L, weighted by the shoe's rounds after
  the first, is added with its own standard error.
* **What is not in the figure:** the solver's approximations (module ``solver``: the same as
  the fresh figure's) and the sampling error, reported as a standard error and a 95 % interval.
  Each box's expectation given the shoe at the round's start is the same for every box (the
  other boxes' cards are unseen by the strategy); the number of boxes changes only how many
  cards a round takes, hence how many rounds a shoe lasts.

A table that reshuffles every round deals every round off a fresh shoe: the figure is the
fresh one exactly, with no sampling.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from functools import cache
from typing import Final

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import first_funding
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, ReshuffleAtPenetration, Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.simulation.player import (
    BANKROLL,
    HAND_COMMANDS,
    SeededShuffler,
    Strategy,
    StrategyMemo,
    memo_for,
)
from blackjack.strategy.basic import compute_strategy, value_index
from blackjack.strategy.dealer import full_shoe
from blackjack.strategy.rtp import blackjack_win_ratio, surrender_loss_ratio
from blackjack.strategy.solver import value_shoe
from blackjack.table import apply

Z_95: Final = 1.959963984540054
CLOCK: Final = datetime(2026, 1, 1, tzinfo=UTC)
SHOES_PER_CHUNK: Final = 500


@dataclass(frozen=True)
class DealtShoe:
    """One shoe as the engine dealt it: its cards by value index, and how many cards had been
    dealt when each of its rounds started."""

    cards: tuple[int, ...]
    starts: tuple[int, ...]


def deal_shoes(
    rules: Rules, strategy: Strategy, shoes: int, *, boxes: int, bet: int, seed: int
) -> list[DealtShoe]:
    """Play ``shoes`` whole shoes through the real decider at ``boxes`` boxes (one player per
    seat, each betting ``bet`` on each of its boxes), the first from a fresh table."""
    if not 1 <= boxes <= rules.boxes:
        raise ValueError(f"{rules.name} has {rules.boxes} boxes, not {boxes}")
    shuffler = SeededShuffler(seed)
    base = rules.name if rules.name in PRESETS else next(iter(PRESETS))
    owners = [f"sim{box // rules.boxes_per_seat}" for box in range(boxes)]
    players = sorted(set(owners), key=owners.index)
    state = INITIAL_STATE
    setup: list[cmd.Command] = [cmd.OpenTable(variant=base, overrides=rules.model_dump())]
    for seat, player in enumerate(players):
        setup += [
            cmd.SitDown(player_id=player, seat=seat),
            first_funding(rules, player, BANKROLL),
        ]
    bets = [cmd.PlaceBet(player_id=owners[box], box=box, amount=bet) for box in range(boxes)]
    deals = [cmd.Deal(player_id=player) for player in players]
    memo = memo_for(strategy)
    dealt: list[DealtShoe] = []
    starts: list[int] = []
    cards: tuple[int, ...] = ()
    number = None
    for command in setup:
        state, _ = _apply(state, command, shuffler)
    while True:
        # The engine shuffles a new shoe in as soon as its ``needs_shuffle`` says so (after
        # the round that reached the reshuffle point): a new shoe number starts a new cycle.
        shoe = state.shoe
        assert shoe is not None
        if shoe.number != number:
            if starts:
                dealt.append(DealtShoe(cards, tuple(starts)))
                if len(dealt) == shoes:
                    return dealt
            number, starts = shoe.number, []
            cards = tuple(value_index(card) for card in shoe.order)
        starts.append(shoe.position)
        for command in (*bets, *deals):
            state, events = _apply(state, command, shuffler)
        while state.round_open:
            state, events = _apply(state, _next_move(state, events, memo, owners), shuffler)


def _apply(
    state: TableState, command: cmd.Command, shuffler: SeededShuffler
) -> tuple[TableState, list[ev.Event]]:
    applied = apply(state, command, CLOCK, shuffler)
    if isinstance(applied, Rejection):  # the strategy only picks offered actions
        raise RuntimeError(f"the engine refused a simulated command: {applied}")
    return applied.state, applied.events


def _next_move(
    state: TableState, events: Sequence[ev.Event], memo: StrategyMemo, owners: list[str]
) -> cmd.Command:
    """As ``player._next_move``, each box played by its own player."""
    if state.phase == "insurance":  # basic strategy never insures
        box = next(i for i, b in enumerate(state.boxes) if b.insurance == "offered")
        return cmd.DeclineInsurance(player_id=owners[box], box=box)
    turn = events[-1]
    assert isinstance(turn, ev.TurnStarted) and turn.actions is not None, turn
    upcard = state.upcard
    assert upcard is not None
    hand = state.boxes[turn.box].hands[turn.hand]
    return _move(
        memo.action(hand.cards, upcard, turn.actions), owners[turn.box], turn.box, turn.hand
    )


@cache
def _move(action: str, player: str, box: int, hand: int) -> cmd.HandCommand:
    return HAND_COMMANDS[action](player_id=player, box=box, hand=hand)


# --- valuing the rounds -------------------------------------------------------------------------


@dataclass(frozen=True)
class Valuer:
    """v(fresh) and the centred effects of removal, per unit of initial bet, at one bet's
    blackjack and surrender rounding."""

    rules: Rules
    blackjack_ratio: Fraction
    surrender_loss: Fraction
    fresh: float
    eor: tuple[float, ...]  # by value index, centred: sum over the fresh shoe of p_c * eor_c = 0
    eor_mean: float  # sum p_c * EoR_c before centring (0 but for rounding and the solver's depths)

    def value(self, shoe: tuple[int, ...]) -> float:
        """v(shoe): the round's exact expectation from this shoe under the fixed chart."""
        return value_shoe(self.rules, shoe).expected_value(
            self.blackjack_ratio, self.surrender_loss
        )

    def linear(self, cards: Sequence[int], depth: int) -> float:
        """L(depth): the first-order change of v once ``cards[:depth]`` are gone."""
        n = self.rules.shoe_size
        return (n - 1) / (n - depth) * sum(self.eor[c] for c in cards[:depth])


def _value(args: tuple[Rules, tuple[int, ...], Fraction, Fraction]) -> float:
    rules, shoe, bj, sur = args
    return value_shoe(rules, shoe).expected_value(bj, sur)


def make_valuer(rules: Rules, bet: int | None, pool: Executor | None = None) -> Valuer:
    """The fresh shoe's v and each card value's exact effect of removal (eleven valuations)."""
    bj, sur = blackjack_win_ratio(rules, bet), surrender_loss_ratio(bet)
    full = full_shoe(rules.decks)
    shoes = [full]
    for c in range(10):
        shoe = list(full)
        shoe[c] -= 1
        shoes.append(tuple(shoe))
    jobs = [(rules, shoe, bj, sur) for shoe in shoes]
    values = list(pool.map(_value, jobs) if pool is not None else map(_value, jobs))
    fresh = values[0]
    raw = [v - fresh for v in values[1:]]
    n = sum(full)
    mean = sum(full[c] * raw[c] for c in range(10)) / n
    return Valuer(rules, bj, sur, fresh, tuple(e - mean for e in raw), mean)


@dataclass(frozen=True)
class ShoeSums:
    """One shoe's sums for the ratio estimator."""

    rounds: int
    linear: float  # sum over its rounds of L(start)
    control: float  # mean of L over every depth a round may start at: expectation 0


def deepest_start(rules: Rules) -> int:
    """The most cards dealt from a shoe when a round may still start from it
    (``Rules.cards_left_at_reshuffle``: the engine deals a round while fewer than the
    reshuffle fraction of the shoe is gone)."""
    return rules.shoe_size - rules.cards_left_at_reshuffle


def shoe_sums(valuer: Valuer, shoe: DealtShoe) -> ShoeSums:
    n = valuer.rules.shoe_size
    eor = valuer.eor
    linear_at = [0.0] * (len(shoe.cards) + 1)
    running = 0.0
    for k, c in enumerate(shoe.cards, start=1):
        running += eor[c]
        linear_at[k] = running
    depths = deepest_start(valuer.rules) + 1
    scale = [(n - 1) / (n - k) for k in range(n)]
    control = sum(linear_at[k] * scale[k] for k in range(depths)) / depths
    linear = sum(linear_at[k] * scale[k] for k in shoe.starts)
    return ShoeSums(len(shoe.starts), linear, control)


@dataclass(frozen=True)
class Chunk:
    sums: list[ShoeSums]
    # one round per shoe for the exact check: (the shoe's rounds after the first, the shoe
    # left at that round, L there)
    picked: list[tuple[int, tuple[int, ...], float]]


def _chunk(args: tuple[Valuer, int, int, int, int, int]) -> Chunk:
    valuer, shoes, boxes, bet, seed, picks = args
    rules = valuer.rules
    dealt = deal_shoes(rules, compute_strategy(rules), shoes, boxes=boxes, bet=bet, seed=seed)
    pick = random.Random(seed)
    picked = []
    for shoe in dealt[:picks]:
        # The first round is off the fresh shoe (residual exactly 0): draw among the others,
        # weighted by their number, R - 1.
        if len(shoe.starts) == 1:
            picked.append((0, full_shoe(rules.decks), 0.0))
            continue
        depth = pick.choice(shoe.starts[1:])
        left = list(full_shoe(rules.decks))
        for c in shoe.cards[:depth]:
            left[c] -= 1
        picked.append((len(shoe.starts) - 1, tuple(left), valuer.linear(shoe.cards, depth)))
    return Chunk([shoe_sums(valuer, shoe) for shoe in dealt], picked)


def _exact(args: tuple[Valuer, tuple[int, ...]]) -> float:
    valuer, shoe = args
    return valuer.value(shoe)


@dataclass(frozen=True)
class AsDealt:
    """The RTP as dealt to the reshuffle point; effects and errors in percentage points."""

    rules: Rules
    bet: int | None
    boxes: int
    fresh_rtp_percent: float
    reshuffles_every_round: bool
    shoes: int = 0
    rounds_per_shoe: float = 0.0
    linear_effect: float = 0.0  # percentage points
    linear_se: float = 0.0
    residual_effect: float = 0.0  # the exactly valued rounds' mean of v - v(fresh) - L
    residual_se: float = 0.0
    residual_sd: float = 0.0  # spread of the residual between rounds, in points
    exact_rounds: int = 0
    eor_percent: tuple[float, ...] = ()
    control_correlation: float = 0.0

    @property
    def effect(self) -> float:
        return self.linear_effect + self.residual_effect

    @property
    def effect_se(self) -> float:
        return math.hypot(self.linear_se, self.residual_se)

    @property
    def rtp_percent(self) -> float:
        return self.fresh_rtp_percent + self.effect

    @property
    def ci95_percent(self) -> tuple[float, float]:
        """The 95 % interval of the RTP as dealt, from the sampling's standard error."""
        half = Z_95 * self.effect_se
        return self.rtp_percent - half, self.rtp_percent + half


def compute_as_dealt(
    rules: Rules,
    bet: int | None = None,
    *,
    boxes: int = 1,
    shoes: int = 20_000,
    exact_shoes: int = 40,
    seed: int = 1,
    workers: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> AsDealt:
    """The RTP of ``rules`` as dealt to its reshuffle point at ``boxes`` boxes (see the module
    docstring); ``shoes`` shoes dealt by the engine, ``exact_shoes`` of them checked exactly."""
    from blackjack.strategy import compute_rtp

    fresh = compute_rtp(rules, bet).rtp_percent
    if not 1 <= boxes <= rules.boxes:
        raise ValueError(f"{rules.name} has {rules.boxes} boxes, not {boxes}")
    if not isinstance(rules.reshuffle, ReshuffleAtPenetration):
        return AsDealt(rules, bet, boxes, fresh, True)
    stake = bet if bet is not None else rules.min_bet
    processes = workers or os.cpu_count() or 1
    chunks = [min(SHOES_PER_CHUNK, shoes - start) for start in range(0, shoes, SHOES_PER_CHUNK)]
    picks = [0] * len(chunks)
    for i in range(min(exact_shoes, shoes)):  # spread the exact checks over the chunks
        picks[i % len(chunks)] += 1
    with ProcessPoolExecutor(max_workers=processes) as pool:
        valuer = make_valuer(rules, bet, pool)
        jobs = [
            (valuer, size, boxes, stake, seed * 1_000_003 + i, picks[i])
            for i, size in enumerate(chunks)
        ]
        results = []
        for chunk in pool.map(_chunk, jobs):
            results.append(chunk)
            if on_progress:
                on_progress(len(chunk.sums))
        picked = [p for chunk in results for p in chunk.picked]
        exact = list(pool.map(_exact, [(valuer, shoe) for _, shoe, _ in picked]))
    sums = [s for chunk in results for s in chunk.sums]
    linear, linear_se, correlation = _ratio_with_control(sums)
    mean_rounds = sum(s.rounds for s in sums) / len(sums)
    # E[sum over a shoe's rounds of r] = E[(R - 1) * r(one of its rounds after the first)]
    weighted = [
        rounds * (v - valuer.fresh - lin) / mean_rounds
        for (rounds, _, lin), v in zip(picked, exact, strict=True)
    ]
    plain = [v - valuer.fresh - lin for (_, _, lin), v in zip(picked, exact, strict=True)]
    residual, residual_se = _mean_se(weighted)
    return AsDealt(
        rules,
        bet,
        boxes,
        fresh,
        False,
        shoes=len(sums),
        rounds_per_shoe=mean_rounds,
        linear_effect=100 * linear,
        linear_se=100 * linear_se,
        residual_effect=100 * residual,
        residual_se=100 * residual_se,
        residual_sd=100 * _mean_se(plain)[1] * math.sqrt(len(plain)),
        exact_rounds=len(plain),
        eor_percent=tuple(100 * e for e in valuer.eor),
        control_correlation=correlation,
    )


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def _ratio_with_control(sums: Sequence[ShoeSums]) -> tuple[float, float, float]:
    """(sum L - beta * sum control) / sum rounds, its standard error (delta method, per shoe),
    and the correlation of L with the control; beta is the least-squares coefficient."""
    n = len(sums)
    y = [s.linear for s in sums]
    x = [s.control for s in sums]
    r = [float(s.rounds) for s in sums]
    my, mx, mr = sum(y) / n, sum(x) / n, sum(r) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    beta = sxy / sxx if sxx > 0 else 0.0
    theta = (my - beta * mx) / mr
    z = [b - beta * a - theta * c for a, b, c in zip(x, y, r, strict=True)]
    _, se = _mean_se(z)
    correlation = sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0
    return theta, se / mr, correlation
