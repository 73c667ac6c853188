"""The query API over the read model: a small ASGI app with no framework of its own.

    GET /v1/players/{player_id}/wallet
    GET /v1/players/{player_id}/rounds?limit=20&cursor=...   newest first
    GET /v1/rounds/{stream_id}:{round}                        one game cycle in full
    GET /v1/players/{player_id}/rounds/{stream_id}:{round}    the same, as that player sees it
    GET /v1/tables/{stream_id}                                a table, for a client reconnecting
    GET /v1/players/{player_id}/tables/{stream_id}            the same, as that player sees it
    GET /v1/streams/{stream_id}/events?after=0                its events, for a client joining it
    GET /v1/interrupted-rounds?idle_days=30&limit=100         open rounds left waiting that long
        &tables=all                                           (at every table, not only where
                                                              the operator may close them)
    GET /v1/reports/games?from=2026-12-01&days=31           each game's rounds, wagers, payouts
    GET /v1/openapi.json                                      this API's OpenAPI document
    POST /v1/players/{player_id}/token-revocation            the operator: the player's
                                                              tokens issued until now refused

With tokens configured (``api.tokens``), a request without a valid bearer token gets 401
``unauthenticated`` (``WWW-Authenticate: Bearer ...``); an operator token reads everything, a
player's token only that player's own resources (``authorize``: 403 ``forbidden`` for the
rest; a revoked one, ``revocations``, 401). Answers are JSON; every error is a 4xx with
``{"error": {"code": ..., "message": ...}}``, or a
503 ``store_unavailable`` while the read model's database cannot serve (500
``internal_error`` for anything else unforeseen, logged with its trace).
``QueryApi(store, fallback=app)`` hands every other request (and the ASGI lifespan) to
``fallback``, so the service's own app (FastStream's ``AsgiFastStream``, health, metrics) can
sit behind it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, date, datetime, timedelta
from typing import Any, overload
from urllib.parse import parse_qs, unquote_to_bytes

import structlog
from prometheus_client import Counter
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.api import revocations
from blackjack.api.contract import openapi_document
from blackjack.api.tokens import (
    OPEN,
    REVOKED,
    ApiTokens,
    Operator,
    Player,
    Principal,
    Unauthenticated,
)
from blackjack.domain.wallet import wallet_stream
from blackjack.observability.logging import Throttled
from blackjack.observability.roles import claim
from blackjack.projections import queries, reports
from blackjack.projections.ids import parse_count, parse_round_id
from blackjack.projections.store import ProjectionStore, as_stored, is_store_outage

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = structlog.get_logger("blackjack.api")

PREFIX = "/v1/"
REQUESTS = Counter(
    "blackjack_projection_api_requests_total",
    "Query API requests answered (/v1/...), by HTTP status: 503 while the read model's "
    "database cannot serve, 500 for a query that failed unforeseen",
    ["status"],
)
claim("projections", globals())  # the query API runs where a projection worker does
FAILURES_ALERTED = ("500", "503")
"""The statuses BlackjackQueryApiFailing watches: their series exist from the start, at 0, so
that the first failure is a rate Prometheus sees (a series born at 1 has none: the promtool
tests found a lone 500 never alerted)."""
OUTAGE_LOG_EVERY_S = 10.0
ALLOW = [(b"allow", b"GET, HEAD")]
"""A 405's ``Allow``: RFC 9110 requires it, and a client learns what to send instead."""
ALLOW_POST = [(b"allow", b"POST")]
REVOCATION = "token-revocation"
"""``/v1/players/{player_id}/token-revocation``: the one resource answered to a POST."""
DEFAULT_PAGE = 20
MAX_IDLE_DAYS = 3650
MAX_SEQUENCE = 2**63 - 1
"""The events table's sequence is a BIGINT: an ``after`` past it is a 400, not a 500."""


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


