"""Through ``hopline serve`` with access tokens that live 20 s (under hopline's 30 s refresh margin, so every
call refreshes, rotating the refresh token each time): calls keep acting as their user, and one user's revoked
grant (RFC 7009 at the authorization server) turns only their next call into a fresh consent request."""

from __future__ import annotations

import base64

import httpx
import pytest
from mcp import MCPError

from hopline.connect.store import TokenStore, principal_id
from tests.connect.conftest import CLIENT_SECRET, ISSUER, KEY
from tests.connect.test_connect_gateway import consent_user, session
from tests.peers import text_of

pytestmark = pytest.mark.timeout(90)
TOKEN_TTL = 20


async def test_refresh_on_every_call_and_a_revoked_grant_affects_only_its_user(gateway, upstream):
    await consent_user(gateway, "alice", "alice-upstream")
    await consent_user(gateway, "bob", "bob-upstream")
    store = TokenStore(gateway.store, base64.urlsafe_b64decode(KEY))
    first = store.get(principal_id((ISSUER, "alice")), "up")["refresh_token"]
    http, c = session(gateway, "alice")
    async with http, c:
        assert text_of(await c.call_tool("up__whoami", {})) == "alice-upstream"
        assert text_of(await c.call_tool("up__whoami", {})) == "alice-upstream"
        now = TokenStore(gateway.store, base64.urlsafe_b64decode(KEY)).get(principal_id((ISSUER, "alice")), "up")
        assert now["refresh_token"] != first  # refreshed and rotated
        async with httpx.AsyncClient(trust_env=False) as as_http:
            r = await as_http.post(
                upstream.issuer + "/token/revocation",
                data={"token": now["refresh_token"], "token_type_hint": "refresh_token"},
                auth=("hopline", CLIENT_SECRET),
            )
            assert r.status_code == 200
        with pytest.raises(MCPError) as caught:
            await c.call_tool("up__whoami", {})
        assert caught.value.error.code == -32042
        assert caught.value.error.data["elicitations"][0]["url"].startswith("https://gateway.test/connect/start?")
    http, c = session(gateway, "bob")
    async with http, c:
        assert text_of(await c.call_tool("up__whoami", {})) == "bob-upstream"
    assert "refreshed a user's token for backend up" in "".join(gateway.stderr)
