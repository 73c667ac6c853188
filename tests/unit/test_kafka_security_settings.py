"""The Kafka security settings: what an operator may set, and what the clients are given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blackjack.bus.settings import KafkaSecurity


def test_security_settings_are_checked_and_the_password_never_shown() -> None:
    secure = KafkaSecurity.from_env(
        {
            "BLACKJACK_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
            "BLACKJACK_KAFKA_SASL_USERNAME": "svc",
            "BLACKJACK_KAFKA_SASL_PASSWORD": "hunter2",
        }
    )
    assert secure.protocol == "SASL_SSL" and "hunter2" not in repr(secure)
    options: dict[str, Any] = secure.client_options()
    assert options["sasl_plain_password"] == "hunter2" and options["ssl_context"] is not None
    for wrong, named in [
        ({"BLACKJACK_KAFKA_SECURITY_PROTOCOL": "TLS"}, "BLACKJACK_KAFKA_SECURITY_PROTOCOL"),
        ({"BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "BLACKJACK_KAFKA_SASL_USERNAME"),
        (
            {
                "BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "BLACKJACK_KAFKA_SASL_MECHANISM": "GSSAPI",
                "BLACKJACK_KAFKA_SASL_USERNAME": "svc",
                "BLACKJACK_KAFKA_SASL_PASSWORD": "x",
            },
            "BLACKJACK_KAFKA_SASL_MECHANISM",
        ),
        (
            {"BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SSL", "BLACKJACK_KAFKA_SSL_CERTFILE": "/c.pem"},
            "BLACKJACK_KAFKA_SSL_KEYFILE",
        ),
        # set but not used: a forgotten protocol would connect in the clear, unauthenticated
        ({"BLACKJACK_KAFKA_SASL_USERNAME": "svc"}, "BLACKJACK_KAFKA_SASL_"),
        ({"BLACKJACK_KAFKA_SSL_CAFILE": "/ca.pem"}, "BLACKJACK_KAFKA_SSL_"),
        (
            {
                "BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SSL",
                "BLACKJACK_KAFKA_SASL_USERNAME": "svc",
                "BLACKJACK_KAFKA_SASL_PASSWORD": "x",
            },
            "BLACKJACK_KAFKA_SASL_",
        ),
    ]:
        with pytest.raises(ValueError, match=named):
            KafkaSecurity.from_env(wrong)
    assert KafkaSecurity.from_env({}).client_options() == {"security_protocol": "PLAINTEXT"}
    assert KafkaSecurity.from_env({}).faststream() is None


def test_a_tls_file_not_there_is_named_with_its_setting(tmp_path: Path) -> None:
    """It said "the TLS files of BLACKJACK_KAFKA_SSL_* cannot be read: [Errno 2] ...",
    naming neither the setting nor the file (a security review)."""
    missing = tmp_path / "ca.pem"
    security = KafkaSecurity.from_env(
        {"BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SSL", "BLACKJACK_KAFKA_SSL_CAFILE": str(missing)}
    )
    with pytest.raises(ValueError) as refused:
        security.client_options()
    assert str(refused.value) == (
        f"the TLS files of BLACKJACK_KAFKA_SSL_* cannot be read "
        f"(BLACKJACK_KAFKA_SSL_CAFILE={missing}): No such file or directory"
    )
