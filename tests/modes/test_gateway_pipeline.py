"""The layer seams of Forward mode (pipeline.py), driven in-process against real
backends (hopline's demo MCP server over stdio).

- A surface layer's decision filters the list *and* refuses the invoke, and a hidden
  tool is answered exactly like a tool that does not exist (no existence oracle).
- Call layers see every routed invoke with its backend, original and exposed names and
  the tool's definition, outermost first, and may reject or transform.
- A gate that withdraws a backend takes its tools out of every list (named in
  ``_meta``), sends the CHANGE-SIGNAL, and brings them back with another when restored.
- A tool mode replaces the catalogue in ``tools/list`` and reaches tools through the
  same path as ``tools/call``, so surface layers apply to it too.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from hopline.binding import Era
from hopline.config.load import parse_config
from hopline.context import Principal
from hopline.jsonrpc import InvalidParams, Message, MethodNotFound, result
from hopline.compose.gateway import Gateway
from hopline.layers.policy.visibility import Visibility
from hopline.modes import build
from hopline.pipeline import Call, Item, Next, Pipeline, ToolHost, ToolPlan
from tests.conftest import PY

DEMO = f"{PY} -m hopline.demo"
ALICE = Principal("alice", {"role": "admin"})
BOB = Principal("bob", {"role": "viewer"})


class Request(Message):
    """A client message carrying the principal the listener authenticated."""

    __slots__ = ("principal",)


def config(**top: Any):
    import yaml

    backends = {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}, "other": {"command": PY, "args": ["-m", "hopline.demo"]}}
    return parse_config(yaml.safe_dump({"backends": backends, **top}))


class Client:
    def __init__(self, end, principal: Principal) -> None:
        self.end = end
        self.principal = principal
        self.ids = 0
        self.notes: list[dict[str, Any]] = []

    async def rpc(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        message = Request({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params or {}})
        message.principal = self.principal
        await self.end.send(message)
        while True:
            got = await self.end.receive(timeout=20)
            if got.body.get("id") == self.ids and "method" not in got.body:
                return got.body
            self.notes.append(got.body)

    async def drain(self) -> list[str]:
        """Notifications that are already queued (no waiting for absent ones)."""
        methods = [n.get("method") for n in self.notes]
        self.notes.clear()
        while True:
            try:
                got = await self.end.receive(timeout=0)
            except asyncio.TimeoutError:
                return methods
            methods.append(got.body.get("method"))


async def connect(gateway: Gateway, principal: Principal) -> Client:
    client = Client(await gateway.open_session(Era.HANDSHAKE), principal)
    answer = await client.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})
    assert "result" in answer
    return client


def names(answer: dict[str, Any]) -> list[str]:
    return [t["name"] for t in answer["result"]["tools"]]


class HideFromViewers:
    """Viewers may not see ``add`` on any backend."""

    def __init__(self) -> None:
        self.seen: list[Item] = []

    def visible(self, principal: Principal, item: Item) -> bool:
        self.seen.append(item)
        return not (principal.claims.get("role") == "viewer" and item.kind == "tool" and item.name == "add")


class Recorder:
    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log
        self.calls: list[Call] = []

    async def __call__(self, call: Call, next: Next) -> Message:
        self.calls.append(call)
        self.log.append(f"{self.label}>")
        answer = await next(call)
        self.log.append(f"<{self.label}")
        return answer


class Gate:
    def __init__(self) -> None:
        self.down: set[str] = set()
        self.changed: Callable[[str], None] = lambda b: None

    def available(self, backend: str) -> bool:
        return backend not in self.down

    def bind(self, changed: Callable[[str], None]) -> None:
        self.changed = changed

    def flip(self, backend: str) -> None:
        self.down ^= {backend}
        self.changed(backend)


@pytest.fixture
async def gateway():
    g = build(config())
    try:
        yield g
    finally:
        await g.aclose()


async def test_surface_layer_filters_lists_and_guards_invokes_alike(gateway):
    hide = HideFromViewers()
    gateway.pipeline = Pipeline(calls=[Visibility([hide])], surface=[hide])  # a surface, and its guard of invokes
    alice, bob = await connect(gateway, ALICE), await connect(gateway, BOB)
    assert {"demo__add", "other__add", "demo__echo"} <= set(names(await alice.rpc("tools/list")))
    bob_tools = names(await bob.rpc("tools/list"))
    assert "demo__echo" in bob_tools and not any(n.endswith("__add") for n in bob_tools)
    assert {i.name for i in hide.seen if i.kind == "tool"} >= {"add", "echo", "countdown"}
    assert all(i.backend in ("demo", "other") and "inputSchema" in i.definition for i in hide.seen)

    hidden = await bob.rpc("tools/call", {"name": "demo__add", "arguments": {"a": 1, "b": 2}})
    absent = await bob.rpc("tools/call", {"name": "demo__nope", "arguments": {}})
    assert hidden["error"]["code"] == absent["error"]["code"] == InvalidParams.code
    assert hidden["error"]["message"].replace("demo__add", "X") == absent["error"]["message"].replace("demo__nope", "X")
    assert set(hidden["error"]) == set(absent["error"])

    ok = await alice.rpc("tools/call", {"name": "demo__add", "arguments": {"a": 1, "b": 2}})
    assert ok["result"]["structuredContent"] == {"sum": 3}
    # A caller who never listed still gets the same decision at the invoke.
    fresh_bob = await connect(gateway, BOB)
    assert (await fresh_bob.rpc("tools/call", {"name": "other__add", "arguments": {"a": 1, "b": 2}}))["error"]["code"] == InvalidParams.code


class HideFromViewersAll:
    """Viewers may see no resource and no prompt of ``demo``."""

    def visible(self, principal: Principal, item: Item) -> bool:
        return not (principal.claims.get("role") == "viewer" and item.backend == "demo" and item.kind != "tool")


async def test_a_hidden_resource_or_prompt_is_answered_as_an_absent_one_before_its_backend_is_asked(gateway):
    """The visibility layer refuses first: a hidden resource's subscribe is not answered with its
    backend's missing subscription support (an oracle), nor does a later layer see the call."""
    hide, log = HideFromViewersAll(), []
    recorder = Recorder("r", log)
    gateway.pipeline = Pipeline(calls=[Visibility([hide]), recorder], surface=[hide])
    alice, bob = await connect(gateway, ALICE), await connect(gateway, BOB)
    readme, nothing = "hopline://demo/demo://readme", "hopline://nobody/demo://readme"  # routes nowhere
    subscribed = await alice.rpc("resources/subscribe", {"uri": readme})  # visible: the backend's support is asked
    assert subscribed["error"]["code"] == MethodNotFound.code and "subscriptions" in subscribed["error"]["message"]
    for method, params, absent in [
        ("resources/subscribe", {"uri": readme}, {"uri": nothing}),
        ("resources/read", {"uri": readme}, {"uri": nothing}),
        ("prompts/get", {"name": "demo__greet", "arguments": {"name": "x"}}, {"name": "demo__nope"}),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "demo__greet"}, "argument": {"name": "name", "value": "a"}},
            {"ref": {"type": "ref/prompt", "name": "demo__nope"}, "argument": {"name": "name", "value": "a"}},
        ),
    ]:
        hidden, unknown = await bob.rpc(method, params), await bob.rpc(method, absent)
        shown = params.get("uri") or params.get("name") or params["ref"]["name"]
        other = absent.get("uri") or absent.get("name") or absent["ref"]["name"]
        assert hidden["error"] == {**unknown["error"], "message": unknown["error"]["message"].replace(other, shown)}
    assert recorder.calls == []  # nothing hidden went past the visibility layer
    assert "result" in await alice.rpc("resources/read", {"uri": readme})


