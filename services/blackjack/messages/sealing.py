"""Sealing a shoe's order: AES-256-GCM with a key only the command handlers and the auditor hold.

The event topic carries the commitment in clear and the order only sealed, bound to its table
and shoe number (the associated data), so no reader of the topic can see an upcoming card or
the hole card, while a handler taking over a table can still resume its shoe.

The handlers hold the master key (``BLACKJACK_SHOE_KEY``); every key they use is derived from
it, one per purpose. A shoe is sealed with a key of its table, derived from the *shoe key*
(itself derived for sealing), and written ``2.<key id>.<base64>``. The nonces are random, and
a key per table keeps the shoes sealed under one key far below where two random 96-bit nonces
could meet (GCM's bound of 2^32 is about 50 days of one shoe a round at 1,000 rounds a second,
across all tables); the key id tells a wrong key from a changed shoe. An auditor can be given
the shoe key alone (``BLACKJACK_AUDIT_KEY``): it opens the shoes, and no other key can be
derived from it (the master key also yields the key that signs money steps between wallets and
tables). Shoes sealed before (plain ``<base64>``, under the master key itself) open with the
master key only.

A deployment rotates its key by holding several for a while (``command_handler.keys``): the
first seals, every one opens, and a shoe's key id names the one that opens it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from typing import Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12
SEALING_PURPOSE = "blackjack/shoes/v2"
SEALED_V2 = "2."
"""Shoes sealed with the derived shoe key start with this ("." is not a base64 character),
then the key's id (8 hex digits, so a wrong key is told apart from a changed shoe) and "."."""
SealVersion = Literal[1, 2]


class SealError(ValueError):
    """A sealed shoe could not be opened: wrong key, or tampered or misplaced ciphertext."""


class SealedForOthers(SealError):
    """A shoe sealed under another key than the one held: one sealed before the shoe key was
    derived, held by an auditor's key (only the handlers' master key opens it), or one whose
    key id is not this key's (another deployment's key given?). Its reveal opens it when the
    shoe is retired."""


def derive(master: bytes, purpose: str) -> bytes:
    """A 32-byte key for one purpose (HMAC-SHA256 of the purpose under the master key)."""
    return hmac.new(master, purpose.encode(), hashlib.sha256).digest()


