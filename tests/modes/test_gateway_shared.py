"""Shared stdio backends (issue 12, layers/session/sharing.py): one child serves every client
session, and no client can tell it from a session of its own.

- Two handshake clients on one shared child each receive *their own* sampling request
  during their own call; while both have calls in flight, a backend's sampling request
  has no single client and is refused (never delivered to the wrong one) and counted.
- A 2026-07-28 client declaring sampling + elicitation sees server-everything's
  capability-gated tools (``trigger-*``) exactly as a direct handshake client with those
  capabilities does: the shared session is per client-capability set.
- Resource subscriptions are refcounted: the backend sees one subscribe and one
  unsubscribe however many clients subscribe; a client that goes away lets go of its own.
- Ids of many clients' concurrent calls never cross (each gets its own echo back).
- A child shared by 50 sessions dies with 10 calls in flight: those get -31001 at once,
  the other sessions go on, and the backend is started exactly once more.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path

import httpx
import psutil
import pytest
import yaml
from mcp import Client, MCPError, StdioServerParameters, types

from tests.conftest import PY, SERVERS
from tests.peers import bounded, client, elicitation_cb, eventually, sampling_cb, text_of
from tests.helpers import write_yaml

SDK = [PY, str(SERVERS / "sdk_server.py"), "stdio"]
FAULT = [PY, str(SERVERS / "fault_server.py")]
EVERYTHING = Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = shutil.which("node")
if NODE is None or not EVERYTHING.exists():  # pragma: no cover - scripts/test installs it
    pytest.fail(f"server-everything is not installed at {EVERYTHING}; run scripts/test (it runs npm ci in tests/node)", pytrace=False)


def write(tmp_path: Path, backends: dict, **top) -> str:
    return write_yaml(tmp_path, {"backends": backends, **top})


def children(gw, name: str) -> list[psutil.Process]:
    """The gateway's backend children running ``name``."""
    out = []
    for p in gw.descendants():
        try:
            if any(name in part for part in p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def sampler(tag: str):
    async def sample(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=f"{tag}:{params.messages[0].content.text}"), model=tag)

    return sample


async def metric(admin: str, line: str) -> bool:
    async with httpx.AsyncClient(timeout=10) as http:
        return line in (await http.get(f"{admin}/metrics")).text


# -- server→client requests go to the one client whose call is in flight -----------------------
async def test_each_client_gets_its_own_sampling_request_and_an_ambiguous_one_is_refused(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"sdk": {"command": SDK[0], "args": SDK[1:]}}), "--admin-port", "0")
    admin = gw.wait_line(r"admin endpoint at (http://\S+)/metrics").group(1)
    in_callback, release = asyncio.Event(), asyncio.Event()

    async def held_elicitation(context, params):  # A's call stays in flight until released
        in_callback.set()
        await release.wait()
        return types.ElicitResult(action="accept", content={"answer": "a"})

    a = Client(gw.url, mode="legacy", sampling_callback=sampler("A"), elicitation_callback=held_elicitation)
    b = Client(gw.url, mode="legacy", sampling_callback=sampler("B"), elicitation_callback=elicitation_cb)
    async with a, b:
        assert len(children(gw, "sdk_server.py")) == 1  # one child for both sessions
        # Sequential: each call's sampling request reaches the client that made the call.
        assert text_of(await bounded(a.call_tool("sdk__sample_direct", {"prompt": "one"}))) == "A: A:one"
        assert text_of(await bounded(b.call_tool("sdk__sample_direct", {"prompt": "two"}))) == "B: B:two"
        # Concurrent: A's call is in flight (in its elicitation callback) when B's call samples.
        a_call = asyncio.ensure_future(a.call_tool("sdk__elicit_direct", {"message": "wait"}))
        await asyncio.wait_for(in_callback.wait(), 20)
        with pytest.raises(MCPError) as refused:  # the backend got our JSON-RPC error and passed it on
            await bounded(b.call_tool("sdk__sample_direct", {"prompt": "which?"}))
        assert refused.value.error.code == -31001 and "no single client" in refused.value.error.message
        release.set()
        assert text_of(await bounded(a_call)) == "accepted: a"  # A's own request still reached A
        assert len(children(gw, "sdk_server.py")) == 1
    assert await metric(admin, 'hopline_shared_session_events_total{backend="sdk",event="request_refused"} 1.0')


