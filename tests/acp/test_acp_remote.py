"""ACP over the network (issue 36 item 2): the WebSocket profile of ACP's Streamable HTTP & WebSocket RFD.

Real parts only: the remote agent is the suite's SDK echo agent served by the official Python
SDK's own RFD server (``acp.http.asgi``, agent-client-protocol 0.12.1) under uvicorn
(``peers/ws_agent.py``); the editor is the same SDK's WebSocket client
(``acp.ws.create_websocket_stream`` + ``connect_to_agent``) or a raw ``websockets`` client
for bad input; the conductor is ``python -m hopline.acp`` in a process of its own, with a
stdio test proxy in front of the remote agent (a chain mixing both).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import Any

import pytest
from acp import connect_to_agent, text_block
from acp.ws import create_websocket_stream
from acp_harness import NODE_DIR, PEERS, PY, ROOT, RawClient, conductor_argv, peer, proxy, require_node, text_of
from test_python_sdk import RecordingClient
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosedError, InvalidStatus

WAIT = 12.0


class Proc:
    """A process that prints a line naming its port; stopped (SIGTERM, then SIGKILL) by the test."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    @classmethod
    async def start(cls, argv: list[str], marker: str, stream: str, env: dict[str, str] | None = None):
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
        )
        self = cls(process)
        pipe = process.stdout if stream == "stdout" else process.stderr
        other = process.stderr if stream == "stdout" else process.stdout
        self._drain_other = asyncio.create_task(self._drain(other))
        port = None
        while port is None:
            line = await asyncio.wait_for(pipe.readline(), WAIT)
            if not line:
                await self.stop()
                raise AssertionError(f"{argv} exited before listening: {''.join(self.lines)}")
            text = line.decode()
            self.lines.append(text)
            if marker in text:
                port = int(text.rsplit(marker, 1)[1].split("/")[0].strip())
        self.port = port
        self._drain_rest = asyncio.create_task(self._drain(pipe))
        return self

    async def _drain(self, pipe) -> None:
        while line := await pipe.readline():
            self.lines.append(line.decode())

    async def stop(self) -> int:
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except asyncio.TimeoutError:
                os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()
        return self.process.returncode


@pytest.fixture
async def remote_agent():
    agent = await Proc.start([PY, str(PEERS / "ws_agent.py")], "PORT ", "stdout")
    try:
        yield f"ws://127.0.0.1:{agent.port}/acp"
    finally:
        await agent.stop()


@pytest.fixture
async def listening():
    started: list[Proc] = []

    async def launch(*components: str, options: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Proc:
        argv = conductor_argv(*components, options=("--listen", "127.0.0.1:0", *options))
        conductor = await Proc.start(argv, "ws://127.0.0.1:", "stderr", env)
        started.append(conductor)
        return conductor

    try:
        yield launch
    finally:
        for conductor in started:
            assert await conductor.stop() == 0, "".join(conductor.lines)


# -- the conductor reaches a remote agent ----------------------------------------------------------


@pytest.mark.parametrize("scheme", ["ws", "http"])
async def test_stdio_editor_reaches_a_remote_sdk_agent_behind_a_stdio_proxy(conductor, remote_agent, scheme):
    # the same agent, over the RFD's WebSocket profile or its Streamable HTTP one (POST + one GET stream)
    client: RawClient = await conductor(proxy("d4", "P"), remote_agent.replace("ws://", f"{scheme}://"))
    init = await client.initialize()
    assert init["result"]["agentInfo"]["name"] == "sdk-echo-agent"
    sessions = [await client.new_session(), await client.new_session()]
    for sid in sessions:  # two sessions on one WebSocket: each update goes to its own session
        answer, before = await client.prompt(sid, f"updates 2 to {sid}")
        assert answer["result"]["stopReason"] == "end_turn"
        assert [(n["params"]["sessionId"], text_of(n)) for n in before] == [
            (sid, f"[P] echo {i}: to {sid}") for i in range(2)
        ]
    # the agent asks the editor (a request from the remote end, answered back over the WebSocket)
    await client.send(
        {
            "id": 50,
            "method": "session/prompt",
            "params": {"sessionId": sessions[0], "prompt": [{"type": "text", "text": "permission"}]},
        }
    )
    ask = await client.recv()
    assert ask["method"] == "session/request_permission" and ask["params"]["sessionId"] == sessions[0]
    await client.send({"id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "no"}}})
    answer, before = await client.answer(50)
    assert answer["result"]["stopReason"] == "end_turn" and text_of(before[-1]) == "[P] permission: no"


async def test_an_unreachable_remote_agent_is_a_clear_error(conductor, unused_tcp_port):
    client: RawClient = await conductor(proxy("d4", "P"), f"ws://127.0.0.1:{unused_tcp_port}/acp")
    answer, _ = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    error = answer["error"]
    assert f"cannot reach ws://127.0.0.1:{unused_tcp_port}/acp" in error["message"] + str(error.get("data", ""))


# -- an editor reaches the conductor over WebSocket --------------------------------------------------


async def test_sdk_websocket_editor_through_the_conductor_to_a_remote_agent(listening, remote_agent):
    conductor = await listening(proxy("d5", "Q"), remote_agent)
    url = f"ws://127.0.0.1:{conductor.port}/acp"
    for _ in range(2):  # each connection gets its own chain; a second editor after the first works alike
        client = RecordingClient()
        transport = await create_websocket_stream(url)
        conn = connect_to_agent(client, transport)
        try:
            init = await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
            assert init.agent_info.name == "sdk-echo-agent"
            session = await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), WAIT)
            result = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("updates 2 over ws")]), WAIT
            )
            assert result.stop_reason == "end_turn"
            result = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("permission")]), WAIT
            )
            assert len(client.permissions) == 1
            assert client.texts() == ["[Q] echo 0: over ws", "[Q] echo 1: over ws", "[Q] permission: yes"]
        finally:
            await conn.close()