class ShoeSeal:
    def __init__(
        self,
        key: bytes,
        *,
        master: bytes | None = None,
        writes: SealVersion = 2,
        older: Sequence[ShoeSeal] = (),
    ) -> None:
        """``key`` opens (and seals) ``2.`` shoes; ``master``, when given, opens the older
        ones, and seals new ones too with ``writes=1`` (for a rolling upgrade: an older
        handler opens only those). ``older``: the seals of the deployment's other keys (a
        rotation's, ``keys.ShoeKeys``), which open what they sealed and seal nothing."""
        for given in (key, master):
            if given is not None and len(given) != 32:
                raise ValueError("the shoe key must be 32 bytes (AES-256)")
        if writes == 1 and master is None:
            raise ValueError("sealing as before needs the master key")
        self._legacy = None if master is None else AESGCM(master)
        self._writes = writes
        self._key = key
        self._key_id = derive(key, "key-id").hex()[:8]
        self._older = tuple(older)
        ids = [self._key_id, *(seal.key_id for seal in self._older)]
        if len(set(ids)) != len(ids):
            raise ValueError("a shoe key is given twice")

    @classmethod
    def from_hex(
        cls, master_hex: str, *, writes: SealVersion = 2, older: Sequence[str] = ()
    ) -> ShoeSeal:
        """The handlers' seal, from the master key (and the deployment's other master keys,
        which open only)."""
        master = bytes.fromhex(master_hex)
        return cls(
            derive(master, SEALING_PURPOSE),
            master=master,
            writes=writes,
            older=[cls.from_hex(other) for other in older],
        )

    @classmethod
    def for_auditor(cls, shoe_key_hex: str, *older: str) -> ShoeSeal:
        """An auditor's: the derived shoe keys alone (``audit_keys_hex`` of the handlers'),
        the newest first."""
        return cls(
            bytes.fromhex(shoe_key_hex), older=[cls(bytes.fromhex(other)) for other in older]
        )

    @property
    def key_id(self) -> str:
        """The id a ``2.`` shoe sealed under this key carries (8 hex digits; it tells whose
        key sealed a shoe, and nothing of the key)."""
        return self._key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key this seal opens, the one it seals with first."""
        return (self._key_id, *(seal.key_id for seal in self._older))

    @staticmethod
    def key_id_of(sealed: str) -> str | None:
        """The key id a sealed shoe carries; None for one sealed before key ids."""
        return _key_id_and_rest(sealed)[0]

    @staticmethod
    def new_key_hex() -> str:
        return AESGCM.generate_key(bit_length=256).hex()

    def audit_key_hex(self) -> str:
        """The key to give an auditor: it opens every shoe sealed ``2.`` under this key, and
        nothing else."""
        return self._key.hex()

    def audit_keys_hex(self) -> tuple[str, ...]:
        """The auditor's keys of every key this seal opens, the one it seals with first."""
        return (self._key.hex(), *(seal.audit_key_hex() for seal in self._older))

    def __repr__(self) -> str:
        return (
            f"ShoeSeal(writes={self._writes}, master={self._legacy is not None}, "
            f"keys={list(self.key_ids)})"
        )

    def _table_aead(self, stream_id: str) -> AESGCM:
        return AESGCM(derive(self._key, f"table/{stream_id}"))

    def seal(self, stream_id: str, shoe: int, order: tuple[str, ...], salt: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        plain = json.dumps({"order": list(order), "salt": salt}).encode()
        associated = _associated(stream_id, shoe)
        if self._writes == 1:
            assert self._legacy is not None
            return base64.b64encode(nonce + self._legacy.encrypt(nonce, plain, associated)).decode()
        sealed = self._table_aead(stream_id).encrypt(nonce, plain, associated)
        return f"{SEALED_V2}{self._key_id}.{base64.b64encode(nonce + sealed).decode()}"

    def unseal(self, stream_id: str, shoe: int, sealed: str) -> tuple[tuple[str, ...], str]:
        key_id, text = _key_id_and_rest(sealed)
        if key_id is not None:
            if key_id != self._key_id:
                older = next((seal for seal in self._older if seal.key_id == key_id), None)
                if older is None:
                    raise SealedForOthers(f"shoe {shoe} of {stream_id} is sealed under another key")
                return older.unseal(stream_id, shoe, sealed)
            aead = self._table_aead(stream_id)
        elif self._legacy is None:  # sealed before the shoe key was derived
            raise SealedForOthers(f"shoe {shoe} of {stream_id} opens with the master key")
        else:
            return self._unseal_legacy(stream_id, shoe, text)
        return _open(aead, stream_id, shoe, text)

    def _unseal_legacy(self, stream_id: str, shoe: int, text: str) -> tuple[tuple[str, ...], str]:
        """A shoe sealed before key ids, under whichever master key opens it."""
        assert self._legacy is not None
        try:
            return _open(self._legacy, stream_id, shoe, text)
        except SealError:
            for seal in self._older:
                if seal._legacy is not None:
                    try:
                        return _open(seal._legacy, stream_id, shoe, text)
                    except SealError:
                        continue
            raise


def _open(aead: AESGCM, stream_id: str, shoe: int, text: str) -> tuple[tuple[str, ...], str]:
    try:
        raw = base64.b64decode(text, validate=True)
        plain = aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(stream_id, shoe))
    # InvalidTag (another key, another table or shoe, a changed byte) carries no message;
    # ValueError: not base64, or too short to hold a nonce
    except (InvalidTag, ValueError) as error:
        raise SealError(f"cannot open shoe {shoe} of {stream_id}") from error
    opened = json.loads(plain)
    return tuple(opened["order"]), str(opened["salt"])


def _associated(stream_id: str, shoe: int) -> bytes:
    return f"{stream_id}/shoe/{shoe}".encode()


def _key_id_and_rest(sealed: str) -> tuple[str | None, str]:
    """A ``2.`` shoe's key id and the sealed text after it; (None, the whole) for one sealed
    before key ids."""
    text = sealed.removeprefix(SEALED_V2)
    if text == sealed:
        return None, sealed
    key_id, _, rest = text.partition(".")
    return key_id, rest
