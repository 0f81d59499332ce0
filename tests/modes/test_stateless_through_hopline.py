"""2026-07-28 stateless requests through hopline as the official SDK answers them directly
(issue 18; the conformance suite's ``server-stateless`` scenario checks the same, in
tests/interop/test_conformance.py):

- a relay passes a request at a protocol version hopline does not know through, so the
  client gets the backend's -32022 listing the backend's versions, not hopline's;
- several ``subscriptions/listen`` streams through a relay share one backend connection and
  each still gets its own frames at once (its acknowledgement first), tagged with the
  client's own listen id, and no change it did not ask for;
- a request whose ``_meta`` lacks ``io.modelcontextprotocol/clientCapabilities`` (required on
  every 2026-07-28 request, RequestMetaObject) is refused with -32602 / HTTP 400 by every
  path: relay, and the gateway in reverse and forward mode, which answers ``server/discover``
  itself.

The backend is tests/servers/conformance_server.py (the official Python SDK).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import PY, SERVERS
from tests.peers import start_script, stop

pytestmark = pytest.mark.timeout(60)

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SUB = "io.modelcontextprotocol/subscriptionId"
CAPS = "io.modelcontextprotocol/clientCapabilities"


@pytest.fixture(scope="module")
def backend():
    proc, port = start_script(str(SERVERS / "conformance_server.py"))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


@pytest.fixture
def relay(hopline_relay, backend):
    return hopline_relay(backend).url


@pytest.fixture
def paths(hopline_relay, hopline_serve, backend, tmp_path) -> dict[str, str]:
    """The backend directly and through each hopline path."""
    reverse = tmp_path / "reverse.json"
    reverse.write_text(json.dumps({"mode": "reverse", "backends": {"conformance": {"url": backend}}}))
    forward = tmp_path / "forward.json"
    forward.write_text(
        json.dumps(
            {
                "mode": "forward",
                "backends": {
                    "conformance": {"url": backend, "prefix": False},
                    "demo": {"command": PY, "args": ["-m", "hopline.demo", "--log-level", "warning"]},
                },
            }
        )
    )
    return {
        "direct": backend,
        "relay": hopline_relay(backend).url,
        "reverse": hopline_serve(str(reverse)).url,
        "forward": hopline_serve(str(forward)).url,
    }


def headers(method: str, version: str = MODERN, name: str | None = None) -> dict[str, str]:
    h = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": version,
        "mcp-method": method,
    }
    if name is not None:
        h["mcp-name"] = name
    return h


def answer_of(resp: httpx.Response, msg_id: Any) -> dict[str, Any]:
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        frames = [orjson.loads(line[5:]) for line in resp.text.splitlines() if line.startswith("data:")]
        return next(f for f in frames if f.get("id") == msg_id)
    return resp.json()


def post(url: str, msg_id: Any, method: str, params: dict[str, Any], **kw: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    return httpx.post(url, content=orjson.dumps(body), headers=headers(method, **kw), timeout=20)


# -- 1. an unknown version: the backend's answer, through the relay -------------------------------
def test_a_relay_lets_the_backend_answer_a_version_hopline_does_not_know(backend, relay):
    discovered = answer_of(post(backend, 1, "server/discover", {"_meta": META}), 1)["result"]["supportedVersions"]
    unknown = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    answers = {}
    for path, url in (("direct", backend), ("relay", relay)):
        resp = post(url, 301, "server/discover", {"_meta": unknown}, version="v999.0.0")
        answers[path] = (resp.status_code, answer_of(resp, 301))
    assert answers["relay"] == answers["direct"]
    status, answer = answers["relay"]
    assert status == 400 and answer["id"] == 301 and answer["error"]["code"] == -32022
    assert answer["error"]["data"] == {"supported": discovered, "requested": "v999.0.0"}
    assert "2025-11-25" not in discovered  # hopline's own list (every version it speaks) would name it


def test_a_relay_still_refuses_an_unknown_header_its_body_does_not_name_itself(relay):
    """What is not a 2026-07-28 request at that version (here: _meta names another) is hopline's
    to refuse, as before: -32022 to the request's id, listing the versions hopline speaks."""
    resp = post(relay, 5, "tools/list", {"_meta": META}, version="v999.0.0")
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert resp.json()["id"] == 5 and error["code"] == -32022
    assert error["data"]["requested"] == "v999.0.0" and "2025-11-25" in error["data"]["supported"]


