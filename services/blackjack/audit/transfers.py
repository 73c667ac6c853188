"""Money between wallets and shared tables, matched one transfer at a time.

Each stream's replay checks that its own balances add up; the totals of ``audit.conservation``
check that, per player, no more reached the tables than the wallet sent and no more came back
than the tables paid out. This matches every single movement across the two logs:

- a table took or declined a buy-in (``FundsDeposited`` / ``TransferDeclined`` naming
  ``wallet:<player>/<n>``) only if that wallet sent buy-in ``n`` to that table, for that
  player and amount, and only once (a buy-in sent to a table that did not exist is declined
  ``table_not_open`` in its partition's stream of such declines, ``#declined/<partition>``);
- a wallet closed buy-in ``n`` as completed only if the table took it, and as refunded only
  if the table declined it;
- a wallet received a cash-out naming a table event (``CashOutReceived.table_sequence``) only
  if that event paid that player that amount out of a shared table, and only once.

A buy-in or payout not answered yet is in transit, not a finding (the handler may be behind);
so is an answer whose cause lies past what was read of its stream (the table's, or the
wallet's for a buy-in) while that stream's events partition lags (``lagging``: one partition
projected further than another). Not for ever: a buy-in no table answered, a table's answer
(taken or declined) the wallet never had, or a payout out of a shared table no wallet
received, ``STUCK_AFTER`` before the last event the logs hold (and the other stream not
lagging) is a finding, the money gone from one log and in neither (or the wallet's buy-in
pending for good); each is kept as the step to send again too (``StuckStep``: ``blackjack
redrive``).
Buy-ins a table handled before it recorded their transfers (older handlers: a taken one
became a deposit without its transfer, a declined one left no event) cannot be matched and
are counted as unverifiable; the totals of ``audit.conservation`` still cover them. A deposit
without a transfer at a shared table after it started recording them names no buy-in: a
finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from blackjack.audit.replayed import Finding
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.domain.currencies import money
from blackjack.domain.transfers import is_declines_stream, transfer_origin
from blackjack.messages.wire import WireEnvelope

STUCK_AFTER: Final = timedelta(minutes=15)
"""How long a transfer may wait for its answer, counted back from the logs' last event: the
handler answers one in a transaction of its own, within seconds; a partition's takeover takes
a minute at most."""


_STUCK_OR_BEHIND: Final = (
    "(lost, or the command handler that answers it that far behind: see its lag)"
)
"""What a transfer stuck past ``STUCK_AFTER`` may be: the audit reads the events, not the
commands a handler has still to answer."""


@dataclass(frozen=True)
class _PaidOut:
    """Money a shared table paid out to its player's wallet."""

    player_id: str
    amount: int
    at: datetime
    event_id: str
    correlation: str


@dataclass(frozen=True)
class StuckStep:
    """A step of money between a wallet and a shared table that the logs hold the cause of
    but not the answer to, ``stuck_after`` on (a finding): what ``blackjack redrive`` needs
    to make it again as the handler made it (``command_handler.records``)."""

    step: str
    """``deposit`` (to the table), ``confirm`` or ``refund`` (the table's answer to the
    wallet), ``cashout`` (a payout to the wallet): ``command_handler.ids.STEPS``"""
    cause: str
    """the id of what caused it: the wallet's ``BuyInSent``, the buy-in's ``Deposit`` the
    table answered, the table's payout event"""
    correlation: str
    player_id: str
    table_id: str
    amount: int
    currency: str
    number: int
    """the wallet's buy-in number, or the table event a cash-out pays"""
    declined: str | None
    """a refund's reason: the code the table declined the buy-in with"""
    finding: Finding


@dataclass(frozen=True)
class _Sent:
    wallet: str
    sequence: int
    at: datetime
    table_id: str
    player_id: str
    amount: int
    event_id: str
    correlation: str
    currency: str


@dataclass
class Reconciled:
    findings: list[Finding] = field(default_factory=list)
    in_transit: int = 0
    """movements whose answer is not in the logs read (yet): not findings"""
    ahead: dict[tuple[str, bool], int] = field(default_factory=dict)
    """(player, to the tables?) -> the money that arrived before its cause was read: deposits
    at shared tables of buy-ins the player's lagging wallet partition was not read as far as
    sending (True), cash-outs the wallet received of payouts a lagging table's partition was
    not read as far as paying (False). What the money totals may find arrived on one side
    more than it left the other, and no more (``audit.conservation.Crossing``)."""
    unverifiable: int = 0
    """buy-ins closed before their table recorded transfers (older handlers): not matched"""
    stuck: list[StuckStep] = field(default_factory=list)
    """the findings of steps whose answers the logs lack, each as its step (among
    ``findings`` too)"""


