"""The replay's checks on money: every balance moves by exactly the amount of its event and
never goes below zero, every stake is what the rules charge, every payout is derived again
(``audit.settlement``) and compared with the recorded one, paid to the box's own player, and
each round's results add up."""

from __future__ import annotations

from blackjack.audit.checking import Checker, _Unfoldable
from blackjack.audit.replayed import RoundReplay, Settlement
from blackjack.audit.settlement import (
    dealer_blackjack_ruled_out,
    dealer_play_problem,
    hand_result,
    insurance_result,
    move_problem,
)
from blackjack.domain import events as ev
from blackjack.domain.hand import is_natural, total
from blackjack.domain.payouts import insurance_stake
from blackjack.domain.state import Hand, TableState


class MoneyChecks(Checker):
    def funds(self, e: ev.FundsDeposited | ev.FundsWithdrawn) -> None:
        sign = 1 if isinstance(e, ev.FundsDeposited) else -1
        if e.amount <= 0:
            self._find(f"a {type(e).__name__} of {e.amount}")
        # A suspended table takes no money in (game disable): the handlers refuse a deposit
        # and decline a buy-in there, but the releases before game disable took both.
        if isinstance(e, ev.FundsDeposited) and self.state.suspended:
            what = "a deposit" if e.transfer is None else f"buy-in {e.transfer}"
            self._find(f"{e.player_id} pays {e.amount} in at a suspended table ({what})")
        self._moves(e.player_id, sign * e.amount, e.balance_after)

    def bet_placed(self, e: ev.BetPlaced) -> None:
        box = self.state.boxes[e.box]
        player = self.state.players.get(e.player_id)
        # On a box of the player's own seat, before the deal (``checks.own_box``): a chip on
        # another's box would share in (or take over) that box's hand.
        own = player is not None and self.state.seat_of_box(e.box) == player.seat
        self._rule(None if own else f"{e.player_id} bets on box {e.box}, not at their seat")
        self._rule(f"a bet on box {e.box} after its cards were dealt" if box.hands else None)
        if self.state.suspended:
            self._find(f"{e.player_id} bets {e.amount} on box {e.box} at a suspended table")
        self._expect(f"box {e.box} total", e.box_total, box.bet + e.amount)
        if e.amount <= 0:
            self._find(f"a chip of {e.amount} on box {e.box}")
        if e.box_total > self.state.rules.max_bet:
            self._find(
                f"box {e.box} bet {e.box_total} is over the maximum {self.state.rules.max_bet}"
            )
        self._moves(e.player_id, -e.amount, e.balance_after)

    def bet_refunded(self, e: ev.BetRefunded) -> None:
        box = self.state.boxes[e.box]
        # To the box's player, before the deal: a refund of a dealt box took its hand away.
        self._expect(f"box {e.box}'s player", e.player_id, box.player_id)
        self._rule(f"a refund from box {e.box} after its cards were dealt" if box.hands else None)
        self._expect(f"box {e.box} bet left after a refund", e.box_total, box.bet - e.amount)
        if e.amount <= 0 or e.amount > box.bet:
            self._find(f"a refund of {e.amount} from box {e.box}, which holds {box.bet}")
        if e.box_total:  # only a player's RemoveBet leaves part of a bet on the box
            self._expect(f"box {e.box} partial refund's reason", e.reason, "removed")
        self._moves(e.player_id, e.amount, e.balance_after)

    def deal_started(self, e: ev.DealStarted) -> None:
        rules = self.state.rules
        # Once a round, in its betting: a second deal would take the hands back and deal
        # new ones on the same bets.
        dealt_again = not self.state.round_open or self.state.hands_in_play
        self._rule(f"round {e.round} dealt again, or with no round open" if dealt_again else None)
        # Box by box in the layout's order, each with a bet and its player (``close_betting``):
        # the order decides which cards each box gets.
        boxes = list(e.boxes)
        self._rule(
            None if boxes == sorted(set(boxes)) else f"boxes dealt out of order: {tuple(boxes)}"
        )
        empty = [
            i for i in boxes if self.state.boxes[i].player_id is None or not self.state.boxes[i].bet
        ]
        self._rule(f"box(es) {tuple(empty)} dealt without a bet" if empty else None)
        for index in e.boxes:  # the minimum binds the stack on each box dealt, not each chip
            bet = self.state.boxes[index].bet
            if not rules.min_bet <= bet <= rules.max_bet:
                self._find(f"box {index} dealt with {bet}, outside {rules.min_bet}-{rules.max_bet}")
        if self.current is not None:
            self.current.shoe = e.shoe
            self.current.status = "playing"

    def insurance_taken(self, e: ev.InsuranceTaken) -> None:
        box = self.state.boxes[e.box]
        offered = box.insurance == "offered" and box.player_id == e.player_id
        self._rule(None if offered else f"insurance on box {e.box}, not offered to {e.player_id}")
        peeked = self.current is not None and self.current.peeked
        self._rule(f"insurance on box {e.box} taken after the dealer peeked" if peeked else None)
        stake = insurance_stake(self.state.boxes[e.box].bet)
        self._expect(f"insurance stake on box {e.box}", e.amount, stake)
        self._moves(e.player_id, -e.amount, e.balance_after)

    def insurance_settled(self, e: ev.InsuranceSettled) -> None:
        box = self.state.boxes[e.box]
        taken = box.insurance == "taken"
        self._rule(
            None if taken else f"insurance on box {e.box} settled when it was {box.insurance}"
        )
        self._expect(f"box {e.box}'s player", e.player_id, box.player_id)
        self._expect(f"insurance stake on box {e.box}", e.stake, box.insurance_stake)
        won, payout = insurance_result(self.state.rules, box.insurance_stake, self.state.dealer)
        self._expect(f"insurance on box {e.box}", (e.won, e.payout), (won, payout))
        self._moves(e.player_id, e.payout, e.balance_after)
        current = self.current
        if current is not None:
            current.paid[e.player_id] = current.paid.get(e.player_id, 0) + payout
            current.insurance.append(
                Settlement(
                    e.box,
                    -1,
                    e.player_id,
                    (),
                    0,
                    e.stake,
                    ("won" if e.won else "lost", e.payout),
                    ("won" if won else "lost", payout),
                )
            )

    def _hand(self, box: int, index: int) -> Hand:
        hands = self.state.boxes[box].hands
        if not 0 <= index < len(hands):
            raise _Unfoldable(f"box {box} has no hand {index}")
        return hands[index]

    def hand_doubled(self, e: ev.HandDoubled) -> None:
        self._rule(move_problem(self.state, e.player_id, e.box, e.hand, "double"))
        self._expect("the double's stake", e.amount, self._hand(e.box, e.hand).stake)
        self._moves(e.player_id, -e.amount, e.balance_after)

    def hand_split(self, e: ev.HandSplit) -> None:
        self._rule(move_problem(self.state, e.player_id, e.box, e.hand, "split"))
        self._expect("the split's stake", e.amount, self._hand(e.box, e.hand).stake)
        self._moves(e.player_id, -e.amount, e.balance_after)

    def hand_settled(self, e: ev.HandSettled) -> None:
        hand = self._hand(e.box, e.hand)
        rules, dealer = self.state.rules, self.state.dealer
        self._expect(f"box {e.box}'s player", e.player_id, self.state.boxes[e.box].player_id)
        self._expect(f"box {e.box} hand {e.hand} stake", e.stake, hand.stake)
        self._expect(f"box {e.box} hand {e.hand} total", e.total, total(hand.cards).best)
        derived = hand_result(rules, hand, dealer)
        recorded = (e.outcome, e.payout)
        self._expect(f"box {e.box} hand {e.hand} result", recorded, derived)
        self._expect(f"box {e.box} hand {e.hand} settled again", hand.settled, False)
        if self.state.phase == "dealer":  # against the dealer's cards: all of them
            problem = dealer_play_problem(rules, dealer, _any_live_hand(self.state))
            self._rule(
                None
                if problem is None
                else f"box {e.box} hand {e.hand} settled before the dealer was done: {problem}"
            )
        early = f"box {e.box} hand {e.hand} paid before the dealer's hand is known"
        if self.state.phase != "dealer" and e.outcome == "surrender":
            # Half back whatever the dealer turns over: at once where the rules say so.
            self._expect(early, (e.outcome, rules.surrender_paid_at_once), ("surrender", True))
        elif self.state.phase != "dealer" and e.outcome == "bust":
            # Lost whatever the dealer turns over: at once where the rules say so.
            self._expect(early, (e.outcome, rules.bust_settled_at_once), ("bust", True))
        elif self.state.phase != "dealer":  # before the hole card: a blackjack paid at once
            self._expect(
                early,
                (e.outcome, rules.blackjack_paid_at_once, dealer_blackjack_ruled_out(self.state)),
                ("blackjack", True, True),
            )
        self._moves(e.player_id, e.payout, e.balance_after)
        current = self.current
        if current is not None:
            current.paid[e.player_id] = current.paid.get(e.player_id, 0) + derived[1]
            current.settlements.append(
                Settlement(
                    e.box,
                    e.hand,
                    e.player_id,
                    hand.cards,
                    total(hand.cards).best,
                    hand.stake,
                    recorded,
                    derived,
                )
            )

    def round_settled(self, e: ev.RoundSettled) -> None:
        state = self.state
        dealer = state.dealer
        self._expect("the dealer's total", e.dealer_total, total(dealer).best)
        self._expect("the dealer's blackjack", e.dealer_blackjack, is_natural(dealer))
        problem = dealer_play_problem(state.rules, dealer, _any_live_hand(state))
        self.out.checks += 1
        if problem is not None:
            self._find(problem)
        if self.open_at_reveal:
            self._find(
                f"the dealer's turn began while {', '.join(self.open_at_reveal)} was still open"
            )
            self.open_at_reveal = []
        for index, box in enumerate(state.boxes):
            if box.insurance == "taken":
                self._find(f"insurance on box {index} taken and never settled")
        for index in state.boxes_in_play():  # each hand dealt is settled before the round
            for number, hand in enumerate(state.boxes[index].hands):
                self._rule(None if hand.settled else f"box {index} hand {number} never settled")
        wagered = _wagered(state, bets_not_dealt=False)
        current = self.current
        paid = current.paid if current is not None else {}
        results = {r.player_id: r for r in e.results}
        # Each player once: the read model sums every entry into the game report.
        listed = sorted(r.player_id for r in e.results)
        self._expect("the players in the results", listed, sorted(wagered))
        for player_id, result in results.items():
            derived_paid = paid.get(player_id, 0)
            derived_wagered = wagered.get(player_id, 0)
            self._expect(f"{player_id}'s wager in the round", result.wagered, derived_wagered)
            self._expect(f"{player_id}'s payout in the round", result.paid, derived_paid)
            self._expect(f"{player_id}'s net", result.net, derived_paid - derived_wagered)
            if player_id in state.players:
                self._expect(
                    f"{player_id}'s balance after the round",
                    result.balance_after,
                    self._balance(player_id),
                )
        if current is not None:
            recorded = tuple((m.box, m.message) for m in e.messages)
            self._expect("the boxes' messages", recorded, _break_even(state, current))
            current.results = list(e.results)
            current.dealer = dealer

    def round_voided(self, e: ev.RoundVoided) -> None:
        """Voided only where the rules say a malfunction voids a round, only the round in
        play, and every player's wagers back less what the round had paid them: the balance
        the round found, money paid in or out meanwhile apart (``decisions/voiding.py``)."""
        state = self.state
        if not state.rules.void_on_malfunction:
            self._find(f"round {e.round} voided where the table's rules let no one void one")
        if not state.round_in_play:
            self._find(f"round {e.round} voided with no wager in play")
        wagered = _wagered(state, bets_not_dealt=True)
        current = self.current
        paid = current.paid if current is not None else {}
        returns = {r.player_id: r for r in e.returns}
        # Each player once: evolve and the read model apply every entry (a second one for a
        # player would move their money again), not only the last one kept here.
        listed = sorted(r.player_id for r in e.returns)
        self._expect("the players in the void's returns", listed, sorted(wagered))
        for player_id, back in returns.items():
            stakes, payouts = wagered.get(player_id, 0), paid.get(player_id, 0)
            self._expect(f"{player_id}'s wager in the voided round", back.wagered, stakes)
            self._expect(f"{player_id}'s payout before the void", back.paid, payouts)
            balance = self._balance(player_id)
            owed = stakes - payouts
            # Only a payment the balance no longer holds stays with the player, to zero.
            short = max(0, -(balance + owed))
            self._expect(f"{player_id}'s payment not recovered", back.not_recovered, short)
            self._expect(f"{player_id}'s return", back.returned, owed + short)
            self._moves(player_id, back.returned, back.balance_after)
        if current is not None:
            current.status = "voided"
            for settled in (*current.settlements, *current.insurance):
                settled.voided = True


