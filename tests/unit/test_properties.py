"""Properties of the table under random play, for every preset.

Hypothesis drives a table through ``blackjack.table.apply`` with a mix of the actions the
table offers (``legal_actions``) and random, often illegal, commands with random fields; the
clock moves on and, at shared tables, the timers expire. After every command:

(a) money is conserved: for every player, deposits - withdrawals - money paid back on leaving
    == balance + money on the table + net loss to the house (from the ``RoundSettled``
    results), and the house's result computed from the money events alone agrees; at every
    ``RoundSettled`` the players' nets add up to minus the house's result of that round;
(b) no balance is ever negative and every ``balance_after`` is the folded balance;
(c) a rejected command returns a ``Rejection`` and leaves the state as it was;
(d) replaying the JSON of every event from ``INITIAL_STATE`` gives the live state;
(e) every button offered is accepted, and a play command (or taking a box's whole bet back)
    that is not offered is refused;
(f) hands per box, one-card split aces, no open hand at 21 or more, and the dealer's hand
    drawn exactly to the preset's H17/S17 rule;
(g) whenever a hand waits for a decision, the last ``TurnStarted`` names that hand and lists
    exactly the actions the table accepts on it now, in the contract's order.

The test shuffler uses ``random.Random(seed)`` (a fixed seed from Hypothesis, for
reproducible examples only); production shoes come from ``blackjack.rng``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.cards import RANKS, fresh_shoe
from blackjack.domain.decide import decide
from blackjack.domain.decisions.funds import first_funding
from blackjack.domain.decisions.options import hand_actions, turn_options
from blackjack.domain.evolve import evolve, fold
from blackjack.domain.hand import is_natural, total
from blackjack.domain.legal import LegalActions, legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, Rules
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.table import apply

START = datetime(2026, 1, 1, tzinfo=UTC)
EVENT = TypeAdapter(ev.AnyEvent)
PLAYERS = ("ann", "bob", "cy")
STEPS = 45
MULTI_STEPS = 90

PLAY_BUTTONS: dict[type[cmd.HandCommand], str] = {
    cmd.Hit: "hit",
    cmd.Stand: "stand",
    cmd.Double: "double",
    cmd.Split: "split",
    cmd.Surrender: "surrender",
}
PLAY_COMMANDS = {name: command for command, name in PLAY_BUTTONS.items()}
DECISIONS = {"split", "double", "surrender", "insurance", "no_insurance"}
BALANCE_EVENTS = (
    ev.FundsDeposited,
    ev.FundsWithdrawn,
    ev.BetPlaced,
    ev.BetRefunded,
    ev.InsuranceTaken,
    ev.InsuranceSettled,
    ev.HandDoubled,
    ev.HandSplit,
    ev.HandSettled,
)


# ---- the shoe -----------------------------------------------------------------------------


class SeededShuffler:
    """Reproducible shoes, each still a permutation of the decks. Some are plainly shuffled;
    some put the cards that make decisions (aces, fives, sixes, eights, tens) first; some deal
    runs of one rank, so that pairs, split aces, resplit attempts and dealer aces come up."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self.count = 0

    def __call__(self, rules: Rules) -> cmd.ShuffleShoe:
        self.count += 1
        cards = list(fresh_shoe(rules.decks))
        self._random.shuffle(cards)
        mode = self._random.random()
        if mode < 0.35:
            rich = [c for c in cards if c[0] in "A568TK"]
            cards = rich + [c for c in cards if c[0] not in "A568TK"]
        elif mode < 0.6:
            ranks = list(RANKS)
            self._random.shuffle(ranks)
            cards.sort(key=lambda card: ranks.index(card[0]))
        return cmd.ShuffleShoe(order=tuple(cards), salt=f"property-salt-{self.count:06d}")


# ---- bookkeeping from the events alone ----------------------------------------------------


