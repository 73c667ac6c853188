"""The game performance report (``game_days``, ``GET /v1/reports/games``, ``blackjack
projections report``) on SQLite and PostgreSQL: each table's rounds summed per UTC day as
they close, checked against sums taken from the events themselves, the same after a rebuild
and after migration 0005 summed the rounds already folded, and the answer as documented."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from prometheus_client import REGISTRY
from sqlalchemy import func, select, text
from sqlalchemy.dialects import sqlite

from blackjack.api.contract import openapi_document
from blackjack.api.routes import query_api
from blackjack.cli import main
from blackjack.domain import events as ev
from blackjack.domain.rules import PRESETS, fingerprint, stored_rules
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections import reports, schema
from blackjack.projections.dump import dump
from blackjack.projections.metrics import count_folded
from blackjack.projections.queries import folded_positions
from blackjack.projections.reports import MAX_DAYS, game_performance, percent, summing
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from blackjack.rules_sheet import Returns, table_returns
from tests.integration.conftest_projections import (
    StoreFactory,
    play_tables,
)
from tests.unit.migrations import migrate

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
TABLES = [
    ("r-mini-h17", "mini-h17"),
    ("r-multi", "atlantic-city-multi"),
    ("r-surrender", "surrender"),
    ("r-atlantic", "atlantic-city"),
]
# from four minutes before midnight: the rounds close on two UTC days
LOG = play_tables(TABLES, rounds=40, seed=11, start=datetime(2026, 2, 28, 23, 56, tzinfo=UTC))
RECORDS = [
    Record("blackjack.events", 0, offset, encode(to_wire(envelope, SEAL)))
    for offset, envelope in enumerate(LOG.envelopes)
]
SUMS = ("rounds", "cancelled", "player_rounds", "initial_bets", "wagered", "paid")
NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)


def _read_when(report: dict[str, Any]) -> dict[str, Any]:
    """A report without the time it was read at (two reads differ in it alone)."""
    return {key: value for key, value in report.items() if key != "as_of"}


def days_from_the_events() -> dict[tuple[str, date], dict[str, int]]:
    """The report's figures taken from the events alone, another way than the fold: each
    box's bet followed through BetPlaced and BetRefunded to the boxes DealStarted deals."""
    days: dict[tuple[str, date], dict[str, int]] = defaultdict(lambda: dict.fromkeys(SUMS, 0))
    bets: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    for envelope in LOG.envelopes:
        e, key = envelope.data, envelope.stream_id
        if isinstance(e, ev.BetPlaced | ev.BetRefunded):
            on_the_box = bets[(key, e.round)]
            on_the_box[e.box] = e.box_total
        elif isinstance(e, ev.DealStarted):
            placed = bets[(key, e.round)]
            bets[(key, e.round)] = {box: placed[box] for box in e.boxes}
        elif isinstance(e, ev.RoundSettled):
            day = days[(key, envelope.occurred_at.date())]
            day["rounds"] += 1
            day["player_rounds"] += len(e.results)
            day["initial_bets"] += sum(bets[(key, e.round)].values())
            day["wagered"] += sum(r.wagered for r in e.results)
            day["paid"] += sum(r.paid for r in e.results)
        elif isinstance(e, ev.RoundCancelled):
            days[(key, envelope.occurred_at.date())]["cancelled"] += 1
    return dict(days)


EXPECTED = days_from_the_events()
EXPECTED_ROUNDS = {
    stream: sum(sums["rounds"] for (s, _), sums in EXPECTED.items() if s == stream)
    for stream, _ in TABLES
}
VARIANT = dict(TABLES)


@pytest.fixture
async def folded(stores: StoreFactory) -> AsyncIterator[ProjectionStore]:
    store = await stores.store()
    await ProjectionWriter(store).apply(RECORDS)
    yield store


