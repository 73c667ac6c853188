"""The seed rule pages, sentence by sentence, where no other test pinned the sentence yet.

Each test cites the seed sentence it checks (seed file and preset in its docstring) and plays
a scripted round through the real decider (``blackjack.scenario``): given a preset, a balance
and the order in which cards leave the shoe, when the commands are played, then the buttons
offered, the refusals, the events, the payouts and the balances are what the page says.
Card order: each box's first card, the dealer's upcard, each box's second card, the dealer's
hole card, then every further card in order of play; at mini-s17 (``hole_card_first``) the
dealer's hole card comes first and the upcard second.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from blackjack.scenario import Scenario, ScenarioPlayer, run

S000 = "000_f0c90f1e52905554.txt"
S001 = "001_fbd715cb71aa3a95.txt"
S002 = "002_b5eef1f79901f04d.txt"
S003 = "003_8ae7854f2fae64a3.txt"

Step = str | dict[str, Any]


@dataclass(frozen=True)
class Played:
    """What a scripted round left behind: the runner's summary and every event."""

    summary: dict[str, Any]
    events: list[dict[str, Any]]

    @property
    def failures(self) -> list[str]:
        failures: list[str] = self.summary["failures"]
        return failures

    def balance(self, player: str = "player") -> int:
        amount: int = self.summary["balances"][player]
        return amount

    def hands(self, round_: int = 1) -> list[tuple[int, int, str, int, int]]:
        """(box, hand, outcome, stake, payout) of every hand settled in that round."""
        return [
            (h["box"], h["hand"], h["outcome"], h["stake"], h["payout"])
            for h in self.summary["hands"]
            if h["round"] == round_
        ]

    @property
    def messages(self) -> list[str]:
        messages: list[str] = self.summary["messages"]
        return messages

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


def play(
    variant: str,
    steps: Sequence[Step],
    *,
    seed: str,
    shoe: Sequence[str] = (),
    shoes: Sequence[Sequence[str]] = (),
    balance: int = 10_000,
    players: Sequence[tuple[str, int, int]] = (),
    rules: dict[str, Any] | None = None,
) -> Played:
    """Given ``variant`` (with the ``rules`` overrides) and these cards on top of the shoe(s)
    and one player (or ``players`` as (id, seat, balance)), when ``steps`` are played
    (scenario steps: ``do`` plus the command's fields, with ``offered`` / ``reject`` / ``at``
    checked by the runner)."""
    scenario = Scenario(
        variant=variant,
        rules=rules or {},
        seed=seed,
        balance=None if players else balance,
        players=[ScenarioPlayer(id=pid, seat=seat, balance=money) for pid, seat, money in players],
        shoe=list(shoe),
        shoes=[list(s) for s in shoes],
        commands=list(steps),
    )
    lines: list[str] = []
    summary = run(scenario, emit=lines.append)
    events = [json.loads(line)["event"] for line in lines if line.startswith('{"event"')]
    return Played(summary=summary, events=events)


BET = {"do": "PlaceBet", "box": 0, "amount": 1000}


# ---- 000: mini-h17 ------------------------------------------------------------------------


def test_mini_h17_splits_any_two_ten_value_cards() -> None:
    """000, mini-h17: "If you have two cards of the same value (for example two 7s, two 10s, a
    King and a Jack, etc), you can click 'SPLIT' to split the cards into two separate hands."
    """
    # given K-J against a dealer 7 / T (17)
    played = play(
        "mini-h17",
        [
            BET,
            "Deal",
            {"do": "Split", "box": 0, "offered": ["hit", "stand", "double", "split", "surrender"]},
            {"do": "Stand", "box": 0, "hand": 0},
            {"do": "Stand", "box": 0, "hand": 1},
        ],
        seed=S000,
        shoe=["KS", "7S", "JS", "TS", "9S", "8S"],
    )
    # then the split was offered and each hand (K-9, J-8) won at evens
    assert played.failures == []
    assert played.hands() == [(0, 0, "win", 1000, 2000), (0, 1, "win", 1000, 2000)]


def test_mini_h17_split_aces_get_one_card_and_a_ten_on_an_ace_is_21_not_blackjack() -> None:
    """000, mini-h17: "This option is also available if you are dealt two Aces as your first
    two cards." "If you split Aces, only one card will be dealt to each split hand. If a
    10-point card is dealt to either Ace, the hand is counted as 21, not blackjack."
    """
    # given A-A against a dealer 6 / T, who draws a 5 to a three-card 21
    played = play(
        "mini-h17",
        [
            BET,
            "Deal",
            {"do": "Split", "box": 0, "offered": ["hit", "stand", "double", "split", "surrender"]},
            {"do": "Hit", "box": 0, "hand": 0, "reject": "not_your_turn"},
        ],
        seed=S000,
        shoe=["AS", "6S", "AH", "TS", "KS", "9S", "5S"],
    )
    # then A-K is a 21 that pushes the dealer's 21 (a blackjack would have won 3:2), A-9 = 20
    # loses, and neither ace drew a second card
    assert played.failures == []
    assert played.hands() == [(0, 0, "push", 1000, 1000), (0, 1, "lose", 1000, 0)]
    assert [len(h) for h in _final_hands(played)] == [2, 2]
    assert played.balance() == 9000


