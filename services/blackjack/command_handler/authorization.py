"""3. Who may send a command: ids reserved for the service's own commands, commands only the
service issues or signs, and the clock's ``Disconnect`` that a later command of its player
made stale."""

from __future__ import annotations

from blackjack.command_handler.clock import (
    DISCONNECT_PREFIX,
    EXPIRE_PREFIX,
    disconnect_command_id,
    is_clock_disconnect_id,
)
from blackjack.command_handler.ids import STEPS, is_step_id
from blackjack.command_handler.streams import Stream
from blackjack.domain import commands as cmd
from blackjack.domain.commands import TableCommand
from blackjack.domain.decisions.funds import WALLET_FUNDED
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState
from blackjack.domain.wallet import SERVICE_ONLY_WALLET_COMMANDS, AnyWalletCommand, wallet_stream
from blackjack.messages.envelope import CommandEnvelope


def reserved_id(envelope: CommandEnvelope, signed: bool, carried: bool = False) -> str | None:
    """Why the command may not use its id, if it is one only the service's own commands use:
    a signed money step's (predictable: it derives from an event id), or the clock's
    ``expire-`` prefix, whose answers that changed nothing are not remembered
    (``clock.is_idle_timer``) and must belong to an ``ExpireTimers``, and likewise its
    ``disconnect-`` prefix, which must belong to a ``Disconnect``
    (``clock.is_clock_disconnect_id``). ``carried``: the record has a signature, which did
    not verify: the step is most likely the service's, signed under a key this handler does
    not hold (a runbook drill: the answer named only the ids, not the key)."""
    command_id = envelope.command_id
    if not signed and is_step_id(command_id):
        steps = ", ".join(f".{step}" for step in STEPS)
        reserved = f"command ids ending in {steps} are the service's own signed money steps"
        if carried:  # what to do first: the log line keeps 200 characters
            return (
                "not signed under a key this handler accepts (another BLACKJACK_SHOE_KEY?): "
                "once every handler holds the key, `blackjack redrive --stuck-after 0 --send` "
                f"sends it again; {reserved}"
            )
        return reserved
    if command_id.startswith(EXPIRE_PREFIX) and not isinstance(envelope.command, cmd.ExpireTimers):
        return f"command ids starting with {EXPIRE_PREFIX} are the clock's ExpireTimers"
    if is_clock_disconnect_id(command_id) and not isinstance(envelope.command, cmd.Disconnect):
        return f"command ids starting with {DISCONNECT_PREFIX} are the clock's Disconnect"
    return None


def overtaken_disconnect(envelope: CommandEnvelope, stream: Stream) -> Rejection | None:
    """The clock's ``Disconnect`` names the last-seen time it acted on (in its id); a command
    from the player handled since (one queued behind a takeover, say) makes it stale."""
    command = envelope.command
    if not isinstance(command, cmd.Disconnect) or not envelope.command_id.startswith(
        DISCONNECT_PREFIX
    ):
        return None
    seen = stream.last_seen.get(command.player_id)
    if seen is None or envelope.command_id == disconnect_command_id(
        envelope.stream_id, command.player_id, seen
    ):
        return None
    return Rejection(
        code="player_present",
        message=f"{command.player_id} sent a command after this disconnection was due",
    )


def authorize(
    command: TableCommand | AnyWalletCommand, stream: Stream, signed: bool
) -> Rejection | None:
    def refuse(message: str) -> Rejection:
        return Rejection(code="unauthorized", message=message)

    if isinstance(command, cmd.ShuffleShoe):
        return refuse("the service draws every shoe itself")
    if isinstance(command, SERVICE_ONLY_WALLET_COMMANDS) and not signed:
        return refuse(f"{type(command).__name__} is issued by the service only")
    state = stream.state
    if isinstance(command, cmd.Deposit) and command.transfer is not None and not signed:
        return refuse("a Deposit with a transfer is issued by the service only")
    if isinstance(command, cmd.Deposit) and isinstance(state, TableState) and state.opened:
        if state.rules.funded_by_wallet and not signed:
            # the decider's refusal too; refused here, before it, it is not written down
            return refuse(WALLET_FUNDED.format(wallet=wallet_stream(command.player_id)))
        if signed and not state.rules.funded_by_wallet and command.transfer is None:
            return refuse("a single-player table is funded by the platform's Deposit")
    if isinstance(command, cmd.CloseInterruptedRound) and command.idle_since is not None:
        return refuse("a CloseInterruptedRound's idle_since is set by the service only")
    if isinstance(command, cmd.Deposit) and signed and command.transfer is None:
        # The service signs a Deposit only as a buy-in's, which names its transfer.
        return refuse("a signed Deposit is a buy-in's and names its transfer (bj_transfer)")
    return None