async def test_stdio_chain_served_to_a_websocket_editor(listening):
    conductor = await listening(proxy("d4", "S"), peer("sdk_agent.py"))
    async with ws_connect(f"ws://127.0.0.1:{conductor.port}/acp") as ws:
        assert ws.response.headers.get("Acp-Connection-Id")
        await ws.send(
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
        )
        answer = await asyncio.wait_for(ws.recv(), WAIT)
        assert '"sdk-echo-agent"' in answer


# -- the front door ------------------------------------------------------------------------------------------


async def _refused(url: str, **kwargs: Any) -> int:
    with pytest.raises(InvalidStatus) as caught:
        async with ws_connect(url, **kwargs):
            pass
    return caught.value.response.status_code


async def test_front_door_origin_token_size_garbage_and_path(listening):
    env = {"ACP_TEST_TOKEN": "s3cret-token"}
    conductor = await listening(
        peer("sdk_agent.py"),
        options=("--token-env", "ACP_TEST_TOKEN", "--origin", "https://editor.example", "--max-message-bytes", "4096"),
        env=env,
    )
    url = f"ws://127.0.0.1:{conductor.port}/acp"
    good = {"Authorization": "Bearer s3cret-token"}
    assert await _refused(url) == 401  # no token
    assert await _refused(url, additional_headers={"Authorization": "Bearer wrong"}) == 401
    assert await _refused(url, additional_headers=good, origin="https://evil.example") == 403
    assert await _refused(f"ws://127.0.0.1:{conductor.port}/other", additional_headers=good) == 404
    async with ws_connect(url, additional_headers=good, origin="https://editor.example") as ws:
        await ws.send("this is not json")  # answered with a parse error, the connection stays up
        error = await asyncio.wait_for(ws.recv(), WAIT)
        assert '"code":-32700' in error and '"id":null' in error
        await ws.send(
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
        )
        assert '"sdk-echo-agent"' in await asyncio.wait_for(ws.recv(), WAIT)
        await ws.send("x" * 5000)  # above --max-message-bytes: closed with 1009 (message too big)
        with pytest.raises(ConnectionClosedError) as closed:
            await asyncio.wait_for(ws.recv(), WAIT)
        assert closed.value.rcvd.code == 1009
    assert "s3cret-token" not in "".join(conductor.lines)


async def test_connection_cap(listening):
    conductor = await listening(peer("sdk_agent.py"), options=("--max-connections", "1"))
    url = f"ws://127.0.0.1:{conductor.port}/acp"
    async with ws_connect(url) as ws:
        assert await _refused(url) == 503
        # the one admitted is served as usual (its place is given back once its chain is down)
        await ws.send(
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}'
        )
        assert '"sdk-echo-agent"' in await asyncio.wait_for(ws.recv(), WAIT)