def _final_hands(played: Played) -> list[list[str]]:
    """The cards of each hand of box 0, round 1, rebuilt from the events."""
    hands: list[list[str]] = [[]]
    for event in played.events:
        if event["type"] == "HandSplit":
            first = hands[0]
            hands = [first[:1], first[1:]]
        elif event["type"] == "CardDealt" and event["to"] == "box" and event["round"] == 1:
            hands[event["hand"]].append(event["card"])
    return hands


@pytest.mark.parametrize("ten", ["TS", "JS", "QS", "KS"])
def test_mini_h17_dealer_checks_on_every_ten_value_card_and_a_blackjack_ends_the_game(
    ten: str,
) -> None:
    """000, mini-h17: "Exception for this rule is when dealer gets the up card as Ace, 10, Jack,
    Queen, King in which dealer will either check the blackjack or offer insurance and check
    blackjack and only if it is not blackjack for dealer, surrender option will be provided."
    """
    # given 9-7 against a ten-value upcard with an ace in the hole
    played = play(
        "mini-h17",
        [BET, {"do": "Deal"}, {"do": "Surrender", "box": 0, "reject": "not_your_turn"}],
        seed=S000,
        shoe=["9H", ten, "7H", "AS"],
    )
    # then the dealer checked, found the blackjack and took the whole bet: no surrender
    assert played.failures == []
    assert played.of_type("DealerPeeked")[0]["has_blackjack"] is True
    assert played.hands() == [(0, 0, "lose", 1000, 0)]
    assert "InsuranceOffered" not in played.types()


@pytest.mark.parametrize("ten", ["TS", "JS", "QS", "KS"])
def test_mini_h17_ten_value_upcard_without_blackjack_offers_surrender_and_no_insurance(
    ten: str,
) -> None:
    """000, mini-h17: "only if it is not blackjack for dealer, surrender option will be
    provided." "The 'INSURANCE' option is offered to you in case the dealer has an Ace as his
    first card."
    """
    # given 9-7 against a ten-value upcard and an 8 in the hole
    played = play(
        "mini-h17",
        [
            BET,
            "Deal",
            {"do": "Surrender", "box": 0, "offered": ["hit", "stand", "double", "surrender"]},
        ],
        seed=S000,
        shoe=["9H", ten, "7H", "8S"],
    )
    # then after the check the surrender was offered, taken, and half the bet came back
    assert played.failures == []
    assert played.of_type("DealerPeeked")[0]["has_blackjack"] is False
    assert "InsuranceOffered" not in played.types()
    assert played.hands() == [(0, 0, "surrender", 1000, 500)]


def test_mini_h17_break_even_also_when_the_losing_split_hand_busts() -> None:
    """000, mini-h17: "After split, if you win one hand & lose another hand you will be shown a
    message "Break Even" which indicates that you don't win or lose anything."
    """
    # given 8-8 against a dealer T / 9 (19): hand 0 = 8-T hits a K and busts, hand 1 = 8-3
    # hits a T to 21
    played = play(
        "mini-h17",
        [
            BET,
            "Deal",
            {"do": "Split", "box": 0},
            {"do": "Hit", "box": 0, "hand": 0},
            {"do": "Hit", "box": 0, "hand": 1},
        ],
        seed=S000,
        shoe=["8S", "TS", "8H", "9S", "TH", "3S", "KH", "TD"],
    )
    # then the busted hand lost, the other won, and the box shows "Break Even"
    assert played.failures == []
    assert played.hands() == [(0, 0, "bust", 1000, 0), (0, 1, "win", 1000, 2000)]
    assert played.messages == ["Break Even"]
    assert played.balance() == 10_000


