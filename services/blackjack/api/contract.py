"""The query API's contract: a model of every answer, and the OpenAPI document built from them
(``schemas/query-api.openapi.json``, served at ``/v1/openapi.json``).

The answers are built as plain JSON by ``projections.queries``; these models say what they
hold, and the tests read every answer of a played log back through them (``extra="forbid"``),
so an answer and its documentation cannot drift apart.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.json_schema import models_json_schema

from blackjack.domain.decided_by import DecidedBy
from blackjack.messages.schemas import int64_integers, no_final_line_feed
from blackjack.projections.reports import DAY_PATTERN, MAX_DAYS
from blackjack.projections.views import LogEntry, RoundRecord, TableView
from blackjack.projections.wallets import Transfer

PATH = Path("schemas/query-api.openapi.json")

Moment = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A time as the answers give it: RFC 3339, in UTC (``Z``)."""


class _Answer(BaseModel):
    # Answers carry every field, defaults included: the OpenAPI document says so (required).
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


# ---- errors --------------------------------------------------------------------------------

ErrorCode = Literal[
    "bad_path",
    "bad_parameter",
    "bad_round_id",
    "unknown_player",
    "unknown_round",
    "unknown_table",
    "not_found",
    "method_not_allowed",
    "unauthenticated",
    "forbidden",
    "store_unavailable",
    "server_busy",
    "internal_error",
    "bad_request",
    "request_timeout",
    "request_too_large",
]


class ErrorBody(_Answer):
    code: ErrorCode
    message: str


class ErrorAnswer(_Answer):
    """Every error: 400 a bad parameter or round id (or not HTTP the server can read), 401 no
    valid bearer token, 403 a player's token asking for what is not that player's, 404
    unknown, 405 not a GET, 408 the request's headers too slow, 431 too large, 503 the read
    model cannot serve now or the process serves as many connections as it may (try again),
    500 unforeseen."""

    error: ErrorBody


# ---- a player's money ------------------------------------------------------------------------


class TableAccount(_Answer):
    """The player's money at one table (minor units of ``currency``)."""

    stream_id: str
    currency: str
    funded_by_wallet: bool = Field(description="a multi-seat table, paid from the wallet")
    seat: int | None
    seated: bool
    connected: bool
    available: int
    in_play: int
    deposited: int
    withdrawn: int
    cashed_out: int = Field(description="paid back to the wallet when the player left")
    wagered: int
    won: int
    lost: int
    rounds: int


class WalletStream(_Answer):
    """The player's wallet stream: money between tables, and buy-ins on their way."""

    stream_id: str
    balance: int
    in_transit: int = Field(description="buy-ins sent, not yet confirmed by their table")
    deposited: int
    withdrawn: int
    bought_in: int
    refunded: int = Field(description="buy-ins a table refused")
    cashed_in: int = Field(description="money tables paid back")
    last_sequence: int
    updated_at: Moment
    pending: list[Transfer]
    currency: str | None = Field(description="set by the first deposit")


class Totals(_Answer):
    currency: str
    available: int
    in_play: int
    deposited: int
    withdrawn: int
    cashed_out: int
    wagered: int
    won: int
    lost: int
    rounds: int


class WalletAnswer(_Answer):
    """``GET /v1/players/{player_id}/wallet``"""

    player_id: str
    wallet: WalletStream | None = Field(description="null: the player never had a wallet")
    tables: list[TableAccount] = Field(
        description="the table accounts in (currency, stream id) order, `limit` at most "
        "(1,000 unless asked fewer): the rest follow with `cursor` = `next`"
    )
    totals: list[Totals] = Field(
        description="every table's account summed per currency, the tables of later pages included"
    )
    next: str | None = Field(
        description="the cursor of the next page of `tables`; null when every table is listed"
    )


# ---- a player's rounds -----------------------------------------------------------------------


class RoundLine(_Answer):
    """One round of the player's betting history."""

    round_id: str
    stream_id: str
    round: int
    variant: str
    currency: str
    status: Literal["betting", "playing", "settled", "cancelled", "voided"]
    started_at: Moment = Field(description="the player's first wager in the round")
    closed_at: Moment | None
    balance_before: int
    balance_after: int
    wagered: int
    paid: int
    net: int
    deposited: int = Field(description="paid in at the table during the round")
    withdrawn: int = Field(description="taken out at the table during the round")


