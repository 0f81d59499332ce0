"""A test ACP proxy speaking one dialect (d1, d4/d3 or d5/d2), written on raw NDJSON.

No SDK ships a proxy role, so this is what D4/D5 proxies look like in the wild:
it accepts only its own dialect's handshake (answering any other with -32601,
as a real one would), forwards ``initialize`` to its successor before
answering, forwards everything it does not understand, translates
``$/cancel_request`` to its own envelope ids, and tags agent text chunks with
``[TAG] `` so tests can see which proxies a message crossed.

Options: --dialect D, --tag TAG, --no-echo (D1: do not acknowledge the proxy
role), --pollute (print a non-JSON line to stdout first), --crash-on TEXT (exit
with status 7 when a prompt contains TEXT), --log FILE (append every received
message as a JSON line, for assertions), --exit-if-exists FILE (exit with status 9
at start-up while FILE exists: a component that cannot be restarted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

HANDSHAKE = {"d1": "initialize", "d2": "proxy/initialize", "d3": "_proxy/initialize", "d4": "_proxy/initialize", "d5": "proxy/initialize"}
ENVELOPE = {"d1": ("_proxy/successor/request", "_proxy/successor/notification"), "d2": ("proxy/successor",) * 2, "d3": ("_proxy/successor",) * 2, "d4": ("_proxy/successor",) * 2, "d5": ("proxy/successor",) * 2}
ALL_ENVELOPES = {"proxy/successor", "_proxy/successor", "_proxy/successor/request", "_proxy/successor/notification"}


class Proxy:
    def __init__(self, args: argparse.Namespace, out) -> None:
        self.args = args
        self.dialect = args.dialect
        self.out = out
        self.next_id = 0
        self.pending: dict[int, tuple[str, object]] = {}  # our id → (kind, their id)
        self.forwarded: dict[object, int] = {}  # predecessor's id → our envelope id
        self.log = open(args.log, "a") if args.log else None

    def send(self, body: dict) -> None:
        body["jsonrpc"] = "2.0"
        self.out.write(json.dumps(body) + "\n")
        self.out.flush()

    def successor(self, method: str, params, their_id=None, kind: str = "pred") -> None:
        req, note = ENVELOPE[self.dialect]
        inner = {"method": method}
        if params is not None:
            inner["params"] = params
        if their_id is None and kind == "pred":
            self.send({"method": note, "params": inner})
            return
        self.next_id += 1
        self.pending[self.next_id] = (kind, their_id)
        if kind == "pred":
            self.forwarded[their_id] = self.next_id
        self.send({"id": self.next_id, "method": req, "params": inner})

    def handle(self, msg: dict) -> None:
        if self.log:
            self.log.write(json.dumps(msg) + "\n")
            self.log.flush()
        method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params")
        if method is None:  # an answer to something we sent
            kind, their_id = self.pending.pop(msg_id, (None, None))
            if kind is None:
                return
            self.forwarded.pop(their_id, None)
            answer = {k: v for k, v in msg.items() if k in ("result", "error")}
            if kind == "init" and "result" in answer and self.dialect == "d1" and not self.args.no_echo:
                answer["result"] = {**answer["result"], "_meta": {**answer["result"].get("_meta", {}), "proxy": True}}
            self.send({"id": their_id, **answer})
            return
        if method in ALL_ENVELOPES:  # from our successor: goes to our predecessor
            inner_method, inner_params = params["method"], params.get("params")
            if msg_id is None:
                self.send({"method": inner_method, **({"params": self.tag(inner_method, inner_params)} if inner_params is not None else {})})
            else:
                self.next_id += 1
                self.pending[self.next_id] = ("succ", msg_id)
                self.send({"id": self.next_id, "method": inner_method, "params": inner_params})
            return
        if method in ("proxy/initialize", "_proxy/initialize") or (method == "initialize" and (params or {}).get("_meta", {}).get("proxy")):
            if method != HANDSHAKE[self.dialect]:
                self.send({"id": msg_id, "error": {"code": -32601, "message": "Method not found", "data": {"method": method}}})
                return
            clean = dict(params or {})
            meta = {k: v for k, v in clean.pop("_meta", {}).items() if k not in ("proxy", "mcp_acp_transport")}
            if meta:
                clean["_meta"] = meta
            self.successor("initialize", clean, msg_id, kind="init")
            return
        if method == "$/cancel_request":
            ours = self.forwarded.get((params or {}).get("requestId"))
            if ours is not None:
                self.send({"method": "$/cancel_request", "params": {"requestId": ours}})
            return
        if method == "session/prompt" and self.args.crash_on:
            text = " ".join(b.get("text", "") for b in (params or {}).get("prompt", []))
            if self.args.crash_on in text:
                os._exit(7)
        self.successor(method, params, msg_id)

    def tag(self, method: str, params):
        if method == "session/update" and self.args.tag:
            update = params.get("update", {})
            content = update.get("content")
            if update.get("sessionUpdate") == "agent_message_chunk" and isinstance(content, dict) and content.get("type") == "text":
                params = {**params, "update": {**update, "content": {**content, "text": f"[{self.args.tag}] {content['text']}"}}}
        return params


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dialect", default="d5", choices=sorted(HANDSHAKE))
    parser.add_argument("--tag", default="")
    parser.add_argument("--no-echo", action="store_true")
    parser.add_argument("--pollute", action="store_true")
    parser.add_argument("--crash-on", default="")
    parser.add_argument("--log", default="")
    parser.add_argument("--exit-if-exists", default="")
    args = parser.parse_args()
    if args.exit_if_exists and os.path.exists(args.exit_if_exists):
        sys.exit(9)
    if args.pollute:
        print("proxy starting up (this line pollutes stdout)", flush=True)
    proxy = Proxy(args, sys.stdout)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            proxy.handle(json.loads(line))


if __name__ == "__main__":
    asyncio.run(main())
