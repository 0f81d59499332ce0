"""Reading another intermediary's declaration (transports/declarations.py) from a raw
HTTP/1.1 server on loopback: the request goes to the well-known path at the origin with
no credentials, and every way it can fail has its own reason, which never holds the URL.
The federation mode's summary of what was read (compose/federation.py) is checked last."""

from __future__ import annotations

import asyncio
import contextlib

import orjson
import pytest

from hopline.config.schema import GatewayConfig
from hopline.compose import federation
from hopline.transports.declarations import MAX_DECLARATION, Unread, declaration_url, fetch_declarations
from tests.peers import free_port

pytestmark = pytest.mark.timeout(30)

DECLARED = {"intermediary": {"name": "hopline", "version": "9"}, "tier": 2, "modes": ["forward"], "layers": [1, 2, "x"]}


@contextlib.asynccontextmanager
async def answering(status: str, body: bytes, *, content_type: str = "application/json"):
    """A loopback server that answers every request with ``status`` and ``body``; yields
    ``(its base URL, the request heads it received)``."""
    heads: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            heads.append((await reader.readuntil(b"\r\n\r\n")).decode("latin-1"))
            writer.write(b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                         % (status.encode(), content_type.encode(), len(body), body))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", heads
    finally:
        server.close()
        await server.wait_closed()


def test_the_declaration_is_at_the_origin_without_userinfo_or_query():
    assert declaration_url("https://user:pw@example.com:8443/team/mcp?key=s3cret") == "https://example.com:8443/.well-known/agent-tool-proxy"
    assert declaration_url("http://[::1]:9000/mcp") == "http://[::1]:9000/.well-known/agent-tool-proxy"
    assert declaration_url("https://example.com/mcp") == "https://example.com/.well-known/agent-tool-proxy"


async def test_a_declaration_is_read_with_no_credentials():
    async with answering("200 OK", orjson.dumps(DECLARED)) as (base, heads):
        url = base.replace("http://", "http://user:s3cret@") + "/mcp?token=s3cret"
        assert await fetch_declarations({"team": url}) == {"team": DECLARED}
    (head,) = heads
    assert head.startswith("GET /.well-known/agent-tool-proxy HTTP/1.1\r\n")
    assert "authorization" not in head.lower() and "s3cret" not in head


@pytest.mark.parametrize(("status", "body", "reason"), [
    ("404 Not Found", b"{}", "no declaration (HTTP 404)"),
    ("302 Found", b"", "no declaration (HTTP 302)"),  # redirects are not followed
    ("200 OK", b"<html>not a declaration</html>", "its declaration is not JSON"),
    ("200 OK", b" " * (MAX_DECLARATION + 1), "its declaration is too large"),
])
async def test_each_way_of_not_reading_a_declaration_has_its_reason(status, body, reason):
    async with answering(status, body) as (base, _):
        assert await fetch_declarations({"m": base + "/mcp"}) == {"m": Unread(reason)}


async def test_an_unreachable_member_is_named_by_the_error_type_not_the_url():
    url = f"http://user:s3cret@127.0.0.1:{free_port()}/mcp"
    assert await fetch_declarations({"gone": url}) == {"gone": Unread("unreachable (ConnectError)")}


async def test_federation_summarises_every_enabled_member_in_order():
    async with answering("200 OK", orjson.dumps(DECLARED)) as (team, _), answering("200 OK", b'{"tier": "two"}') as (server, _):
        config = GatewayConfig.model_validate({"mode": "federation", "backends": {
            "local": {"command": "x"},
            "team": {"url": team + "/mcp"},
            "off": {"url": team + "/mcp", "enabled": False},
            "plain": {"url": server + "/mcp"},
        }})
        found = await federation.members(config)
    assert list(found) == ["local", "team", "plain"]
    assert found["local"] == {"declared": False, "reason": "a stdio member: no declaration to fetch"}
    assert found["team"] == {"declared": True, "name": "hopline", "version": "9", "tier": 2, "modes": ["forward"], "layers": [1, 2]}
    assert found["plain"] == {"declared": False, "reason": "its declaration is not an agent-tool-proxy declaration"}
