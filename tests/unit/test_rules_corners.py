"""Corners of the seed pages played through the real decider on stacked shoes, each checked
to the cent, with the ledger watched after every command.

``Ledger`` is a ``StackedTable`` that checks, after every command, that money is only ever moved
(every player's balance plus the money on the table changes by exactly the deposits, the
withdrawals and the settled wins and losses of that command), and that every refused command is
a typed rejection that leaves the state as it was.

Card order on a stacked shoe (``scenario.build_shoe``): each box, then the dealer's first card,
each box's second card, the dealer's second card, then the cards in order of play. The dealer's
first card is the upcard except at mini-s17 (``hole_card_first``), where it is the hole card.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import get_args

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import first_funding
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.state import TableState
from tests.unit.stacked_table import StackedTable

CODES = frozenset(get_args(RejectionCode))


def money(state: TableState) -> int:
    """Every player's balance plus every bet, stake and insurance on the table not yet paid."""
    total = sum(p.balance for p in state.players.values())
    for box in state.boxes:
        if box.hands:
            total += sum(hand.stake for hand in box.hands if not hand.settled)
        else:
            total += box.bet
        if box.insurance == "taken":
            total += box.insurance_stake
    return total


def moved(events: Sequence[ev.Event]) -> int:
    """What these events add to ``money``: money paid in or out, and the house's wins and
    losses as they are settled."""
    delta = 0
    for e in events:
        if isinstance(e, ev.FundsDeposited):
            delta += e.amount
        elif isinstance(e, ev.FundsWithdrawn):
            delta -= e.amount
        elif isinstance(e, ev.SeatLeft):
            delta -= e.balance_returned
        elif isinstance(e, ev.HandSettled | ev.InsuranceSettled):
            delta += e.payout - e.stake
    return delta


class Ledger(StackedTable):
    def __init__(
        self,
        variant: str,
        cards: Sequence[str],
        players: Sequence[tuple[str, int, int]] = (("p", 0, 10_000),),
        overrides: dict[str, object] | None = None,
    ) -> None:
        super().__init__(variant, cards, overrides)
        self.expected = money(self.state)
        for pid, seat, balance in players:
            self.do(cmd.SitDown(player_id=pid, seat=seat))
            if balance:
                self.do(first_funding(self.state.rules, pid, balance))

    def send(self, command: cmd.Command) -> list[ev.Event] | Rejection:
        before = self.state
        result = super().send(command)
        if isinstance(result, Rejection):
            assert result.code in CODES and result.message
            assert self.state is before
            return result
        if hasattr(self, "expected"):  # set once the table is open
            self.expected += moved(result)
            assert money(self.state) == self.expected, (command, result)
        return result

    def refused(self, command: cmd.Command, code: str) -> None:
        before = self.state.to_doc()
        events = len(self.events)
        result = self.send(command)
        assert isinstance(result, Rejection) and result.code == code, result
        assert self.state.to_doc() == before and len(self.events) == events

    def balance(self, pid: str = "p") -> int:
        return self.state.players[pid].balance

    def buttons(self, pid: str = "p") -> list[str]:
        return legal_actions(self.state, pid, self.now).buttons()

    def settled(self) -> list[tuple[int, int, str, int, int]]:
        return [
            (e.box, e.hand, e.outcome, e.stake, e.payout)
            for e in self.events
            if isinstance(e, ev.HandSettled)
        ]

    def insurance(self) -> list[tuple[int, int, bool, int]]:
        return [
            (e.box, e.stake, e.won, e.payout)
            for e in self.events
            if isinstance(e, ev.InsuranceSettled)
        ]

    def messages(self) -> list[str]:
        return [
            m.message for e in self.events if isinstance(e, ev.RoundSettled) for m in e.messages
        ]


def bet(amount: int, box: int = 0, pid: str = "p") -> cmd.PlaceBet:
    return cmd.PlaceBet(player_id=pid, box=box, amount=amount)


def deal(pid: str = "p") -> cmd.Deal:
    return cmd.Deal(player_id=pid)


