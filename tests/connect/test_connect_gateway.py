"""Per-user upstream accounts through ``hopline serve``: two users (front-door JWTs) each get the consent URL as
the MCP URL-elicitation-required error (-32042), consent in a browser through hopline's /connect pages, and their
retried calls reach the upstream server as themselves."""

from __future__ import annotations

import base64
import time
from typing import Any
from urllib.parse import urlencode

import jwt
import pytest
import yaml
from mcp import MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.conftest import PY, start
from tests.connect.conftest import CALLBACK, CLIENT_SECRET, PUBLIC
from tests.peers import client, text_of
from tests.signin.harness import browser, sign_in

pytestmark = pytest.mark.timeout(90)
JWT_SECRET = "front-door-hmac-secret-0123456789abcdef"
ISSUER = "https://idp.example"
KEY = base64.urlsafe_b64encode(b"c" * 32).decode()


def token(sub: str) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": sub, "aud": PUBLIC + "/mcp", "iat": now, "exp": now + 600}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


@pytest.fixture(scope="module")
def gateway(upstream, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("connect")
    conf = {
        "backends": {"up": {"url": upstream.url}},
        "listen": {"allowed_hosts": ["gateway.test"]},
        "auth": {
            "resource": PUBLIC + "/mcp",
            "issuers": [{"issuer": ISSUER, "keys": [{"alg": "HS256", "secret": "${JWT_SECRET}"}]}],
            "backends": {"up": {"mode": "user_oauth", "client_id": "hopline", "client_secret": "${UP_SECRET}"}},
            "connect": {"public_url": PUBLIC, "secret_key": "${CONNECT_KEY}", "store": str(tmp / "tokens.sqlite3")},
        },
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    env = {"JWT_SECRET": JWT_SECRET, "UP_SECRET": CLIENT_SECRET, "CONNECT_KEY": KEY}
    proc = start([PY, "-m", "hopline", "serve", "--port", "0", "--lazy", str(path)], env)
    try:
        url = proc.wait_line(r"at (http://\S+) \(Streamable HTTP\)").group(1)
        proc.url = url
        yield proc
    finally:
        proc.stop()


def session(gateway: Any, sub: str, mode: str = "legacy") -> tuple[Any, Any]:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token(sub)}"})
    return http, client(streamable_http_client(gateway.url, http_client=http), mode)


async def names(c: Any) -> list[str]:
    return sorted(t.name for t in (await c.list_tools()).tools)


async def test_each_user_consents_by_url_elicitation_and_then_calls_as_themselves(gateway):
    base = gateway.url.rsplit("/mcp", 1)[0]
    for sub, login in (("alice", "alice-upstream"), ("bob", "bob-upstream")):
        http, c = session(gateway, sub)
        async with http, c:
            assert await names(c) == ["up__connect"]
            with pytest.raises(MCPError) as caught:
                await c.call_tool("up__connect", {})
            assert caught.value.error.code == -32042
            (elicitation,) = caught.value.error.data["elicitations"]
            assert elicitation["mode"] == "url" and elicitation["url"].startswith(PUBLIC + "/connect/start?link=")
            async with browser(base) as b:  # the user opens the URL and consents upstream
                answer = await sign_in(b, elicitation["url"], login, CALLBACK)
                page = await b.get(CALLBACK + "?" + urlencode(answer))
                assert page.status_code == 200 and "connected" in page.text
            result = await c.call_tool("up__connect", {})  # the client's retry succeeds
            assert "is connected" in text_of(result)
        http, c = session(gateway, sub)  # and from then on the backend's own tools, as this user
        async with http, c:
            assert await names(c) == ["up__whoami"]
            assert text_of(await c.call_tool("up__whoami", {})) == login
    http, c = session(gateway, "alice")
    async with http, c:
        assert text_of(await c.call_tool("up__whoami", {})) == "alice-upstream"
    said = "".join(gateway.stderr)
    assert "connected their account" in said and "Bearer" not in said
