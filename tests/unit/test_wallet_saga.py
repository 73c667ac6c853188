"""The money steps between a wallet and a table, as the handler's processor takes them, without
Kafka: each step is a signed command with an id derived from its cause, the table answers a
buy-in with a confirmation or a refund, a multi-seat table pays back into the wallet, and an
unsigned or tampered step is refused."""

from __future__ import annotations

from datetime import UTC, datetime

from blackjack.bus.topics import partition_for
from blackjack.command_handler.ids import event_id, step_id
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, CashOut, RefundBuyIn, WalletDeposit, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.unit.processor_harness import SIGNER, TOPICS, new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
PARTITIONS = 1


class Harness:
    """One partition's store and a counter of offsets; ``send`` hands a command in."""

    def __init__(self) -> None:
        self.processor = new_processor()
        self.store = PartitionStore(0)
        self.offset = 0

    def send(self, stream: str, command: object, command_id: str | None = None) -> list[Outgoing]:
        self.offset += 1
        envelope = CommandEnvelope(
            command_id=command_id or f"c-{self.offset}", stream_id=stream, command=command
        )
        value = envelope.model_dump_json().encode()
        return self.deliver(Inbound(stream.encode(), value, [], 0, self.offset))

    def deliver(self, inbound: Inbound) -> list[Outgoing]:
        return self.processor.handle(self.store, inbound, NOW).outgoing

    def forward(self, record: Outgoing) -> list[Outgoing]:
        """Hand a command the processor wrote back in, as the consumer would."""
        self.offset += 1
        return self.deliver(Inbound(record.key, record.value, record.headers, 0, self.offset))


def of_topic(records: list[Outgoing], topic: str) -> list[Outgoing]:
    return [r for r in records if r.topic == topic]


def result_of(records: list[Outgoing]) -> CommandResult:
    [record] = of_topic(records, TOPICS.results)
    return CommandResult.model_validate_json(record.value)


def command_of(record: Outgoing) -> CommandEnvelope:
    return CommandEnvelope.model_validate_json(record.value)


def funded_table(h: Harness, table: str, player: str, *, seated: bool = True) -> None:
    h.send(table, cmd.OpenTable(variant="atlantic-city-multi"))
    if seated:
        h.send(table, cmd.SitDown(player_id=player))
    h.send(wallet_stream(player), WalletDeposit(player_id=player, amount=1_000))


def test_a_buy_in_sends_a_signed_deposit_named_after_its_event() -> None:
    h = Harness()
    funded_table(h, "t1", "ann")
    out = h.send(wallet_stream("ann"), BuyIn(player_id="ann", table_id="t1", amount=400))
    [step] = of_topic(out, TOPICS.commands)
    deposit = command_of(step)
    caused_by = event_id(wallet_stream("ann"), 2)  # WalletDeposited was 1, BuyInSent is 2
    assert deposit.command_id == step_id(caused_by, "deposit") == f"{caused_by}.deposit"
    assert deposit.stream_id == "t1"
    assert deposit.command == cmd.Deposit(player_id="ann", amount=400, currency="USD")
    assert step.partition == partition_for("t1", PARTITIONS)
    assert SIGNER.verify(step.key, step.value, step.headers) == (True, 1)
    # The table credits the seat and confirms the transfer to the wallet.
    answer = h.forward(step)
    assert result_of(answer).status == "accepted"
    [confirm] = of_topic(answer, TOPICS.commands)
    assert command_of(confirm).command_id == f"{deposit.command_id}.confirm"
    done = h.forward(confirm)
    assert result_of(done).status == "accepted"
    assert h.store.streams[wallet_stream("ann")].state.pending == ()  # type: ignore[union-attr]


def test_a_refused_buy_in_is_refunded_and_a_replayed_step_changes_nothing() -> None:
    h = Harness()
    funded_table(h, "t1", "bob", seated=False)
    out = h.send(wallet_stream("bob"), BuyIn(player_id="bob", table_id="t1", amount=600))
    [step] = of_topic(out, TOPICS.commands)
    answer = h.forward(step)
    # Declined, not refused: the table's log keeps the transfer, no money moves there.
    assert result_of(answer).status == "accepted"
    [declined] = of_topic(answer, TOPICS.events)
    assert b'"TransferDeclined"' in declined.value and b'"not_seated"' in declined.value
    assert h.store.streams["t1"].state.players == {}  # type: ignore[union-attr]
    [refund] = of_topic(answer, TOPICS.commands)
    refund_command = command_of(refund).command
    assert isinstance(refund_command, RefundBuyIn) and refund_command.reason == "not_seated"
    assert command_of(refund).command_id.endswith(".deposit.refund")
    assert result_of(h.forward(refund)).status == "accepted"
    wallet = h.store.streams[wallet_stream("bob")].state
    assert wallet.balance == 1_000 and wallet.pending == ()  # type: ignore[union-attr]
    # The same step again (a retried transaction): the original result, no second refund.
    again = h.forward(step)
    assert result_of(again) == result_of(answer) and not of_topic(again, TOPICS.commands)
    assert not of_topic(h.forward(refund), TOPICS.events)