@dataclass
class Ledger:
    """Money per player, from the events only."""

    paid_in: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    house: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    settled_net: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    house_by_round: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    insurance_paid: dict[tuple[int, int], int] = field(default_factory=dict)
    hand_paid: dict[tuple[int, int, int], int] = field(default_factory=dict)

    def record(self, event: ev.Event) -> None:
        """``house`` is what the house holds of a player's money (on the table or won)."""
        match event:
            case ev.FundsDeposited(player_id=pid, amount=amount):
                self.paid_in[pid] += amount
            case ev.FundsWithdrawn(player_id=pid, amount=amount):
                self.paid_in[pid] -= amount
            case ev.SeatLeft(player_id=pid, balance_returned=amount):
                self.paid_in[pid] -= amount
            case ev.BetPlaced() | ev.HandDoubled() | ev.HandSplit() | ev.InsuranceTaken():
                self._house(event.player_id, event.round, event.amount)
            case ev.BetRefunded(player_id=pid, round=rnd, amount=amount):
                self._house(pid, rnd, -amount)
            case ev.HandSettled(player_id=pid, round=rnd, box=box, hand=hand, payout=payout):
                self._house(pid, rnd, -payout)
                self.hand_paid[(rnd, box, hand)] = payout
            case ev.InsuranceSettled(player_id=pid, round=rnd, box=box, payout=payout):
                self._house(pid, rnd, -payout)
                self.insurance_paid[(rnd, box)] = payout
            case ev.RoundSettled(round=rnd, results=results):
                assert sum(r.net for r in results) == -self.house_by_round[rnd], (
                    f"round {rnd}: the players' nets {[r.net for r in results]} against a "
                    f"house result of {self.house_by_round[rnd]}"
                )
                for result in results:
                    self.settled_net[result.player_id] += result.net
                    assert result.net == result.paid - result.wagered
            case ev.RoundVoided(round=rnd, returns=returns):
                # every wager back less what the round paid; a payment the balance no longer
                # held stays with the player, a loss of the house's
                for back in returns:
                    self._house(back.player_id, rnd, -back.returned)
                    self.settled_net[back.player_id] += back.not_recovered
            case _:
                pass

    def _house(self, pid: str, rnd: int, amount: int) -> None:
        self.house[pid] += amount
        self.house_by_round[rnd] += amount


def on_table(state: TableState, pid: str, ledger: Ledger) -> int:
    """The player's money in the round not yet settled: bets (less what a hand settled before
    the round, a blackjack paid at once, paid back), and an insurance bet until the round's
    settlement (less what it paid when the peek settled it)."""
    money = 0
    for index, box in enumerate(state.boxes):
        if box.player_id != pid:
            continue
        for number, hand in enumerate(box.hands):
            money += hand.stake
            if hand.settled:
                money -= ledger.hand_paid[(state.round, index, number)]
        if not box.hands:
            money += box.bet
        if box.insurance in ("taken", "settled"):
            money += box.insurance_stake
        if box.insurance == "settled":
            money -= ledger.insurance_paid[(state.round, index)]
    return money


# ---- the checks ---------------------------------------------------------------------------


def check_event(before: TableState, event: ev.Event, after: TableState) -> None:
    """(b) every balance_after is the folded balance; (f) the dealer drew to the rule, and
    every box dealt holds a bet within the table limits."""
    if isinstance(event, ev.DealStarted):
        rules = before.rules
        assert all(rules.min_bet <= before.boxes[i].bet <= rules.max_bet for i in event.boxes)
    if isinstance(event, BALANCE_EVENTS):
        pid = event.player_id
        assert after.players[pid].balance == event.balance_after, event
    assert all(p.balance >= 0 for p in after.players.values()), event
    if isinstance(event, ev.RoundSettled):
        check_dealer(before, event)


def check_dealer(state: TableState, settled: ev.RoundSettled) -> None:
    dealer = state.dealer
    assert settled.dealer_total == total(dealer).best
    assert settled.dealer_blackjack == is_natural(dealer)
    live = any(h.status == "standing" for box in state.boxes for h in box.hands)
    if not live or is_natural(dealer):
        assert len(dealer) == 2, f"the dealer drew with nothing to play against: {dealer}"
        return
    h17 = state.rules.dealer_hits_soft_17

    def draws(cards: tuple[str, ...]) -> bool:
        t = total(cards)
        return t.best < 17 or (t.best == 17 and t.soft and h17)

    for length in range(2, len(dealer)):
        assert draws(dealer[:length]), f"the dealer drew on {dealer[:length]} (h17={h17})"
    assert not draws(dealer), f"the dealer stopped on {dealer} (h17={h17})"


