"""A sans-io driver for :class:`hopline.acp.router.Router`: feed bodies, read what it sends."""

from __future__ import annotations

from typing import Any

import orjson

from hopline.acp import chain
from hopline.acp.router import Router
from hopline.jsonrpc import parse

CLIENT, P1, P2, AGENT = 0, 1, 2, 3


class Wire:
    """A router plus helpers: ``feed(conn, body)`` returns [(conn, body), ...]."""

    def __init__(self, commands: list[str], **kw: Any) -> None:
        self.trace: list[tuple] = []
        self.router = Router(chain.build(commands, **kw), tracer=lambda *a: self.trace.append(a))

    def feed(self, conn: int, body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        msg = parse(orjson.dumps({"jsonrpc": "2.0", **body}))
        return [(c, m.body) for c, m in self.router.handle(conn, msg)]

    def lost(self, conn: int, reason: str = "exited with status 7") -> list[tuple[int, dict[str, Any]]]:
        return [(c, m.body) for c, m in self.router.lost(conn, reason)]

    def one(self, conn: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        out = self.feed(conn, body)
        assert len(out) == 1, out
        return out[0]


def init(wire: Wire, n_proxies: int, dialect_envelope: str = "proxy/successor", *, agent_result: dict[str, Any] | None = None, handshake: str = "proxy/initialize") -> None:
    """Drive a chain of proxies (all speaking one dialect) through initialize."""
    agent_result = agent_result or {"protocolVersion": 1}
    conn, msg = wire.one(CLIENT, {"id": "i", "method": "initialize", "params": {"protocolVersion": 1}})
    for p in range(1, n_proxies + 1):
        assert (conn, msg["method"]) == (p, handshake)
        inner = {k: v for k, v in msg["params"].items() if k != "_meta"}
        conn, msg = wire.one(p, {"id": 100 + p, "method": dialect_envelope, "params": {"method": "initialize", "params": inner}})
    assert msg["method"] == "initialize"
    answer = wire.one(conn, {"id": msg["id"], "result": agent_result})
    echo = {**agent_result, "_meta": {"proxy": True}} if handshake == "initialize" else agent_result
    for p in range(n_proxies, 0, -1):
        assert answer == (p, {"jsonrpc": "2.0", "id": 100 + p, "result": agent_result})
        answer = wire.one(p, {"id": 1, "result": echo})  # the handshake was the first request on p
    assert answer == (CLIENT, {"jsonrpc": "2.0", "id": "i", "result": agent_result})