@dataclass
class _Table:
    opened: bool = False
    """its TableOpened was read: whether it is shared is known"""
    shared: bool = False
    currency: str | None = None
    transfers_from: datetime | None = None
    """when the table first recorded a buy-in's transfer"""
    untracked_deposits: bool = False
    """a shared-table deposit without a transfer: written before deposits named theirs"""


def reconcile(
    streams: Mapping[str, Sequence[WireEnvelope]],
    *,
    lagging: Callable[[str], bool] = lambda stream_id: False,
) -> Reconciled:
    """Match the money that moved between the streams' logs (``stream -> events`` in sequence
    order). ``lagging(stream)``: that stream's events were not all read (its partition has
    records past the positions read), so an answer whose cause is not among them may be in
    transit rather than forged."""
    movements = Movements(lagging)
    for stream_id, envelopes in streams.items():
        movements.read(stream_id, envelopes)
    return movements.matched()


_Handled = tuple[WireEnvelope, ev.FundsDeposited | ev.TransferDeclined]


@dataclass
class Movements:
    """The movements of money the logs record, gathered in one pass (``read`` each stream's
    log in turn: only the movements are kept, not the logs), then ``matched``."""

    lagging: Callable[[str], bool]
    stuck_after: timedelta = STUCK_AFTER
    out: Reconciled = field(default_factory=Reconciled)
    sent: dict[tuple[str, int], _Sent] = field(default_factory=dict)
    """(wallet, buy-in number) -> the buy-in the wallet sent"""
    closed: list[tuple[WireEnvelope, wl.BuyInCompleted | wl.BuyInRefunded]] = field(
        default_factory=list
    )
    received: list[tuple[WireEnvelope, wl.CashOutReceived]] = field(default_factory=list)
    handled: dict[tuple[str, int], _Handled] = field(default_factory=dict)
    """(wallet, buy-in number) -> the table event that took or declined it"""
    paid_out: dict[tuple[str, int], _PaidOut] = field(default_factory=dict)
    """(table, sequence) -> what a shared table paid out there to the wallet"""
    cashed_unnumbered: set[str] = field(default_factory=set)
    """tables a version 1 cash-out (naming no table event) was received from"""
    last_at: datetime | None = None
    """the last event the logs hold: what a transfer's wait is counted back from"""
    tables: dict[str, _Table] = field(default_factory=dict)
    read_to: dict[str, int] = field(default_factory=dict)
    """stream -> the last sequence read of it"""

    def find(self, envelope: WireEnvelope, message: str) -> None:
        self.out.findings.append(Finding(envelope.stream_id, envelope.sequence, None, message))

    def matched(self, at: datetime | None = None) -> Reconciled:
        """Every stream read: match what each side says moved. ``at``: when a missing answer's
        wait is counted to, if later than the logs' last event (``blackjack redrive``: now, so
        that a step stuck in a log that has been quiet since counts its quiet time)."""
        if at is not None and (self.last_at is None or at > self.last_at):
            self.last_at = at
        closed = {(envelope.stream_id, closing.transfer) for envelope, closing in self.closed}
        self.match_buy_ins_handled(closed)
        self.match_buy_ins_closed()
        self.match_buy_ins_sent(closed)
        received = self.match_cash_outs()
        self.match_payouts_received(received)
        return self.out

    def read(self, stream_id: str, envelopes: Sequence[WireEnvelope]) -> None:
        table = self.tables.setdefault(stream_id, _Table())
        for envelope in envelopes:
            self._read_wallet_event(stream_id, envelope)
            self._read_table_event(stream_id, table, envelope)
            if self.last_at is None or envelope.occurred_at > self.last_at:
                self.last_at = envelope.occurred_at
        if envelopes:
            self.read_to[stream_id] = envelopes[-1].sequence

    def _read_wallet_event(self, stream_id: str, envelope: WireEnvelope) -> None:
        match envelope.data:
            case wl.BuyInSent() as e:
                self.sent[(stream_id, e.transfer)] = _Sent(
                    stream_id,
                    envelope.sequence,
                    envelope.occurred_at,
                    e.table_id,
                    e.player_id,
                    e.amount,
                    envelope.event_id,
                    _correlation(envelope),
                    e.currency,
                )
            case wl.BuyInCompleted() | wl.BuyInRefunded() as e:
                self.closed.append((envelope, e))
            case wl.CashOutReceived() as e:
                if stream_id != wl.wallet_stream(e.player_id):
                    self.find(envelope, f"cash-out for {e.player_id} in another player's wallet")
                self.received.append((envelope, e))
                if e.table_sequence is None:  # a version 1 event: matched by the totals only
                    self.cashed_unnumbered.add(e.table_id)

    def _read_table_event(self, stream_id: str, table: _Table, envelope: WireEnvelope) -> None:
        match envelope.data:
            case ev.TableOpened() as e:
                table.opened = True
                table.shared = e.rules.funded_by_wallet
                table.currency = e.rules.currency
            case ev.FundsDeposited(transfer=None) if table.shared:
                if table.transfers_from is not None:
                    self.find(envelope, "a deposit at a shared table that names no buy-in")
                table.untracked_deposits = True
            case ev.FundsDeposited(transfer=str()) | ev.TransferDeclined() as e:
                if table.transfers_from is None:
                    table.transfers_from = envelope.occurred_at
                self._read_handled(envelope, e)
            case ev.SeatLeft() as e if table.shared and e.balance_returned > 0:
                self._paid(stream_id, envelope, e.player_id, e.balance_returned)
            case ev.FundsWithdrawn() as e if table.shared and e.amount > 0:
                self._paid(stream_id, envelope, e.player_id, e.amount)

    def _paid(self, table_id: str, envelope: WireEnvelope, player_id: str, amount: int) -> None:
        at, event_id = envelope.occurred_at, envelope.event_id
        paid = _PaidOut(player_id, amount, at, event_id, _correlation(envelope))
        self.paid_out[(table_id, envelope.sequence)] = paid

    def _read_handled(
        self, envelope: WireEnvelope, e: ev.FundsDeposited | ev.TransferDeclined
    ) -> None:
        assert e.transfer is not None
        try:
            key = transfer_origin(e.transfer)
        except ValueError as error:
            self.find(envelope, str(error))
            return
        if key in self.handled:
            first = self.handled[key][0].sequence
            self.find(envelope, f"buy-in {e.transfer} handled again (first at {first})")
            return
        self.handled[key] = (envelope, e)

    def match_buy_ins_handled(self, closed: set[tuple[str, int]]) -> None:
        """Every buy-in a table took or declined was sent by its wallet, as the table says,
        and closed by the wallet in time (its confirmation or refund came)."""
        for (wallet, number), (envelope, e) in self.handled.items():
            buy_in = self.sent.get((wallet, number))
            if wallet != wl.wallet_stream(e.player_id):  # no lag excuses it
                self.find(envelope, f"buy-in {e.transfer} for {e.player_id}: another's wallet")
            elif buy_in is None and self.lagging(wallet):
                self.out.in_transit += 1  # the wallet's partition was not read as far
                if isinstance(e, ev.FundsDeposited):
                    self._arrived_ahead(e.player_id, True, e.amount)
            elif buy_in is None:
                self.find(envelope, f"buy-in {e.transfer}: {wallet} never sent it")
            elif (buy_in.table_id, buy_in.player_id, buy_in.amount) != (
                _handled_at(envelope, e, buy_in.table_id),
                e.player_id,
                e.amount,
            ):
                cur = _currency(self.tables, buy_in.table_id)
                self.find(
                    envelope,
                    f"buy-in {e.transfer}: the wallet sent {money(buy_in.amount, cur)} of "
                    f"{buy_in.player_id} to {buy_in.table_id}, the table handled "
                    f"{money(e.amount, cur)} of {e.player_id}",
                )
            elif (wallet, number) not in closed:
                self._match_unclosed(buy_in, number, envelope, e)

    def _match_unclosed(
        self,
        buy_in: _Sent,
        number: int,
        envelope: WireEnvelope,
        e: ev.FundsDeposited | ev.TransferDeclined,
    ) -> None:
        """A buy-in its table answered that the wallet still holds pending: the confirmation
        or refund on its way, or, ``STUCK_AFTER`` later, lost (one refused as signed under a
        key the wallet's handler does not accept: the money neither at the table for the
        wallet nor back in it)."""
        waited = self._stuck_for(envelope.occurred_at, buy_in.wallet)
        if waited is None:
            return
        cur = _currency(self.tables, buy_in.table_id)
        taken = isinstance(e, ev.FundsDeposited)
        finding = Finding(
            envelope.stream_id,
            envelope.sequence,
            None,
            f"buy-in {e.transfer} of {money(e.amount, cur)}: the table "
            f"{'took' if taken else 'declined'} it at {envelope.occurred_at.isoformat()}, "
            f"{buy_in.wallet} has not had its {'confirmation' if taken else 'refund'} {waited} "
            f"later {_STUCK_OR_BEHIND}",
        )
        declined = None if isinstance(e, ev.FundsDeposited) else e.reason_code
        step = "confirm" if declined is None else "refund"
        deposit = envelope.causation_id  # the handler's events all name their command
        if deposit is None:  # no step can be made again under its id: the finding alone
            self.out.findings.append(finding)
            return
        self._stuck(step, (deposit, _correlation(envelope)), buy_in, number, declined, finding)

    def _stuck(  # noqa: PLR0917
        self,
        step: str,
        cause: tuple[str, str],
        buy_in: _Sent,
        number: int,
        declined: str | None,
        finding: Finding,
    ) -> None:
        """A buy-in's step stuck (``cause``: the id of what caused it, and its correlation
        id): a finding, and the step ``blackjack redrive`` sends again."""
        self.out.findings.append(finding)
        self.out.stuck.append(
            StuckStep(
                step,
                *cause,
                buy_in.player_id,
                buy_in.table_id,
                buy_in.amount,
                buy_in.currency,
                number,
                declined,
                finding,
            )
        )

    def match_buy_ins_closed(self) -> None:
        """Every buy-in a wallet closed was answered so by its table."""
        for envelope, closing in self.closed:
            answer = self.handled.get((envelope.stream_id, closing.transfer))
            completed = isinstance(closing, wl.BuyInCompleted)
            kind = ev.FundsDeposited if completed else ev.TransferDeclined
            if answer is not None and isinstance(answer[1], kind):
                continue
            if answer is None and self._unanswered_is_expected(envelope, closing):
                continue
            what = "completed" if completed else "refunded"
            did = "did nothing with it" if answer is None else f"answered {answer[0].type}"
            self.find(envelope, f"buy-in {closing.transfer} {what}, but {closing.table_id} {did}")

    def _unanswered_is_expected(
        self, envelope: WireEnvelope, closing: wl.BuyInCompleted | wl.BuyInRefunded
    ) -> bool:
        """A closed buy-in with no answer in the table's log: unverifiable (handled before the
        table recorded transfers) or in transit (the table's partition not read as far)."""
        buy_in = self.sent.get((envelope.stream_id, closing.transfer))
        if _before_transfers(self.tables.get(closing.table_id), buy_in):
            self.out.unverifiable += 1
            return True
        if self.lagging(closing.table_id):
            self.out.in_transit += 1
            return True
        return False

    def _arrived_ahead(self, player_id: str, to_tables: bool, amount: int) -> None:
        key = (player_id, to_tables)
        self.out.ahead[key] = self.out.ahead.get(key, 0) + amount

    def _stuck_for(self, since: datetime, other: str) -> timedelta | None:
        """How long an answer from ``other`` (a stream) has been missing since ``since``, if
        it has been for ``STUCK_AFTER``, ``other``'s partition not lagging: stuck, not in
        transit (counted as in transit otherwise)."""
        waited = None if self.last_at is None else self.last_at - since
        if self.lagging(other) or waited is None or waited < self.stuck_after:
            self.out.in_transit += 1
            return None
        return waited

    def match_buy_ins_sent(self, closed: set[tuple[str, int]]) -> None:
        """Every buy-in a wallet sent was taken or declined by its table, in time (one the
        wallet closed is judged by its close, ``match_buy_ins_closed``)."""
        for key, buy_in in self.sent.items():
            if key in self.handled or key in closed:
                continue
            if _before_transfers(self.tables.get(buy_in.table_id), buy_in):
                self.out.unverifiable += 1
                continue
            waited = self._stuck_for(buy_in.at, buy_in.table_id)
            if waited is not None:
                cur = _currency(self.tables, buy_in.table_id)
                finding = Finding(
                    buy_in.wallet,
                    buy_in.sequence,
                    None,
                    f"buy-in {key[1]} of {money(buy_in.amount, cur)} sent to "
                    f"{buy_in.table_id} at {buy_in.at.isoformat()}: the table has not "
                    f"answered it {waited} later {_STUCK_OR_BEHIND}",
                )
                cause = (buy_in.event_id, buy_in.correlation)
                self._stuck("deposit", cause, buy_in, key[1], None, finding)

    def match_payouts_received(self, received: set[tuple[str, int]]) -> None:
        """Every payout out of a shared table reached its player's wallet, in time."""
        for key, paid in self.paid_out.items():
            table_id, sequence = key
            if key in received:
                continue
            if table_id in self.cashed_unnumbered:  # version 1 cash-outs: the totals only
                self.out.unverifiable += 1
                continue
            wallet = wl.wallet_stream(paid.player_id)
            waited = self._stuck_for(paid.at, wallet)
            if waited is not None:
                cur = _currency(self.tables, table_id)
                finding = Finding(
                    table_id,
                    sequence,
                    None,
                    f"{money(paid.amount, cur)} paid out to {paid.player_id} at "
                    f"{paid.at.isoformat()}: {wallet} has not received it {waited} later "
                    f"{_STUCK_OR_BEHIND}",
                )
                self.out.findings.append(finding)
                step = StuckStep(
                    "cashout",
                    paid.event_id,
                    paid.correlation,
                    paid.player_id,
                    table_id,
                    paid.amount,
                    cur,
                    sequence,
                    None,
                    finding,
                )
                self.out.stuck.append(step)

    def match_cash_outs(self) -> set[tuple[str, int]]:
        """Every cash-out a wallet received was paid out of its table, once, as the wallet
        says; the table events received."""
        cashed: dict[tuple[str, int], WireEnvelope] = {}
        for envelope, cash_out in self.received:
            if cash_out.table_sequence is None:
                continue  # a version 1 event (``cashed_unnumbered``)
            key = (cash_out.table_id, cash_out.table_sequence)
            where = f"{cash_out.table_id} event {cash_out.table_sequence}"
            if key in cashed:
                first = cashed[key]  # (in the order the streams were read, not of time)
                also = f"{first.stream_id} event {first.sequence}"
                self.find(envelope, f"cash-out of {where} received again (also at {also})")
                continue
            cashed[key] = envelope
            payout = self.paid_out.get(key)
            unread = cash_out.table_sequence > self.read_to.get(cash_out.table_id, 0)
            table = self.tables.get(cash_out.table_id)
            if table is not None and table.opened and not table.shared:
                # no lag excuses it: a table whose money is the platform's pays no wallet
                self.find(envelope, f"cash-out from {cash_out.table_id}, a single-player table")
                continue
            if payout is None and unread and self.lagging(cash_out.table_id):
                self.out.in_transit += 1
                self._arrived_ahead(cash_out.player_id, False, cash_out.amount)
                continue
            if payout is None or (payout.player_id, payout.amount) != (
                cash_out.player_id,
                cash_out.amount,
            ):
                cur = _currency(self.tables, cash_out.table_id)
                paid = "paid nothing out"
                if payout is not None:
                    paid = f"paid {money(payout.amount, cur)} to {payout.player_id}"
                self.find(
                    envelope,
                    f"cash-out of {money(cash_out.amount, cur)} for {cash_out.player_id} from "
                    f"{where}, which {paid}",
                )
        return set(cashed)


