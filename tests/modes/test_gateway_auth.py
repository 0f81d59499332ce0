"""Authentication at the gateway's HTTP front, end to end (test-battery AUTH-01…AUTH-11, 16, 17).

``hopline serve`` with ``auth`` configured, a local authorization server (JWKS,
tests/servers/oauth_server.py) and a real SDK backend that records every request it
receives (tests/servers/recorder_server.py). Refused requests must leave the backend's
record empty; accepted ones must never carry the client's token to it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import subprocess

import httpx
import orjson
import pytest
import yaml
from mcp import StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.conftest import PY
from tests.peers import MODES, bounded, client, stop, text_of
from tests.servers import oauth_server, recorder_server
from tests.servers.oauth_server import ISSUER, RESOURCE, SigningKeys

METADATA = "https://gateway.test/.well-known/oauth-protected-resource/mcp"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def keys() -> SigningKeys:
    return SigningKeys()


@pytest.fixture
def world(tmp_path, keys, hopline_serve):
    """(gateway, recorder file, authorization server base URL)."""
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(keys.jwks()))
    record = tmp_path / "backend.jsonl"
    auth_proc, auth_base = oauth_server.start(jwks)
    backend_proc, backend_url = recorder_server.start(record)
    conf = {
        "backends": {"rec": {"url": backend_url, "transport": "streamable-http"}},
        "auth": {
            "resource": RESOURCE,
            "issuers": [{"issuer": ISSUER, "jwks_url": auth_base + "/jwks", "jwks_min_interval": 30}],
            "required_scopes": ["mcp"],
            "leeway": 5,
        },
        "tools": {"endpoints": {"/mcp/search": "search"}},  # one more endpoint: guarded the same way
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    try:
        yield hopline_serve(str(path)), record, auth_base
    finally:
        stop(backend_proc)
        stop(auth_proc)


def with_token(url: str, token: str, mode: str):
    """The official SDK client sending ``Authorization: Bearer`` on every request, and its HTTP client."""
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return client(streamable_http_client(url, http_client=http), mode), http


def seen_by_backend(record) -> str:
    return record.read_text() if record.exists() else ""


def exchanges(record) -> list[dict]:
    """What the backend received, leaving out the GET stream its client opens on its own."""
    return [r for r in recorder_server.recorded(record) if r["method"] != "GET"]


# -- AUTH-09 and the happy path, both eras ----------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_a_valid_token_works_end_to_end_and_never_reaches_the_backend(world, keys, mode):
    gw, record, _ = world
    token = keys.mint(sub="alice")
    c, http = with_token(gw.url, token, mode)
    try:
        async with c:
            names = {t.name for t in (await bounded(c.list_tools())).tools}
            assert {"rec__echo", "rec__meta"} <= names
            assert text_of(await bounded(c.call_tool("rec__echo", {"text": "hi"}))) == "hi"
            meta = json.loads(text_of(await bounded(c.call_tool("rec__meta", {}))))
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    finally:
        await http.aclose()
    raw = seen_by_backend(record)
    assert raw.count('"path": "/mcp"') >= 2  # the backend did serve these calls
    for part in token.split("."):
        assert part not in raw  # not in headers, bodies or _meta
    assert token not in json.dumps(meta)
    assert all(k.lower() != "authorization" for line in raw.splitlines() for k, _ in json.loads(line)["headers"])


async def test_protected_resource_metadata_is_served(world):
    gw, _, _ = world
    async with httpx.AsyncClient(timeout=20) as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            r = await http.get(gw.base + path)
            assert r.status_code == 200, path
            doc = r.json()
            assert doc["resource"] == RESOURCE and doc["authorization_servers"] == [ISSUER] and doc["bearer_methods_supported"] == ["header"]
        assert (await http.post(gw.base + "/.well-known/oauth-protected-resource/mcp")).status_code == 404


async def test_another_endpoint_is_guarded_like_the_main_one(world, keys):
    gw, record, _ = world
    async with httpx.AsyncClient(timeout=20) as http:
        assert (await http.get(gw.base + "/.well-known/oauth-protected-resource/mcp/search")).json()["resource"] == RESOURCE
        refused = await http.post(gw.base + "/mcp/search", content=orjson.dumps(INIT), headers=HEADERS)
        assert refused.status_code == 401 and f'resource_metadata="{METADATA}"' in refused.headers["www-authenticate"]
    assert seen_by_backend(record) == ""
    c, http = with_token(gw.base + "/mcp/search", keys.mint(sub="alice"), "legacy")
    try:
        async with c:
            assert sorted(t.name for t in (await bounded(c.list_tools())).tools) == ["get_tool", "invoke_tool"]
            assert text_of(await bounded(c.call_tool("invoke_tool", {"name": "rec__echo", "arguments": {"text": "via search"}}))) == "via search"
    finally:
        await http.aclose()


# -- AUTH-01…08, 10, 16: every refusal, and nothing reaches the backend -------------------------
def bad_requests(keys: SigningKeys) -> dict[str, tuple[dict[str, str], str, int]]:
    """name → (extra headers, query string, expected status)."""
    pem = keys.public_pem().encode()

    def forged(header: dict, sign=None) -> str:
        h = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
        p = base64.urlsafe_b64encode(json.dumps(keys.claims()).encode()).rstrip(b"=").decode()
        sig = base64.urlsafe_b64encode(sign(f"{h}.{p}".encode())).rstrip(b"=").decode() if sign else ""
        return f"{h}.{p}.{sig}"

    def auth(token: str) -> dict[str, str]:
        return {"authorization": f"Bearer {token}"}

    valid = keys.mint()
    return {
        "missing token": ({}, "", 401),
        "empty bearer": ({"authorization": "Bearer"}, "", 401),
        "basic": ({"authorization": "Basic YWxpY2U6cHc="}, "", 401),
        "query token": ({}, f"access_token={valid}", 401),
        "query token beside a header": (auth(valid), f"access_token={valid}", 401),
        "cookie token": ({"cookie": f"access_token={valid}"}, "", 401),
        "alg none": (auth(forged({"alg": "none", "kid": "rsa-1"})), "", 401),
        "alg NoNe": (auth(forged({"alg": "NoNe", "kid": "rsa-1"})), "", 401),
        "HS256 with the RSA public key": (auth(forged({"alg": "HS256", "kid": "rsa-1"}, lambda d: hmac.new(pem, d, hashlib.sha256).digest())), "", 401),
        "wrong audience": (auth(keys.mint(aud="https://backend.test/mcp")), "", 401),
        "audience with trailing slash": (auth(keys.mint(aud=RESOURCE + "/")), "", 401),
        "no audience": (auth(keys.mint(aud=None)), "", 401),
        "wrong issuer": (auth(keys.mint(iss="https://evil.test")), "", 401),
        "issuer with trailing slash": (auth(keys.mint(iss=ISSUER + "/")), "", 401),
        "expired": (auth(keys.mint(exp=keys.claims()["iat"] - 60)), "", 401),
        "not yet valid": (auth(keys.mint(nbf=keys.claims()["iat"] + 3600)), "", 401),
        "no exp": (auth(keys.mint(exp=None)), "", 401),
        "malformed": (auth("abc.def"), "", 401),
        "not JSON": (auth("bm90.anNvbg.c2ln"), "", 401),
        "kid traversal": (auth(keys.mint(headers={"kid": "../../etc/passwd"})), "", 401),
        "10 KB kid": (auth(keys.mint(headers={"kid": "k" * 10240})), "", 401),
        "unknown kid": (auth(keys.mint(headers={"kid": "nobody"})), "", 401),
        "another signer": (auth(SigningKeys().mint()), "", 401),
        "ID-token typ": (auth(keys.mint(headers={"typ": "id_token+jwt"})), "", 401),
        "oversized": (auth(keys.mint(padding="x" * 1_000_000)), "", 431),
        "insufficient scope": (auth(keys.mint(scope="tools")), "", 403),
    }


async def test_every_bad_credential_is_refused_before_any_backend(world, keys):
    gw, record, auth_base = world
    cases = bad_requests(keys)
    modern = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    modern_body = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": MODERN_META}})
    async with httpx.AsyncClient(timeout=20) as http:
        for name, (extra, query, status) in cases.items():
            q = f"?{query}" if query else ""
            attempts = [
                await http.post(gw.url + q, content=orjson.dumps(INIT), headers={**HEADERS, **extra}),
                await http.post(gw.url + q, content=modern_body, headers={**modern, **extra}),
                await http.get(gw.url + q, headers={"accept": "text/event-stream", "mcp-session-id": "0" * 32, **extra}),
                await http.delete(gw.url + q, headers={"mcp-session-id": "0" * 32, **extra}),
                await http.post(gw.base + "/messages?session_id=" + "0" * 32 + (f"&{query}" if query else ""), content=orjson.dumps(INIT), headers={**HEADERS, **extra}),
            ]
            async with http.stream("GET", gw.base + "/sse" + q, headers={"accept": "text/event-stream", **extra}) as sse:
                await sse.aread()  # a refusal is a short answer, not a stream
                attempts.append(sse)
            for r in attempts:
                assert r.status_code == status, (name, r.request.method, r.request.url.path, r.status_code)
                if status != 431:
                    challenge = r.headers["www-authenticate"]
                    assert challenge.startswith("Bearer ") and f'resource_metadata="{METADATA}"' in challenge, name
                if status == 403:
                    assert 'error="insufficient_scope"' in challenge and 'scope="mcp"' in challenge
                if name == "missing token":
                    assert "error=" not in challenge  # RFC 6750 §3.1: no error code without credentials
                assert "Traceback" not in r.text
        assert seen_by_backend(record) == ""  # nothing reached the backend
        # The same gateway does reach the backend once a caller is allowed (so the check above can fail).
        r = await http.post(gw.url, content=orjson.dumps(INIT), headers={**HEADERS, "authorization": f"Bearer {keys.mint()}"})
        assert r.status_code == 200 and r.headers["mcp-session-id"]
        r = await http.post(gw.url, content=modern_body, headers={**modern, "authorization": f"Bearer {keys.mint()}"})
        assert r.status_code == 200 and "rec__echo" in r.text
    assert seen_by_backend(record) != ""
    async with httpx.AsyncClient() as http:
        stats = (await http.get(auth_base + "/stats")).json()
    assert stats["jwks"] == 1 and stats["other_jwks"] == 0
    # AUTH-17: the gateway's log names each refusal, and no credential.
    log = "".join(gw.stderr)
    assert "refused POST /mcp: 401" in log
    for extra, query, _ in cases.values():
        for value in [*extra.values(), query]:
            for part in value.replace("=", ".").replace(" ", ".").split("."):
                assert len(part) < 16 or part not in log


# -- AUTH-07: no fetch storm through the gateway --------------------------------------------------
async def test_a_flood_of_unknown_kids_does_not_flood_the_jwks(world, keys):
    gw, record, auth_base = world
    async with httpx.AsyncClient(timeout=30) as http:
        assert (await http.post(gw.url, content=orjson.dumps(INIT), headers={**HEADERS, "authorization": f"Bearer {keys.mint()}"})).status_code == 200

        async def one() -> int:
            token = keys.mint(headers={"kid": secrets.token_hex(12)})
            return (await http.post(gw.url, content=orjson.dumps(INIT), headers={**HEADERS, "authorization": f"Bearer {token}"})).status_code

        statuses = await bounded(asyncio.gather(*(one() for _ in range(200))), 60)
        stats = (await http.get(auth_base + "/stats")).json()
    assert set(statuses) == {401}
    assert stats["jwks"] == 1  # the first fetch only: every unknown kid within the interval is refused without one


# -- AUTH-11: a session id is not a credential -----------------------------------------------------
async def test_a_session_is_bound_to_the_principal_that_created_it(world, keys):
    gw, record, _ = world
    alice, bob = keys.mint(sub="alice"), keys.mint(sub="bob")
    as_alice = {**HEADERS, "authorization": f"Bearer {alice}"}
    listing = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    async with httpx.AsyncClient(timeout=20) as http:
        r = await http.post(gw.url, content=orjson.dumps(INIT), headers=as_alice)
        sid = r.headers["mcp-session-id"]
        await http.post(gw.url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers={**as_alice, "mcp-session-id": sid})
        before = exchanges(record)

        def in_session(token: str | None) -> dict[str, str]:
            return {**HEADERS, "mcp-session-id": sid, **({"authorization": f"Bearer {token}"} if token else {})}

        assert (await http.post(gw.url, content=listing, headers=in_session(None))).status_code == 401
        expired = keys.mint(sub="alice", exp=keys.claims()["iat"] - 60)
        assert (await http.post(gw.url, content=listing, headers=in_session(expired))).status_code == 401
        as_bob = await http.post(gw.url, content=listing, headers=in_session(bob))
        assert as_bob.status_code == 404 and as_bob.json()["error"]["message"] == "Session not found"
        unknown = await http.post(gw.url, content=listing, headers={**in_session(bob), "mcp-session-id": "f" * 32})
        assert unknown.status_code == 404 and unknown.content == as_bob.content  # indistinguishable: no oracle
        assert (await http.get(gw.url, headers={**in_session(bob), "accept": "text/event-stream"})).status_code == 404
        assert (await http.delete(gw.url, headers=in_session(bob))).status_code == 404
        assert exchanges(record) == before  # none of it reached the backend
        # Alice's session is intact, also with a renewed token for the same subject.
        ok = await http.post(gw.url, content=listing, headers=in_session(keys.mint(sub="alice", jti="renewed")))
        assert ok.status_code == 200 and "rec__echo" in ok.text
        assert (await http.delete(gw.url, headers=in_session(alice))).status_code == 200


async def test_a_legacy_sse_session_is_bound_to_its_principal(world, keys):
    gw, _, _ = world
    alice, bob = keys.mint(sub="alice"), keys.mint(sub="bob")
    async with httpx.AsyncClient(timeout=20) as http:
        async with http.stream("GET", gw.base + "/sse", headers={"accept": "text/event-stream", "authorization": f"Bearer {alice}"}) as stream:
            assert stream.status_code == 200
            endpoint = None
            lines = stream.aiter_lines()  # kept referenced: a dropped iterator closes the stream
            async for line in lines:
                if line.startswith("data: "):
                    endpoint = line[6:]
                    break
            assert endpoint and "session_id=" in endpoint
            post = lambda token: http.post(gw.base + endpoint, content=orjson.dumps(INIT), headers={**HEADERS, **({"authorization": f"Bearer {token}"} if token else {})})  # noqa: E731
            assert (await post(None)).status_code == 401
            assert (await post(bob)).status_code == 404
            assert (await post(alice)).status_code == 202


# -- stdio: the local user, no authentication ---------------------------------------------------------
async def test_the_stdio_client_needs_no_token(world, tmp_path):
    path = str(tmp_path / "gateway.yaml")  # the world's configuration, auth included
    async with client(StdioServerParameters(command=PY, args=["-m", "hopline", "serve", "--stdio", path]), "legacy") as c:
        assert text_of(await bounded(c.call_tool("rec__echo", {"text": "local"}))) == "local"


def test_auth_naming_an_unknown_backend_stops_the_gateway(tmp_path):
    conf = {"backends": {"web": {"url": "https://backend.test/mcp"}}, "auth": {"resource": RESOURCE, "issuers": [{"issuer": ISSUER, "jwks_url": "https://issuer.test/jwks"}], "backends": {"nobody": {"mode": "passthrough"}}}}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(conf))
    out = subprocess.run([PY, "-m", "hopline", "serve", str(path), "--port", "0"], capture_output=True, timeout=30)
    assert out.returncode == 1 and b"auth.backends.nobody: no backend has this id" in out.stderr
