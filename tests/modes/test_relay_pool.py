"""``hopline relay`` over a stdio command with a child pool (issue 12): ``--max-children``,
``--prewarm`` and ``--child-idle-timeout``. Children are counted with psutil; which child
served a session is told by the backend (tests/servers/pid_server.py)."""

from __future__ import annotations


import httpx
import orjson

from tests.conftest import PY, SERVERS
from tests.peers import bounded, client, eventually, live, running, text_of

PID = [PY, str(SERVERS / "pid_server.py")]
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": "init-3", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def children(relay) -> set[int]:
    return live(relay.descendants(), running("pid_server"))



async def session(http: httpx.AsyncClient, url: str) -> str:
    r = await http.post(url, content=orjson.dumps({**INIT, "id": 1}), headers=HEADERS)
    assert r.status_code == 200, r.text
    return r.headers["mcp-session-id"]


async def list_tools(http: httpx.AsyncClient, url: str, sid: str) -> httpx.Response:
    return await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), headers={**HEADERS, "mcp-session-id": sid})


async def used_session(http: httpx.AsyncClient, url: str) -> str:
    """A session past its handshake: it has made a call."""
    sid = await session(http, url)
    assert (await list_tools(http, url, sid)).status_code == 200
    return sid


async def test_max_children_2_gives_the_third_session_a_clear_error_at_once(hopline_relay):
    """Two clients present (each has made a call and holds its GET stream open): a third
    is refused at once."""
    relay = hopline_relay("--max-children", "2", "--prewarm", "0", "--", *PID)
    async with client(relay.url, "legacy") as a, client(relay.url, "legacy") as b, httpx.AsyncClient(timeout=15) as http:
        await bounded(a.list_tools())
        await bounded(b.list_tools())
        r = await bounded(http.post(relay.url, content=orjson.dumps(INIT), headers=HEADERS))
        body = r.json()
        assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, (r.status_code, r.headers)
        assert body["id"] == "init-3" and body["error"]["code"] == -31001, body
        assert "cap of 2" in body["error"]["message"], body
        assert "mcp-session-id" not in r.headers
        assert len(children(relay)) == 2


async def test_at_the_cap_a_session_that_only_initialized_gives_its_child_to_a_newcomer(hopline_relay):
    """A burst's or a one-shot client's leftovers: sessions that initialized and went quiet.
    The newcomer waits (about a second) for the least recently active one, whose client
    then gets 404; the session that made a call keeps its child."""
    relay = hopline_relay("--max-children", "2", "--prewarm", "0", "--", *PID)
    async with httpx.AsyncClient(timeout=15) as http:
        quiet = await session(http, relay.url)
        busy = await used_session(http, relay.url)
        newcomer = await session(http, relay.url)
        assert (await list_tools(http, relay.url, quiet)).status_code == 404
        assert (await list_tools(http, relay.url, busy)).status_code == 200
        assert (await list_tools(http, relay.url, newcomer)).status_code == 200
        assert len(children(relay)) == 2


async def test_at_the_cap_a_session_whose_client_holds_no_stream_gives_its_child_up(hopline_relay):
    """A one-shot client: it made a call and left without DELETE or a GET stream. A newcomer
    waits (up to 5 s) until it has been idle 5 s, then takes its child."""
    relay = hopline_relay("--max-children", "1", "--prewarm", "0", "--", *PID)
    async with httpx.AsyncClient(timeout=15) as http:
        gone = await used_session(http, relay.url)
        newcomer = await used_session(http, relay.url)
        assert (await list_tools(http, relay.url, gone)).status_code == 404
        assert (await list_tools(http, relay.url, newcomer)).status_code == 200


async def test_at_the_cap_a_session_idle_past_child_reclaim_after_gives_its_child_up(hopline_relay):
    """Even a client still present (its GET stream open) gives its child up at the cap once
    idle that long."""
    relay = hopline_relay("--max-children", "1", "--prewarm", "0", "--child-reclaim-after", "0.5", "--", *PID)
    async with client(relay.url, "legacy") as present:
        first = int(text_of(await bounded(present.call_tool("pid", {}))))
        async with client(relay.url, "legacy") as newcomer:  # waits for the half second
            pid = int(text_of(await bounded(newcomer.call_tool("pid", {}))))
            assert pid != first and children(relay) == {pid}


async def test_the_second_session_is_served_by_the_prewarmed_spare(hopline_relay):
    relay = hopline_relay("--prewarm", "1", "--", *PID, "--start-delay", "2")
    async with client(relay.url, "legacy") as a:
        first = int(text_of(await bounded(a.call_tool("pid", {}), 30)))
        await eventually(lambda: len(children(relay)) == 2)
        (spare,) = children(relay) - {first}
        async with client(relay.url, "legacy") as b:
            assert int(text_of(await bounded(b.call_tool("pid", {}), 30))) == spare


async def test_a_session_whose_child_idles_is_closed_and_answers_404(hopline_relay):
    relay = hopline_relay("--prewarm", "0", "--child-idle-timeout", "0.3", "--", *PID)
    async with httpx.AsyncClient(timeout=15) as http:
        sid = await session(http, relay.url)
        await eventually(lambda: not children(relay))
        r = await http.post(relay.url, content=orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), headers={**HEADERS, "mcp-session-id": sid})
        assert r.status_code == 404
        await session(http, relay.url)  # re-initializing gets a new child
        assert len(children(relay)) == 1


async def test_shared_keeps_one_counted_child(hopline_relay):
    relay = hopline_relay("--shared", "--max-children", "1", "--", *PID)
    async with client(relay.url, "legacy") as a, client(relay.url, "legacy") as b:
        pa = text_of(await bounded(a.call_tool("pid", {})))
        pb = text_of(await bounded(b.call_tool("pid", {})))
    assert pa == pb and len(children(relay)) == 1
