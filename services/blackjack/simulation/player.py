"""One process playing rounds through the real decider (``table.apply``), one box, with a
basic strategy: no copy of the rules, so the simulated RTP measures the engine itself."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Final, Protocol

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.decisions.funds import first_funding
from blackjack.domain.events import TurnAction
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.table import Applied, apply

Action = TurnAction  # the moves a TurnStarted may offer
PLAYER: Final = "sim"
BANKROLL: Final = 10**15  # never short of money: double and split are always affordable
CLOCK: Final = datetime(2026, 1, 1, tzinfo=UTC)


class Strategy(Protocol):
    def decide(
        self,
        player_cards: Sequence[str],
        upcard: str,
        can_double: bool,
        can_split: bool,
        can_surrender: bool,
    ) -> Action: ...


@dataclass
class Tally:
    """Sums that add up across processes; net amounts are in cents."""

    rounds: int = 0
    initial_bets: int = 0
    net: int = 0
    net_squares: int = 0  # sum over rounds of net**2, for the confidence interval
    outcomes: Counter[str] = field(default_factory=Counter)
    hands: int = 0

    def add(self, other: Tally) -> None:
        self.rounds += other.rounds
        self.initial_bets += other.initial_bets
        self.net += other.net
        self.net_squares += other.net_squares
        self.outcomes.update(other.outcomes)
        self.hands += other.hands


class SeededShuffler:
    """A reproducible shuffle for simulations only (the live game draws from the CSPRNG)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self._count = 0

    def __call__(self, rules: Rules) -> cmd.ShuffleShoe:
        # Fisher-Yates on 53-bit uniform floats, two swaps per draw: u * (i + 1) picks the first
        # index by its integer part, and what is left of it (at least 44 bits: the integer part
        # takes 9 at most) picks the second. No index is favoured by more than about
        # i / 2**44 (under 3e-11 here), far under anything a simulation can measure; a
        # reshuffle-every-round variant shuffles every round, and one draw per swap cost a
        # quarter more.
        order = list(fresh_shoe(rules.decks))
        draw = self._random.random
        i = len(order) - 1
        while i > 1:
            u = draw() * (i + 1)
            j = int(u)
            order[i], order[j] = order[j], order[i]
            u = (u - j) * i  # exact: the fraction of u, in [0, 1), times i
            j = int(u)
            order[i - 1], order[j] = order[j], order[i - 1]
            i -= 2
        if i == 1:
            j = int(draw() * 2)
            order[1], order[j] = order[j], order[1]
        self._count += 1
        # Not validated (416 card-code patterns): decide's permutation check refuses any order
        # that is not exactly the cards of the decks, and a refused shuffle stops the simulation.
        return facts.shuffle_shoe(order=tuple(order), salt=f"simulation-{self._count:012d}")


def _must(result: Applied | Rejection, watch: Callable[[Applied], None] | None) -> Applied:
    # Tested as an Applied (a native class under mypyc: a pointer compare) rather than as a
    # Rejection (pydantic's ABC metaclass makes that isinstance cost about 150 ns).
    if not isinstance(result, Applied):  # the strategy only picks offered actions
        raise RuntimeError(f"the engine refused a simulated command: {result}")
    if watch is not None:
        watch(result)
    return result


def play(
    rules: Rules,
    strategy: Strategy,
    rounds: int,
    bet: int,
    seed: int,
    *,
    watch: Callable[[Applied], None] | None = None,
) -> Tally:
    """Play ``rounds`` rounds at a fresh table; ``watch`` sees every command's outcome."""
    shuffler = SeededShuffler(seed)
    state = INITIAL_STATE
    base = rules.name if rules.name in PRESETS else next(iter(PRESETS))
    setup: list[cmd.Command] = [
        cmd.OpenTable(variant=base, overrides=rules.model_dump()),
        cmd.SitDown(player_id=PLAYER, seat=0),
        first_funding(rules, PLAYER, BANKROLL),
    ]
    for command in setup:
        state = _must(apply(state, command, CLOCK, shuffler), watch).state
    tally = Tally()
    memo = memo_for(strategy)
    bet_command = cmd.PlaceBet(player_id=PLAYER, box=0, amount=bet)
    deal_command = cmd.Deal(player_id=PLAYER)
    for _ in range(rounds):
        state = _must(apply(state, bet_command, CLOCK, shuffler), watch).state
        applied = _must(apply(state, deal_command, CLOCK, shuffler), watch)
        state = applied.state
        events = applied.events
        while state.round_open:
            _count_hands(tally, events)  # a hand settled at once (a split hand's bust)
            move = _next_move(state, events, memo)
            applied = _must(apply(state, move, CLOCK, shuffler), watch)
            state = applied.state
            events = applied.events
        _count(tally, events, bet)
    return tally


