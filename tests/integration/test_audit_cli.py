"""``blackjack audit`` and ``blackjack replay`` as an operator runs them, against planted logs
on the real broker and a live store on SQLite and on PostgreSQL: a clean log passes; a
tampered payout, a changed card or a doctored store fails, with the place named."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from sqlalchemy import func, select, text, update
from sqlalchemy.engine import make_url

from blackjack.bus.topics import partition_for
from blackjack.command_handler.ids import event_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.rebuild import rebuild
from blackjack.projections.revision import code_revision
from blackjack.projections.store import NoReadModel, ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.cli_runs import blackjack
from tests.integration.conftest_projections import (
    PARTITIONS,
    SHOE_KEY,
    EventsTopic,
    Script,
    StoreFactory,
    play_tables,
    publish,
    to_wire,
    worker_env,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

TABLE = "table-s17"
LOG = play_tables([(TABLE, "mini-s17"), ("table-multi", "atlantic-city-multi")], 10, seed=404)
PLAYER = f"{TABLE}-p0"
NEWER = "0999"  # a schema revision no release of this code knows
OLDER = "0005"  # one before this code's head


async def live_store(
    stores: StoreFactory, topic: EventsTopic, seal: ShoeSeal, envelopes: Iterable[EventEnvelope]
) -> tuple[ProjectionStore, dict[str, str]]:
    """The planted log on the topic, folded into a live store; the CLI's environment."""
    written = await publish(topic, to_wire(envelopes, seal))
    url = await stores.url()
    store = await stores.store(url)
    # up to what was published (the commit's markers may land a moment after it returns)
    await rebuild(ProjectionWriter(store), topic.bootstrap, topic.name, stop=written)
    return store, worker_env(topic, url, BLACKJACK_SHOE_KEY=SHOE_KEY)


def a_won_hand() -> ev.HandSettled:
    return next(
        e.data
        for e in reversed(LOG.envelopes)
        if isinstance(e.data, ev.HandSettled) and e.stream_id == TABLE and e.data.outcome == "win"
    )


def pay_more(
    envelopes: list[EventEnvelope], hand: ev.HandSettled, extra: int
) -> list[EventEnvelope]:
    """A forger's log: one hand pays ``extra`` more, and every later balance of the player at
    the table, the round's results included, moves with it, so that every sum adds up."""
    forged = []
    shifted = False
    for envelope in envelopes:
        data: Any = envelope.data
        changes: dict[str, Any] = {}
        if envelope.stream_id == TABLE:
            if data == hand:
                changes["payout"] = data.payout + extra
                shifted = True
            if shifted and getattr(data, "player_id", None) == PLAYER:
                if hasattr(data, "balance_after"):
                    changes["balance_after"] = data.balance_after + extra
                if isinstance(data, ev.SeatLeft):
                    changes["balance_returned"] = data.balance_returned + extra
            if shifted and isinstance(data, ev.RoundSettled):
                this_round = data.round == hand.round
                changes["results"] = tuple(_shift(r, extra, this_round) for r in data.results)
        update = {"data": data.model_copy(update=changes)} if changes else {}
        forged.append(envelope.model_copy(update=update))
    return forged


def _shift(result: ev.PlayerRoundResult, extra: int, this_round: bool) -> ev.PlayerRoundResult:
    if result.player_id != PLAYER:
        return result
    more = {"balance_after": result.balance_after + extra}
    if this_round:
        more |= {"paid": result.paid + extra, "net": result.net + extra}
    return result.model_copy(update=more)


