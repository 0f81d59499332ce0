"""tests/servers/sdk_server.py over Streamable HTTP, recording every request it receives.

Usage::

    python recorder_server.py --port P --record FILE [--reject-first N]

Each HTTP request (method, path, query, every header, the whole body) is appended to
FILE as one JSON line *before* the SDK server handles it, so a test that got its
answer through a gateway can read everything the backend saw, with no waiting.
``--reject-first N`` answers the first N requests that carry an ``Authorization``
header with 401 (to test credential renewal). Serves ``http://127.0.0.1:P/mcp``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class Recorder:
    def __init__(self, app, record: Path, reject_first: int) -> None:
        self.app, self.record, self.reject = app, record, reject_first

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
        entry = {"method": scope["method"], "path": scope["path"], "query": scope["query_string"].decode("latin-1"), "headers": headers, "body": b"".join(chunks).decode("utf-8", "replace")}
        with self.record.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        if self.reject > 0 and any(k.lower() == "authorization" for k, _ in headers):
            self.reject -= 1
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})
            return
        body, sent = b"".join(chunks), False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def start(record: Path, *flags: str):
    """Run this server on a free port: (process, /mcp URL). Stop it with tests.peers.stop."""
    from tests.peers import start_script

    proc, port = start_script(__file__, "--record", str(record), *flags)
    return proc, f"http://127.0.0.1:{port}/mcp"


def recorded(record: Path) -> list[dict]:
    """Every request the server received so far."""
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--reject-first", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from sdk_server import mcp
    from serving import bind, port_of, serve

    app = Recorder(mcp.streamable_http_app(stateless_http=False, json_response=False), args.record, args.reject_first)
    sock = bind(args.port)
    serve(app, sock, f"recorder_server: http://127.0.0.1:{port_of(sock)}/mcp", lifespan="on")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
