"""Transparent mode, awareness level 1 (draft §5.4): hopline on the network path, not
configured in the client. The official SDK client addresses the real backend (its Host
header names it, as after DNS interception) while its connection reaches hopline; hopline
forwards to the real address from its allow-list without reading bodies. A real SDK
backend records exactly what arrived."""

from __future__ import annotations

import httpx
import orjson
import pytest
import yaml
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from pydantic import ValidationError

from hopline.config.schema import GatewayConfig
from tests.peers import MODES, bounded, client, free_port, text_of
from tests.servers import recorder_server

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def write(tmp_path, transparent: dict) -> str:
    path = tmp_path / "transparent.yaml"
    path.write_text(yaml.safe_dump({"mode": "transparent", "transparent": transparent}))
    return str(path)


def origin(url: str) -> str:
    """host:port of an http URL (what a client puts in Host)."""
    return url.split("/")[2]


def intercepted(proxy_url: str, host: str, mode: str, **headers: str):
    """The SDK client addressing ``host`` while its connection goes to hopline (DNS interception)."""
    http = create_mcp_http_client(headers={"host": host, **headers})
    return client(streamable_http_client(proxy_url + "/mcp", http_client=http), mode), http


@pytest.mark.parametrize("mode", MODES)
async def test_the_client_reaches_its_backend_through_an_intermediary_it_does_not_know(tmp_path, hopline_serve, recorded, mode):
    url, record = recorded
    real = origin(url)
    gw = hopline_serve(write(tmp_path, {"destinations": {real: f"http://{real}"}}))
    c, http = intercepted(gw.url, real, mode, authorization="Bearer the-clients-own")
    try:
        async with c:
            if mode == "legacy":  # the backend's own handshake: no dual handshake
                assert c.server_info.name == "sdk-test-server"
            assert "echo" in {t.name for t in (await bounded(c.list_tools())).tools}  # names unchanged
            assert text_of(await bounded(c.call_tool("echo", {"text": "through"}))) == "through"
    finally:
        await http.aclose()
    seen = recorder_server.recorded(record)
    assert seen and all(dict(r["headers"])["host"] == real for r in seen)  # addressed as the client addressed it
    assert all(dict(r["headers"]).get("authorization") == "Bearer the-clients-own" for r in seen)  # passthrough
    bodies = [orjson.loads(r["body"]) for r in seen if r["body"]]
    assert not any("_meta" in (b.get("params") or {}) and "io.modelcontextprotocol/proxy-hops" in b["params"]["_meta"] for b in bodies)


async def test_bodies_are_forwarded_unread_byte_for_byte(tmp_path, hopline_serve, recorded):
    url, record = recorded
    real = origin(url)
    gw = hopline_serve(write(tmp_path, {"destination": "header", "destinations": {real: f"http://{real}"}}))
    odd = b'{"jsonrpc":"2.0","id":1,  "method":"initialize", "params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}},"x":"\\u00e9"}'
    async with httpx.AsyncClient(timeout=20) as http:
        answer = await http.post(gw.url + "/mcp", content=odd, headers={**HEADERS, "x-original-destination": real})
        garbage = await http.post(gw.url + "/mcp", content=b"{not json", headers={**HEADERS, "x-original-destination": real})
    assert answer.status_code == 200 and answer.headers.get("mcp-session-id")  # the backend's own session id
    assert garbage.status_code == 400  # the backend's parse error, not ours
    bodies = [r["body"].encode() for r in recorder_server.recorded(record)]
    assert odd in bodies and b"{not json" in bodies  # as sent: spacing and escapes kept
    assert not any(k == "x-original-destination" for r in recorder_server.recorded(record) for k, _ in r["headers"])