# -- 2. listen streams through the relay -------------------------------------------------------------
class Stream:
    """One open listen stream: its frames as they arrive, and when."""

    def __init__(self, http: httpx.AsyncClient, url: str, listen_id: Any, notifications: dict[str, Any]) -> None:
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        body = {
            "jsonrpc": "2.0",
            "id": listen_id,
            "method": "subscriptions/listen",
            "params": {"_meta": META, "notifications": notifications},
        }
        self.task = asyncio.create_task(self._run(http, url, body))

    async def _run(self, http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
        async with http.stream(
            "POST", url, content=orjson.dumps(body), headers=headers("subscriptions/listen")
        ) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    await self.frames.put(orjson.loads(line[5:]))

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.frames.get(), 5)


async def trigger(http: httpx.AsyncClient, url: str, msg_id: int, tool: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": META},
    }
    resp = await http.post(url, content=orjson.dumps(body), headers=headers("tools/call", name=tool))
    assert "result" in answer_of(resp, msg_id), resp.text


async def test_listen_streams_through_a_relay_each_get_their_own_frames(relay):
    """As the suite does it: a first stream stays open while the next ones are opened. The
    backend tags each stream's frames with its (relay-chosen) listen id; each reaches its own
    stream alone, under the client's id; a tools change never reaches a prompts-only stream."""
    async with httpx.AsyncClient(timeout=20) as http:
        tools = Stream(http, relay, 7, {"toolsListChanged": True})
        assert await tools.next() == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {SUB: 7}, "notifications": {"toolsListChanged": True}},
        }
        prompts = Stream(http, relay, "p-1", {"promptsListChanged": True})
        streams = [tools, prompts]
        try:
            ack = await prompts.next()  # the relay dropped it when two listens were in flight
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"] == {SUB: "p-1"}
            await trigger(http, relay, 1, "test_trigger_tool_change")
            changed = await tools.next()
            assert changed == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
                "params": {"_meta": {SUB: 7}},
            }
            # Had the tools change been broadcast, it would be in the prompts stream's queue before this one.
            await trigger(http, relay, 2, "test_trigger_prompt_change")
            assert (await prompts.next())["method"] == "notifications/prompts/list_changed"
            again = Stream(http, relay, 8, {"toolsListChanged": True})  # a third, with both still open
            streams.append(again)
            assert (await again.next())["params"]["_meta"] == {SUB: 8}
        finally:
            for stream in streams:
                stream.task.cancel()
            await asyncio.gather(*(s.task for s in streams), return_exceptions=True)


# -- 3. _meta without clientCapabilities ----------------------------------------------------------------
@pytest.mark.parametrize(
    "meta",
    [
        {k: v for k, v in META.items() if k != CAPS},
        {**META, CAPS: ["sampling"]},  # not an object
    ],
    ids=["missing", "not-an-object"],
)
@pytest.mark.parametrize("method", ["server/discover", "tools/list"])
def test_every_path_refuses_a_request_without_client_capabilities(paths, method, meta):
    """Directly the SDK refuses it; through hopline every path does the same (the gateway
    answers server/discover itself, so it must check the envelope itself)."""
    got = {}
    for path, url in paths.items():
        resp = post(url, 104, method, {"_meta": meta})
        answer = answer_of(resp, 104)
        got[path] = (resp.status_code, answer.get("id"), answer.get("error", {}).get("code"))
    assert got == {path: (400, 104, -32602) for path in paths}


def test_every_path_serves_a_request_with_client_capabilities_and_without_client_info(paths):
    """clientInfo is a SHOULD: its absence is no reason to refuse."""
    meta = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"}
    for path, url in paths.items():
        resp = post(url, 105, "server/discover", {"_meta": meta})
        assert resp.status_code == 200, (path, resp.text)
        assert MODERN in answer_of(resp, 105)["result"]["supportedVersions"], path
