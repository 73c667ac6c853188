"""The checks a decision makes before it changes anything: the seat, the box, the amount, the
balance, the currency, the bet limits, the betting time and the shoe. Each raises ``Refused``."""

from __future__ import annotations

from blackjack.domain.commands import unprintable
from blackjack.domain.decisions.draft import Refused, refuse
from blackjack.domain.payouts import (
    MAX_BALANCE,
    over_balance_limit,
)
from blackjack.domain.shoe import needs_shuffle
from blackjack.domain.state import Player, TableState


def seated(state: TableState, player_id: str) -> Player:
    player = state.players.get(player_id)
    if player is None:
        # quoted with escapes where it holds what no seat's new id may: it reaches people
        shown = player_id if unprintable(player_id) is None else ascii(player_id)
        raise refuse("not_seated", f"{shown} has no seat at this table")
    return player


def check_not_suspended(state: TableState, what: str) -> None:
    """No new wager and no new player while the operator has the game disabled."""
    if state.suspended:
        raise refuse("table_suspended", f"the operator has suspended this table: {what}")


def own_box(state: TableState, player: Player, box: int) -> None:
    if not 0 <= box < len(state.boxes):
        raise refuse("box_out_of_range", f"box {box} does not exist (0-{len(state.boxes) - 1})")
    if state.seat_of_box(box) != player.seat:
        per_seat = state.rules.boxes_per_seat
        first = player.seat * per_seat
        yours = f"box {first}" if per_seat == 1 else f"boxes {first}-{first + per_seat - 1}"
        raise refuse(
            "not_your_box",
            f"box {box} belongs to seat {state.seat_of_box(box)}; "
            f"seat {player.seat} bets on {yours}",
        )


def check_amount(amount: int) -> None:
    if amount <= 0:
        raise refuse("invalid_amount", f"amounts are positive whole minor units, not {amount}")


def check_balance_limit(player: Player, amount: int) -> None:
    if over_balance_limit(player.balance, amount):
        raise refuse(
            "balance_limit",
            f"a balance may not exceed {MAX_BALANCE} minor units; "
            f"{player.balance} + {amount} would",
        )


def unaffordable(player: Player, amount: int, what: str) -> Refused | None:
    if amount > player.balance:
        return refuse(
            "insufficient_funds", f"{what} needs {amount}, the balance is {player.balance}"
        )
    return None


def check_currency(state: TableState, currency: str | None) -> None:
    if currency is not None and currency != state.rules.currency:
        raise refuse(
            "currency_mismatch", f"this table plays in {state.rules.currency}, not {currency}"
        )


def check_affordable(player: Player, amount: int, what: str) -> None:
    require(unaffordable(player, amount, what))


def check_bet_maximum(state: TableState, box_total: int) -> None:
    if box_total > state.rules.max_bet:
        raise refuse("bet_above_maximum", f"the maximum bet is {state.rules.max_bet}")


def under_minimum(state: TableState, player_id: str) -> list[int]:
    """The player's boxes whose stack of chips is still under the table minimum."""
    return [i for i in state.boxes_of(player_id) if state.boxes[i].bet < state.rules.min_bet]


def check_bet_minimum(state: TableState, player_id: str) -> None:
    """The surrender page: "You may need several chips to reach the desired bet amount": the
    minimum binds the stack on each box when the player deals, not each chip."""
    short = under_minimum(state, player_id)
    if short:
        box = short[0]
        bet = state.boxes[box].bet
        raise refuse(
            "bet_below_minimum",
            f"box {box} holds {bet}, under the minimum bet of {state.rules.min_bet}: add at "
            f"least {state.rules.min_bet - bet} or take it back",
        )


def check_betting(state: TableState, player: Player) -> None:
    if state.phase != "betting" or state.hands_in_play:
        raise refuse("not_betting_time", "bets are closed until this round is settled")
    if player.ready or player.passed:
        raise refuse("already_dealt_in", "you have already chosen Deal or Pass this round")


def check_shoe(state: TableState) -> None:
    if needs_shuffle(state):
        raise refuse("shoe_not_ready", "the shoe must be shuffled before the next deal")


def require(refusal: Refused | None) -> None:
    if refusal is not None:
        raise refusal
