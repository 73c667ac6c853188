"""Snapshots on the compacted ``blackjack.snapshots`` topic: where a rebuild starts.

Every ``snapshot_every`` commands a partition writes, inside the same transaction as the
commands it handled, one record per stream changed since its last checkpoint (key: the stream
id; the partition's answers at streams that do not exist, ``streams.StrayAnswers``, under
``#strays/<partition>``) and then the partition's checkpoint (key ``#checkpoint/<partition>``,
a key no stream id can have). A checkpoint says: every stream's newest snapshot plus the events
from ``events_from`` and the results from ``results_from`` give its current state. Compaction keeps
the newest record per key, which is all a rebuild needs. A rebuild believes a checkpoint only
if it is authenticated (``CheckpointSigner``), with exactly the snapshots the topic holds.

A snapshot holds the stream's state, its idempotency window, the ids of older handlers'
signed steps that only an id tells apart (no window: see ``streams``) and when each player was
last seen.
The state includes the shoe order of a table, so the body is compressed and then sealed with
AES-256-GCM under a key derived from the shoe key, bound to the stream id and sequence: a
reader of the topic learns nothing about upcoming cards. The cards are left out of the
compression (``_deflate_apart``), so the sealed length does not depend on them either.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from blackjack.bus.headers import COMMANDS_TO_HEADER
from blackjack.command_handler.clock import may_come_due
from blackjack.command_handler.signing import length_prefixed_mac
from blackjack.command_handler.snapshot_books import DIGEST_MODULUS
from blackjack.command_handler.streams import Stream, stored_command_id
from blackjack.domain.rejections import RejectionCode
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.domain.wallet import WalletState, is_wallet_stream

CHECKPOINT_PREFIX = "#checkpoint/"
CHECKPOINT_AUTH_HEADER = "bj_checkpoint_auth"
"""On a checkpoint: ``1.<digest of the partition's snapshots>.<HMAC>`` (``CheckpointSigner``),
in a header so that the previous release, which ignores it, still reads the checkpoint."""
SIGNED_CHECKPOINTS_MARK = "bj-checkpoints-signed/1"
"""The metadata of the offsets a handler of this release commits (with every batch): a
partition whose committed offsets carry it has been handled by a release that signs its
checkpoints, so an unsigned checkpoint there is forged (one written by the release before,
during a rolling upgrade, comes with that release's commits, which carry no metadata). Kept
by the group coordinator, which a writer of the snapshots topic cannot touch."""
_NONCE = 12
_STORED_ANSWERS = TypeAdapter(list[dict[str, Any]])
_SIGNED = TypeAdapter(list[str])
_DIGESTS = TypeAdapter(list[str | None])
_LAST_SEEN = TypeAdapter(dict[str, datetime])
_MOMENT = TypeAdapter(datetime | None)
_MONEY = TypeAdapter(dict[str, datetime])
_MONEY_REFUSED = TypeAdapter(dict[RejectionCode, list[int]])
_MONEY_PLAYERS = TypeAdapter(dict[str, list[int]])
_V = TypeVar("_V", bound=str)


def _places_doc(money: Mapping[str, datetime], values: Mapping[str, str]) -> dict[str, list[int]]:
    """What ``values`` says of some ids of ``money`` (``Stream.money_refused``'s codes,
    ``Stream.money_players``' players), as the snapshot keeps it: per value, the places of
    its ids in ``money`` (oldest first), so that no id is written twice."""
    doc: dict[str, list[int]] = {}
    for place, command_id in enumerate(money):
        value = values.get(command_id)
        if value is not None:
            doc.setdefault(value, []).append(place)
    return doc


def _places_of(
    money: Mapping[str, datetime], doc: object, adapter: TypeAdapter[dict[_V, list[int]]], name: str
) -> dict[str, _V]:
    """``_places_doc`` read back against the ``money`` it was written with."""
    ids = list(money)
    try:
        return {
            ids[place]: value
            for value, places in adapter.validate_python(doc).items()
            for place in places
        }
    except IndexError as error:
        raise SnapshotError(f"{name} names a place money does not have") from error


CheckpointTrust = Literal["signed", "older_key", "unsigned", "forged", "snapshots"]
"""``signed``: written by a handler of this deployment for this partition with the snapshots
read; ``older_key``: the same, signed under a key rotation's older key (``keys.ShoeKeys``: one
still accepted); ``unsigned``: by the release before (no ``bj_checkpoint_auth``); ``forged``: the
authentication fails (another partition, prefix, key, or a changed byte); ``snapshots``:
authentic, but the snapshots read are not the ones it was written with."""


class SnapshotError(ValueError):
    """A snapshot that cannot be opened (wrong key, tampered) or has an unknown format."""


class SealedElsewhere(SnapshotError):
    """A snapshot none of the handler's keys opens: sealed under another shoe key, or a byte
    of it changed since (the two cannot be told apart from one record)."""


def checkpoint_key(partition: int) -> str:
    return f"{CHECKPOINT_PREFIX}{partition}"


class Checkpoint(BaseModel):
    """Value of ``#checkpoint/<partition>``: where the log after the snapshots starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal[1] = 1
    partition: int
    events_from: int = Field(description="first offset of the events partition to replay")
    results_from: int = Field(description="first offset of the results partition to replay")
    written_at: datetime
    streams: int = Field(description="stream snapshots written with this checkpoint")

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, raw: bytes) -> Checkpoint:
        try:
            return cls.model_validate_json(raw)
        except ValidationError as error:
            raise SnapshotError(f"unreadable checkpoint: {error}") from error


