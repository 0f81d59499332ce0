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

from hopline.compose.gateway import Gateway
from hopline.compose.status import config_view, status
from hopline.config.schema import GatewayConfig
from hopline.observability.admin_page import render
from hopline.observability.recent import DURATIONS, Recent
from hopline.observability.redact import REDACTED, redact, scrub
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
}
STATUS_KEYS = {"name", "mode", "time", "ready", "backends", "sessions", "tool_modes", "requests", "declaration", "reload"}
BACKEND_KEYS = {"id", "enabled", "kind", "target", "state", "breaker", "sessions", "last_error", "tools", "tool_count"}


def gateway_config() -> dict:
    s = SECRETS
    return {
        "name": "admin-test",
        "routing": {"retry_after": 0.5},
        "backends": {
            "demo": {"command": DEMO_ARGS[0], "args": [*DEMO_ARGS[1:], "--token", s["arg"], f"--api-key={s['flag']}"], "env": {"DEMO_SECRET": s["env"]}},
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
            r = await http.get("/config")
            assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
            config = r.json()
            page = await http.get("/")
    assert config["backends"]["demo"]["env"] == {"DEMO_SECRET": REDACTED}
    assert config["backends"]["demo"]["args"] == [*DEMO_ARGS[1:], "--token", REDACTED, f"--api-key={REDACTED}"]
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
    assert len(r.requests) == r.requests.maxlen and r.recent_requests()[0] == {"at": 5.0, "backend": "b", "method": "tools/call", "tool": "t", "kind": "timeout", "code": -31002, "ms": 500.0, "subject": "alice"}
    assert r.backend("never") == {"calls": 0, "errors": 0, "p50_ms": None, "last_error": None, "last_ok": None}


async def test_status_reports_the_last_reload_and_config_follows_it():
    base = {"name": "gw", "backends": {"a": {"command": "true"}}, "observability": {"metrics": {"port": 0}}}
    gateway = Gateway(GatewayConfig.model_validate(base))
    try:
        assert status(gateway)["reload"] == {"count": 0}
        await gateway.reload(GatewayConfig.model_validate({**base, "backends": {"a": {"command": "true"}, "b": {"command": "true", "env": {"K": "reloaded-secret-value"}}}}))
        after = status(gateway)
        assert after["reload"]["count"] == 1 and after["reload"]["ok"] is True and after["reload"]["added"] == ["b"]
        assert [b["id"] for b in after["backends"]] == ["a", "b"] and config_view(gateway)["backends"]["b"]["env"] == {"K": REDACTED}
        assert "reloaded-secret-value" not in json.dumps(after) + json.dumps(config_view(gateway))
    finally:
        await gateway.aclose()


async def test_a_backend_whose_breaker_opened_shows_breaker_open_and_readiness_degraded():
    from hopline.layers.resilience.outcome import Outcome

    conf = {"name": "gw", "backends": {"a": {"command": "true"}, "b": {"command": "true"}}, "resilience": {"breaker": {"failures": 2}}, "observability": {"metrics": {"port": 0}}}
    gateway = Gateway(GatewayConfig.model_validate(conf))
    try:
        breaker = gateway.resilience.breakers.breaker("a")
        for _ in range(2):
            breaker.record(breaker.acquire(), Outcome.FAILED)
        s = status(gateway)
        assert states(s) == {"a": "breaker_open", "b": "idle"} and s["ready"] is False
        assert {b["id"]: b["breaker"] for b in s["backends"]} == {"a": "open", "b": "closed"}
    finally:
        await gateway.aclose()
