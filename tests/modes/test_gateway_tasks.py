"""Tasks through ``hopline serve``, bound to their caller, with real task-capable backends.

Backends: ``tests/servers/sdk_task_server.py`` (the official SDK's ``MCPServer`` with the
2026-07-28 Tasks extension plugged in through the SDK's extension seam; sequential,
guessable backend ids) and ``@modelcontextprotocol/server-everything`` (2025-11-25 tasks
from the TypeScript SDK's task store: ``tasks/get|result|list|cancel`` and
``notifications/tasks/status``). Clients: the official SDK client in both eras
(``tasks_peers.py`` adds the Tasks extension through the SDK's client extension seam);
the 2025-11-25 task calls go as raw JSON-RPC over HTTP, because the SDK client does not
implement that era's tasks (reference/mcp-wire.md §8).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
from pathlib import Path

import httpx
import orjson
import psutil
import pytest
import yaml
from mcp import MCPError

from tests.conftest import PY, SERVERS
from tests.modes.tasks_peers import call_task, task_rpc, tasks_client
from tests.peers import bounded, client, eventually, start_script, stop, text_of

TASKS = [PY, str(SERVERS / "sdk_task_server.py")]
EVERYTHING = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789ab"}


def write_config(tmp_path, backends: dict, **top) -> str:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({"backends": backends, **top}))
    return str(path)


def stdio(argv: list[str]) -> dict:
    return {"command": argv[0], "args": argv[1:]}


def api_keys() -> dict:
    return {"resource": "http://127.0.0.1/mcp", "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()]}


def unknown(task_id: str) -> dict:
    """The one answer for a task that is not the caller's (or not at all)."""
    return {"code": -32602, "message": f"Unknown task: {task_id!r}"}


async def refused(c, method: str, task_id: str, **params) -> dict:
    with pytest.raises(MCPError) as caught:
        await bounded(task_rpc(c, method, task_id, **params))
    return {"code": caught.value.error.code, "message": caught.value.error.message}


async def until_status(c, task_id: str, wanted: set[str]) -> dict:
    """tasks/get until the task reaches one of ``wanted`` (the protocol's own way to wait)."""

    async def poll() -> dict:
        while True:
            value = await task_rpc(c, "tasks/get", task_id)
            if value["status"] in wanted:
                return value
            await asyncio.sleep(0.02)

    return await bounded(poll())


# -- 2026-07-28: get, update, cancel ---------------------------------------------------------
@pytest.mark.parametrize("mode", ["forward", "reverse"])
async def test_get_update_cancel_end_to_end(tmp_path, hopline_serve, mode):
    gw = hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}, mode=mode))
    name = (lambda tool: f"jobs__{tool}") if mode == "forward" else (lambda tool: tool)
    c, _http = tasks_client(gw.url)
    async with c:
        job = await bounded(call_task(c, name("job"), {"steps": 2}))
        assert job["resultType"] == "task" and job["status"] == "working"
        assert job["taskId"] != "task-1" and len(job["taskId"]) >= 22  # the gateway's own, unguessable id
        assert job["taskId"].startswith("jobs:") == (mode == "forward")
        done = await until_status(c, job["taskId"], {"completed"})
        assert done["taskId"] == job["taskId"] and done["result"]["content"][0]["text"] == "job done after 2 steps"

        ask = await bounded(call_task(c, name("approve"), {"question": "ship it?"}))
        waiting = await until_status(c, ask["taskId"], {"input_required"})
        assert waiting["inputRequests"]["approval"]["params"]["message"] == "ship it?"
        reply = {"approval": {"action": "accept", "content": {"answer": "yes"}}}
        assert (await bounded(task_rpc(c, "tasks/update", ask["taskId"], input_responses=reply)))["resultType"] == "complete"
        approved = await until_status(c, ask["taskId"], {"completed"})
        assert approved["result"]["content"][0]["text"] == "approval: accept yes"

        run = await bounded(call_task(c, name("forever")))
        assert (await bounded(task_rpc(c, "tasks/cancel", run["taskId"])))["resultType"] == "complete"
        assert (await until_status(c, run["taskId"], {"cancelled"}))["taskId"] == run["taskId"]
        again = await refused(c, "tasks/cancel", run["taskId"])  # terminal: the backend's own -32602
        assert again["code"] == -32602 and "already cancelled" in again["message"]

        failing = await bounded(call_task(c, name("fail")))
        failed = await until_status(c, failing["taskId"], {"failed"})
        assert failed["error"] == {"code": -32603, "message": "the job failed on purpose"}