async def test_non_loopback_listen_needs_a_token():
    process = await asyncio.create_subprocess_exec(
        *conductor_argv(peer("sdk_agent.py"), options=("--listen", "0.0.0.0:0")),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    _, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 2
    assert b"needs a bearer token" in err


def test_a_file_names_a_remote_component_by_its_url_and_check_shows_no_credentials():
    import yaml

    from hopline.acp import settings
    from hopline.config.load import parse_config

    config = parse_config(
        yaml.safe_dump(
            {
                "backends": {},
                "acp": {
                    "components": [
                        {"command": "python", "args": ["p.py"]},
                        {"command": "wss://u:pw@agents.example:8443/acp"},
                    ]
                },
            }
        )
    )
    from hopline.config.extras import needed

    assert needed(config) == [
        (("acp", "components", 1, "command"), "a remote ACP component (over WebSocket) needs", "acp")
    ]
    chain = settings.from_config(config)
    remote = chain.components[1]
    assert (remote.url, remote.argv, remote.name) == ("wss://u:pw@agents.example:8443/acp", (), "agents.example:8443")
    lines = settings.explain(config)
    assert lines[-1] == "  2. agents.example:8443 (remote over WebSocket, agent): wss://agents.example:8443"
    assert "pw" not in "\n".join(lines)
    with pytest.raises(ValueError, match="is remote"):
        settings.from_config(
            parse_config(
                yaml.safe_dump({"backends": {}, "acp": {"components": [{"command": "ws://h/acp", "cwd": "/tmp"}]}})
            )
        )


async def test_a_remote_components_credentials_stay_out_of_errors(conductor, unused_tcp_port):
    client: RawClient = await conductor(f"ws://user:pw-secret@127.0.0.1:{unused_tcp_port}/acp")
    answer, _ = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert f"cannot reach ws://127.0.0.1:{unused_tcp_port}/acp" in answer["error"]["message"]
    await client.close()
    assert "pw-secret" not in str(answer) + "".join(client.stderr)


async def test_typescript_sdk_websocket_editor_through_a_stdio_proxy(listening, remote_agent):
    require_node()
    conductor = await listening(proxy("d1", "T"), remote_agent)
    node = await asyncio.create_subprocess_exec(
        "node",
        "--experimental-websocket",
        str(NODE_DIR / "ts_ws_client.mjs"),
        f"ws://127.0.0.1:{conductor.port}/acp",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=NODE_DIR,
    )
    out, err = await asyncio.wait_for(node.communicate(), WAIT * 2)
    assert node.returncode == 0, err.decode()
    assert json.loads(out) == {
        "agent": "sdk-echo-agent",
        "stop": "end_turn",
        "texts": ["[T] echo 0: from ts over ws", "[T] echo 1: from ts over ws"],
    }


class StdioBridge:
    """A small WebSocket↔stdio bridge (the same library as hopline's side): every connection runs
    its own ``sdk_agent.py`` process; when the process exits, its WebSocket is closed."""

    def __init__(self) -> None:
        self.processes: list[asyncio.subprocess.Process] = []

    async def handle(self, ws) -> None:
        agent = await asyncio.create_subprocess_exec(
            PY, str(PEERS / "sdk_agent.py"), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=ROOT
        )
        self.processes.append(agent)

        async def inbound() -> None:
            try:
                async for frame in ws:
                    agent.stdin.write(frame.encode() + b"\n")
                    await agent.stdin.drain()
            finally:
                agent.stdin.close()  # the WebSocket is gone: the agent's input ends, it exits

        pump = asyncio.create_task(inbound())
        try:
            while line := await agent.stdout.readline():
                await ws.send(line.decode().rstrip("\n"))
        finally:
            pump.cancel()
            await ws.close(1011, "agent exited")
            if agent.returncode is None:
                agent.kill()
            await agent.wait()


async def test_a_remote_agent_that_drops_is_reconnected_and_given_its_sessions_back(conductor):
    from websockets.asyncio.server import serve

    bridge = StdioBridge()
    async with serve(bridge.handle, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        options = ("--on-crash", "restart", "--restart-backoff", "0")
        client: RawClient = await conductor(proxy("d4", "R"), f"ws://127.0.0.1:{port}/acp", options=options)
        await client.initialize()
        sid = await client.new_session()
        answer, _ = await client.prompt(sid, "crash")  # the agent behind the WebSocket exits: the socket closes
        assert answer["error"]["data"] == {"backend": f"127.0.0.1:{port}", "reason": "exited"}
        answer, before = await client.prompt(sid, "after")  # a new WebSocket, session/load, then the prompt
        assert answer["result"] == {"stopReason": "end_turn"}
        assert [text_of(m) for m in before] == ["[R] echo: after"]
        assert len(bridge.processes) == 2
        await client.close()