def hit(box: int = 0, hand: int | None = None, pid: str = "p") -> cmd.Hit:
    return cmd.Hit(player_id=pid, box=box, hand=hand)


def stand(box: int = 0, hand: int | None = None, pid: str = "p") -> cmd.Stand:
    return cmd.Stand(player_id=pid, box=box, hand=hand)


def double(box: int = 0, hand: int | None = None, pid: str = "p") -> cmd.Double:
    return cmd.Double(player_id=pid, box=box, hand=hand)


def split(box: int = 0, pid: str = "p") -> cmd.Split:
    return cmd.Split(player_id=pid, box=box)


def surrender(box: int = 0, pid: str = "p") -> cmd.Surrender:
    return cmd.Surrender(player_id=pid, box=box)


def insure(box: int = 0, pid: str = "p") -> cmd.TakeInsurance:
    return cmd.TakeInsurance(player_id=pid, box=box)


def decline(box: int = 0, pid: str = "p") -> cmd.DeclineInsurance:
    return cmd.DeclineInsurance(player_id=pid, box=box)


# ---- 3:2 on odd cents, in a real round -------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "cards", "stake", "payout"),
    [
        # 000: "blackjack ... is an automatic win for the player at 1.5 to 1": 1.515 -> 1.51
        ("mini-h17", ["A", "9", "K", "7"], 101, 101 + 151),
        ("mini-h17", ["A", "9", "K", "7"], 1001, 1001 + 1501),
        # 001 deals the hole card first: player A K, dealer hole 7, upcard 9
        ("mini-s17", ["A", "7", "K", "9"], 333, 333 + 499),
        # 003: "a $10 bet pays out $15"; 1.01 pays 1.51 (at once, before the dealer plays)
        ("surrender", ["A", "9", "K", "7"], 101, 101 + 151),
        # 002: "the cents part will not be paid out": the winnings only, the stake comes back
        ("atlantic-city", ["A", "9", "K", "7"], 101, 101 + 100),
        ("atlantic-city", ["A", "9", "K", "7"], 199, 199 + 200),
        ("atlantic-city", ["A", "9", "K", "7"], 550, 550 + 800),
        ("atlantic-city", ["A", "9", "K", "7"], 5000, 5000 + 7500),
    ],
)
def test_a_blackjack_on_an_odd_bet_is_paid_to_the_cent(
    variant: str, cards: list[str], stake: int, payout: int
) -> None:
    t = Ledger(variant, cards)
    t.do(bet(stake), deal())
    assert t.settled() == [(0, 0, "blackjack", stake, payout)]
    assert t.balance() == 10_000 - stake + payout


def test_a_blackjack_at_the_shared_table_loses_only_the_cents_of_its_winnings() -> None:
    # 002 second part plays the first part's rules: 7.01 wins 10.515, paid 10.00
    t = Ledger("atlantic-city-multi", ["A", "9", "K", "7"], players=(("ann", 0, 10_000),))
    t.do(bet(701, pid="ann"), deal("ann"))
    assert t.settled() == [(0, 0, "blackjack", 701, 701 + 1000)]


# ---- insurance and surrender on odd cents ----------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "cards"),
    [
        ("mini-h17", ["9", "A", "9", "K"]),
        ("surrender", ["9", "A", "9", "K"]),
        ("atlantic-city", ["9", "A", "9", "K"]),
        ("mini-s17", ["9", "K", "9", "A"]),  # hole K first, then the ace up
    ],
)
def test_insurance_on_an_odd_bet_costs_the_half_rounded_down_and_pays_2_to_1(
    variant: str, cards: list[str]
) -> None:
    t = Ledger(variant, cards)
    t.do(bet(1001), deal())
    # page 002 declines by a move too: its moves are offered with the answers
    moves = ["hit", "stand", "double", "split"] if variant == "atlantic-city" else []
    assert t.buttons() == ["insurance:0", "no_insurance:0", *moves]
    t.do(insure())
    # 10.01 insured for 5.00, which returns 15.00 against the dealer's blackjack; the bet is lost
    assert t.insurance() == [(0, 500, True, 1500)]
    assert t.settled() == [(0, 0, "lose", 1001, 0)]
    assert t.balance() == 10_000 - 1
    assert t.messages() == []