# -- bound to the caller ---------------------------------------------------------------------
async def test_another_principal_gets_the_unknown_task_answer(tmp_path, hopline_serve):
    """Two API keys, one backend credential (the same stdio child): bob cannot reach alice's task
    by her id, nor by the backend's guessable one; his attempts change nothing; alice's other
    connection can."""
    gw = hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}, auth=api_keys()))
    alice, _ = tasks_client(gw.url, headers={"x-api-key": KEYS["alice"]})
    bob, _ = tasks_client(gw.url, headers={"x-api-key": KEYS["bob"]})
    async with alice, bob:
        run = await bounded(call_task(alice, "jobs__forever"))
        task = run["taskId"]
        made_up = "jobs:" + "A" * 22
        assert await refused(bob, "tasks/get", made_up) == unknown(made_up)
        for attempt in (task, "jobs:task-1", "task-1"):
            assert await refused(bob, "tasks/get", attempt) == unknown(attempt)
            assert await refused(bob, "tasks/cancel", attempt) == unknown(attempt)
            reply = {"approval": {"action": "accept", "content": {"answer": "x"}}}
            assert await refused(bob, "tasks/update", attempt, input_responses=reply) == unknown(attempt)
        assert (await bounded(task_rpc(alice, "tasks/get", task)))["status"] == "working"  # bob's cancel did nothing
        again, _ = tasks_client(gw.url, headers={"x-api-key": KEYS["alice"]})
        async with again:  # bound to the principal, not to a connection
            assert (await bounded(task_rpc(again, "tasks/cancel", task)))["resultType"] == "complete"
        assert (await until_status(alice, task, {"cancelled"}))["status"] == "cancelled"


def everything_config(tmp_path) -> str:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():  # pragma: no cover - scripts/test installs them
        pytest.fail(f"npm peers missing: {EVERYTHING}; run scripts/test (npm ci in tests/node)", pytrace=False)
    return write_config(tmp_path, {"ev": {"command": node, "args": [str(EVERYTHING), "stdio"]}})


HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


