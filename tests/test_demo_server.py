"""The demo server (hopline.demo) and the test backends under tests/servers/.

Three kinds of test:
- the official SDK client drives the demo server over stdio in both eras;
- raw wire: lines written to a server's stdin, lines read from its stdout, for
  what a well-behaved client never sends (bad JSON, the wrong era, bad envelopes);
- the backends the gateway tests rely on: sdk_server.py's sampling, elicitation,
  roots and progress through the SDK client, and fault_server.py's faults.

Every test is bounded (pytest-timeout plus asyncio timeouts) and kills what it spawned.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import mcp_types as t
import orjson
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types.methods import validate_server_result

from tests.peers import start_sdk_http, stop

pytestmark = pytest.mark.timeout(10)

SERVERS = Path(__file__).parent / "servers"
DEMO_ARGV = [sys.executable, "-m", "hopline.demo", "--log-level", "warning"]
SDK_SERVER = str(SERVERS / "sdk_server.py")
FAULT_SERVER = str(SERVERS / "fault_server.py")
MODES = ["legacy", "2026-07-28"]

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def envelope(version: str = "2026-07-28", **params: Any) -> dict[str, Any]:
    """Params carrying the 2026-07-28 per-request envelope."""
    meta = {PV: version, CAPS: {}, INFO: {"name": "raw-test", "version": "0"}, **params.pop("_meta", {})}
    return {**params, "_meta": meta}


def initialize(version: str = "2025-11-25") -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "0"}}


class Wire:
    """A stdio MCP server process driven line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.others: list[dict[str, Any]] = []  # messages read while waiting for a given id

    @classmethod
    async def spawn(cls, *argv: str, stderr: int = asyncio.subprocess.DEVNULL) -> Wire:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr, limit=64 << 20
        )
        return cls(proc)

    async def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(message if isinstance(message, bytes) else orjson.dumps(message) + b"\n")
        await self.proc.stdin.drain()

    async def recv_line(self, timeout: float = 5.0) -> bytes:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise EOFError("the server closed its stdout")
        return line

    async def recv(self, timeout: float = 5.0) -> dict[str, Any]:
        return orjson.loads(await self.recv_line(timeout))

    async def request(self, msg_id: Any, method: str, params: dict[str, Any] | None = None, timeout: float = 5.0) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            body["params"] = params
        await self.send(body)
        return await self.answer(msg_id, timeout)

    async def answer(self, msg_id: Any, timeout: float = 5.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                msg = await self.recv(timeout)
                if "method" not in msg and msg.get("id") == msg_id and type(msg.get("id")) is type(msg_id):
                    return msg
                self.others.append(msg)

    async def close(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self.proc.wait()


@contextlib.asynccontextmanager
async def spawned(*argv: str, **kwargs: Any) -> AsyncIterator[Wire]:
    wire = await Wire.spawn(*argv, **kwargs)
    try:
        yield wire
    finally:
        await wire.close()


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    return response["error"]["code"]


# -- the SDK client against the demo server ---------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_drives_the_demo_server(mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    params = StdioServerParameters(command=sys.executable, args=DEMO_ARGV[1:])
    async with asyncio.timeout(8), Client(params, mode=mode, cache=None) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["echo", "add", "countdown", "whoami"]

        echoed = await client.call_tool("echo", {"text": "héllo"})
        assert not echoed.is_error and echoed.content[0].text == "héllo"

        added = await client.call_tool("add", {"a": 2, "b": 3.5})
        assert added.structured_content == {"sum": 5.5}

        bad = await client.call_tool("add", {"a": "two", "b": 3})
        assert bad.is_error and "'a' must be a number" in bad.content[0].text

        counted = await client.call_tool("countdown", {"steps": 3, "delay_ms": 5}, progress_callback=on_progress)
        assert counted.content[0].text == "liftoff after 3 steps"
        assert progress == [(1, 3, "T-2"), (2, 3, "T-1"), (3, 3, "T-0")]

        who = await client.call_tool("whoami", {})
        assert who.structured_content["era"] == ("handshake" if mode == "legacy" else "modern")
        assert who.structured_content["clientInfo"]["name"] == "mcp"

        readme = await client.read_resource("demo://readme")
        assert readme.contents[0].uri == "demo://readme" and "hopline demo server" in readme.contents[0].text

        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Please greet Ada warmly."

        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.code == -32602 and "no_such_tool" in unknown.value.message


# -- raw wire: the demo server --------------------------------------------------------------
async def test_malformed_lines_get_errors_and_the_server_keeps_serving() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        await wire.send(b"this is {not json\n")
        parse_error = await wire.recv()
        assert parse_error["id"] is None and error_code(parse_error) == -32700
        await wire.send(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')  # a batch
        batch = await wire.recv()
        assert batch["id"] is None and error_code(batch) == -32600
        await wire.send(b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}\n')  # id of the wrong type
        assert error_code(await wire.recv()) == -32600
        await wire.send(b"\xff\xfe not utf-8\n")
        assert error_code(await wire.recv()) == -32700
        await wire.send(b"\n")  # blank lines are skipped silently
        init = await wire.request(1, "initialize", initialize())
        assert init["result"]["protocolVersion"] == "2025-11-25"
        assert (await wire.request("2", "tools/call", {"name": "echo", "arguments": {"text": "still here"}}))["result"][
            "content"
        ][0]["text"] == "still here"
        assert wire.others == []


async def test_parse_error_has_null_id() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        await wire.send(b'{"jsonrpc":"2.0","id":7,"method":\n')
        reply = await wire.recv()
        assert reply["id"] is None and error_code(reply) == -32700


async def test_handshake_first_locks_the_handshake_era() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        init = await wire.request(1, "initialize", initialize("2099-01-01"))
        assert init["result"]["protocolVersion"] == "2025-11-25"  # counter-offer
        assert init["result"]["serverInfo"]["name"] == "hopline-demo"
        await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert (await wire.request(2, "ping"))["result"] == {}
        modern = await wire.request(3, "tools/list", envelope())
        assert error_code(modern) == -32600 and "handshake" in modern["error"]["message"]
        listed = await wire.request(4, "tools/list", {})
        assert "resultType" not in listed["result"] and len(listed["result"]["tools"]) == 4
        validate_server_result("tools/list", "2025-11-25", listed["result"])
        assert (await wire.request(5, "logging/setLevel", {"level": "info"}))["result"] == {}
        missing = await wire.request(6, "resources/read", {"uri": "demo://nope"})
        assert error_code(missing) == -32002


async def test_initialize_echoes_a_supported_older_version() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        init = await wire.request(1, "initialize", initialize("2025-03-26"))
        assert init["result"]["protocolVersion"] == "2025-03-26"


async def test_modern_first_locks_the_modern_era() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        listed = await wire.request(1, "tools/list", envelope())
        result = listed["result"]
        assert result["resultType"] == "complete" and result["cacheScope"] in ("public", "private")
        assert isinstance(result["ttlMs"], int) and result["_meta"][SERVER_INFO]["name"] == "hopline-demo"
        validate_server_result("tools/list", "2026-07-28", result)

        init = await wire.request(2, "initialize", initialize())
        assert error_code(init) == -32022
        assert init["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}

        assert error_code(await wire.request(3, "ping", envelope())) == -32601
        assert error_code(await wire.request(4, "logging/setLevel", envelope(level="info"))) == -32601
        assert error_code(await wire.request(5, "no/such/method", envelope())) == -32601
        assert error_code(await wire.request(6, "tools/list", {})) == -32602  # no _meta
        no_caps = await wire.request(7, "tools/list", {"_meta": {PV: "2026-07-28"}})
        assert error_code(no_caps) == -32602 and "clientCapabilities" in no_caps["error"]["message"]
        missing = await wire.request(8, "resources/read", envelope(uri="demo://nope"))
        assert error_code(missing) == -32602

        discovered = (await wire.request(9, "server/discover", envelope()))["result"]
        assert discovered["supportedVersions"] == ["2026-07-28"] and "tools" in discovered["capabilities"]
        assert discovered["_meta"][SERVER_INFO]["name"] == "hopline-demo"
        validate_server_result("server/discover", "2026-07-28", discovered)
        for n, (method, params) in enumerate(
            [
                ("resources/list", {}),
                ("resources/read", {"uri": "demo://readme"}),
                ("prompts/list", {}),
                ("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}),
                ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
            ],
            start=10,
        ):
            answer = (await wire.request(n, method, envelope(**params)))["result"]
            assert answer["resultType"] == "complete", method
            validate_server_result(method, "2026-07-28", answer)


async def test_unsupported_modern_version_gets_32022() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        reply = await wire.request(1, "tools/list", envelope("2099-01-01"))
        assert error_code(reply) == -32022
        assert reply["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
        # The key alone locked the era: the connection is now modern.
        assert "result" in await wire.request(2, "tools/list", envelope())


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "modern"])
async def test_unknown_tool_is_32602_naming_the_tool(modern: bool) -> None:
    async with spawned(*DEMO_ARGV) as wire:
        if not modern:
            await wire.request(0, "initialize", initialize())
        params = {"name": "frobnicate", "arguments": {}}
        reply = await wire.request(1, "tools/call", envelope(**params) if modern else params)
        assert error_code(reply) == -32602 and "frobnicate" in reply["error"]["message"]


async def test_requests_run_concurrently_and_cancel_stops_a_countdown() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        await wire.request(0, "initialize", initialize())
        slow = {"name": "countdown", "arguments": {"steps": 60, "delay_ms": 100}, "_meta": {"progressToken": "tok"}}
        await wire.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": slow})
        first = await wire.recv()
        assert first["method"] == "notifications/progress" and first["params"]["progressToken"] == "tok"
        # An echo sent now is answered while the countdown is still running.
        echoed = await wire.request(1, "tools/call", {"name": "echo", "arguments": {"text": "fast"}}, timeout=1.0)
        assert echoed["result"]["content"][0]["text"] == "fast"
        # A reused in-flight id is refused rather than cross-wired.
        assert error_code(await wire.request("slow", "ping", timeout=1.0)) == -32600
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})
        await asyncio.sleep(0.1)
        wire.others.clear()
        with pytest.raises(TimeoutError):
            await wire.answer("slow", timeout=0.5)  # no answer for a cancelled request ...
        assert [m for m in wire.others if m.get("method") == "notifications/progress"] == []  # ... and no more progress
        assert (await wire.request(2, "ping"))["result"] == {}


async def test_modern_progress_and_logging_follow_the_request_meta() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        meta = {"progressToken": 5, "io.modelcontextprotocol/logLevel": "info"}
        params = envelope(name="countdown", arguments={"steps": 2, "delay_ms": 0}, _meta=meta)
        reply = await wire.request(1, "tools/call", params)
        assert reply["result"]["resultType"] == "complete"
        assert [m["params"]["progress"] for m in wire.others if m["method"] == "notifications/progress"] == [1, 2]
        assert [m["params"]["level"] for m in wire.others if m["method"] == "notifications/message"] == ["info"]
        wire.others.clear()
        await wire.request(2, "tools/call", envelope(name="countdown", arguments={"steps": 2, "delay_ms": 0}))
        assert wire.others == []  # no token, no log level: nothing but the answer


async def test_stdin_eof_exits_cleanly() -> None:
    async with spawned(*DEMO_ARGV) as wire:
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize()})
        assert wire.proc.stdin is not None
        wire.proc.stdin.close()
        assert "result" in await wire.recv()
        assert await asyncio.wait_for(wire.proc.wait(), 5) == 0