def test_insurance_lost_then_surrender_on_odd_cents() -> None:
    # 000: insurance lost, "the game continues for the initial bet amount"; then surrender
    # returns half the bet, the odd cent to the house: 10.01 - 5.00 - 5.01 = -10.01 in all.
    t = Ledger("mini-h17", ["9", "A", "6", "8"])
    t.do(bet(1001), deal(), insure())
    assert t.insurance() == [(0, 500, False, 0)]
    assert t.buttons() == ["hit", "stand", "double", "surrender"]
    t.do(surrender())
    assert t.settled() == [(0, 0, "surrender", 1001, 500)]
    assert t.balance() == 10_000 - 500 - 501


@pytest.mark.parametrize(
    ("stake", "back"), [(101, 50), (100, 50), (50_000, 25_000), (49_999, 24_999)]
)
def test_surrender_returns_half_the_bet_rounded_down_at_both_surrender_tables(
    stake: int, back: int
) -> None:
    for variant in ("mini-h17", "surrender"):
        t = Ledger(variant, ["T", "9", "6", "7"], players=(("p", 0, 100_000),))
        t.do(bet(stake), deal(), surrender())
        assert t.settled() == [(0, 0, "surrender", stake, back)]
        assert t.balance() == 100_000 - stake + back


# ---- Break Even (000) on odd cents -----------------------------------------------------------


def test_break_even_after_a_split_on_an_odd_bet() -> None:
    # 8 8 against T up / 9 hole: 8 T loses, 8 3 T wins; 1.01 each way, nothing won or lost
    t = Ledger("mini-h17", ["8", "T", "8", "9", "T", "3", "T"])
    t.do(bet(101), deal(), split(), stand(), hit())
    assert t.settled() == [(0, 0, "lose", 101, 0), (0, 1, "win", 101, 202)]
    assert t.messages() == ["Break Even"]
    assert t.balance() == 10_000


def test_no_break_even_when_both_split_hands_lose_or_one_pushes() -> None:
    # one shoe for both rounds (mini-h17 reshuffles at 20 %)
    t = Ledger("mini-h17", ["8", "T", "8", "9", "T", "9", "8", "T", "8", "9", "T", "A"])
    t.do(bet(101), deal(), split(), stand(), stand())  # 18 and 17 against 19
    assert [s[2] for s in t.settled()] == ["lose", "lose"]
    t.do(bet(101), deal(), split(), stand(), stand())  # 18 and soft 19 against 19
    assert [s[2] for s in t.settled()[2:]] == ["lose", "push"]
    assert t.messages() == []


def test_break_even_when_both_split_hands_are_doubled_one_wins_one_loses() -> None:
    # 8 8 against 7 up / T hole (17): 8 3 doubles to 8 3 9 = 20 wins; 8 2 doubles to 8 2 6 = 16
    # loses: 2.02 each way, nothing won or lost
    t = Ledger("mini-h17", ["8", "7", "8", "T", "3", "2", "9", "6"])
    t.do(bet(101), deal(), split(), double(), double())
    assert t.settled() == [(0, 0, "win", 202, 404), (0, 1, "lose", 202, 0)]
    assert t.messages() == ["Break Even"]
    assert t.balance() == 10_000


# ---- splits and doubles ----------------------------------------------------------------------


def test_mini_s17_splits_any_two_ten_value_cards_atlantic_city_only_the_same_rank() -> None:
    # 001: "any combination of these cards may be split"; 002: "the same denomination"
    s17 = Ledger("mini-s17", ["K", "7", "Q", "9"])
    s17.do(bet(100), deal())
    assert "split" in s17.buttons()
    ac = Ledger("atlantic-city", ["K", "9", "Q", "7"])
    ac.do(bet(100), deal())
    assert "split" not in ac.buttons()
    ac.refused(split(), "cannot_split")
    same = Ledger("atlantic-city", ["K", "9", "K", "7"])
    same.do(bet(100), deal())
    assert "split" in same.buttons()


