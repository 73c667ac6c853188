"""Who may read the query API, and what: operator tokens and players' signed tokens.

The API shows every player's money and history. Behind the platform's gateway it may be left
open (nothing set); else each ``/v1/`` request must carry ``Authorization: Bearer <token>``,
one of two kinds:

- an **operator token** (``BLACKJACK_API_TOKENS``, comma-separated shared secrets of 32+
  characters, several so that one can be rotated out): the platform's back office, the
  auditor; reads everything.
- a **player token**: a JWT the platform signs for one player's client (``sub`` the player
  id, ``exp`` required, ``aud`` this service, ``iss`` when one is configured), verified with
  the platform's public key (``BLACKJACK_API_PLAYER_KEYS``: PEM, Ed25519 for EdDSA or P-256
  for ES256, several to rotate) or a shared secret (``BLACKJACK_API_PLAYER_SECRETS``, HS256).
  The service stores nothing per player. Such a token reads that player's own resources
  only (``routes.authorize``).

Probes, metrics and the AsyncAPI document stay open: they show no player's data.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from blackjack.configuration import ConfigurationError

MIN_TOKEN_CHARS = 32
"""A token is a shared secret: long enough that guessing it is hopeless (32 hex digits are
128 bits). HS256 secrets likewise."""

DEFAULT_AUDIENCE = "blackjack-query-api"
DEFAULT_LEEWAY_S = 30
MAX_LEEWAY_S = 300
MAX_PLAYER_ID_CHARS = 128
"""A player id is 1-128 characters (the commands' ``player_id``)."""

_PEM = re.compile(rb"-----BEGIN [A-Z ]+-----.+?-----END [A-Z ]+-----", re.DOTALL)


@dataclass(frozen=True)
class Operator:
    """The back office: reads everything."""


@dataclass(frozen=True)
class Player:
    """One player's client: reads that player's own resources only."""

    player_id: str


Principal = Operator | Player
OPERATOR = Operator()


class Unauthenticated(Exception):
    """No token, or one that is not valid now: a 401. ``presented`` tells a missing token
    (RFC 6750: no error attribute) from a refused one (``error="invalid_token"``)."""

    def __init__(self, message: str, presented: bool) -> None:
        super().__init__(message)
        self.message = message
        self.presented = presented

    @property
    def challenge(self) -> bytes:
        if not self.presented:
            return b"Bearer"
        return b'Bearer error="invalid_token"'


@dataclass(frozen=True)
class PlayerKeys:
    """How a player's token is verified: the algorithm of each key (``EdDSA``, ``ES256``,
    ``HS256``), the audience and issuer it must name, the clock leeway on ``exp``/``nbf``."""

    keys: tuple[tuple[str, Any], ...] = field(repr=False)  # HS256's are secrets
    audience: str = DEFAULT_AUDIENCE
    issuer: str | None = None
    leeway_s: int = DEFAULT_LEEWAY_S

    def verify(self, token: str) -> Player:
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
        except jwt.InvalidTokenError:
            raise Unauthenticated("the bearer token is not valid", presented=True) from None
        candidates = [key for alg, key in self.keys if alg == algorithm]
        required = ["exp", "sub", "aud", *(["iss"] if self.issuer is not None else [])]
        expired = False
        for key in candidates:  # several: a key being rotated in or out
            try:
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=[str(algorithm)],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway_s,
                    options={"require": required},
                )
            except jwt.ExpiredSignatureError:
                expired = True  # signed by this key, past its exp
                continue
            except jwt.InvalidTokenError:
                continue
            subject = claims.get("sub")
            if not isinstance(subject, str) or not 0 < len(subject) <= MAX_PLAYER_ID_CHARS:
                break
            return Player(subject)
        message = "the bearer token has expired" if expired else "the bearer token is not valid"
        raise Unauthenticated(message, presented=True)


def _digest(secret: bytes) -> bytes:
    return hashlib.sha256(secret).digest()


