"""A ``blackjack play`` client joining a table starts from the read model (the query API's
``GET /v1/streams/{id}/events`` and the read model's position in the table's partition), not
from the partition's start, and builds the very table a read from offset 0 builds: view,
accounts, rounds, betting history, every event folded, the screens, with a round in flight
whose first events the read model holds and whose last only the topic has; at a
single-player table with the player's own token (a JWT the platform signs). Without a query
API, or with one that cannot say, it reads from the start and says why."""

from __future__ import annotations

import asyncio
import io
import os
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from rich.console import Console

from blackjack.api.tokens import ApiTokens
from blackjack.bus.topics import partition_for
from blackjack.client import BlackjackClient
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import WalletDeposit
from blackjack.messages.wire import SealedShoeShuffled
from blackjack.play.follow import TableFollower, WalletFollower
from blackjack.play.read_model import NoHistory, ReadModelApi, read_model_history
from blackjack.play.screen import history_screen, table_screen
from blackjack.play.session import PlaySession
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration import infra
from tests.integration.conftest import WAIT_S, KafkaSpace, accept, await_answered_events
from tests.integration.conftest_projections import (
    STORE_KINDS,
    served_query_api,
    store_factory,
)
from tests.integration.test_play import next_line, play

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

A = "alice"
NOW = datetime(2030, 1, 1, tzinfo=UTC)
PLATFORM = ed25519.Ed25519PrivateKey.generate()
PLAYER_KEYS = ApiTokens.from_env(
    {
        "BLACKJACK_API_PLAYER_KEYS": PLATFORM.public_key()
        .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        .decode()
    }
)


async def fold_answered(writer: ProjectionWriter, space: KafkaSpace) -> None:
    """The read model folded from offset 0 to the end of the events, the events of every
    command answered so far among them."""
    await await_answered_events(space)
    await rebuild(writer, space.bootstrap, space.topics.events)


def player_token(player_id: str) -> str:
    now = int(time.time())
    claims = {"sub": player_id, "aud": "blackjack-query-api", "iat": now, "exp": now + 600}
    return jwt.encode(claims, PLATFORM, algorithm="EdDSA")


def _text(shown: object) -> str:
    console = Console(width=160, record=True, color_system=None, file=io.StringIO())
    console.print(shown)
    return console.export_text()


def same_table(joined: TableFollower, from_start: TableFollower) -> None:
    """What the two followers show, and every piece it is drawn from, are the same."""
    table, expected = joined.table, from_start.table
    assert table.view == expected.view
    assert table.accounts == expected.accounts
    assert table.rounds == expected.rounds
    assert table.players == expected.players
    assert joined.folded_since(0) == from_start.folded_since(0)
    for player in {A, *expected.accounts}:
        assert _text(table_screen(table, player, NOW)) == _text(table_screen(expected, player, NOW))
        assert _text(history_screen(table, player, 50)) == _text(
            history_screen(expected, player, 50)
        )


async def _joined(
    space: KafkaSpace, stream_id: str, through: int, api: ReadModelApi | None = None
) -> TableFollower:
    """A follower of the table, caught up, and past its event ``through``: an answer can be
    read before its events (their transaction's commit marker reaches each partition in its
    own time, on a cluster another broker's), so the history as it was at the follower's start
    may end before the last command's events."""
    follower = TableFollower(space.bootstrap, stream_id, space.topics, read_model=api)
    await follower.start()
    await follower.caught_up(WAIT_S)
    await follower.until(through, WAIT_S)
    return follower


def _neighbour(stream_id: str, partitions: int) -> str:
    """Another table's id on the same partition."""
    return next(
        other
        for i in range(1000)
        if partition_for(other := f"{stream_id}-n{i}", partitions)
        == partition_for(stream_id, partitions)
    )


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    factory = store_factory(request, tmp_path)
    yield await factory.store()
    await factory.close()


