"""The proof, read back from offset 0: every command once, one result each, every event
accounted for, the handler's state what the events fold to, money conserved."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import ConsumerRecord

from blackjack.bus.headers import COMMAND_OFFSET_HEADER, offset_header
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.domain import events as ev
from blackjack.domain.evolve import evolve
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.loadtest.config import READ_TIMEOUT_S
from blackjack.loadtest.players import Sent, table_event
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode, from_wire
from blackjack.projections.rebuild import read_consumer_records
from blackjack.projections.rebuild import read_topic as read_committed
from blackjack.projections.writer import Record


async def read_topic(
    bootstrap: str, topic: str, security: KafkaSecurity = PLAINTEXT
) -> list[Record]:
    """Every committed record of a topic, from offset 0 to its end offsets as of now."""
    records: list[Record] = []
    await read_committed(
        bootstrap, topic, records.extend, timeout=READ_TIMEOUT_S, security=security
    )
    return records


@dataclass
class Proof:
    commands_sent: int = 0
    commands_in_topic_once: int = 0
    resent: int = 0
    """Copies the players sent again under the same id (through an outage): each may be in
    the topic, and is answered again with the same result."""
    copies_in_topic: int = 0
    """Records of the commands topic beyond the first of each id."""
    copies_nobody_sent: list[str] = field(default_factory=list)
    """Ids in the topic more often than their player sent them."""
    results: int = 0
    missing_results: list[str] = field(default_factory=list)
    duplicated_results: list[str] = field(default_factory=list)
    """Answered more often than they are in the topic, or differently."""
    copies_unanswered: list[str] = field(default_factory=list)
    """Ids in the topic more often than they were answered (every record is answered)."""
    records_not_answered_once: list[tuple[int, int]] = field(default_factory=list)
    """Command records (partition, offset) with no result or several: each record of the
    topic, a copy or one nobody sent, is answered exactly once, in the transaction that
    consumes it (the results name it in their ``bj_command_offset`` header)."""
    results_for_unknown_ids: list[str] = field(default_factory=list)
    rejections: dict[str, int] = field(default_factory=dict)
    tables: int = 0
    events: int = 0
    fold_equal: int = 0
    conserved: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and not self.missing_results
            and not self.duplicated_results
            and not self.results_for_unknown_ids
            and not self.rejections
            and self.commands_in_topic_once + self.resent_in_topic == self.commands_sent
            and not self.copies_nobody_sent
            and not self.copies_unanswered
            and not self.records_not_answered_once
            and self.fold_equal == self.tables
            and self.conserved == self.tables
        )

    resent_in_topic: int = 0
    """Commands in the topic more than once (each sent again)."""

    def line(self) -> dict[str, Any]:
        return {
            "kind": "proof",
            "ok": self.ok,
            "commands_sent": self.commands_sent,
            "commands_in_topic_once": self.commands_in_topic_once,
            "commands_resent": self.resent,
            "commands_in_topic_again": self.resent_in_topic,
            "copies_in_topic": self.copies_in_topic,
            "copies_nobody_sent": len(self.copies_nobody_sent),
            "copies_unanswered": len(self.copies_unanswered),
            "records_not_answered_once": len(self.records_not_answered_once),
            "results": self.results,
            "missing_results": len(self.missing_results),
            "duplicated_results": len(self.duplicated_results),
            "results_for_unknown_ids": len(self.results_for_unknown_ids),
            "rejections": self.rejections,
            "tables": self.tables,
            "events": self.events,
            "tables_fold_equal": self.fold_equal,
            "tables_money_conserved": self.conserved,
            "problems": self.problems[:20],
        }


@dataclass(frozen=True)
class Money:
    """A table's money, from its events alone (minor units)."""

    deposits: int
    withdrawals: int
    staked: int
    paid_back: int
    settled_net: int
    rounds_settled: int

    @property
    def house_result(self) -> int:
        """What the house won (negative: lost), from the stakes and what was paid back."""
        return self.staked - self.paid_back


def money_of(events: Iterable[ev.Event]) -> Money:
    deposits = withdrawals = staked = paid = net = rounds = 0
    for event in events:
        if isinstance(event, ev.FundsDeposited):
            deposits += event.amount
        elif isinstance(event, ev.FundsWithdrawn):
            withdrawals += event.amount
        elif isinstance(event, ev.BetPlaced | ev.HandDoubled | ev.HandSplit | ev.InsuranceTaken):
            staked += event.amount
        elif isinstance(event, ev.BetRefunded):
            paid += event.amount
        elif isinstance(event, ev.HandSettled | ev.InsuranceSettled):
            paid += event.payout
        elif isinstance(event, ev.RoundSettled):
            net += sum(result.net for result in event.results)
            rounds += 1
    return Money(deposits, withdrawals, staked, paid, net, rounds)


