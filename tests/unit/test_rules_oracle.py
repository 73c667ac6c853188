"""The decider against a second, independent reading of the seed pages.

Random play (any button the table offers, odd-cent bets, deposits and withdrawals, disconnects,
the clock of the shared table) on shoes rich in aces and tens. Every round is then re-scored
from its events alone by the small rules below, written from the pages and not from the
domain's code: what each hand, each insurance and the dealer should have done and been paid,
which decisions each ``TurnStarted`` should list and which boxes insurance should be offered to.
Money is checked after every command as in ``test_rules_corners``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.evolve import apply_event
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, Rules
from blackjack.domain.state import TableState
from tests.unit.test_rules_corners import Ledger

_TEN = {"T", "J", "Q", "K"}


def points(card: str) -> int:
    rank = card[0]
    return 1 if rank == "A" else 10 if rank in _TEN else int(rank)


def best(cards: list[str]) -> tuple[int, bool]:
    """The best total and whether an ace counts eleven in it."""
    hard = sum(points(c) for c in cards)
    if any(c[0] == "A" for c in cards) and hard + 10 <= 21:
        return hard + 10, True
    return hard, False


def natural(cards: list[str]) -> bool:
    return len(cards) == 2 and best(cards)[0] == 21


@dataclass
class SeenHand:
    cards: list[str] = field(default_factory=list)
    from_split: bool = False
    doubled: bool = False
    surrendered: bool = False


def expected_payout(rules: Rules, hand: SeenHand, dealer: list[str], stake: int) -> tuple[str, int]:
    mine = best(hand.cards)[0]
    theirs = best(dealer)[0]
    blackjack = natural(hand.cards) and not hand.from_split
    if hand.surrendered:
        return "surrender", stake // 2
    if mine > 21:
        return "bust", 0
    if blackjack and natural(dealer):
        return "push", stake
    if blackjack:
        winnings = stake * 3 // 2
        unit = rules.blackjack_win_rounded_down_to
        return "blackjack", stake + winnings // unit * unit
    if natural(dealer):
        return "lose", 0
    if theirs > 21 or mine > theirs:
        return "win", 2 * stake
    return ("push", stake) if mine == theirs else ("lose", 0)


def rescore(rules: Rules, events: list[ev.Event]) -> int:
    """Check one settled round's events; the number of hands checked."""
    dealer: list[str | None] = []
    boxes: dict[int, list[SeenHand]] = {}  # a split puts its second hand after the first
    settled_as: dict[int, SeenHand] = {}  # each HandSettled's hand, by the event's position
    for position, e in enumerate(events):
        if isinstance(e, ev.CardDealt):
            if e.to == "dealer":
                dealer.append(e.card)
            else:
                assert e.box is not None and e.hand is not None and e.card is not None
                hands = boxes.setdefault(e.box, [SeenHand()])
                hands[e.hand].cards.append(e.card)
        elif isinstance(e, ev.DealerHoleCardRevealed):
            dealer[0 if rules.hole_card_first else 1] = e.card
        elif isinstance(e, ev.HandSplit):
            first, second = boxes[e.box][e.hand].cards
            split = [SeenHand([first], from_split=True), SeenHand([second], from_split=True)]
            boxes[e.box][e.hand : e.hand + 1] = split
        elif isinstance(e, ev.HandDoubled):
            boxes[e.box][e.hand].doubled = True
        elif isinstance(e, ev.HandSurrendered):
            boxes[e.box][e.hand].surrendered = True
        elif isinstance(e, ev.HandSettled):
            # the hand as its box holds it then (a hand settled at once keeps its place: a
            # later split is of a hand after it)
            settled_as[position] = boxes[e.box][e.hand]
    shown = [c for c in dealer if c is not None]
    assert len(shown) == len(dealer), "a settled round shows the hole card"
    for position, e in enumerate(events):
        if isinstance(e, ev.HandSettled):
            hand = settled_as[position]
            assert (e.outcome, e.payout) == expected_payout(rules, hand, shown, e.stake), (
                hand,
                shown,
            )
            if hand.from_split and hand.cards[0][0] == "A" and rules.split_aces_one_card:
                assert len(hand.cards) == 2  # one card to each split ace
            if hand.doubled:
                assert len(hand.cards) == 3  # two cards, and exactly one after the double
        elif isinstance(e, ev.InsuranceSettled):
            assert e.stake > 0 and e.payout == (3 * e.stake if natural(shown) else 0)
    # The dealer draws only while a hand stands to be compared, and then by the rule.
    live = any(
        best(h.cards)[0] <= 21 and not h.surrendered and not (natural(h.cards) and not h.from_split)
        for hands in boxes.values()
        for h in hands
    )
    drawn = shown[:2]
    if live and not natural(drawn):
        while True:
            total, soft = best(drawn)
            if total > 17 or (total == 17 and not (soft and rules.dealer_hits_soft_17)):
                break
            drawn.append(shown[len(drawn)])
    assert drawn == shown
    return sum(isinstance(e, ev.HandSettled) for e in events)


