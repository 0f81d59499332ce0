"""hopline's MCP gateway inside a chain (src/hopline/acp/gateway/): every ACP session gets the
gateway's tools, served by real MCP SDK backends, whatever the agent consumes.

The configuration files are written the way a user writes them (``backends`` + ``acp``) and
run with ``hopline acp --config FILE``. The backend is the official MCP SDK server of the
test suite (tests/servers/sdk_server.py): ``echo`` answers its text, ``meta`` the raw
``params._meta`` it received, so the tests see what reached the backend.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psutil
import pytest
import yaml
from acp import spawn_agent_process, text_block
from acp_harness import PEERS, PY, ROOT, peer, text_of

KEY = "io.hopline/acp-session-id"
SDK_SERVER = ROOT / "tests" / "servers" / "sdk_server.py"
WAIT = 20.0  # a first tool call starts the backend process (the MCP SDK imports slowly)


def write_config(tmp_path, components: list[dict[str, Any]], **acp: Any) -> str:
    conf = {
        "name": "tools",
        "backends": {"sdk": {"command": PY, "args": [str(SDK_SERVER), "stdio"]}},
        "acp": {"components": components, **acp},
    }
    path = tmp_path / "hopline.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


def command(script: str, *args: str) -> dict[str, Any]:
    return {"command": PY, "args": [str(PEERS / script), *args]}


GATEWAY = {"builtin": "gateway"}


class Recorder:
    """The editor side, on the official Python SDK: records what the agent says."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if getattr(update, "session_update", "") == "agent_message_chunk" and hasattr(content, "text"):
            self.texts.append(content.text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not expected")

    async def ext_method(self, method: str, params: dict) -> dict:
        return {}

    async def ext_notification(self, method: str, params: dict) -> None:
        return None


async def test_python_sdk_client_an_sdk_agent_calls_gateway_tools_through_the_bridge(tmp_path):
    """The issue's end-to-end case: editor (Python SDK client) → hopline acp --config F
    [gateway, bridge, agent (Python SDK, MCP over HTTP only)] → MCP SDK backend."""
    path = write_config(tmp_path, [GATEWAY, command("http_mcp_agent.py")], mcp_bridge="http")
    client = Recorder()
    async with spawn_agent_process(client, PY, "-m", "hopline.acp", "--config", path, cwd=ROOT) as (conn, process):
        children: list[psutil.Process] = []
        try:
            init = await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
            assert init.agent_info.name == "http-mcp-agent"  # the chain looks like the agent itself
            session = await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), WAIT)
            sid = session.session_id

            async def call(text: str) -> dict[str, Any]:
                result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(text)]), WAIT)
                assert result.stop_reason == "end_turn"
                return json.loads(client.texts[-1])

            echoed = await call('call sdk__echo legacy {"text": "hello from the agent"}')
            assert echoed == {"results": ["hello from the agent"], "kinds": ["http"]}  # served by the SDK backend
            meta = await call("call sdk__meta legacy")
            (seen,) = meta["results"]
            assert seen[KEY] == sid  # the tool call reached the backend carrying its ACP session
            modern = await call('call sdk__echo 2026-07-28 {"text": "stateless era"}')
            assert modern["results"] == ["stateless era"]
            children = psutil.Process(process.pid).children(recursive=True)
        except BaseException:
            for p in [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]:
                p.kill()
            raise
    _, alive = psutil.wait_procs(children, timeout=10)
    for p in alive:
        p.kill()
    assert not alive, "components or backends outlived the conductor"


# (the gateway's handshake dialect, the agent's MCP-over-ACP dialect)
NATIVE = [("d5", "d5"), ("d5", "d4"), ("d4", "d4"), ("d4", "d5"), ("d1", "d1"), ("d1", "d4")]


@pytest.mark.parametrize(("dialect", "consumer"), NATIVE, ids=["-".join(p) for p in NATIVE])
async def test_native_consumers_in_every_dialect(conductor_config, tmp_path, dialect, consumer):
    path = write_config(tmp_path, [{**GATEWAY, "dialect": dialect}, command("mcp_agent.py", "--mcp", consumer)])
    c = await conductor_config(path)
    assert "result" in await c.initialize()
    sid = await c.new_session()
    (echoed,) = await results(c, sid, 'call sdk__echo {"text": "native"}')
    assert echoed == "native"
    (meta,) = await results(c, sid, "call sdk__meta")
    assert meta[KEY] == sid
    (missing,) = await results(c, sid, "call nobody__tool")
    assert missing["error"]["code"] == -32602 and "Unknown tool" in missing["error"]["message"]  # the gateway's own answer


@pytest.mark.parametrize(("dialect", "consumer"), [("d4", "d4"), ("d4", "d5"), ("d5", "d4")])
async def test_backend_progress_and_requests_reach_the_consumer_or_are_refused(conductor_config, tmp_path, dialect, consumer):
    path = write_config(tmp_path, [{**GATEWAY, "dialect": dialect}, command("mcp_agent.py", "--mcp", consumer)])
    c = await conductor_config(path)
    await c.initialize()
    sid = await c.new_session()
    progress = await said(c, sid, 'call sdk__progress {"steps": 2}')
    assert progress["results"] == ["done after 2 steps"] and [n["params"]["progress"] for n in progress["notes"]] == [1, 2]
    if consumer == "d5":  # tied to the request that asked for them
        assert all(n["requestId"] == "r-1" for n in progress["notes"])
    (sampled,) = await results(c, sid, 'call sdk__sample_direct {"prompt": "hi"}')
    if dialect == consumer == "d4":  # a connection carries the backend's request to the agent, and back
        assert sampled == "agent-llm: sampled"
    else:  # a connectionless hop has no way to: refused at once (by the conductor or the gateway), not hung
        assert sampled["error"]["code"] in (-32600, -32601) and "carries no" in sampled["error"]["message"]


