"""hopline's built-in demo ACP agent: ``python -m hopline.demo.acp_agent``.

An agent for trying the ACP conductor offline, with no model and no credentials
(``examples/acp-demo.yaml``). It speaks ACP on stdin/stdout (newline-delimited
JSON-RPC, protocol version 1) on the demo server's stdio shell, never an SDK, and is
deterministic: the same prompt always gets the same answer.

- ``initialize``: agent info ``hopline-demo-agent``, ``mcpCapabilities.acp``: it takes
  MCP servers over ACP (the conductor's gateway component gives it one per session).
- ``session/new``: a session ``demo-N``; it keeps the session's ACP-transport MCP
  servers (others are listed by ``tools`` as not reachable by this agent).
- ``session/prompt`` by the prompt's text, each answer streamed as ``session/update``
  notifications before ``{"stopReason": "end_turn"}``:

  - ``tools``: one chunk listing each server's tools (MCP ``tools/list``);
  - ``call TOOL {JSON}``: a ``tool_call`` update, MCP ``tools/call`` on the first
    server listing TOOL, a ``tool_call_update`` (completed or failed) and a chunk
    with the tool's text;
  - anything else: two chunks, ``echo: TEXT`` and a hint naming the commands.

- ``session/cancel`` is accepted (every prompt ends at once); other requests get
  -32601. MCP over ACP uses the connectionless form (``mcp/message {serverId,
  requestId, method, params}``); the conductor translates for proxies that speak
  another dialect.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from hopline.demo.server import LineOutbox, open_stdio

NAME = "hopline-demo-agent"
HINT = 'commands: `tools` lists the MCP tools of this session, `call TOOL {"arg": ...}` calls one'
CALL_WAIT = 60.0  # seconds for one MCP request (a backend's first start may be slow)


class DemoAgent:
    def __init__(self, out: LineOutbox) -> None:
        self.out = out
        self.sessions: dict[str, list[dict[str, Any]]] = {}  # session id -> its mcpServers
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.ids = itertools.count(1)
        self.tasks: set[asyncio.Task[None]] = set()

    def handle(self, msg: dict[str, Any]) -> None:
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None:  # an answer to one of our requests
            future = self.waiting.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_result(msg)
        elif method == "initialize":
            self.reply(
                msg_id,
                {
                    "protocolVersion": 1,
                    "agentInfo": {"name": NAME, "version": "1"},
                    "authMethods": [],
                    "agentCapabilities": {
                        "loadSession": False,
                        "mcpCapabilities": {"acp": True, "http": False, "sse": False},
                    },
                },
            )
        elif method == "session/new":
            sid = f"demo-{len(self.sessions) + 1}"
            servers = params.get("mcpServers")
            self.sessions[sid] = [s for s in servers if isinstance(s, dict)] if isinstance(servers, list) else []
            self.reply(msg_id, {"sessionId": sid})
        elif method == "session/prompt" and params.get("sessionId") in self.sessions:
            task = asyncio.ensure_future(self.prompt(msg_id, params["sessionId"], params.get("prompt") or []))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif method == "session/prompt":
            self.out.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": "unknown session"}})
        elif method == "session/cancel" or msg_id is None:
            pass  # notifications: nothing to stop, every prompt ends at once
        else:
            self.out.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "error": {"code": -32601, "message": "Method not found", "data": {"method": method}},
                }
            )

    def reply(self, msg_id: Any, result: dict[str, Any]) -> None:
        self.out.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def update(self, sid: str, update: dict[str, Any]) -> None:
        self.out.send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})

    def say(self, sid: str, text: str) -> None:
        self.update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})

    async def prompt(self, msg_id: Any, sid: str, blocks: list[Any]) -> None:
        text = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text").strip()
        word, _, rest = text.partition(" ")
        if word == "tools":
            self.say(sid, await self.list_tools(sid))
        elif word == "call":
            await self.call(sid, *rest.strip().partition(" ")[::2])
        else:
            self.say(sid, f"echo: {text}")
            self.say(sid, HINT)
        self.reply(msg_id, {"stopReason": "end_turn"})

    async def list_tools(self, sid: str) -> str:
        lines = []
        for server in self.sessions[sid]:
            name = server.get("name", "?")
            if server.get("type") != "acp":
                lines.append(f"{name}: not reachable by this agent (it takes MCP servers over ACP only)")
                continue
            outcome = await self.mcp(server["serverId"], "tools/list", {})
            tools = [t.get("name") for t in outcome.get("result", {}).get("tools", [])]
            lines.append(
                f"{name}: {', '.join(tools) or '(no tools)'}"
                if "result" in outcome
                else f"{name}: {outcome['error'].get('message')}"
            )
        return "\n".join(lines) or "no MCP servers in this session"

    async def call(self, sid: str, tool: str, raw: str) -> None:
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError:
            arguments = None
        if not tool or not isinstance(arguments, dict):
            self.say(sid, 'usage: call TOOL {"arg": value}  (arguments as a JSON object)')
            return
        call_id = f"call-{next(self.ids)}"
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": tool,
                "kind": "other",
                "status": "in_progress",
                "rawInput": arguments,
            },
        )
        text, ok = f"no MCP server of this session has a tool {tool!r}", False
        for server in (s for s in self.sessions[sid] if s.get("type") == "acp"):
            listed = await self.mcp(server["serverId"], "tools/list", {})
            if tool not in {t.get("name") for t in listed.get("result", {}).get("tools", [])}:
                continue
            outcome = await self.mcp(server["serverId"], "tools/call", {"name": tool, "arguments": arguments})
            result = outcome.get("result")
            if result is None:
                text = f"error: {outcome['error'].get('message')}"
            else:
                text = "\n".join(c.get("text", json.dumps(c)) for c in result.get("content", []))
                ok = not result.get("isError")
            break
        content = [{"type": "content", "content": {"type": "text", "text": text}}]
        self.update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "completed" if ok else "failed",
                "content": content,
            },
        )
        self.say(sid, f"{tool}: {text}")

    async def mcp(self, server_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One MCP request over ACP; its inner outcome, ``{"result"}`` or ``{"error"}``."""
        rid = next(self.ids)
        future = self.waiting[rid] = asyncio.get_running_loop().create_future()
        self.out.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "mcp/message",
                "params": {"serverId": server_id, "requestId": f"mcp-{rid}", "method": method, "params": params},
            }
        )
        try:
            answer = await asyncio.wait_for(future, CALL_WAIT)
        except asyncio.TimeoutError:
            self.waiting.pop(rid, None)
            return {"error": {"message": f"no answer within {CALL_WAIT:g} s"}}
        if "error" in answer:
            return {"error": answer["error"]}
        outcome = answer.get("result")
        return (
            outcome
            if isinstance(outcome, dict) and ("result" in outcome or "error" in outcome)
            else {"error": {"message": "malformed answer"}}
        )


async def serve() -> int:
    reader, out = await open_stdio()
    agent = DemoAgent(out)
    while line := await reader.readline():
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            out.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if isinstance(msg, dict):
            agent.handle(msg)
        await out.drain()
    prompts = list(agent.tasks)
    for task in prompts:
        task.cancel()
    await asyncio.gather(*prompts, return_exceptions=True)  # cancelled, and awaited
    await out.aclose()
    return 0


def main() -> int:
    try:
        return asyncio.run(serve())
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
