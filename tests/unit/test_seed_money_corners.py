"""Money corners of the seed pages that no test pinned before: several boxes surrendered or
insured on odd cents, Break Even on split aces, 21 on split aces against the dealer's 21 or her
blackjack, a blackjack against an ace (no even money), dropped cents for two players at once,
REBET X 2 at page 001's table, and no resplit at the pages that say so. Each is played through
the real decider on a stacked shoe, with the ledger (``test_rules_corners.Ledger``) checking
after every command that money is only moved, never made or lost.

Card order on a stacked shoe: each box's first card, the dealer's first card, each box's
second card, the dealer's second card, then the cards in order of play. The dealer's first card
is the upcard, except at mini-s17 (``hole_card_first``), where it is the hole card.
"""

from __future__ import annotations

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from tests.unit.test_rules_corners import (
    Ledger,
    bet,
    deal,
    decline,
    insure,
    split,
    stand,
    surrender,
)


def _order(t: Ledger) -> list[str]:
    """The kinds of the round's money events, in the order they came."""
    kinds = (ev.HandSettled, ev.DealerHoleCardRevealed, ev.RoundSettled)
    return [type(e).__name__ for e in t.events if isinstance(e, kinds)]


def test_surrender_on_two_of_three_odd_boxes_floors_each_half_on_its_own() -> None:
    # 003: "Upon Surrender you receive half of your initial bet back", "each hand will be
    # treated separately". Given 1.01 on box 0, 1.01 on box 1 and 10.01 on box 2 against a 9 up
    # (hole 8: 17), when boxes 0 (16) and 1 (15) surrender and box 2 (18) stands, then each
    # surrendered box gets 0.50 back at once (its own half floored: 1.00 in all, not 1.01's
    # half of the two together), and box 2 wins 1:1.
    t = Ledger("surrender", ["T", "T", "T", "9", "6", "5", "8", "8"])
    t.do(bet(101, 0), bet(101, 1), bet(1001, 2), deal())
    t.do(surrender(0), surrender(1))
    assert t.settled() == [(0, 0, "surrender", 101, 50), (1, 0, "surrender", 101, 50)]
    assert t.balance() == 10_000 - 1203 + 100  # paid before the dealer's hand is shown
    t.do(stand(2))
    assert t.settled()[2:] == [(2, 0, "win", 1001, 2002)]
    surrenders_first = ["HandSettled", "HandSettled", "DealerHoleCardRevealed"]
    assert _order(t) == [*surrenders_first, "HandSettled", "RoundSettled"]
    assert t.balance() == 10_000 - 1203 + 100 + 2002
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    assert [(r.wagered, r.paid, r.net) for r in settled.results] == [(1203, 2102, 899)]


@pytest.mark.parametrize(
    ("hole", "won"),
    [("K", True), ("5", False)],
)
def test_insurance_on_two_odd_boxes_each_costs_its_own_half(hole: str, won: bool) -> None:
    # 003: "An additional bet will be placed, equal to half your initial bet" for each box
    # insured. Given 1.01 on box 0 (T 7) and 3.33 on box 1 (9 9) against an ace, when both are
    # insured, then they cost 0.50 and 1.66 (each half floored); against the dealer's blackjack
    # each returns 3 times its stake (1.50 and 4.98) and both bets are lost: 2 cents short in all.
    cards = ["T", "9", "A", "7", "9", hole, "2"]
    t = Ledger("surrender", cards)
    t.do(bet(101, 0), bet(333, 1), deal())
    t.do(insure(0), insure(1))
    taken = [(e.box, e.amount) for e in t.events if isinstance(e, ev.InsuranceTaken)]
    assert taken == [(0, 50), (1, 166)]
    if won:
        assert t.insurance() == [(0, 50, True, 150), (1, 166, True, 498)]
        assert t.settled() == [(0, 0, "lose", 101, 0), (1, 0, "lose", 333, 0)]
        assert t.balance() == 10_000 - 2
    else:
        assert t.insurance() == [(0, 50, False, 0), (1, 166, False, 0)]
        # A 5 (soft 16) draws the 2: 18. Box 0's 17 loses, box 1's 18 pushes.
        t.do(stand(0), stand(1))
        assert t.settled() == [(0, 0, "lose", 101, 0), (1, 0, "push", 333, 333)]
        assert t.balance() == 10_000 - 101 - 216


