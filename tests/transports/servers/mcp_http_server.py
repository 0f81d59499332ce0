"""A real MCP server (the official SDK's MCPServer) for the HTTP upstream tests.

Usage: python mcp_http_server.py PORT (0: a free one, announced on stderr) [--stateless] [--json] [--sse] [--event-store] [--retry-ms N]

Tools: echo, progress (progress notifications), sample (server→client sampling
request), slow / counters (modern cancellation), announce (a notification on the
GET stream), poll (closes its POST SSE
stream early so the client must resume with GET + Last-Event-ID).
A resource demo://greeting and a prompt greet.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import warnings
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventStore

warnings.simplefilter("ignore")

mcp = MCPServer("hopline-test")
STATE = {"cancelled": 0, "started": 0}


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done {steps}"


@mcp.tool()
async def sample(prompt: str, ctx: Context) -> str:
    """Ask the client's model (sampling/createMessage) and return its text."""
    from mcp_types import SamplingMessage, TextContent

    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=50,
        related_request_id=ctx.request_id,
    )
    content = result.content
    return f"model said: {getattr(content, 'text', content)}"


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep; counts cancellations so a test can see the disconnect."""
    STATE["started"] += 1
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        STATE["cancelled"] += 1
        raise
    return "slept"


@mcp.tool()
def counters() -> dict:
    """How many slow calls started and how many were cancelled."""
    return dict(STATE)


@mcp.tool()
async def announce(ctx: Context) -> str:
    """Send a notification unrelated to this request (it travels on the GET stream)."""
    await ctx.session.send_tool_list_changed()
    return "announced"


@mcp.tool()
async def poll(ctx: Context) -> str:
    """Send progress, close the POST SSE stream, then answer (resumption test)."""
    await ctx.report_progress(1, 2, "before close")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.3)
    await ctx.report_progress(2, 2, "after close")
    return "polled"


@mcp.resource("demo://greeting")
def greeting() -> str:
    return "hello from a resource"


@mcp.prompt()
def greet(name: str) -> str:
    return f"Please greet {name}."


class MemoryEventStore(EventStore):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []
        self.ids = itertools.count(1)

    async def store_event(self, stream_id, message):
        event_id = str(next(self.ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        from mcp.server.streamable_http import EventMessage

        stream = next((s for i, s, _ in self.events if i == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, s, message in list(self.events):
            if after and s == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--stateless", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--sse", action="store_true")
    ap.add_argument("--event-store", action="store_true")
    ap.add_argument("--retry-ms", type=int, default=None)
    args = ap.parse_args()
    # The SDK's default for 127.0.0.1: DNS-rebinding protection on (Host and Origin checked).
    if args.sse:
        app = mcp.sse_app()
    else:
        app = mcp.streamable_http_app(
            stateless_http=args.stateless,
            json_response=args.json,
            event_store=MemoryEventStore() if args.event_store else None,
            retry_interval=args.retry_ms,
        )
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "servers"))
    from serving import bind, port_of, serve

    sock = bind(args.port)
    serve(app, sock, f"mcp_http_server: http://127.0.0.1:{port_of(sock)}/mcp")


if __name__ == "__main__":
    main()