class Session:
    """A handshake-era (2025-11-25) client session over raw HTTP, reading every SSE event."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.sid, self.ids = http, url, "", iter(range(1, 10_000))
        self.notes: list[dict] = []

    async def open(self) -> Session:
        init = {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {"list": {}, "cancel": {}}}, "clientInfo": {"name": "t", "version": "1"}}
        r = await self.http.post(self.url, content=orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}), headers=HEADERS)
        self.sid = r.headers["mcp-session-id"]
        await self.http.post(self.url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=self.headers)
        return self

    @property
    def headers(self) -> dict:
        return {**HEADERS, "mcp-session-id": self.sid, "mcp-protocol-version": "2025-11-25"}

    async def rpc(self, method: str, params: dict) -> dict:
        msg_id = next(self.ids)
        body = orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        async with self.http.stream("POST", self.url, content=body, headers=self.headers) as r:
            if r.headers.get("content-type", "").startswith("application/json"):
                return json.loads(await r.aread())
            async for line in r.aiter_lines():
                if line.startswith("data:") and line[5:].strip():
                    message = json.loads(line[5:])
                    if message.get("id") == msg_id and "method" not in message:
                        return message
                    self.notes.append(message)
        raise AssertionError(f"no answer to {method}")


async def test_handshake_sessions_tasks_list_and_status_are_their_own(tmp_path, hopline_serve):
    """Two anonymous handshake-era sessions on one shared server-everything session: each
    lists, gets, cancels and hears of its own tasks only."""
    gw = hopline_serve(everything_config(tmp_path))
    async with httpx.AsyncClient(timeout=30) as http:
        a, b = await Session(http, gw.url).open(), await Session(http, gw.url).open()
        call = {"name": "ev__simulate-research-query", "arguments": {"topic": "tasks"}, "task": {"ttl": 60000}}
        answer = await bounded(a.rpc("tools/call", call))
        created = answer["result"]["task"] if "result" in answer else pytest.fail(str(answer))
        task = created["taskId"]
        assert task.startswith("ev:") and created["status"] == "working"
        got = (await bounded(a.rpc("tasks/get", {"taskId": task})))["result"]
        assert got["taskId"] == task
        assert [t["taskId"] for t in (await bounded(a.rpc("tasks/list", {})))["result"]["tasks"]] == [task]
        assert (await bounded(b.rpc("tasks/list", {})))["result"]["tasks"] == []  # the backend's own list has it
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert (await bounded(b.rpc(method, {"taskId": task})))["error"] == unknown(task)
        outcome = (await bounded(a.rpc("tasks/result", {"taskId": task}), 30))["result"]
        assert "# Research Report: tasks" in outcome["content"][0]["text"]
        statuses = [n for n in a.notes if n.get("method") == "notifications/tasks/status"]
        assert statuses and {n["params"]["taskId"] for n in statuses} == {task}  # the exposed id, to its owner
        assert not [n for n in b.notes if "tasks" in n.get("method", "")]

        second = (await bounded(b.rpc("tools/call", call)))["result"]["task"]["taskId"]
        assert (await bounded(b.rpc("tasks/cancel", {"taskId": second})))["result"]["status"] == "cancelled"
        assert (await bounded(a.rpc("tasks/cancel", {"taskId": second})))["error"] == unknown(second)


# -- policy ----------------------------------------------------------------------------------
async def test_cel_can_deny_tasks_cancel(tmp_path, hopline_serve):
    rules = ['mcp.method != "tasks/cancel"']
    gw = hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}, policy={"rules": rules}))
    c, _ = tasks_client(gw.url)
    async with c:
        run = await bounded(call_task(c, "jobs__forever"))
        assert await refused(c, "tasks/cancel", run["taskId"]) == unknown(run["taskId"])
        assert (await bounded(task_rpc(c, "tasks/get", run["taskId"])))["status"] == "working"  # get is allowed
        assert text_of(await bounded(c.call_tool("jobs__cancelled_count", {}))) == "0"  # nothing reached the backend


async def test_cel_rule_on_a_tool_governs_its_tasks(tmp_path, hopline_serve):
    rules = ['mcp.tool.name == "echo" || (mcp.tool.name == "forever" && mcp.method != "tasks/get")']
    gw = hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}, policy={"rules": rules}))
    c, _ = tasks_client(gw.url)
    async with c:
        run = await bounded(call_task(c, "jobs__forever"))
        assert await refused(c, "tasks/get", run["taskId"]) == unknown(run["taskId"])
        assert (await bounded(task_rpc(c, "tasks/cancel", run["taskId"])))["resultType"] == "complete"


# -- a handshake-era client, a 2026-07-28 task backend -----------------------------------------
@pytest.fixture
def modern_only_gateway(tmp_path, hopline_serve):
    proc, port = start_script(str(SERVERS / "sdk_task_server.py"), "http", "--modern-only")
    try:
        yield hopline_serve(write_config(tmp_path, {"jobs": {"url": f"http://127.0.0.1:{port}/mcp"}}))
    finally:
        stop(proc)


async def test_handshake_client_gets_the_tasks_result_with_progress(modern_only_gateway):
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async with client(modern_only_gateway.url, "legacy") as c:
        result = await bounded(c.call_tool("jobs__job", {"steps": 3, "ms": 60}, progress_callback=on_progress))
        assert text_of(result) == "job done after 3 steps" and result.structured_content == {"result": "job done after 3 steps"}
        assert seen and [p for p, _ in seen] == list(range(1, len(seen) + 1))  # one per status change, in order
        assert {m for _, m in seen} >= {"step 3/3"}
        approved = await bounded(c.call_tool("jobs__approve", {"question": "ok?"}))  # input_required → elicitation
        assert text_of(approved) == "approval: accept yes"
        with pytest.raises(MCPError) as failed:
            await bounded(c.call_tool("jobs__fail", {}))
        assert (failed.value.error.code, failed.value.error.message) == (-32603, "the job failed on purpose")


async def test_handshake_clients_cancel_cancels_the_task(modern_only_gateway):
    started = asyncio.Event()

    async def on_progress(progress, total, message):
        started.set()

    async with client(modern_only_gateway.url, "legacy") as c:
        call = asyncio.ensure_future(c.call_tool("jobs__forever", {}, progress_callback=on_progress))
        await bounded(started.wait())  # the task exists and is being polled
        call.cancel()  # the SDK sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await call

        async def cancelled() -> str:
            while (count := text_of(await c.call_tool("jobs__cancelled_count", {}))) == "0":
                await asyncio.sleep(0.02)
            return count

        assert await bounded(cancelled()) == "1"


async def test_a_task_past_the_calls_deadline_is_cancelled(tmp_path, hopline_serve):
    proc, port = start_script(str(SERVERS / "sdk_task_server.py"), "http", "--modern-only")
    try:
        gw = hopline_serve(write_config(tmp_path, {"jobs": {"url": f"http://127.0.0.1:{port}/mcp", "timeout": 0.5}}))
        async with client(gw.url, "legacy") as c:
            with pytest.raises(MCPError) as late:
                await bounded(c.call_tool("jobs__forever", {}))
            assert late.value.error.code == -31002
            assert text_of(await bounded(c.call_tool("jobs__cancelled_count", {}))) == "1"
    finally:
        stop(proc)


# -- bounds ------------------------------------------------------------------------------------
async def test_a_caller_past_its_task_bound_loses_its_oldest_task(tmp_path, hopline_serve):
    gw = hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}, tasks={"max_per_caller": 2}))
    c, _ = tasks_client(gw.url)
    async with c:
        ids = [(await bounded(call_task(c, "jobs__forever")))["taskId"] for _ in range(3)]
        assert await refused(c, "tasks/get", ids[0]) == unknown(ids[0])  # forgotten: fail closed
        for task in ids[1:]:
            assert (await bounded(task_rpc(c, "tasks/get", task)))["status"] == "working"


async def test_a_task_whose_backend_went_away(tmp_path, hopline_serve):
    gw = hopline_serve(write_config(tmp_path, {"jobs": stdio(TASKS)}))
    c, _ = tasks_client(gw.url)
    async with c:
        task = (await bounded(call_task(c, "jobs__forever")))["taskId"]
        child = next(p for p in gw.descendants() if "sdk_task_server.py" in " ".join(p.cmdline()))
        child.send_signal(signal.SIGKILL)
        await bounded(asyncio.to_thread(psutil.wait_procs, [child], 10))
        gone = await refused(c, "tasks/get", task)  # a clear error at once, never a hang or someone else's task
        assert gone["code"] in (-32602, -31001), gone

        async def restarted() -> dict:
            while True:
                try:
                    await task_rpc(c, "tasks/get", task)
                except MCPError as exc:
                    if exc.error.code == -32602:  # the new child does not know it
                        return {"code": exc.error.code}
                await asyncio.sleep(0.05)

        assert (await bounded(restarted()))["code"] == -32602
