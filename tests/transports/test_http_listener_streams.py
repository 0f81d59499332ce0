"""Streams at the Streamable HTTP listener: SSE upgrade, resumption, the GET stream, stateless.

Driven with raw HTTP against a relay of the built-in demo server, whose ``countdown``
tool sends progress notifications (so a response turns into an SSE stream).
"""

from __future__ import annotations

import asyncio

import httpx
import orjson

from hopline.transports.sse import SSEParser

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def countdown(msg_id, steps, delay_ms=150, token="tok"):
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": steps, "delay_ms": delay_ms}, "_meta": {"progressToken": token}}}


async def session(http, url) -> str:
    r = await http.post(url, content=orjson.dumps(INIT), headers=HEADERS)
    sid = r.headers["mcp-session-id"]
    await http.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers={**HEADERS, "mcp-session-id": sid})
    return sid


async def read_events(response, limit=None):
    parser, events = SSEParser(), []
    async for chunk in response.aiter_bytes():
        for ev in parser.feed(chunk):
            if ev.data:
                events.append(ev)
                if limit is not None and len(events) >= limit:
                    return events
    return events


async def test_progress_turns_the_response_into_sse_with_event_ids(hopline_relay):
    relay = hopline_relay()
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await session(http, relay.url)
        async with http.stream("POST", relay.url, content=orjson.dumps(countdown(5, 3, 20)), headers={**HEADERS, "mcp-session-id": sid}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            events = await read_events(r)
    bodies = [orjson.loads(e.data) for e in events]
    assert [b["params"]["progress"] for b in bodies[:-1]] == [1, 2, 3]
    assert bodies[-1]["id"] == 5 and "result" in bodies[-1]
    assert len({e.id for e in events}) == len(events) and all(e.id for e in events)


async def test_a_fast_answer_is_plain_json(hopline_relay):
    relay = hopline_relay()
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await session(http, relay.url)
        echo = {"jsonrpc": "2.0", "id": "e", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
        r = await http.post(relay.url, content=orjson.dumps(echo), headers={**HEADERS, "mcp-session-id": sid})
    assert r.headers["content-type"] == "application/json"
    assert r.json()["result"]["content"][0]["text"] == "x"


async def test_disconnect_is_not_cancel_and_last_event_id_resumes(hopline_relay):
    relay = hopline_relay()
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await session(http, relay.url)
        async with http.stream("POST", relay.url, content=orjson.dumps(countdown(9, 6, 150)), headers={**HEADERS, "mcp-session-id": sid}) as r:
            first = await read_events(r, limit=2)
        # the client went away after two events; resume where it stopped
        async with http.stream("GET", relay.url, headers={"accept": "text/event-stream", "mcp-session-id": sid, "last-event-id": first[-1].id}) as r:
            assert r.status_code == 200
            rest = await asyncio.wait_for(read_events(r), 10)
    bodies = [orjson.loads(e.data) for e in first + rest]
    progress = [b["params"]["progress"] for b in bodies if b.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3, 4, 5, 6]
    assert bodies[-1]["id"] == 9 and "result" in bodies[-1]


async def test_a_second_get_stream_takes_over_the_first(hopline_relay):
    """Only one standalone stream receives; a reconnecting client is never locked out (F8)."""
    relay = hopline_relay()
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await session(http, relay.url)
        get_headers = {"accept": "text/event-stream", "mcp-session-id": sid}
        async with http.stream("GET", relay.url, headers=get_headers) as first:
            assert first.status_code == 200
            async with http.stream("GET", relay.url, headers=get_headers) as second:
                assert second.status_code == 200
                # the first stream is ended by the server, not left dangling
                assert await asyncio.wait_for(read_events(first), 5) == []
        async with http.stream("GET", relay.url, headers=get_headers) as third:
            assert third.status_code == 200


async def test_stateless_http_variant_has_no_sessions(hopline_relay):
    relay = hopline_relay("--stateless-http")
    async with httpx.AsyncClient(timeout=15) as http:
        r = await http.post(relay.url, content=orjson.dumps(INIT), headers=HEADERS)
        assert r.status_code == 200 and "mcp-session-id" not in r.headers
        listing = await http.post(relay.url, content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', headers=HEADERS)
        assert "echo" in [t["name"] for t in listing.json()["result"]["tools"]]
        get = await http.get(relay.url, headers={"accept": "text/event-stream"})
        assert get.status_code == 405 and get.headers["allow"] == "POST"


async def test_modern_client_disconnect_cancels_at_the_backend(hopline_relay):
    """Closing a 2026-07-28 response stream cancels the countdown (it stops early)."""
    relay = hopline_relay()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "progressToken": "p"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 50, "delay_ms": 100}, "_meta": meta}}
    headers = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "countdown"}
    async with httpx.AsyncClient(timeout=15) as http:
        async with http.stream("POST", relay.url, content=orjson.dumps(body), headers=headers) as r:
            assert r.status_code == 200
            await read_events(r, limit=1)
        # the shared modern child is still healthy and serves the next request promptly
        echo = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "next"}, "_meta": meta}}
        r = await http.post(relay.url, content=orjson.dumps(echo), headers={**headers, "mcp-name": "echo"})
        assert r.json()["result"]["content"][0]["text"] == "next"
    relay.wait_line(r"cancelled by the client \(client went away\)", timeout=5)