async def test_unknown_destinations_policy_and_limits_are_refused_before_any_backend(tmp_path, hopline_serve, recorded):
    url, record = recorded
    real = origin(url)
    rules = ['http.mcp_method != "tools/call" || http.headers["x-team"] == "ops"']
    gw = hopline_serve(write(tmp_path, {"destinations": {real: f"http://{real}"}, "rules": rules, "max_body": 2048, "unknown_method": "read_body"}))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    async with httpx.AsyncClient(timeout=20) as http:
        elsewhere = await http.post(gw.url + "/mcp", json=INIT, headers={**HEADERS, "host": "evil.example:80"})
        refused = await http.post(gw.url + "/mcp", json=call, headers={**HEADERS, "host": real, "mcp-method": "tools/call"})
        big = await http.post(gw.url + "/mcp", content=b"x" * 4096, headers={**HEADERS, "host": real})
        assert not recorder_server.recorded(record)  # none of those reached the backend
        allowed = await http.post(gw.url + "/mcp", json=INIT, headers={**HEADERS, "host": real})
        declared = (await http.get(gw.url + "/.well-known/agent-tool-proxy")).json()
    assert elsewhere.status_code == 421 and elsewhere.json()["error"]["code"] == -32600
    assert refused.status_code == 403 and refused.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "refused by the intermediary's policy"}}
    assert big.status_code == 413
    assert allowed.status_code == 200 and len(recorder_server.recorded(record)) == 1
    assert declared["modes"] == ["transparent"] and declared["transparent"]["awareness_level"] == 1 and declared["tier"] == 1
    assert declared["handshake"]["transparent"].startswith("level 1: single-handshake passthrough") and declared["token_propagation"] == "passthrough"
    assert declared["layers"] == [1, 5] and declared["tls"] == "plaintext"


async def test_a_destination_that_is_down_is_a_clear_error(tmp_path, hopline_serve):
    port = free_port()
    gw = hopline_serve(write(tmp_path, {"destinations": {f"127.0.0.1:{port}": f"http://127.0.0.1:{port}"}}))
    async with httpx.AsyncClient(timeout=20) as http:
        r = await http.post(gw.url + "/mcp", json=INIT, headers={**HEADERS, "host": f"127.0.0.1:{port}"})
    assert r.status_code == 502 and r.json()["error"] == {"code": -31001, "message": "destination unreachable (ConnectError)"}


@pytest.mark.parametrize(
    ("transparent", "message"),
    [
        ({"destinations": {"a:80": "ftp://x"}}, "must be a base URL"),
        ({"destinations": {"a:80": "http://x/mcp"}}, "must be a base URL"),
        ({"destinations": {}}, "at least 1 item"),
        ({"destinations": {"a:80": "http://x"}, "rules": ["jwt.sub == 'x'"]}, "rules see only `http`"),
        ({"destinations": {"a:80": "http://x"}, "rules": ["http.method =="]}, "not a valid CEL expression"),
        ({"destinations": {"a:80": "http://x"}, "tls": "terminated"}, "downgrades TLS"),
        ({"destinations": {"a:80": "http://x"}, "level": 3}, "level"),
    ],
)
def test_bad_transparent_settings_are_errors(transparent, message):
    with pytest.raises(ValidationError) as error:
        GatewayConfig.model_validate({"mode": "transparent", "transparent": transparent})
    assert message in str(error.value)


def test_transparent_mode_has_no_backends_and_its_section_needs_the_mode():
    with pytest.raises(ValidationError, match="it has no backends"):
        GatewayConfig.model_validate({"mode": "transparent", "transparent": {"destinations": {"a": "http://x"}}, "backends": {"b": {"command": "x"}}})
    with pytest.raises(ValidationError, match="applies to mode `transparent` only"):
        GatewayConfig.model_validate({"transparent": {"destinations": {"a": "http://x"}}, "backends": {"b": {"command": "x"}}})
    ok = GatewayConfig.model_validate({"mode": "transparent", "transparent": {"destinations": {"A.internal:8080": "https://10.0.0.5:8443"}, "tls": "terminated"}})
    assert ok.transparent.destinations == {"a.internal:8080": "https://10.0.0.5:8443"}


# -- awareness level 2: a gateway per destination, every layer ------------------------------
HIDE_ADD = ['!(mcp.kind == "tool" && mcp.tool.name == "add")']


