"""``GET /v1/players/{player_id}/rounds/{round_id}`` and ``.../tables/{stream_id}``: a shared
table's round, and the table, as one of its players may be shown them. Every card, box, bet,
decision and payout stays; of the other players, nothing that was theirs alone (balances, the
options their money allowed, money paid in or out, command ids). The full answers
(``/v1/rounds/...``, ``/v1/tables/...``) are unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from blackjack.api.contract import openapi_document
from blackjack.api.routes import query_api
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.rejections import Rejection
from blackjack.projections.store import ProjectionStore
from tests.unit.stacked_table import StackedTable
from tests.unit.test_seat_released import finish_round, table
from tests.unit.test_sitting_out_answer import STREAM, Folder, _store

VALIDATOR = Draft202012Validator(
    {"$ref": "#/components/schemas/PlayerRoundAnswer", **openapi_document()},
    format_checker=FormatChecker(),
)
TABLE = Draft202012Validator(
    {"$ref": "#/components/schemas/PlayerTableAnswer", **openapi_document()},
    format_checker=FormatChecker(),
)
PRIVATE = ("balance_after", "balance_returned", "actions")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    """A SQLite read model at the latest schema, closed after the test."""
    read_model = await _store(tmp_path)
    try:
        yield read_model
    finally:
        await read_model.close()


async def _get(folder: Folder, path: str) -> tuple[int, dict[str, Any]]:
    transport = httpx.ASGITransport(app=query_api(folder.store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        response = await http.get(path)
    return response.status_code, response.json()


async def played_out(
    store: ProjectionStore, t: StackedTable, player: str
) -> tuple[Folder, dict[str, Any], dict[str, Any]]:
    """Round 1 of ``t`` finished and folded: its folder, the full round and ``player``'s view
    of it (checked against the document)."""
    finish_round(t)
    folder = Folder(store, t)
    await folder.fold()
    status, full = await _get(folder, f"/v1/rounds/{STREAM}:1")
    assert status == 200
    status, seen = await _get(folder, f"/v1/players/{player}/rounds/{STREAM}:1")
    assert status == 200, seen
    VALIDATOR.validate(seen)
    return folder, full, seen


def _of(answer: dict[str, Any], player: str) -> list[dict[str, Any]]:
    return [e for e in answer["log"] if e["data"].get("player_id") == player]


async def test_a_player_sees_the_round_without_what_was_the_others_alone(
    store: ProjectionStore,
) -> None:
    t = table(None)  # ann and ben at atlantic-city-multi, 100.00 each
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=2000),
        cmd.Deal(player_id="ann"),
        cmd.Deal(player_id="ben"),
        buy_in_deposit("ben", 500, 2),  # ben's money paid in during the round
    )
    folder, full, ann = await played_out(store, t, "ann")

    # The full round has what the player's view leaves out: the test could fail.
    assert any(k in e["data"] for e in _of(full, "ben") for k in PRIVATE)
    assert "FundsDeposited" in [e["event"] for e in _of(full, "ben")]
    assert {p["player_id"] for p in full["players"]} == {"ann", "ben"}

    assert [p["player_id"] for p in ann["players"]] == ["ann"]
    assert ann["players"][0] == next(p for p in full["players"] if p["player_id"] == "ann")
    bens = _of(ann, "ben")
    assert [e["event"] for e in bens] == [
        e["event"] for e in _of(full, "ben") if e["event"] != "FundsDeposited"
    ]
    assert not [k for e in bens for k in PRIVATE if k in e["data"]]
    assert {e["command_id"] for e in bens} == {None}
    placed = next(e for e in bens if e["event"] == "BetPlaced")
    assert (placed["data"]["box"], placed["data"]["amount"]) == (1, 2000)  # seen at the table
    # ann's own entries are whole, as in the full round.
    assert _of(ann, "ann") == _of(full, "ann")
    settled = next(e for e in ann["log"] if e["event"] == "RoundSettled")
    assert [r["player_id"] for r in settled["data"]["results"]] == ["ann"]
    # Every card and box is there, the same as in the full round.
    assert (ann["boxes"], ann["dealer"]) == (full["boxes"], full["dealer"])
    assert [e["sequence"] for e in ann["log"] if e["event"] == "CardDealt"] == [
        e["sequence"] for e in full["log"] if e["event"] == "CardDealt"
    ]

    status, ben = await _get(folder, f"/v1/players/ben/rounds/{STREAM}:1")
    assert status == 200
    assert "FundsDeposited" in [e["event"] for e in _of(ben, "ben")]
    assert not [k for e in _of(ben, "ann") for k in PRIVATE if k in e["data"]]


async def test_a_round_the_player_had_no_bet_in_is_not_theirs_to_see(
    store: ProjectionStore,
) -> None:
    t = table(None)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    finish_round(t)  # ben, seated, is left out by the clock
    folder = Folder(store, t)
    await folder.fold()
    assert (await _get(folder, f"/v1/players/ann/rounds/{STREAM}:1"))[0] == 200
    for path in (
        f"/v1/players/ben/rounds/{STREAM}:1",
        f"/v1/players/nobody/rounds/{STREAM}:1",
        f"/v1/players/ann/rounds/{STREAM}:2",
    ):
        status, answer = await _get(folder, path)
        assert (status, answer["error"]["code"]) == (404, "unknown_round"), path
    status, answer = await _get(folder, f"/v1/players/ann/rounds/{STREAM}:0")
    assert (status, answer["error"]["code"]) == (400, "bad_round_id")


async def test_a_player_sees_the_table_with_their_own_money_and_none_of_the_others(
    store: ProjectionStore,
) -> None:
    t = table(None)
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=2000),
        cmd.Deal(player_id="ann"),
        cmd.Deal(player_id="ben"),
    )
    if t.state.phase == "insurance":
        t.do(cmd.DeclineInsurance(player_id="ann", box=0))
        t.do(cmd.DeclineInsurance(player_id="ben", box=1))
    t.do(cmd.Stand(player_id="ann", box=0))  # ben's turn now
    folder = Folder(store, t)
    await folder.fold()
    status, full = await _get(folder, f"/v1/tables/{STREAM}")
    assert status == 200
    assert full["active"]["player_id"] == "ben" and full["active"]["actions"]
    status, ann = await _get(folder, f"/v1/players/ann/tables/{STREAM}")
    assert status == 200, ann
    TABLE.validate(ann)
    seated = {p["player_id"]: p for p in full["players"]}
    assert ann["you"] == seated["ann"]
    assert ann["players"] == [
        {k: v for k, v in seated["ben"].items() if k not in ("available", "in_play")}
    ]
    assert ann["active"] == {**full["active"], "actions": None}  # ben's options: his money
    current = ann["current_round"]
    assert [p["player_id"] for p in current["players"]] == ["ann"]
    assert not [k for e in _of(current, "ben") for k in PRIVATE if k in e["data"]]
    assert (current["boxes"], current["dealer"]) == (
        full["current_round"]["boxes"],
        full["current_round"]["dealer"],
    )

    status, ben = await _get(folder, f"/v1/players/ben/tables/{STREAM}")
    assert ben["active"] == full["active"]  # his own turn: his options
    status, watcher = await _get(folder, f"/v1/players/carol/tables/{STREAM}")
    assert status == 200
    TABLE.validate(watcher)
    assert watcher["you"] is None and {p["player_id"] for p in watcher["players"]} == {
        "ann",
        "ben",
    }
    assert watcher["current_round"]["players"] == []
    status, answer = await _get(folder, "/v1/players/ann/tables/nowhere")
    assert (status, answer["error"]["code"]) == (404, "unknown_table")


class CommandFolder(Folder):
    """Folds as ``Folder`` does, each event's envelope naming the command that wrote it (its
    ``causation_id``: who sent it, as a platform's command ids tell), as the service's do."""

    def __init__(self, store: Any, t: StackedTable) -> None:
        super().__init__(store, t)
        self.causes: list[str | None] = [None] * len(t.events)  # written before: no command
        send = t.send

        def sending(command: cmd.Command) -> list[ev.Event] | Rejection:
            sent = send(command)
            if not isinstance(sent, Rejection):
                who = getattr(command, "player_id", None) or "server"
                self.causes += [f"{who}-{type(command).__name__}-{len(t.events)}"] * len(sent)
            return sent

        t.send = sending  # type: ignore[method-assign]

    def cause(self, index: int) -> str | None:
        return self.causes[index]


async def test_no_other_players_command_id_or_declined_buy_in_in_a_players_view(
    store: ProjectionStore,
) -> None:
    """Another player's command ids are theirs alone wherever they stand: on the cards dealt
    for ben's Hit, the deal his Deal started, the round his Stand settled, ann's hand settled
    by it. Ben's buy-in declined while the table was suspended (its amount, transfer id and
    why) is his money moved, as a deposit is. Ann's own decisions keep their command ids."""
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"])
    folder = CommandFolder(store, t)
    t.do(
        cmd.SitDown(player_id="ann", seat=0),
        buy_in_deposit("ann", 10_000),
        cmd.SitDown(player_id="ben", seat=1),
        buy_in_deposit("ben", 10_000),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=2000),
        cmd.Deal(player_id="ann"),
        cmd.Deal(player_id="ben"),
        cmd.SuspendTable(operator="ops", reason="maintenance"),
        cmd.Deposit(player_id="ben", amount=500, transfer="wallet:ben/7"),
        cmd.ResumeTable(operator="ops"),
    )
    finish_round(t)  # ann stands, then ben: ben's Stand settles the round
    await folder.fold()
    status, full = await _get(folder, f"/v1/rounds/{STREAM}:1")
    assert status == 200
    status, ann = await _get(folder, f"/v1/players/ann/rounds/{STREAM}:1")
    assert status == 200, ann
    VALIDATOR.validate(ann)

    assert None not in {e["command_id"] for e in full["log"]}
    bens = {e["command_id"] for e in full["log"] if e["command_id"].startswith("ben-")}
    # The full round has them where no player or ann owns the entry: the test could fail.
    assert {e["event"] for e in full["log"] if e["command_id"] in bens} >= {
        "DealStarted",
        "RoundSettled",
        "HandSettled",
        "TransferDeclined",
    }
    assert not [e for e in ann["log"] if e["command_id"] in bens], [
        (e["event"], e["command_id"]) for e in ann["log"] if e["command_id"] in bens
    ]
    assert "TransferDeclined" not in [e["event"] for e in ann["log"]]
    assert "wallet:ben/7" not in str(ann)
    # ann's own decisions keep theirs; the server's are nobody's to hide.
    mine = [e for e in _of(ann, "ann") if e["decided_by"] == "player"]
    assert mine and all(e["command_id"].startswith("ann-") for e in mine)
    assert {e["command_id"] for e in _of(ann, "ben")} == {None}

    status, ben = await _get(folder, f"/v1/players/ben/rounds/{STREAM}:1")
    assert "TransferDeclined" in [e["event"] for e in ben["log"]]
    assert {e["command_id"] for e in _of(ben, "ben") if e["decided_by"] == "player"} <= bens


