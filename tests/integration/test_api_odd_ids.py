"""Ids and cursors no store can hold get the query API's 4xx on PostgreSQL as on SQLite, not
a 500 from the driver (found by fuzzing the API against its document,
tests/unit/test_query_api_fuzz.py): a round number past the 32-bit ``round`` column, a NUL
character (PostgreSQL's text has none), a lone surrogate (UTF-8 has none). No broker: the
rounds are folded in directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.projections.queries import _wallet_cursor, encode_cursor
from tests.integration.conftest_projections import Script, StoreFactory
from tests.unit.test_interrupted_query import fold

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

PAST_INT32 = 2**31
NUL_STREAM = "table-1\x00"
LONE_SURROGATE = "table-\ud800"


@pytest.fixture
async def api(stores: StoreFactory) -> AsyncIterator[httpx.AsyncClient]:
    store = await stores.store()
    played = Script("mini-h17", [["TH", "7S", "9H", "QD"]], stream_id="table-1")
    played.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1_000),
        cmd.Deal(player_id="alice"),
        cmd.Stand(player_id="alice", box=0),
    )
    await fold(store, played)
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


def cursor(stream_id: str, number: int) -> str:
    return encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), stream_id, number)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        (f"/v1/rounds/table-1:{PAST_INT32}", 404, "unknown_round"),
        (f"/v1/rounds/table-1:{2**63}", 404, "unknown_round"),
        ("/v1/rounds/table-1:" + "9" * 5000, 404, "unknown_round"),
        ("/v1/rounds/table%00-1:1", 404, "unknown_round"),
        ("/v1/players/al%00ice/wallet", 404, "unknown_player"),
        ("/v1/players/al%00ice/rounds", 404, "unknown_player"),
        ("/v1/tables/table%00-1", 404, "unknown_table"),
        ("/v1/players/al%00ice/rounds/table-1:1", 404, "unknown_round"),
        ("/v1/players/alice/rounds/table%00-1:1", 404, "unknown_round"),
        ("/v1/players/alice/tables/table%00-1", 404, "unknown_table"),
        (f"/v1/players/alice/rounds?cursor={cursor('table-1', PAST_INT32)}", 400, "bad_parameter"),
        (f"/v1/players/alice/rounds?cursor={cursor(NUL_STREAM, 1)}", 400, "bad_parameter"),
        # a lone surrogate (JSON's \ud800): UTF-8 has none, and on PostgreSQL the driver's
        # refusal to encode it read as the store being down, a 503 (review, session 34)
        (f"/v1/players/alice/rounds?cursor={cursor(LONE_SURROGATE, 1)}", 400, "bad_parameter"),
        (
            f"/v1/players/alice/wallet?cursor={_wallet_cursor('USD', LONE_SURROGATE)}",
            400,
            "bad_parameter",
        ),
        (
            f"/v1/players/alice/wallet?cursor={_wallet_cursor(LONE_SURROGATE, 'table-1')}",
            400,
            "bad_parameter",
        ),
    ],
)
async def test_an_id_no_store_holds_is_a_4xx_on_either_store(
    api: httpx.AsyncClient, path: str, status: int, code: str
) -> None:
    answer = await api.get(path)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code


@pytest.mark.parametrize(
    "path",
    ["/v1/players/{}/wallet", "/v1/players/{}/rounds", "/v1/tables/{}", "/v1/rounds/{}:1"],
)
async def test_a_404_quotes_at_most_200_characters_of_a_long_id(
    api: httpx.AsyncClient, path: str
) -> None:
    """An id of 5,000 characters was quoted whole (a fuzz review): no id is that long."""
    answer = await api.get(path.format("a" * 5000))
    assert answer.status_code == 404
    assert repr("a" * 200) in answer.json()["error"]["message"]
    assert len(answer.content) < 600


async def test_a_player_id_with_a_nul_is_asked_of_the_store_as_any_other(
    api: httpx.AsyncClient,
) -> None:
    """The store holds a NUL of a player id in a form of its own (``store.as_stored``): such
    an id is looked up, not refused; a table it never sat at answers as for anyone else."""
    nul = await api.get("/v1/players/al%00ice/tables/table-1")
    other = await api.get("/v1/players/nobody/tables/table-1")
    assert nul.status_code == other.status_code == 200, nul.text
    assert nul.json() == other.json() and nul.json()["you"] is None


async def test_the_largest_round_a_store_holds_is_asked_of_it(api: httpx.AsyncClient) -> None:
    assert (await api.get("/v1/rounds/table-1:1")).status_code == 200
    answer = await api.get(f"/v1/rounds/table-1:{PAST_INT32 - 1}")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_round"
    page = await api.get(f"/v1/players/alice/rounds?cursor={cursor('table-1', PAST_INT32 - 1)}")
    assert page.status_code == 200, page.text
