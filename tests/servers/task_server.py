"""A minimal 2026-07-28 stdio backend with the Tasks extension (raw JSON lines, no SDK).

``tools/call job`` creates a task (``resultType: "task"``); ``tasks/get`` reports it
completed with its result; ``tasks/cancel`` cancels it; an unknown task id is -32602.
Enough to prove that a gateway routes ``tasks/*`` by the task id it exposed.
"""

import json
import sys

VERSION = "2026-07-28"
INFO = {"io.modelcontextprotocol/serverInfo": {"name": "task-server", "version": "1"}}
tasks: dict[str, str] = {}


def answer(msg_id, result=None, error=None):
    body = {"jsonrpc": "2.0", "id": msg_id}
    body.update({"error": error} if error else {"result": {"resultType": "complete", "_meta": INFO, **(result or {})}})
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg or "method" not in msg:
        continue
    method, params, msg_id = msg["method"], msg.get("params") or {}, msg["id"]
    if method == "server/discover":
        answer(msg_id, {"supportedVersions": [VERSION], "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}, "ttlMs": 0, "cacheScope": "private"})
    elif method == "tools/list":
        answer(msg_id, {"tools": [{"name": "job", "inputSchema": {"type": "object"}}], "ttlMs": 0, "cacheScope": "private"})
    elif method == "tools/call" and params.get("name") == "job":
        task_id = f"t-{len(tasks) + 1}"
        tasks[task_id] = "working"
        answer(msg_id, {"resultType": "task", "taskId": task_id, "status": "working", "createdAt": "2026-11-30T00:00:00Z", "lastUpdatedAt": "2026-11-30T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 100})
    elif method in ("tasks/get", "tasks/cancel"):
        task_id = params.get("taskId")
        if task_id not in tasks:
            answer(msg_id, error={"code": -32602, "message": f"unknown task {task_id}"})
        elif method == "tasks/cancel":
            tasks[task_id] = "cancelled"
            answer(msg_id, {})
        else:
            status = "cancelled" if tasks[task_id] == "cancelled" else "completed"
            answer(msg_id, {"taskId": task_id, "status": status, "result": {"content": [{"type": "text", "text": f"done {task_id}"}]}})
    elif method == "initialize":
        answer(msg_id, error={"code": -32022, "message": "unsupported", "data": {"supported": [VERSION], "requested": params.get("protocolVersion")}})
    else:
        answer(msg_id, error={"code": -32601, "message": f"Method not found: {method}"})