def check_state(state: TableState, ledger: Ledger, players_ever: set[str]) -> None:
    """(a) money and (f) the shape of the hands, between commands."""
    rules = state.rules
    for pid in players_ever:
        player = state.players.get(pid)
        balance = 0 if player is None else player.balance
        table = on_table(state, pid, ledger)
        loss = -ledger.settled_net[pid]
        assert ledger.paid_in[pid] == balance + table + loss, (
            pid,
            ledger.paid_in[pid],
            balance,
            table,
            loss,
        )
        assert ledger.house[pid] == table + loss, (pid, ledger.house[pid], table, loss)
    for box in state.boxes:
        assert len(box.hands) <= rules.max_splits + 1
        for hand in box.hands:
            if hand.split_aces:
                assert len(hand.cards) == 2, hand
            if hand.status == "open":
                assert hand.total.best < 21, hand
    if state.active is not None:
        box_index, hand_index = state.active
        assert state.boxes[box_index].hands[hand_index].status == "open"


def command_for(button: str, pid: str, legal: LegalActions, amount: int) -> cmd.Command:
    name, _, arg = button.partition(":")
    match name:
        case "bet":
            return cmd.PlaceBet(player_id=pid, box=int(arg), amount=amount)
        case "deal":
            return cmd.Deal(player_id=pid)
        case "clear":
            return cmd.ClearBets(player_id=pid)
        case "remove":
            return cmd.RemoveBet(player_id=pid, box=int(arg))
        case "pass":
            return cmd.Pass(player_id=pid)
        case "rebet":
            return cmd.Rebet(player_id=pid, multiplier=int(arg.removeprefix("x")))
        case "insurance":
            return cmd.TakeInsurance(player_id=pid, box=int(arg))
        case "no_insurance":
            return cmd.DeclineInsurance(player_id=pid, box=int(arg))
    assert legal.turn is not None
    return PLAY_COMMANDS[name](player_id=pid, box=legal.turn.box, hand=legal.turn.hand)


def offered(command: cmd.Command, legal: LegalActions) -> bool | None:
    """Whether a play command is one of the buttons (None: not a play command)."""
    if isinstance(command, cmd.TakeInsurance):
        return command.box in legal.insurance_boxes
    if isinstance(command, cmd.DeclineInsurance):
        return command.box in legal.decline_boxes
    if isinstance(command, cmd.RemoveBet) and command.amount is None:
        return command.box in legal.remove_boxes
    if not isinstance(command, cmd.HandCommand):
        return None
    name = PLAY_BUTTONS[type(command)]
    turn = legal.turn
    return (
        turn is not None
        and command.box == turn.box
        and command.hand in (None, turn.hand)
        and name in turn.actions
    )


# ---- random commands ----------------------------------------------------------------------

AMOUNTS = st.sampled_from([-100, 0, 1, 50, 99, 100, 101, 250, 1000, 1001, 5000, 50_000, 50_001])


def random_command(draw: Any, rules: Rules) -> cmd.Command:
    pid = draw(st.sampled_from([*PLAYERS, "ghost"]))
    box = draw(st.integers(-1, rules.boxes))
    hand = draw(st.sampled_from([None, 0, 1, 2]))
    seat = draw(st.integers(-1, rules.seats))
    kind = draw(
        st.sampled_from(
            [
                "bet",
                "deal",
                "clear",
                "remove",
                "pass",
                "rebet",
                "insurance",
                "no_insurance",
                "hit",
                "stand",
                "double",
                "split",
                "surrender",
                "deposit",
                "withdraw",
                "sit",
                "move",
                "leave",
                "disconnect",
                "reconnect",
                "open",
                "shuffle",
            ]
        )
    )
    match kind:
        case "bet":
            return cmd.PlaceBet(player_id=pid, box=box, amount=draw(AMOUNTS))
        case "deal":
            return cmd.Deal(player_id=pid)
        case "clear":
            return cmd.ClearBets(player_id=pid)
        case "remove":
            amount = draw(st.one_of(st.none(), AMOUNTS))
            return cmd.RemoveBet(player_id=pid, box=box, amount=amount)
        case "pass":
            return cmd.Pass(player_id=pid)
        case "rebet":
            return cmd.Rebet(player_id=pid, multiplier=draw(st.integers(0, 3)))
        case "insurance":
            return cmd.TakeInsurance(player_id=pid, box=box)
        case "no_insurance":
            return cmd.DeclineInsurance(player_id=pid, box=box)
        case "deposit":
            return cmd.Deposit(player_id=pid, amount=draw(AMOUNTS))
        case "withdraw":
            return cmd.Withdraw(player_id=pid, amount=draw(AMOUNTS))
        case "sit":
            return cmd.SitDown(player_id=pid, seat=seat)
        case "move":
            return cmd.MoveSeat(player_id=pid, seat=seat)
        case "leave":
            return cmd.LeaveTable(player_id=pid)
        case "disconnect":
            return cmd.Disconnect(player_id=pid)
        case "reconnect":
            return cmd.Reconnect(player_id=pid)
        case "open":
            return cmd.OpenTable(variant=draw(st.sampled_from([*PRESETS, "nope"])))
        case "shuffle":
            order = list(fresh_shoe(rules.decks))
            if draw(st.booleans()):
                order[0] = "AS" if order[0] != "AS" else "KS"  # not a permutation
            return cmd.ShuffleShoe(order=tuple(order), salt="s" * 16)
    return PLAY_COMMANDS[kind](player_id=pid, box=box, hand=hand)