# -- one shared session per client-capability set ------------------------------------------------
async def test_a_2026_client_sees_the_capability_gated_tools_of_a_handshake_backend(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"everything": {"command": NODE, "args": [str(EVERYTHING), "stdio"]}}))
    caps = dict(sampling_callback=sampling_cb, elicitation_callback=elicitation_cb)
    async with Client(StdioServerParameters(command=NODE, args=[str(EVERYTHING), "stdio"]), mode="legacy", **caps) as direct:
        want = {t.name for t in (await bounded(direct.list_tools())).tools}
    async with Client(StdioServerParameters(command=NODE, args=[str(EVERYTHING), "stdio"]), mode="legacy") as bare:
        ungated = {t.name for t in (await bounded(bare.list_tools())).tools}
    assert {"trigger-sampling-request", "trigger-elicitation-request"} <= want - ungated  # what the comparison is about
    async with Client(gw.url, mode="2026-07-28", **caps) as modern:
        got = {t.name.removeprefix("everything__") for t in (await bounded(modern.list_tools())).tools}
    async with Client(gw.url, mode="2026-07-28") as plain:  # declaring nothing: the session of no capabilities
        got_plain = {t.name.removeprefix("everything__") for t in (await bounded(plain.list_tools())).tools}
    assert got == want
    assert got_plain == ungated
    assert len(children(gw, str(EVERYTHING))) == 2  # one child per capability set, not per client


# -- subscriptions, refcounted ------------------------------------------------------------------
async def test_subscriptions_on_a_shared_backend_are_refcounted(tmp_path, hopline_serve):
    events = tmp_path / "events.log"
    gw = hopline_serve(write(tmp_path, {"f": {"command": FAULT[0], "args": [FAULT[1], "--subscribe", "--events", str(events)]}}))
    lines = lambda: [line for line in events.read_text().splitlines() if "subscribe " in line] if events.exists() else []  # noqa: E731
    uri = "hopline://f/fault://watched"
    async with client(gw.url, "legacy") as a:
        async with client(gw.url, "legacy") as b, client(gw.url, "legacy") as c:
            for who in (a, b, c):
                await bounded(who.subscribe_resource(uri))
            await bounded(b.unsubscribe_resource(uri))  # others still want it: the backend is not told
            assert lines() == ["subscribe fault://watched"]
        # c went away without unsubscribing; a still subscribes
        assert (await bounded(a.call_tool("f__echo", {"text": "x"}))).content[0].text == "x"
        assert lines() == ["subscribe fault://watched"]
        await bounded(a.unsubscribe_resource(uri))  # the last one
        assert lines() == ["subscribe fault://watched", "unsubscribe fault://watched"]
        await bounded(a.subscribe_resource(uri))
    # a closed while subscribed: the gateway lets go of its subscription
    await eventually(lambda: len(lines()) == 4, what="the unsubscribe of a closed session")
    assert lines() == ["subscribe fault://watched", "unsubscribe fault://watched"] * 2


# -- ids never cross --------------------------------------------------------------------------------
async def test_concurrent_calls_of_many_clients_on_one_child_get_their_own_answers(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"f": {"command": FAULT[0], "args": FAULT[1:]}}))
    async with contextlib.AsyncExitStack() as stack:  # entered and left in this task (the SDK's cancel scopes)
        clients = [await stack.enter_async_context(client(gw.url, "legacy")) for _ in range(4)]
        assert len(children(gw, "fault_server.py")) == 1

        async def many(i: int, c: Client) -> list[tuple[str, str]]:
            texts = [f"client {i} call {j}" for j in range(25)]
            got = await asyncio.gather(*(c.call_tool("f__echo", {"text": t}) for t in texts))
            return [(t, text_of(r)) for t, r in zip(texts, got)]

        results = await bounded(asyncio.gather(*(many(i, c) for i, c in enumerate(clients))), 60)
        for pairs in results:
            assert all(sent == back for sent, back in pairs)


# -- a shared child dies --------------------------------------------------------------------------
async def test_a_child_shared_by_50_sessions_dies_with_10_calls_in_flight(tmp_path, hopline_serve):
    events, starts = tmp_path / "events.log", tmp_path / "starts.log"
    backends = {"f": {"command": FAULT[0], "args": [FAULT[1], "--events", str(events), "--starts", str(starts)]}}
    # The breaker is on (its defaults): 10 calls failing at once are one lost connection, one failure.
    gw = hopline_serve(write(tmp_path, backends, routing={"retry_after": 0.2}))
    started = lambda: starts.read_text().split() if starts.exists() else []  # noqa: E731
    calls = lambda: events.read_text().splitlines().count("call slow") if events.exists() else 0  # noqa: E731
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(client(gw.url, "legacy")) for _ in range(50)]
        assert len(started()) == 1
        (child,) = children(gw, "fault_server.py")
        in_flight = [asyncio.ensure_future(s.call_tool("f__slow", {"ms": 600_000})) for s in sessions[:10]]
        await eventually(lambda: calls() == 10, what="10 calls in flight at the backend")
        child.kill()
        codes = []
        for outcome in await bounded(asyncio.gather(*in_flight, return_exceptions=True), 30):
            assert isinstance(outcome, MCPError), outcome
            codes.append(outcome.error.code)
        assert codes == [-31001] * 10
        answers = await bounded(asyncio.gather(*(s.call_tool("f__echo", {"text": f"s{i}"}) for i, s in enumerate(sessions[10:]))), 60)
        assert [text_of(a) for a in answers] == [f"s{i}" for i in range(40)]
        again = await bounded(asyncio.gather(*(s.call_tool("f__echo", {"text": "again"}) for s in sessions[:10])), 60)
        assert all(text_of(a) == "again" for a in again)
        assert len(started()) == 2 and started()[0] == str(child.pid)  # exactly one respawn
        assert len(children(gw, "fault_server.py")) == 1


