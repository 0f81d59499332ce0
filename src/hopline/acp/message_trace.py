"""``--trace FILE``: one JSON line per routed message.

Each line: ``ts`` (seconds, float), ``from`` and ``to`` (component names;
``client``/``parent`` upstream, ``successor`` for a proxy-mode conductor's own
successor, ``conductor`` for answers the conductor makes itself), ``kind``
(request, notification, result, error), ``method`` (for answers: the method
they answer), ``id`` (on the outgoing connection) and ``dialect`` (the envelope
or handshake dialect used on that hop, or null for plain ACP).

The file is written by the routing path, so a line costs one ``orjson.dumps``
and a buffered write; it is flushed when the conductor stops and whenever the
buffer fills.
"""

from __future__ import annotations

import time
from typing import IO

import orjson

from hopline.jsonrpc import Message


class TraceWriter:
    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[bytes] = open(path, "ab", buffering=1 << 16)

    def __call__(self, src: str, dst: str, message: Message, dialect: str | None, method: str | None) -> None:
        body = message.body
        if "method" in body:
            kind = "request" if "id" in body else "notification"
        else:
            kind = "error" if "error" in body else "result"
        record = {
            "ts": time.time(),
            "from": src,
            "to": dst,
            "kind": kind,
            "method": method,
            "id": body.get("id"),
            "dialect": dialect,
        }
        self._file.write(orjson.dumps(record) + b"\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