def prove(
    sent: Sequence[Sent],
    *,
    command_records: Iterable[CommandEnvelope],
    results: Iterable[CommandResult],
    events: Iterable[EventEnvelope],
    handler_states: dict[str, tuple[int, TableState]],
    views: dict[str, tuple[int, TableState]],
    rounds: int | Mapping[str, int],
    resent: Mapping[str, int] | None = None,
    answers_per_record: Mapping[tuple[int, int], int] | None = None,
) -> Proof:
    """Check, from what was read back from Kafka, that nothing was lost or done twice.
    ``resent``: per command id, how many copies its player sent again; no other copy may be
    in the topic, and each copy is answered, the same. ``answers_per_record``: per command
    record (partition, offset), how many results answer it (``read_back``)."""
    resent = resent or {}
    proof = Proof(commands_sent=len(sent), resent=sum(resent.values()))
    proof.records_not_answered_once = sorted(
        at for at, answers in (answers_per_record or {}).items() if answers != 1
    )
    sent_ids = {one.command_id for one in sent}
    if len(sent_ids) != len(sent):
        proof.problems.append("a command id was sent twice")
    in_topic = Counter(envelope.command_id for envelope in command_records)
    proof.commands_in_topic_once = sum(1 for i in sent_ids if in_topic[i] == 1)
    proof.resent_in_topic = sum(1 for i in sent_ids if in_topic[i] > 1)
    proof.copies_in_topic = sum(in_topic[i] - 1 for i in sent_ids if in_topic[i] > 1)
    by_id: defaultdict[str, list[CommandResult]] = defaultdict(list)
    for result in results:
        by_id[result.command_id].append(result)
        proof.results += 1
    proof.copies_nobody_sent = sorted(i for i in sent_ids if in_topic[i] > 1 + resent.get(i, 0))
    proof.missing_results = [i for i in sent_ids if not by_id.get(i)]
    proof.duplicated_results = [
        i
        for i in sent_ids
        if len(by_id.get(i, ())) > max(in_topic[i], 1) or not _same(by_id.get(i, []))
    ]
    proof.copies_unanswered = sorted(i for i in sent_ids if 0 < len(by_id.get(i, ())) < in_topic[i])
    proof.results_for_unknown_ids = sorted(set(by_id) - sent_ids)
    codes = Counter(
        r.rejection.code if r.rejection else "rejected"
        for answers in by_id.values()
        for r in answers
        if r.status != "accepted"
    )
    proof.rejections = dict(codes)

    streams: defaultdict[str, list[EventEnvelope]] = defaultdict(list)
    for envelope in events:
        streams[envelope.stream_id].append(envelope)
    tables = sorted({one.stream_id for one in sent})
    proof.tables = len(tables)
    for stream_id in sorted(set(streams) - set(tables)):
        proof.problems.append(f"events of a stream nobody played: {stream_id}")
    for stream_id in tables:
        envelopes = sorted(streams.get(stream_id, []), key=lambda e: e.sequence)
        proof.events += len(envelopes)
        problems = _check_table(
            stream_id,
            envelopes,
            sent=sent,
            by_id=by_id,
            handler_states=handler_states,
            views=views,
            rounds=rounds if isinstance(rounds, int) else rounds.get(stream_id, 0),
        )
        if not problems.get("fold"):
            proof.fold_equal += 1
        if not problems.get("money"):
            proof.conserved += 1
        proof.problems += problems.get("fold", []) + problems.get("money", [])
    return proof


def _same(answers: Sequence[CommandResult]) -> bool:
    """Every answer to one command id says what the first says (a copy of a command is
    answered with its original result)."""
    said = {
        (a.status, a.first_sequence, a.last_sequence, a.rejection and a.rejection.code)
        for a in answers
    }
    return len(said) <= 1


