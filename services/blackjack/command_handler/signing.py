"""Commands only the service may issue carry an HMAC of their bytes under a handler-only key.

The steps of a buy-in (the table ``Deposit`` it causes, the wallet's ``ConfirmBuyIn`` or
``RefundBuyIn``) and the ``CashOut`` of a table's money back to the wallet travel over
``blackjack.commands`` like any other command. Whoever can write that topic could otherwise
credit a wallet or a seat out of thin air; with the signature, only a handler can.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

COMMANDS_PURPOSE = "blackjack/commands/v1"
"""What the money steps' signing key is derived for from each shoe key (``ShoeKeys``)."""

SIGNATURE_HEADER = "bj_signature"
TRANSFER_HEADER = "bj_transfer"
"""Signed with the command: the wallet's transfer number a buy-in ``Deposit`` belongs to, or
the sequence number of the table event a ``CashOut`` pays out."""


class CommandSigner:
    def __init__(self, key: bytes, *older: bytes) -> None:
        """Signs under ``key``; verifies under it or any of ``older`` (a key rotation's: the
        steps a handler of the rollout before signed, on the topic still)."""
        self._key = key
        self._keys = (key, *older)

    def sign(self, key: bytes, value: bytes, transfer: bytes = b"") -> bytes:
        return _sign(self._key, key, value, transfer)

    def headers(
        self, key: bytes, value: bytes, transfer: int | None = None
    ) -> list[tuple[str, bytes]]:
        transfer_bytes = b"" if transfer is None else str(transfer).encode()
        headers = [(SIGNATURE_HEADER, self.sign(key, value, transfer_bytes))]
        if transfer is not None:
            headers.append((TRANSFER_HEADER, transfer_bytes))
        return headers

    def verify(
        self, key: bytes, value: bytes, headers: Sequence[tuple[str, bytes | None]]
    ) -> tuple[bool, int | None]:
        """(signed by a handler, the transfer number it names if any). A header without a
        value (Kafka allows null) signs nothing."""
        found = dict(headers)
        signature = found.get(SIGNATURE_HEADER)
        transfer = found.get(TRANSFER_HEADER, b"")
        if signature is None or transfer is None:
            return False, None
        if not any(
            hmac.compare_digest(signature, _sign(signer, key, value, transfer))
            for signer in self._keys
        ):
            return False, None
        return True, int(transfer) if transfer.isdigit() else None


def carries_signature(headers: Sequence[tuple[str, bytes | None]]) -> bool:
    """Whether a record says it is the service's signed command (whatever its signature is
    worth: ``CommandSigner.verify`` says that)."""
    return any(name == SIGNATURE_HEADER for name, _ in headers)


def _sign(signer: bytes, key: bytes, value: bytes, transfer: bytes) -> bytes:
    return length_prefixed_mac(signer, key, value, transfer).hex().encode()


def length_prefixed_mac(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of ``parts``, each preceded by its length: no two different lists of parts
    sign alike."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.digest()