def test_mini_s17_two_aces_are_a_soft_12_that_splits_once_and_never_doubles() -> None:
    # 001: "a total hand of either 12 or 2 with the option to split them, but only once";
    # 12 is not 9, 10 or 11, and "You may not hit and double down to split Aces."
    t = Ledger("mini-s17", ["A", "7", "A", "9", "T", "A"])
    t.do(bet(100), deal())
    hand = t.state.boxes[0].hands[0]
    assert hand.total == (12, True)
    assert t.buttons() == ["hit", "stand", "split"]
    t.refused(double(), "cannot_double")
    # one card each: A T = 21 (not a blackjack), A A = 12; dealer 7 9 draws an ace: 17
    t.do(split())
    # evens: "Blackjack cannot be called on a winning hand that has split"
    assert t.settled() == [(0, 0, "win", 100, 200), (0, 1, "lose", 100, 0)]


def test_mini_s17_double_after_split_only_on_9_10_or_11() -> None:
    # 5 5 against 9 up (hole T): split; 5 4 = 9 may double, 5 A = soft 16 may not
    t = Ledger("mini-s17", ["5", "T", "5", "9", "4", "A", "T"])
    t.do(bet(100), deal())
    assert "double" in t.buttons() and "split" in t.buttons()  # 5 5 is a 10
    t.do(split())
    assert t.buttons() == ["hit", "stand", "double"]
    t.do(double())
    assert t.buttons() == ["hit", "stand"]
    t.refused(double(), "cannot_double")
    t.do(stand())
    # dealer 9 T = 19: the doubled 5 4 T pushes, 5 A loses
    assert t.settled() == [(0, 0, "push", 200, 200), (0, 1, "lose", 100, 0)]


def test_mini_s17_with_the_ace_counted_low_a_soft_9_or_10_doubles() -> None:
    # 001: the ace is "1 or 11 ... You, the player, decide the value of the card";
    # ``double_totals_ace_low`` reads "a total value of 9, 10 or 11" so: A 8 doubles as a 9
    t = Ledger("mini-s17", ["A", "7", "8", "9", "5", "A"], overrides=LOW_ACE)
    t.do(bet(100), deal())
    assert t.state.boxes[0].hands[0].total == (19, True)
    assert t.buttons() == ["hit", "stand", "double"]
    t.do(double())
    # A 8 5 = 14; the dealer's 7 9 = 16 draws an ace: 17
    assert t.settled() == [(0, 0, "lose", 200, 0)]
    # as preset, A 8 is a 19 and does not double
    plain = Ledger("mini-s17", ["A", "7", "8", "9", "5", "A"])
    plain.do(bet(100), deal())
    plain.refused(double(), "cannot_double")
    # A 7 is an 8 or an 18: neither is 9, 10 or 11
    seven = Ledger("mini-s17", ["A", "7", "7", "9", "5", "A"], overrides=LOW_ACE)
    seven.do(bet(100), deal())
    seven.refused(double(), "cannot_double")


LOW_ACE: dict[str, object] = {"double_totals_ace_low": True}


@pytest.mark.parametrize("short", [0, 1])
def test_a_double_after_a_split_with_the_balance_exactly_covering_it_or_a_cent_short(
    short: int,
) -> None:
    # bet 3.33; the split takes 3.33 more; the double of the first hand 3.33 more
    t = Ledger(
        "mini-h17", ["8", "7", "8", "T", "3", "2", "9", "T"], players=(("p", 0, 999 - short),)
    )
    t.do(bet(333), deal(), split())
    assert t.balance() == 333 - short
    if short:
        assert t.buttons() == ["hit", "stand"]
        t.refused(double(), "insufficient_funds")
    else:
        assert t.buttons() == ["hit", "stand", "double"]
        t.do(double())
        assert t.balance() == 0
        assert t.buttons() == ["hit", "stand"]  # nothing left for the second hand


