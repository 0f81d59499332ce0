"""A test ACP agent (official Python SDK) whose MCP client is the official MCP SDK, over HTTP or stdio only.

It advertises ``mcpCapabilities.http`` and no ACP transport, so ACP-transport
servers reach it only through hopline's bridge. A prompt ``call TOOL [MODE [ARGS-JSON]]``
connects to every MCP server of the session with ``mcp.Client`` (``MODE``:
``legacy`` (default), ``auto`` or ``2026-07-28``), calls TOOL with ARGS (default
``{}``) and answers one chunk whose text is JSON ``{"results": [tool text (parsed
if it is a JSON object), ...], "kinds": ["http"|"stdio", ...]}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import acp
from acp import InitializeResponse, NewSessionResponse, PromptResponse, update_agent_message_text
from acp.schema import AgentCapabilities, Implementation, McpCapabilities
from mcp import Client, StdioServerParameters


class HttpMcpAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.servers: dict[str, list[Any]] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities=None, client_info=None, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=AgentCapabilities(mcp_capabilities=McpCapabilities(http=True, sse=False)),
            agent_info=Implementation(name="http-mcp-agent", version="1.0"),
        )

    async def new_session(self, cwd: str, mcp_servers=None, **kwargs: Any) -> NewSessionResponse:
        sid = f"http-sess-{len(self.servers) + 1}"
        self.servers[sid] = list(mcp_servers or [])
        return NewSessionResponse(session_id=sid)

    async def prompt(self, session_id: str, prompt: list, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(b, "text", "") for b in prompt)
        _, tool, *rest = text.split(" ")
        mode = rest[0] if rest else "legacy"
        arguments = json.loads(" ".join(rest[1:])) if len(rest) > 1 else {}
        results, kinds = [], []
        for server in self.servers.get(session_id, []):
            data = server.model_dump(by_alias=True) if hasattr(server, "model_dump") else dict(server)
            if data.get("url"):
                target: Any = data["url"]
                kinds.append("http")
            else:
                target = StdioServerParameters(command=data["command"], args=list(data.get("args") or []))
                kinds.append("stdio")
            async with Client(target, mode=mode) as client:
                result = await asyncio.wait_for(client.call_tool(tool, arguments), 10)
                results.append(json.loads(result.content[0].text) if result.content[0].text.startswith("{") else result.content[0].text)
        await self.conn.session_update(session_id=session_id, update=update_agent_message_text(json.dumps({"results": results, "kinds": kinds})))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(acp.run_agent(HttpMcpAgent()))
