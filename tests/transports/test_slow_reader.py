"""Slow readers (issue 13): a client that never reads its stream while the backend floods.

The backend is tests/servers/fault_server.py's ``flood`` tool (progress notifications as
fast as its stdout drains, then no answer; it records its cancellation). The client
sends the POST on a raw socket with a small receive buffer and never reads, so the
listener's ``send`` blocks and its stream buffer fills. Past the bound the stream is
cut off (the listener says so, and ``hopline_stream_overflows_total`` counts it), the
connection ends, the backend sees ``notifications/cancelled`` for the request, and
another client of the same listener is served meanwhile. A legacy HTTP+SSE session
whose stream overflows is closed.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from pathlib import Path

import httpx
import orjson
import pytest
import yaml

from tests.conftest import PY, SERVERS
from tests.peers import bounded, eventually

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CLIENT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": CLIENT}
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
FAULT = [PY, str(SERVERS / "fault_server.py")]


def flood(msg_id: int, count: int, size: int) -> bytes:
    params = {"name": "flood", "arguments": {"count": count, "bytes": size}, "_meta": {"progressToken": f"f{msg_id}"}}
    return orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params})


async def session(http: httpx.AsyncClient, url: str) -> str:
    r = await http.post(url, content=orjson.dumps(INIT), headers=HEADERS)
    sid = r.headers["mcp-session-id"]
    await http.post(url, content=INITIALIZED, headers={**HEADERS, "mcp-session-id": sid})
    return sid


async def echo(http: httpx.AsyncClient, url: str, sid: str, text: str) -> str:
    body = {"jsonrpc": "2.0", "id": "e", "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}
    r = await http.post(url, content=orjson.dumps(body), headers={**HEADERS, "mcp-session-id": sid})
    return r.json()["result"]["content"][0]["text"]


async def non_reader(base: str, request: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Send ``request`` on a socket with a small receive buffer, and do not read."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(request)
    await writer.drain()
    return reader, writer


def post(base: str, path: str, body: bytes, sid: str | None = None, extra: str = "") -> bytes:
    host = base.removeprefix("http://")
    extra += f"mcp-session-id: {sid}\r\n" if sid else ""
    head = f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{extra}"
    return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body


async def wait_for_event(events: Path, line: str, timeout: float = 30.0) -> None:
    """Until the backend has recorded a line starting with ``line``."""
    await eventually(lambda: events.exists() and any(seen.startswith(line) for seen in events.read_text().splitlines()), timeout, f"the backend recording {line!r}")


MODERN_HEAD = "mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: flood\r\n"


def modern_flood(base: str, request_id: int, token: str) -> bytes:
    """A 2026-07-28 ``tools/call`` of the backend's ``flood`` (a million 200-byte progress messages)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}, "progressToken": token}
    body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "flood", "arguments": {"count": 1_000_000, "bytes": 200}, "_meta": meta}})
    return post(base, "/mcp", body, extra=MODERN_HEAD)


async def until_eof(reader: asyncio.StreamReader) -> int:
    """Read what the listener sent until it closes the connection; the byte count."""
    total = 0
    while chunk := await reader.read(1 << 16):
        total += len(chunk)
    return total


@pytest.mark.parametrize("bound,size", [(["--stream-buffer-messages", "50"], 200), (["--stream-buffer-bytes", "65536"], 4096)], ids=["messages", "bytes"])
async def test_relay_cuts_a_non_reading_stream_off_and_cancels_its_request(hopline_relay, tmp_path, bound, size):
    events = tmp_path / "events"
    relay = hopline_relay(*bound, "--", *FAULT, "--events", str(events))
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await session(http, relay.url)
        other = await session(http, relay.url)
        reader, writer = await non_reader(relay.base, post(relay.base, "/mcp", flood(7, 1_000_000, size), sid))
        try:
            relay.wait_line(r"stream \d+ cut off: its client left", timeout=30)
            await wait_for_event(events, "cancelled flood 7")
            assert await echo(http, relay.url, other, "still here") == "still here"
            assert await echo(http, relay.url, sid, "same session") == "same session"  # only the stream was cut
            await bounded(until_eof(reader), 30)  # the stream was closed
        finally:
            writer.close()


