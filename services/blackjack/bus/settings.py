"""Kafka connection and topic settings, read from the environment with embedded defaults.

BLACKJACK_KAFKA_BOOTSTRAP     bootstrap servers, comma-separated (also read: KAFKA_BOOTSTRAP);
                              127.0.0.1:9092
BLACKJACK_TOPIC_PREFIX        prepended to every topic name (and the consumer group); ""
BLACKJACK_PARTITIONS          partitions of every topic; 6 (never change it once streams exist)
BLACKJACK_REPLICATION_FACTOR  replicas of every topic; 1 (3 in production)
BLACKJACK_MIN_INSYNC_REPLICAS min.insync.replicas of every topic; 1 (2 in production)

How every client (handler, projection worker, audit, rebuild, client library) authenticates
and encrypts; the defaults are a local broker's open PLAINTEXT listener:

BLACKJACK_KAFKA_SECURITY_PROTOCOL  PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; PLAINTEXT
BLACKJACK_KAFKA_SASL_MECHANISM     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; PLAIN
BLACKJACK_KAFKA_SASL_USERNAME      the principal the brokers' ACLs name (SASL_*)
BLACKJACK_KAFKA_SASL_PASSWORD      its password (SASL_*; from a secret)
BLACKJACK_KAFKA_SSL_CAFILE         PEM of the CAs that signed the brokers' certificates
                                   (SSL, SASL_SSL; the system's CAs when unset)
BLACKJACK_KAFKA_SSL_CERTFILE       PEM client certificate, for brokers that require one (mTLS)
BLACKJACK_KAFKA_SSL_KEYFILE        its private key
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.helpers import create_ssl_context
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

from blackjack.configuration import ConfigurationError, env_value

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_HELP = (
    "Kafka bootstrap servers (default: BLACKJACK_KAFKA_BOOTSTRAP, else KAFKA_BOOTSTRAP, "
    f"else {DEFAULT_BOOTSTRAP})"
)
"""the help of a ``--bootstrap`` option whose default is ``KafkaSettings.from_env``'s"""


def bootstrap_servers(bootstrap: str) -> list[str]:
    """``host:port,host:port`` as a list: aiokafka splits such a string itself, but FastStream
    wraps a string in a list whole, and aiokafka then reads it as one host named
    ``host:port,host`` (a cluster's projection worker never connected)."""
    return [server.strip() for server in bootstrap.split(",") if server.strip()]


TRANSACTION_RETRY_BACKOFF_MS = 20
"""``retry_backoff_ms`` of the transactional producers. Back to back, a partition's next
transaction often finds the coordinator still writing the last one's markers
(``CONCURRENT_TRANSACTIONS``, KAFKA-5477); aiokafka waits ``retry_backoff_ms`` (100 by default)
before it asks again, which was the p95 latency under load (docs/load.md)."""


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = {"PLAIN": SASLPlaintext, "SCRAM-SHA-256": SASLScram256, "SCRAM-SHA-512": SASLScram512}


