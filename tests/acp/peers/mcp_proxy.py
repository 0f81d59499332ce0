"""A test proxy that declares an ACP-transport MCP server in every session and serves it.

Built on proxy.py (same handshake, envelopes and options). ``--mcp D`` (d1..d5,
default: its ``--dialect``) chooses how it declares the server and speaks
MCP-over-ACP (reference §3.3). The server is a tiny hand-written MCP server:
``initialize``, ``ping``, ``tools/list`` and ``tools/call`` of

- ``whoami``: answers JSON text ``{"session": <params._meta["io.hopline/acp-session-id"]>,
  "server": <its server id>, "declaredIn": <the session id it learned from the
  session/new answer>, "connectMeta": <that key in the connect's _meta>}``;
- ``progress {steps}``: sends ``notifications/progress`` (1..steps) to the consumer
  first, then answers "done";
- ``fail``: answers an inner MCP error (-32000 "tool failed").

Every other inner method gets -32601. ``--crash-on`` also applies to
``session/load`` prompts through proxy.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid

from proxy import ALL_ENVELOPES, HANDSHAKE, Proxy

KEY = "io.hopline/acp-session-id"
MODERN = "io.modelcontextprotocol/protocolVersion"
SETUP = {"session/new", "session/load", "session/resume", "session/fork"}
CONNECT_PARAM = {"d1": "url", "d2": "acpId", "d3": "acp_url", "d4": "serverId"}
MESSAGE = {"d1": "_mcp/message", "d2": "mcp/message", "d3": "_mcp/message", "d4": "mcp/message", "d5": "mcp/message"}
TOOLS = [
    {"name": "whoami", "description": "which ACP session am I serving?", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "progress", "description": "reports progress", "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"}}}},
    {"name": "fail", "description": "always fails", "inputSchema": {"type": "object", "properties": {}}},
]


class McpProxy(Proxy):
    def __init__(self, args: argparse.Namespace, out) -> None:
        super().__init__(args, out)
        self.mcp = args.mcp or args.dialect
        self.servers: dict[str, dict] = {}  # server id (as declared) → {"session": ..., "connectMeta": ...}
        self.setups: dict[int, list[str]] = {}  # our envelope id → server ids declared in it
        self.connections: dict[object, str] = {}  # connection id → server id
        self.minted = 0

    def handle(self, msg: dict) -> None:
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params")
        if method is None and msg_id in self.setups:
            result = msg.get("result") or {}
            for sid in self.setups.pop(msg_id):
                self.servers[sid]["session"] = result.get("sessionId", self.servers[sid]["session"])
        if method in ALL_ENVELOPES and isinstance(params, dict) and str(params.get("method", "")).lstrip("_").startswith("mcp/"):
            if self.log:
                self.log.write(json.dumps(msg) + "\n")
                self.log.flush()
            return self.serve(msg_id, params["method"], params.get("params") or {})
        if method in SETUP:
            params = dict(params or {})
            server_id = f"acp:{uuid.uuid4()}" if self.mcp in ("d1", "d3") else f"srv-{uuid.uuid4().hex[:12]}"
            self.servers[server_id] = {"session": params.get("sessionId"), "connectMeta": None}
            params["mcpServers"] = [*params.get("mcpServers", []), self.declaration(server_id)]
            msg = {**msg, "params": params}
            super().handle(msg)
            self.setups[self.next_id] = [server_id]
            return
        super().handle(msg)

    def declaration(self, server_id: str) -> dict:
        if self.mcp in ("d1", "d3"):
            return {"type": "http", "name": "acp-tools", "url": server_id, "headers": []}
        return {"type": "acp", "name": "acp-tools", ("id" if self.mcp == "d2" else "serverId"): server_id}

    # -- the MCP side -------------------------------------------------------------------
    def serve(self, env_id, method: str, p: dict) -> None:
        def answer(**fields) -> None:
            if env_id is not None:
                self.send({"id": env_id, **fields})

        if method.endswith("/connect"):
            server_id = p.get(CONNECT_PARAM.get(self.mcp, "serverId"))
            if server_id not in self.servers:
                return answer(error={"code": -32602, "message": f"not my server: {p}"})
            self.servers[server_id]["connectMeta"] = (p.get("_meta") or {}).get(KEY)
            self.minted += 1
            cid = p["connectionId"] if self.mcp == "d1" else f"pc-{self.minted}"
            self.connections[cid] = server_id
            extra = {"serverInfo": {"name": "acp-tools", "version": "1"}} if self.mcp == "d1" else {}
            return answer(result={("connection_id" if self.mcp == "d3" else "connectionId"): cid, **extra})
        if method.endswith("/disconnect"):
            self.connections.pop(p.get("connectionId", p.get("connection_id")), None)
            return answer(result={})
        if self.mcp == "d5":
            server_id, target = p.get("serverId"), {"serverId": p.get("serverId"), "requestId": p.get("requestId")}
        else:
            server_id, target = self.connections.get(p.get("connectionId")), {"connectionId": p.get("connectionId")}
        if server_id not in self.servers:
            return answer(error={"code": -32602, "message": "unknown connection or server"})
        kind, value = self.mcp_call(server_id, p.get("method"), p.get("params") or {}, target)
        if kind is None:
            return None
        if self.mcp == "d5":
            return answer(result={kind: value})
        return answer(**{kind: value})

    def mcp_call(self, server_id: str, method: str, params: dict, target: dict):
        if method.startswith("notifications/"):
            return None, None
        if method == "initialize":
            return "result", {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}}, "serverInfo": {"name": "acp-tools", "version": "1"}}
        if method == "ping":
            return "result", {}
        if method == "tools/list":
            modern = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"} if MODERN in (params.get("_meta") or {}) else {}
            return "result", {"tools": TOOLS, **modern}
        if method != "tools/call":
            return "error", {"code": -32601, "message": f"Method not found: {method}"}
        name, meta = params.get("name"), params.get("_meta") or {}
        done = {"resultType": "complete"} if MODERN in meta else {}  # a 2026-07-28 request wants it
        if name == "whoami":
            info = {"session": meta.get(KEY), "server": server_id, "declaredIn": self.servers[server_id]["session"], "connectMeta": self.servers[server_id]["connectMeta"]}
            return "result", {"content": [{"type": "text", "text": json.dumps(info)}], "isError": False, **done}
        if name == "progress":
            for i in range(1, int((params.get("arguments") or {}).get("steps", 2)) + 1):
                note = {**target, "method": "notifications/progress", "params": {"progressToken": meta.get("progressToken", "t"), "progress": i}}
                self.successor(MESSAGE[self.mcp], note)
            return "result", {"content": [{"type": "text", "text": "done"}], "isError": False, **done}
        if name == "fail":
            return "error", {"code": -32000, "message": "tool failed"}
        return "error", {"code": -32602, "message": f"unknown tool {name}"}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dialect", default="d5", choices=sorted(HANDSHAKE))
    parser.add_argument("--mcp", default="", choices=["", "d1", "d2", "d3", "d4", "d5"])
    parser.add_argument("--tag", default="")
    parser.add_argument("--no-echo", action="store_true")
    parser.add_argument("--pollute", action="store_true")
    parser.add_argument("--crash-on", default="")
    parser.add_argument("--log", default="")
    args = parser.parse_args()
    proxy = McpProxy(args, sys.stdout)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            proxy.handle(json.loads(line))


if __name__ == "__main__":
    asyncio.run(main())
