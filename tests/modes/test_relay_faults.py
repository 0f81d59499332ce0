"""Relay mode under faults: crashing, hanging and noisy backends; shutdown; isolation.

Each test asserts the client got exactly one answer per request, promptly, and
that hopline leaves no child process behind (the ``hopline_relay`` fixture checks).
"""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import orjson
import psutil
import pytest

from tests.conftest import PY, SERVERS, sdk_server_cmd
from tests.peers import bounded, client, text_of

FAULT = [PY, str(SERVERS / "fault_server.py")]
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def rpc(msg_id, method, params=None):
    body = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


async def legacy_session(http: httpx.AsyncClient, url: str) -> str:
    init = rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    r = await http.post(url, content=orjson.dumps(init), headers=HEADERS)
    assert r.status_code == 200
    sid = r.headers["mcp-session-id"]
    await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers={**HEADERS, "mcp-session-id": sid})
    return sid


def body_of(r: httpx.Response) -> dict:
    if r.headers["content-type"].startswith("application/json"):
        return r.json()
    frames = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    return orjson.loads(frames[-1])


async def call(http, url, sid, msg_id, tool, args=None) -> dict:
    r = await http.post(url, content=orjson.dumps(rpc(msg_id, "tools/call", {"name": tool, "arguments": args or {}})), headers={**HEADERS, "mcp-session-id": sid})
    assert "Traceback" not in r.text
    return body_of(r)


async def test_backend_crash_mid_call_errors_promptly_and_next_session_works(hopline_relay):
    relay = hopline_relay("--", *FAULT)
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await legacy_session(http, relay.url)
        started = time.monotonic()
        answer = await call(http, relay.url, sid, 7, "crash")
        assert time.monotonic() - started < 5
        assert answer["id"] == 7
        assert answer["error"]["code"] == -31001
        assert "exited with status 3" in answer["error"]["message"]
        assert answer["error"]["data"]["reason"] == "backend_closed"
        # the dead session is gone (the client must re-initialize) ...
        r = await http.post(relay.url, content=orjson.dumps(rpc(8, "tools/list")), headers={**HEADERS, "mcp-session-id": sid})
        assert r.status_code == 404
        # ... and a new session gets a fresh backend
        sid2 = await legacy_session(http, relay.url)
        ok = await call(http, relay.url, sid2, 9, "echo", {"text": "alive"})
        assert ok["result"]["content"][0]["text"] == "alive"


async def test_backend_crash_fails_every_call_in_flight(hopline_relay):
    relay = hopline_relay("--", *FAULT)
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await legacy_session(http, relay.url)
        hangs = [asyncio.create_task(call(http, relay.url, sid, 100 + i, "hang")) for i in range(3)]
        for _ in range(3):  # all three are in flight at the backend before it dies
            await asyncio.to_thread(relay.wait_line, r"hanging on request", 10)
        crash = await call(http, relay.url, sid, 99, "crash")
        answers = await bounded(asyncio.gather(*hangs), 10)
    assert crash["error"]["code"] == -31001
    assert sorted(a["id"] for a in answers) == [100, 101, 102]
    assert all(a["error"]["code"] == -31001 for a in answers)


async def test_hanging_backend_times_out_and_gets_cancelled(hopline_relay):
    relay = hopline_relay("--request-timeout", "1", "--", *FAULT)
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await legacy_session(http, relay.url)
        started = time.monotonic()
        answer = await call(http, relay.url, sid, "h1", "hang")
        elapsed = time.monotonic() - started
        assert 0.9 <= elapsed < 4
        assert answer["id"] == "h1"
        assert answer["error"]["code"] == -31002
        assert answer["error"]["data"]["reason"] == "timeout"
        # the session still works afterwards
        ok = await call(http, relay.url, sid, "e1", "echo", {"text": "still here"})
        assert ok["result"]["content"][0]["text"] == "still here"


async def test_hanging_backend_times_out_in_modern_era(hopline_relay):
    relay = hopline_relay("--request-timeout", "1", "--", *FAULT)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = rpc(5, "tools/call", {"name": "hang", "arguments": {}, "_meta": meta})
    headers = {**HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "hang"}
    async with httpx.AsyncClient(timeout=15) as http:
        started = time.monotonic()
        r = await http.post(relay.url, content=orjson.dumps(body), headers=headers)
        assert time.monotonic() - started < 4
        assert r.json()["error"]["code"] == -31002


async def test_garbage_on_stdout_is_dropped_and_the_real_answer_arrives(hopline_relay):
    relay = hopline_relay("--", *FAULT, "--garbage-first")
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await legacy_session(http, relay.url)
        answer = await call(http, relay.url, sid, 3, "garbage")
        assert answer["id"] == 3 and "result" in answer
    assert any("not JSON-RPC" in line for line in relay.stderr)