async def stored_days(store: ProjectionStore) -> dict[tuple[str, date], dict[str, int]]:
    async with store.reading() as connection:
        rows = (await connection.execute(select(schema.game_days))).mappings().all()
    found = {}
    for row in rows:
        assert row["variant"] == VARIANT[row["stream_id"]] and row["currency"] == "USD"
        found[(row["stream_id"], row["day"])] = {name: row[name] for name in SUMS}
    return found


def test_the_log_has_what_the_report_must_sum() -> None:
    """Rounds at every table over more than one UTC day, doubled and split hands, insurance,
    a box's bet taken back: so the sums below could be wrong in each of those ways."""
    types = {e.type for e in LOG.envelopes}
    assert {"HandDoubled", "HandSplit", "InsuranceTaken", "BetRefunded"} <= types
    assert len({day for _, day in EXPECTED}) >= 2
    assert {stream for stream, _ in EXPECTED} == {stream for stream, _ in TABLES}


async def test_each_table_s_day_sums_its_rounds_as_the_events_tell(
    folded: ProjectionStore,
) -> None:
    assert await stored_days(folded) == EXPECTED
    # and the hold is what the accounts' own fold says the players lost, wager by wager
    async with folded.reading() as connection:
        a = schema.accounts
        won, lost = (await connection.execute(select(func.sum(a.c.won), func.sum(a.c.lost)))).one()
    totals = [sum(day[name] for day in EXPECTED.values()) for name in ("wagered", "paid")]
    assert totals[0] - totals[1] == int(lost) - int(won)


async def test_folding_event_by_event_gives_the_same_days(stores: StoreFactory) -> None:
    """A day's row is a sum over batches: one record a batch adds up to the same."""
    store = await stores.store()
    writer = ProjectionWriter(store)
    for record in RECORDS:
        await writer.apply([record])
    assert await stored_days(store) == EXPECTED


async def test_migration_0005_sums_the_rounds_folded_before_it(folded: ProjectionStore) -> None:
    async with folded.reading() as connection:
        before = await dump(connection)
    async with folded.writing() as connection:
        await connection.run_sync(migrate, "0004", True)
    async with folded.reading() as connection:
        tables = await connection.run_sync(lambda c: c.dialect.get_table_names(c))
    assert "game_days" not in tables
    await folded.migrate()  # 0005 again, on the rounds 0004 holds
    async with folded.reading() as connection:
        after = await dump(connection)
    assert after.text() == before.text()
    assert len(after.table("game_days").rows) == len(EXPECTED)


def _by_game(first: date, last: date) -> dict[str, dict[str, int]]:
    games: dict[str, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(SUMS, 0))
    tables: dict[str, set[str]] = defaultdict(set)
    for (stream, day), sums in EXPECTED.items():
        if first <= day <= last:
            tables[VARIANT[stream]].add(stream)
            for name in SUMS:
                games[VARIANT[stream]][name] += sums[name]
    return {variant: {**sums, "tables": len(tables[variant])} for variant, sums in games.items()}


