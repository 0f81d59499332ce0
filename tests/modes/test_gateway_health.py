"""Discovery health probes (draft §6.2; compose/gateway.py ``_health_loop``, layers/discovery/registry.py), in process
against the demo server over stdio: a 2026-07-28 backend is polled with server/discover
and a change in its capabilities re-composes the surface with a CHANGE-SIGNAL; a backend
that stops answering its probes opens its circuit (withdrawn, list_changed) without any
client call failing first."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil
import yaml

from hopline.binding import Era
from hopline.config.load import parse_config
from hopline.jsonrpc import Message
from hopline.compose.gateway import Gateway
from hopline.modes import build
from tests.conftest import PY

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def gateway(**backend) -> Gateway:
    conf = {
        # share: isolated: the handshake client has a backend session of its own (``connect``)
        "backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"], "share": "isolated", **backend}},
        "routing": {"health_interval": 0.05},
        "resilience": {"breaker": {"failures": 1, "cool_down": 60}},
    }
    return build(parse_config(yaml.safe_dump(conf)))


async def signals(end, count: int = 1) -> list[str]:
    got = []
    while len(got) < count:
        message = await end.receive(timeout=10)
        if message.method:
            got.append(message.method)
    return got


async def connect(g: Gateway):
    """A handshake-era client (its own backend session) plus the shared session the probes watch."""
    end = await g.open_session(Era.HANDSHAKE)
    await end.send(Message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    assert "result" in (await end.receive(timeout=20)).body
    return end, await g.sharing.session("demo")


async def test_changed_capabilities_are_noticed_and_announced():
    g = gateway()
    try:
        end, shared = await connect(g)
        assert shared.info.era is Era.MODERN
        real = dict(shared.info.capabilities)
        shared.info.capabilities = {"tools": {}}  # as if the backend had changed since
        assert "notifications/tools/list_changed" in await signals(end, 3)
        assert shared.info.capabilities == real
    finally:
        await g.aclose()


async def test_a_backend_that_stops_answering_probes_is_withdrawn():
    g = gateway(timeout=0.3)
    stopped: list[int] = []
    try:
        end, shared = await connect(g)
        assert g.pipeline.available("demo")
        children = [p for p in psutil.Process().children(recursive=True) if "hopline.demo" in " ".join(p.cmdline())]
        for child in children:  # every demo process, the shared one included, stops answering
            os.kill(child.pid, signal.SIGSTOP)
            stopped.append(child.pid)
        assert "notifications/tools/list_changed" in await signals(end, 3)
        assert not g.pipeline.available("demo")
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        await asyncio.wait_for(g.aclose(), 30)
