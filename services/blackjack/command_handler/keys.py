"""The handler's secret: the shoe key, and the keys derived from it.

    BLACKJACK_SHOE_KEY       64 hex digits (AES-256); takes precedence
    BLACKJACK_SHOE_KEY_FILE  a file holding the hex key; created with a fresh random key when
                             missing (``make run`` points it at the git-ignored ``var/``)

Every handler instance of a deployment must hold the same key: a handler that takes a
partition over unseals the shoes and snapshots the previous owner sealed. A key is derived
from it per purpose (sealing shoes, sealing snapshots, authenticating checkpoints, signing
money steps), so no key opens what another seals, and the shoe key can be given to an
auditor (``BLACKJACK_AUDIT_KEY``, ``blackjack audit-key`` prints it) without the rest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import structlog

from blackjack.configuration import ConfigurationError
from blackjack.messages.sealing import ShoeSeal, derive

log = structlog.get_logger("blackjack.command_handler")


class MissingShoeKey(ConfigurationError):
    """No shoe key is configured: the handler refuses to deal from shoes it could not resume."""


def load_shoe_key(env: Mapping[str, str] = os.environ, *, create: bool = True) -> str:
    """The shoe key as hex, from the environment or the key file (created when missing,
    unless ``create`` is false: an auditor's new key would open nothing)."""
    key = env.get("BLACKJACK_SHOE_KEY", "").strip()
    if not key:
        file = env.get("BLACKJACK_SHOE_KEY_FILE", "").strip()
        if not file:
            raise MissingShoeKey(
                "set BLACKJACK_SHOE_KEY (64 hex digits) or BLACKJACK_SHOE_KEY_FILE; "
                "every handler of a deployment needs the same key"
            )
        try:
            key = _key_file(Path(file), create)
        except OSError as error:  # a read-only file system, a directory that is not there
            raise ConfigurationError(
                f"BLACKJACK_SHOE_KEY_FILE {file} cannot be read or made: {error.strerror}"
            ) from None
    try:
        ShoeSeal.from_hex(key)  # validates length and hex
    except ValueError as error:
        given = env.get("BLACKJACK_SHOE_KEY", "").strip()
        source = "BLACKJACK_SHOE_KEY" if given else "the key file (BLACKJACK_SHOE_KEY_FILE)"
        raise ConfigurationError(f"{source} is not a 64-digit hex key: {error}") from None
    return key


def _key_file(path: Path, create: bool) -> str:
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(ShoeSeal.new_key_hex() + "\n")
        # Right for a first start (``make run``, a new deployment's volume); a mount missing
        # at a deployment that has a key gives this handler one that opens none of its
        # snapshots and shoes: said, so that the partitions it then holds failed are traced.
        log.warning(
            "shoe key file not there: a new key was made",
            file=str(path),
            note="every handler of a deployment needs the same key; another key opens none "
            "of the snapshots and shoes the others sealed",
        )
    return path.read_text().strip()


def derive_key(shoe_key_hex: str, purpose: str) -> bytes:
    """A 32-byte key for one purpose (HMAC-SHA256 of the purpose under the master key)."""
    return derive(bytes.fromhex(shoe_key_hex), purpose)


def load_audit_key(env: Mapping[str, str] = os.environ) -> str | None:
    """``BLACKJACK_AUDIT_KEY``, the shoe key derived from the handlers' (64 hex digits), or
    None when it is not set."""
    key = env.get("BLACKJACK_AUDIT_KEY", "").strip()
    if not key:
        return None
    try:
        ShoeSeal.for_auditor(key)  # validates length and hex
    except ValueError as error:
        raise ConfigurationError(
            f"BLACKJACK_AUDIT_KEY is not a 64-digit hex key: {error}"
        ) from None
    return key