async def test_call_layers_run_outermost_first_with_routing_facts(gateway):
    log: list[str] = []
    outer, inner = Recorder("outer", log), Recorder("inner", log)
    gateway.pipeline = Pipeline(calls=[outer, inner])
    alice = await connect(gateway, ALICE)
    answer = await alice.rpc("tools/call", {"name": "other__echo", "arguments": {"text": "hi"}, "_meta": {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}})
    assert answer["result"]["content"][0]["text"] == "hi"
    assert log == ["outer>", "inner>", "<inner", "<outer"]
    (call,) = inner.calls
    assert (call.method, call.backend, call.target, call.exposed, call.direction) == ("tools/call", "other", "echo", "other__echo", "to_backend")
    assert call.principal is ALICE and call.params["name"] == "echo"
    assert call.definition is not None and call.definition["inputSchema"]["properties"]["text"]
    assert call.meta["traceparent"].startswith("00-aaaa")
    await alice.rpc("resources/read", {"uri": "hopline://demo/demo://readme"})
    assert (inner.calls[-1].method, inner.calls[-1].backend, inner.calls[-1].target) == ("resources/read", "demo", "demo://readme")


async def test_a_call_layer_can_reject_and_transform(gateway):
    class Deny:
        async def __call__(self, call: Call, next: Next) -> Message:
            if call.target == "add":
                raise InvalidParams("add is switched off today")
            answer = await next(call)
            return result(answer.id, {**answer.body["result"], "content": [{"type": "text", "text": "redacted"}]})

    gateway.pipeline = Pipeline(calls=[Deny()])
    alice = await connect(gateway, ALICE)
    refused = await alice.rpc("tools/call", {"name": "demo__add", "arguments": {"a": 1, "b": 2}})
    assert refused["error"]["message"] == "add is switched off today"
    changed = await alice.rpc("tools/call", {"name": "demo__echo", "arguments": {"text": "secret"}})
    assert changed["result"]["content"] == [{"type": "text", "text": "redacted"}]