async def test_each_session_has_its_own_server_and_a_closed_one_is_released(conductor_config, tmp_path):
    log = tmp_path / "agent.jsonl"
    path = write_config(tmp_path, [GATEWAY, command("mcp_agent.py", "--mcp", "d5", "--log", str(log))])
    c = await conductor_config(path)
    await c.initialize()
    first, second = await c.new_session(), await c.new_session()
    (a,) = await results(c, first, "call sdk__meta")
    (b,) = await results(c, second, "call sdk__meta")
    assert (a[KEY], b[KEY]) == (first, second)
    declared = [m["params"]["mcpServers"] for m in received(log) if m.get("method") == "session/new"]
    ids = [servers[0]["serverId"] for servers in declared]
    assert len(set(ids)) == 2 and all(s == [{"type": "acp", "name": "tools", "serverId": i}] for s, i in zip(declared, ids))
    answer, _ = await c.call("session/close", {"sessionId": first})
    assert answer["result"] == {}
    stale = await said(c, second, "raw mcp/message " + json.dumps({"serverId": ids[0], "requestId": "r", "method": "tools/list"}))
    assert stale["error"]["code"] == -33001  # the closed session's server is gone
    (still,) = await results(c, second, 'call sdk__echo {"text": "still here"}')
    assert still == "still here"


async def test_the_agent_restarts_and_finds_the_gateway_again(conductor_config, tmp_path):
    path = write_config(tmp_path, [GATEWAY, command("mcp_agent.py", "--mcp", "d4", "--load-session")], on_crash="restart")
    c = await conductor_config(path)
    await c.initialize()
    sid = await c.new_session()
    (before_crash,) = await results(c, sid, "call sdk__meta")
    answer, _ = await c.prompt(sid, "crash")
    assert answer["error"]["data"] == {"backend": "mcp_agent.py", "reason": "exited"}
    (after,) = await results(c, sid, "call sdk__meta")  # session/load gave the new agent the same server
    assert after[KEY] == before_crash[KEY] == sid


async def test_acp_only_file_without_the_gateway_needs_no_backends(conductor_config, tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump({"backends": {}, "acp": {"components": [{"command": PY, "args": [str(PEERS / "proxy.py"), "--tag", "P"]}, command("sdk_agent.py")]}}))
    c = await conductor_config(str(path))
    await c.initialize()
    sid = await c.new_session()
    answer, before = await c.prompt(sid, "hi")
    assert answer["result"] == {"stopReason": "end_turn"} and [text_of(m) for m in before] == ["[P] echo: hi"]


async def test_cli_gateway_flag_and_commands_override_the_file(conductor_config, tmp_path):
    path = write_config(tmp_path, [command("raw_agent.py")], on_crash="bypass")
    c = await conductor_config(path, "--gateway", "--", peer("mcp_agent.py", "--mcp", "d4"))
    await c.initialize()
    sid = await c.new_session()
    (echoed,) = await results(c, sid, 'call sdk__echo {"text": "flag"}')
    assert echoed == "flag"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--gateway", "--", "agent"), "give one with --config FILE"),
        (("--restart-max", "0", "--", "agent"), "must be at least 1"),
    ],
)
async def test_bad_invocations_exit_with_a_message(argv, expected):
    process = await asyncio.create_subprocess_exec(PY, "-m", "hopline.acp", *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 2 and out == b"" and expected in err.decode()


async def test_a_config_file_problem_is_reported_without_a_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"acp": {"components": [{"builtin": "gateway"}, {"command": "agent", "dialekt": "d4"}]}}))
    process = await asyncio.create_subprocess_exec(PY, "-m", "hopline.acp", "--config", str(path), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    text = err.decode()
    assert process.returncode == 1 and out == b"" and "Traceback" not in text
    assert "acp.components[1].dialekt: unknown key" in text
    path.write_text(yaml.safe_dump({"acp": {"components": [{"builtin": "gateway"}, {"command": "agent"}]}}))
    process = await asyncio.create_subprocess_exec(PY, "-m", "hopline.acp", "--config", str(path), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 1 and "backends: at least one backend is required" in err.decode()  # the gateway serves them


# -- helpers ------------------------------------------------------------------------------
@pytest.fixture
async def conductor_config(conductor):
    """``hopline acp --config FILE [more options]``, through the suite's conductor fixture."""

    async def launch(path: str, *more: str):
        components = list(more)
        options = ("--config", path)
        if "--" in components:
            cut = components.index("--")
            options, components = (*options, *components[:cut]), components[cut + 1 :]
        elif components:
            options, components = (*options, *components), []
        return await conductor(*components, options=options)

    return launch


async def said(c, sid: str, text: str) -> dict[str, Any]:
    answer, before = await c.prompt(sid, text)
    assert answer["result"] == {"stopReason": "end_turn"}, answer
    return json.loads(text_of(before[-1]))


async def results(c, sid: str, text: str) -> list[Any]:
    return (await said(c, sid, text))["results"]


def received(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

