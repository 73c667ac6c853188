"""One command in, everything it causes out: the heart of the handler, without any I/O.

``Processor.handle`` takes one record of ``blackjack.commands`` and the in-memory streams of
its partition, and returns the records the transaction must write: the events (sealed, with
CloudEvents headers), the command's result, and the commands it causes on other streams (the
steps of a buy-in or a cash-out). It updates the stream in memory as it goes; the Kafka loop
throws the partition's memory away and rebuilds it if the transaction does not commit.

Order of the checks, each a typed rejection on the results topic:

1. ``malformed``: not JSON, not an envelope, wrong fields, a Kafka key that is not the stream
   id, a stream on the wrong partition, a wallet command outside ``wallet:<player>``.
   ``unknown_command``: a command type nobody knows. ``unauthorized``: an unsigned command
   with an id reserved for the service's steps (``<cause>.deposit`` ...). These are answered
   but not remembered; a ``malformed`` message whose ids can be read that copies a command its
   stream handled (one an older release took, before the commands refused such a message) gets
   the original result, as in 2.
2. a command id the stream has handled: the original result again, nothing else.
3. ``unauthorized``: a signed step from an older handler that only its id tells from its
   copies (a cash-out that named no table event, a buy-in's deposit recorded without its
   transfer), accepted before, however long ago: a copy of its record sent again after the
   idempotency window has moved on (see ``streams``). ``unauthorized``: a command only the
   service may issue, without the service's signature. A platform money command
   (``WalletDeposit``, ``WalletWithdraw``, an unsigned ``Deposit`` or ``Withdraw``, and a
   player's ``BuyIn``):
   ``transfer_expired`` if issued (``sent_at``) longer ago than the retention,
   ``already_applied`` if its stream accepted it within the retention and its answer has
   left the window, the code it was refused with if its stream refused it so,
   ``malformed`` without ``sent_at`` where the handler requires it, ``money_ids_full`` if
   its stream keeps as many ids as it may (``domain.platform_money``). ``malformed``: a
   player's command that acts in a round without naming it (``round``) where the handler
   requires it (``BLACKJACK_COMMAND_ROUND=required``).
4. the decider (table or wallet): accepted with its events, or its typed rejection (a platform
   money command's written down as an event that moves no money, its id kept, also at a
   stream that does not exist yet, which that event makes; a command
   naming a round that is over ``stale_command``, before any other check). Copies of
   the other money steps are refused here, by what they carry (``transfer_already_handled``
   for a buy-in's deposit or a cash-out, ``unknown_transfer`` for a confirm or refund), and
   nothing else is done, not even the buy-in's confirm or refund. A buy-in's deposit at a
   stream that does not exist is decided by the partition's stream of such declines
   (``ids.declines_stream``), which makes no stream for the id; one numbered at or below the
   last of its wallet declined there is refused as a copy at any table of the partition.

Each step has its module: 1. ``reading``, 2. ``answers`` (which answers a stream remembers),
3. ``authorization``, 4. ``decision``, which writes the records (``records``) under the ids
of ``ids``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from blackjack.bus.topics import Topics
from blackjack.command_handler.answers import (
    COPY_REFUSALS,
    another_command,
    another_player_s,
    command_digest,
    handled_before,
    refused,
    remembered,
)
from blackjack.command_handler.authorization import authorize, overtaken_disconnect, reserved_id
from blackjack.command_handler.decision import Deciding
from blackjack.command_handler.ids import declines_stream
from blackjack.command_handler.reading import ANSWER_KEY_MAX_BYTES, Inbound, Unparsed, parse
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.signing import CommandSigner, carries_signature
from blackjack.command_handler.streams import PartitionStore, Stream, initial_state, kept_by_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import platform_money
from blackjack.domain.commands import ROUND_COMMANDS
from blackjack.domain.rejections import Rejection
from blackjack.domain.state import TableState
from blackjack.domain.transfers import transfer_origin, transfer_ref
from blackjack.domain.wallet import BuyIn, CashOut
from blackjack.messages.envelope import (
    CommandEnvelope,
    CommandResult,
    EventEnvelope,
    StreamCommand,
)
from blackjack.messages.sealing import ShoeSeal
from blackjack.table import Shuffler


@dataclass
class Handled:
    result: CommandResult
    command_type: str
    events: list[EventEnvelope] = field(default_factory=list)
    outgoing: list[Outgoing] = field(default_factory=list)
    duplicate: bool = False


ROUND_COMMAND_TYPES = frozenset(ROUND_COMMANDS)


class Processor(Deciding):
    def __init__(
        self,
        *,
        topics: Topics,
        partitions: int,
        seal: ShoeSeal,
        signer: CommandSigner,
        source: str,
        shuffler: Shuffler,
        dedup_window: int,
        money_ids_max: int = platform_money.DEFAULT_IDS_MAX,
        money_sent_at_required: bool = False,
        round_required: bool = False,
    ) -> None:
        self.round_required = round_required
        """``BLACKJACK_COMMAND_ROUND=required``: a command acting in a round names it."""
        self.money_ids_max = money_ids_max
        """How many platform money ids a stream keeps at most (``BLACKJACK_MONEY_IDS_MAX``)."""
        self.money_sent_at_required = money_sent_at_required
        """``BLACKJACK_MONEY_SENT_AT=required``: a platform money command needs ``sent_at``."""
        self.topics = topics
        self.partitions = partitions
        self.seal = seal
        self.signer = signer
        self.source = source
        self.shuffler = shuffler
        self.dedup_window = dedup_window

    # ---- the one entry point ----------------------------------------------------------

    def handle(self, store: PartitionStore, inbound: Inbound, now: datetime) -> Handled:
        key = inbound.key or b""
        parsed = parse(inbound, self.partitions)
        if isinstance(parsed, Unparsed):
            return self._unparsed(store, parsed, key, inbound.partition, now)
        envelope = parsed
        command = envelope.command
        kind = str(command.type)
        signed, transfer = self.signer.verify(key, inbound.value or b"", inbound.headers)
        reserved = reserved_id(envelope, signed, carries_signature(inbound.headers))
        if reserved is not None:
            # Answered, not remembered (nor by a rebuild, see ``replay``): the id stays free
            # for the service's own command that has a right to it.
            result = refused(envelope, reserved, now)
            record = self._result_record(result, key, inbound.partition)
            return Handled(result=result, command_type=kind, outgoing=[record])
        # A stream that does not exist is made only if the command writes its first events:
        # its answer is otherwise kept with the partition's (``StrayAnswers``), bounded.
        existing, original = store.answered(envelope.stream_id, envelope.command_id)
        held = existing is not None
        stream = existing or Stream(envelope.stream_id, initial_state(envelope.stream_id))
        # (of the command as sent: a signed step's body is completed from its headers below)
        digest = None if signed else command_digest(command)
        if original is not None:
            return self._answered_before(
                envelope, existing, original, digest, signed, key, inbound.partition, now
            )

        if signed and envelope.command_id in stream.signed:
            return self._replayed(store, stream, envelope, kind, key, inbound.partition, now)
        envelope = _with_signed_terms(envelope, signed, transfer)
        command = envelope.command
        buy_in = signed and isinstance(command, cmd.Deposit) and transfer is not None
        if buy_in and not held:
            assert transfer is not None
            return self._declined_nowhere(store, envelope, transfer, key, inbound, now)
        events: list[EventEnvelope] = []
        outgoing: list[Outgoing] = []
        money = platform_money.is_platform_money(command, signed)
        late = self._late_platform_money(store, stream, envelope, inbound, now) if money else None
        rejection = (
            authorize(command, stream, signed)
            or overtaken_disconnect(envelope, stream)
            or self._copy_declined_nowhere(store, command, inbound.partition)
            or late
            or self._round_missing(command, signed)
        )
        if rejection is None:
            rejection = self._decide(
                _with_idle_since(envelope, stream),
                stream,
                now,
                events,
                outgoing,
                received_at=inbound.received_at,
                resumed=store.resumed(stream, now),
                money_retention=store.money_retention,
                # A platform money command refused is written down (its id kept), also at a
                # stream that does not exist yet: its refusal is that stream's first event, so
                # a copy after the window is refused as first even once the stream is paid
                # into or opened (a stray answer would be decided again then).
                keep_refusal=money,
            )
        if events:
            store.went_on(stream)
        result = CommandResult(
            command_id=envelope.command_id,
            stream_id=envelope.stream_id,
            correlation_id=envelope.correlation_id,
            status="rejected" if rejection else "accepted",
            rejection=rejection,
            first_sequence=events[0].sequence if events else None,
            last_sequence=events[-1].sequence if events else None,
            handled_at=now,
            player_id=_present(command, signed),
        )
        self._keep(store, stream, command, result, digest, signed=signed, held=held, now=now)
        kept = digest if held or events else None  # (a stray answer keeps none)
        outgoing.append(self._result_record(result, key, inbound.partition, kept))
        if buy_in and rejection is None and isinstance(command, cmd.Deposit):
            assert transfer is not None
            # Taken: confirm it to the wallet; declined: give the money back. A refused one
            # (already taken or declined) was answered the first time: nothing is sent.
            declined = next(
                (e.data for e in events if isinstance(e.data, ev.TransferDeclined)), None
            )
            outgoing.append(self._buy_in_answer(envelope, command, transfer, declined, now))
        # A signed step its decider refused as a copy is a duplicate, however late it came;
        # so is a platform money command its stream had decided (``platform_money``).
        code = None if rejection is None else rejection.code
        copy = (signed and code in COPY_REFUSALS) or (
            late is not None and rejection is late and code not in platform_money.NOT_COPIES
        )
        return Handled(
            result=result, command_type=kind, events=events, outgoing=outgoing, duplicate=copy
        )

    def _keep(
        self,
        store: PartitionStore,
        stream: Stream,
        command: StreamCommand,
        result: CommandResult,
        digest: str | None,
        *,
        signed: bool,
        held: bool,
        now: datetime,
    ) -> None:
        """What a command decided leaves behind: the player seen, a signed step's id, its
        answer in its stream's window (the stream ``held``, or made by the command's events)
        or with the partition's stray answers, the stream to be snapshotted."""
        present = result.player_id
        if present is not None and remembered(result):
            # Only with an answer the window keeps: a rebuild reads presence from those alone
            # (``replay.remember``), and a player last seen later here than after a takeover
            # was disconnected by the new owner, bet refunded, where this one kept them.
            stream.saw(present, now)
        if signed and result.rejection is None and kept_by_id(command):
            stream.signed.add(result.command_id)
        store.since_checkpoint += 1
        if not held and result.first_sequence is None:  # a stream no event made
            if remembered(result):
                store.remember_stray(result, self.dedup_window)
            return
        if not held:
            store.made(stream)
        if remembered(result):
            stream.remember(result, self.dedup_window, digest)
        store.dirty.add(stream.stream_id)

    def _answered_before(  # noqa: PLR0917
        self,
        envelope: CommandEnvelope,
        stream: Stream | None,
        original: CommandResult,
        digest: str | None,
        signed: bool,
        key: bytes,
        partition: int,
        now: datetime,
    ) -> Handled:
        """A command under an id its stream (or the partition, for a stream that does not
        exist) answered: a copy gets the original answer; another player's command, or another
        command (its fields differ), is refused, answered and not remembered (a rebuild keeps
        the same window), and the id stays the first command's."""
        kind = str(envelope.command.type)
        if another_player_s(original, envelope.command, signed):
            by = "another player's command: each command needs an id of its own"
        elif self._another_command(stream, envelope, digest, signed):
            by = (
                "another command (its fields differ): a copy must be the same command, and "
                "each command needs an id of its own"
            )
        else:
            kept = None if stream is None else stream.results.digest(envelope.command_id)
            record = self._result_record(original, key, partition, kept)
            return Handled(result=original, command_type=kind, outgoing=[record], duplicate=True)
        message = f"command id {envelope.command_id} was used at this stream by {by}"
        result = refused(envelope, message, now, code="malformed")
        return Handled(
            result=result, command_type=kind, outgoing=[self._result_record(result, key, partition)]
        )

    @staticmethod
    def _another_command(
        stream: Stream | None, envelope: CommandEnvelope, digest: str | None, signed: bool
    ) -> bool:
        """Whether a command under an id its stream answered is another command. A platform
        money command whose id the stream accepted is told by its terms, as after the window
        (``platform_money.terms_differ``): a copy's fields may differ (a table deposit
        that names the table's currency, one that does not), and the answer a late copy was
        given is kept under the copy's digest, not the first command's, which refused the
        first command's own copies after it (a ledger review). Of an id it refused, the terms
        name less (no currency, no table): those differing refuse it, the digest does too."""
        command, command_id = envelope.command, envelope.command_id
        if stream is not None and platform_money.is_platform_money(command, signed):
            kept = platform_money.Kept(stream.money, stream.money_refused, terms=stream.money_terms)
            differs = platform_money.terms_differ(command, command_id, stream.state, kept)
            if differs or (differs is False and command_id not in stream.money_refused):
                return differs
        return another_command(stream, command_id, digest)

    def _late_platform_money(
        self,
        store: PartitionStore,
        stream: Stream,
        envelope: CommandEnvelope,
        inbound: Inbound,
        now: datetime,
    ) -> Rejection | None:
        """A platform money command issued longer ago than the retention
        (``transfer_expired``), a copy of one its stream decided whose answer has left the
        window (``already_applied``, or the code it was refused with), one without ``sent_at``
        where it is required (``malformed``), or one its stream has no room to keep
        (``money_ids_full``): ``domain.platform_money``. The stream's last event's time counts
        as the clock if it is later (another handler's clock may have run ahead). ``sent_at``
        may be ahead of this handler's clock, never of the broker's stamp only: the id is kept
        by the time of its event, this clock's (a broker ahead of the handler by more than
        ``SENT_AHEAD`` let a copy through once its id was let go)."""
        touched = stream.touched_at
        latest = now if touched is None else max(now, touched)
        arrived = now if inbound.received_at is None else min(inbound.received_at, now)
        # A player's BuyIn is kept by id as the platform's money is, but its client is not
        # held to the platform's contract: without sent_at (required or not), or with one
        # ahead of the clock (a player's device), it counts as issued when it arrived.
        buy_in = isinstance(envelope.command, BuyIn)
        sent_at = envelope.sent_at
        if buy_in and sent_at is not None and sent_at > arrived + platform_money.SENT_AHEAD:
            sent_at = None
        # At a table several players share, a Withdraw is a player's own: each seated player's
        # take their share of the ids at most (``player_share``), and the players not seated,
        # under any number of ids, one share between them, so that no one fills them all.
        command, state, own, share, seated = envelope.command, stream.state, 0, None, True
        table = state if isinstance(state, TableState) else None
        if isinstance(command, cmd.Withdraw) and table is not None and table.rules.funded_by_wallet:
            share = platform_money.player_share(self.money_ids_max, table.rules.seats)
            seated = command.player_id in table.players
            own = platform_money.kept_for_player(
                stream.money_players,
                stream.money,
                command.player_id,
                latest,
                store.money_retention,
                seated=table.players.keys(),
            )
        kept = platform_money.Kept(
            stream.money,
            stream.money_refused,
            store.money_retention,
            # A player's buy-ins may fill half the limit at most (``buy_in_share``): a player
            # sending them in a loop never leaves the cashier's deposits money_ids_full.
            platform_money.buy_in_share(self.money_ids_max) if buy_in else self.money_ids_max,
            self.money_sent_at_required and not buy_in,
            players_own=own,
            player_limit=share,
            player_seated=seated,
            terms=stream.money_terms,
        )
        another = platform_money.terms_differ(command, envelope.command_id, state, kept)
        return platform_money.check(
            kept, envelope.command_id, sent_at, latest, arrived, another=another is True
        )

    def _round_missing(self, command: StreamCommand, signed: bool) -> Rejection | None:
        """``BLACKJACK_COMMAND_ROUND=required``: a command that acts in a round and does not
        name it (``round``) is ``malformed``; the decider refuses one naming another round
        (``stale_command``, ``round_not_in_play``) whatever the setting."""
        if not self.round_required or signed or type(command) not in ROUND_COMMAND_TYPES:
            return None
        if getattr(command, "round", None) is not None:
            return None
        return Rejection(
            code="malformed",
            message=f"{command.type} must name the round it is meant for (round): this "
            "service requires it (BLACKJACK_COMMAND_ROUND=required)",
        )

    def _declines(self, store: PartitionStore, partition: int) -> Stream | None:
        """The partition's stream of buy-ins declined at tables that did not exist, if it has
        declined one (``ids.declines_stream``)."""
        stream_id = declines_stream(partition, self.partitions)
        return store.get(stream_id) if store.holds(stream_id) else None

    def _copy_declined_nowhere(
        self, store: PartitionStore, command: StreamCommand, partition: int
    ) -> Rejection | None:
        """A buy-in's deposit numbered at or below the last one of its wallet this partition
        declined at a table that did not exist: a copy (a wallet's deposits reach a partition
        in the order it numbered them, ``domain.transfers``), refused even at a table opened
        since under the id it was sent to, which never saw it."""
        if not isinstance(command, cmd.Deposit) or command.transfer is None:
            return None
        declines = self._declines(store, partition)
        if declines is None or not isinstance(declines.state, TableState):
            return None
        wallet, number = transfer_origin(command.transfer)
        last = declines.state.buy_ins.get(wallet, 0)
        if number > last:
            return None
        return Rejection(
            code="transfer_already_handled",
            message=f"buy-in {command.transfer} was already declined here, sent to a table "
            f"that did not exist (the last one from {wallet} declined so was number {last})",
        )

    def _declined_nowhere(  # noqa: PLR0917
        self,
        store: PartitionStore,
        envelope: CommandEnvelope,
        transfer: int,
        key: bytes,
        inbound: Inbound,
        now: datetime,
    ) -> Handled:
        """A buy-in's deposit at a table that does not exist: declined, and its money sent back
        to the wallet, without making a stream for the id. The decline is an event of the
        partition's stream of such declines (``ids.declines_stream``), a table never opened
        whose state keeps the last buy-in number it declined from each wallet: a copy of the
        deposit, however late, is refused by it (``transfer_already_handled``, no refund),
        here and at a table opened later under that id (``_copy_declined_nowhere``). The answer
        is the partition's (``StrayAnswers``): rejected ``table_not_open``, no sequence."""
        command = envelope.command
        assert isinstance(command, cmd.Deposit)
        declines_id = declines_stream(inbound.partition, self.partitions)
        held = store.holds(declines_id)
        declines = (
            store.get(declines_id) if held else Stream(declines_id, initial_state(declines_id))
        )
        events: list[EventEnvelope] = []
        outgoing: list[Outgoing] = []
        rejection = self._decide(
            envelope,
            declines,
            now,
            events,
            outgoing,
            received_at=inbound.received_at,
            money_retention=store.money_retention,
        )
        declined = next((e.data for e in events if isinstance(e.data, ev.TransferDeclined)), None)
        if declined is not None:
            if not held:
                store.made(declines)
            store.dirty.add(declines_id)
            rejection = Rejection(
                code=declined.reason_code,
                message=f"{declined.message}: buy-in {declined.transfer} is declined and its "
                "money goes back to the wallet",
            )
        assert rejection is not None and (declined is not None or not events)
        result = CommandResult(
            command_id=envelope.command_id,
            stream_id=envelope.stream_id,
            correlation_id=envelope.correlation_id,
            status="rejected",
            rejection=rejection,
            handled_at=now,
        )
        store.since_checkpoint += 1
        if remembered(result):
            store.remember_stray(result, self.dedup_window)
        outgoing.append(self._result_record(result, key, inbound.partition))
        if declined is not None:
            outgoing.append(self._buy_in_answer(envelope, command, transfer, declined, now))
        copy = rejection.code in COPY_REFUSALS
        return Handled(
            result=result,
            command_type=str(command.type),
            events=events,
            outgoing=outgoing,
            duplicate=copy,
        )

    def _unparsed(
        self, store: PartitionStore, parsed: Unparsed, key: bytes, partition: int, now: datetime
    ) -> Handled:
        """The answer to a record that is no command: its first answer again, if it had one,
        else ``parsed``'s rejection."""
        original = handled_before(store, parsed)
        if original is not None:
            record = self._result_record(original, key, partition)
            return Handled(
                result=original,
                command_type=parsed.command_type,
                outgoing=[record],
                duplicate=True,
            )
        result = CommandResult(
            command_id=parsed.command_id,
            stream_id=parsed.stream_id,
            correlation_id=parsed.correlation_id,
            status="rejected",
            rejection=parsed.rejection,
            handled_at=now,
        )
        # answered under the key it came with, unless that is longer than any stream id
        answer_key = key if len(key) <= ANSWER_KEY_MAX_BYTES else parsed.stream_id.encode()
        return Handled(
            result=result,
            command_type=parsed.command_type,
            outgoing=[self._result_record(result, answer_key, partition)],
        )

    def _replayed(  # noqa: PLR0917
        self,
        store: PartitionStore,
        stream: Stream,
        envelope: CommandEnvelope,
        kind: str,
        key: bytes,
        partition: int,
        now: datetime,
    ) -> Handled:
        """A signed step from an older handler kept by id (``streams``), accepted before,
        whose result has left the window: refused, nothing decided. The answer is not
        remembered: the stream's signed ids refuse every copy the same way, and a rebuild,
        which drops ``unauthorized`` answers to step ids, holds the same window as the live
        handler."""
        message = (
            f"this signed command was already applied: {kind} "
            f"{envelope.command_id} is not applied again"
        )
        result = refused(envelope, message, now)
        record = self._result_record(result, key, partition)
        return Handled(result=result, command_type=kind, outgoing=[record], duplicate=True)


