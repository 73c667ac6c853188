"""``GET /v1/tables/{id}`` says who sits out, how many rounds in a row they have sat out and
how many more dealt without them free the seat (where the table's rules free one); and a
store migrated from the previous release says it does not know, until it does."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator, FormatChecker
from sqlalchemy import update

from blackjack.api.contract import openapi_document
from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections.dump import dump
from blackjack.projections.schema import accounts
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.unit.migrations import migrate
from tests.unit.stacked_table import START, StackedTable
from tests.unit.test_seat_released import ann_plays_a_round, finish_round, table

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
STREAM = "t-sit"
VALIDATOR = Draft202012Validator(
    {"$ref": "#/components/schemas/TableAnswer", **openapi_document()},
    format_checker=FormatChecker(),
)


class Folder:
    """Folds a stacked table's events, as they come, into a SQLite read model."""

    def __init__(self, store: ProjectionStore, t: StackedTable) -> None:
        self.store, self.t = store, t
        self.writer = ProjectionWriter(store)
        self.folded = 0

    async def fold(self) -> None:
        records = []
        for index, event in enumerate(self.t.events[self.folded :], start=self.folded):
            envelope = EventEnvelope(
                event_id=f"{STREAM}-{index + 1}",
                type=type(event).__name__,
                schema_version=event.version,
                stream_id=STREAM,
                sequence=index + 1,
                occurred_at=START + timedelta(seconds=index),
                causation_id=self.cause(index),
                data=event,
            )
            records.append(Record("blackjack.events", 0, index, encode(to_wire(envelope, SEAL))))
        self.folded = len(self.t.events)
        await self.writer.apply(records)

    def cause(self, index: int) -> str | None:
        """The command that wrote the table's event ``index`` (none named here)."""
        return None

    async def players(self) -> dict[str, dict[str, Any]]:
        """Each seated player's sitting out, from the answer (checked against the document)."""
        transport = httpx.ASGITransport(app=query_api(self.store))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            response = await http.get(f"/v1/tables/{STREAM}")
        assert response.status_code == 200, response.text
        answer = response.json()
        VALIDATOR.validate(answer)
        names = ("sitting_out", "rounds_sat_out", "rounds_before_seat_freed")
        return {p["player_id"]: {n: p[n] for n in names} for p in answer["players"]}


def out(sitting: bool | None, rounds: int | None, left: int | None) -> dict[str, Any]:
    return {"sitting_out": sitting, "rounds_sat_out": rounds, "rounds_before_seat_freed": left}


async def _store(tmp_path: Path) -> ProjectionStore:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    return store


async def test_the_answer_counts_down_to_the_seat_freed_and_a_bet_brings_the_player_back(
    tmp_path: Path,
) -> None:
    t = table(3)  # ann and ben at atlantic-city-multi, ben's seat freed after 3 rounds out
    store = await _store(tmp_path)
    try:
        folder = Folder(store, t)
        await folder.fold()
        assert await folder.players() == {"ann": out(False, 0, None), "ben": out(False, 0, None)}
        ann_plays_a_round(t)  # the clock leaves ben out: he sits out, a round dealt without him
        await folder.fold()
        assert await folder.players() == {"ann": out(False, 0, None), "ben": out(True, 1, 2)}
        t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
        t.do(cmd.SuspendTable(operator="ops", reason="drill"), cmd.Deal(player_id="ann"))
        await folder.fold()  # dealt while suspended: not one more sat out, as the decider has it
        assert t.state.players["ben"].rounds_sat_out == 1
        assert (await folder.players())["ben"] == out(True, 1, 2)
        t.do(cmd.Stand(player_id="ann", box=0), cmd.ResumeTable(operator="ops"))
        t.now += timedelta(seconds=1)
        ann_plays_a_round(t)
        await folder.fold()
        assert (await folder.players())["ben"] == out(True, 2, 1)
        t.do(cmd.PlaceBet(player_id="ben", box=1, amount=1000))  # back with a bet
        await folder.fold()
        assert (await folder.players())["ben"] == out(False, 0, None)
    finally:
        await store.close()


async def test_the_last_round_then_the_seat_freed(tmp_path: Path) -> None:
    t = table(1)
    store = await _store(tmp_path)
    try:
        folder = Folder(store, t)
        t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
        assert t.state.deadline is not None
        t.now = t.state.deadline
        t.do(cmd.ExpireTimers())  # ben left out; the round deals: his one round sat out
        await folder.fold()
        assert (await folder.players())["ben"] == out(True, 1, 0)  # freed as this round ends
        t.do(cmd.Stand(player_id="ann", box=0))
        assert isinstance(t.events[-1], ev.SeatLeft)
        await folder.fold()
        assert set(await folder.players()) == {"ann"}
    finally:
        await store.close()


async def test_where_the_rules_free_no_seat_no_rounds_are_counted(tmp_path: Path) -> None:
    t = table(None)
    store = await _store(tmp_path)
    try:
        folder = Folder(store, t)
        ann_plays_a_round(t)
        ann_plays_a_round(t)
        await folder.fold()
        assert (await folder.players())["ben"] == out(True, None, None)
        t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Pass(player_id="ben"))
        await folder.fold()
        assert (await folder.players())["ben"] == out(False, None, None)
    finally:
        await store.close()