@pytest.mark.parametrize("mode", MODES)
async def test_level_2_runs_the_whole_pipeline_per_destination_with_the_clients_credentials(tmp_path, hopline_serve, recorded, mode):
    url, record = recorded
    real = origin(url)
    path = tmp_path / "transparent.yaml"
    path.write_text(yaml.safe_dump({"mode": "transparent", "name": "net-gw", "transparent": {"level": 2, "destinations": {real: f"http://{real}"}}, "policy": {"rules": HIDE_ADD}}))
    gw = hopline_serve(str(path))
    c, http = intercepted(gw.url, real, mode, authorization="Bearer caller-one")
    try:
        async with c:
            if mode == "legacy":
                assert c.server_info.name == "sdk-test-server"  # hopline's handshake, the destination's identity
            names = {t.name for t in (await bounded(c.list_tools())).tools}
            assert "echo" in names and "add" not in names  # filtered by policy: bodies are read at level 2
            hidden = await bounded(c.call_tool("add", {"a": 1, "b": 2}))  # the destination's own answer to a name
            assert hidden.is_error and "add" in text_of(hidden)  # it does not know (Reverse mode's rule: no oracle)
            assert text_of(await bounded(c.call_tool("echo", {"text": "aware"}))) == "aware"
    finally:
        await http.aclose()
    seen = recorder_server.recorded(record)
    assert seen and all(dict(r["headers"]).get("authorization") == "Bearer caller-one" for r in seen if r["method"] != "GET" or r["path"] == "/mcp")
    calls = [orjson.loads(r["body"]) for r in seen if r["body"] and orjson.loads(r["body"]).get("method") == "tools/call"]
    names = [call["params"]["name"] for call in calls]
    assert "add" not in names and names[-1] == "echo"  # the refused call never reached the destination
    assert [(h["name"], h["mode"]) for h in calls[-1]["params"]["_meta"]["io.modelcontextprotocol/proxy-hops"]] == [("net-gw", "transparent")]
    async with httpx.AsyncClient(timeout=20) as raw:
        declared = (await raw.get(gw.url + "/.well-known/agent-tool-proxy")).json()
        await raw.get(gw.url + "/.well-known/oauth-protected-resource/mcp", headers={"host": real})
    assert declared["tier"] == 3 and declared["layers"] == [1, 2, 3, 4, 5, 6, 7] and declared["transparent"]["awareness_level"] == 2
    assert declared["handshake"]["transparent"].startswith("level 2: dual-handshake")
    assert recorder_server.recorded(record)[-1]["path"] == "/.well-known/oauth-protected-resource/mcp"  # streamed through, unread


def test_level_1_refuses_settings_it_cannot_apply():
    base = {"mode": "transparent", "transparent": {"destinations": {"a:80": "http://x"}}}
    with pytest.raises(ValidationError, match="applies at transparent level 2"):
        GatewayConfig.model_validate({**base, "policy": {"rules": HIDE_ADD}})
    with pytest.raises(ValidationError, match="authenticates nobody"):
        GatewayConfig.model_validate({**base, "auth": {"resource": "https://gw.example/mcp", "api_keys": [{"name": "k", "key": "k" * 20}]}})


async def test_level_2_serves_only_the_mcp_paths_so_nothing_goes_around_the_policy(tmp_path, hopline_serve, recorded):
    url, record = recorded
    real = origin(url)
    path = tmp_path / "transparent.yaml"
    path.write_text(yaml.safe_dump({"mode": "transparent", "transparent": {"level": 2, "destinations": {real: f"http://{real}"}}, "policy": {"rules": HIDE_ADD}}))
    gw = hopline_serve(str(path))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    async with httpx.AsyncClient(timeout=20) as http:
        for other in ("/mcp-other", "/"):
            r = await http.post(gw.url + other, json=call, headers={**HEADERS, "host": real})
            assert r.status_code == 404, other
        # legacy HTTP+SSE is served by hopline's own SSE listener, through a gateway too
        sse = await http.post(gw.url + "/sse", json=call, headers={**HEADERS, "host": real})
        unknown = await http.post(gw.url + "/messages?session_id=x", json=call, headers={**HEADERS, "host": real})
        assert sse.status_code == 405 and unknown.status_code == 404
        slash = await http.post(gw.url + "/mcp/", json=INIT, headers={**HEADERS, "host": real})  # the same endpoint as /mcp
    assert slash.status_code == 200 and slash.json()["result"]["serverInfo"]["name"] == "sdk-test-server"
    assert all(r["path"] == "/mcp" for r in recorder_server.recorded(record))  # only through the gateway
