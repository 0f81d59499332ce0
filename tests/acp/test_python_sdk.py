"""The official Python SDK (agent-client-protocol 0.12.x) as client and as terminal agent.

``hopline acp`` must look like an ordinary ACP agent to the SDK client, with
D1, D4 and D5 test proxies (auto-detected) between it and an SDK-built agent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psutil
import pytest
from acp import RequestPermissionResponse, spawn_agent_process, text_block
from acp.schema import AllowedOutcome
from acp_harness import ROOT, conductor_argv, peer, proxy

WAIT = 12.0


class RecordingClient:
    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permissions: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list, **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=options[0].option_id, outcome="selected"))

    async def ext_method(self, method: str, params: dict) -> dict:
        return {}

    async def ext_notification(self, method: str, params: dict) -> None:
        return None

    def texts(self) -> list[str]:
        return [u.content.text for u in self.updates if getattr(u, "session_update", "") == "agent_message_chunk"]


async def _drive(components: list[str]) -> tuple[RecordingClient, dict[str, Any]]:
    client = RecordingClient()
    argv = conductor_argv(*components)
    seen: dict[str, Any] = {}
    async with spawn_agent_process(client, argv[0], *argv[1:], cwd=ROOT) as (conn, process):
        children: list[psutil.Process] = []
        try:
            init = await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
            seen["agent_info"] = init.agent_info.name if init.agent_info else None
            seen["load_session"] = init.agent_capabilities.load_session if init.agent_capabilities else None
            session = await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), WAIT)
            result = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("updates 3 through the chain")]), WAIT)
            seen["stop"] = result.stop_reason
            seen["after_first"] = list(client.texts())
            result = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("permission")]), WAIT)
            seen["permission_stop"] = result.stop_reason
            seen["ext"] = await asyncio.wait_for(conn.ext_method("example/ping", {"n": 1}), WAIT)
            children = psutil.Process(process.pid).children(recursive=True)
        except BaseException:
            for p in [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]:
                p.kill()
            raise
    _, alive = psutil.wait_procs(children, timeout=5)
    for p in alive:
        p.kill()
    assert not alive, "components outlived the conductor"
    return client, seen


async def test_sdk_client_and_sdk_agent_through_d1_d4_d5_proxies():
    client, seen = await _drive([proxy("d1", "A"), proxy("d4", "B"), proxy("d5", "C"), peer("sdk_agent.py")])
    assert seen["agent_info"] == "sdk-echo-agent" and seen["load_session"] is True
    assert seen["stop"] == "end_turn"
    # every update arrived before the prompt's result, in order, through all three proxies
    assert seen["after_first"] == [f"[A] [B] [C] echo {i}: through the chain" for i in range(3)]
    assert seen["permission_stop"] == "end_turn"
    assert len(client.permissions) == 1 and client.texts()[-1] == "[A] [B] [C] permission: yes"
    assert seen["ext"] == {"method": "example/ping", "echo": {"n": 1}}


async def test_sdk_client_with_only_the_sdk_agent():
    client, seen = await _drive([peer("sdk_agent.py")])
    assert seen["after_first"] == [f"echo {i}: through the chain" for i in range(3)]
    assert client.texts()[-1] == "permission: yes"


@pytest.mark.parametrize("dialect", ["d1", "d4", "d5"])
async def test_raw_client_through_one_configured_proxy_to_the_sdk_agent(conductor, dialect):
    c = await conductor(proxy(dialect, "P"), peer("sdk_agent.py"), options=("--dialect", dialect))
    init = await c.initialize()
    assert init["result"]["agentInfo"]["name"] == "sdk-echo-agent"
    assert "_meta" not in init["result"]  # the D1 echo is hop-local
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "hello")
    assert answer["result"] == {"stopReason": "end_turn"}
    assert [m["params"]["update"]["content"]["text"] for m in before] == ["[P] echo: hello"]
    answer, _ = await c.call("_example/ping", {"x": 1})
    assert answer["result"] == {"method": "example/ping", "echo": {"x": 1}}

