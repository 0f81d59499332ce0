"""The built-in demo ACP agent (hopline.demo.acp_agent) and examples/acp-demo.yaml: an
offline chain an editor can run in one command, driven here by real ACP clients.

The editor side is the official ACP Python SDK client (or the suite's raw NDJSON client);
the chain is ``hopline acp --config FILE`` with the gateway component (a proxy) and, in one
case, a test proxy of another dialect in front of the demo agent; the tools are served
by the built-in demo MCP server.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import psutil
import yaml
from acp import spawn_agent_process, text_block
from acp_harness import PEERS, PY, ROOT, text_of

EXAMPLE = ROOT / "examples" / "acp-demo.yaml"
WAIT = 20.0  # a first tool call starts the demo backend


def example_with_this_python(tmp_path, extra_proxies: list[dict[str, Any]] = ()) -> str:
    """examples/acp-demo.yaml as written, with `python` made this interpreter (the suite's venv)."""
    conf = yaml.safe_load(EXAMPLE.read_text())
    for spec in [*conf["backends"].values(), *conf["acp"]["components"]]:
        if spec.get("command") == "python":
            spec["command"] = sys.executable
    gateway, agent = conf["acp"]["components"]
    conf["acp"]["components"] = [gateway, *extra_proxies, agent]
    path = tmp_path / "acp-demo.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


class Recorder:
    """The editor: records every session/update the chain sends."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    def texts(self) -> list[str]:
        return [u.content.text for u in self.updates if getattr(u, "session_update", "") == "agent_message_chunk"]

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not expected")

    async def ext_method(self, method: str, params: dict) -> dict:
        return {}

    async def ext_notification(self, method: str, params: dict) -> None:
        return None


def test_the_example_is_the_offline_chain():
    conf = yaml.safe_load(EXAMPLE.read_text())
    assert conf["acp"]["components"] == [{"builtin": "gateway"}, {"command": "python", "args": ["-m", "hopline.demo.acp_agent"]}]
    assert conf["backends"] == {"demo": {"command": "python", "args": ["-m", "hopline.demo"]}}
    assert "npx" not in EXAMPLE.read_text() and "hopline acp --config examples/acp-demo.yaml" in EXAMPLE.read_text()


async def test_sdk_client_through_the_gateway_proxy_to_the_demo_agent(tmp_path):
    client = Recorder()
    path = example_with_this_python(tmp_path)
    env = dict(os.environ)  # the SDK passes a minimal environment otherwise (no PYTHONPATH: another hopline)
    async with spawn_agent_process(client, PY, "-m", "hopline", "acp", "--config", path, cwd=ROOT, env=env) as (conn, process):
        children: list[psutil.Process] = []
        try:
            init = await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
            assert init.agent_info.name == "hopline-demo-agent"
            sid = (await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), WAIT)).session_id

            async def prompt(text: str) -> list[Any]:
                start = len(client.updates)
                result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), WAIT)
                assert result.stop_reason == "end_turn"
                return client.updates[start:]

            said = await prompt("hello there")
            assert [u.content.text for u in said][0] == "echo: hello there" and len(said) == 2  # streamed: two chunks
            (listed,) = await prompt("tools")
            assert listed.content.text == "hopline-tools: demo__echo, demo__add, demo__countdown, demo__whoami"
            started, finished, chunk = await prompt('call demo__add {"a": 2, "b": 3}')
            assert (started.session_update, started.status, started.title, started.raw_input) == ("tool_call", "in_progress", "demo__add", {"a": 2, "b": 3})
            assert (finished.session_update, finished.status, finished.tool_call_id) == ("tool_call_update", "completed", started.tool_call_id)
            assert json.loads(chunk.content.text.removeprefix("demo__add: ")) == {"sum": 5}
            echoed = await prompt('call demo__echo {"text": "offline"}')
            assert echoed[-1].content.text == "demo__echo: offline"
            missing = await prompt("call nobody__tool {}")
            assert missing[1].status == "failed" and "no MCP server of this session has a tool 'nobody__tool'" in missing[-1].content.text
            children = psutil.Process(process.pid).children(recursive=True)
        except BaseException:
            for p in [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]:
                p.kill()
            raise
    _, alive = psutil.wait_procs(children, timeout=10)
    for p in alive:
        p.kill()
    assert not alive, "components or backends outlived the conductor"


async def test_a_proxy_of_another_dialect_in_front_of_the_demo_agent(conductor, tmp_path):
    proxy = {"command": PY, "args": [str(PEERS / "proxy.py"), "--dialect", "d4", "--tag", "P"]}
    c = await conductor(options=("--config", example_with_this_python(tmp_path, [proxy])))
    init = await c.initialize()
    assert init["result"]["agentInfo"]["name"] == "hopline-demo-agent"
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "hi")
    assert answer["result"] == {"stopReason": "end_turn"} and [text_of(m) for m in before][0] == "[P] echo: hi"
    answer, before = await c.prompt(sid, 'call demo__echo {"text": "through P"}')
    assert answer["result"] == {"stopReason": "end_turn"}
    assert text_of(before[-1]) == "[P] demo__echo: through P"
    answer, _ = await c.call("session/prompt", {"sessionId": "nope", "prompt": []})
    assert answer["error"]["code"] == -32602
