"""Per-user upstream accounts end to end with real parts: oidc-provider as the upstream authorization server,
an official-SDK MCP server accepting only its tokens, two users consenting through hopline's consent pages (the
"browser" is an httpx client that submits the forms it is shown, tests/signin/harness.py), each then calling the
upstream server as themselves. And the attacks: forged and replayed state, a link used by another user or in
another browser, an ``iss`` mix-up, a token endpoint answering garbage, a corrupt store."""

from __future__ import annotations

import asyncio
import base64
import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import pytest
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from hopline.config.auth import BackendAuth
from hopline.connect.app import ConnectApp
from hopline.connect.manager import ConsentRequired, Connections
from hopline.connect.store import StoreProblem, TokenStore, principal_id
from hopline.context import Principal
from hopline.layers.policy.propagation import Propagator
from tests.connect.conftest import CALLBACK, CLIENT_SECRET, PUBLIC
from tests.peers import client, text_of
from tests.signin.harness import sign_in

pytestmark = pytest.mark.timeout(60)
SECRET = b"s" * 32
ALICE = Principal("alice", issuer="https://idp.example")
BOB = Principal("bob", issuer="https://idp.example")


def spec(**kw: Any) -> BackendAuth:
    return BackendAuth(**{"mode": "user_oauth", "client_id": "hopline", "client_secret": CLIENT_SECRET, **kw})


def propagator(upstream: Any, store: TokenStore, **kw: Any) -> tuple[Propagator, Connections]:
    s = spec(**kw)
    conns = Connections({"up": (upstream.url, s)}, public_url=PUBLIC, secret=SECRET, store=store)
    return Propagator({"up": s}, {"up": upstream.url}, connections=conns), conns


