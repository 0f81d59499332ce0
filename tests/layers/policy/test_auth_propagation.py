"""Token propagation (layers/policy/propagation.py) against a real local token endpoint,
and through ``RemoteTarget.auth`` to a real SDK backend that records what it receives."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from hopline.binding import Era
from hopline.config.auth import BackendAuth
from hopline.compose.connectors import RemoteBackends
from hopline.context import ANONYMOUS, Principal
from hopline.jsonrpc import request
from hopline.layers.policy.auth import LOCAL
from hopline.layers.policy.propagation import PropagationError, Propagator
from hopline.transports.targets import RemoteTarget
from tests.peers import bounded, stop
from tests.servers import oauth_server, recorder_server

SECRET = "gateway-client-secret"
BACKEND = "https://Backend.TEST:443/mcp/"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("oauth") / "jwks.json"
    path.write_text('{"keys": []}')
    proc, base = oauth_server.start(path, "--client-secret", SECRET, "--expires-in", "600")
    yield base
    stop(proc)


async def token_requests(base: str) -> list[dict]:
    async with httpx.AsyncClient() as http:
        return (await http.get(base + "/stats")).json()["token_requests"]


def caller(token: str | None = "client-token-abc", sub: str = "alice", exp: float = NOW + 3600) -> Principal:
    return Principal(sub, {"sub": sub, "exp": exp}, frozenset(), "https://issuer.test", token)


def propagator(settings: dict, clock: Clock | None = None, url: str = BACKEND) -> Propagator:
    specs = {b: BackendAuth.model_validate(s) for b, s in settings.items()}
    return Propagator(specs, {b: url for b in settings}, clock=clock or Clock())


def oauth(base: str, mode: str, **extra) -> dict:
    return {"mode": mode, "token_endpoint": base + "/token", "client_id": "hopline", "client_secret": SECRET, **extra}


async def test_inject_passthrough_and_none():
    p = propagator({"a": {"mode": "inject", "secret": "s-1"}, "b": {"mode": "inject", "secret": "k", "header": "X-Api-Key", "scheme": None}, "c": {"mode": "passthrough"}, "d": {"mode": "none"}})
    try:
        assert await p.headers_for("a", ANONYMOUS) == {"authorization": "Bearer s-1"}
        assert await p.headers_for("b", caller()) == {"x-api-key": "k"}
        assert await p.headers_for("c", caller()) == {"authorization": "Bearer client-token-abc"}
        assert await p.headers_for("d", caller()) == {} and await p.headers_for("unconfigured", caller()) == {}
        for who in (ANONYMOUS, LOCAL, caller(token=None), None):
            with pytest.raises(PropagationError) as info:
                await p.headers_for("c", who)
            assert info.value.data == {"backend": "c", "reason": "credentials"}
        assert [p.per_principal(b) for b in "abcd"] == [False, False, True, False]
        assert p.pattern() == "credential-injection+passthrough"
    finally:
        await p.aclose()


async def test_client_credentials_are_fetched_once_and_renewed_before_expiry(token_server):
    clock = Clock()
    p = propagator({"billing": oauth(token_server, "client_credentials", scope="read")}, clock)
    before = len(await token_requests(token_server))
    try:
        results = await bounded(asyncio.gather(*(p.headers_for("billing", caller(sub=f"u{n}")) for n in range(20))))
        assert len({r["authorization"] for r in results}) == 1 and results[0]["authorization"].startswith("Bearer cc-")
        sent = (await token_requests(token_server))[before:]
        assert len(sent) == 1  # twenty concurrent callers, one token request
        assert sent[0] == {"grant_type": "client_credentials", "resource": "https://backend.test/mcp", "scope": "read", "_basic": True}
        clock.now += 500
        assert await p.headers_for("billing", ANONYMOUS) == results[0]  # still cached (600 s, renewed 30 s early)
        clock.now += 80
        renewed = await p.headers_for("billing", ANONYMOUS)
        assert renewed != results[0] and len(await token_requests(token_server)) == before + 2
    finally:
        await p.aclose()


async def test_client_secret_post(token_server):
    p = propagator({"x": oauth(token_server, "client_credentials", client_auth="post", resource="https://Other.test/api/")})
    try:
        assert (await p.headers_for("x", None))["authorization"].startswith("Bearer cc-")
        sent = (await token_requests(token_server))[-1]
        assert sent["client_secret"] == SECRET and not sent["_basic"] and sent["resource"] == "https://other.test/api"
    finally:
        await p.aclose()


async def test_token_exchange_per_caller_with_the_backends_audience(token_server):
    clock = Clock()
    p = propagator({"reports": oauth(token_server, "exchange", audience="reports-api")}, clock)
    before = len(await token_requests(token_server))
    try:
        alice, bob = caller("alice-token", "alice"), caller("bob-token", "bob", exp=NOW + 100)
        a1 = await p.headers_for("reports", alice)
        assert a1["authorization"].startswith("Bearer xchg-") and await p.headers_for("reports", alice) == a1
        b1 = await p.headers_for("reports", bob)
        assert b1 != a1
        sent = (await token_requests(token_server))[before:]
        assert len(sent) == 2
        assert sent[0] == {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": "alice-token",
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "audience": "reports-api",
            "resource": "https://backend.test/mcp",
            "_basic": True,
        }
        clock.now += 95  # bob's own token expires at +100: his exchanged one must not outlive it
        assert await p.headers_for("reports", bob) != b1
        assert await p.headers_for("reports", alice) == a1
        assert p.per_principal("reports") and p.pattern() == "token-exchange"
        with pytest.raises(PropagationError):
            await p.headers_for("reports", Principal("bot", issuer="api-key"))  # an API key has no token to exchange
    finally:
        await p.aclose()


async def test_token_endpoint_failures_are_reported_without_secrets_and_not_hammered(token_server, caplog):
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    p = propagator({"x": oauth(token_server, "exchange")}, clock)
    try:
        with pytest.raises(PropagationError) as info:
            await p.headers_for("x", caller("bad-token"))
        assert "HTTP 400, invalid_grant" in info.value.message
        count = len(await token_requests(token_server))
        with pytest.raises(PropagationError):
            await p.headers_for("x", caller("bad-token"))
        assert len(await token_requests(token_server)) == count  # not asked again for a few seconds
        clock.now += 6
        with pytest.raises(PropagationError):
            await p.headers_for("x", caller("bad-token"))
        assert len(await token_requests(token_server)) == count + 1
        wrong = propagator({"y": {**oauth(token_server, "client_credentials"), "client_secret": "wrong-secret"}})
        with pytest.raises(PropagationError) as info:
            await wrong.headers_for("y", None)
        assert "invalid_client" in info.value.message
        await wrong.aclose()
        unreachable = propagator({"z": oauth("http://127.0.0.1:9", "client_credentials")})
        with pytest.raises(PropagationError) as info:
            await unreachable.headers_for("z", None)
        assert "unreachable" in info.value.message
        await unreachable.aclose()
    finally:
        await p.aclose()
    logged = "\n".join(r.getMessage() for r in caplog.records) + info.value.message
    assert "bad-token" not in logged and SECRET not in logged and "wrong-secret" not in logged


@pytest.fixture
def recorder(tmp_path):
    record = tmp_path / "seen.jsonl"
    proc, url = recorder_server.start(record, "--reject-first", "1")
    yield url, record
    stop(proc)


async def initialize(backends: RemoteBackends) -> dict:
    channel = await backends.open_session(Era.HANDSHAKE)
    try:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        await channel.send(request(1, "initialize", params))
        return (await bounded(channel.receive(), 15)).body
    finally:
        await channel.aclose()


async def test_credential_auth_renews_a_refused_credential_once(token_server, recorder):
    """The backend refuses the first credential (401): it is renewed once and the request succeeds."""
    url, record = recorder
    p = Propagator({"web": BackendAuth.model_validate(oauth(token_server, "client_credentials"))}, {"web": url})
    body = request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}).encode()
    try:
        async with httpx.AsyncClient(auth=p.auth_for("web")) as http:
            resp = await http.post(url, content=body, headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
        assert resp.status_code == 200 and "sdk-test-server" in resp.text
    finally:
        await p.aclose()
    creds = [dict(r["headers"]).get("authorization") for r in recorder_server.recorded(record)]
    assert len(creds) == 2 and all(c.startswith("Bearer cc-") for c in creds) and creds[0] != creds[1]


async def initialize_with_client_credentials(token_server: str, url: str, headers: dict[str, str]) -> RemoteBackends:
    """``initialize`` on a real backend through RemoteBackends with a client_credentials flow; the (closed) backends."""
    p = Propagator({"web": BackendAuth.model_validate(oauth(token_server, "client_credentials"))}, {"web": url})
    backends = RemoteBackends(RemoteTarget(url, "streamable-http", headers, auth=p.auth_for("web")))
    try:
        answer = await initialize(backends)
        assert answer["result"]["serverInfo"]["name"] == "sdk-test-server", answer
    finally:
        await backends.aclose()
        await p.aclose()
    return backends


async def test_remote_target_auth_carries_credentials_to_a_real_backend(token_server, tmp_path):
    record = tmp_path / "seen.jsonl"
    proc, url = recorder_server.start(record)
    try:
        await initialize_with_client_credentials(token_server, url, {"x-static": "kept"})
    finally:
        stop(proc)
    seen = recorder_server.recorded(record)
    creds = {dict(r["headers"]).get("authorization") for r in seen}
    assert len(creds) == 1 and creds.pop().startswith("Bearer cc-") and all(dict(r["headers"]).get("x-static") == "kept" for r in seen)


async def test_per_caller_credentials_reach_only_that_callers_backend_sessions(token_server, tmp_path):
    record = tmp_path / "seen.jsonl"
    proc, url = recorder_server.start(record)
    p = Propagator({"web": BackendAuth.model_validate(oauth(token_server, "exchange"))}, {"web": url})
    alice, bob = caller("alice-client-token", "alice"), caller("bob-client-token", "bob")
    per_caller = {who.subject: RemoteBackends(RemoteTarget(url, "streamable-http", auth=p.auth_for("web", who))) for who in (alice, bob)}
    try:
        for backends in per_caller.values():
            assert "result" in await initialize(backends)
    finally:
        for backends in per_caller.values():
            await backends.aclose()
        await p.aclose()
        stop(proc)
    raw = record.read_text()
    assert "alice-client-token" not in raw and "bob-client-token" not in raw  # exchanged, never passed through
    creds = {dict(json.loads(line)["headers"]).get("authorization") for line in raw.splitlines()}
    assert len(creds) == 2 and all(c.startswith("Bearer xchg-") for c in creds)  # one per caller, on every request


async def test_a_caller_without_credentials_gets_unavailable_not_a_crash(recorder):
    url, record = recorder
    p = propagator({"web": {"mode": "passthrough"}}, url=url)
    backends = RemoteBackends(RemoteTarget(url, "streamable-http", auth=p.auth_for("web", ANONYMOUS)))
    try:
        answer = await initialize(backends)
    finally:
        await backends.aclose()
        await p.aclose()
    assert answer["error"]["data"]["reason"] == "unreachable" and "no credentials" in answer["error"]["message"]
    assert recorder_server.recorded(record) == []


async def test_the_gateways_lean_upstream_client_renews_a_refused_credential_too(token_server, recorder):
    """RemoteBackends with a credential flow uses hopline's lean HTTP client (h1client), which runs the flow's second leg."""
    from hopline.transports.h1client import LeanClient

    url, record = recorder
    backends = await initialize_with_client_credentials(token_server, url, {})
    assert isinstance(backends._client, LeanClient)
    creds = [dict(r["headers"]).get("authorization") for r in recorder_server.recorded(record) if r["method"] == "POST"]
    assert creds[0] != creds[1] and all(c.startswith("Bearer cc-") for c in creds[:2])