class CheckpointSigner:
    """Authenticates checkpoints: an HMAC-SHA256 under a key derived for them from the shoe
    key, over the snapshots topic (its prefix), the partition, the record's key, value and
    ``bj_commands_to``, and a digest of every stream snapshot the partition's log holds.

    Without it whoever can write the snapshots topic (or a checkpoint copied from another
    partition, prefix or deployment) chooses where a rebuild starts reading the events and
    results: events skipped are bets forgotten, money lost or paid twice. The digest is a sum
    of keyed hashes, one per stream's newest snapshot record, so a snapshot removed, replaced
    by an older one of the same stream or added makes the checkpoint fail too (each snapshot
    is sealed on its own, and an older one opens as well as the newest)."""

    def __init__(self, key: bytes, snapshots_topic: str, *, older: Sequence[bytes] = ()) -> None:
        """Signs under ``key``; verifies under it or any of ``older`` (a key rotation's)."""
        self._key = key
        self._older = tuple(older)
        self._topic = snapshots_topic.encode()

    def element(self, stream_id: str, raw: bytes, key: bytes | None = None) -> int:
        """One snapshot record's share of the digest (the digest is their sum)."""
        mac = length_prefixed_mac(
            key or self._key, b"snapshot", stream_id.encode(), hashlib.sha256(raw).digest()
        )
        return int.from_bytes(mac, "big")

    def header(self, partition: int, value: bytes, commands_to: bytes, digest: int) -> bytes:
        hexdigest = _hex256(digest)
        mac = length_prefixed_mac(
            self._key, *self._parts(partition, value, commands_to, hexdigest)
        ).hex()
        return f"1.{hexdigest}.{mac}".encode()

    def verify(
        self,
        partition: int,
        value: bytes,
        headers: Sequence[tuple[str, bytes | None]] | None,
        digest: int,
        snapshots: Mapping[str, bytes] | None = None,
    ) -> CheckpointTrust:
        """Whether the checkpoint record was written by a handler of this deployment for this
        partition, with exactly the snapshots ``digest`` sums (under the current key; one
        signed under an older key sums ``snapshots``, the records by stream, under it).
        ``older_key``: trusted, and to be written again under the current key."""
        found: dict[str, bytes | None] = {}
        for name, header in headers or ():
            if name in found and name in (CHECKPOINT_AUTH_HEADER, COMMANDS_TO_HEADER):
                # A handler writes each once; with two, what is authenticated and what the
                # rebuild reads (``offset_header``: the first) could differ.
                return "forged"
            found[name] = header
        auth = found.get(CHECKPOINT_AUTH_HEADER)
        if auth is None:
            return "unsigned"
        commands_to = found.get(COMMANDS_TO_HEADER) or b""
        version, _, rest = auth.partition(b".")
        hexdigest, _, mac = rest.partition(b".")
        if version != b"1":
            return "forged"
        parts = self._parts(partition, value, commands_to, hexdigest.decode(errors="replace"))
        signer = next(
            (
                key
                for key in (self._key, *self._older)
                if hmac.compare_digest(mac, length_prefixed_mac(key, *parts).hex().encode())
            ),
            None,
        )
        if signer is None:
            return "forged"
        if signer is not self._key:
            digest = snapshots_digest(
                self.element(stream_id, raw, signer) for stream_id, raw in (snapshots or {}).items()
            )
        if hexdigest != _hex256(digest).encode():
            return "snapshots"
        return "signed" if signer is self._key else "older_key"

    def _parts(
        self, partition: int, value: bytes, commands_to: bytes, hexdigest: str
    ) -> Iterable[bytes]:
        return (
            b"checkpoint/1",
            self._topic,
            checkpoint_key(partition).encode(),
            value,
            commands_to,
            hexdigest.encode(),
        )


