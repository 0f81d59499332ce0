"""Proof of pluggability (draft §6, issue 14, issue 30 item 3): a gateway built from
Forward mode's composition with one layer's factory swapped for another implementation
of the same interface, its neighbours built as in Forward mode (the same kinds of object),
and the gateway still serves lists and calls end to end against real stdio backends
(hopline's demo server). Nothing is reassigned on a built gateway.

- Layer 4: the configured resilience (breaker, retry) swapped for a no-op call layer.
- Layer 3: the routing tables swapped for another namespace (another delimiter).
- Layer 6: the shared-session store swapped for one that never shares (a backend
  session per client session, as ``share: isolated`` would give).
"""

from __future__ import annotations

from dataclasses import replace

from hopline.compose.resilience import bounded
from hopline.composition import Composition
from hopline.jsonrpc import Message
from hopline.layers.routing.tables import Routes
from hopline.layers.session.sharing import Sharing
from hopline.modes import forward
from hopline.pipeline import Call, Next
from tests.modes.test_gateway_pipeline import ALICE, config, connect, names


def swapped(number: int, build) -> Composition:
    """Forward mode with layer ``number`` built by ``build``."""
    c = forward.COMPOSITION
    swap = lambda parts: tuple(replace(p, build=build) if p.number == number else p for p in parts)  # noqa: E731
    return replace(c, mode=f"forward, layer {number} swapped", layers=swap(c.layers), optional=swap(c.optional))


def neighbours(gateway) -> dict[str, type]:
    return {name: type(getattr(gateway, name)) for name in ("registry", "routes", "sharing", "pipeline", "backend_listens", "held")}


async def as_in_forward(gateway, but: str) -> bool:
    """Every neighbour but ``but`` is what Forward mode builds."""
    plain = forward.build(config())
    try:
        return {k: v for k, v in neighbours(gateway).items() if k != but} == {k: v for k, v in neighbours(plain).items() if k != but}
    finally:
        await plain.aclose()


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
    noop = NoResilience()

    def quiet(conf):
        resilience = bounded(conf)  # no breaker, no retry; its one call layer (the request timeout) replaced too
        resilience.calls = [noop]
        return resilience

    gateway = forward.build(config(resilience={"breaker": {"enabled": True}, "retry": {"enabled": True}}), swapped(4, quiet))
    try:
        assert not gateway.pipeline.gates and gateway.resilience.breakers is None  # the configured breaker is not built
        assert gateway.pipeline.calls[-1] is noop  # innermost, where Layer 4 goes
        client = await connect(gateway, ALICE)
        answer = await call_add(client)
        assert answer["result"]["content"][0]["text"] == "{\"sum\":5}" and noop.calls == 1
        assert await as_in_forward(gateway, "pipeline")
    finally:
        await gateway.aclose()


async def test_other_routing_tables_rename_the_surface_and_resolve_it():
    def elsewhere(conf, cursors, *, pass_on=False):
        return Routes.build(delimiter="--", max_name_length=64, uri_scheme="elsewhere", pass_on=pass_on, cursors=cursors)

    gateway = forward.build(config(), swapped(3, elsewhere))
    try:
        client = await connect(gateway, ALICE)
        tools = names(await client.rpc("tools/list"))
        assert "demo--add" in tools and not any("__" in t for t in tools)
        answer = await client.rpc("tools/call", {"name": "demo--add", "arguments": {"a": 2, "b": 3}})
        assert answer["result"]["content"][0]["text"] == "{\"sum\":5}"
        resources = (await client.rpc("resources/list"))["result"]["resources"]
        assert resources and all(r["uri"].startswith("elsewhere://") for r in resources)
        assert await as_in_forward(gateway, "routes")
    finally:
        await gateway.aclose()


class NeverShare(Sharing):
    """Layer 6 session store that gives every client session backend sessions of its own."""

    def shares(self, backend_id: str) -> bool:
        return False


async def test_a_session_store_that_never_shares_gives_each_client_its_own_backend_session():
    gateway = forward.build(config(), swapped(6, NeverShare))
    try:
        assert type(gateway.sharing) is NeverShare
        a, b = await connect(gateway, ALICE), await connect(gateway, ALICE)
        assert (await call_add(a))["result"]["content"][0]["text"] == "{\"sum\":5}"
        assert (await call_add(b))["result"]["content"][0]["text"] == "{\"sum\":5}"
        sessions = list(gateway.sessions)
        own = [s.backends["demo"] for s in sessions]
        assert len(sessions) == 2 and own[0] is not own[1] and not gateway.sharing.shared  # nothing shared
        assert all(s.backends["demo"] in s.links.owned for s in sessions)
        assert await as_in_forward(gateway, "sharing")
    finally:
        await gateway.aclose()
