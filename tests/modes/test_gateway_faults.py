"""Gateway under faults: backends down at startup, crashing, slow to list.

The surface always matches what the gateway can serve (draft §6.7): a backend that
is not there has no tools listed, and when it (re)appears the client is told with
``notifications/tools/list_changed``.
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from tests.conftest import PY, SERVERS
from tests.peers import ChangeWatcher, bounded, client, text_of

DEMO = [PY, "-m", "hopline.demo"]


def config(tmp_path, backends: dict, **routing) -> str:
    conf = {"backends": {b: {"command": argv[0], "args": argv[1:]} for b, argv in backends.items()}, "routing": {"retry_after": 0.2, **routing}}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


async def names(c) -> set[str]:
    return {t.name for t in (await bounded(c.list_tools())).tools}


async def wait_for_tools(c, predicate, timeout=10.0) -> set[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await names(c)
        if predicate(found) or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_backend_down_at_startup_appears_later_with_a_change_signal(tmp_path, hopline_serve):
    flag = tmp_path / "ready"
    gw = hopline_serve(config(tmp_path, {"demo": DEMO, "late": [PY, str(SERVERS / "flaky_start.py"), str(flag)]}))
    watcher = ChangeWatcher()
    async with client(gw.url, "legacy", message_handler=watcher) as c:
        first = await names(c)
        assert "demo__echo" in first and not any(n.startswith("late__") for n in first)
        flag.write_text("go")
        await asyncio.wait_for(watcher.changed.wait(), 10)
        assert "late__echo" in await names(c)
        assert text_of(await bounded(c.call_tool("late__echo", {"text": "hi"}))) == "hi"


async def test_a_crashed_backend_is_withdrawn_and_restored(tmp_path, hopline_serve):
    gw = hopline_serve(config(tmp_path, {"demo": DEMO, "fault": [PY, str(SERVERS / "fault_server.py")]}))
    async with client(gw.url, "legacy") as c:
        assert "fault__crash" in await names(c)
        with pytest.raises(Exception):
            await bounded(c.call_tool("fault__crash", {}))
        # withdrawn while down (or already back): either way the surface is servable
        back = await wait_for_tools(c, lambda n: "fault__echo" in n)
        assert "fault__echo" in back
        assert text_of(await bounded(c.call_tool("fault__echo", {"text": "again"}))) == "again"


async def test_a_list_that_outlasts_the_timeout_is_left_out_and_named(tmp_path, hopline_serve):
    import httpx
    import orjson

    from tests.modes.test_stateless_through_hopline import answer_of

    gw = hopline_serve(config(tmp_path, {"demo": DEMO, "slow": [PY, str(SERVERS / "fault_server.py"), "--slow-list-ms", "5000"]}, list_timeout=0.5))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    listing = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(timeout=20) as http:
        sid = (await http.post(gw.url, content=orjson.dumps(init), headers=headers)).headers["mcp-session-id"]
        own = {**headers, "mcp-session-id": sid}
        # The handshake waits for a start only list_timeout (0.5 s): on a busy machine a backend joins the
        # session later, with a list_changed notification that may ride on a POST's answer (SSE). Ask until
        # the slow backend's *list* (not its start) was what outlasted the timeout.
        for _ in range(40):
            started = loop.time()
            r = await http.post(gw.url, content=listing, headers=own)
            elapsed = loop.time() - started
            body = answer_of(r, 2)["result"]
            if "demo__echo" in [t["name"] for t in body["tools"]] and "slow__echo" not in str(body):
                try:
                    gw.wait_line(r"backend slow: tools/list failed: timed out", timeout=1)
                    break
                except TimeoutError:
                    pass
            await asyncio.sleep(0.25)
        else:
            raise AssertionError("the slow backend's list never timed out")
    assert elapsed < 3
    assert body["_meta"]["io.hopline/missing-backends"] == ["slow"]


async def test_hot_reload_adds_and_removes_backends_with_change_signals(tmp_path, hopline_serve):
    path = tmp_path / "gw.yaml"
    conf = {"reload_interval": 0.1, "backends": {"one": {"command": DEMO[0], "args": DEMO[1:]}}}
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    watcher = ChangeWatcher()
    async with client(gw.url, "legacy", message_handler=watcher) as c:
        assert {"one__echo"} <= await names(c)
        conf["backends"]["two"] = {"command": DEMO[0], "args": DEMO[1:]}
        path.write_text(yaml.safe_dump(conf))
        await asyncio.wait_for(watcher.changed.wait(), 10)
        now = await names(c)
        assert "one__echo" in now and "two__echo" in now
        assert text_of(await bounded(c.call_tool("two__echo", {"text": "new"}))) == "new"
        watcher.changed.clear()
        del conf["backends"]["one"]
        path.write_text(yaml.safe_dump(conf))
        await asyncio.wait_for(watcher.changed.wait(), 10)
        now = await names(c)
        assert "two__echo" in now and not any(n.startswith("one__") for n in now)


async def test_an_invalid_reload_keeps_the_running_configuration(tmp_path, hopline_serve):
    path = tmp_path / "gw.yaml"
    conf = {"reload_interval": 0.1, "backends": {"one": {"command": DEMO[0], "args": DEMO[1:]}}}
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    path.write_text("backends: {bad__id: {command: x}}\n")
    gw.wait_line(r"cannot use this configuration", timeout=10)
    async with client(gw.url, "legacy") as c:
        assert "one__echo" in await names(c)


async def test_a_2026_listen_stream_gets_the_change_signal_on_reload(tmp_path, hopline_serve):
    import httpx
    import orjson

    from hopline.transports.sse import SSEParser

    path = tmp_path / "gw.yaml"
    conf = {"reload_interval": 0.1, "backends": {"one": {"command": DEMO[0], "args": DEMO[1:]}}}
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen", "params": {"_meta": meta, "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["x"]}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen"}
    events = []
    async with httpx.AsyncClient(timeout=20) as http:
        async with http.stream("POST", gw.url, content=orjson.dumps(body), headers=headers) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            parser = SSEParser()
            async for chunk in r.aiter_bytes():
                for ev in parser.feed(chunk):
                    if ev.data:
                        events.append(orjson.loads(ev.data))
                if len(events) == 1:
                    conf["backends"]["two"] = {"command": DEMO[0], "args": DEMO[1:]}
                    path.write_text(yaml.safe_dump(conf))
                if len(events) >= 2:
                    break
    ack, changed = events[0], events[1]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True}  # resource subscriptions not offered
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"


async def test_an_http_backend_error_never_shows_its_url_to_the_client(tmp_path, hopline_serve):
    """A backend URL may carry a secret (a token in its query): errors name the backend by
    its id, in the message and in ``data``, and the client never sees the URL."""
    import httpx
    import orjson

    from tests.peers import start_sdk_http, stop

    proc, url = start_sdk_http()
    secret = "s3cret-query-token"
    conf = {"backends": {"web": {"url": f"{url}?token={secret}"}}, "resilience": {"breaker": {"enabled": False}, "retry": {"enabled": False}}}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "web__echo", "arguments": {"text": "x"}, "_meta": meta}}
    async with httpx.AsyncClient(timeout=20) as http:
        ok = await http.post(gw.url, content=orjson.dumps(body), headers={**headers, "mcp-method": "tools/call", "mcp-name": "web__echo"})
        assert '"x"' in ok.text
        stop(proc)  # the backend goes away: the next call fails at the transport
        failed = await http.post(gw.url, content=orjson.dumps({**body, "id": 2}), headers={**headers, "mcp-method": "tools/call", "mcp-name": "web__echo"})
    error = failed.json()["error"]
    assert error["code"] == -31001 and error["data"]["backend"] == "web"
    assert secret not in failed.text and "127.0.0.1" not in failed.text
    assert secret not in "".join(gw.stderr)


# -- issue 29 item 9: the handshake does not wait for a backend that is still starting ------------

HUNG = [PY, "-c", "import time; time.sleep(3600)"]  # started, never answers initialize
GATED = [PY, "-c", "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
         "os.execv(sys.executable, [sys.executable, '-m', 'hopline.demo'])"]  # answers once its flag file exists


async def test_a_hung_backend_does_not_hold_any_clients_initialize(tmp_path, hopline_serve_eager):
    import httpx

    # startup_timeout 30 s; each client gives up after 10 s: an answer means the handshake did not wait for it
    gw = hopline_serve_eager(config(tmp_path, {"demo": DEMO, "hung": HUNG}, startup_timeout=30, list_timeout=1))
    gw.wait_line(r"backend demo: up")
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(timeout=10) as http:
        answers = await asyncio.gather(*(http.post(gw.url, json=init, headers=headers) for _ in range(3)))
        for r in answers:
            assert r.status_code == 200, r.text
            assert r.json()["result"]["capabilities"]["tools"] == {"listChanged": True}
        sid = answers[0].headers["mcp-session-id"]
        r = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                            headers={**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
        listed = r.json()["result"]
        assert "demo__echo" in [t["name"] for t in listed["tools"]]
        assert listed["_meta"]["io.hopline/missing-backends"] == ["hung"]
        r = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "hung__x", "arguments": {}}},
                            headers={**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
        assert r.json()["error"]["code"] == -31001
        assert r.json()["error"]["message"] == "backend hung is unavailable: still starting"


async def test_a_backend_known_to_be_slow_holds_no_handshake_at_all(tmp_path, hopline_serve):
    import httpx

    # The first handshake waits list_timeout (6 s) for hung, then gives up: hung is known slow, and the next
    # handshakes do not wait for it at all (each client allows 2 s; startup_timeout is 60 s).
    gw = hopline_serve(config(tmp_path, {"demo": DEMO, "hung": HUNG}, startup_timeout=60, list_timeout=6))
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(timeout=20) as http:
        first = await http.post(gw.url, json=init, headers=headers)
        assert "## demo" in first.json()["result"]["instructions"], first.text
        for _ in range(2):
            r = await http.post(gw.url, json=init, headers=headers, timeout=2)
            assert r.status_code == 200 and "## demo" in r.json()["result"]["instructions"], r.text


async def test_a_backend_that_starts_after_the_handshake_joins_with_a_change_signal(tmp_path, hopline_serve_eager):
    flag = tmp_path / "go"
    gw = hopline_serve_eager(config(tmp_path, {"demo": DEMO, "gated": [*GATED, str(flag)]}, startup_timeout=30, list_timeout=1), "--log-level", "info")
    gw.wait_line(r"backend demo: up")
    watcher = ChangeWatcher()
    async with asyncio.timeout(20), client(gw.url, "legacy", message_handler=watcher) as c:  # gated's 30 s not waited
        first = await names(c)
        assert "demo__echo" in first and not any(n.startswith("gated__") for n in first)
        assert not watcher.changed.is_set()
        flag.write_text("go")
        try:
            await asyncio.wait_for(watcher.changed.wait(), 10)
        except TimeoutError:
            raise AssertionError("".join(gw.stderr)) from None
        assert "gated__echo" in await names(c)
        assert text_of(await bounded(c.call_tool("gated__echo", {"text": "late"}))) == "late"
    gw.wait_line(r"INFO hopline.gateway: backend gated: up, joined a client session after its handshake")
