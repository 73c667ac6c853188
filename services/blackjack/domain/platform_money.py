"""The platform's money commands, and how a stream tells a late copy of one from a new one.

``WalletDeposit`` and ``WalletWithdraw`` at a wallet, and the unsigned ``Deposit`` and
``Withdraw`` at a table, are the platform's: it issues them (its ids), and may send one again
late (its own outage, an outbox replayed). The idempotency window (the last 1,000 answers of a
stream) answers a copy with its first answer only while that answer is there, and a copy after
it was credited or debited again. So a stream also remembers the ids of the platform money
commands it accepted, as payment APIs keep idempotency keys: for a retention (a handler
setting, 7 days by default, as long as the results topic keeps the answers), and a platform
money command issued longer ago than that (its envelope's ``sent_at``, which a resend of the
same record carries) is refused, ``transfer_expired``. An id is forgotten once a copy of it
could only be refused so: the memory is the ids accepted in the last retention, not one per
command ever.

The memory is a function of the stream's events (the commands that caused the money events,
with the time each was written), so the live handler, a rebuild from a checkpoint and one from
the whole log hold the same ids. A copy within the retention is refused
``already_applied`` and changes nothing (after the window: inside it, the first
answer comes back, as always).

Pure: the time is an argument, never read from a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState
from blackjack.domain.wallet import WalletDeposit, WalletDeposited, WalletWithdraw, WalletWithdrawn

DEFAULT_RETENTION = timedelta(days=7)
"""How long a platform money command may be retried (``BLACKJACK_MONEY_RETENTION_S``)."""

SENT_AHEAD = timedelta(minutes=5)
"""How far ahead of the service's clock a platform money command's ``sent_at`` may be (clocks
differ a little): an id is kept for the retention and this after it was accepted, so a copy
of it, whatever ``sent_at`` it carries, is refused by the one rule or the other. A command
further ahead is refused ``malformed`` (not remembered: sent again with its clock right, it
is handled)."""


def is_platform_money(command: object, signed: bool) -> bool:
    """A money command the platform issues: a wallet's deposit or withdrawal, a table's
    unsigned deposit (no buy-in's transfer) or withdrawal."""
    if signed:
        return False
    if isinstance(command, WalletDeposit | WalletWithdraw | cmd.Withdraw):
        return True
    return isinstance(command, cmd.Deposit) and command.transfer is None


def is_platform_money_event(event: object, state: object) -> bool:
    """An event only a platform money command writes (``state``: the stream's, after it): a
    wallet's ``WalletDeposited`` or ``WalletWithdrawn``, a table's ``FundsWithdrawn``, or
    its ``FundsDeposited`` without a transfer at a table the platform funds (at one funded by
    wallets, such a deposit is an older handler's buy-in step, kept by id apart)."""
    if isinstance(event, WalletDeposited | WalletWithdrawn | ev.FundsWithdrawn):
        return True
    return (
        isinstance(event, ev.FundsDeposited)
        and event.transfer is None
        and isinstance(state, TableState)
        and not state.rules.funded_by_wallet
    )


def kept_for(retention: timedelta) -> timedelta:
    """How long after it was accepted a platform money command's id is kept."""
    return retention + SENT_AHEAD


def remember(
    accepted: dict[str, datetime], command_id: str, at: datetime, retention: timedelta
) -> None:
    """``command_id`` accepted at ``at`` (its event's time); the ids accepted longer than
    ``kept_for(retention)`` before ``at`` are let go (they are kept oldest first)."""
    accepted.pop(command_id, None)
    accepted[command_id] = at
    forget_before(accepted, at, retention)


def forget_before(accepted: dict[str, datetime], at: datetime, retention: timedelta) -> None:
    """Let go of the ids accepted longer than ``kept_for(retention)`` before ``at`` (the
    time of a stream's event: every event moves the horizon, replayed as written)."""
    horizon = at - kept_for(retention)
    while accepted:
        oldest = next(iter(accepted))
        if accepted[oldest] >= horizon:
            return
        del accepted[oldest]


def check(  # noqa: PLR0917
    accepted: Mapping[str, datetime],
    command_id: str,
    sent_at: datetime | None,
    now: datetime,
    arrived_at: datetime,
    retention: timedelta,
) -> Rejection | None:
    """Whether a platform money command may be decided: not issued too long ago, not
    issued ahead of the clock, not a copy of one the stream accepted.

    ``now`` is the latest of the handler's clock and the stream's last event (another
    handler's clock may have run ahead, and forgotten ids by it); ``arrived_at`` when the
    command reached the service, by the clock that times the event an acceptance writes
    (the id is kept by that time: a ``sent_at`` ahead of it by more than ``SENT_AHEAD``
    could outlive it). Without ``sent_at`` the command is taken as issued when it
    arrived (the contract: a platform that may retry later than the retention sends it)."""
    if sent_at is not None:
        if sent_at > arrived_at + SENT_AHEAD:
            return Rejection(
                code="malformed",
                message=f"sent_at {sent_at.isoformat()} is more than "
                f"{int(SENT_AHEAD.total_seconds())} s ahead of the service's clock "
                f"({arrived_at.isoformat()}): a money command is refused, since how late a "
                "copy of it comes is told by it",
            )
        if sent_at + retention <= now:
            return Rejection(
                code="transfer_expired",
                message=f"this money command was issued at {sent_at.isoformat()}, more than "
                f"{_span(retention)} ago: too late to be told from a copy of one already "
                "applied, so it is not applied; look its first answer up, or send a new "
                "command under a new id",
            )
    first = accepted.get(command_id)
    if first is not None and now <= first + kept_for(retention):  # (else as if let go)
        return Rejection(
            code="already_applied",
            message=f"command {command_id} was already applied here at {first.isoformat()} "
            "(its answer has left the idempotency window): it is not applied again",
        )
    return None


def _span(retention: timedelta) -> str:
    seconds = int(retention.total_seconds())
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400} days"
    return f"{seconds} s"