def test_mini_h17_the_number_of_cards_is_limited_only_by_stand_or_reaching_21() -> None:
    """000, mini-h17: "The number of cards that can be dealt to the player is limited only by
    choice (by clicking on 'Stand') or by the hand total being greater than or equal to 21."
    """
    # given 2-2 against a dealer 7 / T (17), and a run of small cards: 3 2 2 A A A A 3, all hard
    hits = [{"do": "Hit", "box": 0, "offered": ["hit", "stand"]} for _ in range(7)]
    played = play(
        "mini-h17",
        [BET, "Deal", {"do": "Hit", "box": 0}, *hits, {"do": "Stand", "box": 0}],
        seed=S000,
        shoe=["2S", "7S", "2H", "TS", "3S", "2D", "2C", "AS", "AH", "AD", "AC", "3H"],
    )
    # then a ten-card 18 could still be hit, stood by choice, and beat the 17
    assert played.failures == []
    assert played.of_type("PlayerStood")[0]["total"] == 18
    assert len(_final_hands(played)[0]) == 10
    assert played.hands() == [(0, 0, "win", 1000, 2000)]


def test_mini_h17_double_bet_is_an_initial_bet_and_stays_within_the_500_maximum() -> None:
    """000, mini-h17: "The minimum bet is $1 USD and the maximum bet is $500 USD. The maximum bet
    applies for the initial bet of the game." "To play a new hand with double the bet ... click
    on the 'DOUBLE BET' option."
    """
    # given a round played at $300
    played = play(
        "mini-h17",
        [
            {"do": "PlaceBet", "box": 0, "amount": 30_000},
            "Deal",
            {"do": "Stand", "box": 0},
            # when DOUBLE BET would make it $600
            {
                "do": "Rebet",
                "multiplier": 2,
                "reject": "bet_above_maximum",
                "offered": ["bet:0", "rebet:x1"],
            },
        ],
        seed=S000,
        shoe=["TS", "7S", "9S", "TH"],
        balance=200_000,
    )
    # then DOUBLE BET is neither offered nor accepted; SAME BET still is
    assert played.failures == []
    assert played.balance() == 230_000


def test_mini_h17_same_bet_repeats_the_initial_bet_not_the_doubled_stake() -> None:
    """000, mini-h17: "To play a new hand with the same bet click on the 'SAME BET' button." """
    # given a $10 hand doubled to $20 (5-6 onto a 9 = 20 against 17)
    played = play(
        "mini-h17",
        [BET, "Deal", {"do": "Double", "box": 0}, {"do": "Rebet", "multiplier": 1}],
        seed=S000,
        shoe=["5S", "7S", "6S", "TS", "9S", "TH", "7H", "9H", "TD"],
    )
    # then SAME BET placed $10 again and dealt
    assert played.failures == []
    assert [e["amount"] for e in played.of_type("BetPlaced")] == [1000, 1000]
    assert played.of_type("DealStarted")[-1]["round"] == 2


def test_mini_h17_a_disconnected_player_completes_the_unfinished_game() -> None:
    """000, mini-h17: "If you get disconnected from the blackjack game, please log back in ...
    where you should be able to complete your unfinished game."
    """
    # given a dealt 16 against a dealer 9, and the player drops for a day
    played = play(
        "mini-h17",
        [
            {**BET, "at": 0},
            {"do": "Deal", "at": 1},
            {"do": "Disconnect", "at": 2},
            {"do": "ExpireTimers", "at": 86_400},
            {"do": "Reconnect", "at": 86_401, "offered": ["hit", "stand", "double", "surrender"]},
            {"do": "Hit", "box": 0, "at": 86_402},
            {"do": "Stand", "box": 0, "at": 86_403},
        ],
        seed=S000,
        shoe=["TS", "9S", "6S", "8S", "4S"],
    )
    # then the bet stayed on the table, nothing was decided for the player, and the game was
    # completed after reconnecting: 20 beats 17
    assert played.failures == []
    assert "BetRefunded" not in played.types() and "PlayerTimedOut" not in played.types()
    assert played.hands() == [(0, 0, "win", 1000, 2000)]


def test_a_disconnected_player_who_plays_on_is_back_at_the_table() -> None:
    """003, surrender: "If the connection is terminated after placing a bet but before pressing
    'Deal' button the bet will be returned": the player is then away until back. One who bets
    and plays again without a Reconnect is back (the table shows who is there); a command the
    table refuses changes nothing, presence included."""
    played = play(
        "surrender",
        [
            BET,
            "Disconnect",  # the bet goes back
            {"do": "Deal", "reject": "no_bets"},  # refused: still away
            BET,
            "Deal",
            {"do": "Stand", "box": 0},
        ],
        seed=S003,
        shoe=["9S", "7S", "9H", "TS"],
    )
    assert played.failures == []
    types = played.types()
    assert types.count("PlayerDisconnected") == 1 and types.count("PlayerReconnected") == 1
    back = types.index("PlayerReconnected")
    # the bet given back ended that game cycle (nothing left to deal): the next bet opens one
    assert types[back - 2 : back] == ["BetRefunded", "RoundCancelled"]
    assert types[back + 1] == "RoundOpened"
    assert played.hands(2) == [(0, 0, "win", 1000, 2000)]


