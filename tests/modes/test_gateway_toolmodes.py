"""Tool modes through `hopline serve`, with the official SDK client in both eras (issue 6):
Search mode lists two tools, finds a tool by a phrase and invokes it; Code mode runs code
that calls two tools and combines their results; a tool the policy hides is unreachable
in every mode: not listed, not found, not invocable, not callable from code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mcp.shared.exceptions import MCPError

from tests.conftest import PY, _launcher, _stop_all
from tests.peers import ChangeWatcher, bounded, client

MODES = ["legacy", "2026-07-28"]
# Everyone may use every tool but `add` on backend `locked` (an allow rule per caller).
POLICY = {"rules": ['!(mcp.kind == "tool" && mcp.backend == "locked" && mcp.tool.name == "add")']}


def write(tmp_path, mode: str, **extra) -> str:
    conf = {
        "backends": {b: {"command": PY, "args": ["-m", "hopline.demo"]} for b in ("demo", "locked")},
        "tools": {"mode": mode},
        "policy": POLICY,
        **extra,
    }
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


@pytest.fixture(scope="module")
def gateway_of(tmp_path_factory):
    """``gateway_of(name)``: one gateway per configuration for the whole module, started when a test
    first asks for it (``standard``, ``search``, ``code`` or ``grouped``). The tests that share one only
    read through it, each in a client session of its own; the demo backends keep no state."""
    launch, started = _launcher("serve", "--lazy")
    gateways = {}

    def get(name: str):
        if name not in gateways:
            tmp = tmp_path_factory.mktemp(name)
            gateways[name] = launch(write_grouped(tmp) if name == "grouped" else write(tmp, name))
        return gateways[name]

    yield get
    _stop_all(started)


def payload(result) -> dict:
    assert not result.is_error, result
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


@pytest.mark.parametrize("era", MODES)
async def test_search_mode_lists_two_tools_finds_by_phrase_and_invokes(gateway_of, era):
    gw = gateway_of("search")
    async with client(gw.url, era) as c:
        tools = (await bounded(c.list_tools())).tools
        assert sorted(t.name for t in tools) == ["get_tool", "invoke_tool"]
        index = next(t for t in tools if t.name == "get_tool").description
        assert "demo__add" in index and "locked__echo" in index and "locked__add" not in index

        found = payload(await bounded(c.call_tool("get_tool", {"query": "sum of two numbers"})))
        assert found["results"][0]["name"] == "demo__add"
        assert set(found["results"][0]) >= {"name", "tool_description", "args"}
        exact = payload(await bounded(c.call_tool("get_tool", {"name": "demo__echo"})))
        assert [r["name"] for r in exact["results"]] == ["demo__echo"]

        done = await bounded(c.call_tool("invoke_tool", {"name": "demo__add", "arguments": {"a": 20, "b": 22}}))
        assert done.structured_content == {"sum": 42}


@pytest.mark.parametrize("era", MODES)
async def test_code_mode_runs_code_that_combines_two_tools(gateway_of, era):
    gw = gateway_of("code")
    code = 'total = call_tool("demo__add", {"a": 2, "b": 3})["sum"]\nword = call_tool("locked__echo", {"text": "five"})\nf"{word}={total}"'
    async with client(gw.url, era) as c:
        assert [t.name for t in (await bounded(c.list_tools())).tools] == ["run_code"]
        out = payload(await bounded(c.call_tool("run_code", {"code": code})))
        assert out["result"] == "five=5"


@pytest.mark.parametrize("mode", ["standard", "search", "code"])
async def test_a_hidden_tool_is_unreachable_in_every_mode(gateway_of, mode):
    gw = gateway_of(mode)
    async with client(gw.url, "legacy") as c:
        listed = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "locked__add" not in listed
        # The same refusal as for a tool that does not exist, by every entry point.
        for name in ("locked__add", "locked__nope"):
            with pytest.raises(MCPError) as info:
                await bounded(c.call_tool(name, {"a": 1, "b": 1}))
            assert info.value.error.code == -32602 and name in info.value.error.message
        if mode == "search":
            none = payload(await bounded(c.call_tool("get_tool", {"name": "locked__add"})))
            assert none["results"] == [] and none["status"] == "no_match" and "locked__add" not in none["available_tools"]
            ranked = payload(await bounded(c.call_tool("get_tool", {"query": "add numbers", "top_k": 20})))
            assert "locked__add" not in [r["name"] for r in ranked["results"]]
            for name in ("locked__add", "locked__nope"):  # invoke_tool answers as tools/call would
                with pytest.raises(MCPError) as info:
                    await bounded(c.call_tool("invoke_tool", {"name": name, "arguments": {"a": 1, "b": 1}}))
                assert (info.value.error.code, info.value.error.message) == (-32602, f"Unknown tool: {name!r}")
        if mode == "code":
            out = await bounded(c.call_tool("run_code", {"code": 'call_tool("locked__add", {"a": 1, "b": 1})'}))
            assert out.is_error and "Unknown tool: 'locked__add'" in out.content[0].text
            names = payload(await bounded(c.call_tool("run_code", {"code": "list_tools()"})))["result"]
            assert "locked__add" not in names and "demo__add" in names


# -- tool modes per backend group and per endpoint -----------------------------------------
def write_grouped(tmp_path) -> str:
    """`/mcp`: `demo` in full, `locked` behind Search; `/mcp/search` and `/mcp/code`: every backend in one mode."""
    return write(
        tmp_path,
        "standard",
        tools={
            "mode": "standard",
            "groups": {"bulk": {"backends": ["locked"], "mode": "search"}},
            "endpoints": {"/mcp/search": "search", "/mcp/code/": {"mode": "code"}},
        },
    )


def at(gw, path: str) -> str:
    return gw.url.rsplit("/mcp", 1)[0] + path


@pytest.mark.parametrize("era", MODES)
async def test_a_group_behind_search_next_to_tools_listed_in_full(gateway_of, era):
    gw = gateway_of("grouped")
    async with client(gw.url, era) as c:
        tools = {t.name: t for t in (await bounded(c.list_tools())).tools}
        assert {"get_tool", "invoke_tool", "demo__add", "demo__echo"} <= set(tools)
        assert not any(n.startswith("locked__") for n in tools)
        index = tools["get_tool"].description
        assert "locked__echo" in index and "demo__" not in index and "locked__add" not in index  # the group only, as policy allows
        found = payload(await bounded(c.call_tool("get_tool", {"query": "echo the text back", "top_k": 20})))
        assert found["results"] and all(r["name"].startswith("locked__") for r in found["results"])
        done = await bounded(c.call_tool("invoke_tool", {"name": "locked__echo", "arguments": {"text": "hi"}}))
        assert done.content[0].text == "hi"
        # invoke_tool reaches only its group: a tool listed in full is another group's, unknown to it.
        with pytest.raises(MCPError) as info:
            await bounded(c.call_tool("invoke_tool", {"name": "demo__echo", "arguments": {"text": "hi"}}))
        assert (info.value.error.code, info.value.error.message) == (-32602, "Unknown tool: 'demo__echo'")
        assert (await bounded(c.call_tool("demo__echo", {"text": "full"}))).content[0].text == "full"
        for name in ("locked__add", "locked__nope"):  # hidden and absent: one answer, by both entry points
            for call in (c.call_tool(name, {"a": 1, "b": 1}), c.call_tool("invoke_tool", {"name": name, "arguments": {}})):
                with pytest.raises(MCPError) as info:
                    await bounded(call)
                assert (info.value.error.code, info.value.error.message) == (-32602, f"Unknown tool: {name!r}")


@pytest.mark.parametrize("era", MODES)
async def test_each_endpoint_shows_the_same_backends_in_its_own_mode(gateway_of, era):
    gw = gateway_of("grouped")
    async with client(at(gw, "/mcp/search"), era) as c:
        tools = (await bounded(c.list_tools())).tools
        assert sorted(t.name for t in tools) == ["get_tool", "invoke_tool"]
        index = next(t for t in tools if t.name == "get_tool").description
        assert "demo__add" in index and "locked__echo" in index and "locked__add" not in index
        assert (await bounded(c.call_tool("invoke_tool", {"name": "demo__add", "arguments": {"a": 1, "b": 2}}))).structured_content == {"sum": 3}
    async with client(at(gw, "/mcp/code"), era) as c:
        assert [t.name for t in (await bounded(c.list_tools())).tools] == ["run_code"]
        code = 'f"{call_tool(\'locked__echo\', {\'text\': \'n\'})}={call_tool(\'demo__add\', {\'a\': 4, \'b\': 4})[\'sum\']}"'
        assert payload(await bounded(c.call_tool("run_code", {"code": code})))["result"] == "n=8"
        out = await bounded(c.call_tool("run_code", {"code": 'call_tool("locked__add", {"a": 1, "b": 1})'}))
        assert out.is_error and "Unknown tool: 'locked__add'" in out.content[0].text


async def test_endpoints_keep_their_own_sessions_and_are_declared(gateway_of):
    import httpx

    gw = gateway_of("grouped")
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(timeout=10) as http:
        opened = await http.post(gw.url, json=init, headers=headers)
        sid = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        own = {**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        assert (await http.post(gw.url, json=listing, headers=own)).status_code == 200
        # A session id is its endpoint's: elsewhere it is unknown, never a way into another view.
        assert (await http.post(at(gw, "/mcp/search"), json=listing, headers=own)).status_code == 404
        declared = (await http.get(at(gw, "/.well-known/agent-tool-proxy"))).json()
    assert declared["tool_mode"] == "standard"
    assert declared["tool_modes"] == {
        "/mcp": {"mode": "standard", "backends": {"search": ["locked"]}},
        "/mcp/search": {"mode": "search"},
        "/mcp/code": {"mode": "code"},
    }
    assert declared["endpoints"]["mcp /mcp/search"] == at(gw, "/mcp/search")


async def test_a_reload_that_changes_the_tool_mode_is_signalled_and_applied(tmp_path, hopline_serve):
    import asyncio

    path = write(tmp_path, "standard", reload_interval=0.1)
    gw = hopline_serve(path)
    watcher = ChangeWatcher()
    async with client(gw.url, "legacy", message_handler=watcher) as c:
        assert "demo__add" in {t.name for t in (await bounded(c.list_tools())).tools}
        conf = yaml.safe_load(Path(path).read_text())
        conf["tools"] = {"mode": "standard", "groups": {"big": {"backends": ["demo"], "mode": "search"}}}
        Path(path).write_text(yaml.safe_dump(conf))
        await asyncio.wait_for(watcher.changed.wait(), 10)
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert {"get_tool", "invoke_tool", "locked__echo"} <= names and not any(n.startswith("demo__") for n in names)