async def test_hopline_cli_demo_server_command_runs_it() -> None:
    from hopline.demo import cli  # the module hopline's COMMANDS table names

    assert callable(cli.add_arguments) and callable(cli.run)
    async with spawned(sys.executable, "-m", "hopline", "--log-level", "warning", "demo-server", "--ttl-ms", "0") as wire:
        reply = await wire.request(1, "tools/list", envelope(), timeout=8)
        assert reply["result"]["ttlMs"] == 0 and reply["result"]["_meta"][SERVER_INFO]["name"] == "hopline-demo"


# -- sdk_server.py through the SDK client ---------------------------------------------------
async def _sampling(context: Any, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    asked = params.messages[0].content
    return t.CreateMessageResult(role="assistant", content=t.TextContent(type="text", text=f"re: {asked.text}"), model="fake-llm")


async def _elicitation(context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"answer": "42"})


async def _roots(context: Any) -> t.ListRootsResult:
    return t.ListRootsResult(roots=[t.Root(uri="file:///tmp/project", name="project")])


async def _exercise_sdk_server(target: Any, mode: str) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(
        target, mode=mode, cache=None, sampling_callback=_sampling, elicitation_callback=_elicitation, list_roots_callback=_roots
    ) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        sampled = await client.call_tool("sample", {"prompt": "hi"})
        assert not sampled.is_error and sampled.content[0].text == "fake-llm: re: hi"
        elicited = await client.call_tool("elicit", {"message": "the answer?"})
        assert elicited.content[0].text == "accepted: 42"
        rooted = await client.call_tool("roots", {})
        assert orjson.loads(rooted.content[0].text) == ["file:///tmp/project"]
        done = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
        assert done.content[0].text == "done after 3 steps" and progress == [1, 2, 3]
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3.0}
        if mode == "legacy":  # a real server→client request on the wire
            assert (await client.call_tool("sample_direct", {"prompt": "yo"})).content[0].text == "fake-llm: re: yo"
        else:  # a modern request has no back-channel
            with pytest.raises(MCPError) as refused:
                await client.call_tool("sample_direct", {"prompt": "yo"})
            assert refused.value.code == -32600


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_server_sampling_elicitation_roots_progress_over_stdio(mode: str) -> None:
    async with asyncio.timeout(9):
        await _exercise_sdk_server(StdioServerParameters(command=sys.executable, args=[SDK_SERVER, "stdio"]), mode)


