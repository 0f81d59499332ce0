"""An MCP Apps backend (the ``io.modelcontextprotocol/ui`` extension, SEP-1865) on the official
SDK (mcp 2.3.0), for tests/modes/test_gateway_apps.py.

Usage::

    python apps_server.py --label L [--record FILE]

stdio, both eras. What an MCP Apps server offers, as ext-apps' ``registerAppTool`` /
``registerAppResource`` write it:

- tool ``show_view(city)``: ``_meta.ui.resourceUri`` and the deprecated flat
  ``_meta["ui/resourceUri"]`` both ``ui://view/app.html``; a text result;
- tool ``show_page``: only the flat key, ``ui://view/page/intro`` (an older server);
- tool ``plain``: no UI;
- tool ``ui_capability``: what the client declared under ``extensions["io.modelcontextprotocol/ui"]``
  (JSON, ``null`` if nothing), which an Apps server reads to decide whether to offer its Views;
- resource ``ui://view/app.html``, mime ``text/html;profile=mcp-app``, HTML naming L, with
  ``_meta.ui`` (``prefersBorder``, CSP) on the listing and on the contents;
- template ``ui://view/page/{name}`` (same mime), HTML naming L and the page;
- resource ``test://info`` (not an App).

Every server uses the same URIs, so two of them behind one gateway differ only by L.
``resources/subscribe`` / ``unsubscribe`` are served (no public API in 2.3.0) and, with
``--record``, each URI asked for is appended to FILE as ``subscribe URI`` / ``unsubscribe URI``.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

MIME = "text/html;profile=mcp-app"  # ext-apps RESOURCE_MIME_TYPE
APP = "ui://view/app.html"
RESOURCE_META = {"ui": {"prefersBorder": True, "csp": {"connectDomains": [], "resourceDomains": []}}}


def build(label: str, record: Path | None) -> MCPServer:
    mcp = MCPServer(f"apps-{label}", version="1.0.0")

    @mcp.tool(meta={"ui": {"resourceUri": APP, "visibility": ["model", "app"]}, "ui/resourceUri": APP})
    def show_view(city: str) -> str:
        """Show the view for a city."""
        return f"{label}: {city}"

    @mcp.tool(meta={"ui/resourceUri": "ui://view/page/intro"})
    def show_page() -> str:
        """Show the intro page (flat key only)."""
        return f"{label}: intro"

    @mcp.tool()
    def plain() -> str:
        """No UI."""
        return label

    @mcp.tool()
    def ui_capability(ctx: Context) -> str:
        """The MCP Apps capability the client declared."""
        caps = ctx.client_capabilities
        extensions = (caps.model_dump(mode="json", by_alias=True).get("extensions") if caps else None) or {}
        return json.dumps(extensions.get("io.modelcontextprotocol/ui"))

    @mcp.resource(APP, name="app", mime_type=MIME, meta=RESOURCE_META)
    def app() -> str:
        return f"<!doctype html><html><body><h1>app of {label}</h1></body></html>"

    @mcp.resource("ui://view/page/{name}", name="page", mime_type=MIME)
    def page(name: str) -> str:
        return f"<!doctype html><html><body><h1>{name} page of {label}</h1></body></html>"

    @mcp.resource("test://info", name="info", mime_type="text/plain")
    def info() -> str:
        return f"info of {label}"

    def noting(verb: str):
        async def handle(ctx: Any, params: Any) -> EmptyResult:
            if record is not None:
                with record.open("a") as f:
                    f.write(f"{verb} {params.uri}\n")
            return EmptyResult()

        return handle

    server = mcp._lowlevel_server  # no public API for subscriptions in 2.3.0
    server.add_request_handler("resources/subscribe", SubscribeRequestParams, noting("subscribe"))
    server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, noting("unsubscribe"))
    return mcp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="an MCP Apps backend on the official SDK")
    parser.add_argument("--label", required=True)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args(argv)
    build(args.label, args.record).run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