class StrategyMemo:
    """The strategy's answers by the ranks of the hand and the upcard: a strategy never looks
    at suits, and the same few hundred hands come up again and again."""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy
        # By the options offered (at most 16 tuples), then by the upcard's rank and the hand's
        # ranks in one string: a string key hashes once and compares as a string, where a
        # tuple of them hashed and compared item by item on every decision.
        self._answers: dict[tuple[str, ...], dict[str, Action]] = {}

    def action(self, cards: tuple[str, ...], upcard: str, options: tuple[str, ...]) -> Action:
        answers = self._answers.get(options)
        if answers is None:
            answers = self._answers[options] = {}
        ranks = [upcard[0]]
        for card in cards:
            ranks.append(card[0])
        key = "".join(ranks)
        action = answers.get(key)
        if action is None:
            can = options.__contains__
            action = self.strategy.decide(
                cards, upcard, can("double"), can("split"), can("surrender")
            )
            if action not in options:
                action = "hit" if "hit" in options else "stand"
            answers[key] = action
        return action


_last_memo: Final[list[StrategyMemo]] = []


def memo_for(strategy: Strategy) -> StrategyMemo:
    """The memo of the last strategy played, if it is this one: the benchmark plays many
    short runs with one strategy."""
    if _last_memo and _last_memo[0].strategy is strategy:
        return _last_memo[0]
    _last_memo[:] = [StrategyMemo(strategy)]
    return _last_memo[0]


def _next_move(state: TableState, events: list[ev.Event], memo: StrategyMemo) -> cmd.Command:
    """Plays as a client does: the buttons are those of the last TurnStarted."""
    if state.phase == "insurance":
        return _DECLINE_INSURANCE  # basic strategy never insures
    turn = events[-1]  # a decision awaited is the last thing a command's events say
    assert isinstance(turn, ev.TurnStarted) and turn.actions is not None, turn
    upcard = state.upcard
    assert upcard is not None
    hand = state.boxes[turn.box].hands[turn.hand]
    return _command(memo.action(hand.cards, upcard, turn.actions), turn.box, turn.hand)


HAND_COMMANDS: Final[dict[str, type[cmd.HandCommand]]] = {
    "hit": cmd.Hit,
    "stand": cmd.Stand,
    "double": cmd.Double,
    "split": cmd.Split,
    "surrender": cmd.Surrender,
}


# Commands are frozen values: the simulator validates each distinct one once and sends it again.
@cache
def _command(action: str, box: int, hand: int) -> cmd.HandCommand:
    return HAND_COMMANDS[action](player_id=PLAYER, box=box, hand=hand)


_DECLINE_INSURANCE: Final = cmd.DeclineInsurance(player_id=PLAYER, box=0)


def _count_hands(tally: Tally, events: list[ev.Event]) -> None:
    """Count the hands a command settled before the round's last command (a bust lost at once
    by its Hit or Double, ``Rules.bust_settled_at_once``, while the next split hand plays)."""
    hand_settled = ev.HandSettled  # an exact type, as in ``_count``
    for event in events:
        if type(event) is hand_settled:
            tally.outcomes[event.outcome] += 1
            tally.hands += 1


def _count(tally: Tally, events: list[ev.Event], bet: int) -> None:
    """Add one round, from the events of its last command (settlement always comes last; the
    hands settled before it are counted by ``_count_hands``)."""
    # Exact types (no event class has subclasses): isinstance of a pydantic class goes through
    # its ABC metaclass, about 150 ns for each event of another class, a few microseconds a
    # round over all the events; looked up once.
    hand_settled, round_settled = ev.HandSettled, ev.RoundSettled
    for event in events:
        if type(event) is hand_settled:
            tally.outcomes[event.outcome] += 1
            tally.hands += 1
        elif type(event) is round_settled:
            net = event.results[0].net
            tally.rounds += 1
            tally.initial_bets += bet
            tally.net += net
            tally.net_squares += net * net