def _handled_at(
    envelope: WireEnvelope, e: ev.FundsDeposited | ev.TransferDeclined, sent_to: str
) -> str:
    """The table that handled the buy-in: the stream of the event, except a decline in a
    partition's stream of buy-ins sent to tables that did not exist (``table_not_open``),
    which answers for the table the wallet sent it to."""
    declined_nowhere = isinstance(e, ev.TransferDeclined) and e.reason_code == "table_not_open"
    if declined_nowhere and is_declines_stream(envelope.stream_id):
        return sent_to
    return envelope.stream_id


def _before_transfers(table: _Table | None, buy_in: _Sent | None) -> bool:
    """A buy-in its table handled before it recorded transfers: older handlers recorded a
    taken one as a deposit without its transfer, and a declined one not at all."""
    if table is None or not table.untracked_deposits:
        return False
    return table.transfers_from is None or (buy_in is not None and buy_in.at < table.transfers_from)


def _correlation(envelope: WireEnvelope) -> str:
    """The correlation id the steps an event causes carry (the handler's: the causing
    command's correlation id, else that command's id)."""
    return envelope.correlation_id or envelope.causation_id or envelope.event_id


def _currency(tables: dict[str, _Table], table_id: str) -> str:
    table = tables.get(table_id)
    return (table.currency if table is not None else None) or "USD"