@dataclass(frozen=True)
class KafkaSecurity:
    """How a client proves who it is to the brokers and keeps the traffic private."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a log line
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigurationError(
                f"BLACKJACK_KAFKA_SECURITY_PROTOCOL must be one of {', '.join(PROTOCOLS)}, "
                f"not {self.protocol!r}"
            )
        if self.sasl and self.sasl_mechanism not in MECHANISMS:
            raise ConfigurationError(
                f"BLACKJACK_KAFKA_SASL_MECHANISM must be one of {', '.join(MECHANISMS)}, "
                f"not {self.sasl_mechanism!r}"
            )
        if self.sasl and not (self.username and self.password):
            raise ConfigurationError(
                f"{self.protocol} needs BLACKJACK_KAFKA_SASL_USERNAME and "
                "BLACKJACK_KAFKA_SASL_PASSWORD"
            )
        if not self.sasl and (self.username or self.password):
            raise ConfigurationError(
                f"BLACKJACK_KAFKA_SASL_* are set but {self.protocol} does not use them: set "
                "BLACKJACK_KAFKA_SECURITY_PROTOCOL to SASL_SSL (or SASL_PLAINTEXT)"
            )
        if not self.tls and (self.cafile or self.certfile or self.keyfile):
            raise ConfigurationError(
                f"BLACKJACK_KAFKA_SSL_* are set but {self.protocol} does not use them: set "
                "BLACKJACK_KAFKA_SECURITY_PROTOCOL to SSL or SASL_SSL"
            )
        if bool(self.certfile) != bool(self.keyfile):
            raise ConfigurationError(
                "BLACKJACK_KAFKA_SSL_CERTFILE and BLACKJACK_KAFKA_SSL_KEYFILE go together"
            )

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> KafkaSecurity:
        def value(name: str) -> str | None:
            return env.get(name, "").strip() or None

        return cls(
            protocol=(value("BLACKJACK_KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT").upper(),
            sasl_mechanism=(value("BLACKJACK_KAFKA_SASL_MECHANISM") or "PLAIN").upper(),
            username=value("BLACKJACK_KAFKA_SASL_USERNAME"),
            password=env.get("BLACKJACK_KAFKA_SASL_PASSWORD") or None,
            cafile=value("BLACKJACK_KAFKA_SSL_CAFILE"),
            certfile=value("BLACKJACK_KAFKA_SSL_CERTFILE"),
            keyfile=value("BLACKJACK_KAFKA_SSL_KEYFILE"),
        )

    def client_options(self) -> dict[str, Any]:
        """The keyword arguments of an aiokafka client (consumer, producer, admin)."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.tls:
            options["ssl_context"] = self._ssl_context()
        return options

    def faststream(self) -> BaseSecurity | None:
        """The same for a FastStream broker (None: plaintext)."""
        context = self._ssl_context() if self.tls else None
        if self.sasl:
            assert self.username is not None and self.password is not None
            kind = MECHANISMS[self.sasl_mechanism]
            return kind(self.username, self.password, ssl_context=context, use_ssl=self.tls)
        if self.tls:
            return BaseSecurity(ssl_context=context, use_ssl=True)
        return None

    def _ssl_context(self) -> Any:
        try:
            return create_ssl_context(
                cafile=self.cafile, certfile=self.certfile, keyfile=self.keyfile
            )
        except OSError as error:  # (it named neither the setting nor the file)
            named = {
                "BLACKJACK_KAFKA_SSL_CAFILE": self.cafile,
                "BLACKJACK_KAFKA_SSL_CERTFILE": self.certfile,
                "BLACKJACK_KAFKA_SSL_KEYFILE": self.keyfile,
            }
            files = ", ".join(f"{name}={path}" for name, path in named.items() if path)
            reason = error.strerror or str(error)
            raise ConfigurationError(
                f"the TLS files of BLACKJACK_KAFKA_SSL_* cannot be read ({files}): {reason}"
            ) from None


PLAINTEXT = KafkaSecurity()


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = ""
    partitions: int = 6
    replication_factor: int = 1
    min_insync_replicas: int = 1
    security: KafkaSecurity = PLAINTEXT

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ConfigurationError("BLACKJACK_PARTITIONS must be at least 1")
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            raise ConfigurationError(
                "BLACKJACK_MIN_INSYNC_REPLICAS must be between 1 and BLACKJACK_REPLICATION_FACTOR"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> KafkaSettings:
        def number(name: str, default: int) -> int:
            return env_value(env, name, int, default)

        def text(name: str) -> str:
            return env.get(name, "").strip()

        return cls(
            bootstrap=text("BLACKJACK_KAFKA_BOOTSTRAP")
            or text("KAFKA_BOOTSTRAP")
            or DEFAULT_BOOTSTRAP,
            topic_prefix=env.get("BLACKJACK_TOPIC_PREFIX", "").strip(),
            partitions=number("BLACKJACK_PARTITIONS", cls.partitions),
            replication_factor=number("BLACKJACK_REPLICATION_FACTOR", cls.replication_factor),
            min_insync_replicas=number("BLACKJACK_MIN_INSYNC_REPLICAS", cls.min_insync_replicas),
            security=KafkaSecurity.from_env(env),
        )

    def client_options(self) -> dict[str, Any]:
        """``bootstrap_servers`` and the security options of an aiokafka client."""
        return {"bootstrap_servers": self.bootstrap, **self.security.client_options()}
