"""The handler's AsyncAPI page loads AsyncAPI's script and style from unpkg pinned by
Subresource Integrity (FastStream's page loaded them unchecked: a security review), loads
nothing else, and embeds the document so that no text in it can end its script."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tarfile
from typing import Any

import httpx
import pytest

from blackjack.app import build_app
from blackjack.asyncapi import page as page_module
from blackjack.asyncapi.contract import asyncapi_document
from blackjack.asyncapi.page import SCRIPT, STYLE, asyncapi_page, check, sri
from blackjack.command_handler.config import HandlerConfig
from blackjack.messages.sealing import ShoeSeal

TAG = re.compile(r"<(script|link)\b([^>]*)>", re.S)
ATTRIBUTE = re.compile(r'([a-z-]+)="([^"]*)"')


def embedded(page: str) -> Any:
    """The object the page hands to AsyncAPI's renderer."""
    start = page.index("AsyncApiStandalone.render(") + len("AsyncApiStandalone.render(")
    end = page.index(', document.getElementById("asyncapi")', start)
    return json.loads(page[start:end])


async def test_the_served_page_pins_what_it_loads_and_renders_the_served_document() -> None:
    config = HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g")
    app = build_app(config).app  # nothing connects yet
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
        page = await http.get("/docs/asyncapi")
        document = await http.get("/docs/asyncapi.json")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert document.status_code == 200
    assert document.json() == asyncapi_document(config.topics)
    loaded = {}
    for _, attributes in TAG.findall(page.text):
        found = dict(ATTRIBUTE.findall(attributes))
        url = found.get("src") or found.get("href")
        if url is None:  # the inline script
            continue
        assert found["crossorigin"] == "anonymous", found
        loaded[url] = found["integrity"]
    assert loaded == {SCRIPT.url: SCRIPT.integrity, STYLE.url: STYLE.integrity}
    # nothing else from another site (FastStream's page had asyncapi.com's icons)
    assert set(re.findall(r'"(https://[^"]+)"', page.text)) == {SCRIPT.url, STYLE.url}
    assert embedded(page.text)["schema"] == document.json()


def test_no_text_of_the_document_ends_its_script() -> None:
    hostile = {"info": {"description": "</script><script>alert(1)</script><!--"}}
    page = asyncapi_page(hostile, "T</title><script>")
    assert page.count("</script>") == 2  # the pinned script's and the renderer's
    assert "<script>alert" not in page and "<!--" not in page
    assert "T&lt;/title&gt;&lt;script&gt;" in page
    assert embedded(page)["schema"] == hostile


def tarball(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return out.getvalue()


def integrity_of(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def test_the_check_finds_another_tarball_or_a_file_that_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script, style = b"window.AsyncApiStandalone = {};", b"html {}"
    package = tarball({SCRIPT.path: script, STYLE.path: style})
    [other] = check(package)  # not the registry's tarball: nothing in it is trusted
    assert other.startswith("the tarball is not the registry's")
    monkeypatch.setattr(page_module, "TARBALL_INTEGRITY", integrity_of(package))
    found = check(package)
    assert [line.split(":")[0] for line in found] == [SCRIPT.path, STYLE.path]
    monkeypatch.setattr(page_module, "SCRIPT", page_module.PinnedFile(SCRIPT.path, sri(script)))
    monkeypatch.setattr(page_module, "STYLE", page_module.PinnedFile(STYLE.path, sri(style)))
    assert check(package) == []
    without_style = tarball({SCRIPT.path: script})  # a package without one of the files
    monkeypatch.setattr(page_module, "TARBALL_INTEGRITY", integrity_of(without_style))
    assert check(without_style) == [
        f"{STYLE.path}: pinned {page_module.STYLE.integrity}, the package's missing"
    ]


def test_the_pins_name_one_version_of_one_package() -> None:
    for pinned in (SCRIPT, STYLE):
        assert pinned.url.startswith(
            f"https://unpkg.com/{page_module.COMPONENT}@{page_module.COMPONENT_VERSION}/"
        )
        assert re.fullmatch(r"sha384-[A-Za-z0-9+/]{64}", pinned.integrity)
    assert page_module.TARBALL.endswith(f"-{page_module.COMPONENT_VERSION}.tgz")