@pytest.mark.parametrize("variant", ["mini-h17", "surrender"])
def test_surrender_of_an_odd_cent_bet_returns_half_rounded_down(variant: str) -> None:
    """000, mini-h17: "Surrendering will finish the hand and will return half of the bet placed
    to the player." 003, surrender: "Upon Surrender you receive half of your initial bet back".
    README (Money and rounding): surrender "returns floor(stake / 2)", "$10.01 returns $5.00".
    """
    # given $10.01 on 16 against a dealer 9
    played = play(
        variant,
        [{"do": "PlaceBet", "box": 0, "amount": 1001}, "Deal", {"do": "Surrender", "box": 0}],
        seed=S000 if variant == "mini-h17" else S003,
        shoe=["TS", "9S", "6S", "8S"],
    )
    # then $5.00 came back and the round is over
    assert played.failures == []
    assert played.hands() == [(0, 0, "surrender", 1001, 500)]
    assert played.balance() == 10_000 - 1001 + 500


@pytest.mark.parametrize(
    ("variant", "seed"), [("mini-h17", S000), ("atlantic-city", S002), ("surrender", S003)]
)
@pytest.mark.parametrize("cards", [("AS", "7S"), ("TS", "2S")], ids=["soft-18", "hard-12"])
def test_double_is_offered_on_any_first_two_cards(
    variant: str, seed: str, cards: tuple[str, str]
) -> None:
    """000, mini-h17: "After you are dealt your first two cards, an option to 'double' will be
    displayed." 002, atlantic-city: "Double: If you select this option, two things will happen:
    you will get exactly one more card, your turn will end, and your bet will be doubled."
    003, surrender: "You may only use this option on being dealt the first two cards."
    """
    # given a soft 18 or a hard 12 against a dealer 6 / T
    played = play(
        variant,
        [BET, "Deal", {"do": "Double", "box": 0}],
        seed=seed,
        shoe=[cards[0], "6H", cards[1], "TH", "2H", "9H"],
    )
    # then the double was taken: one card, stake doubled, the turn over
    assert played.failures == []
    doubled = played.of_type("HandDoubled")
    assert len(doubled) == 1 and doubled[0]["amount"] == 1000
    assert played.hands()[0][3] == 2000
    assert "TurnStarted" in played.types() and played.types().count("PlayerHit") == 0


@pytest.mark.parametrize(
    ("third", "outcome"), [("5S", "lose"), ("KS", "bust")], ids=["17-loses", "22-busts"]
)
def test_mini_h17_a_lost_double_forfeits_the_bet_and_the_double(third: str, outcome: str) -> None:
    """000, mini-h17: "If you lose the bet, you forfeit the entire bet amount, the initial bet
    and the additional amount placed for the double option."
    """
    # given T-2 doubled against a dealer 9 / T (19), the double card making 17 or 22
    played = play(
        "mini-h17",
        [
            BET,
            "Deal",
            {"do": "Double", "box": 0, "offered": ["hit", "stand", "double", "surrender"]},
        ],
        seed=S000,
        shoe=["TS", "9S", "2S", "TH", third],
    )
    # then the $10 bet and the $10 double are both lost: $20 gone, nothing paid
    assert played.failures == []
    assert played.hands() == [(0, 0, outcome, 2000, 0)]
    [result] = played.of_type("RoundSettled")[0]["results"]
    assert (result["wagered"], result["paid"], result["net"]) == (2000, 0, -2000)
    assert played.balance() == 8000


# ---- 001: mini-s17 ------------------------------------------------------------------------


def test_mini_s17_insurance_is_offered_before_the_peek_and_an_insured_loss_breaks_even() -> None:
    """001, mini-s17: "If the dealer's second card or upcard is an ace, you are given the option
    to accept Insurance before the dealer views the hole card". "Insurance is effectively a
    side-bet of half the amount of your original stake, paid at 2:1. This means that if the
    dealer has a natural 21 or Blackjack, you lose your original bet, but win back half its
    value". README: "a won insurance returns its stake and twice it, so an insured hand that
    loses to a blackjack breaks even."
    """
    # given T-8 against a dealer ace with a king in the hole
    played = play(
        "mini-s17",
        [
            BET,
            "Deal",
            {
                "do": "Hit",
                "box": 0,
                "reject": "not_your_turn",
                "offered": ["insurance:0", "no_insurance:0"],
            },
            {"do": "TakeInsurance", "box": 0},
        ],
        seed=S001,
        shoe=["TS", "KS", "8S", "AS"],  # mini-s17 deals the hole card (KS) before the upcard
    )
    # then the insurance ($5) was taken before the peek and paid 2:1; the $10 bet is lost
    assert played.failures == []
    types = played.types()
    assert types.index("InsuranceTaken") < types.index("DealerPeeked")
    assert played.of_type("InsuranceSettled")[0]["payout"] == 1500
    assert played.hands() == [(0, 0, "lose", 1000, 0)]
    assert played.balance() == 10_000


