"""Forward and Reverse modes with real peers: SDK and demo backends, the SDK client in both eras.

Each test writes a config, runs ``hopline serve`` and talks to it as a user's MCP
client would. Results through the gateway equal the direct results apart from
namespaced names (draft §8) and documented ``_meta``.
"""

from __future__ import annotations

import json
import subprocess

import httpx
import orjson
import pytest
from mcp import MCPError, StdioServerParameters

from tests.conftest import PY, SERVERS, _launcher, _stop_all
from tests.peers import MODES, bounded, client, exercise, text_of
from tests.helpers import answer_of, write_backends as write_config

DEMO = [PY, "-m", "hopline.demo"]
SDK = [PY, str(SERVERS / "sdk_server.py"), "stdio"]


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory):
    # One gateway for the module's read-only tests: each talks through sessions of its own (and the
    # concurrency test checks that they never cross), so one process serves them all; the
    # no-children-left check runs once, at the end.
    launch, started = _launcher("serve", "--lazy")
    yield launch(write_config(tmp_path_factory.mktemp("two_backends"), {"sdk": (SDK, {}), "demo": (DEMO, {})}))
    _stop_all(started)


@pytest.mark.req("DUAL-HANDSHAKE")
@pytest.mark.parametrize("mode", MODES)
async def test_forward_lists_every_backend_namespaced_and_routes_calls(two_backends, mode):
    async with client(two_backends.url, mode) as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert {"sdk__echo", "sdk__add", "demo__echo", "demo__countdown"} <= names
        assert all("__" in n for n in names)
        assert text_of(await bounded(c.call_tool("sdk__echo", {"text": "to sdk"}))) == "to sdk"
        assert text_of(await bounded(c.call_tool("demo__echo", {"text": "to demo"}))) == "to demo"
        resources = [str(r.uri) for r in (await bounded(c.list_resources())).resources]
        assert "hopline://sdk/test://info" in resources and "hopline://demo/demo://readme" in resources
        read = await bounded(c.read_resource("hopline://sdk/test://info"))
        assert read.contents[0].text == "sdk-test-server info"
        prompt = await bounded(c.get_prompt("sdk__review", {"code": "x = 1"}))
        assert "x = 1" in prompt.messages[0].content.text


@pytest.mark.parametrize("mode", MODES)
async def test_results_equal_direct_apart_from_names(two_backends, mode):
    async with client(StdioServerParameters(command=SDK[0], args=SDK[1:]), mode) as direct:
        base = await bounded(exercise(direct))
        direct_add = (await bounded(direct.call_tool("add", {"a": 2, "b": 3}))).model_dump(exclude={"meta"})
    async with client(two_backends.url, mode) as c:
        through = (await bounded(c.call_tool("sdk__add", {"a": 2, "b": 3}))).model_dump(exclude={"meta"})
        tools = {t.name: t for t in (await bounded(c.list_tools())).tools}
    assert through == direct_add
    assert tools["sdk__add"].input_schema == next(t for t in (await _direct_tools(mode)) if t.name == "add").input_schema
    assert base["add"] == {"result": 5}


async def _direct_tools(mode):
    async with client(StdioServerParameters(command=SDK[0], args=SDK[1:]), mode) as direct:
        return (await bounded(direct.list_tools())).tools


async def test_sampling_elicitation_and_progress_through_the_gateway(two_backends):
    seen: list[float] = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with client(two_backends.url, "legacy") as c:
        assert text_of(await bounded(c.call_tool("sdk__sample_direct", {"prompt": "gw"}))).endswith("sampled:gw")
        assert "yes" in text_of(await bounded(c.call_tool("sdk__elicit_direct", {"message": "ok?"})))
        await bounded(c.call_tool("sdk__progress", {"steps": 3}, progress_callback=on_progress))
    assert seen == [1, 2, 3]


