"""Benchmark D5 proxy (raw NDJSON): forwards everything unchanged, as cheaply as Python allows."""

from __future__ import annotations

import sys

import orjson


def main() -> None:
    out = sys.stdout.buffer
    next_id = 0
    pending: dict[int, object] = {}
    for line in sys.stdin.buffer:
        msg = orjson.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if method is None:  # an answer to our successor request
            reply = {"jsonrpc": "2.0", "id": pending.pop(msg_id), **{k: v for k, v in msg.items() if k in ("result", "error")}}
        elif method == "proxy/successor":  # from our successor: pass it to our predecessor
            inner = msg["params"]
            reply = {"jsonrpc": "2.0", "method": inner["method"], "params": inner.get("params")}
            if msg_id is not None:
                next_id += 1
                pending[next_id] = msg_id
                reply["id"] = next_id
        else:  # from our predecessor: send it to our successor
            inner_method = "initialize" if method == "proxy/initialize" else method
            reply = {"jsonrpc": "2.0", "method": "proxy/successor", "params": {"method": inner_method, "params": msg.get("params")}}
            if msg_id is not None:
                next_id += 1
                pending[next_id] = msg_id
                reply["id"] = next_id
        out.write(orjson.dumps(reply) + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