class PlayerRoundsAnswer(_Answer):
    """``GET /v1/players/{player_id}/rounds``: newest first."""

    player_id: str
    rounds: list[RoundLine]
    next: str | None = Field(description="the cursor of the next page; null on the last")


# ---- one round -------------------------------------------------------------------------------


class RecalledEntry(LogEntry):
    """An event of the round's log, with the command that wrote it and who decided it."""

    command_id: str | None
    decided_by: DecidedBy | None = Field(
        description="for a player's decision: the player, or the server in the player's "
        "place (a turn clock ran out, an operator closed an interrupted round, the player was "
        "stood up after the rounds the table's rules let them sit out); null for an event "
        "that is not a decision"
    )


class PlayerInRound(_Answer):
    player_id: str
    started_at: Moment
    balance_before: int
    balance_after: int
    wagered: int
    paid: int
    net: int
    deposited: int
    withdrawn: int


class RoundAnswer(RoundRecord):
    """``GET /v1/rounds/{stream_id}:{round}``: one game cycle in full."""

    log: list[RecalledEntry] = []  # type: ignore[assignment]
    players: list[PlayerInRound]


class PlayerRoundAnswer(RoundAnswer):
    """``GET /v1/players/{player_id}/rounds/{stream_id}:{round}``: one game cycle as the
    player may be shown it. ``players`` holds the player alone; the other players' log
    entries carry no ``balance_after``, ``balance_returned``, ``actions`` or
    ``operator_reason`` (why the operator stood them up), no entry carries
    another player's command id nor the operator's (``command_id`` null: a suspension, a
    void, a stand-up, an interrupted round closed, and every entry those commands wrote),
    their money paid in or out and their buy-ins declined are left out, and
    ``RoundSettled``'s ``results`` and ``RoundVoided``'s ``returns`` hold the player's alone.
    No entry names the member of the operator's staff who acted (``operator``)."""


# ---- a table and the rounds left waiting -----------------------------------------------------


class PlayerAtTable(_Answer):
    """A player at the table as anyone there sees them: no money of theirs."""

    player_id: str
    seat: int | None
    connected: bool
    sitting_out: bool | None = Field(
        description="left out of a round by the betting clock, and no bet or pass since: "
        "rounds are dealt without waiting for the player (a bet or a pass brings them back); "
        "null: not known (folded before this field existed, and the player has not bet, "
        "passed nor been left out since)"
    )
    rounds_sat_out: int | None = Field(
        description="where the table's rules free the seat of a player who sits out "
        "(seat_released_after_rounds_sat_out): the rounds dealt in a row while the player "
        "sat out (0 when they do not sit out); null at a table whose rules free no seat, or "
        "not known"
    )
    rounds_before_seat_freed: int | None = Field(
        description="while the player sits out at a table whose rules free the seat: how "
        "many more rounds dealt without them free it (0: at the end of the round in play); "
        "null otherwise, or not known"
    )


class SeatedPlayer(PlayerAtTable):
    available: int
    in_play: int


class TableAnswer(TableView):
    """``GET /v1/tables/{stream_id}``: what a client that reconnects needs."""

    players: list[SeatedPlayer]
    current_round: RoundAnswer | None = Field(description="the round in play; null between")
    last_round_id: str | None


class PlayerTableAnswer(TableView):
    """``GET /v1/players/{player_id}/tables/{stream_id}``: the table as that player's client
    may be shown it. ``you``: the player's own place (null when not seated); ``players``: the
    others, without their money; ``active.actions`` null on another player's turn (their
    money decides them); ``current_round`` as ``PlayerRoundAnswer`` has it (its ``players``
    empty when the player has no bet in it)."""

    you: SeatedPlayer | None
    players: list[PlayerAtTable]
    current_round: PlayerRoundAnswer | None = Field(
        description="the round in play, as the player may see it; null between"
    )
    last_round_id: str | None


