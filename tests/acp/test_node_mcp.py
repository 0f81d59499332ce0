"""MCP-over-ACP with third-party pieces from npm: the TypeScript SDK's own D5 provider and caller,
and @thinkwell/conductor hosting hopline's gateway component.

- node/ts_mcp_client.mjs: an editor-side client that provides an MCP server with the SDK's
  ``McpOverAcpProvider`` (connectionless d5 ``mcp/message``, MCP 2026-07-28 only).
- node/ts_mcp_agent.mjs: an agent that calls ACP-transport servers with the SDK's
  ``McpOverAcpCaller``.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

import pytest
import yaml
from acp_harness import (
    NODE_DIR,
    PY,
    ROOT,
    RawClient,
    conductor_argv,
    peer,
    require_node,
    text_of,
)

KEY = "io.hopline/acp-session-id"
SDK_SERVER = ROOT / "tests" / "servers" / "sdk_server.py"
TS_MCP_AGENT = shlex.join(["node", str(NODE_DIR / "ts_mcp_agent.mjs")])


@pytest.fixture(autouse=True)
def _node_peers_installed() -> None:
    require_node()


@pytest.fixture
def gateway_file(tmp_path) -> str:
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"name": "tools", "backends": {"sdk": {"command": PY, "args": [str(SDK_SERVER), "stdio"]}}}))
    return str(path)


async def run_ts_mcp_client(prompts: list[str], argv: list[str]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        "node", str(NODE_DIR / "ts_mcp_client.mjs"), *prompts, "--", *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, start_new_session=True
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_ts_sdk_provider_and_caller_through_hopline_with_its_gateway(gateway_file):
    """The editor provides a server (TS SDK, d5), the agent consumes servers (TS SDK, d5), and
    hopline's gateway (d4 connections) adds its own: one chain, three providers' worth of routing."""
    prompts = ["call client-tools whoami", "call client-tools fail", 'call tools sdk__echo {"text": "from ts"}', "call tools sdk__meta", "call tools nope"]
    summary = await run_ts_mcp_client(prompts, conductor_argv(TS_MCP_AGENT, options=("--config", gateway_file, "--gateway")))
    sid = summary["sessionId"]
    assert summary["stops"] == ["end_turn"] * len(prompts)
    whoami, failed, echoed, meta, missing = (json.loads(t) for t in summary["texts"])
    info = json.loads(whoami["result"]["content"][0]["text"])
    assert info["session"] == sid  # the TS provider's handler sees the ACP session of the call
    assert info["requestId"].startswith("mcp-request:")  # the caller's requestId, preserved end to end
    assert failed == {"error": {"code": -32000, "message": "tool failed"}}  # an inner MCP error stays inner
    assert echoed["result"]["content"][0]["text"] == "from ts"  # the gateway's backend, for a d5 caller
    assert json.loads(meta["result"]["content"][0]["text"])[KEY] == sid
    assert missing["error"]["code"] == -32602 and "Unknown tool" in missing["error"]["message"]
    assert summary["handled"] == ["tools/call", "tools/call"]  # the gateway's traffic never reached the editor


async def test_hopline_gateway_component_inside_thinkwell(gateway_file):
    """The same component as a process (``python -m hopline.acp.gateway``) in a third-party
    conductor: Thinkwell offers it the D1 role and bridges its ``acp:`` server to HTTP itself."""
    gateway = shlex.join([PY, "-m", "hopline.acp.gateway", "--config", gateway_file])
    c = await RawClient.start(["node", str(NODE_DIR / "thinkwell_host.mjs"), gateway, peer("http_mcp_agent.py")], env={"THINKWELL_MCP_BRIDGE": "http"})
    try:
        assert (await c.initialize())["result"]["agentInfo"]["name"] == "http-mcp-agent"
        sid = await c.new_session()
        answer, before = await c.prompt(sid, 'call sdk__echo legacy {"text": "via thinkwell"}')
        assert answer["result"] == {"stopReason": "end_turn"} and json.loads(text_of(before[-1]))["results"] == ["via thinkwell"]
        answer, before = await c.prompt(sid, "call sdk__meta legacy")
        (meta,) = json.loads(text_of(before[-1]))["results"]
        assert meta[KEY] == sid  # Thinkwell carries no session id: the gateway adds the one it learned
    finally:
        assert await c.close() == 0
    assert not any("Traceback" in line for line in c.stderr), "".join(c.stderr[-30:])

