"""The query API's OpenAPI document (schemas/query-api.openapi.json): generated from the
models of its answers, kept up to date, served at /v1/openapi.json. That every answer is what
it says is checked on played logs (tests/integration/test_api_queries.py, SQLite and
PostgreSQL)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from openapi_spec_validator import validate
from sqlalchemy import Insert

from blackjack.api import routes
from blackjack.api.contract import PATH, ErrorCode, drifted, openapi_document
from blackjack.api.routes import QueryApi, query_api
from blackjack.cli import main
from blackjack.projections.schema import rounds, table_views
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import RoundRecord, TableView


def test_the_document_in_the_repository_is_up_to_date() -> None:
    assert not drifted(PATH), "run `blackjack openapi --write`"


def test_the_document_is_valid_openapi() -> None:
    validate(openapi_document())  # raises on anything an OpenAPI 3.1 tool would refuse


def test_the_document_names_every_route_and_its_answers() -> None:
    document = openapi_document()
    assert set(document["paths"]) == {
        "/v1/players/{player_id}/wallet",
        "/v1/players/{player_id}/rounds",
        "/v1/players/{player_id}/rounds/{round_id}",
        "/v1/rounds/{round_id}",
        "/v1/tables/{stream_id}",
        "/v1/players/{player_id}/tables/{stream_id}",
        "/v1/streams/{stream_id}/events",
        "/v1/interrupted-rounds",
        "/v1/reports/games",
        "/v1/players/{player_id}/token-revocation",  # a POST, the operator's
    }
    schemas = document["components"]["schemas"]
    entry = schemas["RecalledEntry"]["properties"]
    assert set(entry) >= {"sequence", "at", "event", "data", "command_id", "decided_by"}
    for path in document["paths"].values():
        [operation] = path.values()
        answers = operation["responses"]
        assert {"200", "401", "503"} <= set(answers)
        for answer in answers.values():
            schema = answer["content"]["application/json"]["schema"]
            for ref in [schema] if "$ref" in schema else schema["oneOf"]:
                assert ref["$ref"].removeprefix("#/components/schemas/") in schemas
    # the report by day is one of the report's answers (by=day), the one without by the other
    report = document["paths"]["/v1/reports/games"]["get"]["responses"]["200"]
    assert report["content"]["application/json"]["schema"] == {
        "oneOf": [
            {"$ref": "#/components/schemas/GamesAnswer"},
            {"$ref": "#/components/schemas/GamesByDayAnswer"},
        ]
    }


def test_every_field_of_every_answer_is_required() -> None:
    """Answers carry every field of their models, defaults included, so the document marks
    each required: a client generated from it may rely on every one being present (the played
    logs' answers are validated against these schemas in tests/integration)."""
    for name, schema in openapi_document()["components"]["schemas"].items():
        if "properties" in schema:
            assert set(schema.get("required", ())) == set(schema["properties"]), name


async def test_the_api_serves_its_document(tmp_path: Path) -> None:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    try:
        transport = httpx.ASGITransport(app=query_api(store))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            served = await http.get("/v1/openapi.json")
        assert served.status_code == 200 and served.json() == openapi_document()
        # a worker still waiting for its database serves it too (it needs no store)
        starting = httpx.ASGITransport(app=QueryApi(store, ready=lambda: False))
        async with httpx.AsyncClient(transport=starting, base_url="http://api") as http:
            assert (await http.get("/v1/openapi.json")).status_code == 200
            assert (await http.get("/v1/tables/t")).status_code == 503
            said = (await http.get("/v1/tables/t")).json()["error"]["message"]
            assert said == "the read model is starting; try again"
        # one stopping for good is not said to be starting (a projections review)
        stopping = QueryApi(store, ready=lambda: False, stopping=lambda: "schema_mismatch")
        transport = httpx.ASGITransport(app=stopping)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            answer = await http.get("/v1/tables/t")
        assert answer.status_code == 503
        message = answer.json()["error"]["message"]
        assert "stopping (schema_mismatch)" in message and "starting" not in message
    finally:
        await store.close()


def test_the_command_checks_and_writes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "api.json"
    assert main(["openapi", "--path", str(path)]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["openapi", "--path", str(path), "--write"]) == 0
    assert main(["openapi", "--path", str(path)]) == 0


def test_every_error_code_the_api_gives_is_in_the_document() -> None:
    """The second review: a bad escape in a path answered ``bad_path``, which the document's
    list of codes did not have (a client decoding by the document would fail on it)."""
    source = Path(routes.__file__).read_text()
    given = set(re.findall(r'ApiError\(\s*\d+,\s*"([a-z_]+)"', source))
    given |= set(re.findall(r'_error\("([a-z_]+)"', source))
    assert "bad_path" in given and len(given) >= 8
    assert given <= set(get_args(ErrorCode)), given - set(get_args(ErrorCode))


async def test_a_table_view_stored_before_suspending_existed_answers_every_field(
    tmp_path: Path,
) -> None:
    """A table the previous release folded and nothing has touched since has no
    ``suspended`` in its stored view: the answer, which the document says always carries it,
    carried none (it was the stored document as it is)."""
    stored = TableView(stream_id="old-t", opened=True, variant="mini-h17").model_dump(mode="json")
    del stored["suspended"]
    row = table_views.insert().values(
        stream_id="old-t",
        variant="mini-h17",
        currency="USD",
        last_sequence=1,
        updated_at=datetime(2026, 1, 1, tzinfo=UTC),
        view=stored,
    )
    answer = await _answer_from(tmp_path, row, "/v1/tables/old-t", "TableAnswer")
    assert answer["suspended"] is None and answer["opened"] is True


async def test_a_round_stored_before_the_upcard_was_recorded_answers_every_field(
    tmp_path: Path,
) -> None:
    """Round records folded before ``dealer.upcard`` existed have none: the answer, the
    stored document as it was, lacked a field the document says is always there."""
    opened = datetime(2026, 1, 1, tzinfo=UTC)
    stored = RoundRecord(
        round_id="old-t:1",
        stream_id="old-t",
        round=1,
        variant="mini-h17",
        currency="USD",
        status="settled",
        opened_at=opened,
        first_sequence=1,
        last_sequence=1,
    ).model_dump(mode="json")
    del stored["dealer"]["upcard"]
    row = rounds.insert().values(
        stream_id="old-t",
        round=1,
        round_id="old-t:1",
        variant="mini-h17",
        currency="USD",
        status="settled",
        opened_at=opened,
        closed_at=opened,
        first_sequence=1,
        last_sequence=1,
        record=stored,
    )
    answer = await _answer_from(tmp_path, row, "/v1/rounds/old-t:1", "RoundAnswer")
    assert answer["dealer"]["upcard"] is None and answer["round_id"] == "old-t:1"


async def _answer_from(tmp_path: Path, row: Insert, path: str, schema: str) -> Any:
    """The API's answer at ``path`` from a read model holding ``row`` as an older release
    stored it, checked against the OpenAPI document's ``schema``."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    try:
        async with store.engine.begin() as connection:
            await connection.execute(row)
        transport = httpx.ASGITransport(app=query_api(store))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            answer = (await http.get(path)).json()
    finally:
        await store.close()
    document = {"$ref": f"#/components/schemas/{schema}", **openapi_document()}
    Draft202012Validator(document, format_checker=FormatChecker()).validate(answer)
    return answer
