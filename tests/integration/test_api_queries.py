"""The query API over a read model folded from the real broker, on SQLite and PostgreSQL:
wallets, betting history page by page, one round in full, a table for a client that
reconnects (hole card and shoe never shown early), and a clear 4xx for every bad request."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from pydantic import BaseModel

from blackjack.api.contract import (
    ErrorAnswer,
    InterruptedAnswer,
    PlayerRoundAnswer,
    PlayerRoundsAnswer,
    PlayerTableAnswer,
    RoundAnswer,
    StreamEventsAnswer,
    TableAnswer,
    WalletAnswer,
    openapi_document,
)
from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.state import INITIAL_STATE
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import (
    SHOE_KEY,
    STORE_KINDS,
    GameLog,
    Script,
    new_events_topic,
    play_tables,
    publish,
    store_factory,
    to_wire,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

VARIANTS = ("mini-h17", "atlantic-city-multi", "surrender")


def _log_with_a_split() -> GameLog:
    """Seeded random play at three tables: the first seed from 99 whose log has a split (the
    full-round test reads one), so that a change to the random play cannot remove it."""
    for seed in range(99, 199):
        log = play_tables([(f"table-{v}", v) for v in VARIANTS], rounds=12, seed=seed)
        if any(isinstance(e.data, ev.HandSplit) for e in log.envelopes):
            return log
    raise AssertionError("no seed from 99 to 198 gives a split in 12 rounds")


LOG = _log_with_a_split()
PLAYER = "table-mini-h17-p0"
SHARED = "table-atlantic-city-multi-p1"


def live_table() -> Script:
    """A round in play at ``table-live``: the player's turn, the hole card (QD) face down."""
    script = Script(
        "mini-h17", [["TH", "7S", "9H", "QD"]], players={"zoe": 10_000}, stream_id="table-live"
    )
    script.do(cmd.PlaceBet(player_id="zoe", box=0, amount=1000), cmd.Deal(player_id="zoe"))
    return script


LIVE = live_table()


def declined_buy_in() -> list[EventEnvelope]:
    """What a wallet's BuyIn to an id no table was opened under leaves in that stream: the
    declined transfer, and no table (newcomer review: the stream showed as a table)."""
    decided = decide(
        INITIAL_STATE,
        cmd.Deposit(player_id="ghost", amount=500, transfer="wallet:ghost/1"),
        LIVE.now,
    )
    assert isinstance(decided, list) and isinstance(decided[0], ev.TransferDeclined)
    return [
        EventEnvelope(
            event_id="table-typo-1",
            type="TransferDeclined",
            schema_version=1,
            stream_id="table-typo",
            sequence=1,
            occurred_at=LIVE.now,
            data=decided[0],
        )
    ]