def browser(app: ConnectApp) -> httpx.AsyncClient:
    """A browser whose requests for https://gateway.test reach the consent pages (in process)."""
    inner = httpx.ASGITransport(app=app)
    outer = httpx.AsyncHTTPTransport(trust_env=False)

    class Routed(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.host == "gateway.test":
                return await inner.handle_async_request(request)
            return await outer.handle_async_request(request)

    return httpx.AsyncClient(transport=Routed(), follow_redirects=False, timeout=20, trust_env=False)


async def consent_url(p: Propagator, who: Principal) -> str:
    with pytest.raises(ConsentRequired) as caught:
        await p.headers_for("up", who)
    err = caught.value
    assert err.code == -32042
    (elicitation,) = err.data["elicitations"]
    assert elicitation["mode"] == "url" and elicitation["elicitationId"] and elicitation["message"]
    assert elicitation["url"].startswith(PUBLIC + "/connect/start?link=")
    return elicitation["url"]


async def consent(http: httpx.AsyncClient, url: str, user: str) -> httpx.Response:
    """Follow a consent link as ``user`` up to hopline's callback, then load it."""
    answer = await sign_in(http, url, user, CALLBACK)
    return await http.get(CALLBACK + "?" + urlencode(answer))


async def whoami(upstream: Any, headers: dict[str, str]) -> str:
    http = create_mcp_http_client(headers=headers)
    async with http, client(streamable_http_client(upstream.url, http_client=http), "legacy") as c:
        return text_of(await c.call_tool("whoami", {}))


async def test_two_users_each_consent_and_each_call_carries_their_own_upstream_identity(upstream, tmp_path):
    store = TokenStore(str(tmp_path / "tokens.sqlite3"), SECRET)
    p, conns = propagator(upstream, store)
    app = ConnectApp(conns)
    for who, login in ((ALICE, "alice-upstream"), (BOB, "bob-upstream")):
        url = await consent_url(p, who)
        async with browser(app) as http:
            page = await consent(http, url, login)
        assert page.status_code == 200, page.text
        assert "connected" in page.text
    assert await whoami(upstream, await p.headers_for("up", ALICE)) == "alice-upstream"
    assert await whoami(upstream, await p.headers_for("up", BOB)) == "bob-upstream"
    assert conns.status() == {"connected": {"up": 2}, "pending": 0}  # counts, never a token
    # Each user's token reached only their own row; a restart (a new store on the same file) keeps them.
    store.close()
    again, _ = propagator(upstream, TokenStore(str(tmp_path / "tokens.sqlite3"), SECRET))
    assert await whoami(upstream, await again.headers_for("up", BOB)) == "bob-upstream"
    raw = (tmp_path / "tokens.sqlite3").read_bytes()
    token = (await p.headers_for("up", ALICE))["authorization"].split()[1]
    assert token.encode() not in raw and b"alice" not in raw  # sealed, the principal hashed


async def test_an_expired_token_is_refreshed_once_for_many_calls_and_the_refresh_token_rotates(upstream, tmp_path):
    store = TokenStore(str(tmp_path / "t.sqlite3"), SECRET)
    p, conns = propagator(upstream, store)
    url = await consent_url(p, ALICE)
    async with browser(ConnectApp(conns)) as http:
        assert (await consent(http, url, "alice-upstream")).status_code == 200
    who = principal_id(ALICE.key)
    first = store.get(who, "up")
    store.put(who, "up", {**first, "expires_at": 0.0})  # expired
    results = await asyncio.gather(*(p.headers_for("up", ALICE) for _ in range(50)))
    assert len({r["authorization"] for r in results}) == 1  # one refresh served all fifty
    now = store.get(who, "up")
    assert now["access_token"] != first["access_token"] and now["refresh_token"] != first["refresh_token"]
    assert await whoami(upstream, results[0]) == "alice-upstream"
    # The old refresh token was rotated away: a token set holding it cannot be refreshed → a new consent.
    store.put(who, "up", {**first, "expires_at": 0.0})
    await consent_url(p, ALICE)
    assert store.get(who, "up") is None


async def test_a_401_from_the_backend_refreshes_the_token(upstream, tmp_path):
    store = TokenStore(str(tmp_path / "t.sqlite3"), SECRET)
    p, conns = propagator(upstream, store)
    url = await consent_url(p, ALICE)
    async with browser(ConnectApp(conns)) as http:
        assert (await consent(http, url, "alice-upstream")).status_code == 200
    before = await p.headers_for("up", ALICE)
    p.invalidate("up", ALICE)
    after = await p.headers_for("up", ALICE)
    assert after != before and await whoami(upstream, after) == "alice-upstream"


@pytest.mark.parametrize("client_auth,client_id", [("post", "hopline-post"), ("none", "hopline-public")])
async def test_the_other_client_authentication_methods(upstream, tmp_path, client_auth, client_id):
    secret = CLIENT_SECRET if client_auth != "none" else None
    p, conns = propagator(
        upstream, TokenStore(":memory:", SECRET), client_id=client_id, client_auth=client_auth, client_secret=secret
    )
    url = await consent_url(p, ALICE)
    async with browser(ConnectApp(conns)) as http:
        assert (await consent(http, url, "alice-upstream")).status_code == 200
    assert await whoami(upstream, await p.headers_for("up", ALICE)) == "alice-upstream"


# -- attacks -------------------------------------------------------------------------------------------------
async def test_a_consent_link_is_single_use_signed_and_bound_to_its_user(upstream):
    p, conns = propagator(upstream, TokenStore(":memory:", SECRET))
    bob_says = None

    async def authenticate(raw: list) -> Any:
        return bob_says

    app = ConnectApp(conns, authenticate=authenticate)
    url = await consent_url(p, ALICE)
    async with browser(app) as http:
        bob_says = BOB  # Bob's client opens Alice's link with Bob's credentials: refused
        r = await http.get(url, headers={"authorization": "Bearer bob"})
        assert r.status_code == 400 and "another user" in r.text
        bob_says = None
        forged = url[:-3] + ("AAA" if not url.endswith("AAA") else "BBB")
        r = await http.get(forged)
        assert r.status_code == 400 and "not one hopline made" in r.text
        assert (await http.get(url)).status_code == 302
        r = await http.get(url)
        assert r.status_code == 400 and "used already" in r.text


async def test_forged_replayed_or_foreign_browser_state_is_refused(upstream):
    p, conns = propagator(upstream, TokenStore(":memory:", SECRET))
    app = ConnectApp(conns)
    url = await consent_url(p, ALICE)
    async with browser(app) as http:
        answer = await sign_in(http, url, "alice-upstream", CALLBACK)
        r = await http.get(CALLBACK + "?" + urlencode({**answer, "state": "forged"}))
        assert r.status_code == 400 and "unknown or used state" in r.text
        async with browser(app) as other:  # the same answer in another browser (no cookie)
            r = await other.get(CALLBACK + "?" + urlencode(answer))
            assert r.status_code == 400 and "another browser" in r.text
    url = await consent_url(p, ALICE)
    async with browser(app) as http:
        answer = await sign_in(http, url, "alice-upstream", CALLBACK)
        assert (await http.get(CALLBACK + "?" + urlencode(answer))).status_code == 200
        r = await http.get(CALLBACK + "?" + urlencode(answer))  # replayed
        assert r.status_code == 400 and "unknown or used state" in r.text


async def test_an_authorization_response_from_another_issuer_is_refused(upstream):
    p, conns = propagator(upstream, TokenStore(":memory:", SECRET))
    app = ConnectApp(conns)
    url = await consent_url(p, ALICE)
    async with browser(app) as http:
        answer = await sign_in(http, url, "alice-upstream", CALLBACK)
        assert answer["iss"] == upstream.issuer  # RFC 9207: oidc-provider says who answers
        r = await http.get(CALLBACK + "?" + urlencode({**answer, "iss": "https://evil.example"}))
        assert r.status_code == 400 and "mix-up" in r.text
    with pytest.raises(ConsentRequired):
        await p.headers_for("up", ALICE)


async def test_a_token_endpoint_answering_garbage_is_a_clear_refusal(upstream, tmp_path):
    p, conns = propagator(upstream, TokenStore(":memory:", SECRET))
    app = ConnectApp(conns)
    url = await consent_url(p, ALICE)
    async with browser(app) as http:
        answer = await sign_in(http, url, "alice-upstream", CALLBACK)
        found = conns.backends["up"].found
        found.metadata["token_endpoint"] = upstream.issuer + "/.well-known/openid-configuration"  # not a token answer
        r = await http.get(CALLBACK + "?" + urlencode(answer))
    assert r.status_code == 400 and "token endpoint" in r.text and "Traceback" not in r.text


def test_a_corrupt_store_file_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "tokens.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreProblem, match="cannot be opened as a SQLite database"):
        TokenStore(str(path), SECRET)


def test_a_store_sealed_under_another_key_is_refused_and_kept(tmp_path: Path):
    path = str(tmp_path / "tokens.sqlite3")
    TokenStore(path, SECRET).put("p", "up", {"access_token": "at-7f3e9", "expires_at": 1e12})
    with pytest.raises(StoreProblem, match="sealed under another secret_key") as caught:
        TokenStore(path, b"o" * 32)
    assert "at-7f3e9" not in str(caught.value)
    assert TokenStore(path, SECRET).get("p", "up")["access_token"] == "at-7f3e9"  # not lost


def test_a_row_that_does_not_open_is_no_token_a_warning_and_kept(tmp_path: Path, caplog):
    import sqlite3

    path = str(tmp_path / "tokens.sqlite3")
    TokenStore(path, SECRET).put("p", "up", {"access_token": "at-7f3e9", "expires_at": 1e12})
    db = sqlite3.connect(path)
    db.execute("UPDATE tokens SET backend = 'other'")  # a row moved onto another backend: its seal says no
    db.commit()
    db.close()
    with caplog.at_level(logging.WARNING, "hopline.connect"):
        assert TokenStore(path, SECRET).get("p", "other") is None
    assert "cannot be opened with this secret_key" in caplog.text and "at-7f3e9" not in caplog.text


def test_the_consent_link_names_no_token(upstream):
    _p, conns = propagator(upstream, TokenStore(":memory:", SECRET))
    err = conns.consent(ALICE, "up")
    link = parse_qs(urlsplit(err.data["elicitations"][0]["url"]).query)["link"][0]
    body = base64.urlsafe_b64decode(link.split(".")[0] + "==")
    assert b"alice" in body and b"token" not in body


def test_a_cached_token_costs_no_disk_io(tmp_path: Path):
    store = TokenStore(str(tmp_path / "t.sqlite3"), SECRET)
    store.put("p", "up", {"access_token": "at-1", "expires_at": 1e12})
    assert store.get("q", "up") is None  # an absent one is remembered too
    store._db.close()  # any disk access from here on raises
    assert store.get("p", "up")["access_token"] == "at-1" and store.get("q", "up") is None


async def test_the_upstream_server_accepts_only_its_own_authorization_servers_tokens(upstream):
    forged = jwt.encode({"iss": upstream.issuer, "sub": "mallory", "aud": upstream.url}, "x" * 32, algorithm="HS256")
    async with httpx.AsyncClient(trust_env=False) as http:
        r = await http.post(
            upstream.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"authorization": f"Bearer {forged}", "accept": "application/json, text/event-stream"},
        )
    assert r.status_code == 401 and "resource_metadata=" in r.headers["www-authenticate"]


async def test_an_unreachable_or_garbage_token_endpoint_keeps_the_token_and_says_so(upstream, tmp_path):
    from hopline.jsonrpc import UnavailableError
    from tests.peers import free_port

    store = TokenStore(str(tmp_path / "t.sqlite3"), SECRET)
    p, conns = propagator(upstream, store)
    url = await consent_url(p, ALICE)
    async with browser(ConnectApp(conns)) as http:
        assert (await consent(http, url, "alice-upstream")).status_code == 200
    who = principal_id(ALICE.key)
    store.put(who, "up", {**store.get(who, "up"), "expires_at": 0.0})
    meta = conns.backends["up"].found.metadata
    real = meta["token_endpoint"]
    for broken in (f"http://127.0.0.1:{free_port()}/token", upstream.issuer + "/.well-known/openid-configuration"):
        meta["token_endpoint"] = broken
        with pytest.raises(UnavailableError) as caught:
            await p.headers_for("up", ALICE)
        assert caught.value.code == -31001 and "cannot be refreshed now" in caught.value.message
        assert store.get(who, "up") is not None  # not lost
    meta["token_endpoint"] = real
    assert await whoami(upstream, await p.headers_for("up", ALICE)) == "alice-upstream"
