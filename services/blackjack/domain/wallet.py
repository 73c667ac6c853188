"""A player's wallet: the one stream that holds the player's money between tables.

A multi-seat table cannot take money straight from the platform without two writers for one
balance (a player may sit at several tables). So the platform pays into the wallet, and a
*buy-in* moves money from the wallet to one table: the wallet debits first (``BuyInSent``),
the table then credits the seat (a table ``Deposit``), and the wallet closes the transfer when
the table confirms it (``BuyInCompleted``) or takes the money back when the table refuses it
(``BuyInRefunded``). Money leaving a table (``SeatLeft.balance_returned``, a table
``Withdraw``) comes back as ``CashOutReceived``. The wallet is the single writer of its
balance, so concurrent buy-ins can never spend it twice.

Pure like the table decider: ``decide_wallet(state, command) -> events | Rejection``,
``evolve_wallet(state, event) -> state``. The command handler carries the steps between the
streams; ``ConfirmBuyIn``, ``RefundBuyIn`` and ``CashOut`` are issued by the service only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from blackjack.domain.commands import MAX_INT, POSITIVE_AMOUNT, BoundedInt
from blackjack.domain.errors import CorruptLog
from blackjack.domain.payouts import MAX_BALANCE, over_balance_limit
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.rules import DEFAULT_CURRENCY, Currency

WALLET_STREAM_PREFIX = "wallet:"
STREAM_ID_PATTERN = r"^[A-Za-z0-9._:@\-]+$"


def wallet_stream(player_id: str) -> str:
    """The id of the player's wallet stream (the Kafka key of its commands and events)."""
    return f"{WALLET_STREAM_PREFIX}{player_id}"


MAX_STREAM_ID = 128
"""The longest stream id (the commands' envelopes refuse longer ones)."""


def has_wallet_stream(player_id: str) -> bool:
    """Whether ``wallet:<player_id>`` is a stream id commands can be sent to: a player id with
    a space, or longer than 121 characters, names none, so no money can reach such a player
    at a table funded from wallets."""
    stream_id = wallet_stream(player_id)
    fits = len(stream_id) <= MAX_STREAM_ID
    return fits and re.fullmatch(STREAM_ID_PATTERN, stream_id) is not None


def is_wallet_stream(stream_id: str) -> bool:
    return stream_id.startswith(WALLET_STREAM_PREFIX)


# ---- commands -----------------------------------------------------------------------------