STEPS: list[Callable[[StackedTable], object]] = [
    ann_plays_a_round,  # ben left out: sits out
    ann_plays_a_round,  # a second round without him
    lambda t: (
        t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000)),
        finish_round(t),  # the clock runs out on ann: ben is left out again
    ),
    lambda t: t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.SuspendTable(operator="ops", reason="drill"),
        cmd.Deal(player_id="ann"),
    ),  # dealt while suspended: not counted
    lambda t: (finish_round(t), t.do(cmd.ResumeTable(operator="ops"))),
    lambda t: t.do(cmd.LeaveTable(player_id="ann")),
    lambda t: t.do(cmd.SitDown(player_id="ann", seat=2)),
]


async def _dump(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        return (await dump(connection)).text()


async def test_migration_0006_folds_the_accounts_from_the_events_already_folded(
    tmp_path: Path,
) -> None:
    """The previous release's store (0005) has no sitting out: the migration reads it from
    the events folded, so the store is as a fold from the start would have it (the audit's
    rebuild compares equal), at every point of a play with suspensions, stand-ups, a seat
    left and taken again, with and without a rule freeing seats."""
    for limit in (4, None):
        t = table(limit)
        store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / f'read-{limit}.db'}")
        await store.migrate()
        try:
            folder = Folder(store, t)
            checked = set()
            for step in STEPS:
                step(t)
                t.now += timedelta(seconds=1)
                await folder.fold()
                expected = await _dump(store)
                async with store.writing() as connection:
                    await connection.run_sync(migrate, "0005", True)
                await store.migrate()  # as the newer release's worker does at start
                assert await _dump(store) == expected
                ben = t.state.players["ben"]
                checked.add((ben.sitting_out, ben.rounds_sat_out))
            assert (True, 3) in checked if limit else (True, 0) in checked, checked
            assert sum(isinstance(e, ev.PlayerTimedOut) and e.sits_out for e in t.events) == 2
        finally:
            await store.close()


async def test_an_account_not_known_to_sit_out_says_null_until_the_player_acts(
    tmp_path: Path,
) -> None:
    """An account row whose values are not known (an older worker still folding after the
    migration inserts one without them) answers null, not 'not sitting out', until the
    player's next bet, pass, time-out or seat; rounds dealt meanwhile count from nothing."""
    t = table(3)
    store = await _store(tmp_path)
    try:
        folder = Folder(store, t)
        ann_plays_a_round(t)  # ben sits out, one round
        await folder.fold()
        async with store.writing() as connection:
            await connection.execute(update(accounts).values(sitting_out=None, rounds_sat_out=None))
        assert await folder.players() == {
            "ann": out(None, None, None),
            "ben": out(None, None, None),
        }
        ann_plays_a_round(t)  # ann bets: known; the round deals without ben: still not known
        await folder.fold()
        assert t.state.players["ben"].rounds_sat_out == 2
        assert await folder.players() == {"ann": out(False, 0, None), "ben": out(None, None, None)}
        t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Pass(player_id="ben"))
        await folder.fold()
        assert (await folder.players())["ben"] == out(False, 0, None)
    finally:
        await store.close()


async def test_a_voided_round_is_no_round_sat_out_in_the_answer_and_after_migration_0006(
    tmp_path: Path,
) -> None:
    """ben sits out two settled rounds, then two voided ones (one dealt while the table is
    suspended): the answer counts 2 after each void, as the decider does, and a store taken
    down to 0005 and up again (0006 folding the count from the events) says the same (before,
    0006 counted the voided rounds' deals: 3)."""
    overrides: dict[str, object] = {
        "seat_released_after_rounds_sat_out": 4,
        "void_on_malfunction": True,
    }
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "TD"] * 4, overrides)
    for pid, seat in (("ann", 0), ("ben", 1)):
        t.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 10_000))
    store = await _store(tmp_path)
    try:
        folder = Folder(store, t)
        steps: list[Callable[[StackedTable], object]] = [
            ann_plays_a_round,
            ann_plays_a_round,
            lambda t: t.do(
                cmd.PlaceBet(player_id="ann", box=0, amount=1000),
                cmd.Deal(player_id="ann"),
                cmd.VoidRound(round=3, operator="ops", reason="reader fault"),
            ),
            lambda t: t.do(
                cmd.PlaceBet(player_id="ann", box=0, amount=1000),
                cmd.SuspendTable(operator="ops", reason="reader fault"),
                cmd.Deal(player_id="ann"),
                cmd.VoidRound(round=4, operator="ops", reason="reader fault"),
                cmd.ResumeTable(operator="ops"),
            ),
        ]
        for step in steps:
            step(t)
            t.now += timedelta(seconds=1)
            await folder.fold()
            counted = (await folder.players())["ben"]["rounds_sat_out"]
            assert counted == t.state.players["ben"].rounds_sat_out
            expected = await _dump(store)
            async with store.writing() as connection:
                await connection.run_sync(migrate, "0005", True)
            await store.migrate()
            assert await _dump(store) == expected
        assert t.state.players["ben"].rounds_sat_out == 2
        assert (await folder.players())["ben"] == out(True, 2, 2)
    finally:
        await store.close()