def expected_actions(state: TableState, box_index: int, hand_index: int) -> list[str]:
    rules = state.rules
    box = state.boxes[box_index]
    hand = box.hands[hand_index]
    assert box.player_id is not None
    balance = state.players[box.player_id].balance
    cards = list(hand.cards)
    total, soft = best(cards)
    if rules.split_by == "rank":
        pair = len(cards) == 2 and cards[0][0] == cards[1][0]
    else:
        pair = len(cards) == 2 and points(cards[0]) == points(cards[1])
    split_aces = rules.split_aces_one_card and hand.from_split and cards[0][0] == "A"
    actions = ["stand"]
    if total < 21:
        actions.append("hit")
    if (
        len(cards) == 2
        and not split_aces
        and (rules.double_after_split or not hand.from_split)
        and (
            rules.double_on == "any_two"
            or total in rules.double_totals
            or (rules.double_totals_ace_low and soft and total - 10 in rules.double_totals)
        )
        and balance >= hand.stake
    ):
        actions.append("double")
    if pair and len(box.hands) <= rules.max_splits and balance >= hand.stake:
        actions.append("split")
    if rules.late_surrender and len(cards) == 2 and len(box.hands) == 1:
        actions.append("surrender")
    return sorted(actions)


class Oracle(Ledger):
    """A ledger that also checks each announced turn and insurance offer as it happens."""

    checked_turns = 0
    checked_offers = 0
    soft_doubles = 0  # turns that offered a double on a soft hand
    hands_rescored = 0
    resplits = 0  # splits of a box already split

    def send(self, command: cmd.Command) -> list[ev.Event] | Rejection:
        before = self.state
        result = super().send(command)
        if isinstance(result, Rejection):
            return result
        # Each offer is judged on the table as it stands right after it: a command may go on
        # past a TurnStarted (page 002's move during the insurance offer: the decline, the
        # peek, the turn, then the move).
        state = before.copy()
        for e in result:
            apply_event(state, e)
            if isinstance(e, ev.TurnStarted) and state.active == (e.box, e.hand):
                assert e.actions is not None
                assert sorted(e.actions) == expected_actions(state, e.box, e.hand), e
                self.checked_turns += 1
                cards = list(state.boxes[e.box].hands[e.hand].cards)
                self.soft_doubles += "double" in e.actions and best(cards)[1]
            elif isinstance(e, ev.HandSplit) and len(before.boxes[e.box].hands) > 1:
                self.resplits += 1
            elif isinstance(e, ev.InsuranceOffered) and state.phase == "insurance":
                for index, box in enumerate(state.boxes):
                    if not box.hands or box.player_id is None:
                        continue
                    if box.insurance not in ("offered", "none"):
                        continue  # decided in the same command
                    balance = state.players[box.player_id].balance
                    offer = not natural(list(box.hands[0].cards)) and 0 < box.bet // 2 <= balance
                    assert (index in e.boxes) == offer, (index, box.bet, balance, e.boxes)
                    self.checked_offers += 1
        return result


def _play(
    variant: str,
    seed: int,
    steps: int,
    overrides: dict[str, object] | None = None,
    favour: str | None = None,
) -> Oracle:
    """``favour``: a move taken nine times in ten where it is offered (a split, to reach the
    resplits that random choices among all the buttons rarely reach)."""
    rng = random.Random(seed)  # the test's own choices, reproducible; not a casino shuffle
    turn_seconds = PRESETS[variant].turn_seconds
    seats = min(PRESETS[variant].seats, 3)
    players = [(f"p{i}", i, rng.choice([150, 333, 1001, 5000, 100_000])) for i in range(seats)]
    table = Oracle(variant, [], players=players, overrides=overrides)

    def rich_shoe(rules: Rules) -> cmd.ShuffleShoe:
        # A shuffled shoe whose first 60 cards hold 30 aces and tens: many naturals and pairs.
        order = list(fresh_shoe(rules.decks))
        rng.shuffle(order)
        picked = [i for i, c in enumerate(order) if c[0] in "AT"][:30]
        chosen = set(picked)
        rest = [c for i, c in enumerate(order) if i not in chosen]
        front = [order[i] for i in picked] + rest[:30]
        rng.shuffle(front)
        return cmd.ShuffleShoe(order=tuple(front + rest[30:]), salt="oracle-salt-00000")

    table.shuffler = rich_shoe
    for _ in range(steps):
        ids = [pid for pid, _, _ in players]
        roll = rng.random()
        if roll < 0.04:
            table.send(cmd.Deposit(player_id=rng.choice(ids), amount=rng.choice([1, 99, 1000])))
        elif roll < 0.07:
            table.send(cmd.Withdraw(player_id=rng.choice(ids), amount=rng.choice([1, 99, 1000])))
        elif roll < 0.09:
            kind = rng.choice([cmd.Disconnect, cmd.Reconnect])
            table.send(kind(player_id=rng.choice(ids)))
        acted = False
        for pid in ids:
            buttons = legal_actions(table.state, pid, table.now).buttons()
            if not buttons or rng.random() < 0.15:
                continue
            favoured = [b for b in buttons if b.partition(":")[0] == favour]
            chosen = favoured[0] if favoured and rng.random() < 0.9 else rng.choice(buttons)
            command = _command(table, pid, chosen, rng)
            assert not isinstance(table.send(command), Rejection), command
            acted = True
        if not acted and turn_seconds is not None:
            table.now += timedelta(seconds=rng.choice([5, 15, 16]))
            table.send(cmd.ExpireTimers())
    by_round: dict[int, list[ev.Event]] = {}
    for e in table.events:
        number = getattr(e, "round", None)
        if isinstance(number, int):
            by_round.setdefault(number, []).append(e)
    for events in by_round.values():
        if any(isinstance(e, ev.RoundSettled) for e in events):
            table.hands_rescored += rescore(table.state.rules, events)
    return table