def test_break_even_on_split_aces_one_21_and_one_16() -> None:
    # 000: split aces get "only one card" each, "If a 10-point card is dealt to either Ace, the
    # hand is counted as 21, not blackjack", and "After split, if you win one hand & lose another
    # hand you will be shown a message 'Break Even'". Given A A on 1.01 against a 7 up (hole T:
    # 17), when split, then A T = 21 wins evens, A 5 = 16 loses, nothing is won or lost.
    t = Ledger("mini-h17", ["A", "7", "A", "T", "T", "5"])
    t.do(bet(101), deal(), split())
    assert t.settled() == [(0, 0, "win", 101, 202), (0, 1, "lose", 101, 0)]
    assert t.messages() == ["Break Even"]
    assert t.balance() == 10_000


def test_21_on_a_split_ace_pushes_the_dealers_21_of_three_cards() -> None:
    # 002: "Only one additional card allowed on each ace"; a 21 on a split ace is no blackjack,
    # so against the dealer's 6 5 T it is a tie: the stake comes back, no 3:2.
    t = Ledger("atlantic-city", ["A", "6", "A", "5", "T", "7", "T"])
    t.do(bet(101), deal(), split())
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    assert settled.dealer_total == 21 and not settled.dealer_blackjack
    assert t.settled() == [(0, 0, "push", 101, 101), (0, 1, "lose", 101, 0)]
    assert t.balance() == 10_000 - 101


def test_mini_s17_split_aces_21_loses_to_the_blackjack_turned_under_a_ten() -> None:
    # 001: "If the dealer has a Blackjack and the player has a total of 21 with more than two
    # cards, the dealer wins", and a split ace's 21 "cannot be called" a blackjack. Hole A,
    # upcard K (no check under a ten): A A split to A T (21) and A 9 (20), both lost.
    t = Ledger("mini-s17", ["A", "A", "A", "K", "T", "9"])
    t.do(bet(101), deal(), split())
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    assert settled.dealer_blackjack
    assert t.settled() == [(0, 0, "lose", 101, 0), (0, 1, "lose", 101, 0)]
    assert t.balance() == 10_000 - 202


@pytest.mark.parametrize(
    ("variant", "cards", "payout"),
    [
        ("mini-h17", ["A", "A", "K", "9"], 101 + 151),
        ("mini-s17", ["A", "9", "K", "A"], 101 + 151),  # hole 9 first, then the ace up
        ("atlantic-city", ["A", "A", "K", "9"], 101 + 100),
        ("atlantic-city-multi", ["A", "A", "K", "9"], 101 + 100),
        ("surrender", ["A", "A", "K", "9"], 101 + 151),
    ],
)
def test_a_blackjack_against_an_ace_is_offered_no_insurance_nor_even_money(
    variant: str, cards: list[str], payout: int
) -> None:
    # 000: "Insurance is not offered to you if you get a blackjack"; 001: "No Insurance will be
    # offered if you have Blackjack"; no page offers even money. The dealer checks her ace
    # (A 9, no blackjack) and the blackjack is paid 3:2 (page 002: winnings without cents).
    t = Ledger(variant, cards)
    t.do(bet(101), deal())
    assert not any(isinstance(e, ev.InsuranceOffered | ev.TurnStarted) for e in t.events)
    assert [e.has_blackjack for e in t.events if isinstance(e, ev.DealerPeeked)] == [False]
    assert t.settled() == [(0, 0, "blackjack", 101, payout)]
    assert t.balance() == 10_000 - 101 + payout