def _check_table(
    stream_id: str,
    envelopes: list[EventEnvelope],
    *,
    sent: Sequence[Sent],
    by_id: dict[str, list[CommandResult]],
    handler_states: dict[str, tuple[int, TableState]],
    views: dict[str, tuple[int, TableState]],
    rounds: int,
) -> dict[str, list[str]]:
    fold: list[str] = []
    sequences = [e.sequence for e in envelopes]
    if sequences != list(range(1, len(envelopes) + 1)):
        fold.append(f"{stream_id}: sequences are not 1..{len(envelopes)} (gap or duplicate)")
    if len({e.event_id for e in envelopes}) != len(envelopes):
        fold.append(f"{stream_id}: an event id appears twice")
    caused: defaultdict[str, list[int]] = defaultdict(list)
    for envelope in envelopes:
        caused[envelope.causation_id or ""].append(envelope.sequence)
    last_reported = 0
    for one in (s for s in sent if s.stream_id == stream_id):
        answers = by_id.get(one.command_id, [])
        refused = answers and answers[0].status != "accepted"
        if not answers or (refused and answers[0].first_sequence is None):
            continue  # (a platform money command's refusal names its record: checked too)
        first, last = answers[0].first_sequence, answers[0].last_sequence
        expected = list(range(first, last + 1)) if first is not None and last is not None else []
        if caused.pop(one.command_id, []) != expected:
            fold.append(f"{stream_id}: the events of {one.command_id} are not {first}..{last}")
        last_reported = max(last_reported, last or 0)
    if caused:
        fold.append(f"{stream_id}: {sum(map(len, caused.values()))} events with no command sent")
    state: TableState = INITIAL_STATE
    for envelope in envelopes:
        state = evolve(state, table_event(envelope))
    folded = (len(envelopes), state)
    if last_reported != len(envelopes):
        fold.append(f"{stream_id}: results reach sequence {last_reported}, events {len(envelopes)}")
    if handler_states.get(stream_id) != folded:
        fold.append(f"{stream_id}: the fold differs from the handler's state")
    if views.get(stream_id) != folded:
        fold.append(f"{stream_id}: the fold differs from the state the player saw")

    money: list[str] = []
    counted = money_of(table_event(e) for e in envelopes)
    balance = sum(player.balance for player in state.players.values())
    if state.round_open:
        money.append(f"{stream_id}: a round is still open")
    if counted.rounds_settled != rounds:
        money.append(f"{stream_id}: {counted.rounds_settled} rounds settled, not {rounds}")
    if counted.house_result != -counted.settled_net:
        money.append(
            f"{stream_id}: stakes - payouts = {counted.house_result}, "
            f"the settlements say {-counted.settled_net}"
        )
    if counted.deposits - counted.withdrawals != balance + counted.house_result:
        money.append(
            f"{stream_id}: deposits {counted.deposits} - withdrawals {counted.withdrawals} != "
            f"balance {balance} + house {counted.house_result}"
        )
    return {"fold": fold, "money": money}


@dataclass(frozen=True)
class ReadBack:
    """The three topics of a run, read back from offset 0."""

    commands: list[CommandEnvelope]
    results: list[CommandResult]
    events: list[EventEnvelope]
    answers_per_record: dict[tuple[int, int], int]
    """Per command record (partition, offset): how many results answer it."""


async def read_back(settings: KafkaSettings, shoe_key: str) -> ReadBack:
    topics = Topics(settings.topic_prefix)
    seal = ShoeSeal.from_hex(shoe_key)
    bootstrap, security = settings.bootstrap, settings.security
    records = await read_topic(bootstrap, topics.commands, security)
    events = await read_topic(bootstrap, topics.events, security)
    answers = {(r.partition, r.offset): 0 for r in records}
    results: list[CommandResult] = []
    for partition, headers, value in await _with_headers(bootstrap, topics.results, security):
        results.append(CommandResult.model_validate_json(value))
        offset = offset_header(headers, COMMAND_OFFSET_HEADER)
        at = (partition, -1 if offset is None else offset)
        answers[at] = answers.get(at, 0) + 1  # a result naming no record of the topic counts
    return ReadBack(
        commands=[CommandEnvelope.model_validate_json(r.value) for r in records],
        results=results,
        events=[from_wire(decode(r.value), seal) for r in events],
        answers_per_record=answers,
    )


async def _with_headers(
    bootstrap: str, topic: str, security: KafkaSecurity
) -> list[tuple[int, list[Any], bytes]]:
    """Every committed record of ``topic`` as (partition, headers, value), up to its end
    offsets as of now (``read_topic`` keeps no headers)."""
    found: list[tuple[int, list[Any], bytes]] = []

    def keep(records: list[ConsumerRecord]) -> None:
        found.extend((r.partition, list(r.headers), r.value or b"") for r in records)

    await read_consumer_records(bootstrap, topic, keep, timeout=READ_TIMEOUT_S, security=security)
    return found