@pytest.fixture(scope="module", params=STORE_KINDS)
async def api(
    request: pytest.FixtureRequest,
    projection_bootstrap: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[httpx.AsyncClient]:

    factory = store_factory(request, tmp_path_factory.mktemp("api"))
    try:
        store: ProjectionStore = await factory.store()
        async with new_events_topic(projection_bootstrap) as topic:
            seal = ShoeSeal.from_hex(SHOE_KEY)
            # up to what was published: the commit's markers may reach the partitions a
            # moment after it returns, and "the end as of now" could be before them
            written = await publish(
                topic, to_wire([*LOG.envelopes, *LIVE.envelopes, *declined_buy_in()], seal)
            )
            await rebuild(ProjectionWriter(store), topic.bootstrap, topic.name, stop=written)
        transport = httpx.ASGITransport(app=query_api(store))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client
    finally:
        await factory.close()


async def get(client: httpx.AsyncClient, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def rounds_bet_by(player_id: str) -> set[str]:
    return {
        f"{e.stream_id}:{e.data.round}"
        for e in LOG.envelopes
        if isinstance(e.data, ev.BetPlaced) and e.data.player_id == player_id
    }


async def test_a_wallet_sums_the_players_tables_and_shows_the_wallet_stream(
    api: httpx.AsyncClient,
) -> None:
    single = await get(api, f"/v1/players/{PLAYER}/wallet")
    balance = LOG.states["table-mini-h17"].players[PLAYER].balance
    [money] = single["totals"]
    assert money["currency"] == "USD" and money["available"] == balance
    assert money["in_play"] == 0
    paid_in = money["deposited"] - money["withdrawn"] - money["cashed_out"]
    assert paid_in == money["available"] + money["in_play"] + money["lost"] - money["won"]
    assert single["tables"][0]["stream_id"] == "table-mini-h17"
    assert single["wallet"] is None  # a single-player table is funded by the platform

    shared = await get(api, f"/v1/players/{SHARED}/wallet")
    assert shared["tables"][0]["funded_by_wallet"] is True
    wallet = LOG.wallets[f"wallet:{SHARED}"]
    assert shared["wallet"]["balance"] == wallet.balance
    assert shared["wallet"]["in_transit"] == 0


async def test_a_stream_s_events_come_page_by_page_as_written_with_the_store_s_positions(
    api: httpx.AsyncClient,
) -> None:
    """What a joining client folds (``play.read_model``): every event of the stream, in
    order, as it was written, and where the read model stands in each partition."""
    for stream_id in ("table-atlantic-city-multi", f"wallet:{SHARED}", "table-live"):
        written = [e for e in [*LOG.envelopes, *LIVE.envelopes] if e.stream_id == stream_id]
        read: list[dict[str, Any]] = []
        page = await get(api, f"/v1/streams/{stream_id}/events?limit=7")
        positions = page["positions"]
        while True:
            read += page["events"]
            if page["next"] is None:
                break
            assert len(page["events"]) == 7
            page = await get(api, f"/v1/streams/{stream_id}/events?limit=7&after={page['next']}")
        assert [(e["sequence"], e["event_id"], e["type"]) for e in read] == [
            (e.sequence, e.event_id, e.type) for e in written
        ]
        assert (
            read[0]["data"]
            == to_wire(written[:1], ShoeSeal.from_hex(SHOE_KEY))[0].model_dump(mode="json")["data"]
        )
        assert {p["partition"] for p in positions} == {0, 1, 2}
        assert all(p["next_offset"] > 0 for p in positions)
    nothing = await get(api, "/v1/streams/nowhere/events")
    assert nothing["events"] == [] and nothing["next"] is None and nothing["positions"]


async def test_betting_history_comes_newest_first_page_by_page(api: httpx.AsyncClient) -> None:
    seen: list[dict[str, Any]] = []
    page = await get(api, f"/v1/players/{PLAYER}/rounds?limit=5")
    while True:
        assert len(page["rounds"]) <= 5
        seen += page["rounds"]
        if page["next"] is None:
            break
        page = await get(api, f"/v1/players/{PLAYER}/rounds?limit=5&cursor={page['next']}")
    ids = [r["round_id"] for r in seen]
    assert len(ids) == len(set(ids)) and set(ids) == rounds_bet_by(PLAYER)
    assert [r["started_at"] for r in seen] == sorted((r["started_at"] for r in seen), reverse=True)
    settled = [r for r in seen if r["status"] == "settled"]
    assert settled and all(r["net"] == r["paid"] - r["wagered"] for r in settled)
    chained = sorted(settled, key=lambda r: r["started_at"])
    # with no deposit in between, a round starts from the balance the one before ended on
    assert any(a["balance_after"] == b["balance_before"] for a, b in pairwise(chained))


async def test_one_round_in_full_with_every_card_action_and_payout(api: httpx.AsyncClient) -> None:
    split = next(e for e in LOG.envelopes if isinstance(e.data, ev.HandSplit))
    assert isinstance(split.data, ev.HandSplit)
    number = split.data.round
    found = await get(api, f"/v1/rounds/{split.stream_id}:{number}")
    events = [
        e
        for e in LOG.envelopes
        if e.stream_id == split.stream_id
        and isinstance(e.data, ev.RoundEvent)
        and e.data.round == number
    ]
    assert [entry["sequence"] for entry in found["log"]] == [e.sequence for e in events]
    assert [entry["event"] for entry in found["log"]] == [e.type for e in events]
    assert [entry["command_id"] for entry in found["log"]] == [e.causation_id for e in events]
    assert all(entry["at"].endswith("Z") for entry in found["log"])
    box = next(b for b in found["boxes"] if b["box"] == split.data.box)
    assert len(box["hands"]) >= 2 and all(h["split"] for h in box["hands"])
    dealt = [
        e.data.card
        for e in events
        if isinstance(e.data, ev.CardDealt) and e.data.box == split.data.box
    ]
    face_up = [card for card in dealt if card is not None]
    assert len(face_up) == len(dealt)  # a box's cards are dealt face up
    assert sorted(c for h in box["hands"] for c in h["cards"]) == sorted(face_up)
    settled = {
        (e.data.box, e.data.hand): e.data.payout
        for e in events
        if isinstance(e.data, ev.HandSettled)
    }
    for index, hand in enumerate(box["hands"]):
        assert hand["payout"] == settled[(box["box"], index)]
    [player] = [p for p in found["players"] if p["player_id"] == split.data.player_id]
    # money paid in or out at the table while the round ran (a buy-in during betting) moves
    # the balance too
    first, last = events[0].sequence, events[-1].sequence
    moved = sum(
        e.data.amount if isinstance(e.data, ev.FundsDeposited) else -e.data.amount
        for e in LOG.envelopes
        if e.stream_id == split.stream_id
        and first <= e.sequence <= last
        and isinstance(e.data, ev.FundsDeposited | ev.FundsWithdrawn)
        and e.data.player_id == split.data.player_id
    )
    assert player["balance_after"] - player["balance_before"] == player["net"] + moved


async def test_a_reconnecting_client_sees_the_table_without_the_hole_card(
    api: httpx.AsyncClient,
) -> None:
    response = await api.get("/v1/tables/table-live")
    table = response.json()
    assert table["variant"] == "mini-h17" and table["round_open"] and table["phase"] == "playing"
    assert table["active"] == {  # zoe's buttons: T 9 against a 7
        "box": 0,
        "hand": 0,
        "player_id": "zoe",
        "actions": ["hit", "stand", "double", "surrender"],
    }
    assert table["players"] == [
        {
            "player_id": "zoe",
            "seat": 0,
            "connected": True,
            "available": 9000,
            "in_play": 1000,
            "sitting_out": False,
            "rounds_sat_out": None,  # a single-player table: no seat is freed
            "rounds_before_seat_freed": None,
        }
    ]
    current = table["current_round"]
    assert current["dealer"]["cards"] == ["7S", None]
    assert current["boxes"][0]["hands"][0]["cards"] == ["TH", "9H"]
    assert table["shoe"]["cards_dealt"] == 4 and len(table["shoe"]["commitment"]) == 64
    assert "QD" not in response.text
    assert not _secret_keys(table)


async def test_no_answer_carries_a_shoe_secret(api: httpx.AsyncClient) -> None:
    for path in (
        "/v1/tables/table-mini-h17",
        "/v1/rounds/table-mini-h17:1",
        f"/v1/players/{PLAYER}/wallet",
        f"/v1/players/{PLAYER}/rounds?limit=100",
    ):
        assert not _secret_keys(await get(api, path)), path


def _cursor(number: object, when: str = "2026-01-01T00:00:00+00:00") -> str:
    """A cursor in this API's form holding what the API would never put there."""
    raw = json.dumps([when, "table-mini-h17", number], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _secret_keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [k for k in value if k in ("order", "salt", "sealed")]
        return found + [k for v in value.values() for k in _secret_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _secret_keys(v)]
    return []


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v1/players/nobody/wallet", 404, "unknown_player"),
        ("/v1/players/nobody/rounds", 404, "unknown_player"),
        (f"/v1/players/{PLAYER}/rounds?limit=0", 400, "bad_parameter"),
        (f"/v1/players/{PLAYER}/rounds?limit=101", 400, "bad_parameter"),
        (f"/v1/players/{PLAYER}/rounds?limit=ten", 400, "bad_parameter"),
        (f"/v1/players/{PLAYER}/rounds?limit=5&limit=6", 400, "bad_parameter"),
        (f"/v1/players/{PLAYER}/rounds?cursor=not-a-cursor", 400, "bad_parameter"),
        # digits of other scripts and superscripts are not numbers here
        (f"/v1/players/{PLAYER}/rounds?limit=%C2%B2", 400, "bad_parameter"),
        (f"/v1/players/{PLAYER}/rounds?limit=%D9%A5", 400, "bad_parameter"),
        # cursors this API never hands out: a round past 64 bits, a time past year 1, a bool
        (f"/v1/players/{PLAYER}/rounds?cursor={_cursor(10**30)}", 400, "bad_parameter"),
        (
            f"/v1/players/{PLAYER}/rounds?cursor={_cursor(1, '0001-01-01T00:00:00+14:00')}",
            400,
            "bad_parameter",
        ),
        (f"/v1/players/{PLAYER}/rounds?cursor={_cursor(True)}", 400, "bad_parameter"),
        # well formed, past any round a store holds (the document's pattern: not a 400)
        ("/v1/rounds/table-mini-h17:" + "9" * 20, 404, "unknown_round"),
        ("/v1/rounds/table-mini-h17:" + "9" * 5000, 404, "unknown_round"),
        ("/v1/rounds/table-mini-h17:%D9%A1", 400, "bad_round_id"),
        ("/v1/rounds/table-mini-h17", 400, "bad_round_id"),
        ("/v1/rounds/table-mini-h17:0", 400, "bad_round_id"),
        ("/v1/rounds/table-mini-h17:999", 404, "unknown_round"),
        ("/v1/tables/no-such-table", 404, "unknown_table"),
        ("/v1/tables/table-typo", 404, "unknown_table"),  # a declined buy-in, no table
        ("/v1/tables", 404, "not_found"),
        ("/v1/everything", 404, "not_found"),
    ],
)
async def test_bad_requests_get_a_clear_error(
    api: httpx.AsyncClient, path: str, status: int, code: str
) -> None:
    body = await get(api, path, status)
    assert body["error"]["code"] == code and body["error"]["message"]


async def test_numbers_may_have_leading_zeros(api: httpx.AsyncClient) -> None:
    padded = await get(api, f"/v1/players/{PLAYER}/rounds?limit=0002")
    assert padded == await get(api, f"/v1/players/{PLAYER}/rounds?limit=2")
    assert await get(api, "/v1/rounds/table-mini-h17:0001") == await get(
        api, "/v1/rounds/table-mini-h17:1"
    )


async def test_only_reads_are_answered(api: httpx.AsyncClient) -> None:
    response = await api.post(f"/v1/players/{PLAYER}/wallet")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    head = await api.head(f"/v1/players/{PLAYER}/wallet")
    assert head.status_code == 200 and head.content == b""


async def test_other_paths_go_to_the_app_behind() -> None:
    async def health(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    store = ProjectionStore("sqlite+aiosqlite://")
    await store.migrate()
    try:
        app = query_api(store, fallback=health)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            assert (await client.get("/health")).text == "ok"
            assert (await client.get("/v1/tables/x")).json()["error"]["code"] == "unknown_table"
    finally:
        await store.close()


async def test_every_answer_is_what_the_openapi_document_says(api: httpx.AsyncClient) -> None:
    """Every player's wallet and history, every round and table of the log, the interrupted
    rounds and the errors, read back through the contract's models (extra fields refused) and
    checked against the document's JSON Schema (every field it says is required present, every
    date-time one): an answer and its documentation cannot drift apart."""
    document = openapi_document()

    def conforms(model: type[BaseModel], answer: Any) -> None:
        model.model_validate(answer)
        schema = {"$ref": f"#/components/schemas/{model.__name__}", **document}
        Draft202012Validator(schema, format_checker=FormatChecker()).validate(answer)

    players = {p for state in LOG.states.values() for p in state.players}
    for player_id in sorted(players):
        conforms(WalletAnswer, await get(api, f"/v1/players/{player_id}/wallet"))
        page = await get(api, f"/v1/players/{player_id}/rounds?limit=100")
        conforms(PlayerRoundsAnswer, page)
        for line in page["rounds"]:
            conforms(RoundAnswer, await get(api, f"/v1/rounds/{line['round_id']}"))
            mine = await get(api, f"/v1/players/{player_id}/rounds/{line['round_id']}")
            conforms(PlayerRoundAnswer, mine)
            assert [p["player_id"] for p in mine["players"]] == [player_id]
    for stream_id, state in LOG.states.items():
        conforms(TableAnswer, await get(api, f"/v1/tables/{stream_id}"))
        for player_id in sorted(state.players):
            seen = await get(api, f"/v1/players/{player_id}/tables/{stream_id}")
            conforms(PlayerTableAnswer, seen)
            assert seen["you"] is None or seen["you"]["player_id"] == player_id
    conforms(InterruptedAnswer, await get(api, "/v1/interrupted-rounds?idle_days=1"))
    for stream_id in (*LOG.states, *LOG.wallets, "nowhere"):
        conforms(StreamEventsAnswer, await get(api, f"/v1/streams/{stream_id}/events?limit=9"))
    for path, status in (
        ("/v1/players/nobody/wallet", 404),
        ("/v1/players/nobody/rounds?limit=0", 400),
        ("/v1/rounds/table-mini-h17:x", 400),
        ("/v1/players/nobody/rounds/table-mini-h17:1", 404),
        ("/v1/tables/nowhere", 404),
        ("/v1/players/nobody/tables/nowhere", 404),
        ("/v1/streams/table-mini-h17/events?after=-1", 400),
        ("/v1/streams/table-mini-h17/events?limit=1001", 400),
        (f"/v1/streams/table-mini-h17/events?after=1{'0' * 19}", 400),
    ):
        conforms(ErrorAnswer, await get(api, path, status))
    assert await get(api, "/v1/openapi.json") == document