async def test_why_the_operator_stood_another_player_up_is_not_in_a_players_view(
    store: ProjectionStore,
) -> None:
    """The operator stands ben up during the betting (StandUpPlayer: a platform's
    self-exclusion, a closed account): ann sees him leave, not why, nor which operator did it
    (``operator_reason``, ``operator``); ben's own view and the full round keep both."""
    t = table(None)
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=2000),
        cmd.StandUpPlayer(player_id="ben", operator="ops-17", reason="self-excluded"),
        cmd.Deal(player_id="ann"),
    )
    folder, full, ann = await played_out(store, t, "ann")
    [left] = [e for e in full["log"] if e["event"] == "SeatLeft"]
    assert (left["data"]["operator"], left["data"]["operator_reason"]) == (
        "ops-17",
        "self-excluded",
    )
    [seen] = [e for e in ann["log"] if e["event"] == "SeatLeft"]
    assert seen["data"] == {
        "player_id": "ben",
        "seat": 1,
        "reason": "operator",
        **{k: v for k, v in left["data"].items() if k == "rounds_sat_out"},
    }
    assert "self-excluded" not in str(ann) and "ops-17" not in str(ann)
    status, ben = await _get(folder, f"/v1/players/ben/rounds/{STREAM}:1")
    assert status == 200
    # Ben is told why; who on the operator's staff did it is the record's alone.
    [own] = [e for e in ben["log"] if e["event"] == "SeatLeft"]
    assert own["data"]["operator_reason"] == "self-excluded"
    assert own == {**left, "data": {k: v for k, v in left["data"].items() if k != "operator"}}
    assert "ops-17" not in str(ben)


