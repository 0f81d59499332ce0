"""The admin listener's status API and page source, over HTTP from a real ``hopline serve``:
``GET /status`` and ``GET /config`` (their JSON shapes; a backend that cannot start shows
``down`` with its error), ``GET /`` (HTML, escaped, under a strict CSP), the listener's
Host and Origin checks on them, and secrets put in the configuration never shown. The
redaction and the page renderer are also checked on their own."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import yaml
from mcp import MCPError

from hopline.modes import build
from hopline.compose.status import config_view, status
from hopline.config.schema import GatewayConfig
from hopline.observability.admin_page import render
from hopline.observability.recent import DURATIONS, SERIES, Recent
from hopline.observability.redact import REDACTED, redact, redact_args, scrub
from tests.conftest import PY
from tests.peers import bounded, client

DEMO = [PY, "-m", "hopline.demo"]
# the demo server with secret-bearing arguments it ignores (python -c leaves them in sys.argv)
DEMO_ARGS = [PY, "-c", "import runpy, sys; sys.argv = ['demo']; runpy.run_module('hopline.demo', run_name='__main__')"]
BROKEN = [PY, "-c", "raise SystemExit(3)"]  # a backend whose command exits at once
SECRETS = {
    "env": "env-secret-value-0001",
    "arg": "arg-secret-value-0002",
    "flag": "flag-secret-value-0003",
    "header": "header-secret-value-0004",
    "user": "userinfo-secret-0005",
    "query": "query-secret-value-0006",
    "bearer": "bearer-secret-value-0007",
    "auth": "auth-secret-value-0008",
    "envarg": "envarg-secret-value-0009",
    "apikey": "apikey-secret-value-0010",
}
# the mcp-remote pattern and its kin: credentials in a command's arguments
SECRET_ARGS = [
    "--header", f"Authorization: Bearer {SECRETS['bearer']}", "--auth", SECRETS["auth"],
    f"GITHUB_TOKEN={SECRETS['envarg']}", f"--header=X-Api-Key:{SECRETS['apikey']}", "--port", "8080",
]
SECRET_ARGS_SHOWN = [
    "--header", f"Authorization: {REDACTED}", "--auth", REDACTED, f"GITHUB_TOKEN={REDACTED}",
    f"--header=X-Api-Key:{REDACTED}", "--port", "8080",
]
STATUS_KEYS = {"name", "mode", "time", "ready", "backends", "sessions", "tool_modes", "requests", "declaration", "reload"}
BACKEND_KEYS = {"id", "enabled", "kind", "target", "state", "breaker", "sessions", "last_error", "tools", "tool_count"}


def gateway_config() -> dict:
    s = SECRETS
    return {
        "name": "admin-test",
        "routing": {"retry_after": 0.5},
        "backends": {
            "demo": {"command": DEMO_ARGS[0], "args": [*DEMO_ARGS[1:], "--token", s["arg"], f"--api-key={s['flag']}", *SECRET_ARGS], "env": {"DEMO_SECRET": s["env"]}},
            "broken": {"command": BROKEN[0], "args": BROKEN[1:]},
            "remote": {"url": f"http://admin:{s['user']}@127.0.0.1:9/mcp?token={s['query']}", "headers": {"Authorization": f"Bearer {s['header']}"}},
        },
    }


@pytest.fixture
def served(tmp_path, hopline_serve):
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(gateway_config()))
    gw = hopline_serve(str(path), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    return gw, admin


def states(s: dict) -> dict[str, str]:
    return {b["id"]: b["state"] for b in s["backends"]}


async def status_until(http: httpx.AsyncClient, check, timeout: float = 15.0) -> dict:
    """``/status`` once ``check`` holds of it (polled: the gateway tells no one), bounded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        s = (await http.get("/status")).json()
        if check(s):
            return s
        assert asyncio.get_running_loop().time() < deadline, f"/status never satisfied the check: {states(s)}"
        await asyncio.sleep(0.05)


