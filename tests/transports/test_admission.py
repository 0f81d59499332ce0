"""Admission of session creation at the HTTP listener (issue 12; test-battery LOAD-08, LOAD-03).

Real ``hopline relay`` / ``hopline serve`` processes in front of a backend that starts
only when the test says so (tests/servers/gated_start.py), so "a handshake in flight"
lasts exactly as long as the test needs, with no timing: past ``--max-pending-sessions``
an ``initialize`` is answered at once with 503, ``Retry-After`` and a JSON-RPC error
naming its id; ``/healthz`` answers while the slots are full; once the gate opens the
admitted ones are served, and so is a fresh client. A client that leaves mid-initialize
frees its slot and its half-made session (its child process ends); a backend that never
starts is a timeout error within ``--handshake-timeout``; ``--max-sessions`` sheds too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import psutil
import yaml

from tests.conftest import PY, SERVERS
from tests.peers import bounded, eventually

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
GATED = [PY, str(SERVERS / "gated_start.py")]


def init_body(msg_id: int) -> bytes:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "burst", "version": "1"}}
    return orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params})


async def initialize(http: httpx.AsyncClient, url: str, msg_id: int) -> httpx.Response:
    return await http.post(url, content=init_body(msg_id), headers=HEADERS)


def assert_shed(r: httpx.Response, msg_id: int) -> None:
    assert r.status_code == 503, (r.status_code, r.text)
    assert r.headers["retry-after"].isdigit()
    body = r.json()
    assert body["id"] == msg_id and body["error"]["data"]["reason"] == "overloaded"
    assert "too many sessions" in body["error"]["message"]


def assert_served(r: httpx.Response) -> None:
    assert r.status_code == 200, (r.status_code, r.text)
    assert "result" in r.json() and r.headers["mcp-session-id"]


async def first(tasks: list[asyncio.Future], n: int) -> list[httpx.Response]:
    out = []
    for done in asyncio.as_completed(tasks):
        out.append(await done)
        if len(out) == n:
            return out
    return out


def children(proc) -> list[psutil.Process]:
    """The relay's live descendants; one that exits while being looked at is not one (its
    status() would raise NoSuchProcess: seen under load)."""
    found = []
    for p in proc.descendants():
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


async def burst(url: str, base: str, gate: Path, n: int, bound: int) -> None:
    """n concurrent initializes, ``bound`` admitted: the rest shed at once, all served after."""
    async with httpx.AsyncClient(timeout=90, limits=httpx.Limits(max_connections=n + 8)) as http:
        tasks = [asyncio.ensure_future(initialize(http, url, i)) for i in range(n)]
        try:
            shed = await bounded(first(tasks, n - bound), 30)  # while the admitted ones wait on the closed gate
            ids = {r.json()["id"] for r in shed}
            for r in shed:
                assert_shed(r, r.json()["id"])
            assert len(ids) == n - bound
            assert (await http.get(base + "/healthz")).status_code == 200
            assert_shed(await initialize(http, url, 1000), 1000)
            parse_error = await http.post(url, content=b"{not json", headers=HEADERS)
            assert parse_error.status_code == 400 and parse_error.json()["error"]["code"] == -32700
            gate.touch()
            served = await bounded(asyncio.gather(*[t for t in tasks if not t.done()]), 60)
            assert len(served) == bound
            for r in served:
                assert_served(r)
            assert_served(await initialize(http, url, 1001))  # a fresh client after the burst
        finally:
            for t in tasks:
                t.cancel()


async def test_relay_sheds_a_burst_past_max_pending_sessions(hopline_relay, tmp_path):
    gate = tmp_path / "gate"
    relay = hopline_relay("--max-pending-sessions", "4", "--", *GATED, str(gate))
    await burst(relay.url, relay.base, gate, 12, 4)


async def test_serve_with_three_backends_sheds_a_burst(hopline_serve, tmp_path):
    gate = tmp_path / "gate"
    backends = {name: {"command": PY, "args": [str(SERVERS / "gated_start.py"), str(gate)]} for name in ("a", "b", "c")}
    config = {"listen": {"max_pending_sessions": 3, "handshake_timeout": 120}, "routing": {"startup_timeout": 120}, "backends": backends}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = hopline_serve(str(path))
    await burst(gw.url, gw.base, gate, 10, 3)


async def test_a_client_leaving_mid_initialize_frees_its_slot_and_session(hopline_relay, tmp_path):
    gate = tmp_path / "gate"
    relay = hopline_relay("--max-pending-sessions", "1", "--prewarm", "0", "--", *GATED, str(gate))  # no spare: the count is the session's child
    host, port = relay.base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = init_body(1)
    writer.write(f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n".encode())
    writer.write(f"content-length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    await eventually(lambda: len(children(relay)) == 1)  # its half-made session: a backend still starting
    async with httpx.AsyncClient(timeout=30) as http:
        assert_shed(await initialize(http, relay.url, 2), 2)  # the one slot is taken
        writer.close()  # the client gives up mid-initialize
        await eventually(lambda: not children(relay))  # its session and backend are closed...
        gate.touch()
        assert_served(await bounded(initialize(http, relay.url, 3), 30))  # ...and its slot is free


async def test_a_backend_that_does_not_start_is_a_timeout_error(hopline_relay, tmp_path):
    relay = hopline_relay("--handshake-timeout", "1", "--prewarm", "0", "--", *GATED, str(tmp_path / "never"))
    async with httpx.AsyncClient(timeout=30) as http:
        r = await bounded(initialize(http, relay.url, 5), 30)
        assert r.status_code == 200
        body = r.json()
        assert body["id"] == 5 and body["error"]["code"] == -31002
        assert "did not answer initialize within 1 s" in body["error"]["message"]
        await eventually(lambda: not children(relay))  # the half-made session is closed with its backend
        assert (await http.get(relay.base + "/healthz")).status_code == 200


async def test_max_sessions_sheds_the_third(hopline_relay):
    relay = hopline_relay("--max-sessions", "2")
    async with httpx.AsyncClient(timeout=30) as http:
        one = await initialize(http, relay.url, 1)
        assert_served(one)
        assert_served(await initialize(http, relay.url, 2))
        r = await initialize(http, relay.url, 3)
        assert_shed(r, 3)
        assert r.json()["error"]["data"]["limit"] == "max_sessions"
        await http.delete(relay.url, headers={"mcp-session-id": one.headers["mcp-session-id"]})
        assert_served(await initialize(http, relay.url, 4))


async def test_max_sessions_sheds_a_legacy_sse_stream(hopline_relay):
    relay = hopline_relay("--max-sessions", "1")
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("GET", relay.base + "/sse", headers={"accept": "text/event-stream"}) as first:
            assert first.status_code == 200
            async for line in first.aiter_lines():
                if line.startswith("data:"):
                    break  # the endpoint event: the session exists
            r = await http.get(relay.base + "/sse", headers={"accept": "text/event-stream"})
            assert r.status_code == 503 and r.headers["retry-after"].isdigit()
            assert r.json()["error"]["data"] == {"backend": "", "reason": "overloaded", "limit": "max_sessions", "retryAfter": 5}
