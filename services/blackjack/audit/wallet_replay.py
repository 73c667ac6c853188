"""Replaying a player's wallet stream: every balance moves by exactly the amount of its event
and never goes below zero, and every buy-in transfer closes once, as it was sent."""

from __future__ import annotations

from collections.abc import Sequence

from blackjack.audit.replayed import Finding, StreamReplay
from blackjack.domain import wallet as wl
from blackjack.messages.wire import WireEnvelope


def replay_wallet(stream_id: str, wires: Sequence[WireEnvelope]) -> StreamReplay:
    """A wallet stream: every balance moves by its amount, every transfer closes once."""
    out = StreamReplay(stream_id)
    state = wl.INITIAL_WALLET
    for expected, envelope in enumerate(wires, start=1):
        e = envelope.data

        def find(message: str, sequence: int = envelope.sequence) -> None:
            out.findings.append(Finding(stream_id, sequence, None, message))

        if envelope.sequence != expected:
            find(f"sequence {envelope.sequence} where {expected} was due")
        if not isinstance(e, wl.WalletEvent):
            find(f"{envelope.type} in a wallet stream")
            out.stopped = f"corrupt log at event {envelope.sequence}"
            break
        moved: tuple[int, int] | None = None  # (amount in or out, balance after)
        match e:
            case wl.WalletDeposited() | wl.CashOutReceived() | wl.BuyInRefunded():
                moved = (e.amount, e.balance_after)
            case wl.WalletWithdrawn() | wl.BuyInSent():
                moved = (-e.amount, e.balance_after)
        if isinstance(e, wl.BuyInCompleted | wl.BuyInRefunded):
            out.checks += 1
            pending = state.pending_transfer(e.transfer)
            if pending is None or (pending.table_id, pending.amount) != (e.table_id, e.amount):
                find(f"buy-in {e.transfer} closed, but no such transfer is pending")
        if moved is not None:
            out.checks += 1
            delta, after = moved
            if after != state.balance + delta:
                find(f"balance after: recorded {after}, the amounts give {state.balance + delta}")
            if after < 0:
                find(f"the wallet went below zero ({after})")
        try:
            state = wl.evolve_wallet(state, e)
        except Exception as error:
            find(f"the wallet cannot fold {envelope.type}: {error}")
            out.stopped = f"corrupt log at event {envelope.sequence}"
            break
        out.events += 1
    return out
