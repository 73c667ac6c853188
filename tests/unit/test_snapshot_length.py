"""A sealed snapshot's length tells nothing about the cards. The shoe's order and the dealer's
hole card were compressed with the stored answers, whose ids and texts players choose: how
well they compressed together showed in the length of the sealed record, which anyone who
reads the snapshots topic sees (the CRIME/BREACH pattern). Now only the public facts (the
cards dealt and left, the players' text) set the length. The body is still one zlib stream of
the same JSON, so the release before reads this one's snapshots, and this one reads its."""

from __future__ import annotations

import base64
import json
import os
import random
import zlib
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from blackjack.command_handler.snapshots import SealedSnapshot, SnapshotCodec, _zlib_stream
from blackjack.command_handler.streams import Stream
from blackjack.domain import commands as cmd
from blackjack.domain.state import TableState
from blackjack.messages.envelope import CommandResult
from tests.unit.processor_harness import new_processor
from tests.unit.test_cold_streams import seeded_shuffler
from tests.unit.test_handler_windows import T0
from tests.unit.test_round_resumed import SOLO, Table, seated

KEY = b"k" * 32


def dealt() -> Stream:
    """A table in play: the dealer's hole card down, the rest of the shoe undealt (a shoe
    seeded so: no blackjack ends the round at the deal)."""
    table = Table()
    table.processor = new_processor(shuffler=seeded_shuffler(3))
    for command in (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann", seat=0),
        cmd.Deposit(player_id="ann", amount=10_000),
    ):
        assert table.do(command).result.status == "accepted"
    assert table.do(cmd.PlaceBet(player_id="ann", box=0, amount=500)).result.status == "accepted"
    assert table.do(cmd.Deal(player_id="ann")).result.status == "accepted"
    stream = table.store.streams[SOLO]
    state = stream.state
    assert isinstance(state, TableState) and state.shoe is not None and state.hole_card
    return stream


def with_cards(stream: Stream, rng: random.Random) -> Stream:
    """The same table, its undealt cards and hole card in another order: every public fact
    (cards dealt and left, the window of answers) as it was."""
    doc = stream.state.to_doc()  # type: ignore[union-attr]
    shoe = doc["shoe"]
    position = shoe["position"]
    undealt = shoe["order"][position:]
    hole = TableState.from_doc(doc).hole_index
    pool = [*undealt, doc["dealer"][hole]]
    rng.shuffle(pool)
    doc["dealer"][hole] = pool.pop()
    shoe["order"] = shoe["order"][:position] + pool
    shoe["salt"] = os.urandom(16).hex()
    other = Stream(stream_id=stream.stream_id, state=TableState.from_doc(doc), sequence=9)
    for answer in stream.results.stored():
        other.results.add_stored(answer)
    return other


def guessing(stream: Stream, guesses: list[str]) -> Stream:
    """Answers to commands whose ids a player chose: guesses of the cards to come, as the JSON
    of a snapshot spells them."""
    for number, guess in enumerate(guesses):
        stream.remember(
            CommandResult(
                command_id=f"{guess}-{number}",
                stream_id=SOLO,
                status="accepted",
                handled_at=T0,
            ),
            1000,
        )
    return stream


def opened(raw: bytes) -> bytes:
    record = SealedSnapshot.model_validate_json(raw)
    blob = base64.b64decode(record.sealed)
    bound = f"snapshot/{record.stream_id}/{record.sequence}".encode()
    return AESGCM(KEY).decrypt(blob[:12], blob[12:], bound)


def test_the_sealed_length_does_not_depend_on_the_cards(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: 20 orders of the same undealt cards gave sealed snapshots of 8 lengths."""
    base = dealt()
    state = base.state
    assert isinstance(state, TableState) and state.shoe is not None
    rng = random.Random(7)
    variants = [with_cards(base, rng) for _ in range(20)]
    # the player guesses the cards to come as the first variant holds them
    first = variants[0].state
    assert isinstance(first, TableState) and first.shoe is not None
    upcoming = first.shoe.order[first.shoe.position :]
    guesses = ['","'.join(upcoming[i : i + 6]) for i in range(0, 60, 3)]
    codec = SnapshotCodec(KEY)
    lengths = {len(codec.encode(guessing(v, guesses))) for v in variants}
    with capsys.disabled():
        print(f"\nsealed lengths of 20 orders: {sorted(lengths)}")
    assert len(lengths) == 1


def test_the_body_is_one_zlib_stream_of_the_same_json() -> None:
    """What the release before reads (``json.loads(zlib.decompress(...))``), and what this one
    reads from the release before (the same): the state, answers and cards as they were."""
    stream = guessing(dealt(), ["AS", "KD"])
    codec = SnapshotCodec(KEY)
    raw = codec.encode(stream)
    body: dict[str, Any] = json.loads(zlib.decompress(opened(raw)))
    assert body["state"] == json.loads(json.dumps(stream.state.to_doc()))  # type: ignore[union-attr]
    assert [a["command_id"] for a in body["results"]][-2:] == ["AS-0", "KD-1"]
    back = codec.decode(raw)
    assert back.state == stream.state and back.results.stored() == stream.results.stored()


def test_a_snapshot_sealed_as_the_release_before_sealed_it_is_read() -> None:
    """Pins what was already right: the body compressed whole (the release before's writer)
    opens as before."""
    stream = guessing(dealt(), ["AS"])
    state = stream.state
    assert isinstance(state, TableState)
    body = {
        "state": state.to_doc(),
        "results": stream.results.stored(),
        "signed": [],
        "last_seen": {},
        "touched_at": None,
    }
    plain = zlib.compress(json.dumps(body, separators=(",", ":")).encode())
    nonce = os.urandom(12)
    sealed = AESGCM(KEY).encrypt(nonce, plain, f"snapshot/{SOLO}/{stream.sequence}".encode())
    raw = SealedSnapshot(
        stream_id=SOLO, sequence=stream.sequence, sealed=base64.b64encode(nonce + sealed).decode()
    ).model_dump_json()
    back = SnapshotCodec(KEY).decode(raw.encode())
    assert back.state == state and back.results.stored() == stream.results.stored()


def test_a_wallet_and_a_table_without_a_shoe_are_sealed_and_read() -> None:
    table = seated()
    stream = table.store.streams[SOLO]
    codec = SnapshotCodec(KEY)
    assert codec.decode(codec.encode(stream)).state == stream.state
    wallet = Stream(stream_id="wallet:ann", state=_wallet(), sequence=1)
    assert codec.decode(codec.encode(wallet)).state == wallet.state


def _wallet() -> Any:
    from blackjack.domain.wallet import WalletState

    return WalletState()


@pytest.mark.parametrize("secret", [0, 1, 0xFFFF, 0x10000, 2 * 0xFFFF + 1])
def test_stored_blocks_of_any_length_and_empty_pieces_read_as_one_stream(secret: int) -> None:
    """A stored block holds at most 65,535 bytes: a longer secret is split over several, an
    empty piece writes no block, and any zlib reader still reads one whole stream. (Pins
    behaviour that was right: no shoe's order comes near 65,535 characters today.)"""
    pieces = [
        (b"", False),
        (b"public" * 100, False),
        (bytes(range(256)) * (secret // 256) + b"x" * (secret % 256), True),
        (b"", True),
        (b"", False),
        (b"more public text", False),
    ]
    reader = zlib.decompressobj()
    assert reader.decompress(_zlib_stream(pieces)) == b"".join(data for data, _ in pieces)
    assert reader.eof and not reader.unused_data