# -- what the backend sends on its own ---------------------------------------------------------------
class Inbox:
    """An SDK client's message handler keeping the resource updates and log lines it gets."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.logs: list[str] = []
        self.arrived = asyncio.Event()

    async def __call__(self, message) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceUpdatedNotification):
            self.updated.append(str(root.params.uri))
        elif isinstance(root, types.LoggingMessageNotification):
            self.logs.append(f"{root.params.level}:{root.params.data}")
        else:
            return
        self.arrived.set()


async def test_resource_updates_reach_the_subscribers_and_logs_the_caller_at_its_own_level(tmp_path, hopline_serve):
    gw = hopline_serve(write(tmp_path, {"f": {"command": FAULT[0], "args": [FAULT[1], "--subscribe"]}}))
    uri = "hopline://f/fault://watched"
    boxes = [Inbox() for _ in range(3)]
    async with contextlib.AsyncExitStack() as stack:
        a, b, c = [await stack.enter_async_context(client(gw.url, "legacy", message_handler=box)) for box in boxes]
        assert len(children(gw, "fault_server.py")) == 1
        await bounded(a.subscribe_resource(uri))
        await bounded(c.subscribe_resource(uri))
        await bounded(b.call_tool("f__touch", {"uri": "fault://watched"}))  # b did not subscribe
        for box in (boxes[0], boxes[2]):
            await asyncio.wait_for(box.arrived.wait(), 20)
            assert box.updated == [uri]
        # Logging: the backend runs at the most verbose level asked (a: debug); b asked for
        # error and so is not given b's own info line; a is given its own.
        await bounded(a.set_logging_level("debug"))
        await bounded(b.set_logging_level("error"))
        assert text_of(await bounded(b.call_tool("f__log", {"level": "info", "text": "for b"}))) == "sent"  # the backend sent it …
        assert text_of(await bounded(b.call_tool("f__log", {"level": "error", "text": "loud"}))) == "sent"
        assert text_of(await bounded(a.call_tool("f__log", {"level": "debug", "text": "for a"}))) == "sent"
        await eventually(lambda: boxes[0].logs and boxes[1].logs, what="both log lines")
        assert boxes[1].logs == ["error:loud"]  # … and the gateway kept b's info line from b
        assert boxes[0].logs == ["debug:for a"]  # a was not given b's lines (no call of a's was in flight)
    assert boxes[1].updated == []


# -- the bound on capability sets ------------------------------------------------------------------
async def test_capability_sets_past_the_bound_get_the_largest_declared_subset():
    """In process: ``routing.shared_capability_sets: 1`` — the first set gets its session;
    a larger one that includes it gets that session; one that does not, the session of
    no capabilities; both fallbacks counted."""
    from hopline.binding import Era
    from hopline.config.load import parse_config
    from hopline.jsonrpc import Message
    from hopline.modes import build

    conf = {"backends": {"demo": {"command": PY, "args": ["-m", "hopline.demo"]}}, "routing": {"shared_capability_sets": 1}}
    g = build(parse_config(yaml.safe_dump(conf)))
    try:
        async def session_with(caps: dict):
            end = await g.open_session(Era.HANDSHAKE)
            init = {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "0"}}
            await end.send(Message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
            assert "result" in (await end.receive(timeout=30)).body
            (gs,) = [s for s in g.sessions if s.end is end]
            return gs.backends["demo"]

        sampling = await session_with({"sampling": {}})
        assert sampling.client_capabilities == {"sampling": {}}
        assert await session_with({"sampling": {}}) is sampling  # the same set: the same session
        assert await session_with({"sampling": {}, "roots": {}}) is sampling  # past the bound: its largest declared subset
        other = await session_with({"elicitation": {}})
        assert other is not sampling and other.client_capabilities == {}  # no subset open: the session of none
        assert g.sharing.counts[("demo", "capability_fallback")] == 2
        assert len({id(s) for s in g.sharing.shared.values()}) == 2
    finally:
        await asyncio.wait_for(g.aclose(), 30)