def _record(raw: bytes) -> SealedSnapshot:
    try:
        return SealedSnapshot.model_validate_json(raw)
    except ValidationError as error:
        raise SnapshotError(f"unreadable snapshot: {error}") from error


def _blob(record: SealedSnapshot) -> bytes:
    try:
        return base64.b64decode(record.sealed, validate=True)
    except ValueError as error:
        raise SnapshotError(
            f"cannot open the snapshot of {record.stream_id}: not base64"
        ) from error


def snapshots_digest(elements: Iterable[int]) -> int:
    return sum(elements) % DIGEST_MODULUS


def _hex256(number: int) -> str:
    return format(number % DIGEST_MODULUS, "064x")


class SealedSnapshot(BaseModel):
    """Value of a stream's snapshot record (key: the stream id)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal[1, 2] = Field(
        1,
        description=(
            "2: the state of a table the operator has suspended, which a handler older than "
            "suspending (it reads 1 only) must refuse rather than read as a table in play"
        ),
    )
    stream_id: str
    sequence: int = Field(description="the stream's last event folded into the snapshot")
    sealed: str = Field(
        description="base64 of nonce + AES-256-GCM(zlib(JSON of state and recent results))"
    )


class SnapshotCodec:
    def __init__(self, key: bytes, *older: bytes) -> None:
        """Seals under ``key``; opens under it or any of ``older`` (a key rotation's)."""
        self._aead = AESGCM(key)
        self._older = tuple(AESGCM(other) for other in older)

    def resealed(self, raw: bytes) -> bytes | None:
        """A snapshot sealed under one of the older keys, sealed again under the current one
        (the same record otherwise); None when the current key opens it (or the codec has no
        other key)."""
        if not self._older:
            return None
        record = _record(raw)
        blob = _blob(record)
        bound = _bound(record.stream_id, record.sequence)
        try:
            self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], bound)
            return None
        except (InvalidTag, ValueError):  # (ValueError: too short to hold a nonce)
            pass
        plain = self._decrypt(record.stream_id, blob, bound, self._older)
        nonce = os.urandom(_NONCE)
        sealed = base64.b64encode(nonce + self._aead.encrypt(nonce, plain, bound)).decode()
        return record.model_copy(update={"sealed": sealed}).model_dump_json().encode()

    def encode(self, stream: Stream) -> bytes:
        body: dict[str, Any] = {
            "state": _state_doc(stream.state),
            "results": stream.results.stored(),
            # the digest of the command each answers, where known, in their order (a release
            # before this one ignores it, and answers another command under an id as a copy)
            "digests": stream.results.stored_digests(),
            "signed": sorted(stream.signed),
            "last_seen": {
                player: seen.isoformat()
                for player, seen in stream.last_seen.items()
                if isinstance(stream.state, TableState) and player in stream.state.players
            },
            "touched_at": None if stream.touched_at is None else stream.touched_at.isoformat(),
            # the last event of play's (a release before this one ignores it)
            "active_at": None if stream.active_at is None else stream.active_at.isoformat(),
            # oldest first, as they are let go of (``domain.platform_money``)
            "money": {command_id: at.isoformat() for command_id, at in stream.money.items()},
            # those of ``money`` the stream refused: per code, their places in ``money``
            # (an id is written once: a 128-character one costs 136 bytes sealed, not 272). A
            # release before this one ignores it, and refuses their copies ``already_applied``
            "money_refused": _places_doc(stream.money, stream.money_refused),
            # those of ``money`` whose event named a player: per player, their places (a
            # release before this one ignores it)
            "money_players": _places_doc(stream.money, stream.money_players),
            # the terms of each of ``money``, in its order, None where not known (a release
            # before this one ignores it, and answers another command under a kept id as a copy)
            "money_terms": [stream.money_terms.get(command_id) for command_id in stream.money],
        }
        return self._seal(stream.stream_id, stream.sequence, _format(stream.state), body)

    def encode_answers(self, key: str, answers: list[dict[str, Any]]) -> bytes:
        """A partition's stray answers (``streams.StrayAnswers``) under ``key``, sealed as the
        snapshot of a table that never opened whose window holds them: a release before this
        one reads it as such (a stream no command can name), and counts it in the digest its
        checkpoints sign as this one does."""
        body: dict[str, Any] = {
            "state": _state_doc(INITIAL_STATE),
            "results": answers,
            "signed": [],
            "last_seen": {},
            "touched_at": None,
            "money": {},
            "money_refused": {},
        }
        return self._seal(key, 0, 1, body)

    def decode_answers(self, key: str, raw: bytes) -> list[dict[str, Any]]:
        """The answers ``encode_answers`` sealed under ``key``, oldest first."""
        stream_id, _, body = self._open(raw)
        if stream_id != key:
            raise SnapshotError(f"the snapshot of {stream_id} is keyed {key}")
        return _STORED_ANSWERS.validate_python(body["results"])

    def _seal(
        self, stream_id: str, sequence: int, form: Literal[1, 2], body: dict[str, Any]
    ) -> bytes:
        plain = _deflate_apart(body)
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, plain, _bound(stream_id, sequence))
        record = SealedSnapshot(
            format=form,
            stream_id=stream_id,
            sequence=sequence,
            sealed=base64.b64encode(nonce + sealed).decode(),
        )
        return record.model_dump_json().encode()

    def _open(self, raw: bytes) -> tuple[str, int, dict[str, Any]]:
        record = _record(raw)
        stream_id, sequence = record.stream_id, record.sequence
        plain = self._decrypt(
            stream_id, _blob(record), _bound(stream_id, sequence), (self._aead, *self._older)
        )
        body: dict[str, Any] = json.loads(zlib.decompress(plain))
        return stream_id, sequence, body

    @staticmethod
    def _decrypt(stream_id: str, blob: bytes, bound: bytes, aeads: Sequence[AESGCM]) -> bytes:
        for aead in aeads:
            try:
                return aead.decrypt(blob[:_NONCE], blob[_NONCE:], bound)
            # InvalidTag (another key or stream, a changed byte) carries no message;
            # ValueError: too short to hold a nonce
            except (InvalidTag, ValueError):
                continue
        raise SealedElsewhere(
            f"cannot open the snapshot of {stream_id}: sealed under another shoe key (every "
            "handler of a deployment needs the same BLACKJACK_SHOE_KEY, or the same file "
            "BLACKJACK_SHOE_KEY_FILE names: one that was not there at start is made with a "
            "new key), or changed since"
        )

    def may_not_wait(self, raw: bytes) -> tuple[str, bool]:
        """The snapshot's stream id, and whether its stream may have to be taken out of the
        cold at once (``decode`` tells for sure). Read and checked as ``decode`` reads it, so a
        snapshot it cannot read fails here (at a takeover, not at the first command that thaws
        its stream, which would fail the partition's every batch), but its remembered answers
        are not made into a window, a quarter to a third of a decode's time (2.0 against
        2.6-2.9 ms with a full window: ``tests.unit.measure_takeover_stall``): a takeover asks
        this of every stream its partition ever had, and decodes the few that may not wait."""
        stream = self._decoded(raw, window=False)
        hot = stream.signed_incomplete or stream.money_incomplete or may_come_due(stream)
        return stream.stream_id, hot

    def decode(self, raw: bytes) -> Stream:
        return self._decoded(raw, window=True)

    def _decoded(self, raw: bytes, *, window: bool) -> Stream:
        stream_id, sequence, body = self._open(raw)
        stream = Stream(stream_id=stream_id, state=_state_of(stream_id, body), sequence=sequence)
        answers = _STORED_ANSWERS.validate_python(body["results"])
        if window:
            # (absent from older snapshots, or of another length: no answer's digest known)
            digests = _DIGESTS.validate_python(body.get("digests", []))
            known = digests if len(digests) == len(answers) else [None] * len(answers)
            for answer, digest in zip(answers, known, strict=True):
                # read as a result when a resend asks for it
                stream.results.add_stored(answer, digest)
            stream.results.held_to_bytes()
        else:
            for answer in answers:
                stored_command_id(answer)  # what add_stored refuses
        if "signed" in body:
            # Older handlers kept every signed step's id; kept as they are (no new one joins).
            stream.signed = set(_SIGNED.validate_python(body["signed"]))
        else:  # written before the set was kept: the rebuild reads it from the older events
            stream.signed_incomplete = True
        # Absent from older snapshots: the rebuild then gives those players a fresh grace period.
        stream.last_seen = _LAST_SEEN.validate_python(body.get("last_seen", {}))
        stream.touched_at = _touched_at(body, stream)
        # Absent from older snapshots: from the last event, as those releases counted (never
        # a wait longer than it was).
        active = body.get("active_at", stream.touched_at)
        stream.active_at = None if active is None else _MOMENT.validate_python(active)
        money = dict(_MONEY.validate_python(body.get("money", {})))
        terms = _DIGESTS.validate_python(body.get("money_terms", []))
        if "money" in body and "money_refused" in body and len(terms) == len(money):
            stream.money = money
            refused = _places_of(money, body["money_refused"], _MONEY_REFUSED, "money_refused")
            stream.money_refused = refused
            # (absent from older snapshots: a player's ids counted from the next event on)
            players = body.get("money_players", {})
            stream.money_players = _places_of(money, players, _MONEY_PLAYERS, "money_players")
            stream.money_terms = {
                command_id: term
                for command_id, term in zip(money, terms, strict=True)
                if term is not None
            }
        else:  # written before the ids (or the refused ones, or their terms) were kept: the
            # rebuild reads them all from the events
            stream.money_incomplete = True
        return stream