class InterruptedRound(_Answer):
    round_id: str
    table: str
    round: int
    variant: str
    status: Literal["betting", "playing"]
    opened_at: Moment
    idle_since: Moment = Field(description="the table's last event")
    closable_from: Moment | None = Field(
        description="from when the rules let an operator close it; null at a table whose "
        "rules keep the round for its player (listed with tables=all)"
    )
    in_play: dict[str, int] = Field(description="each player's money in the round")


class InterruptedAnswer(_Answer):
    """``GET /v1/interrupted-rounds``: the longest waiting first."""

    idle_before: Moment
    rounds: list[InterruptedRound]


# ---- the game performance report -------------------------------------------------------------

Percent = Annotated[
    str | None,
    WithJsonSchema(
        {
            "type": ["string", "null"],
            "pattern": r"^-?[0-9]+\.[0-9]{4}$",
            "description": "a percent with four decimals, rounded half to even (exact "
            "ratio, as text); null when there is nothing to divide by",
        }
    ),
]


class GameLine(_Answer):
    """One game (variant) in one currency over the report's days. Money in minor units; a
    return is a percent with four decimals, rounded half to even from the exact ratio, as text
    (null when there is nothing to divide by)."""

    variant: str
    currency: str
    tables: int = Field(description="tables that closed a round of it in the range")
    tables_with_own_rules: int = Field(
        description="of those, tables opened with rules other than the preset's (overrides): "
        "the preset's theoretical return is not theirs"
    )
    rounds: int = Field(description="rounds settled")
    cancelled: int = Field(
        description="rounds closed with no box dealt, every bet returned: no player was ready "
        "when betting closed (bets taken back, every player passing, leaving or left out by the "
        "clock), or an operator closed an interrupted round before its deal"
    )
    voided: int = Field(
        description="rounds an operator voided for a malfunction (VoidRound): every wager "
        "returned; their money is in none of the sums here"
    )
    player_rounds: int = Field(description="players dealt in, summed over the rounds")
    initial_bets: int = Field(description="the bets dealt, before doubles, splits, insurance")
    wagered: int = Field(description="every stake: initial bets, doubles, splits, insurance")
    paid: int = Field(description="every payout, the stakes returned with wins and pushes")
    hold: int = Field(description="wagered - paid: the house's gross gaming revenue")
    rtp_percent: Percent = Field(description="paid / wagered")
    return_per_initial_bet_percent: Percent = Field(
        description="(initial_bets + paid - wagered) / initial_bets: the unit of the "
        "theoretical return (`blackjack rtp`, `blackjack rules`), which assumes basic "
        "strategy and never insurance"
    )


class RulesGameLine(GameLine):
    """A game's line with ``rules=apart``: the tables of one rule set, the preset's (every
    table opened without overrides) or a set of their own (``tables_with_own_rules`` is then
    ``tables``), each on its own line, so the preset's line is the one to compare with the
    preset's theoretical return."""

    own_rules: bool = Field(description="the tables' own rules, not the preset's")
    rules: str | None = Field(
        description="the rule set's fingerprint (16 hex digits; `blackjack rules VARIANT` and "
        "`blackjack rules --table STREAM_ID` print it); null for a game that is no preset",
        json_schema_extra={"pattern": "^[0-9a-f]{16}$"},
    )
    rules_table: str = Field(
        description="the first of the line's tables by id: `blackjack rules --table` prints "
        "its rules and their theoretical return"
    )


Line = GameLine | RulesGameLine
"""A line of the report: with ``rules=apart``, one of a rule set (``RulesGameLine``)."""


class StreamPosition(_Answer):
    topic: str
    partition: int
    next_offset: int = Field(
        description="the first offset of this partition the read model has not folded in: "
        "every event of the stream below it is among its `events`"
    )


class GamesAnswer(_Answer):
    """``GET /v1/reports/games``: the rounds that closed on the UTC days from ``from`` to
    ``to`` (both included; ``days`` days), by the day each closed; games in variant, currency
    order (with ``rules=apart``, each game's preset line first, then its own rule sets in
    fingerprint order)."""

    from_: str = Field(alias="from", json_schema_extra={"format": "date"})
    to: str = Field(json_schema_extra={"format": "date"})
    as_of: str = Field(
        json_schema_extra={"format": "date-time"}, description="when the report was read"
    )
    ended: bool = Field(
        description="the range's last day was over (UTC) at `as_of`: no round can close in "
        "it any more. A range still running (today, days to come) is not final"
    )
    positions: list[StreamPosition] = Field(
        description="the read model's position in each partition it folds, read before the "
        "sums: the lines of a range that has ended are final once these reach the topic's ends "
        "as of its end (the projection workers' lag: `blackjack_projection_lag`)"
    )
    games: list[Line]


