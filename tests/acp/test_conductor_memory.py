"""The asyncio shell over memory channels with in-process components (src/hopline/acp/conductor.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hopline.acp import chain
from hopline.acp.conductor import Conductor
from hopline.jsonrpc import Message
from hopline.layers.transport.channel import ChannelClosed
from hopline.transports.memory import memory_pair

WAIT = 5.0


def msg(body: dict[str, Any]) -> Message:
    return Message({"jsonrpc": "2.0", **body})


async def fake_agent(ch, *, updates: int = 3) -> None:
    """Answers initialize/session/new; a prompt gets N updates then end_turn; "crash" closes."""
    while True:
        try:
            m = await ch.receive()
        except ChannelClosed:
            return
        b = m.body
        if b.get("method") == "initialize":
            await ch.send(msg({"id": b["id"], "result": {"protocolVersion": 1}}))
        elif b.get("method") == "session/new":
            await ch.send(msg({"id": b["id"], "result": {"sessionId": "s1"}}))
        elif b.get("method") == "session/prompt":
            text = b["params"]["prompt"][0]["text"]
            if text == "crash":
                await ch.aclose()
                return
            for i in range(updates):
                await ch.send(msg({"method": "session/update", "params": {"sessionId": "s1", "update": {"i": i}}}))
            await ch.send(msg({"id": b["id"], "result": {"stopReason": "end_turn"}}))


async def fake_d5_proxy(ch) -> None:
    """Forwards everything; holds each forwarded request in a task (never blocks its loop)."""
    next_id, pending = 0, {}
    while True:
        try:
            m = await ch.receive()
        except ChannelClosed:
            return
        b = m.body
        method = b.get("method")
        if method is None:
            their = pending.pop(b["id"])
            await ch.send(msg({"id": their, **{k: v for k, v in b.items() if k in ("result", "error")}}))
        elif method == "proxy/successor":
            inner = b["params"]
            if "id" in b:
                next_id += 1
                pending[next_id] = b["id"]
                await ch.send(msg({"id": next_id, "method": inner["method"], "params": inner.get("params")}))
            else:
                await ch.send(msg({"method": inner["method"], "params": inner.get("params")}))
        else:
            next_id += 1
            if "id" in b:
                pending[next_id] = b["id"]
            inner_method = "initialize" if method == "proxy/initialize" else method
            envelope = {"method": "proxy/successor", "params": {"method": inner_method, "params": b.get("params")}}
            await ch.send(msg({"id": next_id, **envelope} if "id" in b else envelope))


class Harness:
    def __init__(self, roles: list[str], **kw: Any) -> None:
        self.client, upstream = memory_pair("client")
        self.spawned: list[str] = []
        self.tasks: list[asyncio.Task] = []
        self.chain = chain.build(roles, **kw)
        self.conductor = Conductor(self.chain, upstream, spawn=self.spawn, drain_timeout=2)
        self.run = asyncio.create_task(self.conductor.run())

    async def spawn(self, component: chain.Component):
        self.spawned.append(component.name)
        ours, theirs = memory_pair(component.name)
        behaviour = fake_d5_proxy if component.proxy else fake_agent
        self.tasks.append(asyncio.create_task(behaviour(theirs)))
        return ours

    async def call(self, msg_id: Any, method: str, params: dict[str, Any]) -> tuple[dict, list[dict]]:
        await self.client.send(msg({"id": msg_id, "method": method, "params": params}))
        before = []
        while True:
            m = (await asyncio.wait_for(self.client.receive(), WAIT)).body
            if m.get("id") == msg_id and "method" not in m:
                return m, before
            before.append(m)

    async def close(self) -> None:
        await self.client.aclose()
        await asyncio.wait_for(self.run, WAIT)
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def test_chain_is_built_lazily_on_the_first_initialize():
    h = Harness(["proxy", "agent"])
    try:
        answer, _ = await h.call(1, "session/new", {"cwd": "/", "mcpServers": []})
        assert answer["error"]["data"] == "expected `initialize` request"
        assert h.spawned == []
        answer, _ = await h.call(2, "initialize", {"protocolVersion": 1})
        assert answer["result"] == {"protocolVersion": 1}
        assert h.spawned == ["proxy", "agent"]
    finally:
        await h.close()


async def test_updates_never_overtake_the_prompt_result():
    h = Harness(["p1", "p2", "p3", "agent"])
    try:
        await h.call(1, "initialize", {"protocolVersion": 1})
        for n in range(3):
            answer, before = await h.call(f"p{n}", "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "go"}]})
            assert answer["result"] == {"stopReason": "end_turn"}
            assert [m["params"]["update"]["i"] for m in before] == [0, 1, 2]
    finally:
        await h.close()


async def test_a_component_that_dies_mid_request_yields_an_error_never_a_hang():
    h = Harness(["proxy", "agent"])
    try:
        await h.call(1, "initialize", {"protocolVersion": 1})
        answer, _ = await h.call(2, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "crash"}]})
        assert answer["error"]["code"] == -31001 and "'agent' exited" in answer["error"]["message"]
        again, _ = await h.call(3, "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]})
        assert again["error"]["data"] == {"backend": "agent", "reason": "exited"}
    finally:
        await h.close()


async def test_upstream_eof_still_answers_what_is_in_flight():
    """Half-closed upstream (``printf ... | hopline acp``): input ends, answers still flow."""
    send_end, conductor_in = memory_pair("client-in")
    conductor_out, read_end = memory_pair("client-out")
    spawned: list[asyncio.Task] = []

    async def spawn(component):
        ours, theirs = memory_pair(component.name)
        spawned.append(asyncio.create_task(fake_agent(theirs)))
        return ours

    conductor = Conductor(chain.build(["agent"]), conductor_in, upstream_out=conductor_out, spawn=spawn, drain_timeout=WAIT)
    run = asyncio.create_task(conductor.run())
    await send_end.send(msg({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
    await send_end.send(msg({"id": 2, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "x"}]}}))
    await send_end.aclose()
    seen = []
    while not any(m.get("id") == 2 for m in seen):
        seen.append((await asyncio.wait_for(read_end.receive(), WAIT)).body)
    assert [m.get("id") for m in seen if "method" not in m] == [1, 2]
    await asyncio.wait_for(run, WAIT)  # then it stops the chain and returns
    await asyncio.gather(*spawned, return_exceptions=True)


@pytest.mark.parametrize("policy", ["fail", "bypass"])
async def test_crash_policy_for_a_proxy(policy):
    h = Harness(["proxy", "agent"], on_crash=policy)
    try:
        await h.call(1, "initialize", {"protocolVersion": 1})
        proxy_side = h.conductor.channels[1]
        await proxy_side.aclose()  # the proxy's pipe breaks
        answer, _ = await h.call(2, "session/new", {"cwd": "/", "mcpServers": []})
        if policy == "fail":
            assert answer["error"]["data"]["reason"] == "exited"
        else:
            assert answer["result"] == {"sessionId": "s1"}  # routed straight to the agent
    finally:
        await h.close()


async def mute(ch) -> None:
    """A component that reads and never answers."""
    while True:
        try:
            await ch.receive()
        except ChannelClosed:
            return


async def test_a_restarted_proxy_that_never_rejoins_is_stopped_and_its_traffic_refused():
    client, upstream = memory_pair("client")
    spawned: list[str] = []
    tasks: list[asyncio.Task] = []

    async def spawn(component):
        spawned.append(component.name)
        ours, theirs = memory_pair(component.name)
        first = spawned.count(component.name) == 1
        behaviour = fake_agent if not component.proxy else (fake_d5_proxy if first else mute)
        tasks.append(asyncio.create_task(behaviour(theirs)))
        return ours

    conductor = Conductor(chain.build(["proxy", "agent"], on_crash="restart"), upstream, spawn=spawn, drain_timeout=2, restart_backoff=0.001, rejoin_timeout=0.2)
    run = asyncio.create_task(conductor.run())
    try:
        await client.send(msg({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
        assert (await asyncio.wait_for(client.receive(), WAIT)).body["result"] == {"protocolVersion": 1}
        await conductor.channels[1].aclose()  # the proxy's pipe breaks
        await client.send(msg({"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}))
        answer = (await asyncio.wait_for(client.receive(), WAIT)).body  # held through 3 silent restarts, then refused
        assert answer["id"] == 2 and "not restarted again after 3 attempt(s)" in answer["error"]["message"]
        assert spawned.count("proxy") == 4
    finally:
        await client.aclose()
        await asyncio.wait_for(run, WAIT)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
