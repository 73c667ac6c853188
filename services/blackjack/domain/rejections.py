"""Why a command was refused: a value, not an exception. A rejection changes nothing."""

from __future__ import annotations

from typing import Annotated, Final, Literal, cast, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

RejectionCode = Literal[
    # the message itself (raised by the shell before the decider sees it)
    "malformed",
    "unknown_command",
    "unauthorized",  # a command only the service itself may issue
    "player_present",  # the clock's Disconnect, overtaken by a later command from the player
    "internal_error",  # the decider failed on this command (a bug): nothing changed
    "currency_mismatch",  # money in one currency offered to a table or wallet in another
    # the table
    "table_not_open",
    "table_already_open",
    "unknown_variant",
    "invalid_rules",
    "table_suspended",  # the operator disabled the game here: no new wager, player or money
    "already_suspended",
    "not_suspended",
    # seats and ownership
    "not_seated",
    "already_seated",
    "seat_out_of_range",
    "seat_taken",
    "no_wallet",  # a table funded by wallets, and no wallet stream can be named for the player
    "box_out_of_range",
    "not_your_box",
    "round_in_progress",
    # an interrupted round (CloseInterruptedRound)
    "closing_not_allowed",  # the table's rules let no one close an interrupted round
    "round_not_interrupted",  # no round open, or it has not waited the rules' days yet
    # a malfunction (VoidRound)
    "voiding_not_allowed",  # the table's rules let no one void a round
    "round_not_in_play",  # the round named is not the one in play (none is, or it has ended)
    # a command naming a round (``round``) that is over: a copy sent again after its answer
    # left the idempotency window, or a click on a round since settled (changes nothing)
    "stale_command",
    # money
    "invalid_amount",
    "bet_below_minimum",
    "bet_above_maximum",
    "insufficient_funds",
    "balance_limit",  # money paid in would take a balance past payouts.MAX_BALANCE
    "unknown_transfer",
    # a copy of a signed step: a buy-in a table already took or declined, a cash-out a
    # wallet already received
    "transfer_already_handled",
    # a platform money command (WalletDeposit, WalletWithdraw, Deposit, Withdraw) issued
    # (sent_at) longer ago than its retention: too late to be told from a copy
    "transfer_expired",
    # a copy of a platform money command its stream applied, sent after its answer left the
    # idempotency window (domain.platform_money)
    "already_applied",
    # a new platform money command at a stream that keeps as many money command ids as it may
    # (BLACKJACK_MONEY_IDS_MAX): not decided nor remembered, sent again later it is decided
    "money_ids_full",
    # betting
    "not_betting_time",
    "no_bets",
    "already_dealt_in",
    "no_previous_bet",
    "rebet_not_offered",
    "pass_not_offered",
    "shoe_not_ready",
    "invalid_shoe",
    # the play
    "not_your_turn",
    "insurance_not_offered",
    "cannot_hit",
    "cannot_double",
    "cannot_split",
    "cannot_surrender",
]

DeclineCode = Literal[
    "table_not_open",
    "unauthorized",  # a single-player table: only the platform's Deposit funds it
    "not_seated",
    "table_suspended",
    "invalid_amount",
    "currency_mismatch",
    "balance_limit",
]
"""Why a table declined a buy-in's deposit (``TransferDeclined.reason_code``): the refusals the
decider turns into a decline (``decisions.funds``), each a ``RejectionCode``. Every release that
wrote ``TransferDeclined`` wrote one of these, so the narrowed type reads every stored event."""

DECLINE_CODES: Final[frozenset[str]] = frozenset(get_args(DeclineCode))


def decline_code(code: RejectionCode) -> DeclineCode:
    """``code`` as a decline's reason; a refusal the decider does not decline with is a bug
    (the command is then answered ``internal_error``, nothing written)."""
    if code not in DECLINE_CODES:
        raise ValueError(f"{code} is not a reason a table declines a buy-in with")
    return cast(DeclineCode, code)


MAX_MESSAGE_CHARS: Final = 600
"""A rejection's message is cut to this: it may quote the command (an unknown variant, every
bad rule override), and a result too large for the topic would stop its partition."""


def _shortened(message: object) -> object:
    if isinstance(message, str) and len(message) > MAX_MESSAGE_CHARS:
        cut = len(message) - MAX_MESSAGE_CHARS + 40
        return f"{message[: MAX_MESSAGE_CHARS - 40]}... ({cut} more characters)"
    return message


class Rejection(BaseModel):
    model_config = ConfigDict(frozen=True)
    code: RejectionCode
    message: Annotated[str, BeforeValidator(_shortened), Field(max_length=MAX_MESSAGE_CHARS)]


def in_one_line(error: ValidationError, whole: str = "command") -> str:
    """A validation error as a client can show it: ``where: what`` for each problem, on one
    line, without pydantic's links (``whole`` names a problem of the object itself)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or whole}: {problem['msg']}"
        for problem in error.errors(include_url=False)
    )
