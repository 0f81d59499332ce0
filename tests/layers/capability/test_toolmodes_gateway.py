"""Search and Code mode on a real gateway (``compose/gateway.py``) with real stdio backends
(hopline's demo server and the official SDK test server), through the session's own
dispatch (``tools/list``, ``tools/call``) and the gateway's ToolHost. A surface layer
hides ``sdk__whoami`` from ``bob``: it must be unreachable by all three modes, and
answered exactly like a tool that does not exist.
"""

from __future__ import annotations

import json

import pytest

from hopline.context import Principal
from hopline.layers.capability.toolmodes import CodeMode, Limits, SearchMode, sandbox
from hopline.transports.sandbox_pool import SandboxPool
from tests.conftest import PY, SERVERS
from tests.layers.capability.toolhosts import HideTools, real_gateway

BACKENDS = {"demo": [PY, "-m", "hopline.demo"], "sdk": [PY, str(SERVERS / "sdk_server.py"), "stdio"]}
POLICY = [HideTools("bob", {("sdk", "whoami")})]
BOB = Principal("bob")
HIDDEN = "sdk__whoami"


def unknown_tool_error(name: str) -> dict:
    return {"code": -32602, "message": f"Unknown tool: {name!r}"}


async def test_standard_mode_hides_the_tool_from_the_list_and_the_call():
    async with real_gateway(BACKENDS, surface=POLICY, principal=BOB) as client:
        names = {t["name"] for t in await client.list_tools()}
        assert "sdk__echo" in names and HIDDEN not in names
        assert (await client.call(HIDDEN, {}))["error"] == unknown_tool_error(HIDDEN)
        assert (await client.call("sdk__no_such", {}))["error"] == unknown_tool_error("sdk__no_such")


async def test_search_mode_lists_two_tools_finds_one_by_a_phrase_and_invokes_it():
    async with real_gateway(BACKENDS, mode=SearchMode(), surface=POLICY, principal=BOB) as client:
        tools = await client.list_tools()
        assert [t["name"] for t in tools] == ["get_tool", "invoke_tool"]
        index = tools[0]["description"].split("Available tools: ")[1]
        assert "demo__echo" in index and "sdk__add" in index and HIDDEN not in index
        found = (await client.call("get_tool", {"query": "add two numbers"}))["result"]["structuredContent"]
        assert {r["name"] for r in found["results"][:2]} == {"demo__add", "sdk__add"}
        answer = (await client.call("invoke_tool", {"name": "demo__add", "arguments": {"a": 2, "b": 40}}))["result"]
        assert answer["structuredContent"] == {"sum": 42}
        direct = (await client.call("demo__add", {"a": 2, "b": 40}))["result"]
        assert answer == direct  # invoke_tool is one tools/call, result unchanged


async def test_search_mode_never_shows_or_invokes_the_hidden_tool():
    async with real_gateway(BACKENDS, mode=SearchMode(), surface=POLICY, principal=BOB) as client:
        lookup = (await client.call("get_tool", {"name": HIDDEN}))["result"]["structuredContent"]
        assert lookup["status"] == "no_match" and HIDDEN not in lookup["available_tools"]
        ranked = await client.call("get_tool", {"query": "who am i identity of the caller whoami", "top_k": 20})
        assert HIDDEN not in json.dumps(ranked)
        assert (await client.call("invoke_tool", {"name": HIDDEN, "arguments": {}}))["error"] == unknown_tool_error(HIDDEN)
        assert (await client.call("invoke_tool", {"name": "sdk__nope", "arguments": {}}))["error"] == unknown_tool_error("sdk__nope")


async def test_search_mode_shows_the_tool_to_a_caller_the_policy_allows():
    async with real_gateway(BACKENDS, mode=SearchMode(), surface=POLICY, principal=Principal("alice")) as client:
        lookup = (await client.call("get_tool", {"name": HIDDEN}))["result"]["structuredContent"]
        assert lookup["results"][0]["name"] == HIDDEN
        assert "result" in await client.call("invoke_tool", {"name": HIDDEN, "arguments": {}})


async def test_code_mode_runs_code_that_calls_two_tools_and_combines_them():
    async with real_gateway(BACKENDS, mode=CodeMode(limits=Limits(timeout=10), workers=sandbox.pool(Limits(timeout=10), SandboxPool)), surface=POLICY, principal=BOB) as client:
        (run_code,) = await client.list_tools()
        assert run_code["name"] == "run_code" and HIDDEN not in run_code["description"]
        code = "e = call_tool('demo__echo', {'text': 'hello'})\ns = call_tool('demo__add', a=20, b=22)\nf'{e} {s[\"sum\"]}'"
        answer = (await client.call("run_code", {"code": code}))["result"]
        assert answer["isError"] is False and answer["structuredContent"]["result"] == "hello 42"


async def test_code_mode_cannot_reach_the_hidden_tool():
    async with real_gateway(BACKENDS, mode=CodeMode(limits=Limits(timeout=10), workers=sandbox.pool(Limits(timeout=10), SandboxPool)), surface=POLICY, principal=BOB) as client:
        code = f"try:\n    call_tool('{HIDDEN}')\n    r = 'reached'\nexcept LookupError as e:\n    r = str(e)\n[r, '{HIDDEN}' in list_tools(), get_tool('{HIDDEN}'), search_tools('whoami', 20)]"
        reached, listed, described, searched = (await client.call("run_code", {"code": code}))["result"]["structuredContent"]["result"]
        assert reached == unknown_tool_error(HIDDEN)["message"] and listed is False and described is None
        assert HIDDEN not in json.dumps(searched)


@pytest.mark.parametrize("mode", [SearchMode(), CodeMode(workers=sandbox.pool(Limits(), SandboxPool))])
async def test_direct_calls_of_catalogue_tools_still_obey_policy_in_every_mode(mode):
    async with real_gateway(BACKENDS, mode=mode, surface=POLICY, principal=BOB) as client:
        assert (await client.call(HIDDEN, {}))["error"] == unknown_tool_error(HIDDEN)
