"""Per-user upstream accounts through ``hopline serve``: two users (front-door JWTs) each get the consent URL as
the MCP URL-elicitation-required error (-32042), consent in a browser through hopline's /connect pages, and their
retried calls reach the upstream server as themselves."""

from __future__ import annotations

import base64
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import pytest
from mcp import MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from hopline.connect.store import TokenStore, principal_id
from tests.connect.conftest import CALLBACK, CLIENT_SECRET, ISSUER, JWT_SECRET, KEY, PUBLIC
from tests.peers import client, text_of
from tests.signin.harness import browser, sign_in

pytestmark = pytest.mark.timeout(90)


def token(sub: str) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": sub, "aud": PUBLIC + "/mcp", "iat": now, "exp": now + 600}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def session(gateway: Any, sub: str, mode: str = "legacy") -> tuple[Any, Any]:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token(sub)}"})
    return http, client(streamable_http_client(gateway.url, http_client=http), mode)


async def names(c: Any) -> list[str]:
    return sorted(t.name for t in (await c.list_tools()).tools)


async def consent_user(gateway: Any, sub: str, login: str, mode: str = "legacy") -> None:
    """``sub`` calls the backend, gets the consent URL (-32042), consents upstream as ``login``, retries."""
    base = gateway.url.rsplit("/mcp", 1)[0]
    http, c = session(gateway, sub, mode)
    async with http, c:
        assert await names(c) == ["up__hopline_connect"]
        with pytest.raises(MCPError) as caught:
            await c.call_tool("up__hopline_connect", {})
        assert caught.value.error.code == -32042
        (elicitation,) = caught.value.error.data["elicitations"]
        assert elicitation["mode"] == "url" and elicitation["url"].startswith(PUBLIC + "/connect/start?link=")
        async with browser(base) as b:  # the user opens the URL and consents upstream
            answer = await sign_in(b, elicitation["url"], login, CALLBACK)
            page = await b.get(CALLBACK + "?" + urlencode(answer))
            assert page.status_code == 200 and "connected" in page.text
        result = await c.call_tool("up__hopline_connect", {})  # the client's retry succeeds
        assert "is connected" in text_of(result)


async def test_each_user_consents_by_url_elicitation_and_then_calls_as_themselves(gateway):
    for sub, login in (("alice", "alice-upstream"), ("bob", "bob-upstream")):
        await consent_user(gateway, sub, login)
        http, c = session(gateway, sub)  # and from then on the backend's own tools, as this user
        async with http, c:
            assert await names(c) == ["up__whoami"]
            assert text_of(await c.call_tool("up__whoami", {})) == login
    http, c = session(gateway, "alice")
    async with http, c:
        assert text_of(await c.call_tool("up__whoami", {})) == "alice-upstream"
    said = "".join(gateway.stderr)
    assert "connected their account" in said and "Bearer" not in said
    # Operators see counts, never a token nor the keys.
    store = TokenStore(gateway.store, base64.urlsafe_b64decode(KEY))
    secrets = [
        store.get(principal_id((ISSUER, u)), "up")[k]
        for u in ("alice", "bob")
        for k in ("access_token", "refresh_token")
    ]
    async with httpx.AsyncClient(trust_env=False) as admin:
        status = (await admin.get(gateway.admin + "/status")).json()
        config = (await admin.get(gateway.admin + "/config")).text
    (up,) = [b for b in status["backends"] if b["id"] == "up"]
    assert up["connections"]["connected"] >= 2 and up["connections"]["pending"] == 0
    shown = str(status) + config + said
    assert not [s for s in secrets if s in shown] and KEY not in shown and CLIENT_SECRET not in shown


async def test_a_consent_link_opened_with_another_users_credentials_is_refused(gateway):
    http, c = session(gateway, "carol")
    async with http, c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool("up__hopline_connect", {})
    url = caught.value.error.data["elicitations"][0]["url"]
    async with browser(gateway.url.rsplit("/mcp", 1)[0]) as b:
        r = await b.get(url, headers={"authorization": f"Bearer {token('mallory')}"})
        assert r.status_code == 400 and "made for another user" in r.text
        r = await b.get(url, headers={"authorization": "Bearer not-a-token"})
        assert r.status_code == 400 and "not valid" in r.text
        r = await b.get(url, headers={"origin": "https://evil.example"})  # the front door's Origin guard
        assert r.status_code == 403
        r = await b.get(url)  # carol herself (no credentials: the signed link is the binding)
        assert r.status_code == 302 and r.headers["location"].startswith("http://127.0.0.1:")


async def test_a_modern_client_gets_the_consent_request_and_its_retry_succeeds(gateway):
    await consent_user(gateway, "dave", "dave-upstream", "2026-07-28")
    http, c = session(gateway, "dave", "2026-07-28")  # a later request, on a backend session opened since
    async with http, c:
        assert "is connected" in text_of(await c.call_tool("up__hopline_connect", {}))
