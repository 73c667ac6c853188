"""The query API's table answers the table's rules with every term written out. The
``TableOpened`` document leaves out a preset's own terms (``PRESET_TERMS``, so the presets'
documents and fingerprints stay those of the release before the terms): a client reading
the answer's ``rules`` as it is read mini-s17's and surrender's busts as settled with the
round (an integrator's finding)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from blackjack.domain import events as ev
from blackjack.domain.rules import PRESET_TERMS, PRESETS, Rules
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.queries import player_table, table_state
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import Script, event_records

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


def opened_document(script: Script) -> dict[str, Any]:
    """The rules document the table's ``TableOpened`` carries."""
    opened = script.envelopes[0].data
    assert isinstance(opened, ev.TableOpened)
    return opened.rules.model_dump(mode="json")


@asynccontextmanager
async def folded(tmp_path: Path, script: Script) -> AsyncIterator[ProjectionStore]:
    """A read model on SQLite with the table's events folded in."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    try:
        await ProjectionWriter(store).apply(event_records(script.envelopes, SEAL))
        yield store
    finally:
        await store.close()


async def answered_rules(tmp_path: Path, script: Script) -> tuple[dict[str, Any], dict[str, Any]]:
    async with folded(tmp_path, script) as store, store.reading() as connection:
        table = await table_state(connection, "table-1")
        seen = await player_table(connection, "alice", "table-1")
    assert table is not None and seen is not None
    return table["rules"], seen["rules"]


@pytest.mark.parametrize("variant", sorted(PRESETS))
async def test_a_preset_table_answers_every_term_of_its_rules(tmp_path: Path, variant: str) -> None:
    script = Script(variant, [])
    opened = opened_document(script)
    rules, as_the_player_sees_them = await answered_rules(tmp_path, script)
    assert rules == as_the_player_sees_them
    assert set(rules) == set(Rules.model_fields)
    preset = PRESETS[variant]
    assert {t: rules[t] for t in PRESET_TERMS} == {t: getattr(preset, t) for t in PRESET_TERMS}
    assert Rules.model_validate(rules) == preset
    assert {k: v for k, v in rules.items() if k in opened} == opened
    if variant in ("mini-s17", "surrender"):  # the terms the event leaves out, said
        assert "bust_settled_at_once" not in opened and rules["bust_settled_at_once"] is True


async def test_a_term_overridden_off_its_preset_is_answered_as_overridden(
    tmp_path: Path,
) -> None:
    script = Script("surrender", [], overrides={"bust_settled_at_once": False})
    rules, _ = await answered_rules(tmp_path, script)
    assert (rules["bust_settled_at_once"], rules["surrender_paid_at_once"]) == (False, True)
    assert opened_document(script)["bust_settled_at_once"] is False


async def test_a_term_this_release_does_not_know_is_answered_as_stored(tmp_path: Path) -> None:
    """A newer release's table (its workers rolled back): the document as stored, with the
    later terms, rather than a 500."""
    async with folded(tmp_path, Script("mini-s17", [])) as store:
        t = schema.table_views
        async with store.writing() as connection:
            view = (await connection.execute(select(t.c.view))).scalar_one()
            view["rules"]["a_later_term"] = True
            await connection.execute(update(t).values(view=view))
        async with store.reading() as connection:
            table = await table_state(connection, "table-1")
    assert table is not None
    assert table["rules"]["a_later_term"] is True and "bust_settled_at_once" not in table["rules"]


# What each preset's value of a term a stored document may leave out was when the term came.
PINNED_TERMS: dict[str, dict[str, object]] = {
    "mini-h17": {"void_on_malfunction": True, "bust_settled_at_once": False},
    "mini-s17": {"void_on_malfunction": False, "bust_settled_at_once": True},
    "atlantic-city": {"move_declines_insurance": True, "bust_settled_at_once": False},
    "atlantic-city-multi": {"move_declines_insurance": True, "bust_settled_at_once": False},
    "surrender": {
        "surrender_paid_at_once": True,
        "bust_settled_at_once": True,
        "interrupted_round_days": 30,
    },
}


def test_a_preset_s_value_of_a_term_its_tables_leave_out_never_changes() -> None:
    """A table opened from a preset stores no term of ``PRESET_TERMS`` that is the preset's,
    and one an earlier release opened none of ``LATER_TERMS``: each reads the preset's value
    now. Changed in ``PRESETS``, every such table would play on under the new value with the
    same document and fingerprint (a style review's finding). Such a change is a new preset or
    an override, never an edit: this pins the values (the rest are each term's default)."""
    from blackjack.domain.rules import LATER_TERMS

    for name, preset in PRESETS.items():
        pinned = PINNED_TERMS[name]
        for term in (*PRESET_TERMS, *LATER_TERMS):
            default = Rules.model_fields[term].default
            assert getattr(preset, term) == pinned.get(term, default), (name, term)
