"""The query API's OpenAPI document (schemas/query-api.openapi.json): generated from the
models of its answers, kept up to date, served at /v1/openapi.json. That every answer is what
it says is checked on played logs (tests/integration/test_api_queries.py, SQLite and
PostgreSQL)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import httpx
import pytest
from openapi_spec_validator import validate

from blackjack.api import routes
from blackjack.api.contract import PATH, ErrorCode, drifted, openapi_document
from blackjack.api.routes import QueryApi, query_api
from blackjack.cli import main
from blackjack.projections.store import ProjectionStore


def test_the_document_in_the_repository_is_up_to_date() -> None:
    assert not drifted(PATH), "run `blackjack openapi --write`"


def test_the_document_is_valid_openapi() -> None:
    validate(openapi_document())  # raises on anything an OpenAPI 3.1 tool would refuse


def test_the_document_names_every_route_and_its_answers() -> None:
    document = openapi_document()
    assert set(document["paths"]) == {
        "/v1/players/{player_id}/wallet",
        "/v1/players/{player_id}/rounds",
        "/v1/rounds/{round_id}",
        "/v1/tables/{stream_id}",
        "/v1/interrupted-rounds",
    }
    schemas = document["components"]["schemas"]
    entry = schemas["RecalledEntry"]["properties"]
    assert set(entry) >= {"sequence", "at", "event", "data", "command_id", "decided_by"}
    for path in document["paths"].values():
        answers = path["get"]["responses"]
        assert {"200", "401", "503"} <= set(answers)
        for answer in answers.values():
            ref = answer["content"]["application/json"]["schema"]["$ref"]
            assert ref.removeprefix("#/components/schemas/") in schemas


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