async def test_a_clean_log_passes_the_audit_and_replays_round_by_round(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    _, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    audit = blackjack("audit", env=env)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "Rebuild from offset 0 vs live: 0 difference(s)" in audit.stdout
    assert "Money conservation: 0 violation(s)" in audit.stdout
    assert "0 finding(s)" in audit.stdout and "AUDIT PASSED" in audit.stdout

    hand = a_won_hand()
    for source in ("store", "kafka"):
        replay = blackjack("replay", f"{TABLE}:{hand.round}", "--source", source, env=env)
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert "REPLAY OK" in replay.stdout and "MISMATCH" not in replay.stdout
        assert f"Round {TABLE}:{hand.round} - mini-s17 - USD - settled" in replay.stdout


async def test_a_record_the_service_did_not_write_under_the_table_s_key_is_stepped_over(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """Junk under the table's key (no ``ce_type``, not an event: the record the runbook's
    stuck worker is moved past) is stepped over by ``replay --source kafka`` and named, as
    the audit and a rebuild step over it. Before: a traceback (``KeyError: 'data'``), exit 1,
    the code of a mismatch."""
    _, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    producer = AIOKafkaProducer(bootstrap_servers=events_topic.bootstrap)
    await producer.start()
    try:
        junk = await producer.send_and_wait(
            events_topic.name, b'{"not": "an event"}', TABLE.encode()
        )
    finally:
        await producer.stop()
    hand = a_won_hand()
    replay = blackjack("replay", f"{TABLE}:{hand.round}", "--source", "kafka", env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "REPLAY OK" in replay.stdout and "Traceback" not in replay.stderr
    assert (
        f"Note: 1 record(s) under {TABLE}'s key not written by the service, stepped over: "
        f"{events_topic.name}[{junk.partition}] offset {junk.offset}"
    ) in replay.stderr


def last_of_table() -> tuple[EventEnvelope, int]:
    """The table's last event, and the player's balance there after it."""
    envelopes = [e for e in LOG.envelopes if e.stream_id == TABLE]
    balance = next(
        e.data.balance_after
        for e in reversed(envelopes)
        if getattr(e.data, "player_id", None) == PLAYER and hasattr(e.data, "balance_after")
    )
    return envelopes[-1], balance


def next_event(last: EventEnvelope, data: ev.Event, sequence: int | None = None) -> EventEnvelope:
    """``data`` as the table's event after ``last`` (or at ``sequence``), its id as the
    handler derives it."""
    number = last.sequence + 1 if sequence is None else sequence
    return last.model_copy(
        update={
            "sequence": number,
            "event_id": event_id(TABLE, number),
            "type": type(data).__name__,
            "data": data,
        }
    )


async def send_wire(
    topic: EventsTopic,
    envelope: EventEnvelope,
    partition: int | None = None,
    key: str = TABLE,
) -> Any:
    """One event written as the handler writes it (its headers; under the table's key unless
    ``key``), on ``partition`` if given; its record's metadata."""
    item = to_wire([envelope], ShoeSeal.from_hex(SHOE_KEY))[0]
    return await send_record(topic, wire.encode(item), item, key, partition)


async def send_record(
    topic: EventsTopic, value: bytes, headed_as: Any, key: str, partition: int | None
) -> Any:
    """``value`` written under ``key`` with the headers of the wire event ``headed_as``, on
    ``partition`` if given; its record's metadata."""
    producer = AIOKafkaProducer(bootstrap_servers=topic.bootstrap)
    await producer.start()
    try:
        return await producer.send_and_wait(
            topic.name,
            value,
            key.encode(),
            partition=partition,
            headers=wire.cloudevents_headers(headed_as, "tests/projections"),
        )
    finally:
        await producer.stop()


async def a_sequence_skipped(
    topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> tuple[ProjectionStore, dict[str, str], EventEnvelope, Any]:
    """The planted log folded into a live store, then a withdrawal written past it that skips
    the table's next sequence: the store, the CLI's environment, the table's last event before
    it and the forged record's metadata."""
    store, env = await live_store(stores, topic, shoe_seal, LOG.envelopes)
    last, balance = last_of_table()
    skipped = next_event(
        last,
        ev.FundsWithdrawn(player_id=PLAYER, amount=100, balance_after=balance - 100),
        last.sequence + 2,
    )
    return store, env, last, await send_wire(topic, skipped)


async def test_a_record_a_worker_is_stuck_at_past_the_live_positions_fails_the_audit(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """A forged event that skips a sequence stops the live worker there, and everything after
    it on the partition goes unread: before, the audit called it the workers' lag, passed up to
    the live positions, exit 0."""
    _, env, last, record = await a_sequence_skipped(events_topic, stores, shoe_seal)
    audit = blackjack("audit", env=env)
    assert audit.returncode == 1, audit.stdout + audit.stderr
    assert (
        f"Past the live positions, a record the projections cannot fold: {events_topic.name}"
        f"[{record.partition}] offset {record.offset}: ProjectionError: {TABLE}: event "
        f"{last.sequence + 2} follows {last.sequence}"
    ) in audit.stdout
    assert "AUDIT FAILED" in audit.stdout and "AUDIT PASSED" not in audit.stdout


async def test_a_projections_rebuild_stopped_at_a_record_it_cannot_fold_says_where_in_one_line(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """Before, ``blackjack projections rebuild`` ended in a ``ProjectionError`` traceback,
    its new store holding part of the fold, said nowhere (the audit names the record)."""
    _, env, last, record = await a_sequence_skipped(events_topic, stores, shoe_seal)
    rebuilt = blackjack(
        "projections", "rebuild", env={**env, "BLACKJACK_DB_URL": await stores.url()}
    )
    assert rebuilt.returncode == 1, rebuilt.stdout + rebuilt.stderr
    assert "Traceback" not in rebuilt.stderr
    assert (
        f"blackjack projections rebuild: {events_topic.name}[{record.partition}] offset "
        f"{record.offset}: a record the projections cannot fold: ProjectionError: {TABLE}: "
        f"event {last.sequence + 2} follows {last.sequence}. The store "
    ) in rebuilt.stderr
    assert "not a read model to serve" in rebuilt.stderr


async def test_a_record_the_rebuild_cannot_fold_below_the_live_positions_fails_without_a_traceback(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """A live store moved past a record of the service's it could not fold (as the runbook
    moves a worker past a record the service did not write): the rebuild from offset 0 stops
    at it. Before, the audit ended in a traceback, exit 1, with no verdict."""
    store, env, last, record = await a_sequence_skipped(events_topic, stores, shoe_seal)
    async with store.engine.begin() as connection:
        await connection.execute(
            update(schema.positions)
            .where(schema.positions.c.topic == events_topic.name)
            .where(schema.positions.c.kafka_partition == record.partition)
            .values(next_offset=record.offset + 1)
        )
    audit = blackjack("audit", env=env)
    assert audit.returncode == 1, audit.stdout + audit.stderr
    assert "Traceback" not in audit.stderr
    assert (
        f"Rebuild from offset 0: stopped at a record the projections cannot fold, "
        f"{events_topic.name}[{record.partition}] offset {record.offset}: ProjectionError: "
        f"{TABLE}: event {last.sequence + 2} follows {last.sequence}"
    ) in audit.stdout
    assert audit.stdout.rstrip().endswith("AUDIT FAILED")


async def test_an_event_on_another_partition_than_its_stream_s_fails_the_audit(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """The handler reads its stream's partition only, the store folds an event wherever it
    lies: a withdrawal written under the table's key to another partition, folded by the live
    store, passed the audit (or, the partitions read in another order, ended it in a
    traceback)."""
    store, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    last, balance = last_of_table()
    out = next_event(
        last, ev.FundsWithdrawn(player_id=PLAYER, amount=100, balance_after=balance - 100)
    )
    home = partition_for(TABLE, PARTITIONS)
    elsewhere = (home + 1) % PARTITIONS
    await send_wire(events_topic, out, partition=elsewhere)
    await rebuild(ProjectionWriter(store), events_topic.bootstrap, events_topic.name)
    audit = blackjack("audit", env=env)
    assert audit.returncode == 1, audit.stdout + audit.stderr
    assert "Traceback" not in audit.stderr
    off = (
        f"{TABLE} event {out.sequence}: 1 event(s) from sequence {out.sequence} read from "
        f"partition {elsewhere}, not the stream's partition {home}: not written by the handler"
    )
    assert off in audit.stdout or "a record the projections cannot fold" in audit.stdout
    assert "AUDIT FAILED" in audit.stdout


async def test_replay_from_the_topic_reads_the_table_s_events_whatever_their_key(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """The store and the handler's rebuild read an event as the stream its envelope names
    (the key only routes it): ``replay --source kafka`` read the table's key alone, so a
    withdrawal under another key (its stream id escaped in the JSON), which both fold, was not
    replayed. One on another partition than the table's, which the store folds and the
    handler never reads, is a mismatch."""
    _, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    last, balance = last_of_table()
    out = next_event(
        last, ev.FundsWithdrawn(player_id=PLAYER, amount=100, balance_after=balance - 100)
    )
    home = partition_for(TABLE, PARTITIONS)
    other = next(k for k in (f"k{n}" for n in range(99)) if partition_for(k, PARTITIONS) == home)
    item = to_wire([out], ShoeSeal.from_hex(SHOE_KEY))[0]
    plain = wire.encode(item)
    escaped = plain.replace(
        f'"stream_id":"{TABLE}"'.encode(), f'"stream_id":"\\u0074{TABLE[1:]}"'.encode()
    )
    assert escaped != plain and wire.decode(escaped).stream_id == TABLE
    record = await send_record(events_topic, escaped, item, other, home)
    hand = a_won_hand()
    replay = blackjack("replay", f"{TABLE}:{hand.round}", "--source", "kafka", env=env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert (
        f"Note: 1 event(s) of {TABLE} under another key than the table's, read as the store and "
        f"the handler read them: {events_topic.name}[{home}] offset {record.offset} (key "
        f"'{other}')"
    ) in replay.stderr
    elsewhere = (home + 1) % PARTITIONS
    later = next_event(
        out, ev.FundsWithdrawn(player_id=PLAYER, amount=100, balance_after=balance - 200)
    )
    moved = await send_wire(events_topic, later, partition=elsewhere)
    # a record that names the table, with an event's headers, and no event in it
    broken = await send_record(
        events_topic, json.dumps({"stream_id": TABLE}).encode(), item, other, home
    )
    replay = blackjack("replay", f"{TABLE}:{hand.round}", "--source", "kafka", env=env)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "Traceback" not in replay.stderr
    assert (
        f"  {events_topic.name}[{elsewhere}] offset {moved.offset}: an event of {TABLE} on "
        f"partition {elsewhere}, not the table's {home}, which the handler never reads"
    ) in replay.stdout
    assert (
        f"  {events_topic.name}[{home}] offset {broken.offset}: an event of {TABLE} that cannot "
        "be read: "
    ) in replay.stdout
    assert replay.stdout.rstrip().endswith("REPLAY FAILED")


async def test_the_key_file_opens_the_shoes_and_without_a_key_nothing_passes_unverified(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    _, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    keyless = {k: v for k, v in env.items() if k != "BLACKJACK_SHOE_KEY"}
    # without a key the sealed shoes cannot be checked: not a pass (it was one, exit 0)
    audit = blackjack("audit", env=keyless)
    assert audit.returncode == 3, audit.stdout + audit.stderr
    assert "AUDIT INCOMPLETE" in audit.stdout and "AUDIT PASSED" not in audit.stdout
    # the key where `make run` keeps it
    key_file = tmp_path / "shoe.key"
    key_file.write_text(SHOE_KEY + "\n")
    with_file = {**keyless, "BLACKJACK_SHOE_KEY_FILE": str(key_file)}
    audit = blackjack("audit", env=with_file)
    assert audit.returncode == 0 and "AUDIT PASSED" in audit.stdout, audit.stdout + audit.stderr
    hand = a_won_hand()
    replay = blackjack("replay", f"{TABLE}:{hand.round}", env=with_file)
    assert replay.returncode == 0 and "REPLAY OK" in replay.stdout, replay.stdout
    # a key file that is not there is bad input (an auditor never makes a new key)
    missing = {**keyless, "BLACKJACK_SHOE_KEY_FILE": str(tmp_path / "nowhere.key")}
    replay = blackjack("replay", f"{TABLE}:{hand.round}", env=missing)
    assert replay.returncode == 2 and "cannot be read" in replay.stderr, replay.stderr
    assert not (tmp_path / "nowhere.key").exists()
    # a round the store does not have: said so, and where else to look
    replay = blackjack("replay", f"{TABLE}:999", env=env)
    assert replay.returncode == 2
    assert "No round" in replay.stdout and "--source kafka" in replay.stdout


async def test_a_forged_payout_is_caught_by_replay_and_audit_though_every_sum_adds_up(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    hand = a_won_hand()
    forged = pay_more(LOG.envelopes, hand, 500)
    _, env = await live_store(stores, events_topic, shoe_seal, forged)

    replay = blackjack("replay", f"{TABLE}:{hand.round}", env=env)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    win = 2 * hand.stake
    assert f"MISMATCH: the rules give win {win // 100}.{win % 100:02d}" in replay.stdout
    assert "REPLAY FAILED" in replay.stdout

    audit = blackjack("audit", env=env)
    assert audit.returncode == 1
    assert "Money conservation: 0 violation(s)" in audit.stdout  # the forger kept the sums
    expected = f"result: recorded ('win', {win + 500}), the rules give ('win', {win})"
    assert expected in audit.stdout and "AUDIT FAILED" in audit.stdout


async def test_a_changed_card_is_caught(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    target = next(
        e
        for e in LOG.envelopes
        if e.stream_id == TABLE
        and isinstance(e.data, ev.CardDealt)
        and e.data.card is not None
        and e.data.round == 3
    )
    assert isinstance(target.data, ev.CardDealt)
    other = "AS" if target.data.card != "AS" else "KD"
    planted = [
        e.model_copy(update={"data": e.data.model_copy(update={"card": other})})
        if e is target
        else e
        for e in LOG.envelopes
    ]
    _, env = await live_store(stores, events_topic, shoe_seal, planted)
    replay = blackjack("replay", f"{TABLE}:3", env=env)
    assert replay.returncode == 1
    assert f"card {other} dealt as card " in replay.stdout
    assert "which the shoe does not hold there" in replay.stdout
    audit = blackjack("audit", env=env)
    assert audit.returncode == 1 and f"event {target.sequence}" in audit.stdout


async def test_a_doctored_live_store_is_caught(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    store, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    async with store.writing() as connection:
        await connection.execute(
            update(schema.accounts)
            .where(schema.accounts.c.player_id == PLAYER)
            .values(available=schema.accounts.c.available + 500)
        )
    balance = LOG.states[TABLE].players[PLAYER].balance
    audit = blackjack("audit", env=env)
    assert audit.returncode == 1
    assert "1 difference(s)" in audit.stdout
    assert (
        f"accounts ['{TABLE}', '{PLAYER}']: available: expected {balance}, found {balance + 500}"
        in audit.stdout
    )
    assert f"{PLAYER} at {TABLE}: deposits - withdrawals" in audit.stdout


async def test_a_round_dealt_from_a_sealed_shoe_is_replayed_with_the_key_only(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={"zoe": 10_000})
    script.do(cmd.PlaceBet(player_id="zoe", box=0, amount=1000), cmd.Deal(player_id="zoe"))
    _, env = await live_store(stores, events_topic, shoe_seal, script.envelopes)
    keyless = {k: v for k, v in env.items() if k != "BLACKJACK_SHOE_KEY"}
    sealed = blackjack("replay", "table-1:1", env=keyless)
    assert sealed.returncode == 3, sealed.stdout + sealed.stderr
    assert "still sealed" in sealed.stdout
    keyed = blackjack("replay", "table-1:1", env=env)
    assert keyed.returncode == 0, keyed.stdout
    assert "opened with the key" in keyed.stdout and "QD" not in keyed.stdout
    # the auditor's key alone (not the master key) opens it, and passes the audit
    auditor = {**keyless, "BLACKJACK_AUDIT_KEY": shoe_seal.audit_key_hex()}
    keyed = blackjack("replay", "table-1:1", env=auditor)
    assert keyed.returncode == 0 and "opened with the key" in keyed.stdout, keyed.stdout
    audit = blackjack("audit", env=auditor)
    assert audit.returncode == 0 and "AUDIT PASSED" in audit.stdout, audit.stdout + audit.stderr
    unknown = blackjack("replay", "table-1:9", env=env)
    assert unknown.returncode == 2 and "No round table-1:9" in unknown.stdout


async def test_a_void_that_could_not_take_a_payment_back_passes_the_audit(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """surrender with the void term: ann's blackjack is paid at once, she takes out all but
    2.00 and the operator voids the round: 3.00 is not recovered. The live store, its rebuild
    and the money all agree (the 3.00 is counted as her win, the house's loss)."""
    script = Script(
        "surrender",
        [["AS", "TC", "6H", "KS", "5C", "TD"]],
        {"ann": 10_000},
        stream_id="void-nr",
        overrides={"void_on_malfunction": True},
    )
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.PlaceBet(player_id="ann", box=1, amount=1_000),
        cmd.Deal(player_id="ann"),
        cmd.Withdraw(player_id="ann", amount=10_300),
        cmd.VoidRound(round=1, operator="ops-1", reason="card reader fault"),
    )
    [voided] = [e.data for e in script.envelopes if isinstance(e.data, ev.RoundVoided)]
    assert [(r.returned, r.not_recovered) for r in voided.returns] == [(-200, 300)]
    _, env = await live_store(stores, events_topic, shoe_seal, script.envelopes)
    audit = blackjack("audit", env=env)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "Rebuild from offset 0 vs live: 0 difference(s)" in audit.stdout
    assert "Money conservation: 0 violation(s)" in audit.stdout
    assert "AUDIT PASSED" in audit.stdout


async def test_a_scratch_store_a_newer_release_migrated_is_refused_not_incomplete(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """``--scratch-url`` naming a store a newer release migrated (an auditor's database kept
    from that release's audit): refused before anything is rebuilt or compared (exit 2, one
    line). Before, the migration's ``SchemaMismatch`` left the command line with its exit 3,
    which for the audit means ``AUDIT INCOMPLETE``: nothing wrong found."""
    _, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    scratch_url = await stores.url()
    scratch = await stores.store(scratch_url)
    async with scratch.writing() as connection:
        await connection.execute(text(f"UPDATE alembic_version SET version_num = '{NEWER}'"))
    audit = blackjack("audit", "--scratch-url", scratch_url, env=env)
    said = audit.stdout + audit.stderr
    assert audit.returncode == 2, said[-3000:]
    assert audit.stdout == "" and "Traceback" not in audit.stderr, said[-3000:]
    [line] = audit.stderr.splitlines()
    shown = make_url(scratch_url).render_as_string(hide_password=True)
    assert line.startswith(f"blackjack audit: --scratch-url {shown}: "), line
    assert f"a newer release migrated it (schema revision {NEWER};" in line, line
    async with scratch.reading() as connection:  # nothing folded into it
        assert (
            await connection.execute(select(func.count()).select_from(schema.events))
        ).scalar_one() == 0


@pytest.mark.parametrize("found", [NEWER, OLDER], ids=["newer", "older"])
async def test_a_live_store_at_another_schema_revision_is_refused_before_anything_is_compared(
    found: str, events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """The live store at a schema revision a newer release migrated it to, or at an older
    one (its rows as they were): this code's rebuild would be compared with another
    release's fold, or fail on a column one of them lacks. Refused before anything is rebuilt
    or compared (exit 2, one line naming both revisions and what to run). Before, the audit
    printed AUDIT PASSED and exited 0 on both."""
    live, env = await live_store(stores, events_topic, shoe_seal, LOG.envelopes)
    async with live.writing() as connection:
        await connection.execute(text(f"UPDATE alembic_version SET version_num = '{found}'"))
    scratch_url = await stores.url()  # an empty database: the audit would rebuild into it
    audit = blackjack("audit", "--scratch-url", scratch_url, env=env)
    said = audit.stdout + audit.stderr
    assert audit.returncode == 2, said[-3000:]
    assert audit.stdout == "" and "Traceback" not in audit.stderr, said[-3000:]
    [line] = audit.stderr.splitlines()
    shown = make_url(live.url).render_as_string(hide_password=True)
    assert line.startswith(f"blackjack audit: the live store {shown} "), line
    head = code_revision()
    if found == NEWER:
        newer = f"a newer release migrated it (schema revision {NEWER}; this release is built "
        assert newer + f"for {head}): audit it with that release" in line, line
    else:
        assert f"it is at schema revision {OLDER}, older than this release's {head}:" in line
        assert "`blackjack projections migrate`" in line, line
    assert line.endswith("; nothing was compared"), line
    with pytest.raises(NoReadModel):  # the scratch store not even migrated
        await read_model_in(scratch_url)


async def read_model_in(url: str) -> None:
    """``NoReadModel`` unless a migration ran in the database at ``url``."""
    store = ProjectionStore(url, existing=True)  # a SQLite file not there: at once
    try:
        async with store.reading():
            pass
    finally:
        await store.close()
