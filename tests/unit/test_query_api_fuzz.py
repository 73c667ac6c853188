"""The query API fuzzed against its own OpenAPI document (schemathesis): every operation,
with the values the document allows and ones it does not (its coverage phase: bounds, wrong
types, missing and repeated parameters, other methods), through the ASGI app in process, over
a SQLite read model folded from real played rounds (so that ids that exist are asked too).
Every answer must be one the document lists, in JSON, with the body its schema says, and no
5xx. Derandomized: the same requests on every run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi

from blackjack.api.contract import openapi_document
from blackjack.api.routes import query_api
from blackjack.api.tokens import ApiTokens
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import EventEnvelope
from blackjack.projections.queries import encode_cursor
from blackjack.projections.store import ProjectionStore
from tests.integration.conftest_projections import Script, play_tables
from tests.unit.test_interrupted_query import fold_envelopes

TOKEN = "f" * 32
CURSOR_REFUSED = "the cursor is not one this API handed out"
ODD_PLAYER = "café ?#/%:x"  # a player id that must be escaped in a URL


def played() -> list[EventEnvelope]:
    """Settled rounds at a single-seat and a multi-seat table (one whose id holds ':'), a
    round left waiting (an interrupted round), and a player whose id needs escaping."""
    log = play_tables([("t-mini", "mini-h17"), ("vip:ac-1", "atlantic-city-multi")], 4, seed=3)
    waiting = Script(
        "surrender",
        [["TS", "6H", "5S", "TD", "9C"]],
        players={ODD_PLAYER: 10_000},
        stream_id="t-waiting",
    )
    waiting.now -= timedelta(days=400)  # idle long enough for any idle_days up to a year
    waiting.do(
        cmd.PlaceBet(player_id=ODD_PLAYER, box=0, amount=1_000), cmd.Deal(player_id=ODD_PLAYER)
    )
    return [*log.envelopes, *waiting.envelopes]


ENVELOPES = played()
TABLES = sorted({e.stream_id for e in ENVELOPES if not e.stream_id.startswith("wallet:")})
ROUNDS = sorted(
    {f"{e.stream_id}:{e.data.round}" for e in ENVELOPES if isinstance(e.data, ev.RoundOpened)}
)
CURSORS = sorted(  # where a page of a player's rounds may end: after any round they bet in
    {
        encode_cursor(e.occurred_at, e.stream_id, e.data.round)
        for e in ENVELOPES
        if isinstance(e.data, ev.BetPlaced)
    }
)
PLAYERS = sorted(
    {e.data.player_id for e in ENVELOPES if isinstance(e.data, ev.SeatTaken)} | {ODD_PLAYER}
)


PAGED = ("/v1/players/{player_id}/rounds", "/v1/players/{player_id}/wallet")
"""the operations that take a cursor (the wallet's pages its tables: a rounds cursor is not
one of its own)"""


def config() -> SchemathesisConfig:
    """Known ids half the time (the answers of played rounds), the document's strings else."""
    known = {"players": PLAYERS, "rounds": ROUNDS, "tables": TABLES, "cursors": CURSORS}
    return SchemathesisConfig.from_dict(
        {
            "seed": 20261201,
            "base-url": "http://testserver",
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "dictionaries": {name: {"values": values} for name, values in known.items()},
            "parameters": {
                "path.player_id": {"dictionary": "players", "probability": 0.5},
                "path.round_id": {"dictionary": "rounds", "probability": 0.5},
                "path.stream_id": {"dictionary": "tables", "probability": 0.5},
                "query.cursor": {"dictionary": "cursors", "probability": 0.5},
            },
            "operations": [
                {  # a cursor is any string to the document, and opaque: only the API's own
                    # (those it hands out) are valid, any other a 400 it documents
                    "include-path": path,
                    "checks": {
                        "positive_data_acceptance": {"expected-statuses": ["200", "400", "404"]}
                    },
                }
                for path in PAGED
            ],
            "generation": {
                "mode": "all",
                "max-examples": 100,
                "deterministic": True,
                "database": "none",
            },
        }
    )


def with_store(store: ProjectionStore) -> Any:
    """The service app behind the query API, reduced to the lifespan: the store is filled at
    startup on the loop that then serves the requests (schemathesis runs the app on a loop of
    its own), and closed at shutdown."""

    async def lifespan(scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        await receive()  # startup
        await store.migrate()
        await fold_envelopes(store, ENVELOPES)
        await send({"type": "lifespan.startup.complete"})
        await receive()  # shutdown
        await store.close()
        await send({"type": "lifespan.shutdown.complete"})

    return lifespan


schema = schemathesis.openapi.from_dict(openapi_document(), config=config())


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[asgi.ASGIClient]:
    """A client of the app, in process, with the app's store filled (its lifespan started)."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('fuzz')}/read.db")
    tokens = ApiTokens.from_env({"BLACKJACK_API_TOKENS": TOKEN})
    app: Any = query_api(store, with_store(store), tokens)  # an ASGI app: typed apart
    schema.app = app  # where the checks' own probes (without the token...) are sent
    try:
        with asgi.get_client(app) as client:  # starts the lifespan: the store is filled
            served = client.get("/v1/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
            assert served.json() == openapi_document()  # the document fuzzed is the one served
            yield client
    finally:
        asgi.shutdown_lifespans()


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_answer_is_one_the_document_describes(case: Case[Any], api: asgi.ASGIClient) -> None:
    """Each check schemathesis has: no 5xx, a status the operation lists, its content type,
    a body its schema describes, a 4xx for what the document rules out, not a 400 for what it
    allows (a cursor excepted, above), 401 without the token, 405 with Allow for any other
    method."""
    case.operation.app = case.operation.schema.app = api.app  # where its own probes go too
    answer = case.call_and_validate(session=api)
    if (
        case.meta is not None
        and case.meta.generation.mode.is_positive
        and answer.status_code == 400
    ):
        # the one 400 a request the document allows may get: a cursor not handed out
        assert case.operation.path in PAGED, answer.text
        assert answer.json()["error"]["message"] == CURSOR_REFUSED, answer.text
