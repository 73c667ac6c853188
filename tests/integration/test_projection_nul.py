"""An event whose text holds a NUL character is folded on PostgreSQL as on SQLite, the NUL
kept out of what either store holds (U+FFFD in its place: the audit rebuilds in SQLite and
compares with a live PostgreSQL).

The commands refuse such text now (tests/unit/test_unprintable_text.py), but a log written
before holds what they took: a SitDown whose player id held a NUL, a SuspendTable whose reason
did. PostgreSQL's text refuses the character and its JSONB the escape, so the projection
worker retried the event for ever, and every later event of its partition stayed out of the
read model (a running service: two partitions stuck by two commands). No broker: the events
are folded in directly."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import select, text

from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore, as_stored
from tests.integration.conftest_projections import Script, StoreFactory
from tests.unit.migrations import migrate
from tests.unit.test_interrupted_query import fold, fold_envelopes

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WHO = "al\x00ice"


def played_before_the_commands_refused_it() -> Script:
    """model_construct: the commands as an older handler took them, unchecked."""
    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={"bob": 100})
    script.do(
        cmd.LeaveTable(player_id="bob"),
        cmd.SitDown.model_construct(player_id=WHO, seat=0),
        cmd.Deposit.model_construct(player_id=WHO, amount=10_000),
        cmd.PlaceBet.model_construct(player_id=WHO, box=0, amount=1_000),
        cmd.Deal.model_construct(player_id=WHO),
        cmd.Stand.model_construct(player_id=WHO, box=0),
        cmd.SuspendTable.model_construct(operator="ops\x00-1", reason="main\x00tenance"),
    )
    return script


async def test_an_event_with_a_nul_is_folded_on_either_store(stores: StoreFactory) -> None:
    store = await stores.store()
    script = played_before_the_commands_refused_it()
    await fold(store, script)
    kept = WHO.replace("\x00", "\ufffd")  # on either store: the audit compares them
    async with store.reading() as connection:
        accounts = (await connection.execute(select(schema.accounts))).mappings().all()
        [view] = (await connection.execute(select(schema.table_views.c.view))).scalars().all()
        positions = (await connection.execute(select(schema.positions))).mappings().all()
    mine = [(a["player_id"], a["available"]) for a in accounts if a["player_id"] != "bob"]
    assert mine == [(kept, 11_000)]  # a bet of 10.00 won, 19 against 17
    reason = view["suspended"]["reason"]
    assert reason == "main\ufffdtenance"
    assert [p["next_offset"] for p in positions] == [len(script.envelopes)]  # every event


async def test_a_nul_player_s_events_fold_across_batches(stores: StoreFactory) -> None:
    """Each batch loads the table from the store's rows, which hold U+FFFD: the projection
    folded the NUL as it came, so the player's next event in a later batch named an account it
    did not have ("al\\x00ice has no account at table-1", 12 of 22 cuts failed), and the
    worker retried that batch for ever. Folded one event per batch (as a worker may), the
    rows are those of one batch."""
    one_batch, by_event = await stores.store(), await stores.store()
    script = played_before_the_commands_refused_it()
    await fold(one_batch, script)
    for offset, envelope in enumerate(script.envelopes):
        await fold_envelopes(by_event, [envelope], first_offset=offset)
    assert await rows(by_event) == await rows(one_batch)
    accounts = (await rows(by_event))["accounts"]
    assert [(a["player_id"], a["available"]) for a in accounts if a["player_id"] != "bob"] == [
        (WHO.replace("\x00", "\ufffd"), 11_000)
    ]


async def rows(store: ProjectionStore) -> dict[str, list[dict[str, Any]]]:
    """The read model's tables, each row as a dict, in key order."""
    found: dict[str, list[dict[str, Any]]] = {}
    async with store.reading() as connection:
        for table in (schema.accounts, schema.table_views, schema.rounds, schema.round_players):
            query = select(table).order_by(*table.primary_key.columns)
            found[table.name] = [dict(r) for r in (await connection.execute(query)).mappings()]
    return found


LOOKALIKE = "al\ufffdice"
"""A player id an older handler took with U+FFFD (the commands refuse it now), which the read
model stored as it stores ``WHO``'s NUL: one account row for two players."""