async def test_the_report_sums_each_game_over_the_days_asked(folded: ProjectionStore) -> None:
    days = sorted({day for _, day in EXPECTED})
    validator = Draft202012Validator(
        {**openapi_document(), "$ref": "#/components/schemas/GamesAnswer"},
        format_checker=FormatChecker(),
    )
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        for first, last in [(days[0], days[-1]), (days[1], days[1]), (days[0], days[0])]:
            span = (last - first).days + 1
            query = f"from={first}" + ("" if span == 1 else f"&days={span}")
            response = await api.get(f"/v1/reports/games?{query}")
            assert response.status_code == 200, response.text
            answer = response.json()
            validator.validate(answer)
            assert (answer["from"], answer["to"]) == (str(first), str(last))
            lines = {line["variant"]: line for line in answer["games"]}
            assert [line["variant"] for line in answer["games"]] == sorted(lines)
            expected = _by_game(first, last)
            assert {v: {k: line[k] for k in (*SUMS, "tables")} for v, line in lines.items()} == (
                expected
            )
            for line in lines.values():
                assert line["currency"] == "USD"
                assert line["hold"] == line["wagered"] - line["paid"]
                assert line["rtp_percent"] == percent(line["paid"], line["wagered"])
        # a day with no round closed: nothing to report, an empty list
        empty = (await api.get(f"/v1/reports/games?from={days[-1] + timedelta(days=1)}")).json()
        assert empty["games"] == [] and empty["to"] == empty["from"] and empty["ended"]
        # the range ends at the calendar's last day; one still to come is not over (before,
        # it read as days with nothing to report: an operations review)
        last = (await api.get("/v1/reports/games?from=9999-12-30&days=366")).json()
        assert (last["from"], last["to"], last["games"]) == ("9999-12-30", "9999-12-31", [])
        assert not last["ended"]
        today = (await api.get("/v1/reports/games")).json()
        assert not today["ended"] and today["from"] == today["as_of"][:10]
        async with folded.reading() as connection:
            assert last["positions"] == await folded_positions(connection) != []


@pytest.mark.parametrize(
    "query",
    [
        "from=2026-3-1",
        "from=2026-W09-1",
        "from=20260301",
        "from=2026-02-30",
        "from=0000-01-01",
        "from=2026-03-01%0A",
        f"days={MAX_DAYS + 1}",
        "days=0",
        "days=-1",
        "days=",
        "from=2026-03-01&from=2026-03-02",
        "from=",
        "by=week",
        "by=",
        "by=DAY",
        "by=day&by=day",
        "rules=split",
        "rules=",
        "rules=apart&rules=together",
    ],
)
async def test_a_bad_range_is_a_400_naming_it(folded: ProjectionStore, query: str) -> None:
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        response = await api.get(f"/v1/reports/games?{query}")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "bad_parameter"


async def cli(argv: list[str]) -> int:
    """The command line, on a thread of its own: it runs its own event loop."""
    return await asyncio.to_thread(main, argv)


