"""Who may read the query API, and what: operator tokens and players' signed tokens.

The API shows every player's money and history. Behind the platform's gateway it may be left
open (nothing set); else each ``/v1/`` request must carry ``Authorization: Bearer <token>``,
one of two kinds:

- an **operator token** (``BLACKJACK_API_TOKENS``, comma-separated shared secrets of 32+
  characters, several so that one can be rotated out): the platform's back office, the
  auditor; reads everything.
- a **player token**: a JWT the platform signs for one player's client (``sub`` the player
  id, ``iat`` and ``exp`` required, ``exp - iat`` at most ``BLACKJACK_API_JWT_MAX_LIFETIME_S``,
  ``aud`` this service, ``iss`` when one is configured), verified with the platform's public
  key (``BLACKJACK_API_PLAYER_KEYS``: PEM, Ed25519 for EdDSA or P-256 for ES256, several to
  rotate) or a shared secret (``BLACKJACK_API_PLAYER_SECRETS``, HS256). A key configured
  with an id (``ID=`` before it) is chosen by the token's ``kid`` header. Such a token reads
  that player's own resources only (``routes.authorize``).

Probes, metrics and the AsyncAPI document stay open: they show no player's data.

The one route that changes something, an operator's revocation of a player's tokens, is
refused (403) when no operator token is configured, unless
``BLACKJACK_API_OPERATOR_AUTH=gateway`` says the gateway authenticates the operator: an API
left open answered it to anyone, who could cut any player's tokens off on every API over the
store (``operator_writes``). Reads stay open without a token, as before: the gateway's.
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
DEFAULT_MAX_LIFETIME_S = 3600
"""The longest a player's token may live (``exp - iat``), unless
``BLACKJACK_API_JWT_MAX_LIFETIME_S`` says otherwise. A bearer token is as good as the player's
session to whoever holds it (a copied header, a client's log, a stolen device) until it
expires or is revoked: an hour bounds that window, as the access tokens of OAuth providers
commonly do, while the platform re-signs a token for a client that plays on for hours
without the player noticing (24 hours would leave a stolen token a day's use). The revocation
list (``revocations``) needs to remember a player for no longer than this."""
MAX_MAX_LIFETIME_S = 7 * 24 * 3600
KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A key's id (the JWT's ``kid``) as the settings name it: ``ID=`` before a key."""
MAX_PLAYER_ID_CHARS = 128
"""A player id is 1-128 characters (the commands' ``player_id``)."""

_PEM = re.compile(
    rb"(?:([A-Za-z0-9._-]{1,64})[ \t]*=[ \t]*)?(-----BEGIN [A-Z ]+-----.+?-----END [A-Z ]+-----)",
    re.DOTALL,
)


@dataclass(frozen=True)
class Operator:
    """The back office: reads everything."""


@dataclass(frozen=True)
class Player:
    """One player's client: reads that player's own resources only."""

    player_id: str
    issued_at: int = field(default=0, compare=False)
    """the token's ``iat`` (Unix seconds): a revocation refuses tokens issued before it"""


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
        """RFC 6750's ``WWW-Authenticate``: for a refused token its ``error_description``
        is the message (one of this module's own sentences: never a part of the token)."""
        if not self.presented:
            return b"Bearer"
        description = self.message.encode("ascii", "replace").replace(b'"', b"'")
        return b'Bearer error="invalid_token", error_description="' + description + b'"'


NOT_VALID = "the bearer token is not valid"
EXPIRED = "the bearer token has expired"
NOT_YET = "the bearer token is not valid yet: its iat or nbf is ahead of this service's clock"
UNKNOWN_KEY = "the bearer token's kid names no key of this service"
NO_KEY_ID = "the bearer token has no kid: this service's keys are chosen by their id"
REVOKED = "the bearer token was issued before the player's tokens were revoked"
_SIGNATURE_REFUSED = (jwt.InvalidSignatureError, jwt.InvalidAlgorithmError, jwt.InvalidKeyError)
"""Errors of a key that did not sign the token: the next key may have."""


def _refused(message: str) -> Unauthenticated:
    return Unauthenticated(message, presented=True)


def _claims_refused(error: jwt.InvalidTokenError) -> Unauthenticated:
    """What a token signed by one of the platform's keys is refused for."""
    if isinstance(error, jwt.ExpiredSignatureError):
        return _refused(EXPIRED)
    if isinstance(error, jwt.ImmatureSignatureError):
        return _refused(NOT_YET)
    if isinstance(error, jwt.MissingRequiredClaimError):
        return _refused(f"the bearer token has no {error.claim} claim")  # one of ours
    return _refused(NOT_VALID)


@dataclass(frozen=True)
class PlayerKeys:
    """How a player's token is verified: the algorithm of each key (``EdDSA``, ``ES256``,
    ``HS256``) and its id (``kid``, or None), the audience and issuer it must name, the clock
    leeway on ``iat``/``nbf``/``exp``, the longest ``exp - iat`` allowed."""

    keys: tuple[tuple[str, Any, str | None], ...] = field(repr=False)  # HS256's are secrets
    audience: str = DEFAULT_AUDIENCE
    issuer: str | None = None
    leeway_s: int = DEFAULT_LEEWAY_S
    max_lifetime_s: int = DEFAULT_MAX_LIFETIME_S

    @property
    def named(self) -> bool:
        """Some key has an id: the token's ``kid`` chooses among them."""
        return any(kid is not None for _, _, kid in self.keys)

    def candidates(self, algorithm: object, kid: object) -> list[Any]:
        """The keys that may have signed a token with these headers. With no key named, each
        key of the algorithm (the ``kid`` ignored, as before ids could be configured); else
        the key the ``kid`` names, or for a token without one the keys configured without
        an id (a platform moving to ids); a ``kid`` that names no key is refused."""
        if not self.named:
            return [key for alg, key, _ in self.keys if alg == algorithm]
        if kid is None:
            unnamed = [key for alg, key, name in self.keys if alg == algorithm and name is None]
            if not unnamed:
                raise _refused(NO_KEY_ID)
            return unnamed
        named = [(alg, key) for alg, key, name in self.keys if name == kid]
        if not named:
            raise _refused(UNKNOWN_KEY)
        return [key for alg, key in named if alg == algorithm]

    def verify(self, token: str) -> Player:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise _refused(NOT_VALID) from None
        algorithm = header.get("alg")
        required = ["exp", "iat", "sub", "aud", *(["iss"] if self.issuer is not None else [])]
        for key in self.candidates(algorithm, header.get("kid")):  # several: a rotation
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
            except _SIGNATURE_REFUSED:
                continue
            except jwt.InvalidTokenError as error:  # signed by this key: its claims refused
                raise _claims_refused(error) from None
            return self._player(claims)
        raise _refused(NOT_VALID)

    def _player(self, claims: Mapping[str, Any]) -> Player:
        """The player a token signed by the platform names, if its claims hold."""
        subject = claims.get("sub")
        if not isinstance(subject, str) or not 0 < len(subject) <= MAX_PLAYER_ID_CHARS:
            raise _refused(NOT_VALID)
        issued_at, expires = int(claims["iat"]), int(claims["exp"])  # numbers: PyJWT checked
        if expires - issued_at > self.max_lifetime_s:
            raise _refused(
                f"the bearer token lives longer (exp - iat) than the {self.max_lifetime_s} s "
                "this service allows"
            )
        return Player(subject, issued_at)


def _digest(secret: bytes) -> bytes:
    return hashlib.sha256(secret).digest()


OPERATOR_AUTH = "BLACKJACK_API_OPERATOR_AUTH"
OPERATOR_AUTH_VALUES = ("token", "gateway")
"""``token`` (the default): an operator's write needs one of ``BLACKJACK_API_TOKENS``;
``gateway``: the gateway in front authenticates the operator, an API without operator tokens
takes the write too."""


@dataclass(frozen=True)
class ApiTokens:
    tokens: tuple[bytes, ...] = ()
    """the operator tokens"""
    players: PlayerKeys | None = None
    gateway_operator: bool = False
    """``BLACKJACK_API_OPERATOR_AUTH=gateway``: the gateway authenticates the operator"""
    _digests: tuple[bytes, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_digests", tuple(_digest(token) for token in self.tokens))

    @property
    def required(self) -> bool:
        return bool(self.tokens) or self.players is not None

    @property
    def operator_writes(self) -> bool:
        """Whether the operator's writes (a revocation) are taken: an operator token is
        configured (and so checked), or the settings say the gateway authenticates."""
        return bool(self.tokens) or self.gateway_operator

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
        raise _refused(NOT_VALID)

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
        text = env.get("BLACKJACK_API_TOKENS")
        # Set but blank is refused, unlike other settings: a Secret's key left empty would
        # open the API to anyone who reaches the pod; unset is the open API's explicit form.
        if text is not None and not text.strip():
            raise ConfigurationError(
                "BLACKJACK_API_TOKENS is set but names no token (blank); unset it for none: "
                "an API open to anyone who reaches it"
            )
        tokens = _secrets((text or "").strip(), "BLACKJACK_API_TOKENS")
        if not tokens:
            # the same for a player key's setting when nothing else closes the API (with
            # operator tokens, a blank one only admits no player's token)
            for name in ("BLACKJACK_API_PLAYER_KEYS", "BLACKJACK_API_PLAYER_SECRETS"):
                value = env.get(name)
                if value is not None and not value.strip():
                    raise ConfigurationError(
                        f"{name} is set but names no key (blank), and BLACKJACK_API_TOKENS is "
                        "unset; unset it for none: an API open to anyone who reaches it"
                    )
        auth = env.get(OPERATOR_AUTH, "").strip() or "token"
        if auth not in OPERATOR_AUTH_VALUES:
            raise ConfigurationError(f"{OPERATOR_AUTH} is token or gateway, not {auth!r}")
        return cls(tuple(token.encode() for token in tokens), _player_keys(env), auth == "gateway")

    def __repr__(self) -> str:  # never the secrets themselves
        players = "" if self.players is None else f", {len(self.players.keys)} player key(s)"
        gateway = ", the gateway authenticates the operator" if self.gateway_operator else ""
        return f"ApiTokens({len(self.tokens)} token(s){players}{gateway})"


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


def _public_keys(text: str) -> list[tuple[str, Any, str | None]]:
    """The PEM public keys of ``text``, each with its id when ``ID=`` comes before it."""
    blocks = _PEM.findall(text.replace("\\n", "\n").encode())
    if not blocks:
        raise ConfigurationError("BLACKJACK_API_PLAYER_KEYS holds no PEM public key")
    keys: list[tuple[str, Any, str | None]] = []
    for number, (name, block) in enumerate(blocks, 1):
        kid = name.decode() if name else None
        try:
            key = load_pem_public_key(block)
        except ValueError:
            raise ConfigurationError(
                f"BLACKJACK_API_PLAYER_KEYS: key {number} is not a PEM public key"
            ) from None
        if isinstance(key, ed25519.Ed25519PublicKey):
            keys.append(("EdDSA", key, kid))
        elif isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1":
            keys.append(("ES256", key, kid))
        else:
            raise ConfigurationError(
                f"BLACKJACK_API_PLAYER_KEYS: key {number} is neither Ed25519 (EdDSA) nor "
                "P-256 (ES256)"
            )
    return keys


def _shared_secrets(text: str) -> list[tuple[str, Any, str | None]]:
    """``BLACKJACK_API_PLAYER_SECRETS``: each secret, or ``ID=SECRET`` when what comes before
    the first ``=`` is a key id (``KEY_ID``) and what follows it is a secret (32+ characters):
    a secret itself never reads so (hex, or base64 whose ``=`` pads its end)."""
    keys: list[tuple[str, Any, str | None]] = []
    for secret in _secrets(text, "BLACKJACK_API_PLAYER_SECRETS"):
        name, _, rest = secret.partition("=")
        if KEY_ID.fullmatch(name) and len(rest) >= MIN_TOKEN_CHARS:
            keys.append(("HS256", rest.encode(), name))
        else:
            keys.append(("HS256", secret.encode(), None))
    return keys


def _seconds(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = env.get(name, "").strip() or str(default)
    if not (text.isascii() and text.isdigit() and low <= int(text) <= high):
        raise ConfigurationError(f"{name} is a whole number of seconds from {low} to {high}")
    return int(text)


def _player_keys(env: Mapping[str, str]) -> PlayerKeys | None:
    pem = env.get("BLACKJACK_API_PLAYER_KEYS", "").strip()
    shared = env.get("BLACKJACK_API_PLAYER_SECRETS", "").strip()
    keys = _public_keys(pem) if pem else []
    keys += _shared_secrets(shared)
    if not keys:
        return None
    names = [kid for _, _, kid in keys if kid is not None]
    if len(set(names)) < len(names):
        twice = next(kid for kid in names if names.count(kid) > 1)
        raise ConfigurationError(f"the player keys' id {twice!r} names two keys")
    audience = env.get("BLACKJACK_API_AUDIENCE", "").strip() or DEFAULT_AUDIENCE
    issuer = env.get("BLACKJACK_API_PLAYER_ISSUER", "").strip() or None
    leeway = _seconds(env, "BLACKJACK_API_JWT_LEEWAY_S", DEFAULT_LEEWAY_S, 0, MAX_LEEWAY_S)
    lifetime = _seconds(
        env, "BLACKJACK_API_JWT_MAX_LIFETIME_S", DEFAULT_MAX_LIFETIME_S, 60, MAX_MAX_LIFETIME_S
    )
    return PlayerKeys(tuple(keys), audience, issuer, leeway, lifetime)


OPEN = ApiTokens()
"""Nothing set: every read is answered (the API sits behind the platform's gateway); an
operator's write is not (``operator_writes``)."""