def test_mini_s17_a_busted_hand_loses_at_once_and_the_dealer_draws_nothing() -> None:
    """001, mini-s17: "If you bust, a message will be displayed alongside your cards and you
    immediately lose the game, plus your bet." (003 likewise: "If your hand busts (its total
    exceeds 21), this hand loses and is removed from the table.")
    """
    # given T-6 against the dealer's 6 in the hole and T up (16), a 5 next in the shoe
    played = play(
        "mini-s17",
        [BET, "Deal", {"do": "Hit", "box": 0, "offered": ["hit", "stand"]}],
        seed=S001,
        shoe=["TS", "6H", "6S", "TH", "KS", "5S"],  # the hole card (6H) comes before the upcard
    )
    # then the K busts the hand, which is lost at once (its HandSettled before the hole card:
    # bust_settled_at_once), and the round ends on it: the hole card is shown, the dealer
    # keeps her 16 (the 5 that would make her 21 stays in the shoe), the $10 is lost
    assert played.failures == []
    types = played.types()
    assert types[types.index("PlayerHit") : types.index("RoundSettled") + 1] == [
        "PlayerHit",
        "CardDealt",
        "HandSettled",
        "DealerHoleCardRevealed",
        "RoundSettled",
    ]
    assert played.of_type("RoundSettled")[0]["dealer_total"] == 16
    assert played.hands() == [(0, 0, "bust", 1000, 0)]
    assert played.balance() == 9000


def test_mini_s17_declined_insurance_the_dealer_still_checks_her_ace() -> None:
    """001, mini-s17: "you are given the option to accept Insurance before the dealer views the
    hole card". "If you accept Insurance, the dealer will check ('peek') at their hole card for
    Blackjack." README (rules reference): the dealer views the hole card under an ace whether
    or not anyone took the insurance offered (``peek_on_ace``).
    """
    # given 5-6 (an 11 the player would double) against the dealer's K in the hole and A up
    played = play(
        "mini-s17",
        [
            BET,
            "Deal",
            {"do": "DeclineInsurance", "box": 0, "offered": ["insurance:0", "no_insurance:0"]},
            {"do": "Double", "box": 0, "reject": "not_your_turn"},
        ],
        seed=S001,
        shoe=["5S", "KS", "6S", "AS", "TS"],
    )
    # then the uninsured player is not given a turn: the dealer checked, found her blackjack
    # and took the $10 bet alone (no double was ever at stake)
    assert played.failures == []
    assert [e["has_blackjack"] for e in played.of_type("DealerPeeked")] == [True]
    assert "TurnStarted" not in played.types()
    assert played.hands() == [(0, 0, "lose", 1000, 0)]
    assert played.balance() == 9000


# ---- 002: atlantic-city and atlantic-city-multi -------------------------------------------


@pytest.mark.parametrize(("bet", "win"), [(550, 800), (133, 100), (101, 100)])
def test_atlantic_city_blackjack_win_loses_its_cents_at_the_table(bet: int, win: int) -> None:
    """002, atlantic-city: "Please note that if the payout from a natural blackjack results in a
    dollar amount including cents, the cents part will not be paid out." README: "a $5.50 bet is
    paid $5.50 plus $8", "a $1.33 one wins $1 instead of $1.99".
    """
    # given a natural against a dealer 9 / 7
    played = play(
        "atlantic-city",
        [{"do": "PlaceBet", "box": 0, "amount": bet}, "Deal"],
        seed=S002,
        shoe=["AS", "9S", "KS", "7S"],
    )
    # then the stake comes back whole and the winnings without their cents
    assert played.failures == []
    assert played.hands() == [(0, 0, "blackjack", bet, bet + win)]
    assert played.balance() == 10_000 + win


def test_atlantic_city_player_and_dealer_blackjack_push() -> None:
    """002, atlantic-city: "If the dealer does have a natural blackjack ..., you will collect a
    payoff of 2 to 1 on your insurance. You will also lose your original wager, unless you have
    a natural blackjack too." "Any hand is considered a push if your hand and the dealers are of
    equal value in which case no money will be exchanged."
    """
    # given A-K against a dealer ace with a queen in the hole
    played = play(
        "atlantic-city",
        [BET, {"do": "Deal", "offered": ["bet:0", "deal", "clear", "remove:0"]}],
        seed=S002,
        shoe=["AS", "AH", "KS", "QS"],
    )
    # then the naturals push: the stake comes back, no money changes hands
    assert played.failures == []
    assert played.hands() == [(0, 0, "push", 1000, 1000)]
    assert played.balance() == 10_000


