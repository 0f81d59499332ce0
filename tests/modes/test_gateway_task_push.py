"""Task status pushed through ``hopline serve`` on a 2026-07-28 listen (Tasks extension,
SEP-2663; ``layers/session/task_push.py``).

Backend: ``tests/servers/sdk_task_server.py`` (the official SDK's ``MCPServer`` with the Tasks
extension; it pushes ``notifications/tasks`` on a ``subscriptions/listen`` naming ``taskIds``,
and its ``task_listens`` tool says which task ids are subscribed there now), over stdio and
over Streamable HTTP. Clients: the official SDK client (``tasks_peers.py``) creates the tasks;
the listens are raw Streamable HTTP requests read frame by frame. Two API keys, one backend
credential: what alice's tasks push must never reach bob.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import SERVERS
from tests.modes.tasks_peers import call_task, tasks_client
from tests.modes.test_gateway_tasks import KEYS, TASKS, api_keys, stdio, write_config
from tests.peers import bounded, start_script, stop, text_of

MODERN = "2026-07-28"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


@pytest.fixture(params=["stdio", "http"])
def gateway(request, tmp_path, hopline_serve):
    """``hopline serve`` with API keys in front of the task backend (a stdio child, or over HTTP)."""
    if request.param == "stdio":
        yield hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}, auth=api_keys()))
        return
    proc, port = start_script(str(SERVERS / "sdk_task_server.py"), "http")
    try:
        backend = {"url": f"http://127.0.0.1:{port}/mcp"}
        yield hopline_serve(write_config(tmp_path, {"jobs": backend}, auth=api_keys()))
    finally:
        stop(proc)


class Listen:
    """One open ``subscriptions/listen`` on the gateway, as one caller: its frames as they arrive."""

    def __init__(self, http: httpx.AsyncClient, url: str, who: str, listen_id: str, notifications: dict) -> None:
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.seen: list[dict[str, Any]] = []
        body = {"jsonrpc": "2.0", "id": listen_id, "method": "subscriptions/listen"}
        body["params"] = {"_meta": META, "notifications": notifications}
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": "subscriptions/listen",
            "x-api-key": KEYS[who],
        }
        self._task = asyncio.create_task(self._run(http, url, orjson.dumps(body), headers))

    async def _run(self, http: httpx.AsyncClient, url: str, body: bytes, headers: dict) -> None:
        async with http.stream("POST", url, content=body, headers=headers) as r:
            assert r.headers["content-type"].startswith("text/event-stream"), r.status_code
            async for line in r.aiter_lines():
                if line.startswith("data:"):
                    frame = orjson.loads(line[5:])
                    self.seen.append(frame)
                    await self.frames.put(frame)

    async def next(self, method: str) -> dict[str, Any]:
        async def wait() -> dict[str, Any]:
            while True:
                frame = await self.frames.get()
                if frame.get("method") == method:
                    return frame

        return await bounded(wait())

    async def acknowledged(self) -> list[str]:
        ack = await self.next("notifications/subscriptions/acknowledged")
        return ack["params"]["notifications"].get("taskIds")

    async def until(self, status: str) -> list[dict[str, Any]]:
        """The pushed tasks up to the first in ``status``."""
        pushed = []
        while True:
            pushed.append((await self.next("notifications/tasks"))["params"])
            if pushed[-1]["status"] == status:
                return pushed

    def pushed(self) -> list[dict[str, Any]]:
        return [f for f in self.seen if f.get("method") == "notifications/tasks"]

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def backend_listens(c) -> list[list[str]]:
    """The task ids of each task listen open at the backend now (its own ids)."""
    return json.loads(text_of(await bounded(c.call_tool("jobs__task_listens", {}))))


async def until_backend_listens(c, wanted: list[list[str]]) -> None:
    async def poll() -> None:
        while await backend_listens(c) != wanted:
            await asyncio.sleep(0.02)

    await bounded(poll())


async def test_status_is_pushed_to_the_owner_under_its_own_ids(gateway):
    alice, _ = tasks_client(gateway.url, headers={"x-api-key": KEYS["alice"]})
    async with alice, httpx.AsyncClient(timeout=30) as http:
        job = await bounded(call_task(alice, "jobs__job", {"steps": 4, "ms": 150}))
        task = job["taskId"]
        made_up = "jobs:" + "A" * 22
        listen = Listen(http, gateway.url, "alice", "L1", {"taskIds": [made_up, task, "jobs:task-1", "task-1"]})
        try:
            assert await listen.acknowledged() == [task]  # her own task; the rest as unknown
            pushed = await listen.until("completed")
            assert {p["taskId"] for p in pushed} == {task}
            assert pushed[-1]["result"]["content"][0]["text"] == "job done after 4 steps"
            assert any(p["status"] == "working" and p.get("statusMessage", "").startswith("step ") for p in pushed)
            for frame in listen.pushed():
                assert frame["params"]["_meta"] == {SUBSCRIPTION: "L1"}  # her listen's id, not the gateway's
                assert b'"task-1"' not in orjson.dumps(frame)  # never the backend's own id
            assert await backend_listens(alice) == [["task-1"]]  # subscribed at the backend under its id
        finally:
            await listen.close()


async def test_another_callers_task_is_not_subscribed_and_nothing_reaches_them(gateway):
    alice, _ = tasks_client(gateway.url, headers={"x-api-key": KEYS["alice"]})
    async with alice, httpx.AsyncClient(timeout=30) as http:
        task = (await bounded(call_task(alice, "jobs__forever")))["taskId"]
        made_up = "jobs:" + "B" * 22
        bob = Listen(http, gateway.url, "bob", "B1", {"taskIds": [task, "jobs:task-1", "task-1"]})
        unknown = Listen(http, gateway.url, "bob", "B2", {"taskIds": [made_up]})
        owner = Listen(http, gateway.url, "alice", "A1", {"taskIds": [task]})
        try:
            assert await bob.acknowledged() == []  # alice's id: the answer for an unknown task
            assert await unknown.acknowledged() == []
            assert await owner.acknowledged() == [task]
            for _ in range(3):  # the backend keeps pushing alice's task (a beat every 50 ms)…
                assert (await owner.next("notifications/tasks"))["params"]["taskId"] == task
            await until_backend_listens(alice, [["task-1"]])  # …on her listen alone: bob's subscribed nothing
            assert bob.pushed() == [] and unknown.pushed() == []
            assert [f["method"] for f in bob.seen] == ["notifications/subscriptions/acknowledged"]
        finally:
            for listen in (bob, unknown, owner):
                await listen.close()


async def test_nothing_is_pushed_after_the_listen_closes(gateway):
    alice, _ = tasks_client(gateway.url, headers={"x-api-key": KEYS["alice"]})
    async with alice, httpx.AsyncClient(timeout=30) as http:
        task = (await bounded(call_task(alice, "jobs__forever")))["taskId"]
        other = Listen(http, gateway.url, "alice", "A0", {"toolsListChanged": True})  # asks for no task
        first = Listen(http, gateway.url, "alice", "A1", {"taskIds": [task]})
        try:
            await other.acknowledged()
            assert await first.acknowledged() == [task]
            await first.next("notifications/tasks")
            await first.close()
            await until_backend_listens(alice, [])  # the gateway's listen at the backend is gone too
            again = Listen(http, gateway.url, "alice", "A2", {"taskIds": [task]})
            try:  # a new listen is pushed to again, with its own id
                assert await again.acknowledged() == [task]
                beat = await again.next("notifications/tasks")
                assert beat["params"]["taskId"] == task and beat["params"]["_meta"] == {SUBSCRIPTION: "A2"}
            finally:
                await again.close()
            await until_backend_listens(alice, [])
            assert other.pushed() == []  # a listen that named no task never got one
        finally:
            await first.close()
            await other.close()


async def test_a_client_gone_while_its_task_listen_opens_leaves_nothing_open(gateway):
    """The client closes its listen while the gateway still waits for the backend's
    acknowledgement of the task listen it opened there: that backend listen goes too."""
    alice, _ = tasks_client(gateway.url, headers={"x-api-key": KEYS["alice"]})
    async with alice, httpx.AsyncClient(timeout=30) as http:
        task = (await bounded(call_task(alice, "jobs__forever")))["taskId"]
        await bounded(alice.call_tool("jobs__hold_acks", {"seconds": 4}))  # under the gateway's 5 s wait
        listen = Listen(http, gateway.url, "alice", "A1", {"taskIds": [task]})
        try:
            async def opened() -> None:
                while len(await backend_listens(alice)) != 1:
                    await asyncio.sleep(0.02)

            await bounded(opened())  # the backend holds the gateway's task listen, not acknowledged yet
            await listen.close()
            await until_backend_listens(alice, [])  # closed at the backend, long before its 4 s ack
            assert listen.seen == []  # the client was never acknowledged
        finally:
            await listen.close()
            await bounded(alice.call_tool("jobs__hold_acks", {"seconds": 0}))


async def test_a_task_listen_the_backend_ends_is_reopened(gateway):
    """The backend ends the gateway's task listen on its own while the client's listen is
    open: the gateway opens it again, and the task's next state still reaches the client."""
    alice, _ = tasks_client(gateway.url, headers={"x-api-key": KEYS["alice"]})
    async with alice, httpx.AsyncClient(timeout=30) as http:
        task = (await bounded(call_task(alice, "jobs__job", {"steps": 30, "ms": 100})))["taskId"]
        listen = Listen(http, gateway.url, "alice", "A1", {"taskIds": [task]})
        try:
            assert await listen.acknowledged() == [task]
            await listen.next("notifications/tasks")
            [backend_id] = (await backend_listens(alice))[0]
            assert text_of(await bounded(alice.call_tool("jobs__end_task_listens", {}))) == "1"
            await until_backend_listens(alice, [[backend_id]])  # open again at the backend
            before = len(listen.pushed())
            pushed = await listen.until("completed")  # the job's later steps still reach the client
            assert pushed[-1]["taskId"] == task and len(listen.pushed()) > before
            assert all(f["params"]["_meta"] == {SUBSCRIPTION: "A1"} for f in listen.pushed())
        finally:
            await listen.close()
