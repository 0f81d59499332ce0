"""Proof of pluggability (draft §6, issue 14): one layer of a running gateway replaced
by another implementation of the same interface, its neighbours untouched (the very
same objects), and the gateway still serves lists and calls end to end against real
stdio backends (hopline's demo server).

- Layer 4: the configured resilience (breaker, retry) swapped for a no-op call layer.
- Layer 3: the routing tables swapped for another namespace (another delimiter).
- Layer 6: the shared-session store swapped for one that never shares (a backend
  session per client session, as ``share: isolated`` would give).
"""

from __future__ import annotations

from hopline.jsonrpc import Message
from hopline.layers.routing.tables import Routes
from hopline.layers.session.sharing import Sharing
from hopline.modes import forward
from hopline.pipeline import Call, Next, Pipeline
from tests.modes.test_gateway_pipeline import ALICE, config, connect, names


def neighbours(gateway) -> dict[str, int]:
    return {name: id(getattr(gateway, name)) for name in ("registry", "routes", "sharing", "pipeline", "backend_listens", "held")}


async def call_add(client) -> dict:
    tools = names(await client.rpc("tools/list"))
    add = next(t for t in tools if t.endswith("add") and t.startswith("demo"))
    return await client.rpc("tools/call", {"name": add, "arguments": {"a": 2, "b": 3}})


class NoResilience:
    """Layer 4 that does nothing: no timeout of its own, no retry, no breaker."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, call: Call, next: Next) -> Message:
        self.calls += 1
        return await next(call)


async def test_a_no_op_resilience_layer_replaces_breaker_and_retry():
    gateway = forward.build(config(resilience={"breaker": {"enabled": True}, "retry": {"enabled": True}}))
    try:
        resilience = set(map(id, gateway.resilience.calls))
        assert resilience and gateway.pipeline.gates  # the configured layer 4 is there
        others = [c for c in gateway.pipeline.calls if id(c) not in resilience]
        noop = NoResilience()
        before = neighbours(gateway)
        p = gateway.pipeline
        gateway.pipeline = Pipeline(calls=[*others, noop], surface=p.surface, gates=[], tools=p.tools, endpoints=p.endpoints)
        client = await connect(gateway, ALICE)
        answer = await call_add(client)
        assert answer["result"]["content"][0]["text"] == "{\"sum\":5}" and noop.calls == 1
        assert {k: v for k, v in neighbours(gateway).items() if k != "pipeline"} == {k: v for k, v in before.items() if k != "pipeline"}
        assert [c for c in gateway.pipeline.calls if c is not noop] == others  # the other call layers, the same objects
    finally:
        await gateway.aclose()


async def test_other_routing_tables_rename_the_surface_and_resolve_it():
    gateway = forward.build(config())
    try:
        before = neighbours(gateway)
        gateway.routes = Routes.build(delimiter="--", max_name_length=64, uri_scheme="elsewhere", cursors=gateway.routes.cursors)
        client = await connect(gateway, ALICE)
        tools = names(await client.rpc("tools/list"))
        assert "demo--add" in tools and not any("__" in t for t in tools)
        answer = await client.rpc("tools/call", {"name": "demo--add", "arguments": {"a": 2, "b": 3}})
        assert answer["result"]["content"][0]["text"] == "{\"sum\":5}"
        resources = (await client.rpc("resources/list"))["result"]["resources"]
        assert resources and all(r["uri"].startswith("elsewhere://") for r in resources)
        assert {k: v for k, v in neighbours(gateway).items() if k != "routes"} == {k: v for k, v in before.items() if k != "routes"}
    finally:
        await gateway.aclose()


class NeverShare(Sharing):
    """Layer 6 session store that gives every client session backend sessions of its own."""

    def shares(self, backend_id: str) -> bool:
        return False


async def test_a_session_store_that_never_shares_gives_each_client_its_own_backend_session():
    gateway = forward.build(config())
    try:
        before = neighbours(gateway)
        gateway.sharing = NeverShare(gateway)
        a, b = await connect(gateway, ALICE), await connect(gateway, ALICE)
        assert (await call_add(a))["result"]["content"][0]["text"] == "{\"sum\":5}"
        assert (await call_add(b))["result"]["content"][0]["text"] == "{\"sum\":5}"
        sessions = list(gateway.sessions)
        own = [s.backends["demo"] for s in sessions]
        assert len(sessions) == 2 and own[0] is not own[1] and not gateway.sharing.shared  # nothing shared
        assert all(s.backends["demo"] in s.links.owned for s in sessions)
        assert {k: v for k, v in neighbours(gateway).items() if k != "sharing"} == {k: v for k, v in before.items() if k != "sharing"}
    finally:
        await gateway.aclose()