def test_atlantic_city_multi_a_busted_hand_loses_even_when_the_dealer_busts() -> None:
    """002, atlantic-city-multi: "If you have a total of 22 or higher (a busted hand), you lose
    regardless of whether the dealer also busts."
    """
    # given alice T-6 (hits a T: 26) and bob T-8 (stands) against a dealer 6 / T who draws a K
    played = play(
        "atlantic-city-multi",
        [
            {"do": "PlaceBet", "box": 0, "amount": 1000},
            {"do": "PlaceBet", "player": "bob", "box": 1, "amount": 1000},
            "Deal",
            {"do": "Deal", "player": "bob"},
            {"do": "Hit", "box": 0},
            {"do": "Stand", "player": "bob", "box": 1},
        ],
        seed=S002,
        players=[("alice", 0, 10_000), ("bob", 1, 10_000)],
        shoe=["TS", "TH", "6S", "6H", "8S", "TD", "TC", "KS"],
    )
    # then the dealer busted at 26, bob won, and alice's bust still lost
    assert played.failures == []
    assert played.of_type("RoundSettled")[0]["dealer_total"] == 26
    assert played.hands() == [(0, 0, "bust", 1000, 0), (1, 0, "win", 1000, 2000)]
    assert (played.balance("alice"), played.balance("bob")) == (9000, 11_000)


def test_atlantic_city_multi_an_insurance_decision_not_made_in_time_is_declined() -> None:
    """002, atlantic-city-multi: "Whenever the dealer's up-card is an ace, the player has an
    option of taking insurance." README (the 15 s of atlantic-city-multi): "an insurance
    decision not made in time is declined".
    """
    # given alice T-9 and bob T-8 against a dealer ace (soft 18, no blackjack), dealt at t=2;
    # alice insures at once, bob says nothing
    played = play(
        "atlantic-city-multi",
        [
            {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 0},
            {"do": "PlaceBet", "player": "bob", "box": 1, "amount": 1000, "at": 1},
            {"do": "Deal", "at": 2},
            {"do": "Deal", "player": "bob", "at": 2},
            {"do": "TakeInsurance", "box": 0, "at": 3},
            {
                "do": "ExpireTimers",
                "at": 16.9,
                "player": "bob",
                "offered": ["insurance:1", "no_insurance:1"],
            },
            # when the 15 s run out
            {"do": "ExpireTimers", "at": 17},
            {"do": "Stand", "box": 0, "at": 18},
            {"do": "Stand", "player": "bob", "box": 1, "at": 19},
        ],
        seed=S002,
        players=[("alice", 0, 10_000), ("bob", 1, 10_000)],
        shoe=["TS", "TH", "AS", "9S", "8S", "7S"],
    )
    # then the server declined bob's insurance, recorded it, and the dealer checked
    assert played.failures == []
    timed_out = played.of_type("PlayerTimedOut")
    assert [(e["player_id"], e["action"]) for e in timed_out] == [("bob", "declined_insurance")]
    assert [e["player_id"] for e in played.of_type("InsuranceDeclined")] == ["bob"]
    types = played.types()
    assert types.index("InsuranceDeclined") < types.index("DealerPeeked")
    # alice lost her $5 insurance and won $10; bob pushed 18 against 18
    assert (played.balance("alice"), played.balance("bob")) == (10_500, 10_000)


def test_atlantic_city_multi_a_player_left_out_sits_out_until_they_bet_or_pass() -> None:
    """002: "If you do not bet or pass within 15 seconds ... you will be automatically excluded
    from that particular hand." The multi-seat review: a seated player who never acts held
    every round up for the whole 15 s. Left out once, the player sits out: the next rounds
    deal as soon as the others have decided, until the player bets or passes again."""
    played = play(
        "atlantic-city-multi",
        [
            {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 0},
            {"do": "Deal", "at": 1},
            {"do": "ExpireTimers", "at": 15},  # bob did nothing: left out, the round deals
            {"do": "Stand", "box": 0, "at": 16},
            # round 2: alice alone decides, and the round deals at once
            {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 20},
            {"do": "Deal", "at": 21},
            {"do": "Stand", "box": 0, "at": 22},
            # round 3: bob bets again, and is waited for
            {"do": "PlaceBet", "player": "bob", "box": 1, "amount": 1000, "at": 30},
            {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 31},
            {"do": "Deal", "at": 32},
            {"do": "Stand", "box": 0, "reject": "not_your_turn", "at": 32},  # not dealt yet
            {"do": "Deal", "player": "bob", "at": 33},
        ],
        seed=S002,
        players=[("alice", 0, 10_000), ("bob", 1, 10_000)],
        shoe=["TS", "7S", "9S", "8S"],
        shoes=[["TS", "7S", "9S", "8S"], ["TH", "7H", "9H", "8H"], ["TD", "TC", "7D", "8D"]],
    )
    assert played.failures == []
    left_out = [(e["player_id"], e["action"]) for e in played.of_type("PlayerTimedOut")]
    assert left_out == [("bob", "left_out")]
    assert [e["round"] for e in played.of_type("DealStarted")] == [1, 2, 3]
    assert [e["boxes"] for e in played.of_type("DealStarted")] == [[0], [0], [0, 1]]


