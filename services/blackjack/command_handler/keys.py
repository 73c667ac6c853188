"""The handler's secret: the shoe key, and the keys derived from it.

    BLACKJACK_SHOE_KEY       64 hex digits (AES-256); takes precedence
    BLACKJACK_SHOE_KEY_FILE  a file holding the hex key; created with a fresh random key when
                             missing (``make run`` points it at the git-ignored ``var/``)

Every handler instance of a deployment must hold the same key: a handler that takes a
partition over unseals the shoes and snapshots the previous owner sealed.

Either may hold several keys (one a line, or separated by commas; ``#`` starts a comment), to
rotate the key without stopping the deployment (``ShoeKeys``): the first seals the shoes and
snapshots and signs the checkpoints and money steps; every other one opens what it sealed, and
verifies what it signed unless written ``retired:<key>``. A rotation is three rollouts
(docs/operations.md, "Rotating the shoe key"): the new key added second, moved first, the old
one retired. No key leaves the list: the events topic keeps the shoes each sealed.

A key is derived from each per purpose (sealing shoes, sealing snapshots, authenticating
checkpoints, signing money steps), so no key opens what another seals, and the shoe keys can
be given to an auditor (``BLACKJACK_AUDIT_KEY``, ``blackjack audit-key`` prints them) without
the rest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from blackjack.configuration import ConfigurationError
from blackjack.messages.sealing import SealVersion, ShoeSeal, derive

log = structlog.get_logger("blackjack.command_handler")


class MissingShoeKey(ConfigurationError):
    """No shoe key is configured: the handler refuses to deal from shoes it could not resume."""


def load_shoe_keys(env: Mapping[str, str] = os.environ, *, create: bool = True) -> ShoeKeys:
    """The shoe keys as hex, from the environment or the key file (created when missing,
    unless ``create`` is false: an auditor's new key would open nothing)."""
    text = env.get("BLACKJACK_SHOE_KEY", "").strip()
    source = "BLACKJACK_SHOE_KEY"
    if not text:
        file = env.get("BLACKJACK_SHOE_KEY_FILE", "").strip()
        if not file:
            raise MissingShoeKey(
                "set BLACKJACK_SHOE_KEY (64 hex digits) or BLACKJACK_SHOE_KEY_FILE; "
                "every handler of a deployment needs the same key"
            )
        source = "the key file (BLACKJACK_SHOE_KEY_FILE)"
        try:
            text = _key_file(Path(file), create)
        except OSError as error:  # a read-only file system, a directory that is not there
            raise ConfigurationError(
                f"BLACKJACK_SHOE_KEY_FILE {file} cannot be read or made: {error.strerror}"
            ) from None
        except UnicodeDecodeError:  # (a traceback before, or a message naming no file)
            raise ConfigurationError(
                f"BLACKJACK_SHOE_KEY_FILE {file} is not text: it holds each key as 64 hex "
                "digits (`openssl rand -hex 32`), not 32 raw bytes (`xxd -p -c 64` of such a "
                "file gives its hex)"
            ) from None
    return _parsed(text, source)


RETIRED = "retired:"
"""Written before a key that only opens what it sealed (shoes, snapshots), and verifies
nothing: a rotation's last step, or a key let go of because it leaked."""


def _parsed(text: str, source: str) -> ShoeKeys:
    """The keys of a key list: one a line or separated by commas, ``#`` to the line's end a
    comment, each key 64 hex digits, ``retired:`` before those that open only."""
    words = _words(text)
    if not words:
        raise ConfigurationError(f"{source} holds no key")
    keys = [word.removeprefix(RETIRED) for word in words]
    for number, key in enumerate(keys, 1):
        try:
            ShoeSeal.from_hex(key)  # validates length and hex
        except ValueError as error:
            which = "" if len(keys) == 1 else f" (key {number} of {len(keys)})"
            raise ConfigurationError(
                f"{source} is not a 64-digit hex key{which}: {error}"
            ) from None
    if len({key.lower() for key in keys}) != len(keys):
        raise ConfigurationError(f"{source} holds a key twice")
    if words[0].startswith(RETIRED):
        raise ConfigurationError(f"{source}: the first key seals and signs, and cannot be retired")
    retired = tuple(key for word, key in zip(words, keys, strict=True) if word != key)
    accepted = tuple(key for word, key in zip(words[1:], keys[1:], strict=True) if word == key)
    return ShoeKeys(keys[0], accepted, retired)


_SEPARATORS = re.compile(r"[\s,]+")


def _words(text: str) -> list[str]:
    """The words of a key list: one a line or separated by commas, ``#`` to the line's end a
    comment."""
    return [
        word
        for line in text.splitlines()
        for word in _SEPARATORS.split(line.partition("#")[0])
        if word
    ]


@dataclass(frozen=True)
class ShoeKeys:
    """A deployment's master keys, as a rotation holds them: ``current`` seals the shoes and
    snapshots and signs the checkpoints and money steps; ``accepted`` open and verify what
    they sealed and signed (a rotation's other key, while handlers of the rollout before
    still seal or sign with it, or with the new one); ``retired`` only open the shoes and
    snapshots sealed under them, and a checkpoint or money step they signed is refused."""

    current: str = field(repr=False)  # never in a log line
    accepted: tuple[str, ...] = field(default=(), repr=False)
    retired: tuple[str, ...] = field(default=(), repr=False)

    def verifying(self, purpose: str) -> tuple[bytes, ...]:
        """The key for ``purpose`` (one that signs) of each key that verifies, the current
        one's first."""
        return tuple(derive_key(key, purpose) for key in (self.current, *self.accepted))

    def opening(self, purpose: str) -> tuple[bytes, ...]:
        """The key for ``purpose`` (one that seals) of each key, the current one's first."""
        return tuple(
            derive_key(key, purpose) for key in (self.current, *self.accepted, *self.retired)
        )

    def seal(self, *, writes: SealVersion = 2) -> ShoeSeal:
        return ShoeSeal.from_hex(self.current, writes=writes, older=(*self.accepted, *self.retired))

    def key_ids(self) -> dict[str, str]:
        """Each key's id (as its shoes carry it), and its part in the rotation."""
        roles = {self.current: "current"} | dict.fromkeys(self.accepted, "accepted")
        return {
            ShoeSeal.from_hex(key).key_id: role
            for key, role in (roles | dict.fromkeys(self.retired, "retired")).items()
        }


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


def load_audit_keys(env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """``BLACKJACK_AUDIT_KEY``: the shoe keys derived from the handlers' (64 hex digits each,
    one a line as ``blackjack audit-key`` prints them, or separated by commas; ``#`` a
    comment), none when it is not set."""
    keys = tuple(_words(env.get("BLACKJACK_AUDIT_KEY", "")))
    try:
        if keys:
            ShoeSeal.for_auditor(*keys)  # validates length and hex, each key once
    except ValueError as error:
        raise ConfigurationError(
            f"BLACKJACK_AUDIT_KEY is not 64-digit hex keys, each given once: {error}"
        ) from None
    return keys