def two_players_one_stored_id() -> list[Script]:
    """``WHO`` and ``LOOKALIKE`` at ``t-1`` one after the other, ``LOOKALIKE`` at ``t-2`` too."""
    first = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={"bob": 100}, stream_id="t-1")
    first.do(
        cmd.LeaveTable(player_id="bob"),
        cmd.SitDown.model_construct(player_id=WHO, seat=0),
        cmd.Deposit.model_construct(player_id=WHO, amount=10_000),
        cmd.LeaveTable.model_construct(player_id=WHO),
        cmd.SitDown.model_construct(player_id=LOOKALIKE, seat=0),
        cmd.Deposit.model_construct(player_id=LOOKALIKE, amount=7_000),
    )
    second = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={"bob": 100}, stream_id="t-2")
    second.do(
        cmd.LeaveTable(player_id="bob"),
        cmd.SitDown.model_construct(player_id=LOOKALIKE, seat=0),
        cmd.Deposit.model_construct(player_id=LOOKALIKE, amount=5_000),
    )
    return [first, second]


async def test_ids_differing_only_by_nul_and_u_fffd_have_rows_of_their_own(
    stores: StoreFactory,
) -> None:
    """The read model stored a NUL as U+FFFD, and U+FFFD as itself: ``al<NUL>ice`` and
    ``al<U+FFFD>ice`` were one key, their accounts one row (at ``t-1`` the second player's
    deposit on the first one's, their wallets one answer). Now U+FFFD is escaped
    (``store.as_stored``): the NUL's form is unchanged, so rows folded before read as they
    did, and the two players' rows are apart, one batch or one event at a time."""
    whole, by_event = await stores.store(), await stores.store()
    scripts = two_players_one_stored_id()
    await fold(whole, *scripts)
    envelopes = [e for script in scripts for e in script.envelopes]
    for offset, envelope in enumerate(envelopes):
        await fold_envelopes(by_event, [envelope], first_offset=offset)
    assert await rows(by_event) == await rows(whole)
    accounts = (await rows(whole))["accounts"]
    found = {(a["stream_id"], a["player_id"]): a["deposited"] for a in accounts}
    nul, lookalike = as_stored(WHO), as_stored(LOOKALIKE)
    assert nul == WHO.replace("\x00", "\ufffd") and nul != lookalike
    assert found == {
        ("t-1", "bob"): 100,
        ("t-1", nul): 10_000,
        ("t-1", lookalike): 7_000,
        ("t-2", "bob"): 100,
        ("t-2", lookalike): 5_000,
    }

    transport = httpx.ASGITransport(app=query_api(whole))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        for asked, tables in [
            (quote(WHO), {"t-1": 10_000}),  # the id itself, NUL and all
            (quote(LOOKALIKE), {"t-1": 7_000, "t-2": 5_000}),
        ]:
            response = await client.get(f"/v1/players/{asked}/wallet")
            assert response.status_code == 200, response.text
            answer = response.json()
            assert {t["stream_id"]: t["deposited"] for t in answer["tables"]} == tables, asked


async def migrate_to(store: ProjectionStore, revision: str, down: bool) -> None:
    async with store.migrating() as connection:
        await connection.run_sync(migrate, revision, down)


async def revision_of(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        query = text("SELECT version_num FROM alembic_version")
        return str((await connection.execute(query)).scalar_one())


async def test_0010_refuses_a_store_that_folded_a_u_fffd_and_takes_one_with_a_nul(
    stores: StoreFactory,
) -> None:
    """A store the release before folded (here: this one's fold, then back at 0009, which
    stores the same for these events but the U+FFFD ids) is refused by 0010 when an event it
    folded holds U+FFFD (its rows in the former form: rebuild it), taken when the events hold
    only NULs (stored as before)."""
    with_fffd, with_nul = await stores.store(), await stores.store()
    await fold(with_fffd, *two_players_one_stored_id())
    await fold(with_nul, played_before_the_commands_refused_it())
    for store in (with_fffd, with_nul):
        await migrate_to(store, "0009", down=True)
    with pytest.raises(Exception, match=r"migration 0010: event .* holds U\+FFFD or U\+0001"):
        await migrate_to(with_fffd, "0010", down=False)
    assert await revision_of(with_fffd) == "0009"
    await migrate_to(with_nul, "0010", down=False)
    assert await revision_of(with_nul) == "0010"