async def test_which_operator_suspended_the_table_is_in_no_players_view(
    store: ProjectionStore,
) -> None:
    """The table suspended and resumed during the round: every player sees that it was and
    why (the reason is written for them), none which member of the operator's staff did it;
    the full round keeps who."""
    t = table(None)
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.Deal(player_id="ann"),
        cmd.SuspendTable(operator="ops-17", reason="dealer maintenance"),
        cmd.ResumeTable(operator="ops-18"),
    )
    folder, full, ann = await played_out(store, t, "ann")
    staff = {e["event"]: e["data"]["operator"] for e in full["log"] if "operator" in e["data"]}
    assert staff == {"TableSuspended": "ops-17", "TableResumed": "ops-18"}
    seen = [e for e in ann["log"] if e["event"] in staff]
    assert [(e["event"], e["data"].get("reason")) for e in seen] == [
        ("TableSuspended", "dealer maintenance"),
        ("TableResumed", None),
    ]
    assert "ops-17" not in str(ann) and "ops-18" not in str(ann)
    status, at_table = await _get(folder, f"/v1/players/ann/tables/{STREAM}")
    assert status == 200
    assert "ops-1" not in str(at_table)


async def test_a_voided_round_shows_a_player_their_own_return_and_no_operator(
    store: ProjectionStore,
) -> None:
    """The full round keeps who voided it and every player's return; a player sees that it
    was voided and why, and what came back to them alone."""
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"], {"void_on_malfunction": True})
    for pid, seat in (("ann", 0), ("ben", 1)):
        t.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 10_000))
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=2000),
        cmd.Deal(player_id="ann"),
        cmd.Deal(player_id="ben"),
        cmd.VoidRound(round=1, operator="ops-17", reason="card reader fault"),
    )
    _, full, ann = await played_out(store, t, "ann")
    assert full["status"] == ann["status"] == "voided"
    [whole] = [e for e in full["log"] if e["event"] == "RoundVoided"]
    assert whole["data"]["operator"] == "ops-17"
    assert [r["player_id"] for r in whole["data"]["returns"]] == ["ann", "ben"]
    [seen] = [e for e in ann["log"] if e["event"] == "RoundVoided"]
    assert seen["data"]["reason"] == "card reader fault" and "operator" not in seen["data"]
    assert seen["data"]["returns"] == [whole["data"]["returns"][0]]
    assert "ops-17" not in str(ann) and "8000" not in str(ann)  # ben's balance after