@pytest.mark.parametrize("short", [0, 1])
def test_a_split_with_the_balance_exactly_covering_it_or_a_cent_short(short: int) -> None:
    t = Ledger("atlantic-city", ["8", "7", "8", "T", "3", "2"], players=(("p", 0, 2002 - short),))
    t.do(bet(1001), deal())
    if short:
        assert t.buttons() == ["hit", "stand"]
        t.refused(split(), "insufficient_funds")
    else:
        assert t.buttons() == ["hit", "stand", "double", "split"]
        t.do(split())
        assert t.balance() == 0


@pytest.mark.parametrize("short", [0, 1])
def test_insurance_on_an_odd_bet_with_the_balance_exactly_covering_it_or_a_cent_short(
    short: int,
) -> None:
    # 10.01 is insured for 5.00: 15.01 covers bet and insurance, 15.00 does not
    t = Ledger("mini-h17", ["9", "A", "9", "K"], players=(("p", 0, 1501 - short),))
    t.do(bet(1001), deal())
    if short:
        # not offered: the dealer peeks at once and takes the bet
        assert not any(isinstance(e, ev.InsuranceOffered) for e in t.events)
        assert t.settled() == [(0, 0, "lose", 1001, 0)]
        assert t.balance() == 499
    else:
        t.do(insure())
        assert t.insurance() == [(0, 500, True, 1500)]
        assert t.balance() == 1500


# ---- blackjacks against blackjacks, and the peek ---------------------------------------------


@pytest.mark.parametrize(
    ("variant", "cards"),
    [
        ("mini-h17", ["A", "A", "K", "K"]),  # ace up: no insurance against a blackjack
        ("mini-h17", ["A", "K", "K", "A"]),  # ten up: the peek
        ("mini-s17", ["A", "K", "K", "A"]),  # hole K, ace up
        ("mini-s17", ["A", "A", "K", "K"]),  # hole A, ten up: no peek, turned at the end
        ("atlantic-city", ["A", "K", "K", "A"]),
        ("atlantic-city-multi", ["A", "A", "K", "K"]),
        ("surrender", ["A", "A", "K", "K"]),
    ],
)
def test_a_blackjack_pushes_a_dealer_blackjack_and_is_never_offered_insurance(
    variant: str, cards: list[str]
) -> None:
    players = (("p", 0, 10_000),)
    t = Ledger(variant, cards, players=players)
    t.do(bet(1001), deal())
    assert not any(isinstance(e, ev.InsuranceOffered) for e in t.events)
    assert t.settled() == [(0, 0, "push", 1001, 1001)]
    assert t.balance() == 10_000
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    assert settled.dealer_blackjack


def test_a_blackjack_beats_a_dealer_21_made_of_three_cards() -> None:
    # 000: "Your blackjack beats any dealer total (including a dealer's regular 21)"; at the
    # surrender table the other box makes the dealer draw to 21 (6 5 T)
    t = Ledger("surrender", ["A", "8", "6", "K", "9", "5", "T"])
    t.do(bet(101, 0), bet(100, 1), deal())
    t.do(stand(1))
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    assert settled.dealer_total == 21 and not settled.dealer_blackjack
    assert t.settled() == [(0, 0, "blackjack", 101, 252), (1, 0, "lose", 100, 0)]


def test_mini_s17_no_peek_under_a_ten_a_split_and_its_doubles_all_lose_to_the_blackjack() -> None:
    # 001: "If the dealer has a Blackjack and the player has a total of 21 with more than two
    # cards, the dealer wins": with a ten up the hand is played out. 5 5 split: 5 6 doubled to
    # 5 6 K (21), 5 5 doubled to 5 5 Q (20); hole A: everything lost, 4.04 in all.
    t = Ledger("mini-s17", ["5", "A", "5", "K", "6", "5", "K", "Q"])
    t.do(bet(101), deal(), split(), double(), double())
    assert t.settled() == [(0, 0, "lose", 202, 0), (0, 1, "lose", 202, 0)]
    assert t.balance() == 10_000 - 404