def _with_signed_terms(
    envelope: CommandEnvelope, signed: bool, transfer: int | None
) -> CommandEnvelope:
    """The command with what only its signed headers may say: a buy-in ``Deposit``'s transfer
    and the table event a ``CashOut`` pays out (never from the body)."""
    command = envelope.command
    if signed and isinstance(command, cmd.Deposit):
        # The table decides a buy-in's deposit by its transfer: taken or declined, never
        # taken twice.
        ref = None if transfer is None else transfer_ref(command.player_id, transfer)
        return envelope.model_copy(update={"command": command.model_copy(update={"transfer": ref})})
    if isinstance(command, CashOut):
        # (a cash-out from an older handler has none: ``streams.kept_by_id``)
        sequence = transfer if signed else None
        return envelope.model_copy(
            update={"command": command.model_copy(update={"table_sequence": sequence})}
        )
    return envelope


def _with_idle_since(envelope: CommandEnvelope, stream: Stream) -> CommandEnvelope:
    """A ``CloseInterruptedRound`` with how long its round has waited, from the log, never
    from the body: since its last event of play (a refusal written down is none,
    ``Stream.active_at``)."""
    command = envelope.command
    if not isinstance(command, cmd.CloseInterruptedRound):
        return envelope
    closing = command.model_copy(update={"idle_since": stream.active_at})
    return envelope.model_copy(update={"command": closing})


def _present(command: StreamCommand, signed: bool) -> str | None:
    """The player a command shows present: one the player sent (not the service's signed
    steps, nor a ``Disconnect``, which says the opposite)."""
    if isinstance(command, cmd.PlayerCommand) and not isinstance(command, cmd.Disconnect):
        return None if signed else command.player_id
    return None