async def test_a_payout_settled_before_a_void_is_shown_voided_in_both_answers(
    store: ProjectionStore,
) -> None:
    """surrender with the void term: ann's blackjack on box 0 paid at once (25.00), then the
    round voided. The full round and ann's view keep what was paid then and say it was
    voided, as the document says (checked against it)."""
    cards = ["AS", "TC", "6H", "KS", "5C", "TD"]
    t = StackedTable("surrender", cards, {"void_on_malfunction": True})
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ann", box=1, amount=1000),
        cmd.Deal(player_id="ann"),
        cmd.VoidRound(round=1, operator="ops-17", reason="card reader fault"),
    )
    _, full, ann = await played_out(store, t, "ann")
    for answer in (full, ann):
        hands = [
            (h["outcome"], h["payout"], h["voided"]) for b in answer["boxes"] for h in b["hands"]
        ]
        assert hands == [("blackjack", 2500, True), (None, None, True)], hands


def _operators(full: dict[str, Any]) -> set[str]:
    """The ids of the operator's commands in a full round: those of entries naming staff."""
    return {e["command_id"] for e in full["log"] if e["data"].get("operator") is not None}


async def test_no_operators_command_id_in_a_players_view(store: ProjectionStore) -> None:
    """The operator's command ids are the operator's, as another player's are theirs: ann's
    view carries none, on the table's entries (the suspension, the resumption) nor on what
    the void wrote (the hole card shown, the void); the full round keeps every one. Before,
    ann's view kept them (and hid the void's only when it stood another player up)."""
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"], {"void_on_malfunction": True})
    folder = CommandFolder(store, t)
    t.do(cmd.SitDown(player_id="ann", seat=0), buy_in_deposit("ann", 10_000))
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.Deal(player_id="ann"),
        cmd.SuspendTable(operator="ops-17", reason="card reader fault"),
        cmd.ResumeTable(operator="ops-17"),
        cmd.VoidRound(round=1, operator="ops-17", reason="card reader fault"),
    )
    await folder.fold()
    status, full = await _get(folder, f"/v1/rounds/{STREAM}:1")
    assert status == 200
    status, ann = await _get(folder, f"/v1/players/ann/rounds/{STREAM}:1")
    assert status == 200
    VALIDATOR.validate(ann)
    operators = _operators(full)
    written = {e["event"] for e in full["log"] if e["command_id"] in operators}
    assert written == {"TableSuspended", "TableResumed", "DealerHoleCardRevealed", "RoundVoided"}
    assert not [e["event"] for e in ann["log"] if e["command_id"] in operators]
    mine = [e for e in _of(ann, "ann") if e["decided_by"] == "player"]
    assert mine and all(e["command_id"].startswith("ann-") for e in mine)


async def test_no_operators_command_id_on_a_players_own_stand_up(store: ProjectionStore) -> None:
    """StandUpPlayer: ben's own view of his stand-up keeps why, not the operator's command id
    (before: kept, while ann's view of the same entry hid it)."""
    t = table(None)
    folder = CommandFolder(store, t)
    t.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ben", box=1, amount=2000),
        cmd.StandUpPlayer(player_id="ben", operator="ops-17", reason="self-excluded"),
        cmd.Deal(player_id="ann"),
    )
    finish_round(t)
    await folder.fold()
    status, full = await _get(folder, f"/v1/rounds/{STREAM}:1")
    assert status == 200
    [left] = [e for e in full["log"] if e["event"] == "SeatLeft"]
    assert left["command_id"] in _operators(full)
    status, ben = await _get(folder, f"/v1/players/ben/rounds/{STREAM}:1")
    assert status == 200
    VALIDATOR.validate(ben)
    [own] = [e for e in ben["log"] if e["event"] == "SeatLeft"]
    assert own["data"]["operator_reason"] == "self-excluded" and own["command_id"] is None