@pytest.mark.req("NS-INVOKE-RESOLVE")
@pytest.mark.parametrize("mode", MODES)
async def test_unknown_names_are_invalid_params_naming_the_name(two_backends, mode):
    async with client(two_backends.url, mode) as c:
        with pytest.raises(MCPError) as info:
            await bounded(c.call_tool("nobody__echo", {"text": "x"}))
        assert info.value.error.code == -32602 and "nobody__echo" in info.value.error.message
        with pytest.raises(MCPError) as info:
            await bounded(c.read_resource("hopline://nobody/x"))
        assert info.value.error.code == -32602


async def test_a_backend_that_cannot_start_does_not_hide_the_others(tmp_path, hopline_serve):
    gw = hopline_serve(write_config(tmp_path, {"demo": (DEMO, {}), "broken": (["/nonexistent/server"], {})}))
    async with client(gw.url, "legacy") as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "demo__echo" in names and not any(n.startswith("broken__") for n in names)
        with pytest.raises(MCPError) as info:  # a configured backend that is down: -31001 naming it, not an unknown tool
            await bounded(c.call_tool("broken__anything", {}))
        assert info.value.error.code == -31001 and info.value.error.data["backend"] == "broken"


@pytest.mark.parametrize("mode", MODES)
async def test_reverse_mode_presents_the_single_backend_as_itself(tmp_path, hopline_serve, mode):
    gw = hopline_serve(write_config(tmp_path, {"only": (SDK, {})}, mode="reverse"))
    async with client(gw.url, mode) as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert {"echo", "add", "sample"} <= names
        assert text_of(await bounded(c.call_tool("echo", {"text": "rev"}))) == "rev"
        # URIs are the backend's own too: nothing tells the client a gateway is there.
        uris = {str(r.uri) for r in (await bounded(c.list_resources())).resources}
        assert "test://info" in uris and not any(u.startswith("hopline://") for u in uris)
        assert (await bounded(c.read_resource("test://info"))).contents


@pytest.mark.parametrize(
    "params",
    [None, {}, {"protocolVersion": 5}, {"protocolVersion": "2025-11-25", "capabilities": []}],
    ids=["no params", "empty", "version not a string", "capabilities not an object"],
)
def test_a_malformed_initialize_is_invalid_params_and_opens_no_session(two_backends, params):
    body = {"jsonrpc": "2.0", "id": 7, "method": "initialize", **({} if params is None else {"params": params})}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    r = httpx.post(two_backends.url, content=orjson.dumps(body), headers=headers, timeout=30)
    assert r.status_code == 200 and r.json()["id"] == 7 and r.json()["error"]["code"] == -32602, r.text
    assert "protocolVersion" in r.text or "capabilities" in r.text
    assert "mcp-session-id" not in r.headers  # the half-made session is closed (streamable_http_server._initialize)


async def test_invalid_cursor_is_invalid_params(two_backends):
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(timeout=20) as http:
        r = await http.post(two_backends.url, content=orjson.dumps(init), headers=headers)
        sid = r.headers["mcp-session-id"]
        assert answer_of(r, 1)["result"]["serverInfo"]["name"] == "hopline"
        bad = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "forged"}}
        r = await http.post(two_backends.url, content=orjson.dumps(bad), headers={**headers, "mcp-session-id": sid})
        assert answer_of(r, 2)["error"]["code"] == -32602  # streamed with list_changed notifications when backends join meanwhile


async def test_desktop_mcpservers_file_just_works(tmp_path, hopline_serve):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"demo": {"command": DEMO[0], "args": DEMO[1:]}}}))
    gw = hopline_serve(str(path))
    async with client(gw.url, "legacy") as c:
        assert "demo__echo" in {t.name for t in (await bounded(c.list_tools())).tools}


@pytest.mark.req("MODE-SET-DECLARE")
@pytest.mark.req("COLLISION-DETERMINISTIC")
def test_declare_a_gateway_config(tmp_path):
    path = write_config(tmp_path, {"demo": (DEMO, {})})
    out = subprocess.run([PY, "-m", "hopline", "declare", path], capture_output=True, timeout=30, check=True)
    decl = orjson.loads(out.stdout)
    # Resilience is on by default; Policy only when authentication or rules are configured.
    assert decl["modes"] == ["forward"] and decl["tier"] == 2 and decl["layers"] == [1, 2, 3, 4, 6, 7]
    assert decl["collision_strategy"] == "prefix"
    assert decl["handshake"]["forward"].startswith("dual-handshake")