async def test_a_gate_withdraws_and_restores_a_backend_with_change_signals(gateway):
    gate = Gate()
    gateway.pipeline = Pipeline(gates=[gate])
    gate.bind(gateway._gate_changed)
    alice = await connect(gateway, ALICE)
    before = await alice.rpc("tools/list")
    assert "other__echo" in names(before)
    await alice.drain()

    gate.flip("other")
    assert "notifications/tools/list_changed" in await alice.drain()
    during = await alice.rpc("tools/list")
    assert not any(n.startswith("other__") for n in names(during)) and "demo__echo" in names(during)
    assert during["result"]["_meta"]["io.hopline/missing-backends"] == ["other"]

    gate.flip("other")
    assert "notifications/tools/list_changed" in await alice.drain()
    assert names(await alice.rpc("tools/list")) == names(before)


async def test_a_tool_mode_replaces_the_catalogue_and_calls_through_the_pipeline(gateway):
    class FindMode:
        name = "find"

        async def tools(self, host: ToolHost) -> list[dict[str, Any]]:
            return [{"name": "find", "description": f"{len(await host.visible_tools())} tools", "inputSchema": {"type": "object"}}]

        async def call(self, host: ToolHost, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
            if name != "find":
                return None
            try:
                return await host.call_tool(arguments["tool"], arguments.get("arguments", {}))
            except InvalidParams as exc:
                return {"content": [{"type": "text", "text": exc.message}], "isError": True}

    log: list[str] = []
    recorder = Recorder("r", log)
    hide = HideFromViewers()
    gateway.pipeline = Pipeline(surface=[hide], calls=[Visibility([hide]), recorder], tools=ToolPlan.single(FindMode()))
    alice, bob = await connect(gateway, ALICE), await connect(gateway, BOB)
    alice_list, bob_list = await alice.rpc("tools/list"), await bob.rpc("tools/list")
    assert names(alice_list) == names(bob_list) == ["find"]
    assert int(alice_list["result"]["tools"][0]["description"].split()[0]) == int(bob_list["result"]["tools"][0]["description"].split()[0]) + 2

    got = await alice.rpc("tools/call", {"name": "find", "arguments": {"tool": "demo__add", "arguments": {"a": 2, "b": 5}}})
    assert got["result"]["structuredContent"] == {"sum": 7}
    assert recorder.calls[-1].target == "add" and recorder.calls[-1].principal is ALICE
    refused = await bob.rpc("tools/call", {"name": "find", "arguments": {"tool": "demo__add", "arguments": {"a": 2, "b": 5}}})
    assert refused["result"]["isError"] and refused["result"]["content"][0]["text"] == "Unknown tool: 'demo__add'"
    # Names outside the mode still route as Standard tools/call would.
    assert (await alice.rpc("tools/call", {"name": "demo__echo", "arguments": {"text": "x"}}))["result"]["content"][0]["text"] == "x"
