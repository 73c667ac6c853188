"""HTTPS for the service's HTTP endpoints (``BLACKJACK_HTTP_TLS_CERT_FILE`` and
``_KEY_FILE``): over a real socket, uvicorn as ``blackjack serve`` and ``blackjack
projections run --http`` configure it, a client that checks the certificate gets its answer
and one speaking plain HTTP gets none; settings that cannot work stop the start with a line
saying which."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from blackjack.configuration import ConfigurationError
from blackjack.http_server import (
    TLS_CERT_SETTING,
    TLS_KEY_SETTING,
    JsonH11Protocol,
    http_config,
    tls_context,
)
from blackjack.projections.health import FoldHealth, probes
from tests.integration import infra
from tests.unit.uvicorn_in_process import running

WAIT_S = 10.0
LIMIT = 8


def key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """A key and a self-signed certificate for 127.0.0.1, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


async def unrouted(scope: object, receive: object, send: object) -> None:
    raise AssertionError("only the probes are asked")


class _Quick(JsonH11Protocol):
    head_timeout_s = 0.4


@contextlib.asynccontextmanager
async def served(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    port = infra.free_port()
    app = probes(FoldHealth(10, starting=False), unrouted)
    config = http_config(app, "127.0.0.1", port, lifespan="off", log_level="critical")
    assert config.http is JsonH11Protocol  # what the service runs; the test shortens its clock
    config.http = _Quick
    async with running(config):
        yield port


async def test_https_is_served_with_the_certificate_and_plain_http_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = key_pair(tmp_path, "server")
    env = {TLS_CERT_SETTING: str(cert), TLS_KEY_SETTING: str(key)}
    async with served(env, monkeypatch) as port:
        trusting = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(verify=trusting) as https:
            answer = await https.get(f"https://127.0.0.1:{port}/healthz")
        assert answer.status_code == 200 and answer.json() == {"status": "ok"}
        other, _ = key_pair(tmp_path, "other")  # a client trusting another certificate
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(other))) as c:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await c.get(f"https://127.0.0.1:{port}/healthz")
        async with httpx.AsyncClient() as plain:  # no answer in clear text
            with pytest.raises(httpx.TransportError):
                await plain.get(f"http://127.0.0.1:{port}/healthz")
        # a client that says nothing once connected is answered 408 and let go, as in clear
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trusting)
        try:
            async with asyncio.timeout(WAIT_S):
                answer_bytes = await reader.read()
        finally:
            writer.close()
        assert answer_bytes.startswith(b"HTTP/1.1 408 "), answer_bytes


async def test_connections_that_never_finish_a_handshake_are_counted_and_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review: asyncio's TLS server handed a connection over only once its handshake was
    done, so 1,100 connections that sent nothing held every descriptor of a process limited
    to 1,024 (connections 8) and its probes went unanswered; here each is counted from its
    accept, made room for as an idle one is, and closed at the head's deadline."""
    cert, key = key_pair(tmp_path, "server")
    env = {
        TLS_CERT_SETTING: str(cert),
        TLS_KEY_SETTING: str(key),
        "BLACKJACK_HTTP_MAX_CONNECTIONS": str(LIMIT),
    }
    async with served(env, monkeypatch) as port:
        silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5 * LIMIT)]
        trusting = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(verify=trusting, timeout=WAIT_S) as https:
            answer = await https.get(f"https://127.0.0.1:{port}/healthz")
        assert answer.status_code == 200
        async with asyncio.timeout(WAIT_S):  # made room for, or past the deadline: closed
            for reader, _ in silent:
                assert await reader.read() == b""  # nothing in clear before the handshake
        for _, writer in silent:
            writer.close()


def test_settings_that_cannot_serve_https_stop_the_start(tmp_path: Path) -> None:
    cert, key = key_pair(tmp_path, "server")
    _, other_key = key_pair(tmp_path, "other")
    assert tls_context({}) is None  # plain HTTP, as before
    assert tls_context({TLS_CERT_SETTING: str(cert), TLS_KEY_SETTING: str(key)}) is not None
    with pytest.raises(ConfigurationError, match=f"{TLS_KEY_SETTING} is not"):
        tls_context({TLS_CERT_SETTING: str(cert)})
    with pytest.raises(ConfigurationError, match=f"{TLS_CERT_SETTING} is not"):
        tls_context({TLS_KEY_SETTING: str(key)})
    with pytest.raises(ConfigurationError, match="cannot be read"):
        tls_context({TLS_CERT_SETTING: str(tmp_path / "nowhere.crt"), TLS_KEY_SETTING: str(key)})
    with pytest.raises(ConfigurationError, match="not a PEM certificate and its private key"):
        tls_context({TLS_CERT_SETTING: str(cert), TLS_KEY_SETTING: str(other_key)})
    with pytest.raises(ConfigurationError, match="not a PEM certificate and its private key"):
        tls_context({TLS_CERT_SETTING: str(key), TLS_KEY_SETTING: str(key)})