async def test_sdk_server_modern_sampling_is_an_input_required_result_on_the_wire() -> None:
    async with spawned(sys.executable, SDK_SERVER, "stdio") as wire:
        params = envelope(name="sample", arguments={"prompt": "hi"}, _meta={CAPS: {"sampling": {}}})
        reply = (await wire.request(1, "tools/call", params, timeout=8))["result"]
        assert reply["resultType"] == "input_required" and isinstance(reply["requestState"], str)
        [request] = reply["inputRequests"].values()
        assert request["method"] == "sampling/createMessage"
        assert request["params"]["messages"][0]["content"]["text"] == "hi"


@pytest.mark.timeout(20)
async def test_sdk_server_over_streamable_http_in_both_eras() -> None:
    proc, url = start_sdk_http()  # it binds port 0 and announces the port it got
    try:
        for mode in MODES:
            async with asyncio.timeout(5):
                await _exercise_sdk_server(url, mode)
    finally:
        stop(proc)


# -- fault_server.py -----------------------------------------------------------------------
async def test_fault_server_crash_exits_with_status_3_without_answering() -> None:
    async with spawned(sys.executable, FAULT_SERVER) as wire:
        await wire.request(1, "initialize", initialize())
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "crash"}})
        with pytest.raises(EOFError):
            await wire.recv()
        assert await asyncio.wait_for(wire.proc.wait(), 5) == 3