def _deflate_apart(body: dict[str, Any]) -> bytes:
    """The body's JSON as a zlib stream whose length the secret cards do not change.

    Compressed together, the shoe's order and the dealer's hole card would shorten the body
    by how much they repeat text players choose (command ids, player ids, reasons in the
    stored answers): a reader of the topic who can send commands would learn about the cards
    from the sealed length (CRIME, BREACH). The secrets are left out of compression: they go
    in stored (uncompressed) deflate blocks at a width the public facts set (how many cards),
    and the public text around them is compressed in pieces that each start afresh, so that
    none refers to another (nor to a secret). Any zlib reader reads it as one stream, the
    release before included, so the snapshot's format is unchanged."""
    state = body["state"]
    secrets: dict[str, str] = {}

    def apart(value: object, width: int | None = None) -> str:
        text = json.dumps(value, separators=(",", ":"))
        if width is not None:
            text = text.ljust(width)  # JSON allows spaces after a value
        mark = f"\x00{os.urandom(16).hex()}"  # no text a player sends can be it
        secrets[json.dumps(mark)] = text
        return mark

    if isinstance(state, dict) and state.get("shoe") is not None:
        shoe = state["shoe"] = dict(state["shoe"])
        shoe["order"] = apart(shoe["order"], _cards_width(len(shoe["order"])))
        shoe["salt"] = apart(shoe["salt"])
    if isinstance(state, dict) and "dealer" in state:
        state["dealer"] = apart(state["dealer"], _cards_width(len(state["dealer"])))
    text = json.dumps(body, separators=(",", ":"))
    pieces: list[tuple[bytes, bool]] = []
    for mark in sorted(secrets, key=text.index):  # in the order they come in the text
        before, text = text.split(mark)
        pieces += [(before.encode(), False), (secrets[mark].encode(), True)]
    pieces.append((text.encode(), False))
    return _zlib_stream(pieces)


