"""Sealing a shoe's order: AES-256-GCM with a key only the command handlers hold.

The event topic carries the commitment in clear and the order only sealed, bound to its table
and shoe number (the associated data), so no reader of the topic can see an upcoming card or
the hole card, while a handler taking over a table can still resume its shoe.
"""

from __future__ import annotations

import base64
import json
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12


class SealError(ValueError):
    """A sealed shoe could not be opened: wrong key, or tampered or misplaced ciphertext."""


class ShoeSeal:
    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the shoe key must be 32 bytes (AES-256)")
        self._aead = AESGCM(key)

    @classmethod
    def from_hex(cls, key_hex: str) -> ShoeSeal:
        return cls(bytes.fromhex(key_hex))

    @staticmethod
    def new_key_hex() -> str:
        return AESGCM.generate_key(bit_length=256).hex()

    def seal(self, stream_id: str, shoe: int, order: tuple[str, ...], salt: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        plain = json.dumps({"order": list(order), "salt": salt}).encode()
        sealed = self._aead.encrypt(nonce, plain, _associated(stream_id, shoe))
        return base64.b64encode(nonce + sealed).decode()

    def unseal(self, stream_id: str, shoe: int, sealed: str) -> tuple[tuple[str, ...], str]:
        try:
            raw = base64.b64decode(sealed, validate=True)
            plain = self._aead.decrypt(
                raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated(stream_id, shoe)
            )
        # InvalidTag (another key, another table or shoe, a changed byte) carries no message;
        # ValueError: not base64, or too short to hold a nonce
        except (InvalidTag, ValueError) as error:
            raise SealError(f"cannot open shoe {shoe} of {stream_id}") from error
        opened = json.loads(plain)
        return tuple(opened["order"]), str(opened["salt"])


def _associated(stream_id: str, shoe: int) -> bytes:
    return f"{stream_id}/shoe/{shoe}".encode()
