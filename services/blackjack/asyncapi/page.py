"""The AsyncAPI page a handler serves (``/docs/asyncapi``): the document, rendered in the
reader's browser by AsyncAPI's React component.

FastStream's own page loads the component's script and style from unpkg.com without
Subresource Integrity, so whoever serves or alters those files runs their script on a page of
the operator's domain (a security review). Here each is pinned to its version and its
SHA-384, which the browser checks before it runs or applies it: a file changed in any way is
refused, and the page shows nothing rather than someone else's code. The hashes are of the
files in the package's tarball as the npm registry publishes it (its ``dist.integrity``
checked first); unpkg serves those same bytes. ``python -m blackjack.asyncapi.page
--check`` downloads the tarball again and compares.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import html
import io
import json
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from typing import Any

from faststream.asgi import AsgiResponse, get
from faststream.asgi.types import ASGIApp, Scope
from faststream.specification.asyncapi import AsyncAPI

from blackjack.asyncapi.contract import TITLE

COMPONENT = "@asyncapi/react-component"
COMPONENT_VERSION = "3.1.5"
TARBALL = f"https://registry.npmjs.org/{COMPONENT}/-/react-component-{COMPONENT_VERSION}.tgz"
TARBALL_INTEGRITY = (  # the registry's dist.integrity for this version
    "sha512-Aq4I++uX6lOWxgBn+D7ly/GXasHjVcORz8eIGii8RgFjZ0i8mDth6L"
    "jFHb/yHVr3ANxLFLodXUgwEBhcSvfV/Q=="
)


@dataclass(frozen=True)
class PinnedFile:
    path: str
    """in the package"""
    integrity: str
    """SHA-384, as a browser's ``integrity`` attribute takes it"""

    @property
    def url(self) -> str:
        return f"https://unpkg.com/{COMPONENT}@{COMPONENT_VERSION}/{self.path}"


SCRIPT = PinnedFile(
    "browser/standalone/index.js",
    "sha384-8wbjPojoZcmtwWk+Smcb9q18OIVmLY6REqp4MnkZK6xd9+FLztcl6wwP447XxJ+V",
)
STYLE = PinnedFile(
    "styles/default.min.css",
    "sha384-oo9RoQcacP++XdMX6CjTucTvASEORHX3chFik0/V2kHcsHiVboGyWZztGeq/0bum",
)

# Shows everything the document has; no "try it out" (it would send to a broker).
CONFIG = {
    "show": {
        "sidebar": True,
        "info": True,
        "servers": True,
        "operations": True,
        "messages": True,
        "schemas": True,
        "errors": True,
    },
    "expand": {"messageExamples": True},
    "sidebar": {"showServers": "byDefault", "showOperations": "byDefault"},
}


def _in_script(value: Any) -> str:
    """JSON that cannot end the ``<script>`` element it is in (nor open a comment there)."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")


def asyncapi_page(document: dict[str, Any], title: str) -> str:
    """The HTML page rendering ``document``."""
    rendered = _in_script({"schema": document, "config": CONFIG})
    return f"""<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>{html.escape(title)} AsyncAPI</title>
    <link rel="stylesheet" href="{STYLE.url}" integrity="{STYLE.integrity}"
      crossorigin="anonymous" referrerpolicy="no-referrer">
    <style>
      html {{ font-family: ui-sans-serif, system-ui, sans-serif; line-height: 1.5; }}
    </style>
  </head>
  <body>
    <div id="asyncapi"></div>
    <script src="{SCRIPT.url}" integrity="{SCRIPT.integrity}"
      crossorigin="anonymous" referrerpolicy="no-referrer"></script>
    <script>
      window.AsyncApiStandalone.render({rendered}, document.getElementById("asyncapi"));
    </script>
  </body>
</html>
"""


def asyncapi_routes(spec: AsyncAPI) -> list[tuple[str, ASGIApp]]:
    """``/docs/asyncapi`` (the page) and ``/docs/asyncapi.json`` (the document), made at the
    first request for either (about 0.1 s of CPU no process's start needs to spend)."""

    @functools.cache
    def document() -> dict[str, Any]:
        made: dict[str, Any] = spec.to_specification().to_jsonable()
        return made

    @functools.cache
    def page() -> bytes:
        return asyncapi_page(document(), TITLE).encode()

    @functools.cache
    def as_json() -> bytes:
        return json.dumps(document()).encode()

    @get(include_in_schema=False)
    async def html_page(scope: Scope) -> AsgiResponse:
        return AsgiResponse(page(), 200, {"content-type": "text/html; charset=utf-8"})

    @get(include_in_schema=False)
    async def json_document(scope: Scope) -> AsgiResponse:
        return AsgiResponse(as_json(), 200, {"content-type": "application/json"})

    return [("/docs/asyncapi", html_page), ("/docs/asyncapi.json", json_document)]


def sri(content: bytes) -> str:
    return "sha384-" + base64.b64encode(hashlib.sha384(content).digest()).decode()


def check(tarball: bytes) -> list[str]:
    """What in ``tarball`` (the package as the registry publishes it) differs from the pins."""
    digest = base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if f"sha512-{digest}" != TARBALL_INTEGRITY:
        return [f"the tarball is not the registry's {COMPONENT_VERSION}: sha512-{digest}"]
    found = []
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for pinned in (SCRIPT, STYLE):
            try:
                member = archive.extractfile(f"package/{pinned.path}")
            except KeyError:  # not in the package
                member = None
            actual = "missing" if member is None else sri(member.read())
            if actual != pinned.integrity:
                found.append(f"{pinned.path}: pinned {pinned.integrity}, the package's {actual}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", required=True)
    parser.parse_args(argv)
    with urllib.request.urlopen(TARBALL, timeout=60) as response:  # a fixed https URL
        differences = check(response.read())
    for difference in differences:
        print(difference, file=sys.stderr)
    if not differences:
        print(f"{COMPONENT}@{COMPONENT_VERSION}: the pinned hashes are the package's")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