async def test_backend_that_cannot_start_is_a_clear_error(hopline_relay, tmp_path):
    server = tmp_path / "server"  # there at start (a missing command is refused then), gone when a client comes
    server.write_text("#!/bin/sh\nexit 3\n")
    server.chmod(0o755)
    relay = hopline_relay("--", str(server))
    server.unlink()
    async with httpx.AsyncClient(timeout=15) as http:
        init = rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
        r = await http.post(relay.url, content=orjson.dumps(init), headers=HEADERS)
    err = r.json()["error"]
    assert err["code"] == -31001 and "cannot start" in err["message"]
    assert "Traceback" not in r.text
    relay.wait_line(rf"backend server: could not start a child: cannot start '{server}': No such file or directory")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
async def test_stopping_hopline_leaves_no_child(hopline_relay, sig):
    relay = hopline_relay("--prewarm", "0", "--", *FAULT)  # exactly the sessions' children (no spare)
    async with httpx.AsyncClient(timeout=15) as http:
        for _ in range(2):
            await legacy_session(http, relay.url)
    children = relay.descendants()
    assert len(children) == 2
    relay.stop(sig)
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive, f"children survived {sig.name}: {alive}"


@pytest.mark.req("SESSION-OWN-IDS")
@pytest.mark.req("SESSION-NO-BACKEND-IDS")
async def test_session_ids_are_hoplines_own_and_unguessable(hopline_relay):
    relay = hopline_relay("--", *sdk_server_cmd())
    async with httpx.AsyncClient(timeout=15) as http:
        ids = {await legacy_session(http, relay.url) for _ in range(3)}
    assert len(ids) == 3
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)  # 128 random bits, hex


async def test_isolated_sessions_get_their_own_backend(hopline_relay):
    relay = hopline_relay("--prewarm", "0", "--", *sdk_server_cmd())
    async with client(relay.url, "legacy") as a, client(relay.url, "legacy") as b:
        await bounded(a.call_tool("echo", {"text": "a"}))
        await bounded(b.call_tool("echo", {"text": "b"}))
        backends = [p for p in relay.descendants() if "sdk_server" in " ".join(p.cmdline())]
        assert len(backends) == 2


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_shared_backend_many_clients_same_ids_never_cross(hopline_relay, mode):
    """--shared: one child, eight clients whose SDKs all count ids from the same start."""
    relay = hopline_relay("--shared", "--", *sdk_server_cmd())

    async def one(n: int) -> list[str]:
        async with client(relay.url, mode) as c:
            return [text_of(await c.call_tool("echo", {"text": f"c{n}-{i}"})) for i in range(10)]

    results = await bounded(asyncio.gather(*(one(n) for n in range(8))), 60)
    for n, texts in enumerate(results):
        assert texts == [f"c{n}-{i}" for i in range(10)]
    assert len([p for p in relay.descendants() if "sdk_server" in " ".join(p.cmdline())]) == 1


async def test_session_cap_gives_503_and_existing_sessions_survive(hopline_relay):
    relay = hopline_relay("--max-sessions", "2", "--", *FAULT)
    async with httpx.AsyncClient(timeout=15) as http:
        s1 = await legacy_session(http, relay.url)
        await legacy_session(http, relay.url)
        init = rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
        r = await http.post(relay.url, content=orjson.dumps(init), headers=HEADERS)
        assert r.status_code == 503 and "retry-after" in r.headers
        ok = await call(http, relay.url, s1, 2, "echo", {"text": "x"})
        assert ok["result"]["content"][0]["text"] == "x"


async def test_idle_sessions_expire_to_404_and_free_their_child(hopline_relay):
    relay = hopline_relay("--session-ttl", "0.5", "--prewarm", "0", "--", *FAULT)
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await legacy_session(http, relay.url)
        assert len(relay.descendants()) == 1
        deadline = time.monotonic() + 5
        while relay.descendants() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert relay.descendants() == []
        r = await http.post(relay.url, content=orjson.dumps(rpc(2, "tools/list")), headers={**HEADERS, "mcp-session-id": sid})
        assert r.status_code == 404


async def test_client_cancellation_reaches_the_backend(hopline_relay):
    """A handshake-era notifications/cancelled from the client stops the backend's work."""
    relay = hopline_relay()  # the demo server logs the cancellations it receives
    body = rpc("long-1", "tools/call", {"name": "countdown", "arguments": {"steps": 100, "delay_ms": 100}, "_meta": {"progressToken": "p"}})
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await legacy_session(http, relay.url)
        async with http.stream("POST", relay.url, content=orjson.dumps(body), headers={**HEADERS, "mcp-session-id": sid}) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data: "):
                    break  # the first progress event: the backend is working on it
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long-1", "reason": "user"}}
            r = await http.post(relay.url, content=orjson.dumps(cancel), headers={**HEADERS, "mcp-session-id": sid})
            assert r.status_code == 202
            await asyncio.to_thread(relay.wait_line, r"request 'long-1' cancelled by the client \(user\)", 5)