def test_two_blackjacks_at_the_shared_table_each_lose_only_their_own_cents() -> None:
    # 002: "if the payout from a natural blackjack results in a dollar amount including cents,
    # the cents part will not be paid out". Ann's 5.01 wins 7.515, paid 7.00; bob's 1.99 wins
    # 2.985, paid 2.00; each stake comes back whole.
    players = (("ann", 0, 10_000), ("bob", 1, 10_000))
    t = Ledger("atlantic-city-multi", ["A", "A", "9", "K", "Q", "7"], players=players)
    t.do(bet(501, 0, "ann"), bet(199, 1, "bob"), deal("ann"), deal("bob"))
    assert t.settled() == [(0, 0, "blackjack", 501, 501 + 700), (1, 0, "blackjack", 199, 199 + 200)]
    assert t.balance("ann") == 10_000 + 700 and t.balance("bob") == 10_000 + 200


@pytest.mark.parametrize("short", [1, 0])
def test_mini_s17_rebet_x2_needs_the_whole_doubled_bet(short: int) -> None:
    # 001: "Click the REBET X 2 button to bet double the amount as your previous bet AND deal
    # the cards". Given a round of 2.50 (9 9 against 9 9: a push), when the balance is 4.99 or
    # 5.00, then REBET X 2 is refused (nothing placed, nothing dealt) or deals 5.00 at once.
    t = Ledger("mini-s17", ["9", "9", "9", "9"], players=(("p", 0, 10_000),))
    t.do(bet(250), deal(), stand())
    t.do(cmd.Withdraw(player_id="p", amount=t.balance() - 500 + short))
    rebet = cmd.Rebet(player_id="p", multiplier=2)
    if short:
        assert "rebet:x2" not in t.buttons()
        t.refused(rebet, "insufficient_funds")
        assert t.balance() == 499 and not t.state.round_open
    else:
        t.do(rebet)
        assert t.state.boxes[0].hands[0].stake == 500 and t.balance() == 0


@pytest.mark.parametrize(
    ("variant", "cards"),
    [
        ("atlantic-city", ["8", "7", "8", "T", "8", "3"]),  # "pairs may not be re-split"
        ("surrender", ["8", "7", "8", "T", "8", "3"]),  # "You may only split a hand once"
        ("mini-s17", ["8", "T", "8", "7", "8", "3"]),  # "No further splitting (resplitting)"
    ],
)
def test_a_pair_dealt_to_a_split_hand_is_not_split_again(variant: str, cards: list[str]) -> None:
    t = Ledger(variant, cards)
    t.do(bet(101), deal(), split())
    hand = t.state.boxes[0].hands[0]
    assert hand.cards[0][0] == hand.cards[1][0] == "8"
    assert "split" not in t.buttons()
    t.refused(split(), "cannot_split")
    assert t.balance() == 10_000 - 202


def test_surrender_declining_insurance_on_one_box_and_taking_it_on_another_then_surrender() -> None:
    # 003: insurance "before the check", then "You can surrender only after the Dealer checks".
    # Box 0 (1.01, T 6) declines and surrenders: 0.50 back; box 1 (3.33, T 5) is insured for
    # 1.66, lost at the check (hole 7), then surrenders too: 1.66 back. The dealer's A 7 (soft
    # 18) stands for no one.
    t = Ledger("surrender", ["T", "T", "A", "6", "5", "7"])
    t.do(bet(101, 0), bet(333, 1), deal())
    t.do(decline(0), insure(1))
    assert t.insurance() == [(1, 166, False, 0)]
    t.do(surrender(0), surrender(1))
    assert t.settled() == [(0, 0, "surrender", 101, 50), (1, 0, "surrender", 333, 166)]
    assert t.balance() == 10_000 - 101 - 333 - 166 + 50 + 166
    [settled] = [e for e in t.events if isinstance(e, ev.RoundSettled)]
    assert settled.results[0].net == -(101 - 50) - (333 - 166) - 166
