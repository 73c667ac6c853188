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

A platform money command the stream *refused* (``insufficient_funds``, ``not_seated``, a
limit) is written down too, as an event that moves no money (``WalletCommandRefused`` at a
wallet, ``MoneyCommandRefused`` at a table, carrying the rejection's code and message): its id
is kept like an accepted one's, with the code, and a copy after the window gets the original
refusal again, never a second decision (before, a withdrawal refused ``insufficient_funds``,
which the platform booked as failed, was debited when its outbox replayed it after a
deposit). Also at a stream that does not exist yet: the refusal is its first event, which
makes it, so a copy is refused as first once the stream is paid into or opened.

A copy must be the same command: with each id the stream keeps its terms (``command_terms``:
a digest of its kind, player and amount, a deposit's currency and a buy-in's table, as its
event records them), and another command sent under a kept id is refused ``malformed`` (not
decided, not remembered), in the window and after it alike: answered ``already_applied``, a
platform that reused an id for a withdrawal of 60 would book 60 where 50 left the stream.

A player's ``BuyIn`` is kept the same way (it draws on the wallet as a withdrawal does): its
``BuyInSent`` or its refusal keeps its id, so a copy after the window is not taken again.

A stream keeps at most a limit of ids (``BLACKJACK_MONEY_IDS_MAX``): its snapshot is one
record under the topic's 4 MiB limit, which more ids would pass, failing every checkpoint of
its partition. A new platform money command at a stream holding that many is refused
``money_ids_full`` (not decided, not written down, not remembered: sent again once the oldest
id is let go, it is decided).

Pure: the time is an argument, never read from a clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve
from blackjack.domain.rejections import Rejection, RejectionCode
from blackjack.domain.state import TableState
from blackjack.domain.wallet import (
    BuyIn,
    BuyInSent,
    WalletCommandRefused,
    WalletDeposit,
    WalletDeposited,
    WalletState,
    WalletWithdraw,
    WalletWithdrawn,
    evolve_wallet,
)

_V = TypeVar("_V", bound=str)

DEFAULT_RETENTION = timedelta(days=7)
"""How long a platform money command may be retried (``BLACKJACK_MONEY_RETENTION_S``)."""

SENT_AHEAD = timedelta(minutes=5)
"""How far ahead of the service's clock a platform money command's ``sent_at`` may be (clocks
differ a little): an id is kept for the retention and this after it was accepted, so a copy
of it, whatever ``sent_at`` it carries, is refused by the one rule or the other. A command
further ahead is refused ``malformed`` (not remembered: sent again with its clock right, it
is handled)."""


DEFAULT_IDS_MAX = 10_000
"""How many platform money ids a stream keeps at most (``BLACKJACK_MONEY_IDS_MAX``): with ids
of the longest kind (128 characters) and a full window of the longest answers, its snapshot
stays under the topic's 4 MiB limit (docs/kafka.md, "Idempotency")."""

NOT_KEPT_REFUSALS: frozenset[RejectionCode] = frozenset({"internal_error", "money_ids_full"})
"""Refusals not written down: a bug (a fixed release decides the command again), and the limit
on kept ids (a resend, once there is room, is decided)."""

NOT_COPIES: frozenset[RejectionCode] = frozenset(
    {"transfer_expired", "malformed", "money_ids_full"}
)
"""What ``check`` refuses a command with that is not a copy of one the stream decided."""

RefusalEvent = WalletCommandRefused | ev.MoneyCommandRefused


def is_platform_money(command: object, signed: bool) -> bool:
    """A money command told from its copies by its id for the retention: the platform's
    (a wallet's deposit or withdrawal, a table's unsigned deposit, no buy-in's transfer, or
    withdrawal) and a player's ``BuyIn``, which draws on the wallet as a withdrawal does (a
    copy after the window, decided again, would move the money to the table a second time,
    or take a buy-in refused ``insufficient_funds`` once the balance has grown)."""
    if signed:
        return False
    if isinstance(command, WalletDeposit | WalletWithdraw | BuyIn | cmd.Withdraw):
        return True
    return isinstance(command, cmd.Deposit) and command.transfer is None


def is_platform_money_event(event: object, state: object) -> bool:
    """An event only a platform money command writes (``state``: the stream's, after it): a
    wallet's ``WalletDeposited``, ``WalletWithdrawn`` or ``BuyInSent``, a table's
    ``FundsWithdrawn``, or its ``FundsDeposited`` without a transfer at a table the platform
    funds (at one funded by wallets, such a deposit is an older handler's buy-in step, kept
    by id apart)."""
    if isinstance(event, WalletDeposited | WalletWithdrawn | BuyInSent | ev.FundsWithdrawn):
        return True
    return (
        isinstance(event, ev.FundsDeposited)
        and event.transfer is None
        and isinstance(state, TableState)
        and not state.rules.funded_by_wallet
    )


def is_refusal_event(event: object) -> bool:
    """The record of a platform money command its stream refused."""
    return isinstance(event, WalletCommandRefused | ev.MoneyCommandRefused)


def counts_as_activity(event: object) -> bool:
    """Whether an event restarts an interrupted round's wait (``CloseInterruptedRound``): any
    but the record of a refused platform money command (nothing was done) and the marker of a
    round resumed (written with its command's events, which count for themselves; before a
    refusal alone, it resumes nothing)."""
    return not isinstance(event, WalletCommandRefused | ev.MoneyCommandRefused | ev.RoundResumed)


TERMS_CHARS = 8
"""Hex digits of a kept id's terms: 10,000 of them add about 74 KB to a sealed snapshot; two
commands whose terms collide (one chance in 4 billion) are told apart by the id alone."""

_KIND_OF: dict[type, str] = {
    WalletDeposited: "WalletDeposit",
    WalletWithdrawn: "WalletWithdraw",
    BuyInSent: "BuyIn",
    ev.FundsDeposited: "Deposit",
    ev.FundsWithdrawn: "Withdraw",
}
"""The platform money command each accepted money event is written for."""


def money_terms(kind: str, player_id: str, amount: int, *more: str) -> str:
    """What tells a late copy of a platform money command from another command under its id:
    a digest of its kind, player and amount, and ``more`` (``command_terms``)."""
    text = "\x00".join((kind, player_id, str(amount), *more))
    return hashlib.sha256(text.encode()).hexdigest()[:TERMS_CHARS]


def command_terms(command: object, state: object, refused: bool = False) -> str | None:
    """A platform money command's terms (``money_terms``), as its event would record them at
    a stream in ``state``: accepted, its kind, player and amount, a deposit's currency (at a
    table, the table's when the command names none) and a buy-in's table; ``refused``, what a
    refusal records, its kind, player and amount (a copy of a refused id gets its refusal, so
    nothing else need tell them apart). None for any other command."""
    if not isinstance(command, WalletDeposit | WalletWithdraw | BuyIn | cmd.Deposit | cmd.Withdraw):
        return None
    if refused:  # a refusal records the kind, player and amount alone
        return money_terms(command.type, command.player_id, command.amount)
    more: tuple[str, ...] = ()
    if isinstance(command, WalletDeposit):
        more = (command.currency,)
    elif isinstance(command, BuyIn):
        more = (command.table_id,)
    elif isinstance(command, cmd.Deposit) and isinstance(state, TableState):
        more = (command.currency or state.rules.currency,)
    return money_terms(command.type, command.player_id, command.amount, *more)


def event_terms(event: object, state: object) -> str | None:
    """The terms of the platform money command an event was written for (``command_terms``),
    at a stream in ``state``: accepted (its money event) or refused (its refusal record)."""
    if isinstance(event, WalletCommandRefused | ev.MoneyCommandRefused):
        return money_terms(event.command, event.player_id, event.amount)
    if isinstance(event, WalletDeposited):
        more: tuple[str, ...] = (event.currency,)
    elif isinstance(event, BuyInSent):
        more = (event.table_id,)
    elif isinstance(event, ev.FundsDeposited) and isinstance(state, TableState):
        more = (state.rules.currency,)  # a table takes only its own currency
    elif isinstance(event, WalletWithdrawn | ev.FundsWithdrawn):
        more = ()
    else:
        return None
    return money_terms(_KIND_OF[type(event)], event.player_id, event.amount, *more)


def terms_differ(command: object, command_id: str, state: object, kept: Kept) -> bool | None:
    """Whether ``command`` is another command than the one ``kept`` under ``command_id`` (its
    terms differ): None when the stream keeps no terms for it (kept by a release before)."""
    known = kept.terms.get(command_id)
    terms = command_terms(command, state, refused=command_id in kept.refused)
    if known is None or terms is None:
        return None
    return known != terms


def refusal(
    state: TableState | WalletState, command: object, rejection: Rejection
) -> tuple[TableState | WalletState, list[RefusalEvent]] | None:
    """The event that records the refusal of a platform money command (and the state after it,
    unchanged but for what folding it does), or ``None`` for a refusal not written down
    (``NOT_KEPT_REFUSALS``) or a command that is not the platform's money."""
    if rejection.code in NOT_KEPT_REFUSALS:
        return None
    if isinstance(command, WalletDeposit | WalletWithdraw | BuyIn) and isinstance(
        state, WalletState
    ):
        wallet_event = WalletCommandRefused(
            player_id=command.player_id,
            command=command.type,
            amount=command.amount,
            reason_code=rejection.code,
            message=rejection.message,
        )
        return evolve_wallet(state, wallet_event), [wallet_event]
    if isinstance(command, cmd.Deposit | cmd.Withdraw) and isinstance(state, TableState):
        if command.player_id not in state.players and cmd.unprintable(command.player_id):
            # a ``Withdraw`` names such an id for a player an older release seated: one for
            # no one seated here (or at a table not open) writes no new id into the log, and
            # a copy is refused again as it is, with nothing to keep (one seated and refused,
            # for its amount, is written down as any other: a copy must not be taken once
            # the balance allows it)
            return None
        table_event = ev.MoneyCommandRefused(
            player_id=command.player_id,
            command=command.type,
            amount=command.amount,
            reason_code=rejection.code,
            message=rejection.message,
        )
        return evolve(state, table_event), [table_event]
    return None


def buy_in_share(limit: int) -> int:
    """How many ids a stream may keep when a player's ``BuyIn`` is decided: half its limit
    (``BLACKJACK_MONEY_IDS_MAX``). A buy-in is taken only while the stream keeps fewer ids
    than that, so the buy-ins kept are never more than half the limit and the platform's
    deposits and withdrawals always have the other half: a player sending buy-ins (refused,
    each kept 7 days) in a loop cannot make the cashier's ``WalletDeposit`` refused
    ``money_ids_full``. The cost: once the platform's own ids pass half the limit, the
    player's buy-ins are refused ``money_ids_full`` until the oldest are let go."""
    return limit // 2


def kept_for(retention: timedelta) -> timedelta:
    """How long after it was accepted a platform money command's id is kept."""
    return retention + SENT_AHEAD


def remember(  # noqa: PLR0917
    accepted: dict[str, datetime],
    command_id: str,
    at: datetime,
    retention: timedelta,
    refused: dict[str, RejectionCode] | None = None,
    code: RejectionCode | None = None,
    *,
    players: dict[str, str] | None = None,
    player: str | None = None,
    terms: dict[str, str] | None = None,
    term: str | None = None,
) -> None:
    """``command_id`` decided at ``at`` (its event's time): accepted, or refused with ``code``
    (kept in ``refused``), for ``player`` (kept in ``players``: ``player_share``), on ``term``
    (kept in ``terms``: ``money_terms``); the ids decided longer than ``kept_for(retention)``
    before ``at`` are let go (they are kept oldest first). ``accepted`` holds every kept id,
    the refused ones too (a release that knows no refusals refuses their copies
    ``already_applied``)."""
    accepted.pop(command_id, None)
    accepted[command_id] = at
    _note(refused, command_id, code)
    _note(players, command_id, player)
    _note(terms, command_id, term)
    forget_before(accepted, at, retention, refused, players, terms)


def _note(values: dict[str, _V] | None, command_id: str, value: _V | None) -> None:
    """What ``values`` says of ``command_id`` is now ``value`` (nothing if None)."""
    if values is not None:
        values.pop(command_id, None)
        if value is not None:
            values[command_id] = value


def forget_before(
    accepted: dict[str, datetime],
    at: datetime,
    retention: timedelta,
    *kept_with: dict[str, Any] | None,
) -> None:
    """Let go of the ids decided longer than ``kept_for(retention)`` before ``at`` (the
    time of a stream's event: every event moves the horizon, replayed as written), and of
    what ``kept_with`` (``refused``, ``players``, ``terms``) says of them."""
    horizon = at - kept_for(retention)
    while accepted:
        oldest = next(iter(accepted))
        if accepted[oldest] >= horizon:
            return
        del accepted[oldest]
        for values in kept_with:
            if values:
                values.pop(oldest, None)


def player_share(limit: int, seats: int) -> int:
    """How many ids a table several players share keeps at most for one player's own
    ``Withdraw``s (their chips back to their wallet, the one platform money command such a
    table keeps by id): its limit (``BLACKJACK_MONEY_IDS_MAX``) over its seats and one more
    share, which every player not seated at it shares (``kept_for_player``). A player's
    ``Withdraw`` is decided only while the table keeps fewer ids of theirs than that. Before,
    anyone (seated or not) sending refused ``Withdraw``s in a loop, each kept 7 days, filled
    the table's ids in seconds, and every seated player's ``Withdraw`` was refused
    ``money_ids_full`` for 7 days; and while each id had a share, five ids not seated did it
    still. The cost: a player who withdraws more than that in the retention is refused
    ``money_ids_full`` until the oldest are let go (``LeaveTable`` pays the whole balance out
    whatever)."""
    return max(1, limit // (seats + 1))


def kept_for_player(
    players: Mapping[str, str],
    decided: Mapping[str, datetime],
    player: str,
    now: datetime,
    retention: timedelta,
    *,
    seated: Collection[str],
) -> int:
    """How many of the ids still kept at ``now`` count against ``player``'s share: their own
    while they are ``seated``; else those of every player not seated now, whose share is one
    (a player not seated has no chips at the table, and any number of ids can be named)."""
    horizon = now - kept_for(retention)
    own = player in seated
    return sum(
        1
        for command_id, whose in players.items()
        if (whose == player if own else whose not in seated) and decided[command_id] >= horizon
    )


def kept_now(accepted: Mapping[str, datetime], now: datetime, retention: timedelta) -> int:
    """How many of the ids are still kept at ``now`` (the oldest may be due to be let go at
    the stream's next event: counted out already)."""
    horizon = now - kept_for(retention)
    due = 0
    for at in accepted.values():
        if at >= horizon:
            break
        due += 1
    return len(accepted) - due


@dataclass(frozen=True)
class Kept:
    """What a stream keeps of its platform money commands (``Stream.money``,
    ``Stream.money_refused``), and how it is bound (the handler's settings)."""

    decided: Mapping[str, datetime]
    """every id kept, accepted or refused, with the time of its event, oldest first"""
    refused: Mapping[str, RejectionCode]
    """the refused ones among them, with the code they were refused with"""
    retention: timedelta = DEFAULT_RETENTION
    limit: int = DEFAULT_IDS_MAX
    require_sent_at: bool = False
    """``BLACKJACK_MONEY_SENT_AT=required``: a command without ``sent_at`` is ``malformed``"""
    players_own: int = 0
    """how many of them count against the command's player's share (``kept_for_player``)"""
    player_seated: bool = True
    """whether the command's player is seated (else the share is that of every player not)"""
    player_limit: int | None = None
    """how many the command's player may have (``player_share``); None: no such share"""
    terms: Mapping[str, str] = field(default_factory=dict)
    """the terms of those of them whose terms are known (``money_terms``)"""


def check(
    kept: Kept,
    command_id: str,
    sent_at: datetime | None,
    now: datetime,
    arrived_at: datetime,
    *,
    another: bool = False,
) -> Rejection | None:
    """Whether a platform money command may be decided: not a copy of one the stream decided
    (nor ``another`` command under its id: ``terms_differ``), not issued too long ago, not
    issued ahead of the clock, and room to keep its id.

    ``now`` is the latest of the handler's clock and the stream's last event (another
    handler's clock may have run ahead, and forgotten ids by it); ``arrived_at`` when the
    command reached the service, by the clock that times the event a decision writes
    (the id is kept by that time: a ``sent_at`` ahead of it by more than ``SENT_AHEAD``
    could outlive it). Without ``sent_at`` the command is taken as issued when it
    arrived (the contract: a platform that may retry later than the retention sends it),
    unless the handler requires it."""
    retention = kept.retention
    # A copy of a command the stream decided is answered so first, whatever its sent_at: a
    # copy refused for its sent_at was told "not applied" of money that was, and that answer,
    # kept in the window under the id, was given to every copy after it (a ledger review).
    first = kept.decided.get(command_id)
    if first is not None and now <= first + kept_for(retention):  # (else as if let go)
        if another:
            return Rejection(
                code="malformed",
                message=f"command id {command_id} was used at this stream at "
                f"{first.isoformat()} by another command (its kind, player, amount, currency "
                "or table differ): "
                "a copy must be the same command, and each command needs an id of its own",
            )
        return _copy(kept, command_id, first)
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
    if sent_at is None and kept.require_sent_at:
        return Rejection(
            code="malformed",
            message="a money command must carry sent_at (when it was first issued; a resend "
            "carries the first sending's): this service requires it",
        )
    if kept.player_limit is not None and kept.players_own >= kept.player_limit:
        if not kept.player_seated:
            return Rejection(
                code="money_ids_full",
                message=f"this table keeps the ids of {kept.player_limit} money commands in "
                f"{_span(retention)} of players not seated at it, the share they all have, "
                "and as many: this one is not decided (a player not seated has no chips here)",
            )
        return Rejection(
            code="money_ids_full",
            message=f"this table keeps the ids of {kept.player_limit} money commands of a "
            f"player's in {_span(retention)}, its share for one player, and as many of this "
            "player's: this one is not decided; send it again (same id) once the oldest is "
            "let go, or leave the table (the whole balance is paid out)",
        )
    if kept_now(kept.decided, now, retention) >= kept.limit:
        oldest = next(at for at in kept.decided.values() if at + kept_for(retention) >= now)
        return Rejection(
            code="money_ids_full",
            message=f"this stream keeps the ids of {kept.limit} money commands of the last "
            f"{_span(retention)}, its limit: this one is not decided; send it again (same id) "
            f"after {(oldest + kept_for(retention)).isoformat()}, when the oldest is let go",
        )
    return None


def _copy(kept: Kept, command_id: str, first: datetime) -> Rejection:
    """The refusal of a copy of a command the stream decided (its answer has left the window):
    the original refusal's code, or ``already_applied``."""
    code = kept.refused.get(command_id)
    if code is not None:
        return Rejection(
            code=code,
            message=f"command {command_id} was refused here ({code}) at {first.isoformat()} "
            "(its answer has left the idempotency window): it is not decided again; send a "
            "new command under a new id",
        )
    return Rejection(
        code="already_applied",
        message=f"command {command_id} was already applied here at {first.isoformat()} "
        "(its answer has left the idempotency window): it is not applied again",
    )


def _span(retention: timedelta) -> str:
    seconds = int(retention.total_seconds())
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400} days"
    return f"{seconds} s"