# ---- the run ------------------------------------------------------------------------------


def play_table(
    variant: str,
    data: st.DataObject,
    seed: int,
    overrides: dict[str, object] | None = None,
    operator: bool = False,
) -> list[ev.Event]:
    """``operator``: the operator also suspends and resumes the table and stands players up
    now and then."""
    shuffler = SeededShuffler(seed)
    rules = PRESETS[variant].with_overrides(overrides or {})
    multi = rules.seats > 1
    now = START
    state: TableState = INITIAL_STATE
    events: list[ev.Event] = []
    ledger = Ledger()
    players_ever: set[str] = set()

    def submit(command: cmd.Command) -> bool:
        nonlocal state
        before = state
        snapshot = state.to_doc()
        result = apply(state, command, now, shuffler)
        # A state handed out is never changed, whatever the decider made of the command.
        assert state is before and state.to_doc() == snapshot
        if isinstance(result, Rejection):  # (c)
            assert isinstance(decide(state, command, now), Rejection)
            return False
        folded = state
        for event in result.events:
            after = evolve(folded, event)
            check_event(folded, event, after)
            ledger.record(event)
            if isinstance(event, ev.SeatTaken):
                players_ever.add(event.player_id)
            folded = after
        assert folded == result.state
        events.extend(result.events)
        state = result.state
        check_state(state, ledger, players_ever)
        check_turn_announced(state, events)
        return True

    assert submit(cmd.OpenTable(variant=variant, overrides=overrides or {}))
    count = data.draw(st.integers(2, 3), label="players") if multi else 1
    seats = data.draw(st.permutations(range(rules.seats)), label="seats")[:count]
    for pid, seat in zip(PLAYERS, seats, strict=False):
        assert submit(cmd.SitDown(player_id=pid, seat=seat))
        balance = data.draw(st.sampled_from([150, 1000, 2500, 20_000, 200_000]), label="balance")
        assert submit(first_funding(rules, pid, balance))

    for _ in range(MULTI_STEPS if multi else STEPS):
        if multi:
            now += timedelta(seconds=data.draw(st.integers(0, 4), label="tick"))
        roll = data.draw(st.integers(0, 99), label="roll")
        if multi and roll < 8:
            now += timedelta(seconds=data.draw(st.integers(0, 20), label="wait"))
            submit(cmd.ExpireTimers())
            continue
        if operator and roll < 12:
            submit(data.draw(st.sampled_from(operator_commands(state)), label="operator"))
            continue
        if roll < 25:
            command = random_command(data.draw, state.rules)
            actor = getattr(command, "player_id", None)
            shown = None if actor is None else offered(command, legal_actions(state, actor, now))
            accepted = submit(command)
            if shown is not None:  # (e) a play command is accepted exactly when offered
                assert accepted == shown, (command, shown)
            continue
        choices = [
            (pid, button, legal)
            for pid in sorted(state.players)
            for legal in [legal_actions(state, pid, now)]
            for button in legal.buttons()
        ]
        # (e) the simulator's fast ``turn_options`` offers exactly the decider's turn buttons
        # until the turn's clock runs out (it does not read the clock: from the deadline on
        # the decider refuses every move)
        turns = [legal.turn for _, _, legal in choices if legal.turn is not None]
        late = state.deadline is not None and now >= state.deadline
        expected = frozenset() if late else turn_options(state)
        if state.phase == "insurance" and turns:
            # page 002: a move declines the box's insurance; offered only at a table with the
            # option, on the box that plays first, and they are the actions its turn will list
            assert state.rules.move_declines_insurance and not late, turns
            box = turns[0].box
            assert turns[0].hand == 0 and state.boxes[box].insurance == "offered", turns
            expected = frozenset(hand_actions(state, box, 0))
        assert set(turns[0].actions if turns else ()) == expected, turns
        if not choices:
            continue
        decisions = [c for c in choices if c[1].split(":")[0] in DECISIONS]
        if decisions:  # split, double, surrender and insurance come up less than bets
            prefer: bool = data.draw(st.booleans(), label="take a decision")
            choices = decisions if prefer else choices
        pid, button, legal = data.draw(st.sampled_from(choices), label="button")
        amount = 0
        if button.startswith("bet:"):
            # the chip the button was offered for: what the box lacks of the minimum, else 1
            amount = max(1, state.rules.min_bet - state.boxes[int(button[4:])].bet)
            if data.draw(st.booleans(), label="another chip"):
                chips = [1, 50, 250, 1000, 5000, 50_000]
                submit(command_for(button, pid, legal, data.draw(st.sampled_from(chips))))
                continue
        if button.startswith("remove:") and data.draw(st.booleans(), label="some chips"):
            box = int(button.partition(":")[2])
            bet = state.boxes[box].bet
            part = data.draw(st.sampled_from([1, 50, bet - state.rules.min_bet, bet, bet + 1]))
            # a part is taken back exactly when it is positive and at most the bet (what is
            # left may be under the minimum until the deal)
            fits = 0 < part <= bet
            assert submit(cmd.RemoveBet(player_id=pid, box=box, amount=part)) == fits
            continue
        # (e) every button offered is accepted, as offered
        assert submit(command_for(button, pid, legal, amount)), (pid, button)

    # (d) replay from the JSON of every event
    replayed = fold(EVENT.validate_json(e.model_dump_json()) for e in events)
    assert replayed == state
    return events