def _cards_width(cards: int) -> int:
    """Characters of the JSON list of ``cards`` two-letter card codes."""
    return 5 * cards + 1 if cards else 2


_ZLIB_HEADER = b"\x78\x9c"  # deflate, 32 KiB window, default level
_FINAL_EMPTY_BLOCK = b"\x03\x00"  # BFINAL, fixed codes, end of block
_STORED_MAX = 0xFFFF


def _zlib_stream(pieces: list[tuple[bytes, bool]]) -> bytes:
    """One zlib stream of ``pieces`` in order: a secret one in stored blocks, every other one
    compressed by a compressor of its own (flushed to a byte boundary, never finished)."""
    out, adler = [_ZLIB_HEADER], zlib.adler32(b"")
    for data, secret in pieces:
        adler = zlib.adler32(data, adler)
        if secret:
            for start in range(0, len(data), _STORED_MAX):
                chunk = data[start : start + _STORED_MAX]
                size = len(chunk).to_bytes(2, "little")
                nsize = (len(chunk) ^ 0xFFFF).to_bytes(2, "little")
                out.append(b"\x00" + size + nsize + chunk)  # not final, stored
        elif data:
            compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
            out.append(compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH))
    out += [_FINAL_EMPTY_BLOCK, adler.to_bytes(4, "big")]
    return b"".join(out)


