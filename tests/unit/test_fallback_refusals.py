"""The service's own endpoints beside the query API (health, metrics, AsyncAPI: FastStream's
app) refuse an unknown path or another method in the API's typed JSON error, as the query API
does, instead of FastStream's text ('Application doesn't support regular HTTP protocol.' for
any unknown path); what they answer is unchanged. ``blackjack serve`` with and without its
projections (``--no-projections``, as the handlers' pods run), and ``blackjack projections
run --http``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from blackjack.app import build_app
from blackjack.command_handler.config import HandlerConfig
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projection_worker.worker import http_app
from blackjack.projections.health import FoldHealth
from blackjack.projections.store import ProjectionStore


def app(tmp_path: Path, projections: bool) -> object:
    config = HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g")
    settings = ProjectionSettings(db_url=f"sqlite+aiosqlite:///{tmp_path}/read.db")
    return build_app(config, settings if projections else None).app  # nothing connects yet


@pytest.mark.parametrize("projections", [True, False], ids=["serve", "serve --no-projections"])
@pytest.mark.parametrize(
    ("method", "path", "refused"),
    [
        ("GET", "/nope", (404, "not_found")),
        ("GET", "/metrics/x", (404, "not_found")),
        ("POST", "/metrics", (405, "method_not_allowed")),
        ("DELETE", "/readyz", (405, "method_not_allowed")),
    ],
)
async def test_a_refusal_beside_the_query_api_is_typed(
    tmp_path: Path, projections: bool, method: str, path: str, refused: tuple[int, str]
) -> None:
    status, code = refused
    transport = httpx.ASGITransport(app=app(tmp_path, projections))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
        answer = await http.request(method, path)
        head = await http.request("HEAD", path) if method == "GET" else None
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == code
    assert int(answer.headers["content-length"]) == len(answer.content)
    if head is not None:
        assert head.status_code == status and head.content == b""


@pytest.mark.parametrize("projections", [True, False], ids=["serve", "serve --no-projections"])
async def test_what_the_service_answers_beside_the_query_api_is_unchanged(
    tmp_path: Path, projections: bool
) -> None:
    transport = httpx.ASGITransport(app=app(tmp_path, projections))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
        health = await http.get("/healthz")
        metrics = await http.get("/metrics")
        document = await http.get("/docs/asyncapi.json")
    assert health.status_code == 200 and health.json()["status"] == "starting"
    assert metrics.status_code == 200 and "blackjack_commands_total" in metrics.text
    assert metrics.headers["content-type"].startswith("text/plain")
    assert document.status_code == 200 and "channels" in document.json()


@pytest.mark.parametrize(
    ("method", "path", "refused"),
    [
        ("GET", "/nope", (404, "not_found")),
        ("GET", "/metrics/x", (404, "not_found")),
        ("POST", "/metrics", (405, "method_not_allowed")),
    ],
)
async def test_a_projection_worker_answers_its_metrics_at_metrics_only(
    tmp_path: Path, method: str, path: str, refused: tuple[int, str]
) -> None:
    """``blackjack projections run --http``: prometheus-client's app answered the metrics at
    any path (``/nope`` 200) and to any method."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    transport = httpx.ASGITransport(app=http_app(store, FoldHealth()))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
            answer = await http.request(method, path)
            metrics = await http.get("/metrics")
            health = await http.get("/healthz")
    finally:
        await store.close()
    assert (answer.status_code, answer.json()["error"]["code"]) == refused
    assert answer.headers["content-type"] == "application/json"
    assert metrics.status_code == 200 and "blackjack_projection_api_requests_total" in metrics.text
    assert health.json() == {"status": "ok"}
