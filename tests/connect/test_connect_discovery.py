"""Discovery against hostile or partial metadata (a stand-in server per case: httpx.MockTransport answering what
a misbehaving server would), the Client ID Metadata Document hopline serves, and what /config shows."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
import yaml

from hopline.config.auth import BackendAuth
from hopline.config.load import parse_config
from hopline.connect.app import ConnectApp
from hopline.connect.manager import Connections
from hopline.connect.oauth import OAuthFailure, discover
from hopline.connect.store import TokenStore

MCP = "https://mcp.example/mcp"
AS = "https://as.example"
PRM_URL = "https://mcp.example/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer error="invalid_token", resource_metadata="{PRM_URL}", scope="files:read"'


def server(docs: dict[str, Any], challenge: str | None = CHALLENGE) -> httpx.AsyncClient:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        seen.append(url)
        if url == MCP:
            return httpx.Response(401, headers={"www-authenticate": challenge} if challenge else {})
        if url in docs:
            return httpx.Response(200, json=docs[url])
        return httpx.Response(404)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    http.seen = seen  # type: ignore[attr-defined]
    return http


PRM = {"resource": MCP, "authorization_servers": [AS], "scopes_supported": ["files:read", "files:write"]}
META = {
    "issuer": AS,
    "authorization_endpoint": AS + "/authorize",
    "token_endpoint": AS + "/token",
    "code_challenge_methods_supported": ["S256"],
}


async def test_discovery_follows_the_challenge_and_takes_its_scope():
    found = await discover(server({"https://mcp.example/.well-known/oauth-protected-resource/mcp": PRM,
                                   AS + "/.well-known/oauth-authorization-server": META}), MCP)  # fmt: skip
    assert found.issuer == AS and found.resource == MCP and found.scopes == ["files:read"]


async def test_without_a_challenge_the_well_known_uris_and_openid_discovery_are_tried():
    http = server({"https://mcp.example/.well-known/oauth-protected-resource": PRM,
                   AS + "/.well-known/openid-configuration": META}, challenge="Bearer")  # fmt: skip
    found = await discover(http, MCP)
    assert found.scopes == ["files:read", "files:write"]  # scopes_supported, without a scope in the challenge
    assert "https://mcp.example/.well-known/oauth-protected-resource/mcp" in http.seen  # path-suffixed first


@pytest.mark.parametrize(
    "prm, meta, said",
    [
        (PRM, {**META, "issuer": "https://evil.example"}, "names another issuer (mix-up refused)"),
        ({**PRM, "resource": "https://other.example/mcp"}, META, "names another resource"),
        (PRM, {**META, "code_challenge_methods_supported": ["plain"]}, "does not support PKCE S256"),
        (PRM, {**META, "token_endpoint": "http://as.example/token"}, "token_endpoint is not an https URL"),
        ({**PRM, "authorization_servers": []}, META, "names no authorization server"),
    ],
)
async def test_hostile_metadata_is_refused(prm, meta, said):
    http = server({"https://mcp.example/.well-known/oauth-protected-resource/mcp": prm,
                   AS + "/.well-known/oauth-authorization-server": meta})  # fmt: skip
    with pytest.raises(OAuthFailure, match=said.replace("(", r"\(").replace(")", r"\)")):
        await discover(http, MCP)


async def test_an_authorization_server_that_never_answers_is_a_clear_failure():
    def hang(request: httpx.Request) -> httpx.Response:
        if str(request.url) == MCP:
            return httpx.Response(401, headers={"www-authenticate": CHALLENGE})
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(OAuthFailure, match=r"cannot be fetched \(ReadTimeout\)"):
        await discover(httpx.AsyncClient(transport=httpx.MockTransport(hang)), MCP)


async def test_hopline_serves_a_client_id_metadata_document_whose_url_is_the_client_id():
    spec = BackendAuth(mode="user_oauth", client_metadata_document=True)
    conns = Connections({"up": (MCP, spec)}, public_url="https://gateway.test", secret=b"s" * 32,
                        store=TokenStore(":memory:", b"s" * 32))  # fmt: skip
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=ConnectApp(conns)), base_url="https://gateway.test"
    ) as c:
        r = await c.get("/connect/client/up.json")
        assert r.status_code == 200
        doc = r.json()
        assert doc["client_id"] == "https://gateway.test/connect/client/up.json"
        assert doc["redirect_uris"] == ["https://gateway.test/connect/callback"]
        assert doc["token_endpoint_auth_method"] == "none"
        assert (await c.get("/connect/client/other.json")).status_code == 404
    assert conns.backends["up"].client().client_id == doc["client_id"]


def test_the_config_page_shows_neither_the_connect_key_nor_the_client_secret():
    from hopline.observability.redact import redact

    key = base64.urlsafe_b64encode(b"q" * 32).decode()
    config = parse_config(yaml.safe_dump({
        "backends": {"up": {"url": MCP}},
        "auth": {
            "resource": "https://gateway.test/mcp",
            "issuers": [{"issuer": "https://idp.example", "jwks_url": "https://idp.example/jwks"}],
            "backends": {"up": {"mode": "user_oauth", "client_id": "h", "client_secret": "upstream-secret-4411"}},
            "connect": {"public_url": "https://gateway.test", "secret_key": key},
        },
    }))  # fmt: skip
    shown, _ = redact(config.model_dump(mode="json"))
    text = str(shown)
    assert key not in text and "upstream-secret-4411" not in text


async def test_a_consent_link_survives_a_discovery_that_failed():
    spec = BackendAuth(mode="user_oauth", client_id="h", client_auth="none")
    conns = Connections({"up": (MCP, spec)}, public_url="https://gateway.test", secret=b"s" * 32,
                        store=TokenStore(":memory:", b"s" * 32))  # fmt: skip
    from hopline.context import Principal

    url = conns.consent(Principal("alice", issuer="https://idp.example"), "up").data["elicitations"][0]["url"]
    down = True

    def answer(request: httpx.Request) -> httpx.Response:
        if down:
            raise httpx.ConnectError("refused", request=request)
        docs = {PRM_URL: PRM, AS + "/.well-known/oauth-authorization-server": META}
        if str(request.url) == MCP:
            return httpx.Response(401, headers={"www-authenticate": CHALLENGE})
        return httpx.Response(200, json=docs[str(request.url)]) if str(request.url) in docs else httpx.Response(404)

    conns._http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    app = httpx.ASGITransport(app=ConnectApp(conns))
    async with httpx.AsyncClient(transport=app, base_url="https://gateway.test") as c:
        r = await c.get(url)
        assert r.status_code == 400 and "cannot be reached (ConnectError)" in r.text
        down = False
        r = await c.get(url)  # the same link, once the server is back
        assert r.status_code == 302 and r.headers["location"].startswith(AS + "/authorize?")
        assert "code_challenge_method=S256" in r.headers["location"] and "resource=" in r.headers["location"]


async def test_offline_access_is_asked_where_the_authorization_server_offers_it():
    http = server({PRM_URL: PRM, AS + "/.well-known/oauth-authorization-server": {**META,
                   "scopes_supported": ["files:read", "offline_access"]}})  # fmt: skip
    spec = BackendAuth(mode="user_oauth", client_id="h", client_auth="none")
    store = TokenStore(":memory:", b"s" * 32)
    conns = Connections({"up": (MCP, spec)}, public_url="https://gateway.test", secret=b"s" * 32, store=store)
    backend = conns.backends["up"]
    await backend.discovered(http)
    assert backend.scopes() == ["files:read", "offline_access"]  # the challenge's scope, then offline_access
    backend.found.metadata["scopes_supported"] = ["files:read"]
    assert backend.scopes() == ["files:read"]
    backend.spec = BackendAuth(mode="user_oauth", client_id="h", client_auth="none", scopes=["a"])
    assert backend.scopes() == ["a"]  # configured scopes are taken as they are
