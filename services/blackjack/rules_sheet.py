"""A table's rules in a player's words, written from its ``Rules`` (never typed per casino):
the game's help page a player reads before betting, with its theoretical return when the
caller has computed it (``strategy.compute_rtp``). ``blackjack rules VARIANT`` prints it and
``blackjack play`` shows it for the table's own rules, overrides included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

from blackjack.domain.currencies import money
from blackjack.domain.rules import PRESETS, ReshuffleAtPenetration, Rules


@dataclass(frozen=True)
class Returns:
    """The theoretical return to player under basic strategy: at large bets, and the lowest
    at any bet the table takes (payouts cut to whole minor units, or to whole units where a
    blackjack's cents are not paid, lower it at some bets)."""

    rtp_percent: float
    lowest_percent: float
    lowest_at_bet: int


def table_returns(rules: Rules) -> Returns:
    """Computed exactly (``strategy.compute_rtp``): a few seconds the first time per rule set.

    The lowest return is searched from the minimum bet up, and the search stops at the first
    bet from which no larger bet can return less: whatever the rounding, a bet of ``b`` or
    more wins at least ``pays - ((q - 1) / q + unit - 1) / b`` per unit on a blackjack (``pays
    = p / q``, floored to the minor unit and then to ``blackjack_win_rounded_down_to``) and
    loses at most ``1/2 + 1 / (2 b)`` on a surrender, and the return grows with the first and
    falls with the second. Trying every bet up to the maximum (33 us each) took hours at a
    table whose maximum is 10^9 minor units."""
    from blackjack.strategy import compute_rtp
    from blackjack.strategy.dealer import DEFAULT_EXACT_REMOVED
    from blackjack.strategy.solver import DEFAULT_DEPTH, solve

    solution = solve(rules, DEFAULT_DEPTH, DEFAULT_EXACT_REMOVED)
    pays = Fraction(rules.blackjack_pays)
    cut = Fraction(pays.denominator - 1, pays.denominator) + rules.blackjack_win_rounded_down_to - 1
    lowest, at = compute_rtp(rules, rules.min_bet).rtp_percent, rules.min_bet
    for bet in range(rules.min_bet + 1, rules.max_bet + 1):
        floor = 100.0 + 100.0 * solution.expected_value(
            pays - cut / bet, Fraction(1, 2) + Fraction(1, 2 * bet)
        )
        if floor > lowest:
            break
        rtp = compute_rtp(rules, bet).rtp_percent
        if rtp < lowest:
            lowest, at = rtp, bet
    return Returns(compute_rtp(rules).rtp_percent, lowest, at)


def rules_sheet(rules: Rules, returns: Returns | None = None) -> list[str]:
    """One sentence per rule, in the order a player meets them: shoe, bets, dealer, payouts,
    decisions, the table's clock and interruptions, then the return."""
    lines = [_shoe(rules), _limits(rules), _rebet(rules), *_dealer(rules), *_peek(rules)]
    lines += [_blackjack(rules), *_insurance(rules), _double(rules), *_split(rules)]
    lines += [
        _surrender(rules),
        "Double, split and insurance are offered only when your balance covers them.",
        "You cannot draw a card to a total of 21.",
    ]
    if rules.bust_settled_at_once:  # ``play.settle_if_bust``
        lines.append(
            "A hand that goes over 21 loses at once and is out of the round, while your other "
            "hands are played."
        )
    lines += [*_clock(rules), *_interruptions(rules)]
    if rules.break_even_message:
        lines.append(
            "A split box that wins one hand and loses the other, for nothing won or lost, is "
            'shown as "Break Even".'
        )
    if returns is not None:
        lines += _returns(returns, rules)
    return lines


def _returns(returns: Returns, rules: Rules) -> list[str]:
    """The computed return, saying which one it is: a round dealt from a full shoe. Where
    every round is, that is the return as dealt too; where a shoe deals rounds to a reshuffle
    point, the return as dealt (the cut-card effect) is another figure, sampled in tens of
    seconds (``blackjack rtp --as-dealt``): named, never computed or guessed here."""
    currency = rules.currency
    line = (
        "Theoretical return to player with basic strategy, for a round dealt from a full "
        f"shoe: {returns.rtp_percent:.2f} % (over many rounds; any one round may win or lose)"
    )
    if round(returns.lowest_percent, 2) < round(returns.rtp_percent, 2):
        bet = money(returns.lowest_at_bet, currency)
        line += (
            "; less at some bets, as payouts are paid in whole units: the lowest is "
            f"{returns.lowest_percent:.2f} %, at a bet of {bet} {currency}"
        )
    policy = rules.reshuffle
    if not isinstance(policy, ReshuffleAtPenetration):
        every = (
            "Every round here is dealt from a freshly shuffled shoe: this is the return as dealt."
        )
        return [line + ".", every]
    used = f"{policy.used.numerator}/{policy.used.denominator}"
    dealt = (
        f"This table deals rounds from a shoe until {used} of it is used: the return as dealt "
        "to that point differs from the full-shoe figure (the cut-card effect) and is not "
        "shown here"
    )
    command = as_dealt_command(rules)
    if command is not None:
        dealt += f"; {command} computes it (sampled: about a minute on two cores)"
    return [line + ".", dealt + "."]


def as_dealt_command(rules: Rules) -> str | None:
    """The command that computes the return of ``rules`` as dealt to the reshuffle point:
    its preset, with the fields the table changed as ``--overrides`` (None for rules not
    opened from a preset)."""
    base = PRESETS.get(rules.name)
    if base is None:
        return None
    command = f"blackjack rtp {rules.name} --as-dealt"
    if rules == base:
        return command
    theirs, mine = base.model_dump(mode="json"), rules.model_dump(mode="json")
    changed = {key: value for key, value in mine.items() if theirs.get(key) != value}
    return f"{command} --overrides '{json.dumps(changed)}'"


def _ratio(value: Fraction) -> str:
    return f"{value.numerator} to {value.denominator}"


def _shoe(rules: Rules) -> str:
    decks = f"{rules.decks} deck{'s' if rules.decks > 1 else ''} of 52 cards"
    policy = rules.reshuffle
    if isinstance(policy, ReshuffleAtPenetration):
        used = f"{policy.used.numerator}/{policy.used.denominator}"
        return f"{decks}, shuffled again once {used} of the shoe has been dealt."
    return f"{decks}, shuffled before every round."


def _limits(rules: Rules) -> str:
    cur = rules.currency
    limits = f"Bets from {money(rules.min_bet, cur)} to {money(rules.max_bet, cur)} {cur} a box"
    if rules.boxes_per_seat > 1:
        limits += f", on up to {rules.boxes_per_seat} boxes"
    return limits + " (a double or a split may take a box's stake past the maximum)."


def _rebet(rules: Rules) -> str:
    times = [m for m in sorted(rules.rebet_multipliers) if m > 1]
    more = "".join(f", or {m} times them (x{m})" for m in times)
    then = ", and deals at once" if rules.rebet_deals else ""
    return f"Rebet places your previous round's bets again{more}{then}."


def _dealer(rules: Rules) -> list[str]:
    lines = [
        "The dealer draws to 16 and hits a soft 17 (a 17 counting an ace as 11)."
        if rules.dealer_hits_soft_17
        else "The dealer draws to 16 and stands on every 17, soft 17 included."
    ]
    if rules.hole_card_first:
        lines.append("The dealer's first card is dealt face down, the second face up.")
    return lines


def _peek(rules: Rules) -> list[str]:
    only_if_insured = rules.peek_on_ace_only_if_insured
    peeks = [
        name
        for name, on in (("an ace", rules.peeks_on_ace_uninsured), ("a ten", rules.peek_on_ten))
        if on
    ]
    no_peek = (
        "a dealer blackjack turned over at the end takes every bet on the box, doubles and "
        "splits included"
    )
    # A surrendered hand is settled as surrendered whatever the dealer turns over (settlement)
    no_peek += ", but half of a surrendered hand comes back." if rules.late_surrender else "."
    if not peeks and not only_if_insured:
        return [f"The dealer does not check for blackjack: {no_peek}"]
    lines = []
    if peeks:
        lines.append(
            f"The dealer checks for blackjack when showing {' or '.join(peeks)}: if it is "
            "there, the round ends before you play."
        )
    if only_if_insured:
        lines.append(
            "Against an ace the dealer checks for blackjack only when insurance was taken (if "
            f"it is there, the round ends before you play); when no one insured: {no_peek}"
        )
    if not rules.peek_on_ten:
        lines.append(f"Against a ten the dealer does not check: {no_peek}")
    if not rules.peek_on_ace:
        lines.append(f"Against an ace the dealer does not check: {no_peek}")
    return lines


def _blackjack(rules: Rules) -> str:
    line = "Blackjack (an ace and a ten-value card as your first two cards) pays "
    line += _ratio(rules.blackjack_pays)
    step = rules.blackjack_win_rounded_down_to
    if step > 1 or Fraction(rules.blackjack_pays).denominator > 1:  # 3 to 2 on 1.01 wins 1.51
        line += (
            f"; the winnings are paid in whole multiples of {money(step, rules.currency)} "
            f"{rules.currency}, the rest is not paid"
        )
    if rules.blackjack_paid_at_once:
        line += "; it is paid as soon as the dealer is known not to have one"
    tie = "Against a dealer blackjack it is a tie. Other wins pay 1 to 1; a tie returns the bet."
    return f"{line}. {tie}"


def _insurance(rules: Rules) -> list[str]:
    if not rules.insurance:
        return []
    return [
        f"When the dealer shows an ace you may insure a box for half its bet (an odd cent "
        f"is not charged); insurance pays {rules.insurance_pays} to 1 if the dealer has "
        "blackjack. It is not offered on a blackjack, nor when your balance cannot cover it.",
        # ``decisions/insurance.py``: a move on an undecided box declines first.
        "Instead of answering No you may play the hand (hit, stand, double, ...): its "
        "insurance is declined and, unless the dealer has blackjack, the move is played; "
        "this once no one else is still deciding on insurance and the hand plays first."
        if rules.move_declines_insurance
        else "Answer Yes or No to insurance before you play the hand.",
    ]


def _double(rules: Rules) -> str:
    if rules.double_on == "totals":
        totals = sorted(rules.double_totals)
        on = f"on a first-two-card total of {', '.join(map(str, totals[:-1]))} or {totals[-1]}"
        if len(totals) == 1:
            on = f"on a first-two-card total of {totals[0]}"
        if rules.double_totals_ace_low:
            on += " (a soft hand counts its ace as one or eleven, as you choose)"
    else:
        on = "on any first two cards"
    after = "also after a split" if rules.double_after_split else "not after a split"
    return f"Double {on}, {after}: the bet is doubled and you take exactly one more card."


def _split(rules: Rules) -> list[str]:
    if rules.max_splits == 0:
        return ["Pairs cannot be split."]
    same = (
        "the same rank (K-K, not K-Q)" if rules.split_by == "rank" else "the same value (K-Q too)"
    )
    times = (
        "once (two hands)"
        if rules.max_splits == 1
        else f"up to {rules.max_splits} times ({rules.max_splits + 1} hands)"
    )
    lines = [f"Split two cards of {same} {times}, for a second bet equal to the first."]
    if rules.split_aces_one_card:
        # a split ace's hand stands on its second card (evolve): a pair of aces again is not split
        again = ", and a pair of aces is split once only" if rules.max_splits > 1 else ""
        lines.append(f"Split aces take one card each{again}.")
    lines.append("A 21 on a split hand counts as 21, not as a blackjack.")
    return lines


def _surrender(rules: Rules) -> str:
    if not rules.late_surrender:
        return "Surrender is not offered."
    ace = "an ace no one insured" if rules.peek_on_ace_only_if_insured else "an ace"
    upcards = ((ace, rules.peeks_on_ace_uninsured), ("a ten", rules.peek_on_ten))
    checked = [card for card, peeks in upcards if peeks]
    unchecked = [card for card, peeks in upcards if not peeks]
    # the turn starts with no peek under any other upcard: surrender is open at once there,
    # before she turns her hole card over (page 003's "only after the Dealer checks" is for
    # the upcards she checks; page 000: "allowed immediately after the first two ... cards")
    before_the_hole_card = "before she turns her hole card over"
    if not checked:
        when = f"at once (the dealer checks for blackjack under no card), {before_the_hole_card}"
    else:
        others = "any other card"
        if unchecked:
            others += f", {' or '.join(unchecked)} included, which she does not check"
        when = (
            f"once the dealer has checked for blackjack under {' or '.join(checked)} "
            f"(at once under {others}, {before_the_hole_card})"
        )
    # ``play.surrender``: settled when surrendered where the rules pay it at once
    back = (
        "half its bet back at once, to play your other hands with"
        if rules.surrender_paid_at_once
        else "half its bet back"
    )
    return (
        f"Surrender: {when} you may give up your hand on its first two cards, not after a "
        f"split, and get {back} (an odd cent stays with the house)."
    )


def _clock(rules: Rules) -> list[str]:
    if rules.turn_seconds is None:
        return []
    s = rules.turn_seconds
    # What ``clock.expire_timers`` does: a bet on the layout when the time runs out is dealt
    # (one still under the minimum goes back), and a hand has one clock for all its decisions
    # (``play.next_turn``: a hit does not restart it; each hand of a split gets its own).
    return [
        f"A table of {rules.seats} seats: from the first bet of a round every player has "
        f"{s} seconds to bet and deal, or pass. When the time runs out, a bet on the table "
        "is dealt as if you had pressed Deal (a bet under the minimum is returned); with no "
        "bet you are left out of the round and sit out: later rounds are dealt without "
        "waiting for you until you bet (or pass) while betting is open again.",
        f"Each hand has {s} seconds for all its decisions (a hit does not restart the clock; "
        "each hand of a split has its own), after which the server stands it; insurance not "
        f"taken within {s} seconds is declined. A player who sits down after the cards are "
        "dealt waits for the next round; seats change between rounds.",
        *_seat_released(rules),
    ]


def _seat_released(rules: Rules) -> list[str]:
    # What ``settlement.stand_up_players_sat_out`` does, counted by ``evolve`` at each deal.
    rounds = rules.seat_released_after_rounds_sat_out
    if rounds is None:
        return []
    many = "a round" if rounds == 1 else f"{rounds} rounds in a row"
    ends = "it ends" if rounds == 1 else "the last of them ends"
    return [
        f"If you sit out {many}, the server stands you up when {ends}: your "
        "seat is freed and your money at the table goes back to your wallet, as if you had "
        "left. A bet or a pass starts the count again; rounds dealt while the table is "
        "suspended do not count."
    ]


def _interruptions(rules: Rules) -> list[str]:
    lines: list[str] = []
    if rules.refund_bets_on_disconnect:
        lines.append(
            "If you disconnect before the cards are dealt, your bet is returned; a "
            "hand already dealt waits for you, exactly as you left it."
        )
    elif rules.seats == 1:
        lines.append("If you disconnect, your round waits for you exactly as you left it.")
    if rules.interrupted_round_days is not None:
        lines.append(
            f"A round left unfinished for {rules.interrupted_round_days} days may be "
            "closed by the operator: bets not dealt are returned, every hand left "
            "stands, and the dealer plays."
        )
    if rules.void_on_malfunction:  # ``decisions/voiding.py``
        lines.append(
            "Malfunctions void all pays and plays: a round the operator voids for a "
            "malfunction gives every wager back (doubles, splits and insurance included) "
            "and nothing it paid stands."
        )
    return lines