async def test_a_client_joins_from_the_read_model_and_shows_what_a_read_from_offset_0_shows(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient, store: ProjectionStore
) -> None:
    table = f"join-{os.urandom(3).hex()}"
    other = _neighbour(table, space.partitions)
    writer = ProjectionWriter(store)

    async def fold() -> None:
        await fold_answered(writer, space)

    await accept(client, other, cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id="bob"))
    async with TableFollower(space.bootstrap, table, space.topics) as playing:
        await playing.caught_up(WAIT_S)
        session = PlaySession(client, playing, A)
        for command in (
            cmd.OpenTable(variant="mini-h17"),
            cmd.SitDown(player_id=A),
            cmd.Deposit(player_id=A, amount=100_000),
        ):
            assert (await session.send(command)).status == "accepted"
        settled = 0
        for _ in range(200):  # rounds played and settled: the betting history
            before = playing.table.view.round_open
            await session.handle(next_line(playing.table, A))
            assert session.results[-1].status == "accepted", session.results[-1].rejection
            settled += before and not playing.table.view.round_open
            if settled == 3:
                break
        for _ in range(20):  # a round in flight: its bet folded by the read model, its deal not
            await session.handle("bet 5")
            await fold()
            await session.handle("deal")
            if playing.table.view.round_open:
                break
        assert playing.table.view.round_open
        last = playing.sequence
    # the neighbour writes after the read model's position: records the joining client reads
    await accept(client, other, cmd.Deposit(player_id="bob", amount=700))

    # alice's own token: the table's stream is hers alone (before: 403, read from the start)
    async with served_query_api(store, PLAYER_KEYS) as url:
        api = ReadModelApi(url, player_token(A))
        joined = await _joined(space, table, last, api)
        partition = partition_for(table, space.partitions)
        held = await read_model_history(api, table, space.topics.events, partition)
        with pytest.raises(NoHistory, match="answered 403"):  # bob's table is his
            await read_model_history(api, other, space.topics.events, partition)
    from_start = await _joined(space, table, last)
    # what the player's token was given holds no card before it is shown: the hole card is
    # dealt without one, and each shoe's order is sealed (revealed when the shoe is retired)
    dealt = [e.data for e in held.envelopes if isinstance(e.data, ev.CardDealt)]
    hole_cards = [card for card in dealt if not card.face_up]
    assert hole_cards and all(card.card is None for card in hole_cards)
    shoes = [e.data for e in held.envelopes if e.type == "ShoeShuffled"]
    assert shoes and all(isinstance(shoe, SealedShoeShuffled) for shoe in shoes)
    # the round in flight: its bet from the read model, its deal from the topic alone
    assert held.envelopes[-1].type == "BetPlaced" and 0 < len(held.envelopes) < joined.sequence
    try:
        assert not joined.from_start and from_start.from_start
        assert joined.table.view.round_open and joined.table.view.phase != "betting"
        same_table(joined, from_start)
        assert 0 < joined.records_read < from_start.records_read
        assert "events from the read model" in joined.joined
        # Both follow the table on: the next move shows alike
        moved = PlaySession(client, joined, A)
        await moved.handle(next_line(joined.table, A))
        [result] = moved.results
        assert result.status == "accepted" and result.last_sequence is not None
        await from_start.until(result.last_sequence)
        same_table(joined, from_start)
    finally:
        await joined.stop()
        await from_start.stop()


async def test_without_a_read_model_that_can_say_the_client_reads_from_the_start_and_says_why(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient, store: ProjectionStore
) -> None:
    table = f"join-{os.urandom(3).hex()}"
    *_, seated = await accept(
        client, table, cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id=A)
    )
    last = seated.last_sequence or 0
    from_start = await _joined(space, table, last)
    await from_start.stop()
    assert from_start.joined.startswith("no query API given (--api, BLACKJACK_API_URL); ")
    assert "from its start" in from_start.joined
    # A read model that has folded nothing of this topic (another deployment's, or new)
    async with served_query_api(store) as url:
        unfolded = await _joined(space, table, last, ReadModelApi(url))
    await unfolded.stop()
    assert unfolded.from_start
    assert f"has folded nothing of {space.topics.events}" in unfolded.joined
    same_table(unfolded, from_start)
    # No query API listening there
    gone = await _joined(space, table, last, ReadModelApi(f"http://127.0.0.1:{infra.free_port()}"))
    await gone.stop()
    assert gone.from_start and "did not answer" in gone.joined
    same_table(gone, from_start)
    # An answer longer than the client reads of one (the bound made small: the table's events)
    await fold_answered(ProjectionWriter(store), space)
    async with served_query_api(store) as url:
        bounded = await _joined(space, table, last, ReadModelApi(url, max_bytes=64))
    await bounded.stop()
    assert bounded.from_start and "past the 64 bytes a client reads" in bounded.joined
    same_table(bounded, from_start)