def no_secret_in(text: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"the {name} secret is shown"


async def test_status_and_config_from_a_real_gateway(served):
    gw, admin = served
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
        first = (await http.get("/status")).json()
        assert STATUS_KEYS <= set(first) and first["name"] == "admin-test" and first["mode"] == "forward"
        assert sorted(b["id"] for b in first["backends"]) == ["broken", "demo", "remote"]
        assert all(BACKEND_KEYS <= set(b) for b in first["backends"])
        assert states(first) == {"demo": "idle", "broken": "idle", "remote": "idle"}  # nothing started yet
        assert {b["id"]: b for b in first["backends"]}["demo"]["children"]["max"] >= 1 and {b["id"]: b for b in first["backends"]}["demo"]["children"]["pids"] == []
        assert first["sessions"]["handshake"] == {"open": 0, "by_principal": {}}
        assert first["declaration"]["modes"] == ["forward"] and first["declaration"]["endpoints"]["mcp"] == gw.url
        assert first["reload"] == {"count": 0}

        async with client(gw.url, "legacy") as c:
            tools = {t.name for t in (await bounded(c.list_tools())).tools}
            assert "demo__echo" in tools
            assert (await bounded(c.call_tool("demo__echo", {"text": "hi"}))).content[0].text == "hi"
            seen = await status_until(http, lambda s: states(s).get("broken") == "down")
            by_id = {b["id"]: b for b in seen["backends"]}
            assert by_id["demo"]["state"] == "up" and by_id["demo"]["sessions"]["open"] >= 1
            assert {"demo__echo", "demo__add"} <= {t["name"] for t in by_id["demo"]["tools"]} and by_id["demo"]["tool_count"] == len(by_id["demo"]["tools"])
            assert by_id["demo"]["children"]["leased"] >= 1 and by_id["demo"]["children"]["pids"]
            assert by_id["demo"]["calls"]["calls"] >= 1 and by_id["demo"]["calls"]["p50_ms"] > 0
            assert by_id["broken"]["last_error"]["message"].startswith("backend broken unavailable")  # exited, or closed: whichever it saw first
            assert by_id["remote"]["state"] == "down" and by_id["remote"]["target"] == f"http://{REDACTED}@127.0.0.1:9/mcp?{REDACTED}"
            assert seen["sessions"]["handshake"]["open"] == 1 and seen["sessions"]["handshake"]["by_principal"] == {"anonymous": 1}
            call = next(r for r in seen["requests"] if r["method"] == "tools/call")
            assert call["backend"] == "demo" and call["tool"] == "echo" and call["kind"] == "ok" and call["ms"] > 0

            raw_status = (await http.get("/status")).text
            raw_status += (await http.get("/status/surface", params={"mode": "search"})).text  # tool descriptions included
            raw_status += (await http.post("/status/surface", json={"identity": "custom", "subject": "x", "mode": "code"})).text
            r = await http.get("/config")
            assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
            config = r.json()
            page = await http.get("/")
    assert config["backends"]["demo"]["env"] == {"DEMO_SECRET": REDACTED}
    assert config["backends"]["demo"]["args"] == [*DEMO_ARGS[1:], "--token", REDACTED, f"--api-key={REDACTED}", *SECRET_ARGS_SHOWN]
    assert config["backends"]["remote"]["headers"] == {"Authorization": REDACTED}
    assert config["backends"]["remote"]["url"] == f"http://{REDACTED}@127.0.0.1:9/mcp?{REDACTED}"
    assert config["listen"]["port"] == 0 and config["observability"]["metrics"]["port"] == 0
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'nonce-" in page.headers["content-security-policy"] and "default-src 'none'" in page.headers["content-security-policy"]
    assert 'data-backend="broken" data-state="down"' in page.text
    for text in (raw_status, json.dumps(config), page.text):
        no_secret_in(text)


@pytest.mark.parametrize("path", ["/", "/status", "/config"])
async def test_the_status_views_keep_the_admin_listeners_host_and_origin_checks(served, path):
    _gw, admin = served
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
        assert (await http.get(path)).status_code == 200
        assert (await http.get(path, headers={"host": "evil.example"})).status_code == 403
        assert (await http.get(path, headers={"origin": "http://evil.example"})).status_code == 403
        assert (await http.post(path)).status_code == 405


def test_every_kind_of_secret_is_redacted_from_the_configuration():
    hs = "h" * 40 + "-hmac-secret"
    conf = GatewayConfig.model_validate({
        "name": "gw",
        "backends": {"api": {"url": "https://api.example.com/mcp?key=q-secret-in-query"}, "cmd": {"command": "tool", "args": ["--password", "p4ssw0rd-in-args", "--port=8080"]}},
        "auth": {
            "resource": "https://gw.example.com/mcp",
            "issuers": [{"issuer": "https://issuer.example.com", "keys": [{"alg": "HS256", "secret": hs}]}],
            "api_keys": [{"name": "ci-bot", "key": "api-key-value-1234567"}],
            "backends": {"api": {"mode": "client_credentials", "token_endpoint": "https://login.example.com/token?tenant=tenant-secret-77",
                                 "client_id": "hopline", "client_secret": "client-secret-value-88"}},
        },
        "policy": {"rate_limits": {"store": "redis", "redis": {"url": "redis://:redis-password-99@127.0.0.1:6379/0"}, "limits": [{"requests": 5}]}},
        "observability": {"otel": {"endpoint": "http://127.0.0.1:4318", "headers": {"x-api-key": "otel-header-secret-11"}}},
    })
    shown, found = redact(conf.model_dump(mode="json"))
    text = json.dumps(shown)
    for secret in (hs, "q-secret-in-query", "p4ssw0rd-in-args", "api-key-value-1234567", "tenant-secret-77", "client-secret-value-88", "redis-password-99", "otel-header-secret-11"):
        assert secret not in text and secret in found
    assert shown["auth"]["api_keys"][0] == {"name": "ci-bot", "key": REDACTED, "scopes": []}  # the name is no secret
    assert shown["backends"]["cmd"]["args"] == ["--password", REDACTED, "--port=8080"]
    assert shown["policy"]["rate_limits"]["redis"]["url"] == f"redis://{REDACTED}@127.0.0.1:6379/0"
    assert shown["auth"]["backends"]["api"]["token_endpoint"] == f"https://login.example.com/token?{REDACTED}"
    assert shown["auth"]["backends"]["api"]["client_id"] == "hopline" and shown["auth"]["issuers"][0]["issuer"] == "https://issuer.example.com"
    # text beside the configuration (an error message quoting a secret) is scrubbed of what redaction found
    said = scrub("failed with client-secret-value-88 at https://u:pw-in-url@h.example/x?a=b", found)
    assert "client-secret-value-88" not in said and "pw-in-url" not in said and said.startswith("failed with <redacted> at https://<redacted>@h.example/x?")


@pytest.mark.parametrize("args,shown", [
    (["-y", "mcp-remote", "https://h/mcp", "--header", "Authorization: Bearer tok-0123456789"], ["-y", "mcp-remote", "https://h/mcp", "--header", f"Authorization: {REDACTED}"]),
    (["--header", "Authorization:${AUTH}", "-H", "Cookie: sid=cookie-0123456789"], ["--header", f"Authorization:{REDACTED}", "-H", f"Cookie: {REDACTED}"]),
    (["--header=X-Api-Key: key-0123456789"], [f"--header=X-Api-Key: {REDACTED}"]),
    (["--headers", '{"Authorization": "Bearer tok-0123456789"}'], ["--headers", REDACTED]),
    (["--auth", "user:pw-0123456789", "--no-auth", "--port", "8080"], ["--auth", REDACTED, "--no-auth", "--port", "8080"]),  # a flag after a switch stays
    (["--access-token", "a-0123456789", "--apiKey=b-0123456789", "--client-secret", "c-0123456789", "--pat", "d-0123456789"], ["--access-token", REDACTED, f"--apiKey={REDACTED}", "--client-secret", REDACTED, "--pat", REDACTED]),
    (["-e", "GITHUB_TOKEN=ghp-0123456789", "API_KEY=k-0123456789", "DB_PASSWORD=p-0123456789", "PATH=/usr/bin", "LOG=debug"], ["-e", f"GITHUB_TOKEN={REDACTED}", f"API_KEY={REDACTED}", f"DB_PASSWORD={REDACTED}", "PATH=/usr/bin", "LOG=debug"]),
    (["X-Auth-Token: t-0123456789", "Private-Token: g-0123456789", "Accept: text/plain", "localhost:8080"], [f"X-Auth-Token: {REDACTED}", f"Private-Token: {REDACTED}", "Accept: text/plain", "localhost:8080"]),
    (["Bearer tok-0123456789"], [f"Bearer {REDACTED}"]),
])
def test_credentials_in_a_commands_arguments_are_redacted(args, shown):
    out, found = redact({"backends": {"b": {"command": "npx", "args": args}}})
    assert out["backends"]["b"]["args"] == shown
    assert redact_args(args) == shown
    for secret in ("tok-0123456789", "cookie-0123456789", "key-0123456789", "pw-0123456789", "ghp-0123456789"):
        if any(secret in a for a in args):
            assert secret not in json.dumps(out) and scrub(f"error: {secret} refused", found) == f"error: {REDACTED} refused"


def odd_status() -> dict:
    """A /status document whose every free-text field is markup."""
    evil = "<script>alert(1)</script>"
    return {
        "name": "gw", "mode": "forward", "time": 0.0, "ready": False,
        "backends": [{"id": "odd", "enabled": True, "kind": "stdio", "target": "<img src=x onerror=alert(2)>", "state": "down", "breaker": None,
                      "sessions": {"open": 0, "eras": []}, "last_error": {"message": evil, "at": 0.0, "retry_in": 1.0},
                      "tools": [{"name": "odd__x_0123", "original": evil}], "tool_count": 1}],
        "sessions": {"handshake": {"open": 1, "by_principal": {"<b>bold</b>": 1}}, "modern": {"stateless": True, "note": "n"}, "shared_backend_sessions": []},
        "tool_modes": {"main": "standard", "endpoints": {}},
        "requests": [{"at": 0.0, "backend": "odd", "method": "tools/call", "tool": evil, "kind": "error", "code": -32000, "ms": 1.0, "subject": "\"quoted\""}],
        "declaration": {"note": evil}, "reload": {"count": 1, "at": 0.0, "ok": False, "error": evil},
    }


def test_the_page_escapes_everything_it_shows():
    page = render(odd_status(), {"backends": {"odd": {"command": "</pre><script>alert(3)</script>"}}}, nonce="n0nce")
    assert page.count("<script") == 1 and '<script nonce="n0nce">' in page  # only the page's own script
    assert "<img" not in page and "<b>bold" not in page and "alert(3)</script>" not in page.split('<script nonce="n0nce">')[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page and "&quot;quoted&quot;" in page
    assert "odd__x_0123 (as &lt;script&gt;alert(1)&lt;/script&gt;)" in page


def test_recent_calls_are_bounded_and_give_a_median():
    r = Recent(clock=lambda: 5.0)
    for i in range(DURATIONS + 50):
        r.add("b", "tools/call", "t", "ok", None, 0.030 if i % 4 == 0 else 0.010, "alice")
    r.add("b", "tools/call", "t", "timeout", -31002, 0.5, "alice")
    b = r.backend("b")
    assert b["calls"] == DURATIONS + 51 and b["errors"] == 1 and b["p50_ms"] == 10.0
    assert b["last_error"] == {"at": 5.0, "method": "tools/call", "kind": "timeout", "code": -31002}
    assert len(r.requests) == r.requests.maxlen and r.recent_requests()[0] == {"at": 5.0, "backend": "b", "method": "tools/call", "tool": "t", "kind": "timeout", "code": -31002, "ms": 500.0, "subject": "alice", "decision": None}
    series = r.series("b")  # the charts' points: the last SERIES calls, oldest first
    assert len(series) == SERIES and series[-1] == [5.0, 500.0, False] and series[0] == [5.0, 10.0, True]
    assert r.series("never") == [] and r.backend("never") == {"calls": 0, "errors": 0, "p50_ms": None, "last_error": None, "last_ok": None}


async def test_status_reports_the_last_reload_and_config_follows_it():
    base = {"name": "gw", "backends": {"a": {"command": "true"}}, "observability": {"metrics": {"port": 0}}}
    gateway = build(GatewayConfig.model_validate(base))
    try:
        assert status(gateway)["reload"] == {"count": 0}
        await gateway.reload(GatewayConfig.model_validate({**base, "backends": {"a": {"command": "true"}, "b": {"command": "true", "env": {"K": "reloaded-secret-value"}}}}))
        after = status(gateway)
        assert after["reload"]["count"] == 1 and after["reload"]["ok"] is True and after["reload"]["added"] == ["b"]
        assert [b["id"] for b in after["backends"]] == ["a", "b"] and config_view(gateway)["backends"]["b"]["env"] == {"K": REDACTED}
        assert "reloaded-secret-value" not in json.dumps(after) + json.dumps(config_view(gateway))
    finally:
        await gateway.aclose()


@pytest.mark.parametrize("required", [False, True])
async def test_a_backend_whose_breaker_opened_shows_breaker_open_and_unready_only_if_required(required):
    """README "Readiness": one open breaker leaves the replica ready (degraded) unless its backend is required."""
    from hopline.layers.resilience.outcome import Outcome

    conf = {"name": "gw", "backends": {"a": {"command": "true", "required": required}, "b": {"command": "true"}},
            "resilience": {"breaker": {"failures": 2}}, "observability": {"metrics": {"port": 0}}}
    gateway = build(GatewayConfig.model_validate(conf))
    try:
        breaker = gateway.resilience.breakers.breaker("a")
        for _ in range(2):
            breaker.record(breaker.acquire(), Outcome.FAILED)
        s = status(gateway)
        assert states(s) == {"a": "breaker_open", "b": "idle"}
        assert (s["ready"], s["not_ready"], s["degraded"]) == ((False, ["a"], ["a"]) if required else (True, [], ["a"]))
        assert gateway.observability.admin_app.ready() is s["ready"]  # /readyz follows the same rule
        assert {b["id"]: b["breaker"] for b in s["backends"]} == {"a": "open", "b": "closed"}
    finally:
        await gateway.aclose()


# -- the tool surface of an identity, policy decisions in recent requests, charts --------------------------------------

KEYS = {"alice": "alice-key-secret-value-0007", "bob": "bob-key-secret-value-00008"}
RULES = [
    {"name": "alice-sees-all", "expr": 'jwt.sub == "alice"'},
    {"name": "echo-for-everyone", "expr": 'mcp.tool.name == "echo"'},
]


def governed_config(audit: str) -> dict:
    """Two API keys, a CEL policy (alice: every tool, others: echo), a rate limit of one countdown per caller, an
    audit file, and a Search endpoint beside the main one."""
    return {
        "name": "governed",
        "routing": {"retry_after": 0.5},
        "auth": {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]},
        "backends": {"demo": {"command": DEMO[0], "args": DEMO[1:]}},
        "policy": {
            "rules": RULES,
            "rate_limits": {"limits": [{"name": "one-countdown", "requests": 1, "every": 3600, "tools": ["countdown"]}]},
            "audit": {"sink": audit},
        },
        "tools": {"endpoints": {"/mcp/search": {"mode": "search"}}},
    }


@pytest.fixture
def governed(tmp_path, hopline_serve):
    audit = tmp_path / "audit.jsonl"
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(governed_config(str(audit))))
    gw = hopline_serve(str(path), "--admin-port", "0")
    return gw, gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1), audit


