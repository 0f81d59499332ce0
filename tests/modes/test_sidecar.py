"""Sidecar mode (draft §5.5): one intermediary bound to one co-located backend, every
message to and from it mediated (Layers 1, 4, 5), the backend's identity and names
unchanged, in both forms: stdio-wrap (the client launches hopline, hopline launches the
server) and localhost HTTP (hopline in front of a server on the same host)."""

from __future__ import annotations

import subprocess

import httpx
import orjson
import pytest
import yaml
from mcp import StdioServerParameters
from pydantic import ValidationError

from hopline.config.schema import GatewayConfig
from tests.conftest import PY, SERVERS, sdk_server_cmd
from tests.peers import MODES, bounded, client, text_of
from tests.servers import recorder_server

HIDE_ADD = {"rules": ['!(mcp.kind == "tool" && mcp.tool.name == "add")']}


def write(tmp_path, backend: dict, **extra) -> str:
    path = tmp_path / "sidecar.yaml"
    path.write_text(yaml.safe_dump({"mode": "sidecar", "backends": {"app": backend}, "policy": HIDE_ADD, **extra}))
    return str(path)


@pytest.mark.parametrize(
    ("backends", "message"),
    [
        ({"a": {"url": "https://tools.example.com/mcp"}}, "a sidecar's backend is co-located"),
        ({"a": {"url": "http://10.0.0.5:3000/mcp"}}, "a sidecar's backend is co-located"),
        ({"a": {"command": "x"}, "b": {"command": "y"}}, "sidecar mode needs exactly one enabled backend; 2 are enabled"),
    ],
)
def test_a_sidecar_is_bound_to_one_co_located_backend(backends, message):
    with pytest.raises(ValidationError) as error:
        GatewayConfig.model_validate({"mode": "sidecar", "backends": backends})
    assert message in str(error.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:3000/mcp", "http://localhost:3000/mcp", "http://[::1]:3000/mcp", "http://127.8.0.1/mcp"])
def test_loopback_backends_are_co_located(url):
    assert GatewayConfig.model_validate({"mode": "sidecar", "backends": {"a": {"url": url}}}).mode == "sidecar"


async def test_stdio_wrap_keeps_the_backends_identity_and_enforces_policy(tmp_path):
    path = write(tmp_path, {"command": sdk_server_cmd()[0], "args": sdk_server_cmd()[1:]})
    async with client(StdioServerParameters(command=PY, args=["-m", "hopline", "serve", "--stdio", path]), "legacy") as c:
        assert c.server_info.name == "sdk-test-server"  # the client cannot tell hopline is there
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "echo" in names and "add" not in names  # unprefixed, and filtered by policy
        assert text_of(await bounded(c.call_tool("echo", {"text": "wrapped"}))) == "wrapped"
        # hidden by policy: answered as the server answers a name it does not know (issue 28)
        hidden = await bounded(c.call_tool("add", {"a": 1, "b": 2}))
        unknown = await bounded(c.call_tool("no-such-tool", {"a": 1, "b": 2}))
        assert hidden.is_error and text_of(hidden) == text_of(unknown).replace("no-such-tool", "add")


def test_a_sidecar_with_a_policy_declares_tier_3(tmp_path):
    path = write(tmp_path, {"command": sdk_server_cmd()[0], "args": sdk_server_cmd()[1:]})
    declared = orjson.loads(subprocess.run([PY, "-m", "hopline", "declare", path], capture_output=True, check=True).stdout)
    assert declared["modes"] == ["sidecar"] and declared["tier"] == 3 and "sidecar" in declared["handshake"]


@pytest.mark.parametrize("era", MODES)
async def test_localhost_http_form_with_the_sdk_client(tmp_path, hopline_serve, recorded, era):
    url, _record = recorded
    gw = hopline_serve(write(tmp_path, {"url": url, "transport": "streamable-http"}))
    async with client(gw.url, era) as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "echo" in names and "add" not in names
        assert text_of(await bounded(c.call_tool("echo", {"text": "beside"}))) == "beside"


async def test_methods_the_gateway_does_not_know_reach_the_backend_through_the_policy(tmp_path, hopline_serve, recorded):
    url, record = recorded
    # Rules decide on passed-on methods as on tools (kind "method"); unnamed, one is refused.
    policy = {"rules": [*HIDE_ADD["rules"], 'mcp.kind == "method" && mcp.method != "acme/forbidden"']}
    gw = hopline_serve(write(tmp_path, {"url": url, "transport": "streamable-http"}, policy=policy))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(timeout=20) as http:
        sid = (await http.post(gw.url, json=init, headers=headers)).headers["mcp-session-id"]
        own = {**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=own)
        custom = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 2, "method": "acme/stats", "params": {"window": 5}}, headers=own)
        note = await http.post(gw.url, json={"jsonrpc": "2.0", "method": "notifications/acme/hello", "params": {"n": 1}}, headers=own)
        refused = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 3, "method": "acme/forbidden", "params": {}}, headers=own)
    # The backend (the official SDK) answered the unknown method itself: it was passed on, not refused here.
    assert custom.json()["error"]["code"] == -32601 and note.status_code == 202
    seen = [orjson.loads(r["body"]) for r in recorder_server.recorded(record) if r["body"]]
    methods = [m.get("method") for m in seen]
    assert next(m for m in seen if m.get("method") == "acme/stats")["params"]["window"] == 5
    assert "notifications/acme/hello" in methods
    # Refused by the policy exactly as a method that does not exist, before the backend.
    assert refused.json()["error"] == {"code": -32601, "message": "Method not found: acme/forbidden"}
    assert "acme/forbidden" not in methods


async def test_the_handshake_waits_for_the_one_backends_start_so_the_identity_is_its_own(tmp_path):
    """A backend that starts slower than ``list_timeout`` (here 1.5 s against 0.5 s): a Forward
    gateway would answer ``initialize`` without it; a sidecar's handshake is the backend's own,
    so it waits for the start (up to ``startup_timeout``) and the client sees the backend's name."""
    slow = f"sleep 1.5; exec {PY} {SERVERS / 'fault_server.py'}"
    path = write(tmp_path, {"command": "sh", "args": ["-c", slow]}, routing={"list_timeout": 0.5})
    async with client(StdioServerParameters(command=PY, args=["-m", "hopline", "serve", "--stdio", path]), "legacy") as c:
        assert c.server_info.name == "fault-server"
        assert "echo" in {t.name for t in (await bounded(c.list_tools())).tools}