# ---- 003: surrender -----------------------------------------------------------------------


def test_surrender_a_busted_box_loses_even_when_the_dealer_busts() -> None:
    """003, surrender: "If your hand busts (its total exceeds 21), this hand loses and is
    removed from the table." "Lose - The player loses if his hand total is less than the
    Dealer's, or if the hand busts."
    """
    # given box 0 T-6 (hits a T: 26) and box 1 T-8 (stands) against a dealer 6 / T who draws a K
    played = play(
        "surrender",
        [
            {"do": "PlaceBet", "box": 0, "amount": 1000},
            {"do": "PlaceBet", "box": 1, "amount": 1000},
            "Deal",
            {"do": "Hit", "box": 0},
            {"do": "Stand", "box": 1},
        ],
        seed=S003,
        shoe=["TS", "TH", "6S", "6H", "8S", "TD", "TC", "KS"],
    )
    # then the dealer busted, box 1 won and box 0 still lost
    assert played.failures == []
    assert played.hands() == [(0, 0, "bust", 1000, 0), (1, 0, "win", 1000, 2000)]
    assert played.balance() == 10_000


def test_surrender_a_blackjack_beats_the_dealers_regular_21() -> None:
    """003, surrender: "A hand with Blackjack beats any other hand, including a regular 21."
    000, mini-h17 (paytable): "Your blackjack beats any dealer total (including a dealer's
    regular 21) except a dealer's blackjack." 000: "You cannot double if you have been dealt a
    blackjack."
    """
    # given box 0 A-K and box 1 T-9 against a dealer 6 / 5 who draws a T to 21
    played = play(
        "surrender",
        [
            {"do": "PlaceBet", "box": 0, "amount": 1000},
            {"do": "PlaceBet", "box": 1, "amount": 1000},
            "Deal",
            {"do": "Double", "box": 0, "reject": "not_your_turn"},
            {"do": "Stand", "box": 1},
        ],
        seed=S003,
        shoe=["AS", "TS", "6S", "KS", "9S", "5S", "TH"],
    )
    # then the natural was never given a turn and is paid 3:2 against the dealer's 21
    assert played.failures == []
    assert played.of_type("RoundSettled")[0]["dealer_total"] == 21
    assert played.hands() == [(0, 0, "blackjack", 1000, 2500), (1, 0, "lose", 1000, 0)]
    assert [e["box"] for e in played.of_type("TurnStarted")] == [1]


def test_surrender_21_of_three_cards_is_no_blackjack_for_the_player_or_the_dealer() -> None:
    """003, surrender: "A Blackjack is a total of 21, when a hand contains an Ace and any
    ten-valued card (Jack, King, Queen or Ten), but only when these two cards are the first
    cards dealt to a player or Dealer."
    """
    # given 5-6 hitting a T (21) against a dealer 6 / 5 who draws a T (21)
    played = play(
        "surrender",
        [BET, "Deal", {"do": "Hit", "box": 0}],
        seed=S003,
        shoe=["5S", "6H", "6S", "5H", "TS", "TH"],
    )
    # then the hand stood by itself at 21 and the two regular 21s push
    assert played.failures == []
    assert played.of_type("RoundSettled")[0]["dealer_blackjack"] is False
    assert played.hands() == [(0, 0, "push", 1000, 1000)]


def test_surrender_a_push_returns_all_stakes_of_a_doubled_hand() -> None:
    """003, surrender: "In the event of a push, all stakes are returned to the player." """
    # given 5-6 doubled onto a 7 (18) against a dealer T / 8 (checked: no blackjack)
    played = play(
        "surrender",
        [BET, "Deal", {"do": "Double", "box": 0}],
        seed=S003,
        shoe=["5S", "TS", "6S", "8S", "7S"],
    )
    # then both stakes ($10 bet and $10 double) come back
    assert played.failures == []
    assert played.hands() == [(0, 0, "push", 2000, 2000)]
    assert played.balance() == 10_000


