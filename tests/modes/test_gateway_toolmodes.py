"""Tool modes through `hopline serve`, with the official SDK client in both eras (issue 6):
Search mode lists two tools, finds a tool by a phrase and invokes it; Code mode runs code
that calls two tools and combines their results; a tool the policy hides is unreachable
in every mode: not listed, not found, not invocable, not callable from code."""

from __future__ import annotations

import json

import pytest
import yaml
from mcp.shared.exceptions import MCPError

from tests.conftest import PY
from tests.peers import bounded, client

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


def payload(result) -> dict:
    assert not result.is_error, result
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


@pytest.mark.parametrize("era", MODES)
async def test_search_mode_lists_two_tools_finds_by_phrase_and_invokes(tmp_path, hopline_serve, era):
    gw = hopline_serve(write(tmp_path, "search"))
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
async def test_code_mode_runs_code_that_combines_two_tools(tmp_path, hopline_serve, era):
    gw = hopline_serve(write(tmp_path, "code"))
    code = 'total = call_tool("demo__add", {"a": 2, "b": 3})["sum"]\nword = call_tool("locked__echo", {"text": "five"})\nf"{word}={total}"'
    async with client(gw.url, era) as c:
        assert [t.name for t in (await bounded(c.list_tools())).tools] == ["run_code"]
        out = payload(await bounded(c.call_tool("run_code", {"code": code})))
        assert out["result"] == "five=5"


@pytest.mark.parametrize("mode", ["standard", "search", "code"])
async def test_a_hidden_tool_is_unreachable_in_every_mode(tmp_path, hopline_serve, mode):
    gw = hopline_serve(write(tmp_path, mode))
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
