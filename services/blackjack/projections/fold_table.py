"""Folding a table's own events into its read model: the table opened, seats taken, changed
and left, money paid in and taken out at the table, connections, suspensions and shoes.
``TABLE_HANDLERS`` maps each such event type to its rule (``projector.StreamProjection``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from blackjack.domain import events as ev
from blackjack.domain.rules import RECORDED, Rules
from blackjack.messages.wire import SealedShoeShuffled
from blackjack.projections.views import Account, ProjectionError, ShoeView, Suspension

if TYPE_CHECKING:
    from blackjack.projections.projector import Handler, StreamProjection


def _table_opened(p: StreamProjection, e: ev.TableOpened, at: datetime) -> None:
    view = p.view
    if view.opened:
        raise ProjectionError(f"{view.stream_id} opened twice")
    view.opened = True
    view.variant = e.rules.name
    view.currency = e.rules.currency
    view.rules = e.rules.model_dump(mode="json")


def _seat_taken(p: StreamProjection, e: ev.SeatTaken, at: datetime) -> None:
    account = p.accounts.get(e.player_id)
    if account is None:
        rules = Rules.model_validate(p.view.rules or {}, context=RECORDED)
        account = Account(
            stream_id=p.view.stream_id,
            player_id=e.player_id,
            currency=p.view.currency or "",
            funded_by_wallet=rules.funded_by_wallet,
        )
        p.accounts[e.player_id] = account
    p.accounts_dirty.add(e.player_id)
    account.seat = e.seat
    account.seated = True
    account.connected = True
    _back_in(account)


def _back_in(account: Account) -> None:
    """Seated again, or a bet or a pass: the player does not sit out (and is known not to)."""
    account.sitting_out = False
    account.rounds_sat_out = 0


def _seat_changed(p: StreamProjection, e: ev.SeatChanged, at: datetime) -> None:
    p.account(e.player_id).seat = e.to_seat


def _seat_left(p: StreamProjection, e: ev.SeatLeft, at: datetime) -> None:
    account = p.account(e.player_id)
    account.cashed_out += e.balance_returned
    _paid_out(account, e.balance_returned, at)
    account.available = 0
    p.moved_at_the_table(e.player_id, -e.balance_returned, 0)
    account.seat = None
    account.seated = False
    _back_in(account)  # the decider forgets the player; seated again, they start afresh


def _paid_out(account: Account, amount: int, at: datetime) -> None:
    """A payout the handler sends on to the player's wallet as a ``CashOut`` (a table the
    wallet funds; elsewhere it goes back to the platform): its time, for the money in transit."""
    if account.funded_by_wallet and amount > 0:
        account.paid_out_at = at


def _funds_deposited(p: StreamProjection, e: ev.FundsDeposited, at: datetime) -> None:
    account = p.account(e.player_id)
    account.deposited += e.amount
    account.available = e.balance_after
    p.moved_at_the_table(e.player_id, e.amount, e.balance_after)


def _transfer_declined(p: StreamProjection, e: ev.TransferDeclined, at: datetime) -> None:
    """No money moved: the wallet's view shows the refund."""


def _money_command_refused(p: StreamProjection, e: ev.MoneyCommandRefused, at: datetime) -> None:
    """No money moved (the handler keeps the refused command's id)."""


def _funds_withdrawn(p: StreamProjection, e: ev.FundsWithdrawn, at: datetime) -> None:
    account = p.account(e.player_id)
    account.withdrawn += e.amount
    _paid_out(account, e.amount, at)
    account.available = e.balance_after
    p.moved_at_the_table(e.player_id, -e.amount, e.balance_after)


def _connection(
    p: StreamProjection, e: ev.PlayerDisconnected | ev.PlayerReconnected, at: datetime
) -> None:
    p.account(e.player_id).connected = isinstance(e, ev.PlayerReconnected)


def _table_suspended(p: StreamProjection, e: ev.TableSuspended, at: datetime) -> None:
    p.view.suspended = Suspension(reason=e.reason, since=at)


def _table_resumed(p: StreamProjection, e: ev.TableResumed, at: datetime) -> None:
    p.view.suspended = None


def _shoe_shuffled(p: StreamProjection, e: SealedShoeShuffled, at: datetime) -> None:
    p.view.shoe = ShoeView(shoe=e.shoe, commitment=e.commitment, cards=e.cards)


def _shoe_retired(p: StreamProjection, e: ev.ShoeRetired, at: datetime) -> None:
    p.view.shoe = None


TABLE_HANDLERS: dict[type[BaseModel], Handler] = {
    ev.TableOpened: _table_opened,
    ev.SeatTaken: _seat_taken,
    ev.SeatChanged: _seat_changed,
    ev.SeatLeft: _seat_left,
    ev.FundsDeposited: _funds_deposited,
    ev.TransferDeclined: _transfer_declined,
    ev.FundsWithdrawn: _funds_withdrawn,
    ev.MoneyCommandRefused: _money_command_refused,
    ev.PlayerDisconnected: _connection,
    ev.PlayerReconnected: _connection,
    ev.TableSuspended: _table_suspended,
    ev.TableResumed: _table_resumed,
    SealedShoeShuffled: _shoe_shuffled,
    ev.ShoeRetired: _shoe_retired,
}