def as_key(url: str, name: str):
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    http = create_mcp_http_client(headers={"x-api-key": KEYS[name]})
    return client(streamable_http_client(url, http_client=http), "legacy"), http


async def listed(url: str, name: str) -> list[dict]:
    c, http = as_key(url, name)
    async with http, c:
        return [t.model_dump(mode="json", exclude_none=True) for t in (await bounded(c.list_tools())).tools]


async def surface(http: httpx.AsyncClient, **params) -> dict:
    r = await http.get("/status/surface", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
    return r.json()


def names(s: dict) -> list[str]:
    return [t["name"] for t in s["tools"]]


async def test_the_surface_of_each_identity_is_what_the_gateway_lists_it(governed):
    gw, admin, _audit = governed
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
        before = await surface(http, identity="key:alice")
        assert before["tools"] == [] and before["not_listed"] == ["demo"]  # nothing started for a preview (--lazy)
        choices = before["choices"]
        assert [i["id"] for i in choices["identities"]] == ["anonymous", "key:alice", "key:bob", "custom"]
        assert choices["modes"] == ["configured", "standard", "search", "code", "/mcp/search"]

        alice = await listed(gw.url, "alice")
        bob = await listed(gw.url, "bob")
        assert [t["name"] for t in alice] == ["demo__echo", "demo__add", "demo__countdown", "demo__whoami"] and [t["name"] for t in bob] == ["demo__echo"]

        seen = await surface(http, identity="key:alice")
        assert names(seen) == [t["name"] for t in alice] and seen["hidden"] == [] and seen["not_listed"] == []
        assert all(t["backend"] == "demo" for t in seen["tools"]) and seen["identity"]["subject"] == "alice"
        assert {t["name"]: t["arguments"] for t in seen["tools"]}["demo__add"] == ["a", "b"]
        assert {t["name"]: t["description"] for t in seen["tools"]} == {t["name"]: t["description"] for t in alice}
        seen = await surface(http, identity="key:bob", mode="configured")
        assert names(seen) == ["demo__echo"] and seen["total"] == 1
        assert [(h["name"], h["backend"], h["original"]) for h in seen["hidden"]] == [("demo__add", "demo", "add"), ("demo__countdown", "demo", "countdown"), ("demo__whoami", "demo", "whoami")]
        # anonymous is refused before any list where auth is configured
        anon = await surface(http, identity="anonymous")
        assert anon["tools"] == [] and anon["refused"]["status"] == 401
        # a typed identity: the rules see its claims (sub is its subject)
        assert names(await surface(http, identity="custom", subject="alice")) == [t["name"] for t in alice]
        assert names(await surface(http, subject="carol", claims='{"groups": ["ops"]}')) == ["demo__echo"]

        # the Search endpoint as a real client of it gets it, and the same mode previewed for every backend
        c, client_http = as_key(gw.url + "/search", "bob")
        async with client_http, c:
            real = [t.model_dump(mode="json", exclude_none=True) for t in (await bounded(c.list_tools())).tools]
        for mode in ("/mcp/search", "search"):
            seen = await surface(http, identity="key:bob", mode=mode)
            assert names(seen) == [t["name"] for t in real] == ["get_tool", "invoke_tool"]
            assert all(t["mode"] == "search" for t in seen["tools"])
            shown = seen["tools"][0]["description"]
            assert shown.endswith("…") and real[0]["description"].startswith(shown[:-1])  # cut to 300 characters
            assert "Available tools: [demo__echo]" in real[0]["description"] and seen["tools"][0]["reaches"] == ["demo__echo"]
        alice_search = await surface(http, identity="key:alice", mode="search")
        assert alice_search["tools"][0]["reaches"] == [t["name"] for t in alice]
        code = await surface(http, identity="key:bob", mode="code")
        assert names(code) == ["run_code"] and code["tools"][0]["mode"] == "code" and code["tools"][0]["reaches"] == ["demo__echo"]
        standard = await surface(http, identity="key:bob", mode="standard")
        assert names(standard) == ["demo__echo"]

        # POST takes the same fields as JSON
        r = await http.post("/status/surface", json={"identity": "custom", "subject": "alice", "mode": "standard"})
        assert r.status_code == 200 and names(r.json()) == [t["name"] for t in alice]

        c, client_http = as_key(gw.url, "bob")
        async with client_http, c:  # a connected client's identity is offered too, its claims unshown
            await bounded(c.list_tools())
            offered = await surface(http)
            assert {"id": "session:bob", "source": "connected"} in offered["choices"]["identities"]
            assert offered["identity"]["id"] == "anonymous"  # the default
            seen = await surface(http, identity="session:bob")
            assert names(seen) == ["demo__echo"] and seen["identity"] == {"id": "session:bob", "source": "connected", "subject": "bob", "claim_names": ["sub"]}
        raw = (await http.get("/status/surface", params={"identity": "key:alice"})).text + (await http.get("/status")).text
        raw += (await http.get("/config")).text + (await http.get("/")).text
    for key in KEYS.values():
        assert key not in raw


async def test_bad_input_to_the_surface_view_gets_a_clear_4xx_json_error(governed):
    _gw, admin, _audit = governed
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
        async def error(r: httpx.Response, status: int, words: str) -> None:
            assert r.status_code == status, r.text
            assert r.headers["content-type"] == "application/json"
            body = r.json()
            assert body["error"]["status"] == status and words in body["error"]["message"], body

        await error(await http.get("/status/surface", params={"mode": "turbo"}), 400, "unknown mode 'turbo'; one of: configured, standard, search, code, /mcp/search")
        await error(await http.get("/status/surface", params={"identity": "key:mallory"}), 400, "no API key named 'mallory'")
        await error(await http.get("/status/surface", params={"identity": "session:nobody"}), 400, "no connected client")
        await error(await http.get("/status/surface", params={"identity": "root"}), 400, "identity must be anonymous, key:<name>, session:<subject> or custom")
        await error(await http.get("/status/surface", params={"subject": "x" * 300}), 400, "subject must be a string of at most 256")
        await error(await http.get("/status/surface", params={"subject": "x" * 7_000}), 413, "the query string is longer than 6144 bytes; POST a JSON body")
        assert (await http.get("/status/surface", params={"subject": "x" * 20_000})).status_code == 414  # the listener's own limit
        await error(await http.get("/status/surface", params={"subject": "a", "claims": "{not json"}), 400, "claims is not valid JSON")
        await error(await http.get("/status/surface", params={"subject": "a", "claims": "[1]"}), 400, "claims must be a JSON object")
        await error(await http.get("/status/surface", params={"subject": "a", "claims": '{"a":' * 9 + "1" + "}" * 9}), 400, "nested at most 8")
        await error(await http.get("/status/surface", params={"subject": "a", "claims": orjson_text({"k": "v" * 5000})}), 400, "at most 4096 bytes")
        await error(await http.get("/status/surface", params={"who": "alice"}), 400, "unknown field(s) who")
        await error(await http.get("/status/surface?mode=standard&mode=code"), 400, "'mode' given twice")
        post = lambda content, ctype="application/json": http.post("/status/surface", content=content, headers={"content-type": ctype})  # noqa: E731
        await error(await post(b'{"identity": "key:alice",'), 400, "malformed JSON")
        await error(await post(b'["key:alice"]'), 400, "the request must be a JSON object")
        await error(await post(b'{"subject": 7}'), 400, "subject must be a string")
        await error(await post(b'{"identity": "custom", "scopes": "a b", "claims": {"n": 1}, "mode": 3}'), 400, "unknown mode '3'")
        await error(await post(b"identity=key:alice", "application/x-www-form-urlencoded"), 415, "application/json")
        await error(await post(b'{"subject": "' + b"x" * 20_000 + b'"}'), 413, "the body is longer than 16384 bytes")
        await error(await http.put("/status/surface", json={}), 405, "GET or POST")


def orjson_text(value) -> str:
    return json.dumps(value)


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_the_surface_view_keeps_the_admin_listeners_host_and_origin_checks(governed, method):
    _gw, admin, _audit = governed
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
        ask = lambda **headers: http.request(method, "/status/surface", json={"identity": "key:alice"}, headers=headers)  # noqa: E731
        assert (await ask()).status_code == 200
        assert (await ask(origin=admin)).status_code == 200  # the page's own origin
        assert (await ask(host="evil.example")).status_code == 403
        assert (await ask(origin="http://evil.example")).status_code == 403
        assert (await ask(origin="null")).status_code == 403


async def test_recent_requests_show_each_calls_policy_decision_as_the_audit_log_has_it(governed):
    gw, admin, audit = governed
    c_alice, h_alice = as_key(gw.url, "alice")
    c_bob, h_bob = as_key(gw.url, "bob")
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http, h_alice, c_alice, h_bob, c_bob:
        await bounded(c_alice.list_tools())
        await bounded(c_bob.list_tools())
        assert not (await bounded(c_alice.call_tool("demo__add", {"a": 2, "b": 3}))).is_error
        with pytest.raises(MCPError) as refused:  # hidden from bob: refused as unknown
            await bounded(c_bob.call_tool("demo__add", {"a": 2, "b": 3}))
        assert refused.value.error.code == -32602 and "Unknown tool" in refused.value.error.message
        assert not (await bounded(c_alice.call_tool("demo__countdown", {"n": 1}))).is_error
        with pytest.raises(MCPError) as limited:  # the second is over the rate limit
            await bounded(c_alice.call_tool("demo__countdown", {"n": 1}))
        assert "rate" in limited.value.error.message.lower()
        for i in range(6):
            await bounded(c_bob.call_tool("demo__echo", {"text": f"call {i}"}))

        seen = await status_until(http, lambda s: sum(r["method"] == "tools/call" for r in s["requests"]) >= 10)
    calls = [r for r in reversed(seen["requests"]) if r["method"] == "tools/call"]  # oldest first
    shown = [(r["subject"], r["tool"], r["kind"], r["decision"]) for r in calls]
    assert shown[0] == ("alice", "add", "ok", {"decision": "allow"})
    assert shown[1] == ("bob", "add", "denied", {"decision": "deny", "by": "visibility", "point": "pre_route", "reason": "not visible to the caller"})
    assert shown[2] == ("alice", "countdown", "ok", {"decision": "allow"})
    assert shown[3][:2] == ("alice", "countdown") and shown[3][3] == {"decision": "deny", "by": "rate_limit", "point": "post_route", "reason": "over limit one-countdown"}
    assert [s[3]["decision"] for s in shown[4:]] == ["allow"] * 6
    # exactly the audit log's call records, in order
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    written = [(r["principal"], r["target"], r["decision"], r.get("by"), r.get("reason")) for r in records if r["event"] == "call" and r["method"] == "tools/call"]
    assert written == [(s[0], s[1], s[3]["decision"], s[3].get("by"), s[3].get("reason")) for s in shown]

    demo = {b["id"]: b for b in seen["backends"]}["demo"]
    series = demo["series"]  # the charts' points: one per call that reached the call layers
    assert len(series) == demo["calls"]["calls"] == 9 and all(isinstance(ms, float) and ms >= 0 for _at, ms, _ok in series)
    assert [ok for _at, _ms, ok in series] == [True, True, False, *[True] * 6]
    assert [at for at, _ms, _ok in series] == sorted(at for at, _ms, _ok in series)


def test_the_charts_draw_one_point_per_call_and_one_bar_per_five_calls():
    from hopline.observability import charts

    series = [[float(i), float(i % 3), i not in (1, 7)] for i in range(12)]  # calls 1 and 7 failed
    svg = charts.latency(series, "<b>")
    assert svg.count("<circle") == 12 and svg.count('class="point failed"') == 2 and svg.count("<polyline") == 1
    assert 'data-points="12"' in svg and "&lt;b&gt;" in svg and "<b>" not in svg
    bars = charts.error_rate(series, "b")
    assert bars.count('class="bar"') == 3 and bars.count('class="failed"') == 2
    assert [r.split('"')[0] for r in bars.split('data-rate="')[1:]] == ["0.20", "0.20", "0.00"] and "17%" in bars
    assert 'data-points="0"' in charts.latency([], "b") and "no calls" in charts.error_rate([], "b")


def test_the_page_shows_a_requests_decision_and_escapes_the_surface():
    s = odd_status()
    s["requests"][0]["decision"] = {"decision": "deny", "by": "<i>x</i>", "point": "post_route", "reason": "over limit <b>", "shadow_by": ["watch"]}
    evil = "<script>alert(4)</script>"
    surface = {
        "identity": {"id": "custom", "subject": evil}, "mode": {"name": "standard"}, "total": 1, "hidden_total": 1, "not_listed": [], "refused": None, "list_error": None,
        "tools": [{"name": evil, "backend": "odd", "arguments": [evil], "description": evil}], "hidden": [{"name": evil, "backend": "odd", "original": "x"}],
        "choices": {"identities": [{"id": "anonymous"}, {"id": f'custom"{evil}'}], "modes": ["configured", "standard"]},
    }
    page = render(s, None, nonce="n0nce", surface=surface)
    assert page.count("<script") == 1 and "alert(4)</script>" not in page.split('<script nonce="n0nce">')[0]
    assert 'data-decision="deny"' in page and "deny · &lt;i&gt;x&lt;/i&gt; @post_route: over limit &lt;b&gt; · audit-mode: watch" in page
    assert "1 tool, 1 hidden by policy" in page and '<option value="standard" selected>' in page


def test_the_audit_tap_feeds_recent_requests_with_or_without_an_audit_sink(tmp_path):
    from hopline.compose import policy
    from hopline.context import Principal
    from hopline.jsonrpc import InvalidParams
    from hopline.pipeline import Call

    base = {"name": "gw", "backends": {"a": {"command": "true"}}, "policy": {"rules": ['mcp.tool.name == "echo"']}}
    sink = tmp_path / "audit.jsonl"
    for conf in (base, {**base, "policy": {**base["policy"], "audit": {"sink": str(sink)}}}):
        recent = Recent(clock=lambda: 7.0)
        _surface, calls = policy.build(GatewayConfig.model_validate(conf), tap=recent.audit)
        calls[0].refused(Call("tools/call", "a", {}, Principal("mallory"), target="rm", exposed="a__rm"), InvalidParams("Unknown tool: 'a__rm'"))
        assert recent.recent_requests() == [{"at": 7.0, "backend": "a", "method": "tools/call", "tool": "rm", "kind": "denied", "code": -32602, "ms": 0.0, "subject": "mallory",
                                             "decision": {"decision": "deny", "by": "visibility", "point": "pre_route", "reason": "not visible to the caller"}}]
    assert json.loads(sink.read_text())["decision"] == "deny"  # the sink still gets its record
    assert policy.build(GatewayConfig.model_validate({"name": "gw", "backends": {"a": {"command": "true"}}}), tap=recent.audit) == ([], [])  # no policy: nothing to decide


def test_the_replicas_keys_are_redacted_from_the_configuration():
    from hopline.observability.redact import REDACTED, redact

    shown, found = redact({"state": {"session_key": "k" * 43, "previous_session_keys": ["o" * 43], "redis_url": "redis://:pw-123456789@r:6379/0"}})
    assert shown["state"]["session_key"] == REDACTED and shown["state"]["previous_session_keys"] == REDACTED
    assert shown["state"]["redis_url"] == f"redis://{REDACTED}@r:6379/0"
    assert {"k" * 43, "o" * 43} <= found


async def test_callers_held_back_by_their_own_failed_start_are_shown_without_their_secrets(tmp_path, hopline_serve):
    # A backend whose credentials are per caller (RFC 8693 exchange at a token endpoint that does
    # not answer): each caller's failed start holds back that caller only, under its own key.
    # /status counts them on the backend, with the last error, and shows no key or secret.
    conf = {
        "name": "per-caller",
        "routing": {"retry_after": 30},
        "auth": {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]},
        "backends": {"demo": {"command": DEMO[0], "args": DEMO[1:]}, "web": {"url": "http://127.0.0.1:9/mcp", "stateless": True}},
    }  # stateless: one shared backend session per caller (the sharing layer's starts)
    conf["auth"]["backends"] = {
        "web": {"mode": "exchange", "token_endpoint": "http://127.0.0.1:9/token", "client_id": "hopline", "client_secret": "xchg-secret-value-0009"}
    }  # fmt: skip
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    async with httpx.AsyncClient(base_url=admin, timeout=10) as http:
        before = {b["id"]: b for b in (await http.get("/status")).json()["backends"]}
        assert "caller_failures" not in before["web"]  # nobody has tried yet
        for n, who in enumerate(("alice", "bob"), 1):
            assert {t["name"] for t in await listed(gw.url, who)} >= {"demo__echo"}  # served without web
            s = await status_until(http, lambda s: next(b for b in s["backends"] if b["id"] == "web").get("caller_failures", {}).get("callers") == n)
            web = next(b for b in s["backends"] if b["id"] == "web")
            held = web["caller_failures"]
            assert held["last_error"]["message"] and 0 < held["last_error"]["retry_in"] <= 30
            assert held["last_error"]["at"] == pytest.approx(s["time"], abs=30)
        page = (await http.get("/")).text
    text = json.dumps(s) + page
    assert "2 caller(s) held back" in page
    for secret in [*KEYS.values(), "xchg-secret-value-0009"]:
        assert secret not in text
