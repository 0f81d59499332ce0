"""The official Python SDK's OAuth client signs in to hopline end to end and calls tools (auth.signin).

Real parts: oidc-provider (npm, pinned) as the identity provider, ``hopline serve`` with ``auth.signin`` and a
demo backend, the SDK's ``OAuthClientProvider`` (protected resource metadata, RFC 8414 discovery, RFC 7591
registration, PKCE, RFC 8707 resource, RFC 9207 iss check, token exchange). The browser part (the identity
provider's login and consent forms, hopline's consent page) is driven by an httpx client submitting the forms.
Two users sign in: each gets a principal of their own, and CEL policy filters each one's tools by the groups
and roles the identity provider gave them.
"""

from __future__ import annotations

import base64
import json

import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.peers import MODES, bounded, client, text_of
from tests.signin import harness as h

REDIRECT = "http://127.0.0.1:33418/callback"


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


def claims_of(token: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


async def signed_in_client(gateway: str, user: str, mode: str):
    """An SDK client of ``user`` (its OAuth provider signs in on the first 401), its storage and HTTP client."""
    storage = Memory()
    seen: dict[str, str] = {}
    browser = h.browser(gateway)

    async def redirect_handler(url: str) -> None:
        seen.update(await h.sign_in(browser, url, user, REDIRECT))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=seen["code"], state=seen.get("state"), iss=seen.get("iss"))

    provider = OAuthClientProvider(
        server_url=h.RESOURCE,
        client_metadata=OAuthClientMetadata(
            client_name=f"SDK test client of {user}",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http = httpx2.AsyncClient(transport=h.mapped(gateway, httpx2), auth=provider, timeout=httpx2.Timeout(30, read=60))
    return client(streamable_http_client(h.RESOURCE, http_client=http), mode), storage, http, browser


@pytest.mark.parametrize("mode", MODES)
async def test_two_users_sign_in_with_the_sdk_and_get_their_own_tools(gateway, mode):
    seen = {}
    for user in ("alice", "bob"):
        c, storage, http, browser = await signed_in_client(gateway, user, mode)
        try:
            async with c:
                names = sorted(t.name for t in (await bounded(c.list_tools())).tools)
                assert text_of(await bounded(c.call_tool("demo__echo", {"text": f"hi {user}"}))) == f"hi {user}"
        finally:
            await http.aclose()
            await browser.aclose()
        token = storage.tokens.access_token
        claims = claims_of(token)
        assert claims["iss"] == h.PUBLIC and claims["aud"] == h.RESOURCE and claims["sub"] == user
        assert claims["client_id"] == storage.client.client_id  # registered with RFC 7591 by the SDK
        assert storage.tokens.refresh_token
        seen[user] = (names, claims)
    alice, bob = seen["alice"], seen["bob"]
    assert alice[1]["groups"] == ["eng"] and alice[1]["roles"] == ["admin"] and alice[1]["email"] == "alice@example.com"
    assert bob[1]["groups"] == ["sales"] and bob[1]["email"] == "bob@example.com"
    assert alice[0] == ["demo__add", "demo__countdown", "demo__echo", "demo__whoami"]  # admin: everything
    assert bob[0] == ["demo__echo", "demo__whoami"]  # the two tools everyone gets