def test_dealer_blackjack_at_the_three_box_table_with_insurance_on_one_box() -> None:
    # box 0 A K (no insurance), box 1 T 9 insured, box 2 8 8 declined; dealer A up, K hole:
    # box 0 pushes, box 1 loses its bet and its insurance pays 2:1, box 2 loses
    t = Ledger("surrender", ["A", "T", "8", "A", "K", "9", "8", "K"])
    t.do(bet(101, 0), bet(1001, 1), bet(333, 2), deal())
    assert t.buttons() == ["insurance:1", "insurance:2", "no_insurance:1", "no_insurance:2"]
    t.do(insure(1), decline(2))
    assert t.insurance() == [(1, 500, True, 1500)]
    assert t.settled() == [
        (0, 0, "push", 101, 101),
        (1, 0, "lose", 1001, 0),
        (2, 0, "lose", 333, 0),
    ]
    assert t.balance() == 10_000 - 1001 - 333 + 1000


def test_a_blackjack_paid_at_once_pays_for_a_double_on_another_box() -> None:
    # 003: "If you are dealt Blackjack, you are immediately paid": with nothing left after two
    # bets of 10.01, box 0's blackjack (25.02) pays for box 1's double of 6 5 against a 6
    t = Ledger("surrender", ["A", "6", "6", "K", "5", "T", "T", "T"], players=(("p", 0, 2002),))
    t.do(bet(1001, 0), bet(1001, 1), deal())
    assert t.balance() == 2502
    assert t.buttons() == ["hit", "stand", "double", "surrender"]
    t.do(double(1))
    # dealer 6 T draws T: bust
    assert t.settled() == [(0, 0, "blackjack", 1001, 2502), (1, 0, "win", 2002, 4004)]
    assert t.balance() == 2502 - 1001 + 4004


def test_insurance_offered_on_two_boxes_when_the_balance_covers_only_one() -> None:
    t = Ledger("surrender", ["9", "9", "A", "9", "9", "7"], players=(("p", 0, 250),))
    t.do(bet(100, 0), bet(100, 1), deal())
    assert t.buttons() == ["insurance:0", "insurance:1", "no_insurance:0", "no_insurance:1"]
    t.do(insure(0))
    assert t.buttons() == ["no_insurance:1"]
    t.refused(insure(1), "insufficient_funds")
    t.do(decline(1))
    assert t.insurance() == [(0, 50, False, 0)]


# ---- bet limits, rebets, boxes ---------------------------------------------------------------


def test_each_of_three_boxes_may_hold_the_maximum_and_not_a_cent_more() -> None:
    t = Ledger("surrender", ["T", "T", "T", "9", "9", "9", "9", "8"], players=(("p", 0, 200_000),))
    for box in range(3):
        t.do(bet(50_000, box))
        t.refused(bet(1, box), "bet_above_maximum")
    t.refused(bet(100, 3), "box_out_of_range")
    t.do(deal())
    assert t.state.phase == "playing"


def test_a_double_bet_rebet_over_the_maximum_or_the_balance_changes_nothing() -> None:
    # 000: the maximum "applies for the initial bet"; DOUBLE BET only "provided you have an
    # adequate account balance"
    t = Ledger("mini-h17", ["9", "9", "9", "9"], players=(("p", 0, 100_000),))
    t.do(bet(30_000), deal(), stand())  # 18 against 18: a push
    assert t.buttons() == ["bet:0", "rebet:x1"]
    t.refused(cmd.Rebet(player_id="p", multiplier=2), "bet_above_maximum")
    t2 = Ledger("mini-h17", ["9", "9", "9", "9"], players=(("p", 0, 100_000),))
    t2.do(bet(25_000), deal(), stand())
    t2.do(cmd.Withdraw(player_id="p", amount=100_000 - 49_999))
    assert t2.buttons() == ["bet:0", "rebet:x1"]
    t2.refused(cmd.Rebet(player_id="p", multiplier=2), "insufficient_funds")
    t2.do(cmd.Deposit(player_id="p", amount=1))
    assert t2.buttons() == ["bet:0", "rebet:x1", "rebet:x2"]
    t2.do(cmd.Rebet(player_id="p", multiplier=2))
    assert t2.state.boxes[0].hands[0].stake == 50_000 and t2.balance() == 0