def _state_of(stream_id: str, body: dict[str, Any]) -> WalletState | TableState:
    if is_wallet_stream(stream_id):
        return WalletState.model_validate(body["state"])
    return TableState.from_doc(body["state"])


def _touched_at(body: dict[str, Any], stream: Stream) -> datetime | None:
    """When the stream's last event was written. An older snapshot did not say: the newest
    answer it remembers was given then or later (the accepted command that wrote the last
    event, or one refused since), so an interrupted round is never taken to have waited
    longer than it has."""
    if "touched_at" in body:
        return _MOMENT.validate_python(body["touched_at"])
    return max((result.handled_at for result in stream.results.answers()), default=None)


def _format(state: WalletState | TableState) -> Literal[1, 2]:
    """An older handler's ``TableState.from_doc`` skips a key it does not know: given the
    snapshot of a suspended table it would take bets there again. Format 2 it refuses (the
    partition waits and retries until a handler that reads it takes over)."""
    return 2 if isinstance(state, TableState) and state.suspended else 1


def _state_doc(state: WalletState | TableState) -> dict[str, object]:
    if isinstance(state, TableState):
        return state.to_doc()
    return state.model_dump(mode="json")


def _bound(stream_id: str, sequence: int) -> bytes:
    return f"snapshot/{stream_id}/{sequence}".encode()