class DayGames(_Answer):
    """One UTC day's lines: those of the games that closed a round on it (none: an empty
    list, the day listed all the same)."""

    day: str = Field(json_schema_extra={"format": "date"})
    ended: bool = Field(description="the day was over (UTC) at the report's `as_of`")
    games: list[Line]


class GamesByDayAnswer(GamesAnswer):
    """``GET /v1/reports/games?by=day``: the range's lines (``games``, as without ``by``) and
    each day's (``days``: every day of the range in order; a day on which no round closed has
    no line). A day's sums add up to the range's; ``tables`` and ``tables_with_own_rules`` do
    not (a table that played on two days is one table of the range)."""

    days: list[DayGames]


# ---- the document ----------------------------------------------------------------------------


class StreamEventsAnswer(_Answer):
    """``GET /v1/streams/{stream_id}/events``: where a client joining a table (or following a
    wallet) starts, instead of reading the stream's partition of ``blackjack.events`` from
    its start: fold these, then read the partition from the position's ``next_offset``, and
    skip an event at a sequence already folded (the same event)."""

    stream_id: str
    positions: list[StreamPosition] = Field(
        description="the read model's position in each partition it folds, read before the "
        "events: an event folded since is read again from the topic, never missed"
    )
    events: list[dict[str, Any]] = Field(
        description="the stream's events after `after`, in sequence order, each an event "
        "envelope as on the topic (schemas/event-envelope.json: the shoe sealed); none for a "
        "stream the read model has not folded"
    )
    next: int | None = Field(description="the `after` of the next page; null on the last")


class TokenRevocationAnswer(_Answer):
    """``POST /v1/players/{player_id}/token-revocation`` (an operator's token)"""

    player_id: str
    not_before: int = Field(
        description="Unix seconds: the player's tokens with an iat before it are refused from "
        "now on, by every query API process over this store, and so are those before the "
        "revocation's next second plus the checking process's own clock leeway "
        "(BLACKJACK_API_JWT_LEEWAY_S: a token the platform signed a moment ago may carry an "
        "iat that far ahead); it is that second plus this process's leeway, none without "
        "player keys. Sign the player new ones with an iat at or after it plus the leeway"
    )


ANSWERS: tuple[type[BaseModel], ...] = (
    WalletAnswer,
    PlayerRoundsAnswer,
    RoundAnswer,
    PlayerRoundAnswer,
    TableAnswer,
    PlayerTableAnswer,
    StreamEventsAnswer,
    InterruptedAnswer,
    GamesAnswer,
    GamesByDayAnswer,
    TokenRevocationAnswer,
    ErrorAnswer,
)


def _parameter(name: str, where: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": schema,
    }