@dataclass(frozen=True)
class ApiTokens:
    tokens: tuple[bytes, ...] = ()
    """the operator tokens"""
    players: PlayerKeys | None = None
    _digests: tuple[bytes, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_digests", tuple(_digest(token) for token in self.tokens))

    @property
    def required(self) -> bool:
        return bool(self.tokens) or self.players is not None

    def authenticate(self, authorization: bytes | None) -> Principal:
        """Who an ``Authorization`` header names, or ``Unauthenticated``. With nothing
        configured, anyone is the operator (the API sits behind the platform's gateway)."""
        if not self.required:
            return OPERATOR
        scheme, _, presented = (authorization or b"").partition(b" ")
        presented = presented.strip()
        if scheme.lower() != b"bearer" or not presented:
            raise Unauthenticated("send a token: Authorization: Bearer <token>", False)
        if self._is_operator(presented):
            return OPERATOR
        if self.players is not None and presented.count(b".") == 2 and presented.isascii():
            return self.players.verify(presented.decode())
        raise Unauthenticated("the bearer token is not valid", presented=True)

    def _is_operator(self, presented: bytes) -> bool:
        """Whether ``presented`` is one of the operator tokens. Each is compared, in constant
        time, as a SHA-256 digest: the time taken says neither how close a guess was, nor
        its length, nor which token it matched (every one is compared)."""
        digest = _digest(presented)
        matched = False
        for token in self._digests:
            matched |= hmac.compare_digest(digest, token)
        return matched

    def admits(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header carries a valid token of either kind."""
        try:
            self.authenticate(authorization)
        except Unauthenticated:
            return False
        return True

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ApiTokens:
        text = env.get("BLACKJACK_API_TOKENS", "").strip()  # blank: unset, like any setting
        tokens = _secrets(text, "BLACKJACK_API_TOKENS")
        return cls(tuple(token.encode() for token in tokens), _player_keys(env))

    def __repr__(self) -> str:  # never the secrets themselves
        players = "" if self.players is None else f", {len(self.players.keys)} player key(s)"
        return f"ApiTokens({len(self.tokens)} token(s){players})"


def _secrets(text: str, name: str) -> tuple[str, ...]:
    secrets = tuple(secret.strip() for secret in text.split(",") if secret.strip())
    if text and not secrets:  # "," and the like: meant to protect the API, protects nothing
        raise ConfigurationError(f"{name} is set but names no token")
    short = [index for index, secret in enumerate(secrets) if len(secret) < MIN_TOKEN_CHARS]
    if short:
        raise ConfigurationError(
            f"{name}: token {short[0] + 1} is shorter than {MIN_TOKEN_CHARS} characters"
        )
    if any(not secret.isascii() or " " in secret for secret in secrets):
        raise ConfigurationError(f"{name}: a token is ASCII without spaces")
    return secrets


def _public_keys(text: str) -> list[tuple[str, Any]]:
    blocks = _PEM.findall(text.replace("\\n", "\n").encode())
    if not blocks:
        raise ConfigurationError("BLACKJACK_API_PLAYER_KEYS holds no PEM public key")
    keys: list[tuple[str, Any]] = []
    for number, block in enumerate(blocks, 1):
        try:
            key = load_pem_public_key(block)
        except ValueError:
            raise ConfigurationError(
                f"BLACKJACK_API_PLAYER_KEYS: key {number} is not a PEM public key"
            ) from None
        if isinstance(key, ed25519.Ed25519PublicKey):
            keys.append(("EdDSA", key))
        elif isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
            keys.append(("ES256", key))
        else:
            raise ConfigurationError(
                f"BLACKJACK_API_PLAYER_KEYS: key {number} is neither Ed25519 (EdDSA) nor "
                "P-256 (ES256)"
            )
    return keys


def _player_keys(env: Mapping[str, str]) -> PlayerKeys | None:
    pem = env.get("BLACKJACK_API_PLAYER_KEYS", "").strip()
    shared = env.get("BLACKJACK_API_PLAYER_SECRETS", "").strip()
    keys = _public_keys(pem) if pem else []
    keys += [("HS256", s.encode()) for s in _secrets(shared, "BLACKJACK_API_PLAYER_SECRETS")]
    if not keys:
        return None
    audience = env.get("BLACKJACK_API_AUDIENCE", "").strip() or DEFAULT_AUDIENCE
    issuer = env.get("BLACKJACK_API_PLAYER_ISSUER", "").strip() or None
    leeway = env.get("BLACKJACK_API_JWT_LEEWAY_S", "").strip() or str(DEFAULT_LEEWAY_S)
    if not (leeway.isascii() and leeway.isdigit() and int(leeway) <= MAX_LEEWAY_S):
        raise ConfigurationError(
            f"BLACKJACK_API_JWT_LEEWAY_S is a whole number of seconds from 0 to {MAX_LEEWAY_S}"
        )
    return PlayerKeys(tuple(keys), audience, issuer, int(leeway))


OPEN = ApiTokens()
"""Nothing set: every request is answered (the API sits behind the platform's gateway)."""
