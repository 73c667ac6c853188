"""Replaying a player's wallet stream: every balance moves by exactly the amount of its event
and never goes below zero, and every buy-in transfer closes once, as it was sent."""

from __future__ import annotations

from collections.abc import Iterable

from blackjack.audit.replayed import (
    Finding,
    StreamReplay,
    newer_than_read,
    placement_problems,
)
from blackjack.domain import wallet as wl
from blackjack.messages.wire import WireEnvelope

_MOVES_MONEY = (
    wl.WalletDeposited,
    wl.WalletWithdrawn,
    wl.BuyInSent,
    wl.BuyInCompleted,
    wl.BuyInRefunded,
    wl.CashOutReceived,
)
"""The wallet's events that move money (a ``WalletCommandRefused`` records the amount as
the refused command named it: any, ``invalid_amount`` among its refusals)."""


def replay_wallet(stream_id: str, wires: Iterable[WireEnvelope]) -> StreamReplay:
    """A wallet stream: every balance moves by its amount, every transfer closes once."""
    replayer = WalletReplayer(stream_id)
    for envelope in wires:
        replayer.feed(envelope)
    return replayer.finish()


class WalletReplayer:
    """Fed a wallet's events one at a time (``feed``, then ``finish``), as the audit reads
    them a page at a time: it holds the wallet's state, never its log."""

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self.out = StreamReplay(stream_id)
        self.state = wl.INITIAL_WALLET

    def feed(self, envelope: WireEnvelope) -> None:
        out = self.out
        if out.stopped is not None:  # a corrupt log is not read past the corruption
            return
        e = envelope.data

        def find(message: str, sequence: int = envelope.sequence) -> None:
            out.findings.append(Finding(self.stream_id, sequence, None, message))

        expected = out.events + 1
        if envelope.sequence != expected:
            find(f"sequence {envelope.sequence} where {expected} was due")
        for problem in placement_problems(envelope, out):
            find(problem)
        if not isinstance(e, wl.WalletEvent):
            find(f"{envelope.type} in a wallet stream")
            out.stopped = f"corrupt log at event {envelope.sequence}"
            return
        newer = newer_than_read(e)
        if newer is not None:
            find(newer)
        if isinstance(e, _MOVES_MONEY) and e.amount <= 0:  # a withdrawal of -100 pays 100 in
            find(f"a {envelope.type} of {e.amount}")
        moved: tuple[int, int] | None = None  # (amount in or out, balance after)
        match e:
            case wl.WalletDeposited() | wl.CashOutReceived() | wl.BuyInRefunded():
                moved = (e.amount, e.balance_after)
            case wl.WalletWithdrawn() | wl.BuyInSent():
                moved = (-e.amount, e.balance_after)
        if isinstance(e, wl.BuyInCompleted | wl.BuyInRefunded):
            out.checks += 1
            pending = self.state.pending_transfer(e.transfer)
            if pending is None or (pending.table_id, pending.amount) != (e.table_id, e.amount):
                find(f"buy-in {e.transfer} closed, but no such transfer is pending")
        given: int | None = None  # the balance the amounts give, where it is not the one recorded
        if moved is not None:
            out.checks += 1
            delta, after = moved
            if after != self.state.balance + delta:
                given = self.state.balance + delta
                find(f"balance after: recorded {after}, the amounts give {given}")
            if after < 0:
                find(f"the wallet went below zero ({after})")
        try:
            self.state = wl.evolve_wallet(self.state, e)
        except Exception as error:
            find(f"the wallet cannot fold {envelope.type}: {error}")
            out.stopped = f"corrupt log at event {envelope.sequence}"
            return
        if given is not None:  # the events after it are checked against the amounts, not it
            self.state = self.state.model_copy(update={"balance": given})
        out.events += 1

    def finish(self) -> StreamReplay:
        return self.out
