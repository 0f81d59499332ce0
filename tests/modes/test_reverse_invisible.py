"""Reverse mode stays invisible (issue 28 item 3; draft §5.3: the client cannot tell the gateway
from the server). Real server-everything (npm) and the official SDK client:

- a tool or prompt name the server does not list goes to the server, so the client gets the
  server's own answer (server-everything answers an unknown tool with an ``isError`` result),
  exactly as directly;
- a name the policy hides is answered exactly as an unknown one (no oracle), and nothing by
  that name runs;
- Forward mode keeps the gateway's ``-32602`` for a name that resolves to no backend.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from mcp import Client, MCPError, StdioServerParameters

from tests.peers import bounded

EVERYTHING = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = shutil.which("node")
if NODE is None or not EVERYTHING.exists():  # pragma: no cover - scripts/test installs it
    pytest.fail(f"server-everything is not installed at {EVERYTHING}; run scripts/test (npm ci in tests/node)", pytrace=False)


def write(tmp_path: Path, **top) -> str:
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"everything": {"command": NODE, "args": [str(EVERYTHING), "stdio"]}}, **top}))
    return str(path)


def seen(result) -> dict:
    return result.model_dump(mode="json", exclude={"meta"})


async def outcome(coro) -> dict:
    """What the client sees: the result, or the JSON-RPC error (code and message)."""
    try:
        return {"result": seen(await bounded(coro))}
    except MCPError as exc:
        return {"error": [exc.error.code, exc.error.message]}


async def unknowns(c: Client, tool: str, prompt: str) -> list[dict]:
    return [await outcome(c.call_tool(tool, {"message": "x"})), await outcome(c.get_prompt(prompt, {}))]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_reverse_mode_gives_the_servers_own_answer_for_unknown_and_hidden_names(tmp_path, hopline_serve, mode):
    async with Client(StdioServerParameters(command=NODE, args=[str(EVERYTHING), "stdio"]), mode="legacy") as d:
        want = await unknowns(d, "no-such-tool", "no-such-prompt")
        want_echo = await unknowns(d, "echo-gone", "simple-gone")
    assert want[0]["result"]["is_error"] is True  # the server's own answer: a tool result, not a JSON-RPC error
    rules = ['!(mcp.kind == "tool" && mcp.tool.name == "echo") && !(mcp.kind == "prompt" && mcp.prompt.name == "simple-prompt")']
    gw = hopline_serve(write(tmp_path, mode="reverse", policy={"rules": rules}))
    async with Client(gw.url, mode=mode) as c:
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "echo" not in names and "get-sum" in names  # hidden by the policy
        assert await unknowns(c, "no-such-tool", "no-such-prompt") == want
        hidden = await unknowns(c, "echo", "simple-prompt")
        # refused exactly as a name the server does not know (its own words, naming what was asked)
        assert hidden == [
            {k: (v if k != "result" else {**v, "content": [{**v["content"][0], "text": v["content"][0]["text"].replace("echo-gone", "echo")}]}) for k, v in want_echo[0].items()},
            {k: [v[0], v[1].replace("simple-gone", "simple-prompt")] if k == "error" else v for k, v in want_echo[1].items()},
        ]
        assert "Echo:" not in str(hidden)  # nothing by that name ran


async def test_forward_mode_keeps_the_gateways_answer_for_an_unknown_name(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path))
    async with Client(gw.url, mode="legacy") as c:
        assert await outcome(c.call_tool("everything__no-such-tool", {})) == {"error": [-32602, "Unknown tool: 'everything__no-such-tool'"]}