def test_unsigned_or_tampered_steps_are_refused() -> None:
    h = Harness()
    funded_table(h, "t1", "cat")
    out = h.send(wallet_stream("cat"), BuyIn(player_id="cat", table_id="t1", amount=100))
    [step] = of_topic(out, TOPICS.commands)
    tampered_value = step.value.replace(b'"amount":100', b'"amount":900')
    tampered = Outgoing(step.topic, step.key, tampered_value, step.headers, step.partition)
    assert result_of(h.forward(tampered)).rejection.code == "unauthorized"  # type: ignore[union-attr]
    unsigned = h.send("t1", cmd.Deposit(player_id="cat", amount=5))
    assert result_of(unsigned).rejection.code == "unauthorized"  # type: ignore[union-attr]


def test_money_leaving_a_multi_seat_table_goes_back_to_the_wallet() -> None:
    h = Harness()
    funded_table(h, "t1", "dan")
    [step] = of_topic(
        h.send(wallet_stream("dan"), BuyIn(player_id="dan", table_id="t1", amount=700)),
        TOPICS.commands,
    )
    h.forward(step)
    withdrawn = of_topic(h.send("t1", cmd.Withdraw(player_id="dan", amount=200)), TOPICS.commands)
    left = of_topic(h.send("t1", cmd.LeaveTable(player_id="dan")), TOPICS.commands)
    amounts = []
    for record in (*withdrawn, *left):
        cash_out = command_of(record)
        assert cash_out.stream_id == wallet_stream("dan")
        assert cash_out.command_id.endswith(".cashout")
        assert result_of(h.forward(record)).status == "accepted"
        assert isinstance(cash_out.command, CashOut)
        amounts.append(cash_out.command.amount)
    assert amounts == [200, 500]


def test_a_command_on_the_wrong_partition_or_under_the_wrong_key_is_malformed() -> None:
    h = Harness()
    h.processor.partitions = 8
    stream = next(s for s in (f"t{i}" for i in range(50)) if partition_for(s, 8) != 0)
    envelope = CommandEnvelope(command_id="x", stream_id=stream, command=cmd.Deal(player_id="p"))
    wrong_partition = Inbound(stream.encode(), envelope.model_dump_json().encode(), [], 0, 1)
    assert "belongs to partition" in result_of(h.deliver(wrong_partition)).rejection.message  # type: ignore[union-attr]
    wrong_key = Inbound(b"other", envelope.model_dump_json().encode(), [], 0, 2)
    assert result_of(h.deliver(wrong_key)).rejection.code == "malformed"  # type: ignore[union-attr]


def test_an_unsigned_command_cannot_take_a_step_id_first() -> None:
    h = Harness()
    funded_table(h, "t1", "dan")
    # The deposit step a buy-in will cause can be predicted from the wallet's next event id.
    predicted = step_id(event_id(wallet_stream("dan"), 2), "deposit")
    squatter = h.send("t1", cmd.PlaceBet(player_id="dan", box=0, amount=100), predicted)
    rejected = result_of(squatter)
    assert rejected.status == "rejected" and rejected.rejection is not None
    assert rejected.rejection.code == "unauthorized" and ".deposit" in rejected.rejection.message
    assert not of_topic(squatter, TOPICS.events)
    out = h.send(wallet_stream("dan"), BuyIn(player_id="dan", table_id="t1", amount=300))
    [step] = of_topic(out, TOPICS.commands)
    assert command_of(step).command_id == predicted
    # The real, signed step finds its id free: the seat is credited and the wallet confirmed.
    answer = h.forward(step)
    assert result_of(answer).status == "accepted"
    assert h.store.streams["t1"].state.players["dan"].balance == 300  # type: ignore[union-attr]
    [confirm] = of_topic(answer, TOPICS.commands)
    assert result_of(h.forward(confirm)).status == "accepted"
    assert h.store.streams[wallet_stream("dan")].state.pending == ()  # type: ignore[union-attr]


def test_a_wallet_holds_one_currency_and_a_table_declines_another() -> None:
    h = Harness()
    h.send("t1", cmd.OpenTable(variant="atlantic-city-multi"))  # plays in USD
    h.send("t1", cmd.SitDown(player_id="eve"))
    wallet = wallet_stream("eve")
    first = h.send(wallet, WalletDeposit(player_id="eve", amount=1_000, currency="EUR"))
    assert result_of(first).status == "accepted"
    second = result_of(h.send(wallet, WalletDeposit(player_id="eve", amount=5, currency="USD")))
    assert second.rejection is not None and second.rejection.code == "currency_mismatch"
    # Euros bought into a dollar table: declined there, not credited, and refunded.
    [step] = of_topic(
        h.send(wallet, BuyIn(player_id="eve", table_id="t1", amount=400)), TOPICS.commands
    )
    deposit = command_of(step).command
    assert isinstance(deposit, cmd.Deposit) and deposit.currency == "EUR"
    answer = h.forward(step)
    [declined] = of_topic(answer, TOPICS.events)
    assert b'"TransferDeclined"' in declined.value and b'"currency_mismatch"' in declined.value
    assert h.store.streams["t1"].state.players["eve"].balance == 0  # type: ignore[union-attr]
    [refund] = of_topic(answer, TOPICS.commands)
    assert result_of(h.forward(refund)).status == "accepted"
    state = h.store.streams[wallet].state
    assert state.balance == 1_000 and state.pending == () and state.currency == "EUR"  # type: ignore[union-attr]
