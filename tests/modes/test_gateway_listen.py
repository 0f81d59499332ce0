"""2026-07-28 listen streams through the gateway, from backends that only speak on listen
streams (layers/session/backend_listens.py): a 2026-07-28 SDK backend's tool-list change and
resource update reach a client's `subscriptions/listen` stream on the gateway, tagged with
the client's own subscription id and the gateway's URI form; URIs that route nowhere are
not acknowledged; an update for a URI nobody asked for reaches nobody."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
import yaml

from tests.peers import start_sdk_http, stop

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def sdk_http():
    proc, url = start_sdk_http("--stateless")
    try:
        yield url
    finally:
        stop(proc)


def headers(method: str, name: str | None = None) -> dict[str, str]:
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN, "mcp-method": method}
    if name is not None:
        h["mcp-name"] = name
    return h


async def call(http: httpx.AsyncClient, url: str, msg_id: int, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    r = await http.post(url, content=orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {**params, "_meta": META}}), headers=headers(method, name))
    if r.headers["content-type"].startswith("text/event-stream"):
        frames = [orjson.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
        return next(f for f in frames if f.get("id") == msg_id)
    return r.json()


class Stream:
    """One open listen stream: its frames, as they arrive."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def run(self, http: httpx.AsyncClient, url: str, listen_id: str, notifications: dict[str, Any]) -> None:
        body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen", "params": {"_meta": META, "notifications": notifications}}
        async with http.stream("POST", url, content=orjson.dumps(body), headers=headers("subscriptions/listen")) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    await self.frames.put(orjson.loads(line[5:]))

    async def next(self, method: str) -> dict[str, Any]:
        while True:
            frame = await asyncio.wait_for(self.frames.get(), 10)
            if frame.get("method") == method:
                return frame


async def test_backend_list_changes_and_resource_updates_reach_listen_streams(tmp_path, hopline_serve, sdk_http):
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"sdk": {"url": sdk_http, "stateless": True}}}))
    gw = hopline_serve(str(path))
    async with httpx.AsyncClient(timeout=20) as http:
        watcher, bystander = Stream(), Stream()
        asked = {"toolsListChanged": True, "resourceSubscriptions": ["hopline://sdk/test://info", "hopline://nobody/x", "not-a-gateway-uri"]}
        tasks = [
            asyncio.create_task(watcher.run(http, gw.url, "L1", asked)),
            asyncio.create_task(bystander.run(http, gw.url, "L2", {"resourceSubscriptions": ["hopline://sdk/test://other"]})),
        ]
        try:
            ack = await watcher.next("notifications/subscriptions/acknowledged")
            assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["hopline://sdk/test://info"]}
            assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
            await bystander.next("notifications/subscriptions/acknowledged")

            touched = await call(http, gw.url, 1, "tools/call", {"name": "sdk__touch", "arguments": {"uri": "test://info"}}, name="sdk__touch")
            assert touched["result"]["content"][0]["text"] == "touched"
            update = await watcher.next("notifications/resources/updated")
            assert update["params"]["uri"] == "hopline://sdk/test://info"
            assert update["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "L1"}

            before = await call(http, gw.url, 2, "tools/list", {})
            assert "sdk__fresh" not in [t["name"] for t in before["result"]["tools"]]
            await call(http, gw.url, 3, "tools/call", {"name": "sdk__grow", "arguments": {"name": "fresh"}}, name="sdk__grow")
            changed = await watcher.next("notifications/tools/list_changed")
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
            after = await call(http, gw.url, 4, "tools/list", {})
            assert "sdk__fresh" in [t["name"] for t in after["result"]["tools"]]
            # The bystander asked for another URI and no list changes: it got nothing else.
            assert bystander.frames.empty()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