def operator_commands(state: TableState) -> list[cmd.Command]:
    commands: list[cmd.Command] = [
        cmd.SuspendTable(operator="ops", reason="drill"),
        cmd.ResumeTable(operator="ops"),
    ]
    for pid in sorted(state.players):
        commands.append(cmd.StandUpPlayer(player_id=pid, operator="ops", reason="drill"))
    if state.rules.void_on_malfunction and state.round_in_play:
        commands.append(cmd.VoidRound(round=state.round, operator="ops", reason="drill"))
    return commands


def check_turn_announced(state: TableState, events: list[ev.Event]) -> None:
    """(g) the last TurnStarted is the decision the table waits for, with its actions."""
    options = turn_options(state)
    if not options:
        return
    announced = next(e for e in reversed(events) if isinstance(e, ev.TurnStarted))
    assert state.active == (announced.box, announced.hand), (state.active, announced)
    assert announced.actions is not None and set(announced.actions) == options, announced
    order = ("hit", "stand", "double", "split", "surrender")
    assert list(announced.actions) == sorted(announced.actions, key=order.index)


@pytest.mark.parametrize("variant", sorted(PRESETS))
@settings(
    max_examples=70,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_random_play_keeps_the_invariants(variant: str, data: st.DataObject, seed: int) -> None:
    play_table(variant, data, seed)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_random_play_keeps_the_invariants_where_seats_sat_out_are_freed(
    data: st.DataObject, seed: int
) -> None:
    """The same invariants at a shared table that stands up a player after one round sat
    out: the money paid out is each one's balance (conservation), the log replays."""
    rules: dict[str, object] = {"seat_released_after_rounds_sat_out": 1}
    events = play_table("atlantic-city-multi", data, seed, rules)
    for index, event in enumerate(events):
        if isinstance(event, ev.SeatLeft) and event.reason == "sat_out":
            # at the end of a round: right after its settlement, or another stand-up
            assert isinstance(events[index - 1], ev.RoundSettled | ev.SeatLeft)