@pytest.mark.parametrize("action", ["Stand", "Double", "Surrender"])
def test_surrender_stand_double_or_fold_then_a_disconnection_the_game_finishes_on_the_server(
    action: str,
) -> None:
    """003, surrender: "If you press 'Stand' button, 'Double' button or 'Fold' button and the
    connection is terminated the play will continue on the server. After you reconnect, use the
    My Account Betting History or Game History to see the result of the missed game."
    """
    # given 9-2 against a dealer 7 / T, the player presses the button and drops at once
    played = play(
        "surrender",
        [BET, "Deal", {"do": action, "box": 0}, "Disconnect"],
        seed=S003,
        shoe=["9S", "7S", "2S", "TS", "9H"],
    )
    # then the round was settled without the player, and the disconnection refunded nothing
    assert played.failures == []
    types = played.types()
    assert types.index("RoundSettled") < types.index("PlayerDisconnected")
    assert "BetRefunded" not in types
    expected = {"Stand": ("lose", 1000, 0), "Double": ("win", 2000, 4000)}
    expected["Surrender"] = ("surrender", 1000, 500)
    assert played.hands() == [(0, 0, *expected[action])]


# ---- 003: a blackjack is paid at once -----------------------------------------------------

TWO_BOXES: list[Step] = [
    {"do": "PlaceBet", "box": 0, "amount": 1000},
    {"do": "PlaceBet", "box": 1, "amount": 1000},
    "Deal",
]


def test_surrender_pays_a_blackjack_before_any_hand_is_played() -> None:
    """003, surrender: "If you are dealt Blackjack, you are immediately paid 1.5 times the
    placed bet, unless the Dealer also has Blackjack, in which case it is a Push." Paid at
    once, the $25 covers a double on the next box that the $0 left could not."""
    # given $20 on two boxes and $0 left: box 0 A-K, box 1 5-6 = 11, dealer 9 up, 7 in the hole
    played = play(
        "surrender",
        [
            *TWO_BOXES,
            {"do": "Double", "box": 1, "offered": ["hit", "stand", "double", "surrender"]},
        ],
        seed=S003,
        balance=2000,
        shoe=["AS", "5S", "9S", "KS", "6S", "7S", "TS", "2H"],
    )
    assert played.failures == []
    types = played.types()
    assert types.index("HandSettled") < types.index("TurnStarted")
    # box 1: 5 6 T = 21 doubled; the dealer 9 7 2 = 18
    assert played.hands() == [(0, 0, "blackjack", 1000, 2500), (1, 0, "win", 2000, 4000)]
    [result] = played.of_type("RoundSettled")[0]["results"]
    assert (result["wagered"], result["paid"], result["net"]) == (3000, 6500, 3500)
    assert played.balance() == 2000 + 3500  # what it started with, plus the net


def test_surrender_pays_a_blackjack_after_the_peek_and_the_insurance() -> None:
    """003, surrender: paid "immediately ... unless the Dealer also has Blackjack": with an ace
    up, only once the dealer has checked; insurance is not offered to the blackjack."""
    played = play(
        "surrender",
        [
            *TWO_BOXES,
            {"do": "DeclineInsurance", "box": 1, "offered": ["insurance:1", "no_insurance:1"]},
            {"do": "Stand", "box": 1},
        ],
        seed=S003,
        shoe=["AS", "TS", "AH", "KS", "9S", "7S"],
    )
    assert played.failures == []
    types = played.types()
    assert types.index("DealerPeeked") < types.index("HandSettled") < types.index("TurnStarted")
    # box 1: T 9 = 19 against the dealer's A 7 = soft 18
    assert played.hands() == [(0, 0, "blackjack", 1000, 2500), (1, 0, "win", 1000, 2000)]


def test_surrender_pushes_a_blackjack_against_the_dealers_at_the_end() -> None:
    """003, surrender: "... unless the Dealer also has Blackjack, in which case it is a
    Push": nothing is paid before the dealer's hand is known."""
    played = play("surrender", TWO_BOXES, seed=S003, shoe=["AS", "5S", "TH", "KS", "6S", "AH"])
    assert played.failures == []
    types = played.types()
    assert types.index("DealerHoleCardRevealed") < types.index("HandSettled")
    assert played.hands() == [(0, 0, "push", 1000, 1000), (1, 0, "lose", 1000, 0)]


def test_a_blackjack_is_paid_with_the_round_where_the_page_says_nothing_of_it() -> None:
    """000, mini-h17 says nothing of paying a blackjack early: it is paid when the round
    settles, after the hole card (one box, so no later decision could use the money)."""
    played = play("mini-h17", [BET, "Deal"], seed=S000, shoe=["AS", "9S", "KS", "7S"])
    assert played.failures == []
    types = played.types()
    assert types.index("DealerHoleCardRevealed") < types.index("HandSettled")
    assert played.hands() == [(0, 0, "blackjack", 1000, 2500)]
