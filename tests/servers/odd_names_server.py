"""A minimal stdio MCP server (handshake era, no SDK) whose one tool has a name that is
markup: ``<script>alert(1)</script>``, and a description with an ``&`` and quotes. The
admin page must show it as text (tests/observability/test_admin_page.py)."""

from __future__ import annotations

import json
import sys

TOOL = {"name": "<script>alert(1)</script>", "description": "a \"tool\" & <b>markup</b>", "inputSchema": {"type": "object"}}


def answer(request_id, result=None, error=None) -> None:
    body = {"jsonrpc": "2.0", "id": request_id, **({"error": error} if error else {"result": result})}
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # notifications
    if method == "initialize":
        answer(request_id, {"protocolVersion": message["params"].get("protocolVersion", "2025-11-25"), "capabilities": {"tools": {}}, "serverInfo": {"name": "odd", "version": "1"}})
    elif method == "tools/list":
        answer(request_id, {"tools": [TOOL]})
    elif method == "ping":
        answer(request_id, {})
    else:
        answer(request_id, error={"code": -32601, "message": f"Method not found: {method}"})