def test_same_bet_repeats_the_initial_bet_not_the_doubled_or_split_stake() -> None:
    t = Ledger("mini-h17", ["8", "7", "8", "T", "3", "2", "9", "T", "9", "9", "9", "9"])
    t.do(bet(101), deal(), split(), double(), stand())
    t.do(cmd.Rebet(player_id="p", multiplier=1))
    assert t.state.boxes[0].hands[0].stake == 101


# ---- disconnection (003) and the clock (002 multi) -------------------------------------------


def test_a_disconnection_before_deal_returns_every_box_placed_by_repeat() -> None:
    # 003: "If the connection is terminated after placing a bet but before pressing 'Deal'
    # button the bet will be returned"; Repeat only places the bets
    t = Ledger("surrender", ["T", "T", "T", "9", "9", "9", "9", "8"])
    t.do(bet(101, 0), bet(202, 1), bet(303, 2), deal(), stand(0), stand(1), stand(2))
    after_round = t.balance()
    t.do(cmd.Rebet(player_id="p", multiplier=1))
    assert t.balance() == after_round - 606
    t.do(cmd.Disconnect(player_id="p"))
    refunds = [(e.box, e.amount, e.reason) for e in t.events if isinstance(e, ev.BetRefunded)]
    assert refunds == [(0, 101, "disconnected"), (1, 202, "disconnected"), (2, 303, "disconnected")]
    assert t.balance() == after_round


def test_a_disconnection_during_insurance_keeps_the_round_as_it_was() -> None:
    # 003: "In any other case ... the game will be restored": the offer waits for the player
    t = Ledger("surrender", ["9", "A", "9", "7"])
    t.do(bet(1001), deal())
    before = t.state.to_doc()
    t.do(cmd.Disconnect(player_id="p"))
    t.do(cmd.ExpireTimers())  # a table without a clock: nothing is decided for the player
    doc = t.state.to_doc()
    assert doc["players"]["p"]["connected"] is False
    doc["players"]["p"]["connected"] = True
    assert doc == before
    t.do(insure())  # the player's own command reconnects them
    assert t.state.players["p"].connected


def test_at_the_shared_table_the_clock_declines_insurance_and_stands_each_split_hand() -> None:
    # ann 8 8, bob T 7 against A up / 9 hole. Ann insures, bob does not answer: declined at
    # 15 s. Ann splits and lets both hands run out: each is stood by the server in turn.
    players = (("ann", 0, 10_000), ("bob", 1, 10_000))
    t = Ledger("atlantic-city-multi", ["8", "T", "A", "8", "7", "9", "3", "2"], players=players)
    t.do(bet(1001, 0, "ann"), bet(500, 1, "bob"), deal("ann"), deal("bob"))
    t.do(insure(0, "ann"))
    t.now += timedelta(seconds=15)
    t.do(cmd.ExpireTimers())
    t.do(split(0, "ann"))
    t.now += timedelta(seconds=15)
    t.do(cmd.ExpireTimers())
    t.now += timedelta(seconds=15)
    t.do(cmd.ExpireTimers())
    t.now += timedelta(seconds=15)
    t.do(cmd.ExpireTimers())
    timed_out = [
        (e.player_id, e.action, e.box, e.hand) for e in t.events if isinstance(e, ev.PlayerTimedOut)
    ]
    assert timed_out == [
        ("bob", "declined_insurance", 1, None),
        ("ann", "stood", 0, 0),
        ("ann", "stood", 0, 1),
        ("bob", "stood", 1, 0),
    ]
    assert t.insurance() == [(0, 500, False, 0)]
    # dealer A 9 = 20: 8 3, 8 2 and T 7 all lose
    assert t.settled() == [(0, 0, "lose", 1001, 0), (0, 1, "lose", 1001, 0), (1, 0, "lose", 500, 0)]
    assert t.balance("ann") == 10_000 - 2002 - 500