def _any_live_hand(state: TableState) -> bool:
    """A hand stands against the dealer, who then plays hers out (``decisions.play``)."""
    return any(h.status == "standing" for b in state.boxes for h in b.hands)


def _break_even(state: TableState, current: RoundReplay) -> tuple[tuple[int, str], ...]:
    """Page 000's message, derived: "After split, if you win one hand & lose another hand you
    will be shown a message 'Break Even' which indicates that you don't win or lose anything"
    (the README's reading: the box's net, its insurance included, is zero too)."""
    if not state.rules.break_even_message:
        return ()
    shown = []
    for index, box in enumerate(state.boxes):
        if len(box.hands) < 2:
            continue
        hands = [s for s in current.settlements if s.box == index]
        outcomes = {s.derived[0] for s in hands}
        paid = sum(s.derived[1] for s in hands)
        paid += sum(s.derived[1] for s in current.insurance if s.box == index)
        wagered = sum(h.stake for h in box.hands) + box.insurance_stake
        if "win" in outcomes and outcomes & {"lose", "bust"} and paid == wagered:
            shown.append((index, "Break Even"))
    return tuple(shown)


def _wagered(state: TableState, *, bets_not_dealt: bool) -> dict[str, int]:
    """What the round in play has taken from each player: every hand's stake (doubles and
    splits included) and insurance on the boxes dealt, and with ``bets_not_dealt`` the bets
    still on the layout."""
    wagered: dict[str, int] = {}
    for box in state.boxes:
        if box.player_id is None:
            continue
        if box.hands:
            stake = sum(h.stake for h in box.hands) + box.insurance_stake
        elif bets_not_dealt and box.bet:
            stake = box.bet
        else:
            continue
        wagered[box.player_id] = wagered.get(box.player_id, 0) + stake
    return wagered
