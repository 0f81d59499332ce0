"""A test ACP agent that consumes ACP-transport MCP servers natively (raw NDJSON, asyncio).

``--mcp D`` (d1..d5) is the MCP-over-ACP dialect it speaks (reference §3.3); it
advertises ``mcpCapabilities.acp`` (d2/d4/d5) or ``mcp_acp_transport`` (d1/d3,
under ``agentCapabilities._meta``). It reads whatever declaration shape it is
given and names the server in its own dialect's spelling.

A prompt ``call TOOL [ARGS-JSON]`` calls TOOL on every ACP server of the
session (d1-d4: connect, initialize, notifications/initialized, tools/call,
disconnect; d5: one connectionless tools/call) and answers one
``agent_message_chunk`` whose text is JSON ``{"results": [...], "notes": [...]}``:
each result is the tool's text, or ``{"error": ...}`` (outer or inner error),
and notes are the ``mcp/message`` notifications the providers sent meanwhile.
A prompt ``raw METHOD PARAMS-JSON`` sends that one ACP request and reports its
answer. A prompt ``crash`` exits with status 3. Other prompts get "echo: TEXT". ``--log FILE`` appends every received line.
``--load-session`` advertises ``loadSession``: a load takes the session's new
``mcpServers`` and replays one ``history: SESSION`` chunk before answering.
``session/close`` forgets the session. A provider's ``sampling/createMessage``
request is answered with the text "sampled" from model "agent-llm".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

SERVER_PARAM = {"d1": "url", "d2": "acpId", "d3": "acp_url", "d4": "serverId"}


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.mcp = args.mcp
        self.load = args.load_session
        self.log = open(args.log, "a") if args.log else None
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future] = {}
        self.sessions: dict[str, list[str]] = {}
        self.notes: list[dict] = []
        self.tasks: set[asyncio.Task] = set()

    def send(self, body: dict) -> None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **body}) + "\n")
        sys.stdout.flush()

    async def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        future = self.waiting[self.next_id] = asyncio.get_running_loop().create_future()
        self.send({"id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(future, 10)

    def handle(self, msg: dict) -> None:
        if self.log:
            self.log.write(json.dumps(msg) + "\n")
            self.log.flush()
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None:
            future = self.waiting.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_result(msg)
        elif method == "initialize":
            caps: dict = {"loadSession": self.load}
            if self.mcp in ("d1", "d3"):
                caps["_meta"] = {"mcp_acp_transport": True}
            else:
                caps["mcpCapabilities"] = {"acp": True}
            self.send({"id": msg_id, "result": {"protocolVersion": 1, "agentCapabilities": caps, "agentInfo": {"name": "mcp-agent", "version": "1"}}})
        elif method == "session/new":
            sid = f"mcp-sess-{len(self.sessions) + 1}"
            self.sessions[sid] = [v for s in params.get("mcpServers", []) if (v := server_id(s))]
            self.send({"id": msg_id, "result": {"sessionId": sid}})
        elif method == "session/load" and self.load:
            sid = params.get("sessionId")
            self.sessions[sid] = [v for s in params.get("mcpServers", []) if (v := server_id(s))]
            self.send({"method": "session/update", "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"history: {sid}"}}}})
            self.send({"id": msg_id, "result": {}})
        elif method == "session/close":
            self.sessions.pop(params.get("sessionId"), None)
            self.send({"id": msg_id, "result": {}})
        elif method == "session/prompt":
            task = asyncio.ensure_future(self.prompt(msg_id, params))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif method in ("mcp/message", "_mcp/message") and msg_id is None:
            self.notes.append(params)
        elif method in ("mcp/message", "_mcp/message") and params.get("method") == "sampling/createMessage":
            self.send({"id": msg_id, "result": {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "agent-llm"}})
        elif msg_id is not None:
            self.send({"id": msg_id, "error": {"code": -32601, "message": "Method not found", "data": {"method": method}}})

    async def prompt(self, msg_id, params: dict) -> None:
        sid = params.get("sessionId")
        text = " ".join(b.get("text", "") for b in params.get("prompt", []))
        word, _, rest = text.partition(" ")
        if word == "crash":
            os._exit(3)
        if word == "call":
            tool, _, args = rest.partition(" ")
            self.notes = []
            results = [await self.call(server, tool, json.loads(args or "{}")) for server in self.sessions.get(sid, [])]
            out = json.dumps({"results": results, "notes": self.notes})
        elif word == "raw":
            method, _, body = rest.partition(" ")
            out = json.dumps(await self.request(method, json.loads(body or "{}")))
        else:
            out = f"echo: {text}"
        self.send({"method": "session/update", "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": out}}}})
        self.send({"id": msg_id, "result": {"stopReason": "end_turn"}})

    async def call(self, server: str, tool: str, arguments: dict):
        call = {"name": tool, "arguments": arguments, "_meta": {"progressToken": "tok"}}
        if self.mcp == "d5":
            answer = await self.request("mcp/message", {"serverId": server, "requestId": "r-1", "method": "tools/call", "params": call})
            if "error" in answer:
                return {"error": answer["error"]}
            outcome = answer["result"]
            return text_of(outcome["result"]) if "result" in outcome else {"error": outcome["error"]}
        prefix = "_mcp" if self.mcp in ("d1", "d3") else "mcp"
        connect = {SERVER_PARAM[self.mcp]: server}
        if self.mcp == "d1":
            connect["connectionId"] = "agent-conn-1"
        answer = await self.request(f"{prefix}/connect", connect)
        if "error" in answer:
            return {"error": answer["error"]}
        cid = answer["result"].get("connection_id" if self.mcp == "d3" else "connectionId")
        init = await self.request(f"{prefix}/message", {"connectionId": cid, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcp-agent", "version": "1"}}})
        if "result" not in init:  # e.g. a provider that speaks only MCP 2026-07-28 (no initialize)
            init = {"error": init.get("error")}
        self.send({"method": f"{prefix}/message", "params": {"connectionId": cid, "method": "notifications/initialized"}})
        answer = await self.request(f"{prefix}/message", {"connectionId": cid, "method": "tools/call", "params": call})
        if self.mcp in ("d1", "d3"):
            self.send({"method": "_mcp/disconnect", "params": {("connection_id" if self.mcp == "d3" else "connectionId"): cid}})
        else:
            assert (await self.request("mcp/disconnect", {"connectionId": cid})).get("result") == {}
        return text_of(answer["result"]) if "result" in answer else {"error": answer["error"]}


def server_id(entry: dict) -> str | None:
    if entry.get("type") == "acp":
        return entry.get("serverId") or entry.get("id")
    url = entry.get("url", "")
    return url if url.startswith("acp:") else None


def text_of(result: dict):
    return json.loads(result["content"][0]["text"]) if result["content"][0]["text"].startswith("{") else result["content"][0]["text"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mcp", default="d4", choices=["d1", "d2", "d3", "d4", "d5"])
    parser.add_argument("--log", default="")
    parser.add_argument("--load-session", action="store_true")
    agent = Agent(parser.parse_args())
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            agent.handle(json.loads(line))


if __name__ == "__main__":
    asyncio.run(main())