async def test_the_command_line_says_where_it_read_the_table_from(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient, store: ProjectionStore
) -> None:
    table = f"join-{os.urandom(3).hex()}"
    await accept(client, table, cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id=A))
    await fold_answered(ProjectionWriter(store), space)
    process = await play(space, table, "--player", A)
    output, _ = await asyncio.wait_for(process.communicate(b"q\n"), WAIT_S)
    assert b"blackjack play: no query API given (--api, BLACKJACK_API_URL); reading " in output
    async with served_query_api(store) as url:
        process = await play(space, table, "--player", A, "--api", url)
        output, _ = await asyncio.wait_for(process.communicate(b"q\n"), WAIT_S)
    assert process.returncode == 0, output.decode()
    assert b"from its start" not in output and b"you are still seated" in output


class _BehindApi(ReadModelApi):
    """The API's answer with every position at 0: as if the read model's position had been
    read long before its events (every event then comes both ways)."""

    def get(self, path: str) -> dict[str, Any]:
        found = super().get(path)
        return {**found, "positions": [{**p, "next_offset": 0} for p in found["positions"]]}


async def test_an_event_both_from_the_read_model_and_the_topic_is_folded_once(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient, store: ProjectionStore
) -> None:
    table = f"join-{os.urandom(3).hex()}"
    *_, deposited = await accept(
        client,
        table,
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id=A),
        cmd.Deposit(player_id=A, amount=900),
    )
    last = deposited.last_sequence or 0
    carol = f"carol-{os.urandom(3).hex()}"
    [paid] = await accept(client, f"wallet:{carol}", WalletDeposit(player_id=carol, amount=4_000))
    await fold_answered(ProjectionWriter(store), space)
    from_start = await _joined(space, table, last)
    async with served_query_api(store) as url:
        twice = await _joined(space, table, last, _BehindApi(url))
        wallets = []
        for api in (ReadModelApi(url), None):
            wallet = WalletFollower(space.bootstrap, carol, space.topics, read_model=api)
            await wallet.start()
            await wallet.caught_up(WAIT_S)
            await wallet.until(paid.last_sequence or 0, WAIT_S)  # (as ``_joined``)
            await wallet.stop()
            wallets.append(wallet)
    await twice.stop()
    await from_start.stop()
    assert not twice.from_start and twice.records_read == from_start.records_read
    same_table(twice, from_start)
    joined_wallet, wallet_from_start = wallets
    assert not joined_wallet.from_start and wallet_from_start.from_start
    assert joined_wallet.wallet.view == wallet_from_start.wallet.view
    assert joined_wallet.wallet.view.balance == 4_000


class _AheadApi(ReadModelApi):
    """The API's answer with every position past the partition's end: a read model of a log
    that was made anew under the same name."""

    def get(self, path: str) -> dict[str, Any]:
        found = super().get(path)
        return {**found, "positions": [{**p, "next_offset": 10**9} for p in found["positions"]]}


async def test_a_read_model_past_the_partition_s_end_is_not_trusted(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient, store: ProjectionStore
) -> None:
    table = f"join-{os.urandom(3).hex()}"
    *_, seated = await accept(
        client, table, cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id=A)
    )
    await fold_answered(ProjectionWriter(store), space)
    last = seated.last_sequence or 0
    from_start = await _joined(space, table, last)
    async with served_query_api(store) as url:
        ahead = await _joined(space, table, last, _AheadApi(url))
    await ahead.stop()
    await from_start.stop()
    assert ahead.from_start and "past its end" in ahead.joined
    same_table(ahead, from_start)
