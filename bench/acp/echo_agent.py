"""Benchmark echo agent (raw NDJSON): each prompt gets UPDATES agent_message_chunk updates, then end_turn."""

from __future__ import annotations

import os
import sys

import orjson

UPDATES = int(os.environ.get("ACP_BENCH_UPDATES", "10"))


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        msg = orjson.loads(line)
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            reply = [{"jsonrpc": "2.0", "id": msg_id, "result": {"protocolVersion": 1, "agentCapabilities": {}}}]
        elif method == "session/new":
            reply = [{"jsonrpc": "2.0", "id": msg_id, "result": {"sessionId": "bench"}}]
        elif method == "session/prompt":
            sid = params.get("sessionId")
            reply = [
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"chunk {i}"}}}}
                for i in range(UPDATES)
            ]
            reply.append({"jsonrpc": "2.0", "id": msg_id, "result": {"stopReason": "end_turn"}})
        elif msg_id is not None and method is not None:
            reply = [{"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "Method not found"}}]
        else:
            continue
        out.write(b"".join(orjson.dumps(r) + b"\n" for r in reply))
        out.flush()


if __name__ == "__main__":
    main()
