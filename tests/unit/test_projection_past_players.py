"""A table's accounts are kept for good, one for every player who ever sat there: a batch
reads those of the players seated and of the players its events name, not all of them (a
table 50,000 players had sat at took about a second a batch to read theirs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WireEnvelope
from blackjack.projections import writer as writer_module
from blackjack.projections.dump import differences, dump
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record, _Batch
from tests.integration.conftest_projections import Script, event_records

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
TOPIC = "blackjack.events"
PAST = 30


def _table_with_past_players() -> tuple[Script, int]:
    """ann seated; ``PAST`` players who sat, paid in and left; the index of the first event
    after them: p3 comes back, pays in, and ann plays a round p3 sits out (dealt without)."""
    script = Script("atlantic-city-multi", [["TS", "7S", "9S", "TD"]], {"ann": 10_000})
    for number in range(PAST):
        player = f"p{number}"
        script.do(
            cmd.SitDown(player_id=player, seat=1),
            buy_in_deposit(player, 100 + number),
            cmd.LeaveTable(player_id=player),
        )
    after = len(script.envelopes)
    script.do(
        cmd.SitDown(player_id="p3", seat=1),
        buy_in_deposit("p3", 500, 2),  # p3 bought in once before
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.Pass(player_id="p3"),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
    )
    return script, after


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[ProjectionStore, ProjectionStore]]:
    made = (
        ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"),
        ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}"),
    )
    for store in made:
        await store.migrate()
    yield made
    for store in made:
        await store.close()


async def test_a_batch_reads_the_accounts_of_the_seated_and_the_named_only(
    stores: tuple[ProjectionStore, ProjectionStore],
) -> None:
    store, _ = stores
    script, after = _table_with_past_players()
    records = event_records(script.envelopes, SEAL, TOPIC)
    await ProjectionWriter(store).apply(records[:after])
    async with store.writing() as connection:
        batch = _Batch(connection)
        await batch.load(records[after:])
        loaded = batch.streams[script.stream_id]
        assert set(loaded.projection.accounts) == {"ann", "p3"}  # before: all 31
        assert loaded.projection.accounts["p3"].deposited == 103  # p3's, read back


async def test_folded_in_any_batching_the_accounts_are_the_same(
    stores: tuple[ProjectionStore, ProjectionStore],
) -> None:
    """The returning player's account goes on from the stored one (its deposits and balance
    counted on), in batches of one event as in one batch: a fold that made p3 a new account
    would fail to insert it, or (with it) the dumps would differ."""
    one, many = stores
    script, after = _table_with_past_players()
    records: list[Record] = event_records(script.envelopes, SEAL, TOPIC)
    await ProjectionWriter(one).apply(records)
    writer = ProjectionWriter(many)
    await writer.apply(records[:after])
    for record in records[after:]:
        await writer.apply([record])
    dumps = []
    for store in stores:
        async with store.reading() as connection:
            dumps.append(await dump(connection))
    assert differences(dumps[0], dumps[1]) == []
    [p3] = [
        line
        for line in dumps[0].text().splitlines()
        if '"player_id":"p3"' in line and '"cashed_out"' in line
    ]
    assert '"deposited":603' in p3 and '"seated":true' in p3, p3


async def test_a_record_whose_stored_form_does_not_read_is_named_the_batch_before_it_folded(
    stores: tuple[ProjectionStore, ProjectionStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the texts of a batch's events, to find the accounts it names, reads each
    event's stored form: one that does not read failed the batch before anything folded and
    named no record (the worker held the partition back from the batch's start, and its
    health named a good event). It is the fold's to name, as before."""
    store, _ = stores
    script = Script("atlantic-city-multi", [["TS", "7S", "9S", "TD"]], {"ann": 10_000, "bob": 500})
    script.do(cmd.LeaveTable(player_id="bob"))
    records = event_records(script.envelopes, SEAL, TOPIC)
    [left] = [record for record in records if b'"type":"SeatLeft"' in record.value]
    as_stored = writer_module._as_stored

    def failing(raw: bytes, envelope: WireEnvelope) -> WireEnvelope:
        if raw == left.value:
            raise ValueError("this stored form does not read")
        return as_stored(raw, envelope)

    monkeypatch.setattr(writer_module, "_as_stored", failing)
    writer = ProjectionWriter(store)
    with pytest.raises(ValueError, match="does not read"):
        await writer.apply(records)
    assert writer.failed_at is not None and writer.failed_at.offset == left.offset


async def test_an_older_log_s_reason_longer_than_its_field_once_escaped_is_folded(
    stores: tuple[ProjectionStore, ProjectionStore],
) -> None:
    """An operator's reason an older release took with U+FFFDs (the commands refuse them
    now) is escaped in the store's form of the event, each U+FFFD two characters: past the
    field's 200 the stored form did not read, and the partition stopped for good. A text
    longer than any id is kept as the log has it (no key needs it one to one)."""
    store, _ = stores
    reason = "x" * 90 + "\ufffd" * 60
    script = Script("atlantic-city-multi", [["TS", "7S", "9S", "TD"]], {"ann": 10_000, "bob": 500})
    stand_up = cmd.StandUpPlayer.model_construct(
        type="StandUpPlayer", player_id="bob", operator="ops", reason=reason
    )
    script.do(stand_up)
    records = event_records(script.envelopes, SEAL, TOPIC)
    result = await ProjectionWriter(store).apply(records)
    assert result.folded == len(records)  # before: a ValidationError at the SeatLeft
    async with store.reading() as connection:
        text = (await dump(connection)).text()
    assert f'operator_reason\\":\\"{reason}\\"' in text  # in its envelope, as logged