class WalletCommand(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    player_id: str = Field(min_length=1, max_length=128)


class WalletDeposit(WalletCommand):
    """The platform pays money in. A wallet holds one currency: its first deposit's."""

    type: Literal["WalletDeposit"] = "WalletDeposit"
    amount: BoundedInt = Field(
        description="positive minor units; refused (balance_limit) if the wallet's balance "
        "would pass 10^15",
        json_schema_extra=POSITIVE_AMOUNT,
    )
    currency: Currency = DEFAULT_CURRENCY


class WalletWithdraw(WalletCommand):
    """The platform pays money out."""

    type: Literal["WalletWithdraw"] = "WalletWithdraw"
    amount: BoundedInt = Field(
        description="positive minor units", json_schema_extra=POSITIVE_AMOUNT
    )


class BuyIn(WalletCommand):
    """Move money from the wallet to the player's seat at a table."""

    type: Literal["BuyIn"] = "BuyIn"
    table_id: str = Field(
        min_length=1,
        max_length=128,
        pattern=STREAM_ID_PATTERN,
        description="the table's stream id: never a wallet's (`wallet:...`)",
        # the validator below, said in the schema too
        json_schema_extra={"not": {"pattern": f"^{WALLET_STREAM_PREFIX}"}},
    )
    amount: BoundedInt = Field(
        description="positive minor units", json_schema_extra=POSITIVE_AMOUNT
    )

    @field_validator("table_id")
    @classmethod
    def _a_table(cls, table_id: str) -> str:
        if is_wallet_stream(table_id):
            raise ValueError("a buy-in goes to a table, not to a wallet")
        return table_id


class ConfirmBuyIn(WalletCommand):
    """The table credited the seat (service only)."""

    type: Literal["ConfirmBuyIn"] = "ConfirmBuyIn"
    transfer: BoundedInt


class RefundBuyIn(WalletCommand):
    """The table refused the buy-in: the money comes back (service only)."""

    type: Literal["RefundBuyIn"] = "RefundBuyIn"
    transfer: BoundedInt
    reason: RejectionCode = Field(
        description="why the table declined it: its TransferDeclined's reason_code"
    )


class CashOut(WalletCommand):
    """Money a table paid back out to the player (service only)."""

    type: Literal["CashOut"] = "CashOut"
    table_id: str = Field(min_length=1, max_length=128)
    amount: BoundedInt
    table_sequence: StrictInt | None = Field(
        None,
        ge=1,
        le=MAX_INT,
        description="the sequence number of the table event that paid the money out; a "
        "cash-out at or below the last one the wallet received from that table is a copy. Set "
        "by the service only, from the signed command's bj_transfer header (absent from "
        "cash-outs sent by older handlers)",
    )


AnyWalletCommand = WalletDeposit | WalletWithdraw | BuyIn | ConfirmBuyIn | RefundBuyIn | CashOut
"""Every command of a wallet stream."""

WALLET_COMMAND_TYPES: tuple[type[WalletCommand], ...] = get_args(AnyWalletCommand)
SERVICE_ONLY_WALLET_COMMANDS: tuple[type[WalletCommand], ...] = (
    ConfirmBuyIn,
    RefundBuyIn,
    CashOut,
)

# ---- events -------------------------------------------------------------------------------


class WalletEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    version: int = 1
    player_id: str


class WalletDeposited(WalletEvent):
    type: Literal["WalletDeposited"] = "WalletDeposited"
    amount: int
    balance_after: int
    currency: str = DEFAULT_CURRENCY


class WalletWithdrawn(WalletEvent):
    type: Literal["WalletWithdrawn"] = "WalletWithdrawn"
    amount: int
    balance_after: int


class WalletCommandRefused(WalletEvent):
    """The platform's ``WalletDeposit`` or ``WalletWithdraw``, or a player's ``BuyIn``, that
    the wallet refused (``insufficient_funds``, ``currency_mismatch``...): no money moves.
    Recorded so that the wallet keeps the command's id (its causation) for the money
    retention: a copy sent after its answer has left the idempotency window is refused
    again, never decided a second time (``domain.platform_money``)."""

    type: Literal["WalletCommandRefused"] = "WalletCommandRefused"
    command: Literal["WalletDeposit", "WalletWithdraw", "BuyIn"] = Field(
        description="the command refused"
    )
    amount: int
    reason_code: RejectionCode = Field(description="the rejection code it was answered with")
    message: str = Field(description="the rejection's message, as it was answered")


class BuyInSent(WalletEvent):
    """The wallet is debited; the money is on its way to the table (transfer ``transfer``)."""

    type: Literal["BuyInSent"] = "BuyInSent"
    transfer: int
    table_id: str
    amount: int
    balance_after: int
    currency: str = Field(DEFAULT_CURRENCY, description="the wallet's; the table checks it")


class BuyInCompleted(WalletEvent):
    type: Literal["BuyInCompleted"] = "BuyInCompleted"
    transfer: int
    table_id: str
    amount: int


class BuyInRefunded(WalletEvent):
    type: Literal["BuyInRefunded"] = "BuyInRefunded"
    transfer: int
    table_id: str
    amount: int
    reason: RejectionCode = Field(
        description="why the table declined the buy-in: its TransferDeclined's reason_code "
        "(table_not_open, unauthorized, not_seated, table_suspended, invalid_amount, "
        "currency_mismatch or balance_limit); a refund written before tables recorded "
        "TransferDeclined holds the rejection code the table refused the deposit with"
    )
    balance_after: int


class CashOutReceived(WalletEvent):
    """Version 2 added ``table_sequence``, the table event that paid the money out; a
    version 1 event is upcast on read with ``table_sequence: null`` (not known)."""

    version: int = 2
    type: Literal["CashOutReceived"] = "CashOutReceived"
    table_id: str
    amount: int
    balance_after: int
    table_sequence: int | None = Field(
        None, ge=1, description="the table event that paid it out; null if not known"
    )


AnyWalletEvent = (
    WalletDeposited
    | WalletWithdrawn
    | WalletCommandRefused
    | BuyInSent
    | BuyInCompleted
    | BuyInRefunded
    | CashOutReceived
)
"""Every event of a wallet stream."""

WALLET_EVENT_TYPES: tuple[type[WalletEvent], ...] = get_args(AnyWalletEvent)

# ---- state --------------------------------------------------------------------------------


class PendingBuyIn(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    transfer: int
    table_id: str
    amount: int


class WalletState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    balance: int = 0
    currency: str | None = Field(None, description="set by the first deposit")
    transfers: int = Field(0, description="buy-ins sent so far; the next one gets this + 1")
    pending: tuple[PendingBuyIn, ...] = ()
    cashed_out: dict[str, int] = Field(
        default_factory=dict,
        description="per table, the sequence of the table event whose cash-out the wallet "
        "received last: a table's cash-outs arrive in the order of its events, so one at or "
        "below it is a copy. One number per table, however many cash-outs",
    )

    def pending_transfer(self, transfer: int) -> PendingBuyIn | None:
        return next((p for p in self.pending if p.transfer == transfer), None)


INITIAL_WALLET = WalletState()

WalletDecision = list[WalletEvent] | Rejection

# ---- decide -------------------------------------------------------------------------------


def _invalid_amount(amount: int) -> Rejection | None:
    if amount <= 0:
        return Rejection(
            code="invalid_amount", message=f"amounts are positive whole minor units, not {amount}"
        )
    return None


def _over_limit(state: WalletState, amount: int) -> Rejection | None:
    if over_balance_limit(state.balance, amount):
        return Rejection(
            code="balance_limit",
            message=f"a wallet may not hold more than {MAX_BALANCE} minor units; "
            f"{state.balance} + {amount} would",
        )
    return None


def _short(state: WalletState, amount: int, what: str) -> Rejection | None:
    if amount > state.balance:
        return Rejection(
            code="insufficient_funds",
            message=f"{what} needs {amount}, the wallet holds {state.balance}",
        )
    return None


def _other_currency(state: WalletState, currency: str) -> Rejection | None:
    if state.currency is not None and currency != state.currency:
        return Rejection(
            code="currency_mismatch",
            message=f"this wallet holds {state.currency}, not {currency}",
        )
    return None


def _received(state: WalletState, command: CashOut) -> Rejection | None:
    """A copy of a cash-out already received: its table event is not after the last one."""
    last = state.cashed_out.get(command.table_id, 0)
    if command.table_sequence is not None and command.table_sequence <= last:
        return Rejection(
            code="transfer_already_handled",
            message=f"the cash-out of {command.table_id} event {command.table_sequence} was "
            f"already received (the last one received was of its event {last})",
        )
    return None


def decide_wallet(state: WalletState, command: WalletCommand) -> WalletDecision:
    pid = command.player_id
    if isinstance(command, WalletDeposit):
        refused = (
            _invalid_amount(command.amount)
            or _over_limit(state, command.amount)
            or _other_currency(state, command.currency)
        )
        return refused or [
            WalletDeposited(
                player_id=pid,
                amount=command.amount,
                balance_after=state.balance + command.amount,
                currency=command.currency,
            )
        ]
    if isinstance(command, WalletWithdraw):
        refused = _invalid_amount(command.amount) or _short(state, command.amount, "withdrawal")
        return refused or [
            WalletWithdrawn(
                player_id=pid, amount=command.amount, balance_after=state.balance - command.amount
            )
        ]
    if isinstance(command, BuyIn):
        refused = _invalid_amount(command.amount) or _short(state, command.amount, "the buy-in")
        return refused or [
            BuyInSent(
                player_id=pid,
                transfer=state.transfers + 1,
                table_id=command.table_id,
                amount=command.amount,
                balance_after=state.balance - command.amount,
                currency=state.currency or DEFAULT_CURRENCY,
            )
        ]
    if isinstance(command, ConfirmBuyIn | RefundBuyIn):
        pending = state.pending_transfer(command.transfer)
        if pending is None:
            return Rejection(
                code="unknown_transfer", message=f"buy-in {command.transfer} is not pending"
            )
        if isinstance(command, ConfirmBuyIn):
            return [
                BuyInCompleted(
                    player_id=pid,
                    transfer=pending.transfer,
                    table_id=pending.table_id,
                    amount=pending.amount,
                )
            ]
        return [
            BuyInRefunded(
                player_id=pid,
                transfer=pending.transfer,
                table_id=pending.table_id,
                amount=pending.amount,
                reason=command.reason,
                balance_after=state.balance + pending.amount,
            )
        ]
    if isinstance(command, CashOut):
        # Not refused past MAX_BALANCE, as a deposit is: the table has paid the money out
        # already, and a refusal would leave it nowhere. (What winnings add is bounded by
        # the tables' MAX_BET, far from the 64-bit columns.)
        refused = _invalid_amount(command.amount) or _received(state, command)
        return refused or [
            CashOutReceived(
                player_id=pid,
                table_id=command.table_id,
                amount=command.amount,
                balance_after=state.balance + command.amount,
                table_sequence=command.table_sequence,
            )
        ]
    return Rejection(
        code="unknown_command", message=f"{type(command).__name__} is not a wallet command"
    )


# ---- evolve -------------------------------------------------------------------------------


def _balance(state: WalletState, e: WalletWithdrawn | CashOutReceived) -> WalletState:
    return state.model_copy(update={"balance": e.balance_after})


def _cashed_out(state: WalletState, e: CashOutReceived) -> WalletState:
    if e.table_sequence is None:  # a version 1 event: its copies are refused by command id
        return _balance(state, e)
    if e.table_sequence <= state.cashed_out.get(e.table_id, 0):
        raise _corrupt(f"cash-out of {e.table_id} event {e.table_sequence} received twice")
    cashed_out = {**state.cashed_out, e.table_id: e.table_sequence}
    return state.model_copy(update={"balance": e.balance_after, "cashed_out": cashed_out})


def _corrupt(message: str) -> Exception:
    return CorruptLog(message)


def _deposited(state: WalletState, e: WalletDeposited) -> WalletState:
    return state.model_copy(update={"balance": e.balance_after, "currency": e.currency})


def _sent(state: WalletState, e: BuyInSent) -> WalletState:
    pending = PendingBuyIn(transfer=e.transfer, table_id=e.table_id, amount=e.amount)
    return state.model_copy(
        update={
            "balance": e.balance_after,
            "transfers": e.transfer,
            "pending": (*state.pending, pending),
        }
    )


def _closed(state: WalletState, transfer: int) -> tuple[PendingBuyIn, ...]:
    return tuple(p for p in state.pending if p.transfer != transfer)


def _completed(state: WalletState, e: BuyInCompleted) -> WalletState:
    return state.model_copy(update={"pending": _closed(state, e.transfer)})


def _refunded(state: WalletState, e: BuyInRefunded) -> WalletState:
    return state.model_copy(
        update={"balance": e.balance_after, "pending": _closed(state, e.transfer)}
    )


def _unchanged(state: WalletState, e: WalletCommandRefused) -> WalletState:
    """No money moved: the stream keeps the command's id (``Stream.note_money``)."""
    return state


_EVOLVERS: dict[type[WalletEvent], Callable[[WalletState, Any], WalletState]] = {
    WalletDeposited: _deposited,
    WalletWithdrawn: _balance,
    WalletCommandRefused: _unchanged,
    CashOutReceived: _cashed_out,
    BuyInSent: _sent,
    BuyInCompleted: _completed,
    BuyInRefunded: _refunded,
}


def evolve_wallet(state: WalletState, event: WalletEvent) -> WalletState:
    evolver = _EVOLVERS.get(type(event))
    if evolver is None:
        raise _corrupt(f"no wallet evolve rule for {type(event).__name__}")
    return evolver(state, event)


def fold_wallet(events: Iterable[WalletEvent], state: WalletState = INITIAL_WALLET) -> WalletState:
    for event in events:
        state = evolve_wallet(state, event)
    return state
