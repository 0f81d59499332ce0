"""Isolated stdio backends in the gateway (issue 12): a child per client session from a
capped, pre-warmed pool; idle sessions parked and reopened on demand; starts of a
client that left cancelled. Children are counted from outside with psutil, and which
child served a session is told by the backend itself (tests/servers/pid_server.py).
"""

from __future__ import annotations

import asyncio
import threading

import psutil
import pytest
import yaml
from mcp import MCPError

from hopline.binding import Era
from hopline.config.load import parse_config
from hopline.jsonrpc import Message
from hopline.compose.gateway import Gateway
from hopline.modes import build
from tests.conftest import PY, SERVERS
from tests.peers import below, bounded, client, eventually, live, running, text_of

PID = [PY, str(SERVERS / "pid_server.py")]
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def write(tmp_path, backend: dict, **top) -> str:
    conf = {"backends": {"p": {"command": PY, "args": PID[1:], "share": "isolated", **backend}}, "resilience": {"breaker": {"enabled": False}}, **top}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


def pid_children(proc_or_pid) -> set[int]:
    return live(below(proc_or_pid if isinstance(proc_or_pid, int) else proc_or_pid.popen.pid), running("pid_server"))



class Sampler:
    """The most children seen at once, sampled in a thread while the test runs."""

    def __init__(self, proc) -> None:
        self.proc, self.peak, self._stop = proc, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, len(pid_children(self.proc)))
            self._stop.wait(0.01)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


async def test_the_cap_holds_under_30_concurrent_sessions_and_the_rest_get_31001(tmp_path, hopline_serve):
    # All 30 are admitted at the listener (max_pending_sessions), so the child cap is what is tested.
    gw = hopline_serve(write(tmp_path, {"max_children": 4, "prewarm": 0}, routing={"startup_timeout": 2}, listen={"max_pending_sessions": 64}))

    async def one(n: int) -> str:
        async with client(gw.url, "legacy") as c:
            try:
                return text_of(await bounded(c.call_tool("p__slow", {"ms": 4000}), 60))
            except MCPError as exc:
                assert exc.error.code == -31001 and exc.error.data["backend"] == "p", exc.error
                return exc.error.data["reason"]

    with Sampler(gw) as sampler:
        outcomes = await bounded(asyncio.gather(*(one(n) for n in range(30))), 120)
    assert sampler.peak <= 4, f"{sampler.peak} children at once"
    assert "slept 4000 ms" in outcomes and "at_capacity" in outcomes, outcomes
    assert set(outcomes) <= {"slept 4000 ms", "at_capacity"}, outcomes


async def test_the_second_session_gets_the_prewarmed_spare(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"args": [*PID[1:], "--start-delay", "2"], "prewarm": 1}))
    async with client(gw.url, "legacy") as a:
        first = int(text_of(await bounded(a.call_tool("p__pid", {}), 30)))
        await eventually(lambda: len(pid_children(gw)) == 2)  # the spare, started after the backend's first use
        (spare,) = pid_children(gw) - {first}
        async with client(gw.url, "legacy") as b:
            assert int(text_of(await bounded(b.call_tool("p__pid", {}), 30))) == spare


async def test_an_idle_session_is_parked_and_its_next_call_gets_a_new_child(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"prewarm": 0, "idle_timeout": 0.3}))
    async with client(gw.url, "legacy") as c:
        first = int(text_of(await bounded(c.call_tool("p__pid", {}))))
        await eventually(lambda: first not in pid_children(gw) and not pid_children(gw))  # reaped while idle
        names = {t.name for t in (await bounded(c.list_tools())).tools}
        assert "p__pid" in names  # its catalogue entries stay while parked
        again = int(text_of(await bounded(c.call_tool("p__pid", {}))))
        assert again != first and pid_children(gw) == {again}


async def test_a_reconnecting_backends_tools_answer_31001_not_unknown_tool(tmp_path, hopline_serve):
    # An isolated backend session: its own reconnect loop (a shared child is respawned at once instead).
    conf = {
        "backends": {"f": {"command": PY, "args": [str(SERVERS / "fault_server.py")], "share": "isolated"}},
        "routing": {"retry_after": 30}, "resilience": {"breaker": {"enabled": False}},
    }  # fmt: skip
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(conf))
    gw = hopline_serve(str(path))
    async with client(gw.url, "legacy") as c:
        with pytest.raises(MCPError):
            await bounded(c.call_tool("f__crash", {}))
        with pytest.raises(MCPError) as info:  # the backend is gone and its reconnect waits 15-30 s
            await bounded(c.call_tool("f__echo", {"text": "x"}))
        assert info.value.error.code == -31001 and info.value.error.data["backend"] == "f", info.value.error


def in_process(tmp_path, backend: dict, **top) -> Gateway:
    with open(write(tmp_path, backend, **top)) as f:
        return build(parse_config(f.read()))


async def test_a_client_gone_mid_start_leaves_no_child(tmp_path):
    me = psutil.Process().pid
    gw = in_process(tmp_path, {"args": [*PID[1:], "--start-delay", "60"], "prewarm": 0}, routing={"startup_timeout": 120})
    try:
        end = await gw.open_session(Era.HANDSHAKE)
        await end.send(Message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
        await eventually(lambda: len(pid_children(me)) == 1)  # starting: it will not answer for 60 s
        await end.aclose()  # the client vanishes mid-initialize
        try:
            await eventually(lambda: not pid_children(me), 15)
        except AssertionError:  # seen once in CI, never alone: say what is left, and where the pool stands
            left = [(p, psutil.Process(p).ppid(), psutil.Process(p).status()) for p in pid_children(me)]
            pool = gw.registry.connectors["p"].children
            raise AssertionError(f"children left (pid, ppid, status): {left}; pool: {pool.stats()}") from None
    finally:
        await gw.aclose()


async def test_aclose_leaves_no_child_spares_and_starts_included(tmp_path):
    me = psutil.Process().pid
    gw = in_process(tmp_path, {"args": [*PID[1:], "--start-delay", "60"], "prewarm": 1}, routing={"startup_timeout": 120})
    end = await gw.open_session(Era.HANDSHAKE)
    await end.send(Message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}))
    await eventually(lambda: len(pid_children(me)) == 2)  # the session's child (starting) and the spare
    await bounded(gw.aclose())
    await eventually(lambda: not pid_children(me), 15)