def _command(table: Ledger, pid: str, button: str, rng: random.Random) -> cmd.Command:
    state = table.state
    name, _, arg = button.partition(":")
    if name == "bet":
        box = int(arg)
        room = min(state.players[pid].balance, state.rules.max_bet - state.boxes[box].bet)
        amount = min(rng.choice([100, 101, 155, 333, 550, 1001, 5000]), room)
        return cmd.PlaceBet(player_id=pid, box=box, amount=amount)
    if name == "rebet":
        return cmd.Rebet(player_id=pid, multiplier=int(arg[1:]))
    if name == "insurance":
        return cmd.TakeInsurance(player_id=pid, box=int(arg))
    if name == "no_insurance":
        return cmd.DeclineInsurance(player_id=pid, box=int(arg))
    if name == "remove":
        return cmd.RemoveBet(player_id=pid, box=int(arg))
    simple: dict[str, type[cmd.PlayerCommand]] = {
        "deal": cmd.Deal,
        "pass": cmd.Pass,
        "clear": cmd.ClearBets,
    }
    if name in simple:
        return simple[name](player_id=pid)
    # the hand whose turn it is, or (page 002, during the insurance offer) the one a move
    # would decline the insurance of and be played on
    turn = legal_actions(state, pid, table.now).turn
    assert turn is not None
    box, hand = turn.box, turn.hand
    moves: dict[str, type[cmd.HandCommand]] = {
        "hit": cmd.Hit,
        "stand": cmd.Stand,
        "double": cmd.Double,
        "split": cmd.Split,
        "surrender": cmd.Surrender,
    }
    return moves[name](player_id=pid, box=box, hand=hand)


@pytest.mark.parametrize("variant", sorted(PRESETS))
def test_every_settlement_and_every_offer_agrees_with_an_independent_reading(variant: str) -> None:
    # two of them splitting where they may: a random button splits a pair once in a few
    # hundred hands
    tables = [
        _play(variant, seed, steps=400, favour="split" if seed > 3 else None) for seed in range(6)
    ]
    hands = sum(t.hands_rescored for t in tables)
    turns = sum(t.checked_turns for t in tables)
    offers = sum(t.checked_offers for t in tables)
    splits = sum(isinstance(e, ev.HandSplit) for t in tables for e in t.events)
    assert hands > 100 and turns > 80 and offers > 10 and splits > 1, (hands, turns, offers, splits)


def test_a_soft_hand_doubles_on_its_total_with_the_ace_counted_one_where_the_rules_say() -> None:
    """``double_totals_ace_low``: A-8 doubles as a 9 at mini-s17; every turn's offer is still
    the independent reading's."""
    overrides: dict[str, object] = {"double_totals_ace_low": True}
    tables = [_play("mini-s17", seed, 400, overrides) for seed in range(4)]
    assert sum(t.soft_doubles for t in tables) > 0
    assert sum(t.checked_turns for t in tables) > 80
    plain = [_play("mini-s17", seed, steps=400) for seed in range(4)]
    assert sum(t.soft_doubles for t in plain) == 0


@pytest.mark.parametrize(
    ("variant", "overrides"),
    [
        ("mini-h17", {"max_splits": 3, "split_aces_one_card": False}),
        ("atlantic-city", {"max_splits": 3, "double_after_split": False, "split_by": "value"}),
        ("surrender", {"max_splits": 2, "split_aces_one_card": False, "decks": 8}),
    ],
)
def test_resplits_and_split_aces_played_on_agree_with_the_independent_reading(
    variant: str, overrides: dict[str, object]
) -> None:
    """The rule options no preset turns on: a box split up to four hands (each split's second
    hand after its first, the hands after it moved on) and split aces that are played on."""
    tables = [_play(variant, seed, 400, overrides, favour="split") for seed in range(4)]
    assert sum(t.hands_rescored for t in tables) > 100
    assert sum(t.resplits for t in tables) > 5