async def test_fault_server_hang_never_answers_but_the_server_stays_alive() -> None:
    async with spawned(sys.executable, FAULT_SERVER) as wire:
        await wire.request(1, "initialize", initialize())
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hang"}})
        with pytest.raises(TimeoutError):
            await wire.answer(2, timeout=1.0)
        echoed = await wire.request(3, "tools/call", {"name": "echo", "arguments": {"text": "alive"}})
        assert echoed["result"]["content"][0]["text"] == "alive"
        assert wire.proc.returncode is None


async def test_fault_server_garbage_then_the_real_answer() -> None:
    async with spawned(sys.executable, FAULT_SERVER, "--garbage-first") as wire:
        banner = [await wire.recv_line(), await wire.recv_line()]
        assert b"not JSON" in banner[0] and b"jsonrpc" not in banner[1]
        await wire.request(1, "initialize", initialize())
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "garbage"}})
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(await wire.recv_line())
        stray = await wire.recv()
        assert stray["id"].startswith("fault-unknown-")
        assert "real answer" in (await wire.recv())["result"]["content"][0]["text"]


async def test_fault_server_big_stderr_noise_and_crash_after() -> None:
    async with spawned(sys.executable, FAULT_SERVER, "--crash-after", "3", stderr=asyncio.subprocess.PIPE) as wire:
        assert wire.proc.stderr is not None
        noise = asyncio.ensure_future(wire.proc.stderr.read())  # drain stderr, as a gateway must
        await wire.request(1, "initialize", initialize())
        big = await wire.request(2, "tools/call", {"name": "big", "arguments": {"bytes": 3 << 20}})
        assert len(big["result"]["content"][0]["text"]) == 3 << 20
        loud = await wire.request(3, "tools/call", {"name": "stderr_noise", "arguments": {"bytes": 1 << 20}})
        assert loud["result"]["content"][0]["text"] == f"wrote {1 << 20} bytes to stderr"
        last = await wire.request(4, "tools/call", {"name": "echo", "arguments": {"text": "third"}})
        assert last["result"]["content"][0]["text"] == "third"
        assert await asyncio.wait_for(wire.proc.wait(), 5) == 3
        assert len(await asyncio.wait_for(noise, 5)) >= 1 << 20