async def test_serve_counts_the_overflow_and_cancels_at_the_backend(hopline_serve, tmp_path):
    events = tmp_path / "events"
    config = {
        "mode": "reverse",
        "listen": {"stream_buffer_messages": 50},
        "backends": {"f": {"command": PY, "args": [str(SERVERS / "fault_server.py"), "--events", str(events)]}},
    }
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = hopline_serve(str(path), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await session(http, gw.url)
        other = await session(http, gw.url)
        reader, writer = await non_reader(gw.base, post(gw.base, "/mcp", flood(9, 1_000_000, 200), sid))
        try:
            gw.wait_line(r"stream \d+ cut off: its client left", timeout=30)
            metrics = (await http.get(admin + "/metrics")).text
            assert re.search(r"^hopline_stream_overflows_total 1\.0$", metrics, re.M), metrics
            await wait_for_event(events, "cancelled flood ")  # under the id the gateway gave it
            assert await echo(http, gw.url, other, "still here") == "still here"
            await bounded(until_eof(reader), 30)
        finally:
            writer.close()


async def test_a_legacy_sse_session_whose_stream_overflows_is_closed(hopline_relay, tmp_path):
    relay = hopline_relay("--stream-buffer-messages", "50", "--", *FAULT)
    host = relay.base.removeprefix("http://")
    reader, writer = await non_reader(relay.base, f"GET /sse HTTP/1.1\r\nhost: {host}\r\naccept: text/event-stream\r\n\r\n".encode())
    try:
        head = await bounded(reader.readuntil(b"event: endpoint"), 15)
        assert b" 200 " in head.split(b"\r\n", 1)[0]
        endpoint = (await bounded(reader.readuntil(b"\n\n"), 15)).decode()
        messages = relay.base + re.search(r"data: ?(\S+)", endpoint).group(1)
        async with httpx.AsyncClient(timeout=30) as http:
            for body in (orjson.dumps(INIT), INITIALIZED, flood(3, 1_000_000, 200)):
                assert (await http.post(messages, content=body, headers=HEADERS)).status_code == 202
            relay.wait_line(r"stream \d+ cut off: its client left", timeout=30)
            deadline = time.monotonic() + 30
            while (await http.post(messages, content=INITIALIZED, headers=HEADERS)).status_code != 404:  # the session is gone
                assert time.monotonic() < deadline, "the overflowed SSE session was not closed"
                await asyncio.sleep(0.02)
            await bounded(until_eof(reader), 30)
    finally:
        writer.close()


async def test_a_2026_exchange_whose_client_does_not_read_is_cut_off_and_cancelled(hopline_relay, tmp_path):
    """The stateless era: the exchange's channel buffers for the writer, so it is bounded
    by the same message count; past it the stream is cut and the request cancelled."""
    events = tmp_path / "events"
    relay = hopline_relay("--stream-buffer-messages", "50", "--", *FAULT, "--events", str(events))
    reader, writer = await non_reader(relay.base, modern_flood(relay.base, 11, "f11"))
    try:
        await wait_for_event(events, "cancelled flood")  # before the bound: only after the 300 s request timeout
        relay.wait_line(r"stateless exchange's stream was cut off", timeout=30)
        await bounded(until_eof(reader), 30)  # the stream was closed
        async with httpx.AsyncClient(timeout=30) as http:  # and the relay serves the next client
            assert await echo(http, relay.url, await session(http, relay.url), "next") == "next"
    finally:
        writer.close()


async def test_a_2026_exchange_through_the_gateway_is_bounded_the_same_way(hopline_serve, tmp_path):
    events = tmp_path / "events"
    config = {"mode": "reverse", "listen": {"stream_buffer_messages": 50},
              "backends": {"f": {"command": PY, "args": [str(SERVERS / "fault_server.py"), "--events", str(events)]}}}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = hopline_serve(str(path))
    reader, writer = await non_reader(gw.base, modern_flood(gw.base, 12, "f12"))
    try:
        await wait_for_event(events, "cancelled flood")
        gw.wait_line(r"stateless exchange's stream was cut off", timeout=30)
        await bounded(until_eof(reader), 30)
    finally:
        writer.close()


async def read_call(http: httpx.AsyncClient, url: str, body: dict, headers: dict) -> tuple[int, dict]:
    """POST ``body`` and read its SSE stream to the end, as a client does: the number of
    notifications and the final answer."""
    notes, answer = 0, None
    async with http.stream("POST", url, content=orjson.dumps(body), headers=headers) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data:"):
                message = orjson.loads(line[5:])
                if "method" in message:
                    notes += 1
                else:
                    answer = message
    return notes, answer


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_burst_of_notifications_reaches_a_client_that_reads_with_the_result(hopline_relay, hopline_serve, tmp_path, era):
    """Issue 29 item 8: a backend that sends 20,000 notifications at once during a call (the
    fault server's ``burst``, behind a Streamable HTTP hop, so they arrive in large reads)
    must not get a reading client's stream cut off as a slow reader's (it was, with -31001,
    once 1,000 waited: the burst was counted, not the client's reading)."""
    count = 20_000
    upstream = hopline_relay("--", *FAULT)
    config = {"mode": "reverse", "backends": {"f": {"url": upstream.url}}}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = hopline_serve(str(path))
    arguments = {"count": count, "bytes": 0}
    async with httpx.AsyncClient(timeout=120) as http:
        if era == "2026-07-28":
            meta = {"io.modelcontextprotocol/protocolVersion": era, "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}, "progressToken": "b"}
            headers = {**HEADERS, "mcp-protocol-version": era, "mcp-method": "tools/call", "mcp-name": "burst"}
        else:
            meta = {"progressToken": "b"}
            headers = {**HEADERS, "mcp-session-id": await session(http, gw.url)}
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "burst", "arguments": arguments, "_meta": meta}}
        notes, answer = await bounded(read_call(http, gw.url, body, headers), 120)
    assert answer is not None and "error" not in answer, answer
    assert answer["result"]["content"][0]["text"] == f"sent {count} notifications"
    assert notes == count