PLAYER_ID = _parameter("player_id", "path", "the platform's player id", {"type": "string"})
PAGE = _parameter(
    "limit",
    "query",
    "rounds per page",
    {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
)
WALLET_PAGE = _parameter(
    "limit",
    "query",
    "table accounts per page",
    {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000},
)
CURSOR = _parameter("cursor", "query", "the `next` of the previous page", {"type": "string"})
ROUND_ID = _parameter(
    "round_id",
    "path",
    "`{stream_id}:{round}`, e.g. `table-7:3` (the stream id may hold `:` itself); any other "
    "form is a 400 `bad_round_id`, a round number past any round held a 404",
    {"type": "string", "pattern": r"^[\s\S]+:0*[1-9][0-9]*$"},
)
STREAM_ID = _parameter("stream_id", "path", "the table's stream id", {"type": "string"})
STREAM = _parameter("stream_id", "path", "a table's or a wallet's stream id", {"type": "string"})
AFTER = _parameter(
    "after",
    "query",
    "the events after this sequence (the `next` of the previous page)",
    {"type": "integer", "minimum": 0, "default": 0},
)
EVENTS_PAGE = _parameter(
    "limit",
    "query",
    "events per page",
    {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000},
)
IDLE_DAYS = _parameter(
    "idle_days",
    "query",
    "tables with no event for this many days",
    {"type": "integer", "minimum": 1, "maximum": 3650, "default": 30},
)
TABLES = _parameter(
    "tables",
    "query",
    "closable: the tables whose rules let an operator close an interrupted round; all: every "
    "table (the unfinished games at single-player tables, which wait for their player)",
    {"type": "string", "enum": ["closable", "all"], "default": "closable"},
)
LIMIT = _parameter(
    "limit",
    "query",
    "rounds at most",
    {"type": "integer", "minimum": 1, "maximum": 100, "default": 100},
)

REPORT_FROM = _parameter(
    "from",
    "query",
    "the first UTC day, YYYY-MM-DD (default: today)",
    {"type": "string", "format": "date", "pattern": DAY_PATTERN},
)
REPORT_DAYS = _parameter(
    "days",
    "query",
    "how many UTC days from `from`, `from` included (up to the calendar's last day)",
    {"type": "integer", "minimum": 1, "maximum": MAX_DAYS, "default": 1},
)
REPORT_BY = _parameter(
    "by",
    "query",
    "`game`: one line per game and currency over the range; `day`: the same, and each day's "
    "lines (`days`, every day of the range)",
    {"type": "string", "enum": ["game", "day"], "default": "game"},
)
REPORT_RULES = _parameter(
    "rules",
    "query",
    "`together`: a game's tables on one line; `apart`: the tables opened with their own rules "
    "on lines of their own, one per rule set, apart from the preset's",
    {"type": "string", "enum": ["together", "apart"], "default": "together"},
)

Answers = type[BaseModel] | tuple[type[BaseModel], ...]
"""an operation's answer, or its answers one of which it gives (as its parameters ask)"""

OPERATIONS: dict[str, tuple[str, Answers, list[dict[str, Any]], tuple[int, ...]]] = {
    "/v1/players/{player_id}/wallet": (
        "The player's money: the wallet, each table's account, totals per currency",
        WalletAnswer,
        [PLAYER_ID, WALLET_PAGE, CURSOR],
        (400, 404),
    ),
    "/v1/players/{player_id}/rounds": (
        "The player's betting history, newest first",
        PlayerRoundsAnswer,
        [PLAYER_ID, PAGE, CURSOR],
        (400, 404),
    ),
    "/v1/players/{player_id}/rounds/{round_id}": (
        "One game cycle as the player may be shown it (GLI-19 recall to the player): every "
        "card, box, bet, decision and payout at the table, and of the other players nothing "
        "that was theirs alone (balances, the options their money allowed, money paid in or "
        "out, command ids); a 404 for a round the player had no bet in",
        PlayerRoundAnswer,
        [PLAYER_ID, ROUND_ID],
        (400, 404),
    ),
    "/v1/rounds/{round_id}": (
        "One game cycle in full: every card, decision, wager and payout (GLI-19 recall)",
        RoundAnswer,
        [ROUND_ID],
        (400, 404),
    ),
    "/v1/tables/{stream_id}": (
        "A table as a reconnecting client sees it, with the round in play",
        TableAnswer,
        [STREAM_ID],
        (404,),
    ),
    "/v1/players/{player_id}/tables/{stream_id}": (
        "A table as that player's client may be shown it, reconnecting or watching: the "
        "player's own place, the others without their money, the round in play as the "
        "player may see it",
        PlayerTableAnswer,
        [PLAYER_ID, STREAM_ID],
        (404,),
    ),
    "/v1/streams/{stream_id}/events": (
        "A stream's events as the read model folded them, with its position in each "
        "partition: a client joining a table starts from these, not from the partition's start",
        StreamEventsAnswer,
        [STREAM, AFTER, EVENTS_PAGE],
        (400,),
    ),
    "/v1/interrupted-rounds": (
        "Open rounds left waiting, at tables whose rules let an operator close them (or all)",
        InterruptedAnswer,
        [IDLE_DAYS, TABLES, LIMIT],
        (400,),
    ),
    "/v1/reports/games": (
        "Game performance: each game's rounds, wagers, payouts, hold and return over UTC days",
        (GamesAnswer, GamesByDayAnswer),
        [REPORT_FROM, REPORT_DAYS, REPORT_BY, REPORT_RULES],
        (400,),
    ),
}


POSTS: dict[str, tuple[str, Answers, list[dict[str, Any]], tuple[int, ...]]] = {
    "/v1/players/{player_id}/token-revocation": (
        "For the operator: revokes the player's tokens issued until now (a stolen device, a "
        "closed account), on every query API process over this store, until they expire; "
        "no body. A player's token is 403 forbidden, and so is any request to an API "
        "without operator tokens unless BLACKJACK_API_OPERATOR_AUTH=gateway",
        TokenRevocationAnswer,
        [PLAYER_ID],
        (400,),
    ),
}
"""The operations answered to a POST (their paths answer nothing else)."""


def openapi_document() -> dict[str, Any]:
    """The document (a copy: the one built is kept, for every request to be served)."""
    return copy.deepcopy(_document())


@cache
def _document() -> dict[str, Any]:
    _, schemas = models_json_schema(
        [(model, "serialization") for model in ANSWERS],
        ref_template="#/components/schemas/{model}",
    )
    paths = {
        path: {"get": _operation(summary, model, parameters, errors)}
        for path, (summary, model, parameters, errors) in OPERATIONS.items()
    }
    paths |= {
        path: {"post": _operation(summary, model, parameters, errors)}
        for path, (summary, model, parameters, errors) in POSTS.items()
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Blackjack query API",
            "version": "1",
            "description": (
                "The read model's answers: a player's money and betting history, a round in "
                "full, a table, the interrupted rounds. Money is in minor units of the "
                "currency; times are RFC 3339 in UTC. docs/projections.md"
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An operator token (BLACKJACK_API_TOKENS: reads everything) "
                    "or a player's JWT signed by the platform (EdDSA, ES256 or HS256, chosen "
                    "by its kid when the keys have ids; sub the player id, iat, exp at most "
                    "BLACKJACK_API_JWT_MAX_LIFETIME_S after iat, aud this service): reads "
                    "/v1/players/{sub}/..., the stream wallet:{sub} and the streams of the "
                    "single-player tables only sub played at, else 403 forbidden. A refused "
                    "token's 401 says why in WWW-Authenticate's error_description (and the "
                    "error's message), never quoting the token",
                }
            },
        },
        "security": [{"bearer": []}],
    }
    int64_integers(document)
    no_final_line_feed(document)
    return document


