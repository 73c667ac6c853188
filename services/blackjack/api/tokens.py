"""Who may read the query API: the bearer tokens of ``BLACKJACK_API_TOKENS``.

The API shows every player's money and history. Behind the platform's gateway it may be left
open (no tokens set); with tokens, each ``/v1/`` request must carry one of them as
``Authorization: Bearer <token>``. Several tokens, comma-separated, let an operator rotate
one without a moment when no token works. Probes, metrics and the AsyncAPI document stay
open: they show no player's data.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass

from blackjack.configuration import ConfigurationError

MIN_TOKEN_CHARS = 32
"""A token is a shared secret: long enough that guessing it is hopeless (32 hex digits are
128 bits)."""


@dataclass(frozen=True)
class ApiTokens:
    tokens: tuple[bytes, ...] = ()

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    def admits(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header carries one of the tokens (each compared in
        constant time, so the answer's timing says nothing about how close a guess was)."""
        if not self.tokens:
            return True
        scheme, _, presented = (authorization or b"").partition(b" ")
        if scheme.lower() != b"bearer" or not presented:
            return False
        return any(hmac.compare_digest(presented.strip(), token) for token in self.tokens)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ApiTokens:
        text = env.get("BLACKJACK_API_TOKENS", "").strip()  # blank: unset, like any setting
        tokens = tuple(token.strip() for token in text.split(",") if token.strip())
        if text and not tokens:  # "," and the like: meant to protect the API, protects nothing
            raise ConfigurationError("BLACKJACK_API_TOKENS is set but names no token")
        short = [index for index, token in enumerate(tokens) if len(token) < MIN_TOKEN_CHARS]
        if short:
            raise ConfigurationError(
                f"BLACKJACK_API_TOKENS: token {short[0] + 1} is shorter than "
                f"{MIN_TOKEN_CHARS} characters"
            )
        if any(not token.isascii() or " " in token for token in tokens):
            raise ConfigurationError("BLACKJACK_API_TOKENS: a token is ASCII without spaces")
        return cls(tuple(token.encode() for token in tokens))

    def __repr__(self) -> str:  # never the secrets themselves
        return f"ApiTokens({len(self.tokens)} token(s))"


OPEN = ApiTokens()
"""No tokens: every request is answered (the API sits behind the platform's gateway)."""