async def test_the_command_line_prints_the_api_s_answer(
    folded: ProjectionStore, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    days = sorted({day for _, day in EXPECTED})
    span = ["--from", str(days[0]), "--days", str(len(days))]
    assert await cli(["projections", "report", "--db-url", folded.url, *span, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        served = await api.get(f"/v1/reports/games?from={days[0]}&days={len(days)}")
    assert _read_when(printed) == _read_when(served.json())
    assert await cli(["projections", "report", "--db-url", folded.url, *span]) == 0
    text = capsys.readouterr().out
    for line in printed["games"]:
        assert (
            f"{line['variant']} USD: {line['rounds']} rounds settled and {line['cancelled']} "
            "cancelled"
        ) in text
        assert f"hold {line['hold']};" in text
    with pytest.raises(SystemExit):  # argparse: exit 2 with the usage
        await cli(["projections", "report", "--db-url", folded.url, "--from", "2026-W09-1"])
    too_long = ["--days", str(MAX_DAYS + 1)]
    assert await cli(["projections", "report", "--db-url", folded.url, *too_long]) == 2


async def test_the_worker_counts_each_game_s_money_once_folded(stores: StoreFactory) -> None:
    """The batch's closed rounds by game, as the worker exports them after the commit."""
    store = await stores.store()
    result = await ProjectionWriter(store).apply(RECORDS)
    first, last = min(d for _, d in EXPECTED), max(d for _, d in EXPECTED)
    expected = _by_game(first, last)
    assert {
        (variant, currency): {name: getattr(game, name) for name in SUMS}
        for (variant, currency), game in result.games.items()
    } == {(v, "USD"): {name: sums[name] for name in SUMS} for v, sums in expected.items()}

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = {
        v: sample("blackjack_wagered_minor_units_total", variant=v, currency="USD")
        for v in expected
    }
    paid = {
        v: sample("blackjack_paid_minor_units_total", variant=v, currency="USD") for v in expected
    }
    settled = {
        v: sample("blackjack_rounds_closed_total", variant=v, currency="USD", outcome="settled")
        for v in expected
    }
    count_folded(result)
    for variant, sums in expected.items():
        labels = {"variant": variant, "currency": "USD"}
        assert sample("blackjack_wagered_minor_units_total", **labels) == (
            before[variant] + sums["wagered"]
        )
        assert sample("blackjack_paid_minor_units_total", **labels) == paid[variant] + sums["paid"]
        assert sample("blackjack_rounds_closed_total", **labels, outcome="settled") == (
            settled[variant] + sums["rounds"]
        )


async def test_the_report_counts_the_tables_opened_with_their_own_rules(
    folded: ProjectionStore,
) -> None:
    """The preset's theoretical return is not that of a table opened with overrides: the
    report says how many of a game's tables are such (a review's point: they were counted in
    their preset's line, unmarked)."""
    days = sorted({day for _, day in EXPECTED})
    query = f"/v1/reports/games?from={days[0]}&days={len(days)}"
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        before = {line["variant"]: line for line in (await api.get(query)).json()["games"]}
        assert {v: line["tables_with_own_rules"] for v, line in before.items()} == dict.fromkeys(
            before, 0
        )
        t = schema.table_views
        async with folded.writing() as connection:
            view = (
                await connection.execute(select(t.c.view).where(t.c.stream_id == "r-surrender"))
            ).scalar_one()
            view["rules"]["min_bet"] = view["rules"]["min_bet"] + 100
            await connection.execute(
                t.update().where(t.c.stream_id == "r-surrender").values(view=view)
            )
        after = {line["variant"]: line for line in (await api.get(query)).json()["games"]}
    assert after["surrender"]["tables_with_own_rules"] == 1
    assert all(line["tables_with_own_rules"] == 0 for v, line in after.items() if v != "surrender")


def answer_validator() -> Draft202012Validator:
    """The schema of the report's 200 as the document has it: one of its answers."""
    document = openapi_document()
    answer = document["paths"]["/v1/reports/games"]["get"]["responses"]["200"]
    schema_ = answer["content"]["application/json"]["schema"]
    return Draft202012Validator({**document, **schema_}, format_checker=FormatChecker())


def _summed(lines: list[dict[str, Any]]) -> dict[str, int]:
    return {name: sum(line[name] for line in lines) for name in (*SUMS, "hold")}


async def test_the_report_by_day_gives_each_day_s_lines_which_add_up_to_the_range_s(
    folded: ProjectionStore,
) -> None:
    """A regulator's return is filed per day: ``by=day`` lists every day of the range (one
    with no round closed with no line), each day's lines as the events say, adding up to the
    range's lines; the answer without ``by`` stays what it was."""
    played = sorted({day for _, day in EXPECTED})
    first, last = played[0] - timedelta(days=1), played[-1] + timedelta(days=1)
    span = (last - first).days + 1
    validator = answer_validator()
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        query = f"/v1/reports/games?from={first}&days={span}"
        plain = (await api.get(query)).json()
        same = (await api.get(f"{query}&by=game&rules=together")).json()
        assert _read_when(same) == _read_when(plain)
        response = await api.get(f"{query}&by=day")
    assert response.status_code == 200, response.text
    answer = response.json()
    validator.validate(answer)
    validator.validate(plain)
    top = {"from", "to", "as_of", "ended", "positions", "games"}
    assert "days" not in plain and set(plain) == top
    assert _read_when({k: answer[k] for k in top}) == _read_when(plain)
    assert all(day["ended"] for day in answer["days"])  # (the log's days are past)
    assert [day["day"] for day in answer["days"]] == [
        str(first + timedelta(days=n)) for n in range(span)
    ]
    assert answer["days"][0]["games"] == [] and answer["days"][-1]["games"] == []
    for day in answer["days"]:
        expected = _by_game(date.fromisoformat(day["day"]), date.fromisoformat(day["day"]))
        found = {line["variant"]: {k: line[k] for k in (*SUMS, "tables")} for line in day["games"]}
        assert found == expected
        for line in day["games"]:
            assert line["hold"] == line["wagered"] - line["paid"]
            assert line["rtp_percent"] == percent(line["paid"], line["wagered"])
    assert len([day for day in answer["days"] if day["games"]]) == len(played) >= 2
    for total in answer["games"]:
        each = [
            line
            for day in answer["days"]
            for line in day["games"]
            if line["variant"] == total["variant"]
        ]
        assert _summed(each) == {k: total[k] for k in (*SUMS, "hold")}
        assert (
            max(line["tables"] for line in each)
            <= total["tables"]
            <= sum(line["tables"] for line in each)
        )


async def _table_like(
    store: ProjectionStore, source: str, stream_id: str, rules: dict[str, Any] | None
) -> None:
    """Another table of ``source``'s game, with its rounds and ``rules`` (None: the same)."""
    t, g = schema.table_views, schema.game_days
    async with store.writing() as connection:
        view = (await connection.execute(select(t).where(t.c.stream_id == source))).one()
        values = {**view._asdict(), "stream_id": stream_id}
        values["view"] = {**view.view, "stream_id": stream_id, "rules": rules or view.view["rules"]}
        await connection.execute(t.insert().values(**values))
        days = (await connection.execute(select(g).where(g.c.stream_id == source))).all()
        for day in days:
            await connection.execute(g.insert().values(**{**day._asdict(), "stream_id": stream_id}))


def as_an_earlier_release(rules: dict[str, Any]) -> dict[str, Any]:
    """The same rules as an earlier release stored them: another document (no
    interrupted_round_days, the keys in another order)."""
    return {k: rules[k] for k in reversed(rules) if k != "interrupted_round_days"}


async def test_rules_apart_puts_each_own_rule_set_on_its_own_line(
    folded: ProjectionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """The preset's line holds only the tables of the preset's rules (the one to hold against
    the preset's theoretical return), each rule set of their own a line with its fingerprint
    (equal rules stored by two releases one line); the lines add up to the game's line
    together, by range and by day."""
    preset_doc = await _rules_of(folded, "r-surrender")
    higher = {**preset_doc, "min_bet": preset_doc["min_bet"] + 100}
    no_surrender = {**preset_doc, "late_surrender": False}
    await _table_like(folded, "r-surrender", "r-surrender-b", higher)
    await _table_like(folded, "r-surrender", "r-surrender-c", as_an_earlier_release(higher))
    await _table_like(folded, "r-surrender", "r-surrender-a", no_surrender)
    await _table_like(folded, "r-surrender", "r-surrender-p", as_an_earlier_release(preset_doc))
    played = sorted({day for _, day in EXPECTED})
    query = f"/v1/reports/games?from={played[0]}&days={len(played)}"
    validator = answer_validator()
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        together = (await api.get(f"{query}&by=day")).json()
        apart = (await api.get(f"{query}&by=day&rules=apart")).json()
    validator.validate(apart)
    surrender = [line for line in apart["games"] if line["variant"] == "surrender"]
    assert [
        (line["own_rules"], line["rules_table"], line["tables"], line["tables_with_own_rules"])
        for line in surrender
    ] == [
        (False, "r-surrender", 2, 0),
        *sorted(
            [(True, "r-surrender-a", 1, 1), (True, "r-surrender-b", 2, 2)],
            key=lambda own: fingerprint(no_surrender if own[1] == "r-surrender-a" else higher),
        ),
    ]
    assert surrender[0]["rules"] == fingerprint(PRESETS["surrender"])
    assert {line["rules"] for line in surrender[1:]} == {
        fingerprint(stored_rules(higher)),
        fingerprint(stored_rules(no_surrender)),
    }
    one = _summed([line for line in together["games"] if line["variant"] == "surrender"])
    assert one["rounds"] == 5 * EXPECTED_ROUNDS["r-surrender"]
    # the other games have one table each, of the preset's rules: the same line, marked so
    for line in apart["games"]:
        if line["variant"] != "surrender":
            assert (line["own_rules"], line["rules"]) == (
                False,
                fingerprint(PRESETS[line["variant"]]),
            )
    for split, combined in [(apart["games"], together["games"])] + [
        (a["games"], b["games"]) for a, b in zip(apart["days"], together["days"], strict=True)
    ]:
        for line in combined:
            mine = [other for other in split if other["variant"] == line["variant"]]
            assert _summed(mine) == {k: line[k] for k in (*SUMS, "hold")}
            for name in ("tables", "tables_with_own_rules"):
                assert sum(other[name] for other in mine) == line[name]
        assert len(split) == len(combined) + (2 if combined else 0)
    assert (
        next(line for line in together["games"] if line["variant"] == "surrender")[
            "tables_with_own_rules"
        ]
        == 3
    )
    # the command line reads a line's rules by its table, with the same fingerprint
    url = ["--db-url", folded.url, "--no-return"]
    for line in surrender:
        assert await cli(["rules", "--table", line["rules_table"], *url]) == 0
        assert capsys.readouterr().out.endswith(
            f"Fingerprint (the game report's rules=apart lines): {line['rules']}\n"
        )
    # --theoretical: each rule set's own return beside its line (before: none on theirs)
    span = ["--from", str(played[0]), "--days", str(len(played))]
    asked = ["projections", "report", "--db-url", folded.url, *span, "--rules-apart"]
    assert await cli([*asked, "--theoretical"]) == 0
    printed = [s for s in capsys.readouterr().out.splitlines() if s.startswith("surrender")]
    preset, lower, same = (
        table_returns(rules)
        for rules in (PRESETS["surrender"], stored_rules(no_surrender), stored_rules(higher))
    )
    # a higher minimum bet changes no odds at large bets, but leaves out the bets that round
    # worst; no surrender changes the odds
    assert lower.rtp_percent < preset.rtp_percent == same.rtp_percent
    assert preset.lowest_at_bet < same.lowest_at_bet and preset.lowest_percent < same.lowest_percent

    def said_of(returns: Returns, rules: str = "") -> str:
        return (
            f"(theoretical {returns.rtp_percent:.4f} % under basic strategy{rules}, "
            f"{returns.lowest_percent:.4f} % at the lowest, at a bet of {returns.lowest_at_bet})"
        )

    expected = {
        fingerprint(PRESETS["surrender"]): said_of(preset),
        fingerprint(stored_rules(no_surrender)): said_of(lower, " and these rules"),
        fingerprint(stored_rules(higher)): said_of(same, " and these rules"),
    }
    assert len(printed) == 3
    for said, line in zip(printed, surrender, strict=True):
        assert line["rules"] in said and expected[line["rules"]] in said


async def test_the_command_line_prints_the_report_by_day_and_rules_apart(
    folded: ProjectionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    await _table_like(
        folded,
        "r-mini-h17",
        "r-mini-h17-own",
        {**(await _rules_of(folded, "r-mini-h17")), "min_bet": 900},
    )
    played = sorted({day for _, day in EXPECTED})
    first = played[0] - timedelta(days=1)
    span = ["--from", str(first), "--days", str(len(played) + 1)]
    options = ["--by-day", "--rules-apart"]
    store = ["--db-url", folded.url]
    assert await cli(["projections", "report", *store, *span, *options, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        query = f"from={first}&days={len(played) + 1}&by=day&rules=apart"
        served = (await api.get(f"/v1/reports/games?{query}")).json()
        assert _read_when(printed) == _read_when(served)
    assert await cli(["projections", "report", *store, *span, *options]) == 0
    out = capsys.readouterr().out
    text = out[out.index("Game performance, UTC days") :].splitlines()
    assert text[1] == f"{first}: no round closed"
    for day in printed["days"][1:]:
        at = text.index(f"{day['day']}:")
        for n, line in enumerate(day["games"], start=1):
            assert text[at + n].startswith(f"  {line['variant']} USD, ")
            assert f"hold {line['hold']};" in text[at + n]
    ranged = text.index(f"All {len(played) + 1} days:")
    own = [line for line in printed["games"] if line["own_rules"]]
    assert [line["rules_table"] for line in own] == ["r-mini-h17-own"]
    assert text[ranged + 1 :] == [
        line
        for line in text[ranged + 1 :]
        if line.startswith(("  mini-h17 USD, the preset's rules", "  mini-h17 USD, own rules"))
        or not line.startswith("  mini-h17")
    ]
    assert any(
        f"own rules {own[0]['rules']}: " in line
        and line.endswith("(their rules: blackjack rules --table r-mini-h17-own)")
        for line in text[ranged + 1 :]
    )


async def _rules_of(store: ProjectionStore, stream_id: str) -> dict[str, Any]:
    t = schema.table_views
    async with store.reading() as connection:
        query = select(t.c.view).where(t.c.stream_id == stream_id)
        rules: dict[str, Any] = (await connection.execute(query)).scalar_one()["rules"]
    return rules


@pytest.mark.parametrize("by_day", [False, True])
async def test_on_sqlite_the_report_looks_each_table_s_days_up_by_their_key(
    tmp_path: Path, by_day: bool
) -> None:
    """Measured with 400,000 rows: joined the other way (game_days outer), SQLite read every
    table's rule set for each row, and a 31-day report over 10,000 tables ran for more than 14
    minutes. The plan must look a table's days up by game_days' key."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    try:
        await store.migrate()
        await ProjectionWriter(store).apply(RECORDS)
        statement = summing(date(2026, 2, 1), date(2026, 3, 3), by_day).compile(
            dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}
        )
        async with store.reading() as connection:
            plan = [
                row[3]
                for row in (await connection.execute(text(f"EXPLAIN QUERY PLAN {statement}")))
            ]
    finally:
        await store.close()
    assert any(
        step.startswith("SEARCH game_days USING INDEX sqlite_autoindex_game_days_1 (stream_id=?")
        for step in plan
    ), plan
    assert not any("LEFT-JOIN" in step and step.startswith("SCAN") for step in plan), plan


async def test_a_table_with_no_view_is_summed_with_its_preset_s(folded: ProjectionStore) -> None:
    """The writer saves a table's view with its days; a day whose table has none is summed
    all the same, on the preset's line (as tables_with_own_rules always counted it)."""
    async with folded.writing() as connection:
        t = schema.table_views
        await connection.execute(t.delete().where(t.c.stream_id == "r-mini-h17"))
    played = sorted({day for _, day in EXPECTED})
    expected = _by_game(played[0], played[-1])["mini-h17"]
    transport = httpx.ASGITransport(app=query_api(folded))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        query = f"/v1/reports/games?from={played[0]}&days={len(played)}"
        for options in ("", "&rules=apart", "&by=day&rules=apart"):
            answer = (await api.get(query + options)).json()
            (line,) = [line for line in answer["games"] if line["variant"] == "mini-h17"]
            assert {k: line[k] for k in (*SUMS, "tables")} == expected
            assert line["tables_with_own_rules"] == 0
            if options:
                assert (line["own_rules"], line["rules"]) == (
                    False,
                    fingerprint(PRESETS["mini-h17"]),
                )


async def test_rule_sets_are_read_a_few_at_a_time(
    folded: ProjectionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every table of a range may have rules of its own: their documents are read in
    statements of at most RULE_SETS_A_STATEMENT (a statement's parameters are bounded)."""
    doc = await _rules_of(folded, "r-surrender")
    for n in range(5):
        await _table_like(folded, "r-surrender", f"r-surrender-{n}", {**doc, "max_bet": 1000 + n})
    played = sorted({day for _, day in EXPECTED})
    async with folded.reading() as connection:
        whole = await game_performance(
            connection, played[0], len(played), now=NOW, rules_apart=True
        )
    monkeypatch.setattr(reports, "RULE_SETS_A_STATEMENT", 2)
    async with folded.reading() as connection:
        few = await game_performance(connection, played[0], len(played), now=NOW, rules_apart=True)
    assert few == whole
    assert len([line for line in few["games"] if line["own_rules"]]) == 5


async def test_a_voided_round_is_counted_apart_with_none_of_its_money(
    stores: StoreFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mini-h17 round voided for a malfunction (page 000) and the round after it, folded
    on each store: ``voided`` 1, and the sums are the settled round's alone; the API, the
    command line and the worker's counter say so."""
    from blackjack.domain import commands as cmd
    from tests.integration.conftest_projections import Script

    day = datetime(2026, 3, 2, 12, tzinfo=UTC)
    script = Script("mini-h17", [["8S", "6H", "8D", "TD", "3C", "2C", "9D"]], {"ann": 10_000})
    script.now = day
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1_000),
        cmd.Deal(player_id="ann"),
        cmd.Split(player_id="ann", box=0),
        cmd.VoidRound(round=1, operator="ops-1", reason="card reader fault"),
    )
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=500),
        cmd.Deal(player_id="ann"),
    )
    while script.state.hands_in_play:  # whatever the shoe dealt next: no insurance, stand
        if script.state.phase == "insurance":
            script.do(cmd.DeclineInsurance(player_id="ann", box=0))
        else:
            script.do(cmd.Stand(player_id="ann", box=0))
    script.now = day + timedelta(days=1)  # a day with a voided round and no other
    script.do(cmd.PlaceBet(player_id="ann", box=0, amount=700))
    script.do(cmd.VoidRound(round=3, operator="ops-1", reason="card reader fault"))
    records = [
        Record("blackjack.events", 0, offset, encode(to_wire(envelope, SEAL)))
        for offset, envelope in enumerate(e for e in script.envelopes if e.stream_id == "table-1")
    ]
    store = await stores.store()
    result = await ProjectionWriter(store).apply(records)
    async with store.reading() as connection:
        rows = (await connection.execute(select(schema.game_days))).mappings().all()
    row, next_day = sorted(rows, key=lambda r: r["day"])
    assert (next_day["voided"], next_day["rounds"], next_day["wagered"]) == (1, 0, 0)
    [settled] = [e.data for e in script.envelopes if isinstance(e.data, ev.RoundSettled)]
    assert (row["voided"], row["rounds"], row["cancelled"]) == (1, 1, 0)
    assert (row["wagered"], row["paid"]) == (settled.results[0].wagered, settled.results[0].paid)
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        answer = (await api.get("/v1/reports/games?from=2026-03-02&days=1")).json()
    [line] = answer["games"]
    assert (line["voided"], line["rounds"], line["wagered"]) == (1, 1, row["wagered"])
    span = ["--from", "2026-03-02", "--days", "1"]
    assert await cli(["projections", "report", "--db-url", store.url, *span]) == 0
    assert "1 round settled, 0 cancelled and 1 voided at 1 table(s)" in capsys.readouterr().out
    labels = {"variant": "mini-h17", "currency": "USD", "outcome": "voided"}
    before = REGISTRY.get_sample_value("blackjack_rounds_closed_total", labels) or 0.0
    count_folded(result)
    assert REGISTRY.get_sample_value("blackjack_rounds_closed_total", labels) == before + 2
    # down below 0005 and up again: 0005 sums the settled and cancelled rounds, 0007 the voided
    async with store.reading() as connection:
        folded_once = (await dump(connection)).text()
    async with store.writing() as connection:
        await connection.run_sync(migrate, "0004", True)
    await store.migrate()
    async with store.reading() as connection:
        assert (await dump(connection)).text() == folded_once
