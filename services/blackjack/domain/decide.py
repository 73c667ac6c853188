"""``decide(state, command, now) -> events | Rejection``: the rules of the table.

Every event is folded into the state as soon as it is emitted (``_Round.emit``), so each later
step of the same decision looks at the state replay would see; the decision works on one copy
of the state (a draft, see ``evolve``), which it hands back only when it is accepted. Events are
built by the constructors in ``facts`` (generated from the event models), without re-validating
values the decider has just checked. Time is an input: ``now`` stamps deadlines and lets
``ExpireTimers`` act on them, and ``received_at`` (when the service received the command)
says whether a decision on the clock came in time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final, Protocol, get_args

from pydantic import ValidationError

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.cards import fresh_shoe, is_ace, is_ten_value, value_of
from blackjack.domain.evolve import apply_event
from blackjack.domain.hand import best_total, is_natural, total
from blackjack.domain.payouts import (
    MAX_BALANCE,
    blackjack_winnings,
    insurance_return,
    insurance_stake,
    over_balance_limit,
    surrender_refund,
)
from blackjack.domain.rejections import Rejection, RejectionCode, in_one_line
from blackjack.domain.rules import PRESETS
from blackjack.domain.shoe import commitment, needs_shuffle
from blackjack.domain.state import Hand, Player, TableState
from blackjack.domain.transfers import transfer_origin

Decision = list[ev.Event] | Rejection


class Refused(Exception):
    """Carries a rejection out of a half-made decision; its events are thrown away.

    The pydantic ``Rejection`` is built only when the decider returns it, and a message that
    takes work to format may be given as a function: the options of each decision a hand
    waits for (``hand_actions``, ``turn_options``) drop two or three refusals."""

    def __init__(self, code: RejectionCode, message: str | Callable[[], str]) -> None:
        # No super().__init__: BaseException.__new__ has kept the arguments already, and the
        # option checks make two or three of these per decision.
        self.code = code
        self._message = message

    @property
    def message(self) -> str:
        return self._message if isinstance(self._message, str) else self._message()

    @property
    def rejection(self) -> Rejection:
        return Rejection(code=self.code, message=self.message)

    def __str__(self) -> str:
        return self.message


def _refuse(code: RejectionCode, message: str | Callable[[], str]) -> Refused:
    return Refused(code, message)


class _Round:
    """The state of a decision in progress and the events it has emitted so far."""

    __slots__ = ("events", "now", "state")

    def __init__(self, state: TableState, now: datetime) -> None:
        self.state = state.copy()  # the draft: the caller's state is never changed
        self.now = now
        self.events: list[ev.Event] = []

    def emit(self, event: ev.Event) -> None:
        self.events.append(event)
        apply_event(self.state, event)

    def deadline(self) -> datetime | None:
        seconds = self.state.rules.turn_seconds
        return None if seconds is None else self.now + timedelta(seconds=seconds)


def decide(
    state: TableState, command: cmd.Command, now: datetime, received_at: datetime | None = None
) -> Decision:
    outcome = decide_and_evolve(state, command, now, received_at)
    return outcome if isinstance(outcome, Rejection) else outcome[0]


def decide_and_evolve(
    state: TableState, command: cmd.Command, now: datetime, received_at: datetime | None = None
) -> tuple[list[ev.Event], TableState] | Rejection:
    """The events and the state they fold to, which the decider has computed anyway.

    ``now`` is when the command is decided (events and new deadlines start from it);
    ``received_at``, when given, is when the service received it (the broker's time of the
    command's record). A decision on the clock is in time when it was received or decided
    before the deadline: a click received in time but decided later (a backlog, a takeover)
    is in time, and the player has the benefit of any skew between the two clocks."""
    handler = _DECIDERS.get(type(command))
    if handler is None:
        return Rejection(code="unknown_command", message=f"{type(command).__name__} is unknown")
    if not state.opened and not isinstance(command, cmd.OpenTable) and not _is_transfer(command):
        return Rejection(code="table_not_open", message="the table has not been opened")
    work = _Round(state, now)
    try:
        handler(work, command)
    except Refused as refused:
        return refused.rejection
    # Late only once the command is otherwise valid: a move by someone without a seat is
    # refused for that, not for the time.
    arrived = now if received_at is None else min(now, received_at)
    if state.deadline is not None and arrived >= state.deadline and type(command) in _ON_THE_CLOCK:
        return _too_late(state)
    if state.phase == "playing" and not isinstance(command, cmd.HandCommand):
        _announce_changed_actions(work, state)
    return work.events, work.state


# The decisions a phase's clock (the 15 s of a shared table) bounds. From its deadline on they
# are refused, even before the service's clock has sent the ExpireTimers that applies it: a
# late bet, insurance or move must not win a race against the timeout.
_ON_THE_CLOCK: Final = frozenset(
    {
        cmd.PlaceBet,
        cmd.ClearBets,
        cmd.RemoveBet,
        cmd.Rebet,
        cmd.Deal,
        cmd.Pass,
        cmd.TakeInsurance,
        cmd.DeclineInsurance,
        cmd.Hit,
        cmd.Stand,
        cmd.Double,
        cmd.Split,
        cmd.Surrender,
    }
)
_LATE: Final[dict[str, tuple[RejectionCode, str]]] = {
    "betting": ("not_betting_time", "the time to bet or pass ran out at"),
    "insurance": ("insurance_not_offered", "the time to decide on insurance ran out at"),
    "playing": ("not_your_turn", "the time for this decision ran out at"),
}


def _too_late(state: TableState) -> Rejection:
    assert state.deadline is not None
    code, message = _LATE.get(state.phase, _LATE["playing"])
    return Rejection(code=code, message=f"{message} {state.deadline.isoformat()}")


def _announce_changed_actions(r: _Round, before: TableState) -> None:
    """A command that is not a move can still change what the waiting hand may do (a deposit
    or a withdrawal during the turn makes a double affordable or not): say so, so that the
    last TurnStarted always lists the actions the table accepts. The deadline stays."""
    after = r.state
    if after.phase != "playing" or after.active is None or after.active != before.active:
        return
    box, hand = after.active
    if _options_mask(after, box, hand) != _options_mask(before, box, hand):
        _start_turn(r, box, hand, after.deadline)


# ---- checks shared with the legal-actions query -------------------------------------------


def _seated(state: TableState, player_id: str) -> Player:
    player = state.players.get(player_id)
    if player is None:
        raise _refuse("not_seated", f"{player_id} has no seat at this table")
    return player


def _own_box(state: TableState, player: Player, box: int) -> None:
    if not 0 <= box < len(state.boxes):
        raise _refuse("box_out_of_range", f"box {box} does not exist (0-{len(state.boxes) - 1})")
    if state.seat_of_box(box) != player.seat:
        raise _refuse("not_your_box", f"box {box} belongs to another seat")


def _check_amount(amount: int) -> None:
    if amount <= 0:
        raise _refuse("invalid_amount", f"amounts are positive whole minor units, not {amount}")


def _check_balance_limit(player: Player, amount: int) -> None:
    if over_balance_limit(player.balance, amount):
        raise _refuse(
            "balance_limit",
            f"a balance may not exceed {MAX_BALANCE} minor units; "
            f"{player.balance} + {amount} would",
        )


def _unaffordable(player: Player, amount: int, what: str) -> Refused | None:
    if amount > player.balance:
        return _refuse(
            "insufficient_funds", f"{what} needs {amount}, the balance is {player.balance}"
        )
    return None


def _check_currency(state: TableState, currency: str | None) -> None:
    if currency is not None and currency != state.rules.currency:
        raise _refuse(
            "currency_mismatch", f"this table plays in {state.rules.currency}, not {currency}"
        )


def _check_affordable(player: Player, amount: int, what: str) -> None:
    _require(_unaffordable(player, amount, what))


def _check_bet_maximum(state: TableState, box_total: int) -> None:
    if box_total > state.rules.max_bet:
        raise _refuse("bet_above_maximum", f"the maximum bet is {state.rules.max_bet}")


def _under_minimum(state: TableState, player_id: str) -> list[int]:
    """The player's boxes whose stack of chips is still under the table minimum."""
    return [i for i in state.boxes_of(player_id) if state.boxes[i].bet < state.rules.min_bet]


def _check_bet_minimum(state: TableState, player_id: str) -> None:
    """The surrender page: "You may need several chips to reach the desired bet amount": the
    minimum binds the stack on each box when the player deals, not each chip."""
    short = _under_minimum(state, player_id)
    if short:
        box = short[0]
        bet = state.boxes[box].bet
        raise _refuse(
            "bet_below_minimum",
            f"box {box} holds {bet}, under the minimum bet of {state.rules.min_bet}: add at "
            f"least {state.rules.min_bet - bet} or take it back",
        )


def _check_betting(state: TableState, player: Player) -> None:
    if state.phase != "betting" or state.hands_in_play:
        raise _refuse("not_betting_time", "bets are closed until this round is settled")
    if player.ready or player.passed:
        raise _refuse("already_dealt_in", "you have already chosen Deal or Pass this round")


def _check_shoe(state: TableState) -> None:
    if needs_shuffle(state):
        raise _refuse("shoe_not_ready", "the shoe must be shuffled before the next deal")


def turn_hand(state: TableState, player: Player, box: int, hand: int | None) -> Hand:
    """The hand a play command acts on; it must be the hand whose turn it is."""
    _own_box(state, player, box)
    if state.phase != "playing" or state.active is None:
        raise _refuse("not_your_turn", "no hand is waiting for a decision")
    active_box, active_hand = state.active
    if box != active_box or (hand is not None and hand != active_hand):
        raise _refuse("not_your_turn", f"it is the turn of box {active_box} hand {active_hand}")
    return state.boxes[box].hands[active_hand]


# The turn checks return their refusal rather than raise it: every TurnStarted asks all four
# (``hand_actions``), and most of them say no.


def hit_refusal(state: TableState, hand: Hand) -> Refused | None:
    if hand.status != "open" or best_total(hand.cards) >= 21:
        return _refuse("cannot_hit", "this hand takes no more cards")
    return None


def double_refusal(state: TableState, player: Player, hand: Hand) -> Refused | None:
    rules = state.rules
    if hand.status != "open" or len(hand.cards) != 2:
        return _refuse("cannot_double", "a double needs a hand of exactly two cards")
    if hand.from_split and not rules.double_after_split:
        return _refuse("cannot_double", "no double after a split at this table")
    if hand.split_aces:
        return _refuse("cannot_double", "split aces take one card only")
    if rules.double_on == "totals" and best_total(hand.cards) not in rules.double_totals:
        totals = rules.double_totals
        return _refuse(
            "cannot_double",
            lambda: f"double only on a total of {', '.join(str(t) for t in sorted(totals))}",
        )
    return _unaffordable(player, hand.stake, "a double")


def is_pair(state: TableState, cards: tuple[str, ...]) -> bool:
    if len(cards) != 2:
        return False
    if state.rules.split_by == "rank":
        return cards[0][0] == cards[1][0]
    return value_of(cards[0]) == value_of(cards[1])


def split_refusal(state: TableState, player: Player, box: int, hand: Hand) -> Refused | None:
    rules = state.rules
    if hand.status != "open" or not is_pair(state, hand.cards):
        pairing = "rank" if rules.split_by == "rank" else "value"
        return _refuse("cannot_split", f"a split needs two cards of the same {pairing}")
    if len(state.boxes[box].hands) > rules.max_splits:
        return _refuse("cannot_split", f"only {rules.max_splits} split(s) per box")
    return _unaffordable(player, hand.stake, "a split")


def surrender_refusal(state: TableState, box: int, hand: Hand) -> Refused | None:
    if not state.rules.late_surrender:
        return _refuse("cannot_surrender", "this table has no surrender")
    if hand.status != "open" or hand.from_split or len(hand.cards) != 2:
        return _refuse("cannot_surrender", "surrender only on the first two cards, before any play")
    if len(state.boxes[box].hands) != 1:
        return _refuse("cannot_surrender", "no surrender after a split")
    return None


def _require(refusal: Refused | None) -> None:
    if refusal is not None:
        raise refusal


def turn_options(state: TableState) -> frozenset[str]:
    """The actions open on the hand whose turn it is, from the same checks the decider makes
    but without deciding anything, as TurnStarted lists them (``legal.legal_actions`` asks
    ``decide`` itself, and the property tests check that the two agree). It does not read the
    clock: from a timed turn's deadline on, the decider refuses every move."""
    if state.active is None or state.phase != "playing":
        return frozenset()
    return _OPTION_SETS[_options_mask(state, *state.active)]


def hand_actions(state: TableState, box: int, hand: int) -> tuple[ev.TurnAction, ...]:
    """The decisions open on this hand if it were its turn now, as TurnStarted lists them."""
    return _OPTION_TUPLES[_options_mask(state, box, hand)]


def _options_mask(state: TableState, box_index: int, hand_index: int) -> int:
    box = state.boxes[box_index]
    assert box.player_id is not None
    player = state.players[box.player_id]
    hand = box.hands[hand_index]
    return (
        (hit_refusal(state, hand) is None)
        | (double_refusal(state, player, hand) is None) << 1
        | (split_refusal(state, player, box_index, hand) is None) << 2
        | (surrender_refusal(state, box_index, hand) is None) << 3
    )


# Every combination of the four optional actions, built once: every decision of a hand asks
# for its options, and an answer that is always the same object hashes once.
_OPTIONAL_ACTIONS: Final = ("hit", "double", "split", "surrender")  # bits 0-3 of the mask
_OPTION_SETS: Final = tuple(
    frozenset(["stand", *(name for bit, name in enumerate(_OPTIONAL_ACTIONS) if mask >> bit & 1)])
    for mask in range(16)
)
# The same sets as the tuples TurnStarted lists, in the order of ``events.TurnAction``.
_OPTION_TUPLES: Final[tuple[tuple[ev.TurnAction, ...], ...]] = tuple(
    tuple(a for a in get_args(ev.TurnAction) if a in options) for options in _OPTION_SETS
)


# ---- the table ----------------------------------------------------------------------------


def _open_table(r: _Round, c: cmd.OpenTable) -> None:
    if r.state.opened:
        raise _refuse("table_already_open", "the table is already open")
    base = PRESETS.get(c.variant)
    if base is None:
        known = ", ".join(sorted(PRESETS))
        raise _refuse("unknown_variant", f"no variant {c.variant!r}; known: {known}")
    if c.overrides.get("name", c.variant) != c.variant:  # history and audit show it
        raise _refuse("invalid_rules", "name: the variant's name is not a rule to override")
    try:
        rules = base.with_overrides(c.overrides) if c.overrides else base
    except ValidationError as error:
        raise _refuse("invalid_rules", in_one_line(error, "rules")) from None
    r.emit(facts.table_opened(rules=rules))


def _check_free_seat(state: TableState, seat: int) -> None:
    if not 0 <= seat < state.rules.seats:
        raise _refuse("seat_out_of_range", f"seats are 0-{state.rules.seats - 1}")
    if state.player_at(seat) is not None:
        raise _refuse("seat_taken", f"seat {seat} is taken")


def _sit_down(r: _Round, c: cmd.SitDown) -> None:
    if c.player_id in r.state.players:
        raise _refuse("already_seated", f"{c.player_id} is already seated")
    _check_free_seat(r.state, c.seat)
    r.emit(facts.seat_taken(player_id=c.player_id, seat=c.seat))


def _move_seat(r: _Round, c: cmd.MoveSeat) -> None:
    player = _seated(r.state, c.player_id)
    _check_free_seat(r.state, c.seat)
    # The multi-player page: "You may change your position on the table by clicking on the
    # desired spot between hands": not while any hand is played, nor with a bet of one's own out.
    if r.state.boxes_of(c.player_id) or r.state.hands_in_play:
        raise _refuse("round_in_progress", "change seats between rounds, with no bet out")
    r.emit(facts.seat_changed(player_id=c.player_id, from_seat=player.seat, to_seat=c.seat))


def _leave_table(r: _Round, c: cmd.LeaveTable) -> None:
    player = _seated(r.state, c.player_id)
    if any(r.state.boxes[i].hands for i in r.state.boxes_of(c.player_id)):
        raise _refuse("round_in_progress", "a hand in play must be finished first")
    _refund_bets(r, c.player_id, "left")
    balance = r.state.players[c.player_id].balance
    r.emit(facts.seat_left(player_id=c.player_id, seat=player.seat, balance_returned=balance))
    _deal_when_all_decided(r)


def _is_transfer(command: cmd.Command) -> bool:
    """A buy-in's deposit from the player's wallet: decided even at a table not yet open."""
    return isinstance(command, cmd.Deposit) and command.transfer is not None


def _deposit(r: _Round, c: cmd.Deposit) -> None:
    if c.transfer is not None:
        _transfer_deposit(r, c, c.transfer)
        return
    player = _seated(r.state, c.player_id)
    _check_amount(c.amount)
    _check_currency(r.state, c.currency)
    _check_balance_limit(player, c.amount)
    balance = player.balance + c.amount
    r.emit(facts.funds_deposited(player_id=c.player_id, amount=c.amount, balance_after=balance))


def _transfer_deposit(r: _Round, c: cmd.Deposit, transfer: str) -> None:
    """A buy-in's deposit is taken (``FundsDeposited`` with its transfer) or declined
    (``TransferDeclined``, the money goes back to the wallet), never simply refused: either
    way the table's log keeps the transfer, so a copy of it is never taken later. A wallet's
    buy-ins arrive in the order it numbered them (``domain.transfers``): one numbered at or
    below the last this table handled from that wallet is a copy."""
    state = r.state
    try:
        wallet, number = transfer_origin(transfer)
    except ValueError as error:
        raise _refuse("malformed", str(error)) from error
    last = state.buy_ins.get(wallet, 0)
    if number <= last:
        raise _refuse(
            "transfer_already_handled",
            f"buy-in {transfer} was already taken or declined here "
            f"(the last one from {wallet} was number {last})",
        )
    try:
        if not state.opened:
            raise _refuse("table_not_open", "the table has not been opened")
        if not state.rules.funded_by_wallet:
            raise _refuse(
                "unauthorized", "a single-player table is funded by the platform's Deposit"
            )
        player = _seated(state, c.player_id)
        _check_amount(c.amount)
        _check_currency(state, c.currency)
        _check_balance_limit(player, c.amount)
    except Refused as refused:
        r.emit(
            facts.transfer_declined(
                player_id=c.player_id,
                amount=c.amount,
                transfer=transfer,
                reason_code=refused.code,
                message=refused.message,
            )
        )
        return
    balance = player.balance + c.amount
    r.emit(
        facts.funds_deposited(
            player_id=c.player_id,
            amount=c.amount,
            balance_after=balance,
            transfer=transfer,
        )
    )


def _withdraw(r: _Round, c: cmd.Withdraw) -> None:
    player = _seated(r.state, c.player_id)
    _check_amount(c.amount)
    _check_affordable(player, c.amount, "the withdrawal")
    balance = player.balance - c.amount
    r.emit(facts.funds_withdrawn(player_id=c.player_id, amount=c.amount, balance_after=balance))


def _disconnect(r: _Round, c: cmd.Disconnect) -> None:
    player = _seated(r.state, c.player_id)
    if not player.connected:
        return
    r.emit(facts.player_disconnected(player_id=c.player_id))
    # The surrender page: "If the connection is terminated after placing a bet but before
    # pressing 'Deal' button the bet will be returned." A started hand waits for reconnection.
    if r.state.rules.refund_bets_on_disconnect and r.state.phase == "betting":
        _refund_bets(r, c.player_id, "disconnected")


def _reconnect(r: _Round, c: cmd.Reconnect) -> None:
    if not _seated(r.state, c.player_id).connected:
        r.emit(facts.player_reconnected(player_id=c.player_id))


def _shuffle_shoe(r: _Round, c: cmd.ShuffleShoe) -> None:
    state = r.state
    if state.hands_in_play:
        raise _refuse("round_in_progress", "the shoe is changed between rounds only")
    if not _is_permutation_of_decks(c.order, state.rules.decks):
        raise _refuse(
            "invalid_shoe", f"the order is not a permutation of {state.rules.decks} decks"
        )
    old = state.shoe
    if old is not None:
        r.emit(
            facts.shoe_retired(
                shoe=old.number,
                commitment=old.commitment,
                cards_dealt=old.position,
                order=old.order,
                salt=old.salt,
            )
        )
    r.emit(
        facts.shoe_shuffled(
            shoe=state.shoes_used + 1,
            commitment=commitment(c.order, c.salt),
            cards=len(c.order),
            order=c.order,
            salt=c.salt,
        )
    )


_CARD_INDEX: Final = {card: index for index, card in enumerate(fresh_shoe(1))}


def _is_permutation_of_decks(order: tuple[str, ...], decks: int) -> bool:
    """Each of the 52 cards exactly ``decks`` times: counted by index into a list (linear, no
    sort), which for the reshuffle-every-round variants runs every round."""
    counts = [0] * len(_CARD_INDEX)
    index = _CARD_INDEX
    for card in order:
        position = index.get(card, -1)
        if position < 0:
            return False
        counts[position] += 1
    return all(count == decks for count in counts)


# ---- betting ------------------------------------------------------------------------------


def _open_round_if_needed(r: _Round) -> None:
    if not r.state.round_open:
        r.emit(facts.round_opened(round=r.state.round + 1, betting_deadline=r.deadline()))


def _place_bet(r: _Round, player_id: str, box: int, amount: int) -> None:
    state = r.state
    player = state.players[player_id]
    box_total = state.boxes[box].bet + amount
    _check_bet_maximum(state, box_total)
    _check_affordable(player, amount, "the bet")
    _open_round_if_needed(r)
    r.emit(
        facts.bet_placed(
            round=r.state.round,
            player_id=player_id,
            box=box,
            amount=amount,
            box_total=box_total,
            balance_after=player.balance - amount,
        )
    )


def _bet(r: _Round, c: cmd.PlaceBet) -> None:
    player = _seated(r.state, c.player_id)
    _own_box(r.state, player, c.box)
    _check_betting(r.state, player)
    _check_amount(c.amount)
    _place_bet(r, c.player_id, c.box, c.amount)


def _refund_bets(r: _Round, player_id: str, reason: ev.RefundReason) -> None:
    for index in r.state.boxes_of(player_id):
        if not r.state.boxes[index].hands:
            _refund_box(r, player_id, index, reason)


def _refund_box(r: _Round, player_id: str, index: int, reason: ev.RefundReason) -> None:
    """The whole bet on a box not dealt goes back to its player, and the box is free."""
    bet = r.state.boxes[index].bet
    r.emit(
        facts.bet_refunded(
            round=r.state.round,
            player_id=player_id,
            box=index,
            amount=bet,
            reason=reason,
            balance_after=r.state.players[player_id].balance + bet,
        )
    )


def _clear_bets(r: _Round, c: cmd.ClearBets) -> None:
    player = _seated(r.state, c.player_id)
    _check_betting(r.state, player)
    if not r.state.boxes_of(c.player_id):
        raise _refuse("no_bets", "there is no bet to clear")
    _refund_bets(r, c.player_id, "cleared")


def _remove_bet(r: _Round, c: cmd.RemoveBet) -> None:
    """The surrender page: "To remove a bet completely or decrease its value, you should remove
    the chip or chips placed". Only before the deal (and before pressing Deal at a shared
    table). What stays may be under the table minimum, as a stack being built is: the minimum
    binds when the player deals."""
    state = r.state
    player = _seated(state, c.player_id)
    _own_box(state, player, c.box)
    _check_betting(state, player)
    bet = state.boxes[c.box].bet
    if bet == 0:
        raise _refuse("no_bets", f"there is no bet on box {c.box} to remove")
    amount = bet if c.amount is None else c.amount
    _check_amount(amount)
    if amount > bet:
        raise _refuse("invalid_amount", f"box {c.box} holds a bet of {bet}, not {amount}")
    left = bet - amount
    r.emit(
        facts.bet_refunded(
            round=state.round,
            player_id=c.player_id,
            box=c.box,
            amount=amount,
            box_total=left,
            reason="removed",
            balance_after=player.balance + amount,
        )
    )


def _request_deal(r: _Round, player_id: str) -> None:
    if not r.state.boxes_of(player_id):
        raise _refuse("no_bets", "place a bet before the deal")
    _check_bet_minimum(r.state, player_id)
    _check_shoe(r.state)
    r.emit(facts.deal_requested(round=r.state.round, player_id=player_id))
    _deal_when_all_decided(r)


def _deal(r: _Round, c: cmd.Deal) -> None:
    player = _seated(r.state, c.player_id)
    _check_betting(r.state, player)
    _request_deal(r, c.player_id)


def _rebet(r: _Round, c: cmd.Rebet) -> None:
    state = r.state
    player = _seated(state, c.player_id)
    if c.multiplier not in state.rules.rebet_multipliers:
        raise _refuse("rebet_not_offered", f"no rebet x{c.multiplier} at this table")
    _check_betting(state, player)
    if not player.last_bets:
        raise _refuse("no_previous_bet", "there is no previous bet to repeat")
    if state.boxes_of(c.player_id):
        raise _refuse("not_betting_time", "clear the bets on the table before a rebet")
    first_box = player.seat * state.rules.boxes_per_seat
    bets = [(first_box + offset, amount * c.multiplier) for offset, amount in player.last_bets]
    _check_affordable(player, sum(amount for _, amount in bets), "the rebet")
    for box, amount in bets:
        _place_bet(r, c.player_id, box, amount)
    if state.rules.rebet_deals:
        _request_deal(r, c.player_id)


def _pass(r: _Round, c: cmd.Pass) -> None:
    player = _seated(r.state, c.player_id)
    if r.state.rules.seats == 1:
        raise _refuse("pass_not_offered", "Pass is for tables shared by several players")
    _check_betting(r.state, player)
    if not r.state.round_open:
        raise _refuse("not_betting_time", "no round is open to pass")
    _refund_bets(r, c.player_id, "passed")
    r.emit(facts.player_passed(round=r.state.round, player_id=c.player_id))
    _deal_when_all_decided(r)


def _deal_when_all_decided(r: _Round) -> None:
    """Deal once every seated player has pressed Deal or Pass."""
    state = r.state
    if not state.round_open or state.phase != "betting":
        return
    if all(p.ready or p.passed for p in state.players.values()):
        _close_betting(r)


def _close_betting(r: _Round) -> None:
    state = r.state
    ready = [
        i
        for i, box in enumerate(state.boxes)
        if box.player_id is not None and state.players[box.player_id].ready
    ]
    if not ready:
        r.emit(facts.round_cancelled(round=state.round))
        return
    _check_shoe(state)
    assert state.shoe is not None
    r.emit(facts.deal_started(round=state.round, shoe=state.shoe.number, boxes=tuple(ready)))
    # Each box's first card, the dealer's first card, each box's second card, the dealer's
    # second card; the hole card (face down, no card in the event) is the first or the second.
    hole_first = state.rules.hole_card_first
    for index in ready:
        _deal_card(r, index, 0)
    _deal_dealer(r, face_up=not hole_first)
    for index in ready:
        _deal_card(r, index, 0)
    _deal_dealer(r, face_up=hole_first)
    _after_deal(r)


def _next_card(r: _Round) -> str:
    shoe = r.state.shoe
    assert shoe is not None
    return shoe.order[shoe.position]


def _deal_card(r: _Round, box: int, hand: int) -> None:
    card = _next_card(r)
    r.emit(facts.card_dealt(round=r.state.round, to="box", box=box, hand=hand, card=card))


def _deal_dealer(r: _Round, face_up: bool) -> None:
    card = _next_card(r) if face_up else None
    r.emit(facts.card_dealt(round=r.state.round, to="dealer", card=card, face_up=face_up))


# ---- insurance and the peek ---------------------------------------------------------------


def _after_deal(r: _Round) -> None:
    state = r.state
    upcard = state.upcard
    assert upcard is not None
    if is_ace(upcard) and state.rules.insurance:
        offered = []
        for index in state.boxes_in_play():
            box = state.boxes[index]
            assert box.player_id is not None
            stake = insurance_stake(box.bet)
            # "Insurance is not offered to you if you get a blackjack", nor when it can't be paid.
            if box.hands[0].status != "blackjack" and 0 < stake <= (
                state.players[box.player_id].balance
            ):
                offered.append(index)
        if offered:
            r.emit(
                facts.insurance_offered(
                    round=state.round,
                    boxes=tuple(offered),
                    deadline=r.deadline(),
                )
            )
            return
    _peek_then_play(r)


def _insurance_box(r: _Round, player_id: str, box: int) -> Player:
    player = _seated(r.state, player_id)
    _own_box(r.state, player, box)
    if r.state.phase != "insurance" or r.state.boxes[box].insurance != "offered":
        raise _refuse("insurance_not_offered", f"no insurance decision is open on box {box}")
    return player


def _take_insurance(r: _Round, c: cmd.TakeInsurance) -> None:
    player = _insurance_box(r, c.player_id, c.box)
    stake = insurance_stake(r.state.boxes[c.box].bet)
    _check_affordable(player, stake, "insurance")
    r.emit(
        facts.insurance_taken(
            round=r.state.round,
            player_id=c.player_id,
            box=c.box,
            amount=stake,
            balance_after=player.balance - stake,
        )
    )
    _peek_when_insurance_decided(r)


def _decline_insurance(r: _Round, c: cmd.DeclineInsurance) -> None:
    _insurance_box(r, c.player_id, c.box)
    r.emit(facts.insurance_declined(round=r.state.round, player_id=c.player_id, box=c.box))
    _peek_when_insurance_decided(r)


def _peek_when_insurance_decided(r: _Round) -> None:
    if not any(box.insurance == "offered" for box in r.state.boxes):
        _peek_then_play(r)


def _peek_then_play(r: _Round) -> None:
    state = r.state
    upcard = state.upcard
    assert upcard is not None
    rules = state.rules
    peeks = (is_ace(upcard) and rules.peek_on_ace) or (is_ten_value(upcard) and rules.peek_on_ten)
    if peeks:
        dealer_blackjack = is_natural(state.dealer)
        r.emit(facts.dealer_peeked(round=state.round, has_blackjack=dealer_blackjack))
        _settle_insurance(r)
        if dealer_blackjack:
            _reveal_and_settle(r, dealer_draws=False)
            return
    # The dealer is now known not to have a blackjack (peeked, or an upcard that cannot make
    # one): where the rules say so, a player's blackjack is paid before anyone plays.
    if rules.blackjack_paid_at_once and (peeks or not (is_ace(upcard) or is_ten_value(upcard))):
        _pay_blackjacks(r)
    _next_turn(r)


def _pay_blackjacks(r: _Round) -> None:
    """The surrender page: "If you are dealt Blackjack, you are immediately paid 1.5 times the
    placed bet" (the balance then covers a double or a split on another box)."""
    for index in r.state.boxes_in_play():
        for hand_index, hand in enumerate(r.state.boxes[index].hands):
            if hand.status == "blackjack":
                _settle_hand(r, index, hand_index, hand)


def _settle_insurance(r: _Round) -> None:
    state = r.state
    won = is_natural(state.dealer)
    for index, box in enumerate(state.boxes):
        if box.insurance != "taken" or box.player_id is None:
            continue
        payout = insurance_return(state.rules, box.insurance_stake) if won else 0
        balance = r.state.players[box.player_id].balance + payout
        r.emit(
            facts.insurance_settled(
                round=state.round,
                player_id=box.player_id,
                box=index,
                stake=box.insurance_stake,
                won=won,
                payout=payout,
                balance_after=balance,
            )
        )


# ---- the play -----------------------------------------------------------------------------


def _next_turn(r: _Round) -> None:
    """Ask for the next decision: on the hand that just moved while it stays open (after a hit
    or a split), else on the first open hand; the dealer plays when none is left."""
    state = r.state
    if state.active is not None:
        active_box, active_hand = state.active
        if state.boxes[active_box].hands[active_hand].status == "open":
            _start_turn(r, active_box, active_hand, state.deadline)  # one clock per hand
            return
    for index in state.boxes_in_play():
        for hand_index, hand in enumerate(state.boxes[index].hands):
            if hand.status == "open":
                _start_turn(r, index, hand_index, r.deadline())
                return
    live = any(h.status == "standing" for b in state.boxes for h in b.hands)
    _reveal_and_settle(r, dealer_draws=live)


def _start_turn(r: _Round, box: int, hand: int, deadline: datetime | None) -> None:
    state = r.state
    player_id = state.boxes[box].player_id
    assert player_id is not None
    r.emit(
        facts.turn_started(
            round=state.round,
            player_id=player_id,
            box=box,
            hand=hand,
            actions=hand_actions(state, box, hand),
            deadline=deadline,
        )
    )


def _play(r: _Round, c: cmd.HandCommand) -> tuple[Player, int, Hand]:
    player = _seated(r.state, c.player_id)
    hand = turn_hand(r.state, player, c.box, c.hand)
    assert r.state.active is not None
    return player, r.state.active[1], hand


def _hit(r: _Round, c: cmd.Hit) -> None:
    _, hand_index, hand = _play(r, c)
    _require(hit_refusal(r.state, hand))
    r.emit(facts.player_hit(round=r.state.round, player_id=c.player_id, box=c.box, hand=hand_index))
    _deal_card(r, c.box, hand_index)
    _next_turn(r)


def _stand(r: _Round, c: cmd.Stand) -> None:
    _, hand_index, hand = _play(r, c)
    _stand_hand(r, c.player_id, c.box, hand_index, hand)
    _next_turn(r)


def _stand_hand(r: _Round, player_id: str, box: int, hand_index: int, hand: Hand) -> None:
    r.emit(
        facts.player_stood(
            round=r.state.round,
            player_id=player_id,
            box=box,
            hand=hand_index,
            total=best_total(hand.cards),
        )
    )


class _StakeEvent(Protocol):
    """``facts.hand_doubled`` or ``facts.hand_split``: the same fields."""

    def __call__(
        self, *, round: int, player_id: str, box: int, hand: int, amount: int, balance_after: int
    ) -> ev.HandDoubled | ev.HandSplit: ...


def _stake_again(
    r: _Round,
    c: cmd.HandCommand,
    event: _StakeEvent,
    *,
    player: Player,
    hand_index: int,
    hand: Hand,
) -> None:
    """A double or a split: the hand's stake once more, from the balance."""
    r.emit(
        event(
            round=r.state.round,
            player_id=c.player_id,
            box=c.box,
            hand=hand_index,
            amount=hand.stake,
            balance_after=player.balance - hand.stake,
        )
    )


def _double(r: _Round, c: cmd.Double) -> None:
    player, hand_index, hand = _play(r, c)
    _require(double_refusal(r.state, player, hand))
    _stake_again(r, c, facts.hand_doubled, player=player, hand_index=hand_index, hand=hand)
    _deal_card(r, c.box, hand_index)
    _next_turn(r)


def _split(r: _Round, c: cmd.Split) -> None:
    player, hand_index, hand = _play(r, c)
    _require(split_refusal(r.state, player, c.box, hand))
    _stake_again(r, c, facts.hand_split, player=player, hand_index=hand_index, hand=hand)
    _deal_card(r, c.box, hand_index)
    _deal_card(r, c.box, hand_index + 1)
    _next_turn(r)


def _surrender(r: _Round, c: cmd.Surrender) -> None:
    _, hand_index, hand = _play(r, c)
    _require(surrender_refusal(r.state, c.box, hand))
    r.emit(
        facts.hand_surrendered(
            round=r.state.round,
            player_id=c.player_id,
            box=c.box,
            hand=hand_index,
        )
    )
    _next_turn(r)


# ---- the clock ----------------------------------------------------------------------------


def _expire_timers(r: _Round, c: cmd.ExpireTimers) -> None:
    state = r.state
    if state.deadline is None or r.now < state.deadline:
        return
    if state.phase == "betting":
        _check_shoe(state)
        # The multi-player page: "If you do not bet or pass within 15 seconds ... you will be
        # automatically excluded from that particular hand." A player who did bet is dealt in;
        # a stack still under the table minimum is not a bet yet, and goes back.
        for player in list(state.players.values()):
            if player.ready or player.passed:
                continue
            pid = player.player_id
            short = _under_minimum(r.state, pid)
            dealt_in = len(r.state.boxes_of(pid)) > len(short)
            r.emit(
                facts.player_timed_out(
                    round=state.round,
                    player_id=pid,
                    phase="betting",
                    action="dealt_in" if dealt_in else "left_out",
                )
            )
            for index in short:
                _refund_box(r, pid, index, "timed_out")
            if dealt_in:
                r.emit(facts.deal_requested(round=state.round, player_id=pid))
        _close_betting(r)
    elif state.phase == "insurance":
        for index, box in enumerate(state.boxes):
            if box.insurance != "offered" or box.player_id is None:
                continue
            r.emit(
                facts.player_timed_out(
                    round=state.round,
                    player_id=box.player_id,
                    phase="insurance",
                    action="declined_insurance",
                    box=index,
                )
            )
            r.emit(facts.insurance_declined(round=state.round, player_id=box.player_id, box=index))
        _peek_then_play(r)
    elif state.phase == "playing" and state.active is not None:
        box_index, hand_index = state.active
        box = state.boxes[box_index]
        assert box.player_id is not None
        r.emit(
            facts.player_timed_out(
                round=state.round,
                player_id=box.player_id,
                phase="playing",
                action="stood",
                box=box_index,
                hand=hand_index,
            )
        )
        _stand_hand(r, box.player_id, box_index, hand_index, box.hands[hand_index])
        _next_turn(r)


# ---- the dealer and the settlement --------------------------------------------------------


def _reveal_and_settle(r: _Round, dealer_draws: bool) -> None:
    state = r.state
    hole = state.hole_card
    assert hole is not None
    r.emit(facts.dealer_hole_card_revealed(round=state.round, card=hole))
    _settle_insurance(r)  # insurance not yet settled by a peek is settled on the hole card
    if dealer_draws:
        hits_soft_17 = r.state.rules.dealer_hits_soft_17
        while True:
            dealer_total = total(r.state.dealer)
            if dealer_total.best > 17 or (
                dealer_total.best == 17 and not (dealer_total.soft and hits_soft_17)
            ):
                break
            _deal_dealer(r, face_up=True)
    _settle_round(r)


def _hand_result(r: _Round, hand: Hand) -> tuple[ev.Outcome, int]:
    rules = r.state.rules
    dealer = r.state.dealer
    dealer_blackjack = is_natural(dealer)
    dealer_total = best_total(dealer)
    if hand.status == "surrendered":
        return "surrender", surrender_refund(hand.stake)
    if hand.status == "bust":
        return "bust", 0
    if hand.status == "blackjack":
        if dealer_blackjack:
            return "push", hand.stake
        return "blackjack", hand.stake + blackjack_winnings(rules, hand.stake)
    if dealer_blackjack:
        return "lose", 0
    mine = best_total(hand.cards)
    if dealer_total > 21 or mine > dealer_total:
        return "win", 2 * hand.stake
    if mine == dealer_total:
        return "push", hand.stake
    return "lose", 0


def _settle_hand(r: _Round, box: int, hand_index: int, hand: Hand) -> tuple[ev.Outcome, int]:
    """Pay one hand: its ``HandSettled``; returns (outcome, payout)."""
    outcome, payout = _hand_result(r, hand)
    player_id = r.state.boxes[box].player_id
    assert player_id is not None
    r.emit(
        facts.hand_settled(
            round=r.state.round,
            player_id=player_id,
            box=box,
            hand=hand_index,
            outcome=outcome,
            total=best_total(hand.cards),
            stake=hand.stake,
            payout=payout,
            balance_after=r.state.players[player_id].balance + payout,
        )
    )
    return outcome, payout


def _settle_round(r: _Round) -> None:
    state = r.state
    dealer_blackjack = is_natural(state.dealer)
    wagered: dict[str, int] = {}
    paid: dict[str, int] = {}
    messages: list[ev.BoxMessage] = []
    for index in state.boxes_in_play():
        box = state.boxes[index]
        player_id = box.player_id
        assert player_id is not None
        box_wagered = sum(h.stake for h in box.hands) + box.insurance_stake
        box_paid = box.insurance_paid  # settled at the peek or on the hole card, just before
        outcomes = []
        for hand_index, hand in enumerate(box.hands):
            if hand.settled:  # a blackjack paid at once: counted in the round, not paid again
                outcome, payout = _hand_result(r, hand)
            else:
                outcome, payout = _settle_hand(r, index, hand_index, hand)
            outcomes.append(outcome)
            box_paid += payout
        # The mini-h17 page: "After split, if you win one hand & lose another hand you will be
        # shown a message 'Break Even' which indicates that you don't win or lose anything."
        if (
            state.rules.break_even_message
            and len(box.hands) > 1
            and "win" in outcomes
            and ("lose" in outcomes or "bust" in outcomes)
            and box_paid == box_wagered
        ):
            messages.append(facts.box_message(box=index, message="Break Even"))
        wagered[player_id] = wagered.get(player_id, 0) + box_wagered
        paid[player_id] = paid.get(player_id, 0) + box_paid
    results = tuple(
        facts.player_round_result(
            player_id=pid,
            wagered=wagered[pid],
            paid=paid[pid],
            net=paid[pid] - wagered[pid],
            balance_after=r.state.players[pid].balance,
        )
        for pid in wagered
    )
    r.emit(
        facts.round_settled(
            round=state.round,
            dealer_total=best_total(state.dealer),
            dealer_blackjack=dealer_blackjack,
            results=results,
            messages=tuple(messages),
        )
    )


_DECIDERS: Final[dict[type[cmd.Command], Callable[[_Round, Any], None]]] = {
    cmd.OpenTable: _open_table,
    cmd.SitDown: _sit_down,
    cmd.MoveSeat: _move_seat,
    cmd.LeaveTable: _leave_table,
    cmd.Deposit: _deposit,
    cmd.Withdraw: _withdraw,
    cmd.Disconnect: _disconnect,
    cmd.Reconnect: _reconnect,
    cmd.ShuffleShoe: _shuffle_shoe,
    cmd.ExpireTimers: _expire_timers,
    cmd.PlaceBet: _bet,
    cmd.ClearBets: _clear_bets,
    cmd.RemoveBet: _remove_bet,
    cmd.Deal: _deal,
    cmd.Rebet: _rebet,
    cmd.Pass: _pass,
    cmd.TakeInsurance: _take_insurance,
    cmd.DeclineInsurance: _decline_insurance,
    cmd.Hit: _hit,
    cmd.Stand: _stand,
    cmd.Double: _double,
    cmd.Split: _split,
    cmd.Surrender: _surrender,
}