async def test_two_clients_with_the_same_ids_get_only_their_own_answers(two_backends):
    import asyncio

    async def one(n: int) -> list[str]:
        async with client(two_backends.url, "legacy") as c:
            return [text_of(await c.call_tool("demo__echo", {"text": f"{n}-{i}"})) for i in range(5)]

    results = await bounded(asyncio.gather(*(one(n) for n in range(4))), 60)
    assert results == [[f"{n}-{i}" for i in range(5)] for n in range(4)]


@pytest.mark.req("STATELESS-IDENTITY")
async def test_stateless_results_carry_the_gateways_identity(two_backends):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}
    async with httpx.AsyncClient(timeout=20) as http:
        listing = await http.post(two_backends.url, content=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}), headers={**headers, "mcp-method": "tools/list"})
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sdk__echo", "arguments": {"text": "m"}, "_meta": meta}}
        called = await http.post(two_backends.url, content=orjson.dumps(call), headers={**headers, "mcp-method": "tools/call", "mcp-name": "sdk__echo"})
    for body in (listing.json(), called.json()):
        result = body["result"]
        assert result["resultType"] == "complete"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hopline"
    assert called.json()["result"]["_meta"]["io.hopline/backend"]["id"] == "sdk"


async def test_tasks_are_routed_by_the_task_id_the_gateway_exposed(tmp_path, hopline_serve):
    gw = hopline_serve(write_config(tmp_path, {"jobs": ([PY, str(SERVERS / "task_server.py")], {}), "demo": (DEMO, {})}))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}

    async def rpc(http, msg_id, method, params, name=None):
        h = {**headers, "mcp-method": method, **({"mcp-name": name} if name else {})}
        r = await http.post(gw.url, content=orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {**params, "_meta": meta}}), headers=h)
        return r.json()

    async with httpx.AsyncClient(timeout=20) as http:
        created = (await rpc(http, 1, "tools/call", {"name": "jobs__job", "arguments": {}}, "jobs__job"))["result"]
        task = created["taskId"]  # the gateway's own id: the backend's route, then 128 random bits
        assert created["resultType"] == "task" and task.startswith("jobs:") and len(task) > len("jobs:t-1")
        status = (await rpc(http, 2, "tasks/get", {"taskId": task}, task))["result"]
        assert status["status"] == "completed" and status["taskId"] == task
        assert status["result"]["content"][0]["text"] == "done t-1"
        for guess in ("jobs:t-1", "nobody:t-1"):  # the backend's own id is no way in
            unknown = await rpc(http, 3, "tasks/get", {"taskId": guess}, guess)
            assert unknown["error"] == {"code": -32602, "message": f"Unknown task: {guess!r}"}


async def test_paging_with_the_gateways_own_cursors_covers_every_item_once(tmp_path, hopline_serve):
    gw = hopline_serve(write_config(tmp_path, {"sdk": (SDK, {}), "demo": (DEMO, {})}, routing={"page_size": 3}))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(timeout=20) as http:
        sid = (await http.post(gw.url, content=orjson.dumps(init), headers=headers)).headers["mcp-session-id"]
        seen, cursor, pages = [], None, 0
        while True:
            params = {"cursor": cursor} if cursor else {}
            r = await http.post(gw.url, content=orjson.dumps({"jsonrpc": "2.0", "id": 2 + pages, "method": "tools/list", "params": params}), headers={**headers, "mcp-session-id": sid})
            result = answer_of(r, 2 + pages)["result"]
            assert len(result["tools"]) <= 3
            seen += [t["name"] for t in result["tools"]]
            pages += 1
            cursor = result.get("nextCursor")
            if not cursor:
                break
    assert len(seen) == len(set(seen)) and pages == -(-len(seen) // 3)
    assert {"sdk__echo", "demo__echo"} <= set(seen)
