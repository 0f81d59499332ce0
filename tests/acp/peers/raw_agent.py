"""A minimal ACP agent on raw NDJSON, for what the SDK agent cannot show.

It honours ``$/cancel_request`` (the Python SDK does not): a ``wait`` prompt
stays open until cancelled, then answers error -32800. ``--log FILE`` appends
every received message as a JSON line. ``--pollute`` prints non-JSON text to
stdout before and after the first answer. ``--exit-after-init`` exits (status
5) after answering ``initialize``. A ``crash`` prompt exits with status 4. Other
prompts get one chunk and end_turn.
"""

from __future__ import annotations

import argparse
import json
import sys


def send(body: dict) -> None:
    body["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", default="")
    parser.add_argument("--pollute", action="store_true")
    parser.add_argument("--exit-after-init", action="store_true")
    args = parser.parse_args()
    log = open(args.log, "a") if args.log else None
    waiting: set = set()
    sessions = 0
    if args.pollute:
        print("raw agent: hello from stdout", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if log:
            log.write(json.dumps(msg) + "\n")
            log.flush()
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send({"id": msg_id, "result": {"protocolVersion": params.get("protocolVersion", 1), "agentCapabilities": {}, "agentInfo": {"name": "raw-agent", "version": "1"}}})
            if args.pollute:
                print("DEBUG: initialized", flush=True)
            if args.exit_after_init:
                sys.exit(5)
        elif method == "session/new":
            sessions += 1
            send({"id": msg_id, "result": {"sessionId": f"raw-{sessions}"}})
        elif method == "session/prompt":
            text = " ".join(b.get("text", "") for b in params.get("prompt", []))
            if text.startswith("wait"):
                waiting.add(msg_id)
                continue
            if text.startswith("crash"):
                sys.exit(4)
            send({"method": "session/update", "params": {"sessionId": params.get("sessionId"), "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"echo: {text}"}}}})
            send({"id": msg_id, "result": {"stopReason": "end_turn"}})
        elif method == "$/cancel_request":
            rid = params.get("requestId")
            if rid in waiting:
                waiting.discard(rid)
                send({"id": rid, "error": {"code": -32800, "message": "Request cancelled"}})
        elif msg_id is not None and method is not None:
            send({"id": msg_id, "error": {"code": -32601, "message": "Method not found", "data": {"method": method}}})


if __name__ == "__main__":
    main()