def _answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _operation(
    summary: str, answers: Answers, parameters: list[dict[str, Any]], errors: tuple[int, ...]
) -> dict[str, Any]:
    error = {"$ref": "#/components/schemas/ErrorAnswer"}
    models = answers if isinstance(answers, tuple) else (answers,)
    refs = [{"$ref": f"#/components/schemas/{model.__name__}"} for model in models]
    responses: dict[str, Any] = {
        "200": _answer(summary, refs[0] if len(refs) == 1 else {"oneOf": refs})
    }
    for status in errors:
        responses[str(status)] = _answer("see the error's code", error)
    responses["401"] = _answer(
        "no valid bearer token (when the API has tokens): expired, not valid yet, living "
        "longer than allowed, an unknown kid, revoked, or not signed by the platform",
        error,
    )
    responses["403"] = _answer(
        "a player's token asking for another player's resource or an operator's", error
    )
    responses["503"] = _answer(
        "the read model cannot serve now (store_unavailable), or the process serves as many "
        "connections as it may (server_busy); try again",
        error,
    )
    responses["default"] = _answer(
        "any other error (400 a bad path, a parameter given twice or a request not HTTP, 405 "
        "not a GET, 408 headers too slow, 431 headers too large, 500)",
        error,
    )
    return {
        "summary": summary,
        "operationId": models[0].__name__.removesuffix("Answer").lower(),
        "parameters": parameters,
        "responses": responses,
    }


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def write(path: Path = PATH) -> None:
    path.write_text(render())


def drifted(path: Path = PATH) -> bool:
    return not path.is_file() or path.read_text() != render()