class QueryApi:
    def __init__(
        self,
        store: ProjectionStore,
        fallback: ASGIApp | None = None,
        tokens: ApiTokens = OPEN,
        ready: Callable[[], bool] | None = None,
        stopping: Callable[[], str | None] | None = None,
    ) -> None:
        self.store = store
        self.fallback = fallback
        self.tokens = tokens
        self.ready = ready
        """false while the store may not be migrated yet (a worker waiting for its database)"""
        self.stopping = stopping
        """why the worker is stopping for good (a store at another schema revision, a codec
        missing), or None"""
        self._outages = Throttled(OUTAGE_LOG_EVERY_S)
        for status in FAILURES_ALERTED:  # at 0 from the start: the first failure is an increase
            REQUESTS.labels(status)

    def _outage_logged(self, path: str, error: BaseException) -> None:
        """One line per ``OUTAGE_LOG_EVERY_S`` with how many were not logged: a database
        outage under load fails every request (a drill: 730 lines a minute per worker)."""
        left_out = self._outages.due()
        if left_out is None:
            return
        log.warning(
            "query failed: the store cannot serve now",
            path=path,
            error=repr(error)[:500],
            not_logged_since_last=left_out,
        )

    @staticmethod
    def handles(scope: Scope) -> bool:
        """A request of this API: its path as sent begins ``/v1/``. One whose prefix came
        escaped (``/%76%31/``) is not: before, it was served as its unescaped path, past a
        gateway that guards ``/v1/`` by the path as sent."""
        if scope["type"] != "http":
            return False
        raw = bytes(scope.get("raw_path") or b"")
        return (raw or str(scope["path"]).encode()).startswith(PREFIX.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.handles(scope):
            if self.fallback is not None:
                await self.fallback(scope, receive, send)
            elif scope["type"] == "http":
                await _respond(send, scope, 404, _error("not_found", "no such resource"))
            return
        headers: list[tuple[bytes, bytes]] | None = None
        try:
            principal = self.tokens.authenticate(_header(scope, b"authorization"))
            if scope["method"] == "POST":
                status, body = 200, await self._post(scope, principal)
            elif scope["method"] not in ("GET", "HEAD"):
                await self._player_not_revoked(principal)
                if _revocation(_segments(scope)):
                    raise ApiError(405, "method_not_allowed", "a revocation is a POST", ALLOW_POST)
                raise ApiError(405, "method_not_allowed", "the query API only answers GET", ALLOW)
            else:
                status, body = 200, await self._route(scope, principal)
        except Unauthenticated as refused:  # its message names no part of the token
            status, body = 401, _error("unauthenticated", refused.message)
            headers = [(b"www-authenticate", refused.challenge)]
        except ApiError as error:
            status, body, headers = error.status, _error(error.code, error.message), error.headers
        except Exception as error:
            if is_store_outage(error):
                self._outage_logged(scope["path"], error)
                status = 503
                body = _error("store_unavailable", "the read model cannot serve now; try again")
            else:
                log.exception("query failed", path=scope["path"])
                status, body = 500, _error("internal_error", "the query failed")
        REQUESTS.labels(str(status)).inc()
        await _respond(send, scope, status, body, headers)

    async def _post(self, scope: Scope, principal: Principal) -> dict[str, Any]:
        """``POST /v1/players/{player_id}/token-revocation``, the operator's only: the
        player's tokens issued until now are refused from now on, by every query API process
        over this store (``revocations``). No body is read."""
        parts = _segments(scope)
        await self._player_not_revoked(principal)  # refused as on every other path: a 401 first
        if not _revocation(parts):
            raise ApiError(405, "method_not_allowed", "the query API only answers GET here", ALLOW)
        player_id = parts[1]
        if not isinstance(principal, Operator):
            raise ApiError(403, "forbidden", "an operator's token revokes a player's tokens")
        if not self.tokens.operator_writes:  # open: anyone would be the operator
            raise ApiError(
                403,
                "forbidden",
                "no operator token is configured (BLACKJACK_API_TOKENS): this API takes no "
                "revocation, unless BLACKJACK_API_OPERATOR_AUTH=gateway says its gateway "
                "authenticates the operator; or run blackjack projections revoke-tokens",
            )
        if not (_storable(player_id) and len(player_id) <= revocations.MAX_PLAYER_ID_CHARS):
            raise ApiError(400, "bad_path", "a player id is 1-128 characters, none of them NUL")
        self._check_ready()
        not_before = await revocations.revoke_now(self.store, player_id, self.tokens.players)
        log.info("player tokens revoked", player_id=player_id, not_before=not_before)
        return {"player_id": player_id, "not_before": not_before}

    async def _player_not_revoked(self, principal: Principal) -> None:
        """A player's token issued before its player's tokens were revoked: 401, before any
        other answer to a method the path does not take (a 405 there told its holder that the
        token's signature still held, where a bad one gets the 401)."""
        if isinstance(principal, Player):
            self._check_ready()
            async with self.store.reading() as connection:
                await self._refuse_revoked(connection, principal)

    def _check_ready(self) -> None:
        """503 ``store_unavailable`` while the read model is starting (not migrated yet)."""
        why = self.stopping() if self.stopping is not None else None
        if why is not None:  # (it said "starting; try again" of a worker stopping for good)
            raise ApiError(
                503,
                "store_unavailable",
                f"this projection worker is stopping ({why}) and answers no query: the "
                "platform's other workers do, or this one once restarted (its operator's "
                "alert says what to do)",
            )
        if self.ready is not None and not self.ready():
            raise ApiError(503, "store_unavailable", "the read model is starting; try again")

    async def _refuse_revoked(self, connection: AsyncConnection, player: Player) -> None:
        """``Unauthenticated`` (401) for a token issued before its player's tokens were revoked."""
        leeway = self.tokens.players.leeway_s if self.tokens.players is not None else 0
        revoked = await revocations.refused_before(connection, player.player_id, leeway)
        if revoked is not None and player.issued_at < revoked:
            raise Unauthenticated(REVOKED, presented=True)

    async def _route(self, scope: Scope, principal: Principal) -> dict[str, Any]:
        parts = _segments(scope)
        params = _params(scope)
        if parts == ["openapi.json"] and not isinstance(principal, Player):
            return openapi_document()  # the contract of every answer below: no store needed
        self._check_ready()
        async with self.store.reading() as connection:
            # a revoked token first: it is refused everything (a 401), the document and the
            # paths it would be forbidden as well (a review: those answered 200 and 403)
            if isinstance(principal, Player):
                await self._refuse_revoked(connection, principal)
            if parts == ["openapi.json"]:
                return openapi_document()
            authorize(principal, parts)
            seated = None if isinstance(principal, Operator) else principal.player_id
            match parts:
                case ["players", player_id, "wallet"] if player_id:
                    return await _wallet(connection, player_id, params)
                case ["players", player_id, "rounds"] if player_id:
                    return await _rounds(connection, player_id, params)
                case ["players", player_id, "rounds", text] if player_id and text:
                    return await _round(connection, text, player_id)
                case ["rounds", text] if text:
                    return await _round(connection, text)
                case ["tables", stream_id] if stream_id:
                    return await _table(connection, stream_id)
                case ["players", player_id, "tables", stream_id] if player_id and stream_id:
                    return await _table(connection, stream_id, player_id, seated)
                case ["streams", stream_id, "events"] if stream_id:
                    return await _stream_events(connection, stream_id, params, seated)
                case ["interrupted-rounds"]:
                    return await _interrupted(connection, params)
                case ["reports", "games"]:
                    return await _games(connection, params)
        if _revocation(parts):
            raise ApiError(405, "method_not_allowed", "a revocation is a POST", ALLOW_POST)
        raise ApiError(404, "not_found", f"no such resource: {str(scope['path'])[:200]}")


def _revocation(parts: list[str]) -> bool:
    """Whether ``parts`` is ``players/{player_id}/token-revocation``: answered to a POST."""
    return len(parts) == 3 and parts[0] == "players" and bool(parts[1]) and parts[2] == REVOCATION


def authorize(principal: Principal, parts: list[str]) -> None:
    """403 ``forbidden`` unless ``principal`` may read the resource at ``parts``: an operator
    everything; a player ``/players/{their id}/...`` (their wallet, history, the rounds they
    played and the tables they sit at, each as they may see it), their wallet's stream and
    the streams of the single-player tables they alone have played at (``_stream_events``
    checks that in the store), nothing else. A shared table's stream is refused them: its
    events carry every player's balances, which the table shows no one. Refused by default,
    so that a resource added later is the back office's until it is given to players here
    (a path that names nothing is refused a player too: which paths exist is no business of
    a player's client)."""
    if isinstance(principal, Operator):
        return
    me = principal.player_id
    match parts:
        case ["players", player_id, *_] if player_id:
            if player_id == me:
                return
            raise ApiError(
                403, "forbidden", "a player's token reads that player's own resources only"
            )
        case ["streams", stream_id, "events"] if stream_id:
            return  # their wallet's, or a table they alone played at: _stream_events
    raise ApiError(
        403,
        "forbidden",
        "an operator's resource: a player's token reads /v1/players/{its player}/..., "
        "/v1/streams/wallet:{its player}/events and the streams of the single-player tables "
        "only its player played at",
    )


def _storable(*identifiers: str | None) -> bool:
    """Whether a store can hold each identifier given: PostgreSQL's text has no NUL character
    (asked for one, the driver fails the query), so an id with one names nothing, in either
    store."""
    return not any("\x00" in identifier for identifier in identifiers if identifier is not None)


async def _wallet(connection: AsyncConnection, player_id: str, params: Params) -> dict[str, Any]:
    most = queries.MAX_WALLET_TABLES
    limit = parse_count(params.get("limit", str(most)), most)
    if limit is None:
        raise ApiError(400, "bad_parameter", f"limit must be a whole number from 1 to {most}")
    try:
        found = await queries.wallet(connection, as_stored(player_id), limit, params.get("cursor"))
    except queries.BadCursor as error:  # (not a stored row the models refuse: a 500)
        raise ApiError(400, "bad_parameter", str(error)) from None
    if found is None:
        raise ApiError(404, "unknown_player", f"no player {player_id[:200]!r}: no wallet, no seat")
    return found


async def _rounds(connection: AsyncConnection, player_id: str, params: Params) -> dict[str, Any]:
    limit = parse_count(params.get("limit", str(DEFAULT_PAGE)), queries.MAX_PAGE)
    if limit is None:
        raise ApiError(
            400, "bad_parameter", f"limit must be a whole number from 1 to {queries.MAX_PAGE}"
        )
    try:
        found = await queries.player_rounds(
            connection, as_stored(player_id), limit, params.get("cursor")
        )
    except queries.BadCursor as error:  # (not a stored row the models refuse: a 500)
        raise ApiError(400, "bad_parameter", str(error)) from None
    if found is None:
        raise ApiError(404, "unknown_player", f"no player {player_id[:200]!r}: no wallet, no seat")
    return found


async def _round(
    connection: AsyncConnection, text: str, player_id: str | None = None
) -> dict[str, Any]:
    """The round in full, or (``player_id``) as that player may see it."""
    stream_id, _, number = text.rpartition(":")
    if not (stream_id and number.isascii() and number.isdigit() and number.strip("0")):
        # off the pattern of the document (contract.ROUND_ID): a 400; on it, a 404 or the round
        raise ApiError(
            400,
            "bad_round_id",
            f"a round id is STREAM_ID:ROUND with ROUND from 1, not {text[:80]!r}",
        )
    try:
        stream_id, round_number = parse_round_id(text)
    except ValueError:  # well formed, past any round a store holds (MAX_ROUND)
        raise ApiError(404, "unknown_round", f"no round {text[:200]!r}") from None
    found = None
    if _storable(stream_id):
        if player_id is None:
            found = await queries.round_detail(connection, stream_id, round_number)
        else:
            key = as_stored(player_id)
            found = await queries.player_round(connection, key, stream_id, round_number)
    if found is None:
        played = "" if player_id is None else f" played by {player_id[:200]!r}"
        raise ApiError(404, "unknown_round", f"no round {text[:200]!r}{played}")
    return found


async def _table(
    connection: AsyncConnection,
    stream_id: str,
    player_id: str | None = None,
    seated: str | None = None,
) -> dict[str, Any]:
    """The table, or (``player_id``) as that player's client may be shown it; for a player's
    own token (``seated``) only where they sit: a 404 like a table that does not exist, so
    the answer says nothing of who sits at a table the player is not at."""
    found = None
    if _storable(stream_id):
        if player_id is None:
            found = await queries.table_state(connection, stream_id)
        # the seat first: a table read whole before it was refused took longer to refuse than
        # one that does not exist, which told the player which tables exist (a review)
        elif seated is None or await queries.is_seated(connection, as_stored(seated), stream_id):
            found = await queries.player_table(connection, as_stored(player_id), stream_id)
    # A stream that never opened holds at most a declined buy-in (a wallet's BuyIn to an id
    # with no table): no table a client could sit at.
    if found is None or not found.get("opened") or (seated is not None and found["you"] is None):
        raise ApiError(404, "unknown_table", f"no table {stream_id[:200]!r}")
    return found


async def _stream_events(
    connection: AsyncConnection, stream_id: str, params: Params, seated: str | None = None
) -> dict[str, Any]:
    """The stream's events as the read model holds them, and where it stands in each
    partition: a stream it never folded has none (a table not yet played, at a position past
    which its first event will come), not a 404. For a player's token (``seated``) their
    wallet's stream, or a single-player table's only they played at, its staff's names and
    command ids left out (``queries.events_seen_by_player``); any other 403 ``forbidden``
    (the table's events would show another player's money and play), and so is a page of
    such a table with an event that names another player (``queries.names_another_player``:
    one who never sat there, a refused money command or a declined buy-in of theirs)."""
    own = seated is None or stream_id == wallet_stream(seated)
    if not own and not (
        _storable(stream_id, seated)
        and await queries.played_alone(connection, stream_id, str(seated))
    ):
        raise ApiError(
            403,
            "forbidden",
            "a player's token reads its own wallet's stream and the streams of the "
            "single-player tables only its player played at",
        )
    text = params.get("after", "0")
    after = 0 if text and not text.strip("0") else parse_count(text, MAX_SEQUENCE)  # 0 allowed
    limit = parse_count(params.get("limit", str(queries.MAX_EVENTS_PAGE)), queries.MAX_EVENTS_PAGE)
    if after is None or limit is None:
        raise ApiError(
            400,
            "bad_parameter",
            f"after must be a whole number from 0 to {MAX_SEQUENCE}, "
            f"limit from 1 to {queries.MAX_EVENTS_PAGE}",
        )
    if not _storable(stream_id):  # no stream holds a NUL (the commands refuse one)
        after = MAX_SEQUENCE
    found = await queries.stream_events(connection, stream_id, after, limit)
    if seated is not None and stream_id != wallet_stream(seated):
        if queries.names_another_player(found["events"], seated):
            raise ApiError(
                403,
                "forbidden",
                "this table's events name another player: a player's token reads the "
                "streams of the single-player tables only its player played at",
            )
        staff = await queries.staff_commands_at_edges(connection, stream_id, found["events"])
        found["events"] = queries.events_seen_by_player(found["events"], staff)
    elif seated is not None:  # the player's own wallet
        found["events"] = queries.wallet_events_seen_by_player(found["events"])
    return found


async def _interrupted(connection: AsyncConnection, params: Params) -> dict[str, Any]:
    days = parse_count(params.get("idle_days", "30"), MAX_IDLE_DAYS)
    limit = parse_count(params.get("limit", str(queries.MAX_PAGE)), queries.MAX_PAGE)
    if days is None or limit is None:
        raise ApiError(
            400,
            "bad_parameter",
            f"idle_days must be a whole number from 1 to {MAX_IDLE_DAYS}, "
            f"limit from 1 to {queries.MAX_PAGE}",
        )
    tables = params.get("tables", "closable")
    if tables not in ("closable", "all"):
        raise ApiError(400, "bad_parameter", "tables must be closable or all")
    idle_before = datetime.now(UTC) - timedelta(days=days)
    rounds = await queries.interrupted_rounds(
        connection, idle_before, limit, every_table=tables == "all"
    )
    return {"idle_before": queries.iso(idle_before), "rounds": rounds}


def _day(params: Params, name: str, default: date) -> date:
    text = params.get(name)
    if text is None:
        return default
    day = reports.parse_day(text)
    if day is None:
        raise ApiError(
            400, "bad_parameter", f"{name} must be a day as YYYY-MM-DD, not {text[:40]!r}"
        )
    return day


async def _games(connection: AsyncConnection, params: Params) -> dict[str, Any]:
    first = _day(params, "from", datetime.now(UTC).date())  # UTC days, as game_days has
    days = parse_count(params.get("days", "1"), reports.MAX_DAYS)
    if days is None:
        raise ApiError(
            400, "bad_parameter", f"days must be a whole number from 1 to {reports.MAX_DAYS}"
        )
    by = _choice(params, "by", ("game", "day"))
    rules = _choice(params, "rules", ("together", "apart"))
    return await reports.game_performance(
        connection,
        first,
        days,
        now=datetime.now(UTC),
        by_day=by == "day",
        rules_apart=rules == "apart",
    )


def _choice(params: Params, name: str, choices: tuple[str, ...]) -> str:
    """The parameter, one of ``choices`` (the first when it is not given)."""
    text = params.get(name, choices[0])
    if text not in choices:
        raise ApiError(400, "bad_parameter", f"{name} is {' or '.join(choices)}, not {text[:40]!r}")
    return text


def _segments(scope: Scope) -> list[str]:
    """The path after ``/v1/``, split before it is percent-decoded, so an id that holds a "/"
    (sent as ``%2F``; any id of 1-128 characters is a valid player id) stays one segment."""
    raw = bytes(scope.get("raw_path") or b"").partition(b"?")[0]
    if not raw:  # (an ASGI server that gives none)
        return str(scope["path"])[len(PREFIX) :].split("/")
    try:
        # the bytes after unescaping are UTF-8, whether a character came escaped or as sent
        # (a client that does not escape "é" sends its two bytes: not two latin-1 letters)
        return [unquote_to_bytes(part).decode() for part in raw[len(PREFIX) :].split(b"/")]
    except UnicodeDecodeError:
        raise ApiError(400, "bad_path", "the path's escapes are not UTF-8") from None


class Params:
    """The query's parameters. One the route reads given twice is a 400 (which one would it
    be?); one it does not read is ignored, once or repeated."""

    def __init__(self, parsed: dict[str, list[str]]) -> None:
        self.parsed = parsed

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        values = self.parsed.get(name, [])
        if len(values) > 1:
            raise ApiError(400, "bad_parameter", f"{name} is given more than once")
        return values[0] if values else default


def _params(scope: Scope) -> Params:
    query = bytes(scope.get("query_string", b""))
    try:
        return Params(parse_qs(query.decode(), keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise ApiError(400, "bad_parameter", "the query is not UTF-8, as sent or escaped") from None


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


FALLBACK_REFUSALS = {
    404: ("not_found", "no such resource"),
    405: ("method_not_allowed", "this resource only answers GET"),
}
"""The fallback's own refusals (FastStream's 404 is text/plain 'Application doesn't support
regular HTTP protocol.', its 405 'Method Not Allowed'), answered as the API's errors."""


def typed_refusals(app: ASGIApp) -> ASGIApp:
    """``app`` (the service's FastStream app: health, metrics, AsyncAPI) with a refusal of
    ``FALLBACK_REFUSALS`` that is not JSON replaced by the API's typed error (its ``Allow``
    header kept)."""

    async def typed(scope: Scope, receive: Receive, send: Send) -> None:
        await app(scope, receive, _typed_sending(scope, send) if scope["type"] == "http" else send)

    return typed


def only_at(path: str, app: ASGIApp) -> ASGIApp:
    """``app`` at ``path`` and to GET and HEAD only; anything else is the API's typed 404 or
    405."""

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
        elif scope["path"] != path:
            await _respond(send, scope, 404, _error(*FALLBACK_REFUSALS[404]))
        elif scope["method"] not in ("GET", "HEAD"):
            await _respond(send, scope, 405, _error(*FALLBACK_REFUSALS[405]), ALLOW)
        else:
            await app(scope, receive, send)

    return served


def _typed_sending(scope: Scope, send: Send) -> Send:
    replaced = False

    async def sending(message: Message) -> None:
        nonlocal replaced
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", ())]
            json_already = any(
                k == b"content-type" and v.startswith(b"application/json") for k, v in headers
            )
            if status in FALLBACK_REFUSALS and not json_already:
                replaced = True
                allow = [(k, v) for k, v in headers if k == b"allow"]
                await _respond(send, scope, status, _error(*FALLBACK_REFUSALS[status]), allow)
                return
        elif message["type"] == "http.response.body" and replaced:
            return  # the fallback's own text, answered above
        await send(message)

    return sending


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope.get("headers", ()) if key.lower() == name), None)


async def _respond(
    send: Send,
    scope: Scope,
    status: int,
    body: dict[str, Any],
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"cache-control", b"no-store"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send(
        {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else payload}
    )


def query_api(
    store: ProjectionStore,
    fallback: ASGIApp | None = None,
    tokens: ApiTokens = OPEN,
    ready: Callable[[], bool] | None = None,
    stopping: Callable[[], str | None] | None = None,
) -> QueryApi:
    """The query API as one ASGI app; ``fallback`` answers everything outside ``/v1/``."""
    log.info(
        "query API",
        access=repr(tokens)
        if tokens.required
        else "open: no BLACKJACK_API_TOKENS nor player keys (behind the platform's gateway)"
        + (
            "; the gateway authenticates the operator's writes"
            if tokens.gateway_operator
            else "; no revocation taken (BLACKJACK_API_OPERATOR_AUTH=gateway takes them)"
        ),
    )
    return QueryApi(store, fallback, tokens, ready, stopping)
